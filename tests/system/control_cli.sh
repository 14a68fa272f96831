#!/bin/sh
# SPDX-License-Identifier: MIT
#
# openmps-control's command line and files: -h, bad flags, the UI with no
# daemon, unusable pipe and log directories, bad settings in the
# environment, the files in the pipe directory, the refusal of a second
# daemon on the same pipe directory, -f in the foreground, and the daemon's
# settings taken from CUDA_MPS_ACTIVE_THREAD_PERCENTAGE and
# CUDA_MPS_PINNED_DEVICE_MEM_LIMIT.
#
#   usage: control_cli.sh BUILD_DIR

name=control_cli; . "$(dirname "$0")/c_lib.sh"
export OPENMPS_STANDIN_DEVICES=2   # the limits below name device 1
pipe=$CUDA_MPS_PIPE_DIRECTORY

# -h: usage on stdout, exit 0.
out=$("$ctl" -h); st=$?
[ $st -eq 0 ] || fail "-h exited $st"
echo "$out" | grep -q "usage: openmps-control" || fail "-h printed no usage: $out"
echo "$out" | grep -q -- "-multiuser-server" || fail "-h does not mention -multiuser-server"
echo "$out" | grep -q "/tmp/openmps" || fail "-h does not name the default pipe directory"
echo "$out" | grep -q "OPENMPS_DRIVER" || fail "-h does not mention OPENMPS_DRIVER"

# Bad flags: a clear error and exit 2, no daemon.
for bad in "-x" "--daemon" "-d -f" "-d -d" "-multiuser-server" "--exclusive-users" "quit"; do
	# shellcheck disable=SC2086
	err=$("$ctl" $bad 2>&1 >/dev/null); st=$?
	[ $st -eq 2 ] || fail "'openmps-control $bad' exited $st, expected 2"
	echo "$err" | grep -q "^openmps-control: " || fail "'openmps-control $bad' said: $err"
done
echo "$err" | grep -q "invalid option 'quit'" || fail "a stray word is not named in the error: $err"
err=$("$ctl" -d -f 2>&1 >/dev/null)
echo "$err" | grep -q "give one of -d and -f, not both" || fail "'-d -f' said: $err"
err=$("$ctl" -f -f 2>&1 >/dev/null)
echo "$err" | grep -q "give -f once" || fail "'-f -f' said: $err"
[ ! -e "$pipe/openmps-control.pid" ] || fail "a bad flag started a daemon"

# The UI with no daemon: says so, exit 1.
err=$(echo get_server_list | "$ctl" 2>&1); st=$?
[ $st -eq 1 ] || fail "the UI without a daemon exited $st"
echo "$err" | grep -q "Cannot find the openmps control daemon at $pipe" || fail "the UI without a daemon said: $err"

# Unusable log and pipe directories: clear errors, exit 1, nothing left running.
err=$(CUDA_MPS_LOG_DIRECTORY=/dev/null/log "$ctl" -d 2>&1); st=$?
[ $st -eq 1 ] || fail "an unwritable log directory: exit $st"
echo "$err" | grep -q "cannot write the log directory /dev/null/log.*CUDA_MPS_LOG_DIRECTORY" ||
	fail "an unwritable log directory: $err"
err=$(CUDA_MPS_PIPE_DIRECTORY=/dev/null/pipe "$ctl" -d 2>&1); st=$?
[ $st -eq 1 ] || fail "an unusable pipe directory: exit $st"
echo "$err" | grep -q "cannot create the pipe directory /dev/null/pipe" || fail "an unusable pipe directory: $err"
[ ! -e "$pipe/openmps-control.pid" ] || fail "a daemon started without its log directory"

# A pipe directory too long for a socket's path: refused, saying the limit,
# and nothing made.
long="$dir/$(printf 'p%.0s' $(seq 1 100))"
err=$(CUDA_MPS_PIPE_DIRECTORY=$long "$ctl" -d 2>&1); st=$?
[ $st -eq 1 ] && echo "$err" | grep -q "too long.*at most 107" || fail "a too-long pipe directory: exit $st: $err"
[ ! -e "$long" ] || fail "a too-long pipe directory was made anyway"

# A relative pipe directory: the daemon keeps to it after it detaches.
( cd "$dir" && CUDA_MPS_PIPE_DIRECTORY=relpipe "$ctl" -d ) || fail "a daemon on a relative pipe directory did not start"
[ -f "$dir/relpipe/openmps-control.pid" ] || fail "a relative pipe directory got no pid file"
( cd "$dir" && echo quit | CUDA_MPS_PIPE_DIRECTORY=relpipe "$ctl" >/dev/null )
i=0; while [ -e "$dir/relpipe/openmps-control.pid" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
[ -z "$(ls "$dir/relpipe" | grep -E 'sock|pid')" ] || fail "quit left behind in a relative pipe directory: $(ls "$dir/relpipe")"

# A log level that means nothing: said, not ignored.
OPENMPS_LOG_LEVEL=bogus start_daemon
stop_daemon
grep -q "OPENMPS_LOG_LEVEL=bogus is not" "$CUDA_MPS_LOG_DIRECTORY/control.log" || fail "OPENMPS_LOG_LEVEL=bogus passed in silence"

# Bad settings in the environment: refused at start.
err=$(CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=abc "$ctl" -d 2>&1); st=$?
[ $st -eq 1 ] && echo "$err" | grep -q "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=abc" ||
	fail "a bad CUDA_MPS_ACTIVE_THREAD_PERCENTAGE: exit $st: $err"
err=$(CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=12 "$ctl" -d 2>&1); st=$?
[ $st -eq 1 ] && echo "$err" | grep -q "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=12" ||
	fail "a bad CUDA_MPS_PINNED_DEVICE_MEM_LIMIT: exit $st: $err"

# The daemon, with its settings from the environment.
CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=40 CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=1G,1=512M start_daemon
pid=$(daemon_pid)
[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || fail "no live pid in openmps-control.pid"
[ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "openmps-control" ] || fail "the pid file names another process"
expect get_default_active_thread_percentage "40.0"
expect "get_default_device_pinned_mem_limit 0" "1G"
expect "get_default_device_pinned_mem_limit 1" "512M"

# Its files.
[ -S "$pipe/openmps.sock" ] || fail "no openmps.sock"
[ "$(stat -c %a "$pipe/openmps.sock")" = 666 ] || fail "openmps.sock mode $(stat -c %a "$pipe/openmps.sock")"
[ -f "$pipe/openmps-control.lock" ] || fail "no lock file"
[ ! -e "$pipe/control" ] || fail "a file named 'control' would make NVIDIA's clients take us for their daemon"
if [ "$(id -u)" -eq 0 ]; then
	[ -S "$pipe/openmps-privileged.sock" ] || fail "no privileged socket for a root daemon"
	[ "$(stat -c %a:%u "$pipe/openmps-privileged.sock")" = 755:0 ] ||
		fail "privileged socket mode/owner $(stat -c %a:%u "$pipe/openmps-privileged.sock")"
fi

# A second daemon on the same pipe directory: refused, the first goes on.
for flag in -d -f; do
	err=$("$ctl" $flag 2>&1); st=$?
	[ $st -eq 1 ] || fail "a second daemon ($flag) exited $st"
	[ "$err" = "An instance of this daemon is already running" ] || fail "a second daemon ($flag) said: $err"
done
[ "$(daemon_pid)" = "$pid" ] || fail "the second daemon touched the pid file"
expect get_default_active_thread_percentage "40.0"
grep -q "An instance of this daemon is already running" "$CUDA_MPS_LOG_DIRECTORY/control.log" ||
	fail "control.log does not record the refused second daemon"

stop_daemon
[ ! -e "$pipe/openmps.sock" ] && [ ! -e "$pipe/openmps-privileged.sock" ] || fail "the sockets outlived the daemon"
wait_until 5 eval "! kill -0 $pid 2>/dev/null" || fail "the daemon process is still alive after quit"

# -f: in the foreground, same behaviour; quit ends the process with status 0.
"$ctl" -f &
fg=$!
bg_pids="$bg_pids $fg"
wait_until 5 test -S "$pipe/openmps.sock" || fail "-f did not open its socket"
wait_until 5 test -s "$pipe/openmps-control.pid" || fail "-f wrote no pid file"
[ "$(daemon_pid)" = "$fg" ] || fail "-f: the pid file says $(daemon_pid), the process is $fg"
expect get_default_active_thread_percentage "100.0"
expect quit ""
wait "$fg"; st=$?
[ $st -eq 0 ] || fail "-f exited $st after quit"

finish
