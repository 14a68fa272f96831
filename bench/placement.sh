#!/bin/bash
# SPDX-License-Identifier: MIT
#
# bench/placement.sh [COUNT]: what random placement (OPENMPS_PLACEMENT=random,
# src/server/placement.h) costs and buys, on a GPU: bench/alloccost with
# COUNT allocations (default 200) of 4 KiB, 2 MiB and 64 MiB, natively,
# under openmps with the driver placing, and under openmps placing at
# random. One table: µs per allocation and per free, device KiB used per
# allocation, the span of the addresses and the address bits that differ
# between them. Run after `make all bench` and `make build/tests/kernels.ptx`.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
COUNT=${1:-200}
# shellcheck source=bench/daemons.sh
. "$ROOT/bench/daemons.sh"
gpu_script placement
BIN=$ROOT/$BUILD/bench/alloccost
[ -x "$BIN" ] || { echo "missing $BIN: make bench"; exit 1; }

row() {   # LABEL RUNNER KIB
	local out
	out=$("$2" timeout -k 5 120 "$BIN" "$COUNT" "$3" 2>&1)
	val() { printf '%s\n' "$out" | sed -n "s/^$1=//p"; }
	if [ -z "$(val alloc_us)" ]; then
		printf '| %s | %s | failed: %s |\n' "$1" "$3" "$(printf '%s' "$out" | tail -1)"
		return
	fi
	printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$1" "$3" "$(val alloc_us)" "$(val free_us)" \
		"$(val device_kib_per_alloc)" "$(val span_mib)" "$(val address_bits_differing)"
}

echo "| column | KiB | alloc µs | free µs | device KiB/alloc | span MiB | differing bits |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for k in 4 2048 65536; do row native native "$k"; done
if start_openmps >/dev/null; then
	for k in 4 2048 65536; do row "openmps, driver places" under_openmps "$k"; done
	stop_openmps >/dev/null
fi
export OPENMPS_PLACEMENT=random
if start_openmps >/dev/null; then
	for k in 4 2048 65536; do row "openmps, random" under_openmps "$k"; done
	grep -h "placed at random\|placement\|GPUDirect" "$WORK"/om-log/server.log 2>/dev/null | head -4
	stop_openmps >/dev/null
fi
