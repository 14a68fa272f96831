#!/bin/sh
# SPDX-License-Identifier: MIT
#
# A synchronize whose stream has only uploads from pageable memory
# outstanding is answered in the client (OPENMPS_STAGED_SYNC, default on;
# server/streams.h: fences). The stand-in lands every copy into device or
# registered memory 30 ms late (OPENMPS_STANDIN_SLOW_COPY_MS), so t_stream's
# upload test reads through another stream, a stream made afterwards, a
# kernel and the legacy stream while the uploads are still on their way:
# it passes only if the server orders that work after them. The server
# counts the synchronizes its clients answered: all twelve of the test's
# with the default, none with OPENMPS_STAGED_SYNC=0; a value out of range
# is said and the default kept.
#
#   usage: staged_sync.sh BUILD_DIR

build=$(cd "$1" && pwd)
rc=0
dir=$(mktemp -d /tmp/openmps-staged.XXXXXX)
trap 'rm -rf "$dir"' EXIT
export CUDA_MPS_PIPE_DIRECTORY="$dir/pipe" CUDA_MPS_LOG_DIRECTORY="$dir/log"
export OPENMPS_DRIVER="${OPENMPS_DRIVER:-$build/lib/standin/libcuda.so.1}"
export OPENMPS_TEST_PTX="${OPENMPS_TEST_PTX:-$build/tests/kernels.ptx}"
export OPENMPS_STANDIN_SLOW_COPY_MS=30

ctl() { echo "$1" | "$build/bin/openmps-control"; }

# run SETTING WANT: t_stream with OPENMPS_STAGED_SYNC=SETTING (unset if
# empty); the server must count WANT answered synchronizes (at least WANT
# when WANT ends in +).
run()
{
	"$build/bin/openmps-control" -d || { echo "staged_sync: the daemon did not start"; return 1; }
	if [ -n "$1" ]; then
		OPENMPS_STAGED_SYNC=$1 LD_LIBRARY_PATH=$build/lib "$build/tests/cuda/t_stream" >"$dir/out" 2>&1
	else
		LD_LIBRARY_PATH=$build/lib "$build/tests/cuda/t_stream" >"$dir/out" 2>&1
	fi || { echo "staged_sync: t_stream failed with OPENMPS_STAGED_SYNC=$1"; cat "$dir/out"; ctl quit >/dev/null; return 1; }
	# The server may still be taking the client's last messages.
	i=0
	while ! ctl get_metrics | grep -q '^openmps_server_clients{[^}]*} 0$' && [ $i -lt 50 ]; do
		sleep 0.1; i=$((i + 1))
	done
	n=$(ctl get_metrics | sed -n 's/^openmps_server_synchronizes_answered_total{[^}]*} //p')
	ctl quit >/dev/null
	i=0
	while [ -e "$dir/pipe/openmps-control.pid" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	case $2 in
	*+) [ "${n:-0}" -ge "${2%+}" ] ;;
	*) [ "${n:-x}" = "$2" ] ;;
	esac || { echo "staged_sync: OPENMPS_STAGED_SYNC=$1: $n synchronizes answered by the client, want $2"; return 1; }
}

run "" 12+ || rc=1
run 0 0 || rc=1
run 7 12+ || rc=1
grep -q "ignoring OPENMPS_STAGED_SYNC=7 (want 0..1)" "$dir/out" ||
	{ echo "staged_sync: OPENMPS_STAGED_SYNC=7 passed in silence"; cat "$dir/out"; rc=1; }
exit $rc
