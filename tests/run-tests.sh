#!/bin/sh
# SPDX-License-Identifier: MIT
#
# The test runner: runs each test command given on the command line (one
# argument each; a command may carry arguments, separated by spaces) with a
# time limit, and prints one line per test as it ends and a closing
#   N passed, N failed, N skipped
# A test passes with exit 0, is skipped with 77, and fails otherwise (a
# timeout counts as a failure). The whole output of a failing test is shown
# under its line; the exit status is 0 when nothing failed.
#
# Tests run TEST_JOBS at a time. A test named in TEST_SERIAL (a test that
# measures time, CPU use or fairness, or loads the whole machine) runs
# alone, after the others. Each test's output goes to a file of its own, and
# only this script prints, so the output of two tests never mixes.
#
# How it works: each running test is a background subshell that, when its
# test ends, writes "SLOT STATUS" to a FIFO; the loop below reads one such
# line per ended test (blocking, no polling), reports it and starts the next.
#
#   TEST_TIMEOUT   seconds per test (default 120)
#   TEST_FILTER    run only tests whose command contains this string
#   TEST_JOBS      tests at once (default twice the CPUs, at most 16)
#   TEST_SERIAL    names of the tests that run alone (the Makefile's
#                  TESTS_SERIAL)

timeout_s=${TEST_TIMEOUT:-120}
cpus=$(nproc 2>/dev/null || echo 1)
jobs=${TEST_JOBS:-$((cpus * 2))}
[ "$jobs" -gt 16 ] 2>/dev/null && [ -z "${TEST_JOBS:-}" ] && jobs=16
case $jobs in '' | *[!0-9]* | 0) echo "run-tests: TEST_JOBS must be a positive number" >&2; exit 2 ;; esac
# A container's choice of GPUs (a CI image may set it) is no test's input.
unset NVIDIA_VISIBLE_DEVICES
pass=0; fail=0; skip=0; failed=""
work=$(mktemp -d /tmp/openmps-test.XXXXXX) || exit 2
# Interrupted: stop the running tests (timeout passes the signal on to the
# test's whole process group).
stop_all()
{
	set +f
	for f in "$work"/*.pid; do [ -f "$f" ] && kill -TERM "$(cat "$f")" 2>/dev/null; done
	exit 130
}
trap 'rm -rf "$work"' EXIT
trap stop_all INT TERM
mkfifo "$work/done" || exit 2
# Read and write, so that opening it does not wait for a writer and the
# reader never sees end-of-file between two tests.
exec 3<>"$work/done"

# The label: the program a wrapper runs (with-openmps.sh BUILD PROGRAM),
# else the script or program itself; without its folder, arguments or .sh.
label()
{
	echo "$1" | awk '{ n = $1; if (n ~ /with-openmps\.sh$/) n = $NF; sub(".*/", "", n); sub("\\.sh$", "", n); print n }'
}

is_serial()
{
	case " $TEST_SERIAL " in *" $1 "*) return 0 ;; esac
	return 1
}

# start SLOT COMMAND: runs the test in the background; its output goes to
# $work/SLOT.log (its label is in $work/SLOT.name), its start time to
# $work/SLOT.start, the pid of its timeout to $work/SLOT.pid, and
# "SLOT STATUS" to the FIFO when it ends. A test that does not choose its
# daemon's directories gets private ones in $work/SLOT.d, never the shared
# default, so that two tests at once cannot meet there.
start()
{
	date +%s.%N >"$work/$1.start"
	mkdir "$work/$1.d"
	(
		CUDA_MPS_PIPE_DIRECTORY=$work/$1.d/pipe CUDA_MPS_LOG_DIRECTORY=$work/$1.d/log \
			timeout -k 5 "$timeout_s" sh -c "$2" </dev/null >"$work/$1.log" 2>&1 3>&- &
		echo $! >"$work/$1.pid"
		wait $!
		echo "$1 $?" >&3
	) &
}

# report SLOT STATUS: the test's line (and output, if it failed).
report()
{
	name=$(cat "$work/$1.name")
	secs=$(awk -v s="$(cat "$work/$1.start")" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
	case $2 in
	0)  pass=$((pass + 1)); echo "PASS  $name (${secs}s)" ;;
	77) skip=$((skip + 1)); echo "SKIP  $name: $(tail -n 1 "$work/$1.log")" ;;
	*)  fail=$((fail + 1)); failed="$failed $name"
	    if [ "$2" -eq 124 ] || [ "$2" -eq 137 ]; then why="timed out after ${timeout_s}s"; else why="exit $2"; fi
	    echo "FAIL  $name ($why)"
	    sed 's/^/      | /' "$work/$1.log" ;;
	esac
	rm -rf "$work/$1.log" "$work/$1.start" "$work/$1.pid" "$work/$1.name" "$work/$1.d"
}

# wait_one: waits for any running test to end and reports it.
running=0
wait_one()
{
	IFS=' ' read -r slot rc <&3 || exit 2
	wait "$(eval "echo \$pid_$slot")"
	report "$slot" "$rc"
	running=$((running - 1))
}

# run_all MAX COMMAND...: runs the commands, at most MAX at once.
n=0
run_all()
{
	max=$1; shift
	for t in "$@"; do
		[ $running -ge "$max" ] && wait_one
		n=$((n + 1))
		label "$t" >"$work/$n.name"
		start $n "$t"
		eval "pid_$n=$!"
		running=$((running + 1))
	done
	while [ $running -gt 0 ]; do wait_one; done
}

# Split the tests: the others first, TEST_JOBS at a time, then the serial
# ones, one at a time.
set_parallel=""; set_serial=""
nl='
'
for t in "$@"; do
	case "$t" in *"${TEST_FILTER:-}"*) ;; *) continue ;; esac
	case "$t" in *"$nl"*) echo "run-tests: a test command spans lines" >&2; exit 2 ;; esac
	if is_serial "$(label "$t")"; then set_serial="$set_serial$t$nl"; else set_parallel="$set_parallel$t$nl"; fi
done
set -f
# A serial name that matches no test is a typo that would let it run with
# the others.
if [ -z "${TEST_FILTER:-}" ]; then
	names=$(for t in "$@"; do label "$t"; done)
	for s in $TEST_SERIAL; do
		echo "$names" | grep -qx "$s" || echo "run-tests: TEST_SERIAL names $s, which is no test" >&2
	done
fi
IFS=$nl
# shellcheck disable=SC2086 # split on newlines: one command per line
run_all "$jobs" $set_parallel
# shellcheck disable=SC2086
run_all 1 $set_serial
unset IFS
set +f

[ -n "$failed" ] && echo "failed:$failed"
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
