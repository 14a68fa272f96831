#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Allocations placed at random (OPENMPS_PLACEMENT=random,
# src/server/placement.h) in a 64 GiB range per device: s_place checks
# where two clients' allocations land (large ones granule-aligned, small
# ones carved from granules of their own client's, in chunks of their
# client's own with an unmapped granule between any two clients' memory,
# spread over the range; pinned ones far apart) and that their contents
# survive the other's allocations and frees; s_ipc shares a placed
# allocation between two clients of the server (a handle the server makes)
# and frees it under the importer; on a device short of memory a client's
# chunks get no spare granules, so another client's allocation still
# fits, and a client's spare granules stay within its memory limit. A
# value the server cannot read is said in its log and placement stays off.
# (placed.sh runs every driver-API test placed.)
#
#   usage: placement.sh BUILD_DIR

build=$(cd "$1" && pwd)
here=$(dirname "$0")
rc=0
export OPENMPS_PLACEMENT=random OPENMPS_PLACEMENT_GIB=64
S_PLACE_GIB=64 "$here/with-openmps.sh" "$build" "$build/tests/system/s_place" || rc=1
# The server counts what it placed: a 1 MiB allocation takes a 2 MiB granule;
# the client's shared region is a host mapping placed at random.
S_PLACE_METRICS=$(mktemp)
S_PLACE_GIB=0 "$here/with-openmps.sh" "$build" sh -c '
	LD_LIBRARY_PATH="$1/lib" "$1/tests/system/c_client" init alloc:1 wait:"$2.go" >/dev/null 2>&1 &
	i=0; while [ ! -e "$CUDA_MPS_LOG_DIRECTORY/server.log" ] || ! echo get_metrics | "$1/bin/openmps-control" | grep -q "^openmps_server_placed_bytes{[^}]*} [1-9]"; do
		sleep 0.1; i=$((i + 1)); [ $i -lt 100 ] || break
	done
	echo get_metrics | "$1/bin/openmps-control" >"$2"
	touch "$2.go"; wait' sh "$build" "$S_PLACE_METRICS" || rc=1
# A ThreadSanitizer build leaves host mappings where the kernel puts them.
host_min='[1-9]'
srv=$build/bin/openmps-server
if ldd "$srv" 2>/dev/null | grep -q libtsan || nm "$srv" 2>/dev/null | grep -q __tsan_init; then
	host_min='0'
fi
grep -q '^openmps_server_placed_allocations_total{[^}]*} 1$' "$S_PLACE_METRICS" &&
	grep -q '^openmps_server_placed_bytes{[^}]*} 2097152$' "$S_PLACE_METRICS" &&
	grep -q "^openmps_server_placed_host_mappings_total{[^}]*} $host_min" "$S_PLACE_METRICS" &&
	grep -q '^openmps_server_host_placement_fallbacks_total{[^}]*} 0$' "$S_PLACE_METRICS" ||
	{ echo "placement: metrics: $(grep placed "$S_PLACE_METRICS")"; rc=1; }
rm -f "$S_PLACE_METRICS" "$S_PLACE_METRICS.go"
for t in s_ipc; do
	"$here/with-openmps.sh" "$build" "$build/tests/system/$t" || rc=1
done
# A device short of memory: chunks get no spare granules. Of a 64 MiB
# device, a client holding 16 granules (32 MiB) in chunks gets one granule
# for its 17th 2 MiB allocation, not a chunk of 16 with 15 spare, so a
# second client's 20 MiB still fit.
S_FULL=$(mktemp)
OPENMPS_STANDIN_MEMORY=64M OPENMPS_STANDIN_DEVICES=1 S_PLACE_GIB=0 "$here/with-openmps.sh" "$build" sh -c '
	LD_LIBRARY_PATH="$1/lib" "$1/tests/system/c_client" init $(for i in $(seq 1 17); do echo alloc:2; done) \
		wait:"$2.go" >"$2.a" 2>&1 &
	i=0; while ! grep -q "^waiting" "$2.a" && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	LD_LIBRARY_PATH="$1/lib" "$1/tests/system/c_client" init alloc:20 >"$2.b" 2>&1
	touch "$2.go"; wait' sh "$build" "$S_FULL" || rc=1
[ "$(grep -c '^alloc 2 CUDA_SUCCESS' "$S_FULL.a")" = 17 ] && grep -q '^alloc 20 CUDA_SUCCESS' "$S_FULL.b" ||
	{ echo "placement: a device short of memory: $(grep -h alloc "$S_FULL.a" "$S_FULL.b" | sort | uniq -c | tr '\n' ' ')"; rc=1; }
rm -f "$S_FULL" "$S_FULL.a" "$S_FULL.b" "$S_FULL.go"
# Spare granules stay within a client's memory limit: under 400 MiB, five
# allocations of 64 MiB map 64 + 64 + 128 MiB for the first four (chunks
# as large as what it holds), then 144 MiB, not 256, for the fifth: 400
# MiB in all.
S_SPARE=$(mktemp)
OPENMPS_STANDIN_MEMORY=4G S_PLACE_GIB=0 "$here/with-openmps.sh" "$build" sh -c '
	CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=400M LD_LIBRARY_PATH="$1/lib" "$1/tests/system/c_client" init \
		alloc:64 alloc:64 alloc:64 alloc:64 alloc:64 wait:"$2.go" >"$2.a" 2>&1 &
	i=0; while ! grep -q "^waiting" "$2.a" && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	echo get_metrics | "$1/bin/openmps-control" >"$2"
	touch "$2.go"; wait' sh "$build" "$S_SPARE" || rc=1
[ "$(grep -c '^alloc 64 CUDA_SUCCESS' "$S_SPARE.a")" = 5 ] &&
	grep -q '^openmps_server_placed_bytes{[^}]*} 419430400$' "$S_SPARE" ||
	{ echo "placement: spare within the limit: $(grep -h -e '^alloc' -e placed_bytes "$S_SPARE.a" "$S_SPARE")"; rc=1; }
rm -f "$S_SPARE" "$S_SPARE.a" "$S_SPARE.go"
# The log says where allocations go, or why they cannot.
dir=$(mktemp -d /tmp/openmps-place.XXXXXX)
export CUDA_MPS_PIPE_DIRECTORY=$dir/pipe CUDA_MPS_LOG_DIRECTORY=$dir/log
export OPENMPS_DRIVER=${OPENMPS_DRIVER:-$build/lib/standin/libcuda.so.1}
for v in random sideways; do
	OPENMPS_PLACEMENT=$v "$build/bin/openmps-control" -d || { echo "placement: the daemon did not start"; exit 1; }
	LD_LIBRARY_PATH=$build/lib "$build/tests/system/c_client" init alloc:1 >/dev/null 2>&1
	echo quit | "$build/bin/openmps-control" >/dev/null 2>&1
	i=0
	while [ -e "$dir/pipe/openmps-control.pid" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
done
grep -q "client allocations placed at random in 64 GiB" "$dir/log/server.log" ||
	{ echo "placement: the server did not say it places at random"; rc=1; }
grep -q "ignoring OPENMPS_PLACEMENT=sideways (want driver or random)" "$dir/log/server.log" ||
	{ echo "placement: OPENMPS_PLACEMENT=sideways passed in silence"; rc=1; }
[ $rc -ne 0 ] && tail -n 20 "$dir/log/server.log"
rm -rf "$dir"
exit $rc
