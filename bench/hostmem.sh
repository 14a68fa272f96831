#!/bin/bash
# SPDX-License-Identifier: MIT
#
# bench/hostmem.sh [MIB]: managed and registered host memory (bench/hostmem,
# MIB MiB, default 256) natively, under NVIDIA MPS, under openmps and under
# openmps with managed memory on the device (OPENMPS_MANAGED=device), in
# one run: a table of each step with both openmps columns against native.
# Run after `make all bench` on a machine with a GPU.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
MIB=${1:-256}
# shellcheck source=bench/daemons.sh
. "$ROOT/bench/daemons.sh"
gpu_script hostmem

start_mps >/dev/null || true
start_openmps >/dev/null || exit 1
native "$BUILD/bench/hostmem" "$MIB" >"$WORK/native" 2>&1
[ "$MPS_UP" = 1 ] && under_mps "$BUILD/bench/hostmem" "$MIB" >"$WORK/mps" 2>&1
under_openmps "$BUILD/bench/hostmem" "$MIB" >"$WORK/openmps" 2>&1
under_openmps env OPENMPS_MANAGED=device "$BUILD/bench/hostmem" "$MIB" >"$WORK/device" 2>&1
for c in native mps openmps device; do grep -h "error" "$WORK/$c" 2>/dev/null | sed "s/^/$c: /"; done
val() { sed -n "s/^$2=//p" "$WORK/$1" 2>/dev/null; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "" && b > 0) printf "%.2f", a / b; else print "-" }'; }
printf '%-22s %12s %12s %12s %10s %12s %10s\n' "$MIB MiB" native "NVIDIA MPS" openmps "om/native" \
	"om-device" "dev/native"
for k in managed_cpu_write_ms managed_gpu_first_ms managed_gpu_again_ms managed_cpu_read_ms managed_prefetch_ms \
	reg_register_ms reg_h2d_gbs reg_d2h_gbs reg_zerocopy_gbs reg_unregister_ms; do
	n=$(val native $k); m=$(val mps $k); o=$(val openmps $k); v=$(val device $k)
	printf '%-22s %12s %12s %12s %10s %12s %10s\n' "$k" "${n:--}" "${m:--}" "${o:--}" \
		"$(ratio "$o" "$n")" "${v:--}" "$(ratio "$v" "$n")"
done
