# SPDX-License-Identifier: MIT
#
# Shared by the control_*.sh tests (sourced, not run): private pipe and log
# directories, starting and stopping the daemon, sending commands and
# checking replies, CUDA clients in the background (c_client), running as
# another user (setpriv), and cleaning up everything the test started.
#
#   name=TEST_NAME; . "$(dirname "$0")/c_lib.sh"     (the script's $1 is BUILD_DIR)
#
# OPENMPS_TEST_KEEP=1 keeps the directories (logs, client outputs) for a look.
# A check that fails prints "TEST_NAME: FAIL: ..." and makes the test fail
# at finish; the test goes on so one run reports every broken check.

build=$(cd "$1" && pwd) || exit 1
rc=0
dir=$(mktemp -d /tmp/openmps-ctl.XXXXXX)
chmod 755 "$dir"
export CUDA_MPS_PIPE_DIRECTORY="$dir/pipe" CUDA_MPS_LOG_DIRECTORY="$dir/log"
export OPENMPS_DRIVER="$build/lib/standin/libcuda.so.1" OPENMPS_TEST_PTX="$build/tests/kernels.ptx"
unset OPENMPS_EXCLUSIVE_USERS CUDA_MPS_ACTIVE_THREAD_PERCENTAGE CUDA_MPS_PINNED_DEVICE_MEM_LIMIT
ctl="$build/bin/openmps-control"
bg_pids=""
other_uid=$(id -u nobody 2>/dev/null || echo 65534)

fail() { echo "$name: FAIL: $*"; rc=1; }
note() { echo "$name: $*"; }

# ui COMMAND: one command line to the daemon; prints the reply.
ui() { printf '%s\n' "$1" | "$ctl"; }

# expect COMMAND EXPECTED: the reply is exactly EXPECTED and the exit status 0.
expect() {
	got=$(ui "$1"); st=$?
	[ $st -eq 0 ] || fail "'$1' exited $st (reply: $got)"
	[ "$got" = "$2" ] || fail "'$1' replied '$got', expected '$2'"
}

# expect_err COMMAND PATTERN: one "Error: " line matching PATTERN (grep -E), exit status 1.
expect_err() {
	got=$(ui "$1"); st=$?
	[ $st -eq 1 ] || fail "'$1' exited $st, expected 1 (reply: $got)"
	[ "$(printf '%s\n' "$got" | wc -l)" -eq 1 ] || fail "'$1' replied more than one line: $got"
	printf '%s\n' "$got" | grep -Eq "^Error: .*$2" || fail "'$1' replied '$got', expected an error matching '$2'"
}

daemon_pid() { cat "$CUDA_MPS_PIPE_DIRECTORY/openmps-control.pid" 2>/dev/null; }

start_daemon() { "$ctl" -d "$@" || { fail "the daemon did not start ($*)"; finish; }; }

wait_daemon_gone() {
	i=0
	while [ -e "$CUDA_MPS_PIPE_DIRECTORY/openmps-control.pid" ] && [ $i -lt "${1:-100}" ]; do
		sleep 0.1; i=$((i + 1))
	done
	[ ! -e "$CUDA_MPS_PIPE_DIRECTORY/openmps-control.pid" ]
}

stop_daemon() { ui quit >/dev/null; wait_daemon_gone || fail "the daemon did not exit after quit"; }

# wait_for FILE PATTERN [SECONDS]: until a line of FILE matches (grep -E).
wait_for() {
	i=0; lim=$(( ${3:-10} * 20 ))
	while ! grep -Eq "$2" "$1" 2>/dev/null; do
		[ $i -ge $lim ] && return 1
		sleep 0.05; i=$((i + 1))
	done
}

# wait_until SECONDS COMMAND...: until the command succeeds.
wait_until() {
	lim=$(( $1 * 20 )); shift; i=0
	while ! "$@"; do
		[ $i -ge $lim ] && return 1
		sleep 0.05; i=$((i + 1))
	done
}

# client NAME STEPS...: c_client in the background; output in $dir/NAME.out,
# its pid in $dir/NAME.pid. as_client UID NAME STEPS...: the same, as UID.
client() {
	cname=$1; shift
	LD_LIBRARY_PATH="$build/lib" "$build/tests/system/c_client" "$@" >"$dir/$cname.out" 2>"$dir/$cname.err" &
	echo $! >"$dir/$cname.pid"
	bg_pids="$bg_pids $!"
}
as_client() {
	cuid=$1; cname=$2; shift 2
	setpriv --reuid="$cuid" --regid="$cuid" --clear-groups env LD_LIBRARY_PATH="$build/lib" \
		"$build/tests/system/c_client" "$@" >"$dir/$cname.out" 2>"$dir/$cname.err" &
	echo $! >"$dir/$cname.pid"
	bg_pids="$bg_pids $!"
}
cpid() { cat "$dir/$1.pid"; }

# as_user UID COMMAND...: runs a command as another user.
as_user() { u=$1; shift; setpriv --reuid="$u" --regid="$u" --clear-groups "$@"; }

# need_other_user: skip (77) unless this test can act as a second user.
need_other_user() {
	[ "$(id -u)" -eq 0 ] || { echo "needs root to act as two users"; cleanup_only; exit 77; }
	command -v setpriv >/dev/null || { echo "needs setpriv (util-linux)"; cleanup_only; exit 77; }
	if ! as_user "$other_uid" test -x "$build/bin/openmps-control" ||
	   ! as_user "$other_uid" test -r "$build/lib/standin/libcuda.so.1"; then
		echo "the build folder is not reachable by uid $other_uid"; cleanup_only; exit 77
	fi
}

# The uid a process runs as.
proc_uid() { awk '/^Uid:/ { print $2 }' "/proc/$1/status" 2>/dev/null; }

cleanup_only() {
	pid=$(daemon_pid)
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		ui quit >/dev/null 2>&1
		wait_daemon_gone 50 || kill -9 "$pid" 2>/dev/null
	fi
	for p in $bg_pids; do kill -9 "$p" 2>/dev/null; done
	wait 2>/dev/null
	if [ -n "${OPENMPS_TEST_KEEP:-}" ]; then echo "$name: kept $dir"; else rm -rf "$dir"; fi
}

# finish: stops what is still running, shows the logs if a check failed,
# removes the directories and exits with the test's status.
finish() {
	if [ $rc -ne 0 ]; then
		for f in "$dir"/*.out; do [ -e "$f" ] && { echo "--- $f"; cat "$f"; }; done
		echo "--- control.log"; tail -n 60 "$CUDA_MPS_LOG_DIRECTORY/control.log" 2>/dev/null
		echo "--- server.log"; tail -n 40 "$CUDA_MPS_LOG_DIRECTORY/server.log" 2>/dev/null
	fi
	cleanup_only
	[ $rc -eq 0 ] && echo "$name: passed"
	exit $rc
}
