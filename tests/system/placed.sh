#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Every driver-API test (tests/cuda) with its allocations placed at random
# (OPENMPS_PLACEMENT=random in a 64 GiB range per device, as placement.sh)
# runs as it does with the driver's placement. In a sanitizer's build,
# where each takes many times as long, those that allocate, copy, map,
# pool, query and launch, three at a time (each with a daemon of its own) so
# that the slowest, t_memory, overlaps the rest. Apart from placement.sh so
# that each stays well inside the runner's time limit under a sanitizer.
#
#   usage: placed.sh BUILD_DIR

build=$(cd "$1" && pwd)
here=$(dirname "$0")
srv=$build/bin/openmps-server
rc=0
export OPENMPS_PLACEMENT=random OPENMPS_PLACEMENT_GIB=64
tests=$(ls "$build"/tests/cuda/t_*)
par=1
if nm "$srv" 2>/dev/null | grep -q -e __tsan_init -e __asan_init; then
	tests=$(for t in t_memory t_launch t_stream t_graph t_gnodes t_vmm t_pool t_peer t_array t_memops t_replay \
		t_context t_queries t_managed; do echo "$build/tests/cuda/$t"; done)
	par=3
fi
out=$(mktemp -d /tmp/openmps-placed.XXXXXX)
n=0
for t in $tests; do
	[ -x "$t" ] || continue
	{
		"$here/with-openmps.sh" "$build" "$t" >"$out/$(basename "$t")" 2>&1 ||
			echo "placed: $(basename "$t") failed" >>"$out/$(basename "$t")"
	} &
	n=$((n + 1))
	[ $((n % par)) -eq 0 ] && wait
done
wait
cat "$out"/*
grep -q '^placed: .* failed$' "$out"/* && rc=1
rm -rf "$out"
exit $rc
