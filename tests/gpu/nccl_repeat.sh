#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tests/gpu/nccl_repeat.sh [RUNS]: the NCCL job (bench/allreduce.py, one
# process per GPU) RUNS times (default 8) under openmps, to tell a job that
# fails now and then from one that works: odd runs start a fresh daemon
# just after the last one quit, even runs reuse the daemon. Each run has
# ALLREDUCE_DEADLINE seconds (default 90); a failed or hung run prints its
# errors, the hung processes' Python stacks and the servers' logs. One line
# per run, then "N of RUNS ok"; exits 0 when all were. Run after `make`
# on a host with two GPUs or more.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
BUILD=build
NATIVE_LIB=${OPENMPS_NATIVE_LIB:-/usr/local/nvidia/lib64}
PYTHON=${PYTHON:-python3}
RUNS=${1:-8}
export ALLREDUCE_DEADLINE=${ALLREDUCE_DEADLINE:-90} NCCL_DEBUG=${NCCL_DEBUG:-WARN}
WORK=$(mktemp -d /tmp/openmps-nccl.XXXXXX)
OPENMPS_UP=0 MPS_UP=0 MPS_BIN=/nonexistent
om_ctl() { env CUDA_MPS_PIPE_DIRECTORY="$WORK/om-pipe" CUDA_MPS_LOG_DIRECTORY="$WORK/om-log" \
	OPENMPS_DRIVER="$NATIVE_LIB/libcuda.so.1" timeout 20 "$ROOT/$BUILD/bin/openmps-control" "$@"; }
mps_ctl() { :; }
# shellcheck source=bench/daemons.sh
. "$ROOT/bench/daemons.sh"
trap 'stop_openmps >/dev/null 2>&1; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

ok=0
for i in $(seq 1 "$RUNS"); do
	if [ $((i % 2)) = 1 ] || [ "$OPENMPS_UP" != 1 ]; then
		how="fresh daemon"
		stop_openmps >/dev/null 2>&1
		rm -rf "$WORK/om-log"
		start_openmps >/dev/null || { echo "run $i: the daemon did not start"; continue; }
	else
		how="same daemon"
	fi
	t0=$SECONDS
	line=$(env CUDA_MPS_PIPE_DIRECTORY="$WORK/om-pipe" LD_LIBRARY_PATH="$ROOT/$BUILD/lib" OPENMPS_TRACE_ERRORS=1 \
		"$PYTHON" bench/allreduce.py 256 20 2>"$WORK/err" | grep '^allreduce ' | tail -1)
	printf 'run %d (%s, %d s): %s\n' "$i" "$how" $((SECONDS - t0)) "${line:-no answer}"
	case "$line" in
	*" ok") ok=$((ok + 1)) ;;
	*)
		grep -E "openmps|NCCL WARN|Error|error|hung|File \"|Thread 0x" "$WORK/err" | grep -v "^ *$" |
			awk '!seen[$0]++' | head -40 | sed 's/^/      | /'
		echo "      server.log:"; tail -n 15 "$WORK/om-log/server.log" 2>/dev/null | sed 's/^/      | /'
		echo "      control.log:"; grep -v "Accepting\|NEW UI\|UI closed" "$WORK/om-log/control.log" 2>/dev/null |
			tail -n 10 | sed 's/^/      | /'
		;;
	esac
done
echo "$ok of $RUNS ok"
[ "$ok" = "$RUNS" ]
