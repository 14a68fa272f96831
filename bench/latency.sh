#!/bin/bash
# SPDX-License-Identifier: MIT
#
# bench/latency.sh [REQUESTS]: a latency-sensitive client (bench/latency:
# small kernel + synchronize, REQUESTS times, default 2000) beside a
# best-effort flood of many-wave kernels, natively, under NVIDIA MPS and
# under openmps, in one run:
#   alone            the latency client by itself
#   flood            beside the flood, both at normal priority
#   flood prio 1     the flood at below-normal priority (CUDA_MPS_CLIENT_PRIORITY=1)
#   both at 50%      each at CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50
#   partition        openmps: the latency client in an SM partition of its
#                    own (sm_partition add, 16 SMs), the flood outside it
# Prints p50 and p99 in µs and p99 against alone, per column. Run after
# `make all bench` (and the kernels' PTX) on a machine with a GPU.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
N=${1:-2000}
# shellcheck source=bench/daemons.sh
. "$ROOT/bench/daemons.sh"
gpu_script latency
L=$ROOT/$BUILD/bench/latency

# one COLUMN LAT_ENV FLOOD_ENV|none: "p50 p99" of the latency client.
one() {
	local col=$1 lenv=$2 fenv=$3 out
	rm -f "$WORK/ready"
	if [ "$fenv" != none ]; then
		# shellcheck disable=SC2086 # the environments are word lists
		$col env LATENCY_READY="$WORK/ready" $fenv "$L" flood 30 >"$WORK/flood.out" 2>&1 &
		for _ in $(seq 1 200); do [ -e "$WORK/ready" ] && break; sleep 0.05; done
	fi
	# shellcheck disable=SC2086
	out=$($col env $lenv "$L" latency "$N" 2>&1)
	if [ "$fenv" != none ]; then
		pkill -TERM -f "$L flood" 2>/dev/null
		wait 2>/dev/null
	fi
	printf '%s %s\n' "$(echo "$out" | sed -n 's/^p50_us=//p')" "$(echo "$out" | sed -n 's/^p99_us=//p')"
}

start_mps || true
start_openmps || exit 1
printf '%-10s %-14s %10s %10s %10s\n' column scenario "p50 µs" "p99 µs" "p99/alone"
for col in native under_mps under_openmps; do
	[ $col = under_mps ] && [ "$MPS_UP" != 1 ] && continue
	alone=""
	for sc in alone flood prio partition half; do
		case $sc in
		alone) lenv="X=1"; fenv=none ;;
		flood) lenv="X=1"; fenv="X=1" ;;
		prio) [ $col = native ] && continue; lenv="X=1"; fenv="CUDA_MPS_CLIENT_PRIORITY=1" ;;
		half) [ $col = native ] && continue
		      lenv="CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50"; fenv="CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50" ;;
		partition) [ $col != under_openmps ] && continue; lenv="CUDA_MPS_SM_PARTITION=lat"; fenv="X=1" ;;
		esac
		[ $sc = partition ] && echo "sm_partition add lat 0 16" | om_ctl >/dev/null
		read -r p50 p99 <<<"$(one $col "$lenv" "$fenv")"
		[ $sc = partition ] && echo "sm_partition rm lat" | om_ctl >/dev/null
		[ $sc = alone ] && alone=$p99
		ratio=$(awk -v a="$p99" -v b="$alone" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b; else print "-" }')
		name=$sc
		case $sc in prio) name="flood prio 1" ;; half) name="both at 50%" ;; esac
		printf '%-10s %-14s %10s %10s %10s\n' "${col#under_}" "$name" "${p50:-?}" "${p99:-?}" "$ratio"
	done
done
