#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Naps through waits for the GPU (src/client/napwait.c). With
# OPENMPS_CLIENT_SPIN_US=0 the client is never advised to spin, so a wait
# whose reply the GPU stores sleeps on a timer for most of as long as the
# same kind of wait lately took. t_stream's repeated waits (20 ms each,
# then far shorter, so that naps end after the store) and the other tests
# that wait in every way must pass so, and the client's call stats must
# show naps taken. The waits watch for up to 100 ms instead of sleeping
# after 800 µs, so that each is learnt whole (one that ends asleep is
# learnt as long as its watch) and a server slowed by a loaded machine
# still leaves a nap to take. Bad values of the two settings are said and
# their defaults kept. With OPENMPS_CLIENT_TRACE_WAITS_US the waits are
# logged with their phases, and only then (a value it cannot read is
# said, and nothing is logged).
#
#   usage: naps.sh BUILD_DIR

build=$1
rc=0
dir=$(mktemp -d /tmp/openmps-naps.XXXXXX)
trap 'rm -rf "$dir"' EXIT
for t in t_stream t_event t_memops t_threads; do
	OPENMPS_CLIENT_SPIN_US=0 OPENMPS_CLIENT_GPU_SPIN_US=100000 OPENMPS_CLIENT_GPU_BUSY_SPIN_US=100000 \
		OPENMPS_CALL_STATS="$dir/$t" \
		"$(dirname "$0")/with-openmps.sh" "$build" "$build/tests/cuda/$t" || rc=1
done
# OPENMPS_CLIENT_TRACE_WAITS_US: t_stream's 20 ms waits are logged with
# their phases (handed to the GPU, then a nap); without it, nothing is.
OPENMPS_CLIENT_SPIN_US=0 OPENMPS_CLIENT_GPU_SPIN_US=100000 OPENMPS_CLIENT_GPU_BUSY_SPIN_US=100000 \
	OPENMPS_CLIENT_TRACE_WAITS_US=5000 \
	"$(dirname "$0")/with-openmps.sh" "$build" "$build/tests/cuda/t_stream" >"$dir/traced" 2>&1 || rc=1
grep -Eq 'openmps: wait [0-9]+ us, op [0-9]+, [0-9]+ messages? since .*: began [A-Z]+, spin advised 0 us; handed to the GPU [0-9]+; nap [0-9]+-[0-9]+' \
	"$dir/traced" || { echo "naps: no traced wait with a nap"; grep "openmps: wait" "$dir/traced" | head -5; rc=1; }
"$(dirname "$0")/with-openmps.sh" "$build" "$build/tests/cuda/t_stream" >"$dir/untraced" 2>&1 || rc=1
! grep -q "openmps: wait" "$dir/untraced" || { echo "naps: waits traced without OPENMPS_CLIENT_TRACE_WAITS_US"; rc=1; }
# Values out of range are said and the defaults kept.
OPENMPS_CLIENT_GPU_NAP=2 OPENMPS_CLIENT_BUSY_YIELD_US=-1 OPENMPS_CLIENT_TRACE_WAITS_US=soon \
	"$(dirname "$0")/with-openmps.sh" "$build" "$build/tests/cuda/t_event" >"$dir/bad" 2>&1 || {
	echo "naps: t_event failed with bad nap settings"; cat "$dir/bad"; rc=1
}
! grep -q "openmps: wait" "$dir/bad" || { echo "naps: waits traced with OPENMPS_CLIENT_TRACE_WAITS_US=soon"; rc=1; }
for want in "ignoring OPENMPS_CLIENT_GPU_NAP=2 (want 0..1)" "ignoring OPENMPS_CLIENT_BUSY_YIELD_US=-1 (want 0..1000000)" \
	"ignoring OPENMPS_CLIENT_TRACE_WAITS_US=soon (want 0..1000000000)"; do
	grep -qF "$want" "$dir/bad" || { echo "naps: no \"$want\""; rc=1; }
done
naps=$(cat "$dir"/t_stream.* 2>/dev/null | sed -n 's/^# naps: \([0-9]*\),.*/\1/p' | sort -n | tail -n 1)
if [ "${naps:-0}" -ge 1 ]; then
	echo "naps: t_stream napped $naps times: $(grep -h '^# naps' "$dir"/t_stream.* | tr '\n' ' ')"
else
	echo "naps: t_stream's repeated waits took no nap"
	cat "$dir"/t_stream.* 2>/dev/null
	rc=1
fi
exit $rc
