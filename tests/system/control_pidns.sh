#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Another PID namespace (a container): a client there is served and listed
# by its pid as the host sees it; from its own namespace it is listed by
# its pid there, and clients of other namespaces not at all (ps, client
# lists, metrics); every command anyone may run answers
# there (an engine's health check: get_default_active_thread_percentage);
# no command that changes settings or ends others' work does, root or not
# (a container's root is root here without a user namespace, and a CDI
# device gives it the pipe directory with the privileged socket in it).
# Needs root and `unshare --pid --fork`; skips otherwise.
#
#   usage: control_pidns.sh BUILD_DIR

name=control_pidns; . "$(dirname "$0")/c_lib.sh"
if [ "$(id -u)" -ne 0 ] || ! command -v unshare >/dev/null || ! unshare --pid --fork true 2>/dev/null; then
	echo "needs root and unshare --pid --fork"; cleanup_only; exit 77
fi

# in_ns COMMAND: one command line to the daemon from a PID namespace of its own.
in_ns() { printf '%s\n' "$1" | unshare --pid --fork "$ctl"; }

start_daemon
expect "set_default_active_thread_percentage 50" "50.0"

# The health check NVIDIA's engines run answers from another namespace.
got=$(in_ns get_default_active_thread_percentage); st=$?
[ $st -eq 0 ] && [ "$got" = "50.0" ] || fail "health check from another PID namespace: exit $st, '$got'"
got=$(in_ns get_server_list); st=$?
[ $st -eq 0 ] || fail "get_server_list from another PID namespace: exit $st, '$got'"

# Settings and others' work stay out of its reach, as root too.
for c in "set_default_active_thread_percentage 10" "set_default_device_pinned_mem_limit 0 1G" \
	 "vdevice split 0 2" "quit"; do
	got=$(in_ns "$c"); st=$?
	[ $st -eq 1 ] || fail "'$c' from another PID namespace exited $st (reply: $got)"
	printf '%s\n' "$got" | grep -q "^Error: .*another PID namespace" ||
		fail "'$c' from another PID namespace replied '$got'"
done
expect get_default_active_thread_percentage "50.0"
[ -n "$(daemon_pid)" ] && kill -0 "$(daemon_pid)" 2>/dev/null || fail "quit from another PID namespace ended the daemon"

# A client of another namespace is served and listed by its host pid; it
# may not end, nor limit, a client of the daemon's namespace.
client A init alloc:8 "wait:$dir/goA" sync
wait_for "$dir/A.out" "^waiting" || fail "the client of the daemon's namespace was not served"
LD_LIBRARY_PATH="$build/lib" unshare --pid --fork "$build/tests/system/c_client" init alloc:8 "wait:$dir/goB" sync \
	>"$dir/B.out" 2>"$dir/B.err" &
echo $! >"$dir/B.pid"
bg_pids="$bg_pids $!"
wait_for "$dir/B.out" "^waiting" || fail "the client of another PID namespace was not served: $(cat "$dir/B.err")"
bpid=$(pgrep -P "$(cpid B)" c_client)
[ -n "$bpid" ] || fail "no c_client under unshare $(cpid B)"
ui ps | awk -v p="$bpid" '$1 == p { found = 1 } END { exit !found }' ||
	fail "ps does not list the other namespace's client by its host pid $bpid: $(ui ps)"
# From its own namespace (nsenter) a pod sees its client, under the PID
# it has there (1: unshare --fork made it the first), and nothing of
# the other's: ps, the client lists, vdevice list and the metrics alike.
# From a namespace with no client it sees none. The host sees both.
in_b() { printf '%s\n' "$1" | nsenter --pid="/proc/$bpid/ns/pid" "$ctl"; }
srv=$(ui get_server_list | head -n 1)
got=$(in_b ps)
[ "$(printf '%s\n' "$got" | awk 'NR > 1 { print $1 }' | sort -u)" = 1 ] ||
	fail "ps from the client's namespace: '$got'"
[ "$(in_b "get_client_list $srv")" = 1 ] || fail "get_client_list from the client's namespace: '$(in_b "get_client_list $srv")'"
in_b get_device_client_list | grep -q "^Device 0.*: 1$" ||
	fail "get_device_client_list from the client's namespace: '$(in_b get_device_client_list)'"
got=$(in_b get_metrics)
printf '%s\n' "$got" | grep -q '^openmps_client_memory_bytes{server="[0-9]*",pid="1",' ||
	fail "the client's metrics under its own PID: $(printf '%s\n' "$got" | grep '^openmps_client_memory_bytes')"
printf '%s\n' "$got" | grep -q "pid=\"$(cpid A)\"\|pid=\"$bpid\"" && fail "metrics of PIDs the pod does not know: $got"
[ "$(in_ns ps | wc -l)" = 1 ] || fail "ps from a namespace without clients lists some: $(in_ns ps)"
[ -z "$(in_ns "get_client_list $srv")" ] || fail "get_client_list from a namespace without clients"
in_ns get_metrics | grep -q 'pid="' && fail "metrics from a namespace without clients name some"
[ "$(ui ps | awk 'NR > 1 && ($1 == '"$bpid"' || $1 == '"$(cpid A)"') { print $1 }' | sort -u | wc -l)" = 2 ] ||
	fail "the host's ps does not list both clients: $(ui ps)"
got=$(in_b "set_client_priority 1 1"); st=$?
[ $st -eq 1 ] && printf '%s\n' "$got" | grep -q "another PID namespace" ||
	fail "set_client_priority of its own client from a pod: exit $st, '$got'"

for c in "terminate_client $(ui get_server_list | head -n 1) $(cpid A)" "set_client_device_pinned_mem_limit $(cpid A) 0 1M"; do
	got=$(in_ns "$c"); st=$?
	[ $st -eq 1 ] || fail "'$c' from another PID namespace exited $st (reply: $got)"
done
kill -0 "$(cpid A)" 2>/dev/null || fail "a client of the daemon's namespace was ended from another"

touch "$dir/goA" "$dir/goB"
for c in A B; do
	wait "$(cpid "$c")" || fail "client $c failed: $(cat "$dir/$c.out" "$dir/$c.err")"
done
stop_daemon
finish
