#!/bin/sh
# SPDX-License-Identifier: MIT
#
# The limits a client's environment asks for itself, as under NVIDIA MPS:
#   - CUDA_MPS_PINNED_DEVICE_MEM_LIMIT by ordinal, by UUID and as one size
#     for every device: cuMemGetInfo shows it as the total, and an
#     allocation past it fails while one under it works;
#   - it only lowers the daemon's limit, never raises it;
#   - CUDA_VISIBLE_DEVICES renumbers it with the devices;
#   - CUDA_MPS_CLIENT_PRIORITY=1 and CUDA_MPS_ACTIVE_THREAD_PERCENTAGE are
#     taken (server.log) and only lower the server's;
#   - values that cannot be read are ignored with a warning (the client's
#     and, for OPENMPS_GPU_REPLIES, the server's own);
#   - set_client_device_pinned_mem_limit, set_client_priority and
#     set_client_active_thread_percentage change a connected client's from
#     its next work on; bad PIDs and values get an error.
#
#   usage: control_limits.sh BUILD_DIR

name=control_limits; . "$(dirname "$0")/c_lib.sh"
slog=$CUDA_MPS_LOG_DIRECTORY/server.log
total() { awk '/^meminfo/ { print $4 }' "$dir/$1.out"; }
run() {   # NAME ENV STEPS...: runs a client to its end
	cn=$1; ev=$2; shift 2
	env $ev LD_LIBRARY_PATH="$build/lib" "$build/tests/system/c_client" "$@" >"$dir/$cn.out" 2>"$dir/$cn.err"
}
MiB=1048576
export OPENMPS_STANDIN_DEVICES=2   # device 1 too

start_daemon
run M0 "" init meminfo
full=$(total M0)
[ -n "$full" ] && [ "$full" -gt $((512 * MiB)) ] || fail "the device's total is '$full'"

run A "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=256M" init meminfo alloc:300 alloc:200
[ "$(total A)" = $((256 * MiB)) ] || fail "with 0=256M the total is $(total A)"
grep -q "^alloc 300 CUDA_ERROR_OUT_OF_MEMORY$" "$dir/A.out" || fail "300M past a 256M limit: $(grep "alloc 300" "$dir/A.out")"
grep -q "^alloc 200 CUDA_SUCCESS$" "$dir/A.out" || fail "200M under a 256M limit: $(grep "alloc 200" "$dir/A.out")"

hex=$(LD_LIBRARY_PATH="$build/lib" "$build/tests/system/c_client" list | awk '/^list/ { print $4 }')
uuid=$(echo "$hex" | sed -E 's/^(.{8})(.{4})(.{4})(.{4})(.{12})$/GPU-\1-\2-\3-\4-\5/')
run B "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=$uuid=192M" init meminfo
[ "$(total B)" = $((192 * MiB)) ] || fail "with $uuid=192M the total is $(total B)"
# The daemon knows the devices now: a UUID of none of them is refused.
expect "set_default_device_pinned_mem_limit $uuid 0" ""
expect_err "set_default_device_pinned_mem_limit GPU-00000000-1111-2222-3333-444444444444 1G" "is not a device"

run C "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=128M" init meminfo dev:1 meminfo
[ "$(awk '/^meminfo/ { print $4 }' "$dir/C.out" | sort -u)" = $((128 * MiB)) ] ||
	fail "one size for every device: $(grep meminfo "$dir/C.out" | tr '\n' ' ')"

run D "CUDA_VISIBLE_DEVICES=1 CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=160M" init meminfo
[ "$(total D)" = $((160 * MiB)) ] || fail "with device 1 as the only one, 0=160M gives a total of $(total D)"

expect "set_device_pinned_mem_limit $(ui get_server_list) 0 384M" ""
run E "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=1G" init meminfo
[ "$(total E)" = $((384 * MiB)) ] || fail "a client's 1G raised the daemon's 384M: total $(total E)"
run F "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=100M" init meminfo
[ "$(total F)" = $((100 * MiB)) ] || fail "a client's 100M under the daemon's 384M: total $(total F)"

run G "CUDA_MPS_CLIENT_PRIORITY=1 CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25" init sync
grep -q "^sync CUDA_SUCCESS$" "$dir/G.out" || fail "a below-normal client at 25% failed: $(cat "$dir/G.out")"
g=$(grep -o "client [0-9]*: priority below normal (its own)" "$slog" | tail -1 | awk '{ print $2 }' | tr -d :)
[ -n "$g" ] || fail "CUDA_MPS_CLIENT_PRIORITY=1 was not taken"
grep -q "client $g: active thread percentage 25.0 (its own)" "$slog" || fail "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25 was not taken"

run H "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=zero=12 CUDA_MPS_CLIENT_PRIORITY=7 CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=250 OPENMPS_CLIENT_YIELD_US=soon OPENMPS_CLIENT_NAP_US=-1 OPENMPS_CLIENT_SLICE_US=short" init meminfo sync
[ "$(total H)" = $((384 * MiB)) ] || fail "unreadable values changed the total: $(total H)"
grep -q "^sync CUDA_SUCCESS$" "$dir/H.out" || fail "a client with unreadable values did not synchronize: $(cat "$dir/H.out")"
for v in CUDA_MPS_PINNED_DEVICE_MEM_LIMIT CUDA_MPS_CLIENT_PRIORITY CUDA_MPS_ACTIVE_THREAD_PERCENTAGE OPENMPS_CLIENT_YIELD_US \
	OPENMPS_CLIENT_NAP_US OPENMPS_CLIENT_SLICE_US; do
	grep -Eq "ignoring $v=|$v=.*ignored" "$dir/H.err" || fail "no warning for an unreadable $v: $(cat "$dir/H.err")"
done
# Live changes: a connected client's limit, priority and percentage by PID.
client L init alloc:64 "wait:$dir/goL" alloc:64 meminfo
wait_for "$dir/L.out" "^waiting" || fail "L was not served"
l=$(cpid L)
expect "set_client_device_pinned_mem_limit $l 0 100M" ""
expect "set_client_priority $l 1" ""
expect "set_client_active_thread_percentage $l 40" "40.0"
touch "$dir/goL"
wait_for "$dir/L.out" "^meminfo" || fail "L did not finish"
grep -q "^alloc 64 CUDA_ERROR_OUT_OF_MEMORY$" "$dir/L.out" || fail "64M more past a live 100M limit: $(cat "$dir/L.out")"
[ "$(total L)" = $((100 * MiB)) ] || fail "after a live 100M limit the total is $(total L)"
grep -q "client $l: priority below normal from now on" "$slog" || fail "set_client_priority was not taken"
grep -q "client $l: active thread percentage 40.0 from now on" "$slog" || fail "set_client_active_thread_percentage was not taken"
expect_err "set_client_priority 999999 1" "no client with PID 999999"
expect_err "set_client_priority $l 2" "not a priority"
expect_err "set_client_device_pinned_mem_limit $l 0 12" "not a memory size|not a"
expect_err "set_client_active_thread_percentage $l 0" "percentage"
stop_daemon

# The server's choice of who stores replies: an unreadable value is
# ignored with a warning (the GPU stores them), 0 has the server store them;
# clients are served either way.
for v in maybe 0; do
	OPENMPS_GPU_REPLIES=$v start_daemon
	run R$v "" init sync
	grep -q "^sync CUDA_SUCCESS$" "$dir/R$v.out" || fail "with OPENMPS_GPU_REPLIES=$v: $(cat "$dir/R$v.out")"
	stop_daemon
done
grep -q "ignoring OPENMPS_GPU_REPLIES=maybe (want 0..1)" "$slog" || fail "OPENMPS_GPU_REPLIES=maybe passed in silence"
grep -q "replies stored by the GPU" "$slog" || fail "server.log does not say the GPU stores replies by default"
grep -q "replies stored by the server" "$slog" || fail "OPENMPS_GPU_REPLIES=0 was not taken"
finish
