#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Trust scopes (docs/CONTROL.md, "Isolation between clients"): a client in
# another network namespace than the daemon's — another pod — gets a server
# of its own although it runs as the same user, and ps -v and get_metrics
# say so; with set_namespace_sharing on, such a client joins the server of
# the daemon's namespace. Bad values of the setting are refused. Needs unprivileged user and network
# namespaces (`unshare -rn`); skips otherwise.
#
#   usage: control_namespaces.sh BUILD_DIR

name=control_namespaces; . "$(dirname "$0")/c_lib.sh"
if ! command -v unshare >/dev/null || ! unshare -rn true 2>/dev/null; then
	echo "needs unshare -rn (user and network namespaces)"; cleanup_only; exit 77
fi

# ns_client NAME STEPS...: c_client in a network namespace of its own.
ns_client() {
	cname=$1; shift
	unshare -rn env LD_LIBRARY_PATH="$build/lib" "$build/tests/system/c_client" "$@" \
		>"$dir/$cname.out" 2>"$dir/$cname.err" &
	echo $! >"$dir/$cname.pid"
	bg_pids="$bg_pids $!"
}
# server_of PID: the SERVER column of the client's row in ps.
server_of() { ui ps | awk -v p="$1" '$1 == p { print $3 }'; }

start_daemon
expect get_namespace_sharing "off"

# A client of the daemon's namespace and one of another: two servers.
client A init alloc:8 "wait:$dir/goA" sync
wait_for "$dir/A.out" "^waiting" || fail "the client of the daemon's namespace was not served"
ns_client B init alloc:8 "wait:$dir/goB" sync
wait_for "$dir/B.out" "^waiting" || fail "the client of another namespace was not served"
servers=$(ui get_server_list)
[ "$(echo "$servers" | wc -l)" -eq 2 ] || fail "two namespaces should have two servers: $servers"
grep -q "fault domain @net:\[" "$CUDA_MPS_LOG_DIRECTORY/control.log" ||
	fail "the log does not name the other namespace's server key"
sa=$(server_of "$(cpid A)"); sb=$(server_of "$(cpid B)")
[ -n "$sa" ] && [ "$sa" != "$sb" ] || fail "A and B share server '$sa': $(ui ps)"
# Each server's key, in ps -v (DOMAIN) and get_metrics (openmps_server_info).
domain_of() { ui "ps -v" | awk -v p="$1" '$1 == p { print $12 }'; }
[ "$(domain_of "$(cpid A)")" = shared ] || fail "A's domain in ps -v: '$(domain_of "$(cpid A)")'"
domain_of "$(cpid B)" | grep -Eq '^shared@net:\[[0-9]+\]$' || fail "B's domain in ps -v: '$(domain_of "$(cpid B)")'"
m=$(ui get_metrics)
echo "$m" | grep -q "^openmps_server_info{server=\"$sa\",uid=\"$(id -u)\",domain=\"shared\"} 1$" ||
	fail "A's server in get_metrics: $(echo "$m" | grep server_info)"
echo "$m" | grep -Eq "^openmps_server_info\{server=\"$sb\",uid=\"$(id -u)\",domain=\"shared@net:\[[0-9]+\]\"\} 1$" ||
	fail "B's server in get_metrics: $(echo "$m" | grep server_info)"

# Sharing on: another namespace's client joins the daemon namespace's server.
expect "set_namespace_sharing on" "on"
expect get_namespace_sharing "on"
ns_client C init alloc:8 "wait:$dir/goC" sync
wait_for "$dir/C.out" "^waiting" || fail "a client of another namespace was not served with sharing on"
[ "$(server_of "$(cpid C)")" = "$sa" ] || fail "with sharing on, C is not on A's server $sa: $(ui ps)"
[ "$(ui get_server_list | wc -l)" -eq 2 ] || fail "sharing on made a third server: $(ui get_server_list)"

expect_err "set_namespace_sharing maybe" "usage: set_namespace_sharing"
expect_err "set_namespace_sharing" "usage: set_namespace_sharing"
expect_err "get_namespace_sharing x" "usage: get_namespace_sharing"
expect "set_namespace_sharing off" "off"

touch "$dir/goA" "$dir/goB" "$dir/goC"
for c in A B C; do
	wait "$(cpid "$c")" || fail "client $c failed: $(cat "$dir/$c.out" "$dir/$c.err")"
done
stop_daemon
finish
