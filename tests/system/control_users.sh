#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Two users under a root daemon: each gets its own server, running as that
# user, and both are served at the same time (NVIDIA's daemon would make the
# second wait). Root-only commands are refused to the other user — and to
# root itself when it does not come through the privileged socket — while
# the read-only commands work for everyone, and a user may terminate its own
# client and shut down its own server. A daemon run by a user takes changes
# from that user and root. Needs root and setpriv (skips otherwise).
#
#   usage: control_users.sh BUILD_DIR

name=control_users; . "$(dirname "$0")/c_lib.sh"
need_other_user
u=$other_uid
start_daemon
uctl() { printf '%s\n' "$1" | as_user "$u" "$ctl"; }
# uexpect_err COMMAND PATTERN: as the other user, an error and exit 1.
uexpect_err() {
	got=$(uctl "$1"); st=$?
	[ $st -eq 1 ] && printf '%s\n' "$got" | grep -Eq "^Error: .*$2" ||
		fail "as uid $u, '$1': exit $st, reply '$got' (expected an error matching '$2')"
}

# Side by side: root's client and the other user's, both served at once.
client R init alloc:8 "wait:$dir/goR" sync
as_client "$u" N init alloc:8 "wait:$dir/goN" sync
wait_for "$dir/R.out" "^waiting" || fail "root's client was not served"
wait_for "$dir/N.out" "^waiting" || fail "uid $u's client was not served while root's was connected"
servers=$(ui get_server_list)
[ "$(echo "$servers" | wc -l)" -eq 2 ] || fail "two users should have two servers: $servers"
rs=""; ns=""
for s in $servers; do
	case "$(proc_uid "$s")" in
	0) rs=$s ;;
	"$u") ns=$s ;;
	esac
done
[ -n "$rs" ] && [ -n "$ns" ] || fail "the servers do not run as their users (uids: $(for s in $servers; do proc_uid "$s"; done))"
expect "get_client_list $rs" "$(cpid R)"
expect "get_client_list $ns" "$(cpid N)"

# The other user: reads, but changes nothing that is not its own.
[ "$(uctl get_server_list)" = "$servers" ] || fail "uid $u cannot list the servers"
uctl ps | grep -q "^$(cpid R) " || fail "uid $u cannot run ps"
[ "$(uctl get_default_active_thread_percentage)" = "100.0" ] || fail "uid $u cannot read the defaults"
uexpect_err quit "quit is a root-only command"
kill -0 "$(daemon_pid)" 2>/dev/null || fail "a user's quit stopped the daemon"
uexpect_err "set_default_active_thread_percentage 10" "root-only"
uexpect_err "set_default_device_pinned_mem_limit 0 1G" "root-only"
uexpect_err "set_default_client_priority 1" "root-only"
uexpect_err "start_server -uid $u" "root-only"
uexpect_err "set_active_thread_percentage $ns 100" "root-only"
uexpect_err "set_device_pinned_mem_limit $ns 0 1G" "root-only"
uexpect_err "shutdown_server $rs" "shutdown_server is a root-only command"
uexpect_err "terminate_client $rs $(cpid R)" "terminate_client is a root-only command"
expect get_default_active_thread_percentage "100.0"
expect "get_default_device_pinned_mem_limit 0" "0M"
[ "$(ui get_server_list)" = "$servers" ] || fail "the refused commands changed the servers"

# Root without the privileged socket (a pipe directory with only the
# ordinary socket in it) is refused the root-only commands too.
mkdir "$dir/alt"
ln -s "$CUDA_MPS_PIPE_DIRECTORY/openmps.sock" "$dir/alt/openmps.sock"
got=$(echo "set_default_client_priority 1" | CUDA_MPS_PIPE_DIRECTORY="$dir/alt" "$ctl"); st=$?
[ $st -eq 1 ] && echo "$got" | grep -q "must come through openmps-privileged.sock" ||
	fail "root on the ordinary socket: exit $st: $got"
got=$(echo get_default_client_priority | CUDA_MPS_PIPE_DIRECTORY="$dir/alt" "$ctl")
[ "$got" = 0 ] || fail "root on the ordinary socket cannot read: $got"

# Its own client and its own server: allowed.
[ "$(uctl "terminate_client $ns $(cpid N)")" = 0 ] || fail "uid $u could not terminate its own client"
touch "$dir/goN"
wait_for "$dir/N.out" "^sync" || fail "N did not finish"
grep -Eq "^sync CUDA_ERROR_MPS_(CLIENT_TERMINATED|CONNECTION_FAILED)$" "$dir/N.out" || fail "N was not terminated"
[ -z "$(uctl "shutdown_server $ns")" ] || fail "uid $u could not shut down its own server"
wait_until 10 eval '[ "$(ui get_server_list)" = "$rs" ]' || fail "uid $u's server did not go: $(ui get_server_list)"

# Root's client never noticed.
touch "$dir/goR"
wait_for "$dir/R.out" "^sync" || fail "R did not finish"
grep -q "^sync CUDA_SUCCESS$" "$dir/R.out" || fail "root's client failed: $(cat "$dir/R.out")"
stop_daemon

# A daemon run by the other user: no privileged socket; that user and root
# may change it, and the user may stop it.
mkdir -p "$dir/upipe" "$dir/ulog"
chown "$u" "$dir/upipe" "$dir/ulog"
export CUDA_MPS_PIPE_DIRECTORY="$dir/upipe" CUDA_MPS_LOG_DIRECTORY="$dir/ulog"
as_user "$u" "$ctl" -d || fail "uid $u could not start a daemon"
[ ! -e "$dir/upipe/openmps-privileged.sock" ] || fail "a user's daemon made a privileged socket"
[ "$(uctl "set_default_active_thread_percentage 20")" = "20.0" ] || fail "the daemon's user could not set a default"
expect "set_default_client_priority 1" ""
expect get_default_active_thread_percentage "20.0"
[ "$(uctl get_default_client_priority)" = 1 ] || fail "root's setting on a user's daemon did not take"
[ -z "$(uctl quit)" ] || fail "the daemon's user could not quit it"
wait_daemon_gone || fail "a user's daemon did not quit"
finish
