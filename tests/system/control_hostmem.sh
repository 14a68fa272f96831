#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Pinned host memory limits. The server allocates and pins a client's
# cuMemAllocHost memory itself, so without limits one client could pin the
# host's memory away from the others and the server. With
# OPENMPS_PINNED_HOST_LIMIT=64M and OPENMPS_PINNED_HOST_TOTAL=96M:
#   - a client pins 48M, then 32M more is refused (CUDA_ERROR_OUT_OF_MEMORY),
#     16M more is not;
#   - a second client is refused what would pass the total, gets what fits;
#   - freeing gives the memory back to everyone, and a client that exits
#     without freeing gives it back too;
#   - server.log says why a request was refused, and the limits at start.
# Without the variables (or with one that is not a size, which is logged and
# ignored) the defaults — half, three quarters of the host's memory — are
# logged and a small allocation works.
#
#   usage: control_hostmem.sh BUILD_DIR

name=control_hostmem; . "$(dirname "$0")/c_lib.sh"
log=$CUDA_MPS_LOG_DIRECTORY/server.log

OPENMPS_PINNED_HOST_LIMIT=64M OPENMPS_PINNED_HOST_TOTAL=96M start_daemon
client A init halloc:48 halloc:32 halloc:16 "wait:$dir/goA" hfree halloc:64 hfree
wait_for "$dir/A.out" "^waiting" || fail "client A did not get to its wait"
[ "$(sed -n 2,4p "$dir/A.out" | tr '\n' ' ')" = "halloc 48 CUDA_SUCCESS halloc 32 CUDA_ERROR_OUT_OF_MEMORY halloc 16 CUDA_SUCCESS " ] ||
	fail "the 64M per-client limit: $(cat "$dir/A.out")"
grep -q "Pinned host memory limit: 64 MiB per client, 96 MiB for all clients" "$log" ||
	fail "server.log does not give the limits"
grep -q "client $(cpid A): refused 33554432 bytes of pinned host memory" "$log" ||
	fail "server.log does not say why A's 32M was refused"

# A holds 64M of the 96M: B gets 32M, not 48M.
client B init halloc:48 halloc:32 "wait:$dir/goB" hfree
wait_for "$dir/B.out" "^waiting" || fail "client B did not get to its wait"
[ "$(sed -n 2,3p "$dir/B.out" | tr '\n' ' ')" = "halloc 48 CUDA_ERROR_OUT_OF_MEMORY halloc 32 CUDA_SUCCESS " ] ||
	fail "the 96M total with A holding 64M: $(cat "$dir/B.out")"

# A frees and takes its whole 64M again; B leaves.
touch "$dir/goA"
wait_until 10 eval '[ "$(grep -c "^hfree" "$dir/A.out")" -ge 2 ]' || fail "client A did not finish"
[ "$(sed -n 7,9p "$dir/A.out" | tr '\n' ' ')" = "hfree CUDA_SUCCESS halloc 64 CUDA_SUCCESS hfree CUDA_SUCCESS " ] ||
	fail "A could not take its 64M again after freeing: $(cat "$dir/A.out")"
touch "$dir/goB"
wait_for "$dir/B.out" "^hfree " || fail "client B did not finish"

# A client that exits holding 64M gives it back: the next client's 64M
# fits in the 96M total only if it did.
client C init halloc:64 sleep:100
wait_for "$dir/C.out" "^halloc" || fail "client C did not allocate"
grep -q "^halloc 64 CUDA_SUCCESS$" "$dir/C.out" || fail "client C: $(cat "$dir/C.out")"
wait_for "$log" "Client \{PID: $(cpid C), .*\} disconnected" || fail "C's exit was not seen"
client D init halloc:64
wait_for "$dir/D.out" "^halloc 64 " || fail "client D did not finish"
grep -q "^halloc 64 CUDA_SUCCESS$" "$dir/D.out" ||
	fail "the memory of a client that exited without freeing is not back: $(cat "$dir/D.out")"
stop_daemon

# The defaults, and what a value that is no size gets.
OPENMPS_PINNED_HOST_LIMIT=lots start_daemon
client E init halloc:8 hfree
wait_for "$dir/E.out" "^hfree " || fail "client E did not finish"
[ "$(sed -n 2,3p "$dir/E.out" | tr '\n' ' ')" = "halloc 8 CUDA_SUCCESS hfree CUDA_SUCCESS " ] ||
	fail "a small pinned allocation under the default limits: $(cat "$dir/E.out")"
mem=$(awk '/^MemTotal:/ { print int($2 / 1024) }' /proc/meminfo)
grep -Eq "Pinned host memory limit: [1-9][0-9]* MiB per client, [1-9][0-9]* MiB for all clients" "$log" ||
	fail "server.log does not give the default limits"
grep -q "ignoring OPENMPS_PINNED_HOST_LIMIT=lots (want a size such as 512M or 8G, or 0 for no limit)" "$log" ||
	fail "server.log does not say that OPENMPS_PINNED_HOST_LIMIT=lots was ignored"
per=$(sed -n 's/.*Pinned host memory limit: \([0-9]*\) MiB per client.*/\1/p' "$log" | tail -n 1)
[ "$per" -le $((mem / 2 + 1)) ] || fail "the default per-client limit $per MiB is over half of $mem MiB"
stop_daemon
finish
