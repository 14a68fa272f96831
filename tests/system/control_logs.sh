#!/bin/sh
# SPDX-License-Identifier: MIT
#
# control.log and server.log: every line in NVIDIA's format
#   [YYYY-MM-DD HH:MM:SS.mmm Control|Server PID] message
# with the daemon's and the server's own PIDs, and the events NVIDIA's
# daemon logs: the start and the socket, each connection, each UI and its
# commands with their replies, new clients (queued or not), new servers,
# clients connecting and leaving, server exits with their status.
#
#   usage: control_logs.sh BUILD_DIR

name=control_logs; . "$(dirname "$0")/c_lib.sh"
clog=$CUDA_MPS_LOG_DIRECTORY/control.log
slog=$CUDA_MPS_LOG_DIRECTORY/server.log
pipe=$CUDA_MPS_PIPE_DIRECTORY
me=$(id -u)

start_daemon
dpid=$(daemon_pid)
expect "set_default_active_thread_percentage 25" "25.0"
client A init sync
wait_for "$dir/A.out" "^sync" || fail "A did not finish"
srv=$(ui get_server_list)
client B init sync
wait_for "$dir/B.out" "^sync" || fail "B did not finish"
wait_until 5 eval 'test -z "$(ui "get_client_list $srv")"' || fail "A and B are still listed"
stop_daemon
a=$(cpid A); b=$(cpid B)

# The format, line by line.
fmt='^\[[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3} (Control|Server) +[0-9]+\] '
bad=$(grep -Evc "$fmt" "$clog")
[ "$bad" -eq 0 ] || fail "$bad lines of control.log are not in the format: $(grep -Ev "$fmt" "$clog" | head -3)"
bad=$(grep -Evc "$fmt" "$slog")
[ "$bad" -eq 0 ] || fail "$bad lines of server.log are not in the format: $(grep -Ev "$fmt" "$slog" | head -3)"
[ "$(grep -Evc "^\[[^]]* Control +$dpid\] " "$clog")" -eq 0 ] || fail "control.log has lines of another process"
[ "$(grep -Evc "^\[[^]]* Server +$srv\] " "$slog")" -eq 0 ] || fail "server.log has lines of another process"

# The events.
has() { grep -q -- "\] $2\$" "$1" || fail "$(basename "$1") lacks: $2"; }
has "$clog" "Starting control daemon using socket $pipe/openmps.sock"
has "$clog" "To connect CUDA applications to this daemon, set env CUDA_MPS_PIPE_DIRECTORY=$pipe"
has "$clog" "Accepting connection..."
has "$clog" "NEW UI"
has "$clog" "Cmd:set_default_active_thread_percentage 25"
has "$clog" "25.0"
has "$clog" "Cmd:get_server_list"
has "$clog" "$srv"
has "$clog" "UI closed"
has "$clog" "NEW CLIENT $a from user $me: Server is not ready, push client to pending list"
has "$clog" "Starting new server $srv for user $me"
has "$clog" "NEW CLIENT $b from user $me: Server already exists"
has "$clog" "Cmd:quit"
has "$clog" "Server $srv exited with status 0"
has "$clog" "Exit"
# Each command is followed by its reply.
grep -A1 -- "Cmd:set_default_active_thread_percentage 25\$" "$clog" | tail -n 1 | grep -q "\] 25.0\$" ||
	fail "the reply is not logged right after its command"
has "$slog" "Creating server context on device 0 (openmps stand-in device 0)"
has "$slog" "Active thread percentage for new clients: 25.0"
has "$slog" "Client {PID: $a, Context ID: 0} connected"
has "$slog" "Client {PID: $b, Context ID: 1} connected"
grep -q "\] Client {PID: $a, Context ID: 0} disconnected" "$slog" || fail "server.log lacks A leaving"
has "$slog" "Destroy server context on device 0 (openmps stand-in device 0)"
has "$slog" "Server exited with status 0"
finish
