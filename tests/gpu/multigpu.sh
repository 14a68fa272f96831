#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tests/gpu/multigpu.sh: what a host with several GPUs asks of openmps, on
# the real driver and under openmps side by side (and NVIDIA MPS for the
# bandwidths): the devices a process sees for many CUDA_VISIBLE_DEVICES and
# CUDA_DEVICE_ORDER values (UUIDs and PCI ids must match the driver's
# answer exactly), tests/cuda/t_peer, the peer copy bandwidth between GPU 0
# and GPU 1 (bench/p2p.py), and an NCCL job of one process per GPU
# (bench/allreduce.py). Run after `make` and the test programs
# are built (tests/gpu/run.sh build). Prints one PASS/FAIL line per check
# and a bandwidth table; exits 0 when every check passed.
# Environment: OPENMPS_NATIVE_LIB (default /usr/local/nvidia/lib64),
# MPS_BIN (default /usr/local/nvidia/bin), PYTHON (default python3).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
PYTHON=${PYTHON:-python3}
rc=0
# shellcheck source=bench/daemons.sh
. "$ROOT/bench/daemons.sh"
gpu_script multigpu
check() {   # PASS/FAIL line
	if [ "$1" = ok ]; then printf 'PASS  %s\n' "$2"; else printf 'FAIL  %s\n' "$2"; rc=1; fi
}

start_openmps || exit 1
list=$BUILD/tests/system/c_client
all=$(native "$list" list)
echo "native, no variable: $all"
set -- $all
n=$3
uuid() { native "$list" list | awk -v i="$1" '{print $(4 + 2 * i)}'; }
u0=$(uuid 0); u1=$(uuid 1)
g() { echo "GPU-$1" | sed 's/^GPU-\(........\)\(....\)\(....\)\(....\)\(.*\)$/GPU-\1-\2-\3-\4-\5/'; }
values=("unset" "0" "1" "1,0" "0,1" " 1 , 0" "1,7,0" "0,-1,1" "-1" "" "1,1" "1abc" "$(g "$u1")"
	"$(g "$u1" | cut -c1-12)" "$(g "$u1"),0" "0,$(g "$u1")" "GPU-ffffffff" "MIG-0" "2,1,0" "$(( n - 1 ))")
for v in "${values[@]}"; do
	for order in FASTEST_FIRST PCI_BUS_ID; do
		if [ "$v" = unset ]; then
			a=$(native env -u CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER=$order "$list" list)
			b=$(under_openmps env -u CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER=$order "$list" list)
		else
			a=$(native env CUDA_VISIBLE_DEVICES="$v" CUDA_DEVICE_ORDER=$order "$list" list)
			b=$(under_openmps env CUDA_VISIBLE_DEVICES="$v" CUDA_DEVICE_ORDER=$order "$list" list)
		fi
		[ "$a" = "$b" ] && check ok "CUDA_VISIBLE_DEVICES='$v' $order: $a" ||
			{ check no "CUDA_VISIBLE_DEVICES='$v' $order"; echo "      native:  $a"; echo "      openmps: $b"; }
	done
done

for mode in native under_openmps; do
	out=$($mode "$BUILD/tests/cuda/t_peer" "$BUILD/tests/kernels.ptx" 2>&1); st=$?
	if [ $st -eq 0 ]; then check ok "$mode: t_peer"; elif [ $st -eq 77 ]; then echo "SKIP  $mode: t_peer"; else
		check no "$mode: t_peer"; echo "$out" | tail -5 | sed 's/^/      | /'; fi
done

start_mps || true
printf '%-10s %-6s %-6s %-12s %-12s\n' column can01 can10 "GB/s 1->0" "GB/s 0->1"
for mode in native under_mps under_openmps; do
	[ $mode = under_mps ] && [ "$MPS_UP" != 1 ] && continue
	line=$($mode "$PYTHON" bench/p2p.py 256 20 2>&1 | grep '^p2p ' | tail -1)
	set -- $line
	printf '%-10s %-6s %-6s %-12s %-12s\n' "${mode#under_}" "${2:-?}" "${3:-?}" "${4:-?}" "${5:-?}"
done

# The NCCL job: an all-reduce and DDP steps checked, then bus bandwidth.
printf '%-10s %-8s %s\n' column "GB/s" result
for mode in native under_mps under_openmps; do
	[ $mode = under_mps ] && [ "$MPS_UP" != 1 ] && continue
	line=$($mode env OPENMPS_TRACE_ERRORS=1 timeout 300 "$PYTHON" bench/allreduce.py 256 20 2>"$WORK/allreduce-$mode.err" |
		grep '^allreduce ' | tail -1)
	set -- $line
	printf '%-10s %-8s %s\n' "${mode#under_}" "${3:-?}" "${4:-${line:-no answer}}"
	case "$line" in *" ok") ;; *) rc=1; grep -E "openmps|NCCL WARN|Error|error" "$WORK/allreduce-$mode.err" |
		sort | uniq -c | sort -rn | head -12 | sed 's/^/      | /' ;; esac
done
exit $rc
