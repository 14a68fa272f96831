#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Bad input never stops the daemon and never makes anyone wait: an over-long
# line, a line that is not text, a UI that connects and says nothing, many
# UIs at once, a UI that never reads its replies, random bytes and random
# commands (c_fuzz). Each bad command gets an "Error: ..." line; afterwards
# the same daemon process answers at once, serves a CUDA client, and holds
# no more file descriptors than before.
#
#   usage: control_robust.sh BUILD_DIR [SEED]

name=control_robust; . "$(dirname "$0")/c_lib.sh"
seed=${2:-${OPENMPS_TEST_SEED:-$(date +%s)}}
start_daemon
pid=$(daemon_pid)
ui device_query >/dev/null || fail "device_query failed"
fds0=$(ls "/proc/$pid/fd" | wc -l)

# Over-long lines: refused by the UI itself, and by the daemon when sent raw
# (c_fuzz covers raw packets); the session goes on.
long=$(head -c 2000 /dev/zero | tr '\0' x)
out=$(printf '%s\nget_default_client_priority\n' "$long" | "$ctl"); st=$?
[ $st -eq 1 ] || fail "an over-long line: exit $st"
[ "$out" = "$(printf 'Error: command too long (at most 1024 characters)\n0')" ] || fail "an over-long line: $out"
exact=$(head -c 1024 /dev/zero | tr '\0' y)
expect_err "$exact" "unknown command"
out=$(printf 'get_server_list\001\002\n' | "$ctl"); st=$?
[ $st -eq 1 ] && [ "$out" = "Error: the command has characters that are not printable" ] ||
	fail "a line with control characters: exit $st: $out"

# A UI that says nothing does not hold up the others.
mkfifo "$dir/silent.fifo"
"$ctl" <"$dir/silent.fifo" >/dev/null 2>&1 &
bg_pids="$bg_pids $!"
exec 7>"$dir/silent.fifo"
wait_until 5 grep -q "NEW UI" "$CUDA_MPS_LOG_DIRECTORY/control.log" || true
sleep 0.2
expect get_default_client_priority "0"

# Hostile and careless peers, then the daemon must still answer promptly.
"$build/tests/system/c_fuzz" "$CUDA_MPS_PIPE_DIRECTORY/openmps.sock" "$seed" >"$dir/fuzz.out" 2>&1 ||
	fail "c_fuzz (seed $seed): $(tail -n 20 "$dir/fuzz.out")"
[ "$(daemon_pid)" = "$pid" ] && kill -0 "$pid" 2>/dev/null || fail "the daemon did not survive c_fuzz (seed $seed)"
# (c_fuzz's random setters may have changed the value when it is the daemon's user.)
ui get_default_active_thread_percentage | grep -Eqx "[0-9]+\.[0-9]" || fail "no proper answer after c_fuzz"
client A init alloc:1 sync
wait_for "$dir/A.out" "^sync" || fail "no CUDA client served after the fuzzing"
grep -q "^sync CUDA_SUCCESS$" "$dir/A.out" || fail "a CUDA client failed after the fuzzing: $(cat "$dir/A.out")"

# A client whose process has gone by the time the daemon routes it (its
# namespace unreadable): the connection, made by a process that exits at
# once, is handed to a child that says hello later and then leaves. It gets
# a server of its own, which must go when it does (a leak found by s_soak).
wire=$(sed -n 's/^#define MPS_WIRE_VERSION *\([0-9]*\).*/\1/p' "$(dirname "$0")/../../src/common/wire.h")
python3 - "$CUDA_MPS_PIPE_DIRECTORY/openmps.sock" "$wire" <<'PYEOF' >"$dir/gone.out" 2>&1 || fail "the gone client: $(cat "$dir/gone.out")"
import os, socket, struct, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(sys.argv[1])
parent = os.getpid()
if os.fork():
    os._exit(0)
time.sleep(0.3)
hello = struct.pack("<IHHII64s32s", 0x4f4c4c48, int(sys.argv[2]), 1, parent, 0, b"gone", b"")
s.send(hello)
s.settimeout(10)
s.recv(1 << 16)
time.sleep(0.2)
PYEOF
sleep 0.5
grep -q "cannot read its network namespace" "$CUDA_MPS_LOG_DIRECTORY/control.log" ||
	fail "the gone client was not routed as one of its own: $(tail -n 5 "$CUDA_MPS_LOG_DIRECTORY/control.log")"
servers_left() { ui get_server_list | grep -c .; }
wait_until 10 eval '[ "$(servers_left)" -le 1 ]' ||
	fail "the gone client's server stayed: $(ui get_server_list | tr '\n' ' ')"

# No connection leaked (the silent UI above still holds one).
wait_until 5 eval '[ "$(ls "/proc/$pid/fd" | wc -l)" -le $((fds0 + 2)) ]' ||
	fail "the daemon holds $(ls "/proc/$pid/fd" | wc -l) fds, $fds0 before"
exec 7>&-
stop_daemon
finish
