#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Every control command without clients: its reply in NVIDIA's form, its exit
# status, and an "Error: ..." line with exit status 1 for each kind of bad
# input (wrong argument count, not a number, out of range, no such server or
# device) — after which the daemon still answers. Settings given to a
# running server reach it (server.log says so). Two stand-in devices.
#
#   usage: control_commands.sh BUILD_DIR

name=control_commands; . "$(dirname "$0")/c_lib.sh"
export OPENMPS_STANDIN_DEVICES=2
start_daemon

# --- Before any server.
expect get_server_list ""
expect get_default_active_thread_percentage "100.0"
expect get_default_client_priority "0"
# A device that does not exist, named before the daemon knows the devices:
# it learns them first, then refuses.
expect_err "set_default_device_pinned_mem_limit 7 1G" "not a device"
expect "get_default_device_pinned_mem_limit 0" "0M"

# device_query starts a server only to learn the devices, then stops it.
out=$(ui device_query); st=$?
[ $st -eq 0 ] || fail "device_query exited $st: $out"
[ "$(echo "$out" | head -n 1 | tr -s ' ')" = "ID UUID MEMORY NAME" ] || fail "device_query header: $out"
[ "$(echo "$out" | wc -l)" -eq 3 ] || fail "device_query should list 2 devices: $out"
echo "$out" | grep -Eq "^0 +GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12} +1024 MiB +openmps stand-in device 0$" ||
	fail "device_query row 0: $out"
echo "$out" | grep -Eq "^1 +GPU-.* +openmps stand-in device 1$" || fail "device_query row 1: $out"
uuid0=$(echo "$out" | awk '$1 == "0" { print $2 }')
uuid1=$(echo "$out" | awk '$1 == "1" { print $2 }')
[ "$uuid0" != "$uuid1" ] || fail "two devices with one UUID"
wait_until 5 eval 'test -z "$(ui get_server_list)"' || fail "the server started for device_query did not stop"
grep -q "was started to learn the devices: stopping it" "$CUDA_MPS_LOG_DIRECTORY/control.log" ||
	fail "control.log does not say why the device server stopped"

# --- Default settings: setters and getters.
expect "set_default_active_thread_percentage 25" "25.0"
expect get_default_active_thread_percentage "25.0"
expect "set_default_active_thread_percentage 33.33" "33.3"
expect "set_default_active_thread_percentage 0.5" "0.5"
expect "set_default_active_thread_percentage .5" "0.5"
expect "set_default_active_thread_percentage 7." "7.0"
expect "set_default_active_thread_percentage 100" "100.0"
expect "set_default_active_thread_percentage 50" "50.0"
for bad in 0 101 -5 abc nan inf 1e400 25% "" 0.0001 0x10 1e1 +5 . 5.5.5; do
	expect_err "set_default_active_thread_percentage $bad" "percentage|usage"
done
expect_err "set_default_active_thread_percentage 25 30" "usage: set_default_active_thread_percentage"
expect_err "get_default_active_thread_percentage 5" "usage: get_default_active_thread_percentage"
expect get_default_active_thread_percentage "50.0"

expect "set_default_device_pinned_mem_limit 0 2G" ""
expect "get_default_device_pinned_mem_limit 0" "2G"
expect "set_default_device_pinned_mem_limit 0 1536M" ""
expect "get_default_device_pinned_mem_limit 0" "1536M"
expect "set_default_device_pinned_mem_limit 0 3072M" ""
expect "get_default_device_pinned_mem_limit 0" "3G"
expect "get_default_device_pinned_mem_limit 1" "0M"
# A device by UUID names the same limit as its ordinal.
expect "set_default_device_pinned_mem_limit $uuid1 768M" ""
expect "get_default_device_pinned_mem_limit 1" "768M"
expect get_default_fault_domain "shared"
expect "set_default_fault_domain own" "own"
expect get_default_fault_domain "own"
expect "set_default_fault_domain shared" "shared"
expect get_default_fault_domain "shared"
expect "get_default_device_pinned_mem_limit $(echo "$uuid1" | tr a-f A-F)" "768M"
expect "set_default_device_pinned_mem_limit 1 512m" ""
expect "get_default_device_pinned_mem_limit $uuid1" "512M"
for bad in "0 2" "0 2T" "0 -1G" "0 G" "0 1.5G" "0 99999999999G" "x 1G" "2 1G" "16 1G" "GPU-123 1G" "-1 1G"; do
	expect_err "set_default_device_pinned_mem_limit $bad" "not a (device|memory size)"
done
expect_err "set_default_device_pinned_mem_limit 0" "usage: set_default_device_pinned_mem_limit"
expect_err "get_default_device_pinned_mem_limit" "usage: get_default_device_pinned_mem_limit"
expect_err "get_default_device_pinned_mem_limit 7" "not a device"
expect "get_default_device_pinned_mem_limit 0" "3G"

expect "set_default_client_priority 1" ""
expect get_default_client_priority "1"
for bad in 2 -1 x 01 ""; do
	expect_err "set_default_client_priority $bad" "priority|usage"
done
expect get_default_client_priority "1"

# Several commands in one session: setters that print nothing do not end
# it, replies come in order, one error makes the exit status 1 and the rest
# still run.
out=$(printf 'set_default_client_priority 0\nget_default_client_priority\n\n   \nset_default_device_pinned_mem_limit 1 1G\nget_default_device_pinned_mem_limit 1\nnot_a_command\nget_default_active_thread_percentage\n' | "$ctl"); st=$?
[ $st -eq 1 ] || fail "a session with one bad command exited $st"
[ "$out" = "$(printf "0\n1G\nError: unknown command 'not_a_command'\n50.0")" ] || fail "session replies: $out"

# --- A server started by hand.
expect "start_server -uid $(id -u)" ""
srv=$(ui get_server_list)
[ "$(echo "$srv" | wc -w)" -eq 1 ] || fail "start_server: servers: $srv"
st=$(ui "get_server_status $srv")
[ "$st" = INITIALIZING ] || [ "$st" = ACTIVE ] || fail "a new server's status: $st"
wait_until 10 eval '[ "$(ui "get_server_status $srv")" = ACTIVE ]' || fail "the server never became ACTIVE"
expect_err "start_server -uid $(id -u)" "already serves user"
expect_err "start_server -uid abc" "not a user id"
expect_err "start_server -uid 4294967295" "not a user id"
expect_err "start_server -uid" "usage: start_server"
expect_err "start_server 0" "usage: start_server"
expect_err "start_server -user 0" "usage: start_server"

expect_err "get_server_status" "usage: get_server_status"
expect_err "get_server_status 1" "no server with PID 1"
expect_err "get_server_status abc" "not a server PID"
expect_err "get_server_status -5" "not a server PID"
expect_err "get_server_status 99999999999" "not a server PID"
expect "get_client_list $srv" ""
expect_err "get_client_list" "usage: get_client_list"
expect_err "get_client_list $srv $srv" "usage: get_client_list"

# Its settings: the defaults when it started, then its own.
expect "get_active_thread_percentage $srv" "50.0"
expect "get_device_pinned_mem_limit $srv 0" "3G"
expect "get_device_pinned_mem_limit $srv 1" "1G"
expect "set_active_thread_percentage $srv 40" "40.0"
expect "get_active_thread_percentage $srv" "40.0"
expect "get_default_active_thread_percentage" "50.0"
expect "set_device_pinned_mem_limit $srv 1 256M" ""
expect "get_device_pinned_mem_limit $srv 1" "256M"
expect "get_device_pinned_mem_limit $srv $uuid1" "256M"
expect "get_default_device_pinned_mem_limit 1" "1G"
expect_err "set_active_thread_percentage $srv 0" "not a percentage"
expect_err "set_active_thread_percentage 1 50" "no server with PID 1"
expect_err "set_active_thread_percentage $srv" "usage: set_active_thread_percentage"
expect_err "get_active_thread_percentage" "usage: get_active_thread_percentage"
expect_err "set_device_pinned_mem_limit $srv 1 5X" "not a memory size"
expect_err "set_device_pinned_mem_limit $srv 9 1G" "not a device"
expect_err "set_device_pinned_mem_limit $srv 1" "usage: set_device_pinned_mem_limit"
expect_err "get_device_pinned_mem_limit $srv" "usage: get_device_pinned_mem_limit"
log=$CUDA_MPS_LOG_DIRECTORY/server.log
wait_for "$log" "Server +$srv\] Active thread percentage for new clients: 40.0" ||
	fail "the server did not get its active thread percentage"
wait_for "$log" "Server +$srv\] Device 1 pinned memory limit for new clients: 256 MiB" ||
	fail "the server did not get its device 1 memory limit"
grep -q "Server \+$srv\] Device 0 pinned memory limit for new clients: 3072 MiB" "$log" ||
	fail "the server did not get the default device 0 memory limit at start"
grep -q "Server \+$srv\] Client priority for new clients: 0" "$log" ||
	fail "the server did not get the default client priority at start"

# Listings with no clients.
out=$(ui ps); st=$?
[ $st -eq 0 ] && [ "$(echo "$out" | tr -s ' ')" = "PID ID SERVER DEVICE NAMESPACE COMMAND" ] || fail "ps: $out"
out=$(ui "ps -p $srv")
[ "$(echo "$out" | tr -s ' ')" = "PID ID SERVER DEVICE NAMESPACE COMMAND" ] || fail "ps -p: $out"
expect_err "ps -p 1" "no server with PID 1"
expect_err "ps -x" "usage: ps"
expect_err "ps -p" "usage: ps"
expect get_device_client_list "$(printf 'Device 0 (%s):\nDevice 1 (%s):' "$uuid0" "$uuid1")"
expect "get_device_client_list $srv" "$(printf 'Device 0 (%s):\nDevice 1 (%s):' "$uuid0" "$uuid1")"
expect_err "get_device_client_list 1" "no server with PID 1"
expect_err "get_device_client_list $srv 2" "usage: get_device_client_list"
expect_err "terminate_client $srv 99999" "server $srv has no client 99999"
expect_err "terminate_client 1 2" "no server with PID 1"
expect_err "terminate_client $srv x" "not a client PID"
expect_err "terminate_client $srv" "usage: terminate_client"
expect_err "device_query 0" "usage: device_query"

# Unknown and malformed commands.
expect_err "no_such_command" "unknown command 'no_such_command'"
expect_err "GET_SERVER_LIST" "unknown command"
expect_err "quit now" "usage: quit"
expect_err "quit -t" "usage: quit"
expect_err "quit -t x" "not a timeout"
expect_err "quit -t -1" "not a timeout"
expect_err "a b c d e f g h i j" "too many arguments"

# shutdown_server: the server goes (it has no clients to wait for).
expect_err "shutdown_server" "usage: shutdown_server"
expect_err "shutdown_server $srv -x" "usage: shutdown_server"
expect_err "shutdown_server 1" "no server with PID 1"
expect "shutdown_server $srv" ""
wait_until 10 eval 'test -z "$(ui get_server_list)"' || fail "shutdown_server: the server is still listed"
grep -q "Server $srv exited with status 0" "$CUDA_MPS_LOG_DIRECTORY/control.log" ||
	fail "control.log does not record the server's exit status"

# help: every command with its arguments, one form a line; help CMD: its
# usage, which is what a wrong call of it says; every name help lists is a
# command help knows.
h=$(ui help); st=$?
[ $st -eq 0 ] || fail "help exited $st"
for want in "help [<command>]" "ps [-v] [-p <server PID>]" "set_namespace_sharing <on|off>" \
	"sm_partition rm <name>" "vdevice split <device> <count>" "quit [-t <timeout in seconds>]"; do
	printf '%s\n' "$h" | grep -qxF "$want" || fail "help does not list '$want'"
done
[ "$(printf '%s\n' "$h" | wc -l)" -ge 36 ] || fail "help lists $(printf '%s\n' "$h" | wc -l) lines"
for c in $(printf '%s\n' "$h" | awk '{ print $1 }' | sort -u); do
	ui "help $c" | head -1 | grep -q "^$c\( \|$\)" || fail "help $c: $(ui "help $c")"
done
expect "help set_default_fault_domain" "set_default_fault_domain <shared|own|name>"
expect_err "set_default_fault_domain" "usage: set_default_fault_domain <shared\|own\|name>"
expect_err "help nope" "unknown command 'nope'"
expect_err "help ps quit" "usage: help \[<command>\]"

# The daemon is still fine after all of that.
expect get_default_active_thread_percentage "50.0"
stop_daemon

# A server that cannot start (no devices): device_query and clients get the
# reason, the server's failure and exit status are logged, the daemon goes on.
OPENMPS_STANDIN_DEVICES=0 start_daemon
expect_err device_query "cannot list the devices: cannot initialise the CUDA devices"
client F init
wait_for "$dir/F.out" "^init" || fail "a client of a server that cannot start got no answer"
grep -Eq "^init CUDA_ERROR_(MPS_SERVER_NOT_READY|MPS_CONNECTION_FAILED)$" "$dir/F.out" ||
	fail "a client of a server that cannot start: $(cat "$dir/F.out")"
wait_for "$CUDA_MPS_LOG_DIRECTORY/control.log" "Server [0-9]+ failed to start: cannot initialise the CUDA devices" ||
	fail "control.log does not record the failed start"
wait_for "$CUDA_MPS_LOG_DIRECTORY/control.log" "Server [0-9]+ exited with status 1" ||
	fail "control.log does not record the failed server's exit status"
expect get_default_client_priority "0"
stop_daemon
finish
