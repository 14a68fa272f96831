#!/bin/sh
# SPDX-License-Identifier: MIT
#
# The active thread percentage as SMs (server/smshare.h), on the stand-in's
# 16 SMs, split in groups of 2:
#   - a client at 100% sees 16 SMs and its kernels use all 16;
#   - CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25 / 50 / 1: it sees 4 / 8 / 2 SMs
#     and its kernels, launched or in a graph, run on exactly that many (a
#     graph runs on the SMs of the context it was instantiated in);
#   - two clients at 50% at once run on disjoint SMs;
#   - set_default_active_thread_percentage (a new server) and
#     set_active_thread_percentage (a running one) give new clients their
#     share; a client's own value only lowers it;
#   - set_client_active_thread_percentage moves a connected client: the SM
#     count it reads and the SMs of its next kernels on a stream it already
#     had, in both directions;
#   - the share survives a client that exits while others keep theirs, and
#     get_metrics shows each client's SMs.
#
#   usage: control_sms.sh BUILD_DIR

name=control_sms; . "$(dirname "$0")/c_lib.sh"
run() {   # NAME ENV STEPS...: runs a client to its end
	cn=$1; ev=$2; shift 2
	env $ev LD_LIBRARY_PATH="$build/lib" "$build/tests/system/c_client" "$@" >"$dir/$cn.out" 2>"$dir/$cn.err"
}
# field NAME STEP N [WHICH]: field N of the WHICH-th (default first) line of STEP.
field() { awk -v s="$2" -v n="$3" -v w="${4:-1}" '$1 == s && ++k == w { print $n }' "$dir/$1.out"; }
check_share() {   # NAME SMS: the client saw SMS SMs and its kernels used that many
	[ "$(field "$1" sms 3)" = "$2" ] || fail "$1 sees $(field "$1" sms 3) SMs, expected $2: $(cat "$dir/$1.out")"
	[ "$(field "$1" smids 3)" = "$2" ] || fail "$1's kernels ran on $(field "$1" smids 3) SMs, expected $2: $(grep smids "$dir/$1.out")"
	[ "$(field "$1" smids 2)" = CUDA_SUCCESS ] || fail "$1's kernels: $(grep smids "$dir/$1.out")"
	[ "$(field "$1" gsmids 3)" = "$2" ] || fail "$1's graph ran on $(field "$1" gsmids 3) SMs, expected $2: $(grep gsmids "$dir/$1.out")"
}

start_daemon
run A "" init sms smids:64 gsmids:64
check_share A 16
run B "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25" init sms smids:64 gsmids:64
check_share B 4
run C "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50" init sms smids:64 gsmids:64
check_share C 8
run D "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=1" init sms smids:64 gsmids:64
check_share D 2
run E "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=99" init sms smids:64 gsmids:64
check_share E 16

# Two clients at 50% at once: disjoint SMs (X moved there while connected).
client X "init" "smids:64" "wait:$dir/goX" "smids:64" "wait:$dir/goX2"
wait_for "$dir/X.out" "^waiting" || fail "X was not served"
x=$(cpid X)
expect "set_client_active_thread_percentage $x 50" "50.0"
# The server takes it on its own time: from the log on, it is in force.
slog=$CUDA_MPS_LOG_DIRECTORY/server.log
wait_for "$slog" "client $x: active thread percentage 50.0 from now on" || fail "the server did not take X's 50%"
touch "$dir/goX"
wait_for "$dir/X.out" "^waiting .*goX2" || fail "X did not go on"
run Y "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50" init sms smids:64 gsmids:64
x_ids=$(field X smids 6 2); y_ids=$(field Y smids 6)
[ "$(field X smids 3 2)" = 8 ] || fail "X after the change to 50% ran on $(field X smids 3 2) SMs"
printf '%s\n' "$x_ids" | tr ',' '\n' | sort > "$dir/x.ids"
printf '%s\n' "$y_ids" | tr ',' '\n' | sort > "$dir/y.ids"
both=$(comm -12 "$dir/x.ids" "$dir/y.ids" | tr '\n' ' ')
[ -z "$both" ] || fail "two clients at 50% share SMs $both (X: $x_ids, Y: $y_ids)"
touch "$dir/goX2"

# A connected client moved both ways: its stream follows at the next kernel.
client L init sms smids:64 "wait:$dir/goL1" sms smids:64 "wait:$dir/goL2" sms smids:64
wait_for "$dir/L.out" "^waiting" || fail "L was not served"
l=$(cpid L)
expect "set_client_active_thread_percentage $l 25" "25.0"
wait_for "$slog" "client $l: active thread percentage 25.0 from now on" || fail "the server did not take L's 25%"
touch "$dir/goL1"
wait_for "$dir/L.out" "^waiting .*goL2" || fail "L did not go on"
expect "set_client_active_thread_percentage $l 100" "100.0"
wait_for "$slog" "client $l: active thread percentage 100.0 from now on" || fail "the server did not take L's 100%"
touch "$dir/goL2"
wait_for "$dir/L.out" "^waited" && wait_for "$dir/L.out" "^smids.*" 5
sleep 0.3
for k in 1 2 3; do
	want=16; [ $k = 2 ] && want=4
	[ "$(field L sms 3 $k)" = $want ] || fail "L's SM count, step $k: $(field L sms 3 $k), expected $want"
	[ "$(field L smids 3 $k)" = $want ] || fail "L's kernels, step $k: on $(field L smids 3 $k) SMs, expected $want"
done
grep -q "client $l: 4 of 16 SMs on device 0" "$CUDA_MPS_LOG_DIRECTORY/server.log" ||
	fail "server.log does not say L moved to 4 SMs"
stop_daemon

# The daemon's default for new servers, then a running server's setting;
# a client's own value only lowers it.
start_daemon
expect "set_default_active_thread_percentage 25" "25.0"
run F "" init sms smids:64 gsmids:64
check_share F 4
run G "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50" init sms smids:64 gsmids:64
check_share G 4
run H "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=12.5" init sms smids:64 gsmids:64
check_share H 2
s=$(ui get_server_list)
expect "set_active_thread_percentage $s 75" "75.0"
run I "" init sms smids:64 gsmids:64
check_share I 12
client M init smids:64 "wait:$dir/goM"
wait_for "$dir/M.out" "^waiting" || fail "M was not served"
metrics=$(ui get_metrics)
m=$(cpid M)
printf '%s\n' "$metrics" | grep -Eq "^openmps_client_sms\{.*pid=\"$m\".*device=\"0\".*\} 12$" ||
	fail "get_metrics has no SM count of 12 for M: $(printf '%s\n' "$metrics" | grep sms)"
touch "$dir/goM"
stop_daemon
finish
