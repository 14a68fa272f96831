#!/bin/sh
# SPDX-License-Identifier: MIT
#
# -multiuser-server: one server, running as root, serves the clients of every
# user at once (its own check of each client's uid lets them in because it
# runs as root), and places their allocations at random unless the daemon
# is told otherwise. A daemon that is not root refuses the option. Needs
# root and setpriv (skips otherwise).
#
#   usage: control_multiuser.sh BUILD_DIR

name=control_multiuser; . "$(dirname "$0")/c_lib.sh"
need_other_user
u=$other_uid

# Not root: refused with a clear error, no daemon.
mkdir -p "$dir/user-pipe" "$dir/user-log"
chown "$u" "$dir/user-pipe" "$dir/user-log"
err=$(as_user "$u" env CUDA_MPS_PIPE_DIRECTORY="$dir/user-pipe" CUDA_MPS_LOG_DIRECTORY="$dir/user-log" \
	"$ctl" -d -multiuser-server 2>&1); st=$?
[ $st -eq 1 ] && echo "$err" | grep -q "multiuser-server needs the daemon to run as root" ||
	fail "a user's -multiuser-server daemon: exit $st: $err"
[ ! -e "$dir/user-pipe/openmps-control.pid" ] || fail "a user's -multiuser-server daemon started"

start_daemon -multiuser-server
grep -q "Multi-user mode" "$CUDA_MPS_LOG_DIRECTORY/control.log" || fail "control.log does not say multi-user mode"
client R init alloc:4 "wait:$dir/go" sync
as_client "$u" N init alloc:4 "wait:$dir/go" sync
wait_for "$dir/R.out" "^waiting" || fail "root's client was not served"
wait_for "$dir/N.out" "^waiting" || fail "uid $u's client was not served"
srv=$(ui get_server_list)
[ "$(echo "$srv" | wc -w)" -eq 1 ] || fail "multi-user mode should have one server: $srv"
[ "$(proc_uid "$srv")" = 0 ] || fail "the shared server runs as uid $(proc_uid "$srv")"
expect "get_client_list $srv" "$(printf '%s\n%s' "$(cpid R)" "$(cpid N)" | sort -n)"
# The shared server is root's to manage, not the users'.
got=$(printf 'shutdown_server %s\n' "$srv" | as_user "$u" "$ctl")
echo "$got" | grep -q "^Error: shutdown_server is a root-only command" || fail "a user shut down the shared server: $got"
# Users who need not trust each other share it: their memory is placed at
# random (docs/CONTROL.md), both clients' allocations.
grep -q "client allocations placed at random" "$CUDA_MPS_LOG_DIRECTORY/server.log" ||
	fail "the shared server does not place allocations at random"
ui get_metrics | grep -q '^openmps_server_placed_allocations_total{[^}]*} 2$' ||
	fail "the shared server did not place both clients' allocations: $(ui get_metrics | grep placed_alloc)"
touch "$dir/go"
wait_for "$dir/R.out" "^sync" && wait_for "$dir/N.out" "^sync" || fail "the clients did not finish"
grep -q "^sync CUDA_SUCCESS$" "$dir/R.out" && grep -q "^sync CUDA_SUCCESS$" "$dir/N.out" ||
	fail "a client of the shared server failed: R: $(cat "$dir/R.out") N: $(cat "$dir/N.out")"
stop_daemon

# Told where (OPENMPS_PLACEMENT=driver when the daemon starts): the driver's.
rm -f "$dir/go" "$dir/R.out"
env OPENMPS_PLACEMENT=driver "$ctl" -d -multiuser-server || { fail "the second daemon did not start"; finish; }
client R init alloc:4 "wait:$dir/go" sync
wait_for "$dir/R.out" "^waiting" || fail "a client of the second daemon was not served"
ui get_metrics | grep -q '^openmps_server_placed_allocations_total{[^}]*} 0$' ||
	fail "OPENMPS_PLACEMENT=driver: allocations placed: $(ui get_metrics | grep placed_alloc)"
touch "$dir/go"
wait_for "$dir/R.out" "^sync" || fail "the second daemon's client did not finish"
stop_daemon
finish
