#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Exclusive mode (--exclusive-users, or OPENMPS_EXCLUSIVE_USERS=1), NVIDIA's
# behaviour: one user's server at a time. While root's client is connected,
# another user's client waits — queued, not refused — and root's server is
# asked to exit when its clients have left; a later client of root waits
# too, behind the other user. When root's client leaves, the other user's
# server starts and serves its client; when that one leaves, root gets a new
# server. Needs root and setpriv (skips otherwise).
#
#   usage: control_exclusive.sh BUILD_DIR

name=control_exclusive; . "$(dirname "$0")/c_lib.sh"
need_other_user
u=$other_uid
log=$CUDA_MPS_LOG_DIRECTORY/control.log

OPENMPS_EXCLUSIVE_USERS=1 start_daemon
grep -q "Exclusive mode: one user's server at a time" "$log" || fail "OPENMPS_EXCLUSIVE_USERS=1 did not select exclusive mode"
stop_daemon
start_daemon --exclusive-users

client R init "wait:$dir/goR" sync
wait_for "$dir/R.out" "^waiting" || fail "root's client was not served"
rs=$(ui get_server_list)
[ "$(proc_uid "$rs")" = 0 ] || fail "root's server runs as uid $(proc_uid "$rs")"

as_client "$u" N init alloc:4 "wait:$dir/goN" sync
wait_for "$log" "NEW CLIENT $(cpid N) from user $u: Server $rs of user 0 is running, push client to waiting list" ||
	fail "the other user's client was not put on the waiting list"
expect "get_server_status $rs" "STOPPING"
client R2 init sync
wait_for "$log" "NEW CLIENT $(cpid R2) from user 0: .*push client to waiting list" ||
	fail "root's second client did not wait behind the other user"
sleep 0.5
[ ! -s "$dir/N.out" ] || fail "the other user's client ran while root's server was running: $(cat "$dir/N.out")"
[ ! -s "$dir/R2.out" ] || fail "root's second client jumped the queue: $(cat "$dir/R2.out")"
kill -0 "$(cpid N)" 2>/dev/null || fail "the waiting client gave up (refused?): $(cat "$dir/N.err")"
expect get_server_list "$rs"

# Root's client leaves: its server goes, the other user's starts.
touch "$dir/goR"
wait_for "$dir/N.out" "^waiting" 20 || fail "the other user's client was not served after root's left"
grep -q "^alloc 4 CUDA_SUCCESS$" "$dir/N.out" || fail "the other user's client failed: $(cat "$dir/N.out")"
grep -q "^sync CUDA_SUCCESS$" "$dir/R.out" || fail "root's first client failed: $(cat "$dir/R.out")"
ns=$(ui get_server_list)
[ "$(echo "$ns" | wc -w)" -eq 1 ] && [ "$ns" != "$rs" ] || fail "servers while the other user runs: $ns"
[ "$(proc_uid "$ns")" = "$u" ] || fail "the other user's server runs as uid $(proc_uid "$ns")"
grep -q "Server $rs exited with status 0" "$log" || fail "root's server did not exit"
[ ! -s "$dir/R2.out" ] || fail "root's second client ran beside the other user's: $(cat "$dir/R2.out")"

# The other user leaves: root's second client gets a new server.
touch "$dir/goN"
wait_for "$dir/R2.out" "^sync" 20 || fail "root's second client was never served"
grep -q "^init CUDA_SUCCESS$" "$dir/R2.out" && grep -q "^sync CUDA_SUCCESS$" "$dir/R2.out" ||
	fail "root's second client failed: $(cat "$dir/R2.out")"
grep -q "Server $ns exited with status 0" "$log" || fail "the other user's server did not exit"
stop_daemon
finish
