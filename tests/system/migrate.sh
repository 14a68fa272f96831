#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Managed memory on the device (OPENMPS_MANAGED=device, src/client/migrate.c):
# the managed-memory tests run with it, t_migrate checking what the mode
# says of itself (no concurrent managed access; the copy out of the
# kernel's reach after a kernel until a prefetch to the CPU); and a value
# the client cannot read is said, and managed memory stays in host memory.
# t_memory in that mode, the slowest by far under a sanitizer, is
# migrate_memory.sh, so that each stays well inside the runner's limit.
#
#   usage: migrate.sh BUILD_DIR

build=$(cd "$1" && pwd)
here=$(dirname "$0")
rc=0
export OPENMPS_MANAGED=device
T_MIGRATE_ON_DEVICE=1 "$here/with-openmps.sh" "$build" "$build/tests/cuda/t_migrate" || rc=1
for t in t_managed t_graph t_gnodes; do
	"$here/with-openmps.sh" "$build" "$build/tests/cuda/$t" || { echo "migrate: $t failed"; rc=1; }
done
out=$(mktemp)
OPENMPS_MANAGED=sideways T_MIGRATE_ON_DEVICE=0 "$here/with-openmps.sh" "$build" "$build/tests/cuda/t_migrate" >"$out" 2>&1 || rc=1
grep -q "ignoring OPENMPS_MANAGED=sideways (want host or device)" "$out" ||
	{ echo "migrate: OPENMPS_MANAGED=sideways passed in silence"; rc=1; }
rm -f "$out"
exit $rc
