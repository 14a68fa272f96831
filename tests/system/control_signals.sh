#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Signals and the daemon's life:
#   - SIGHUP (logrotate's signal) reopens control.log and the servers'
#     server.log at their paths, and the daemon and servers live on;
#   - start_server answers once the server serves, and with an "Error:" line
#     and a non-zero exit when the server cannot start;
#   - quit with an idle server returns promptly;
#   - SIGTERM, SIGQUIT and a crash (SIGSEGV) each leave no socket and no pid
#     file behind, so the next daemon starts cleanly.
#
#   usage: control_signals.sh BUILD_DIR

name=control_signals; . "$(dirname "$0")/c_lib.sh"
log=$CUDA_MPS_LOG_DIRECTORY/control.log
slog=$CUDA_MPS_LOG_DIRECTORY/server.log
pipe=$CUDA_MPS_PIPE_DIRECTORY
now() { date +%s.%N; }
elapsed() { awk -v s="$1" -v e="$(now)" 'BEGIN { printf "%.1f", e - s }'; }
secs_between() { awk -v x="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(x >= lo && x <= hi) }'; }
left_behind() { ls "$pipe" | grep -E '\.sock$|\.pid$'; }

start_daemon
expect "start_server -uid $(id -u)" ""
srv=$(ui get_server_list)
[ -n "$srv" ] || fail "start_server left no server"

# SIGHUP: the logs move, new ones are written, both processes live on.
mv "$log" "$log.1"
mv "$slog" "$slog.1"
kill -HUP "$(daemon_pid)"
wait_for "$log" "logs reopened" || fail "SIGHUP did not reopen control.log"
wait_for "$slog" "log reopened" || fail "the server did not reopen server.log"
expect get_server_list "$srv"
kill -0 "$srv" 2>/dev/null || fail "the server died on the daemon's SIGHUP"
client A init alloc:4 sync
wait_for "$dir/A.out" "^sync" || fail "a client after SIGHUP was not served"
grep -q "^sync CUDA_SUCCESS$" "$dir/A.out" || fail "a client after SIGHUP failed: $(cat "$dir/A.out")"
grep -q "NEW CLIENT" "$log.1" && fail "the daemon wrote to the moved control.log after SIGHUP"
grep -q "NEW CLIENT" "$log" || fail "the new control.log has no record of the client"
grep -q "connected" "$slog" || fail "the new server.log has no record of the client"

# quit with an idle server: prompt.
t0=$(now)
expect quit ""
wait_daemon_gone 50 || fail "quit did not end the daemon"
t=$(elapsed "$t0")
secs_between "$t" 0 1.5 || fail "quit with an idle server took ${t}s"
[ -z "$(left_behind)" ] || fail "quit left $(left_behind)"

# start_server whose server cannot start: an error and a non-zero exit.
OPENMPS_DRIVER=/nonexistent/libcuda.so.1 start_daemon
got=$(ui "start_server -uid $(id -u)"); st=$?
[ $st -ne 0 ] || fail "start_server with a server that cannot start exited 0 (reply: $got)"
printf '%s\n' "$got" | grep -q "^Error: the server did not start: cannot load the CUDA driver OPENMPS_DRIVER names" ||
	fail "start_server with a server that cannot start replied '$got'"
stop_daemon

# Signals that end the daemon, and a crash: nothing left behind.
for sig in TERM QUIT SEGV; do
	start_daemon
	p=$(daemon_pid)
	kill -"$sig" "$p"
	wait_until 5 sh -c "! kill -0 $p 2>/dev/null" || fail "SIG$sig did not end the daemon"
	[ -z "$(left_behind)" ] || fail "SIG$sig left $(left_behind)"
done
start_daemon
expect get_server_list ""
stop_daemon
finish
