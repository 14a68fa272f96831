#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Stopping with clients connected:
#   - shutdown_server PID waits for the server's clients (meanwhile the
#     user's next client gets a new server at once); -f ends them now;
#   - quit -t N waits up to N seconds for the clients to leave, refusing new
#     ones, and ends early when they do; when they do not, it forces at N;
#   - quit ends everything now.
# A client whose server was forced away sees its next call fail.
#
#   usage: control_quit.sh BUILD_DIR

name=control_quit; . "$(dirname "$0")/c_lib.sh"
log=$CUDA_MPS_LOG_DIRECTORY/control.log
now() { date +%s.%N; }
elapsed() { awk -v s="$1" -v e="$(now)" 'BEGIN { printf "%.1f", e - s }'; }
secs_between() { awk -v x="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(x >= lo && x <= hi) }'; }

start_daemon

# shutdown_server without -f: waits for its client.
client A init "wait:$dir/goA" sync
wait_for "$dir/A.out" "^waiting" || fail "A was not served"
s1=$(ui get_server_list)
expect "shutdown_server $s1" ""
expect "get_server_status $s1" "STOPPING"
sleep 0.3
kill -0 "$s1" 2>/dev/null || fail "shutdown_server did not wait for the server's client"
client B init "wait:$dir/goB" sync
wait_for "$dir/B.out" "^waiting" || fail "a new client was not served while its user's server was stopping"
s2=$(ui get_server_list | grep -v "^$s1$")
[ -n "$s2" ] || fail "the new client did not get a new server"
touch "$dir/goA"
wait_for "$log" "Server $s1 exited with status 0" || fail "the stopping server did not exit after its client left"
grep -q "^sync CUDA_SUCCESS$" "$dir/A.out" || fail "A did not finish its work on the stopping server: $(cat "$dir/A.out")"

# shutdown_server -f: ends its client now.
expect "shutdown_server $s2 -f" ""
wait_for "$log" "Server $s2 exited with status 0" || fail "shutdown_server -f did not stop the server"
touch "$dir/goB"
wait_for "$dir/B.out" "^sync" || fail "B did not finish"
grep -Eq "^sync CUDA_ERROR_MPS_" "$dir/B.out" || fail "B's call after shutdown_server -f did not fail: $(cat "$dir/B.out")"

# quit -t: the client leaves after a second, the daemon ends right after.
client C init "wait:$dir/goC" sync
wait_for "$dir/C.out" "^waiting" || fail "C was not served"
t0=$(now)
expect "quit -t 8" ""
sleep 0.3
kill -0 "$(daemon_pid)" 2>/dev/null || fail "quit -t did not wait for the client"
client late init
wait_for "$dir/late.out" "^init" || fail "a client arriving during quit -t got no answer"
grep -q "^init CUDA_SUCCESS$" "$dir/late.out" && fail "a client was taken while the daemon was quitting"
[ "$(grep -c "refused by the server: the control daemon is shutting down" "$dir/late.err")" = 1 ] ||
	fail "the refusal was not said once: $(cat "$dir/late.err")"
sleep 0.7
touch "$dir/goC"
wait_daemon_gone 60 || fail "the daemon did not end after its last client left"
t=$(elapsed "$t0")
secs_between "$t" 0.9 6 || fail "quit -t 8 with a client leaving after 1 s took ${t}s"
grep -q "^sync CUDA_SUCCESS$" "$dir/C.out" || fail "C's work during quit -t failed: $(cat "$dir/C.out")"

# quit -t: the client stays; forced at the time limit.
start_daemon
client D init "wait:$dir/goD" sync
wait_for "$dir/D.out" "^waiting" || fail "D was not served"
t0=$(now)
expect "quit -t 2" ""
wait_daemon_gone 100 || fail "quit -t 2 never forced the server"
t=$(elapsed "$t0")
secs_between "$t" 1.8 6 || fail "quit -t 2 with a client that stays took ${t}s"
grep -q "quit: the time is up" "$log" || fail "control.log does not say quit forced the servers"
touch "$dir/goD"
wait_for "$dir/D.out" "^sync" || fail "D did not finish"
grep -Eq "^sync CUDA_ERROR_MPS_" "$dir/D.out" || fail "D's call after the forced quit did not fail: $(cat "$dir/D.out")"

# quit: at once.
start_daemon
client E init "wait:$dir/goE" sync
wait_for "$dir/E.out" "^waiting" || fail "E was not served"
t0=$(now)
expect quit ""
wait_daemon_gone 50 || fail "quit did not end the daemon"
t=$(elapsed "$t0")
secs_between "$t" 0 1.5 || fail "quit with a client took ${t}s"
touch "$dir/goE"
wait_for "$dir/E.out" "^sync" || fail "E did not finish"
grep -Eq "^sync CUDA_ERROR_MPS_" "$dir/E.out" || fail "E's call after quit did not fail: $(cat "$dir/E.out")"
finish
