#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tests/gpu/gputime.sh: a client's GPU time in get_metrics
# (openmps_client_gpu_seconds_total, server/gputime.h) against what its
# kernels took, and what sampling costs a launch:
#   - a client runs 20 full-GPU spin grids, timing each itself (launch to
#     synchronize); its GPU time, sampled one launch in N (N = 1, 16), is
#     compared with the sum;
#   - bench/launch (sustained enqueue, launch + synchronize) with sampling
#     off (one in 10^6), the default one in 16, and every launch.
# One PASS/FAIL line for the accuracy, a table for the cost. Run after
# `make all check-build bench` on a machine with a GPU.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
rc=0
# shellcheck source=bench/daemons.sh
. "$ROOT/bench/daemons.sh"
gpu_script gputime
C=$ROOT/$BUILD/tests/system/c_client

N=$(native "$C" init sms | awk '/^sms/ { print $3 }')
B=$((N * 8))
steps=""
for _ in $(seq 1 20); do steps="$steps spin:$B:1024:2000000"; done
for rate in 1 16; do
	OPENMPS_GPU_TIME_SAMPLE=$rate start_openmps >/dev/null || exit 1
	# shellcheck disable=SC2086 # one step per word
	under_openmps "$C" init $steps "wait:$WORK/go" >"$WORK/t.out" 2>&1 &
	for _ in $(seq 1 300); do grep -q '^waiting' "$WORK/t.out" && break; sleep 0.1; done
	own=$(awk '/^spin/ { s += $3 } END { printf "%.3f", s }' "$WORK/t.out")
	got=$(om_ctl <<<"get_metrics" | awk '/^openmps_client_gpu_seconds_total/ { printf "%.3f", $NF * 1000 }')
	touch "$WORK/go"
	wait
	printf 'one launch in %-2s timed: the client took %s ms (launch to synchronize), get_metrics says %s ms\n' \
		"$rate" "$own" "$got"
	if awk -v a="$got" -v b="$own" -v r="$rate" 'BEGIN { lo = r == 1 ? 0.9 : 0.6; exit !(a >= b * lo && a <= b * 1.1) }'; then
		echo "PASS  GPU time, one launch in $rate"
	else
		echo "FAIL  GPU time, one launch in $rate ($got ms for $own ms)"; rc=1
	fi
	rm -f "$WORK/go"
	stop_openmps >/dev/null
done

printf '%-22s %14s %14s\n' "sampling" "sustained µs" "round trip µs"
for rate in 1000000 16 1; do
	OPENMPS_GPU_TIME_SAMPLE=$rate start_openmps >/dev/null || exit 1
	out=$(under_openmps "$ROOT/$BUILD/bench/launch" --quick 2>&1)
	printf '%-22s %14s %14s\n' "one launch in $rate" "$(echo "$out" | sed -n 's/^sustained_us=//p')" \
		"$(echo "$out" | sed -n 's/^roundtrip_us=//p')"
	stop_openmps >/dev/null
done
exit $rc
