#!/bin/sh
# SPDX-License-Identifier: MIT
#
# t_memory with managed memory on the device (OPENMPS_MANAGED=device): its
# managed allocations, copies and memsets in that mode. Apart from
# migrate.sh, which runs the other managed-memory tests so, because it takes
# most of a minute under ThreadSanitizer.
#
#   usage: migrate_memory.sh BUILD_DIR
build=$(cd "$1" && pwd)
OPENMPS_MANAGED=device exec "$(dirname "$0")/with-openmps.sh" "$build" "$build/tests/cuda/t_memory"
