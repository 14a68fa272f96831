#!/bin/sh
# SPDX-License-Identifier: MIT
#
# The test runner: runs each test command given on the command line (one
# argument each; a command may carry arguments, separated by spaces) with a
# time limit, and prints one line per test and a closing
#   N passed, N failed, N skipped
# A test passes with exit 0, is skipped with 77, and fails otherwise (a
# timeout counts as a failure). The output of a failing test is shown.
#
#   TEST_TIMEOUT   seconds per test (default 120)
#   TEST_FILTER    run only tests whose command contains this string

timeout_s=${TEST_TIMEOUT:-120}
# A container's choice of GPUs (a CI image may set it) is no test's input.
unset NVIDIA_VISIBLE_DEVICES
pass=0; fail=0; skip=0; failed=""
log=$(mktemp /tmp/openmps-test.XXXXXX)

for t in "$@"; do
	case "$t" in *"${TEST_FILTER:-}"*) ;; *) continue ;; esac
	# The label: the program a wrapper runs (with-openmps.sh BUILD PROGRAM),
	# else the script or program itself, without its arguments.
	name=$(echo "$t" | awk '{ n = $1; if (n ~ /with-openmps\.sh$/) n = $NF; sub(".*/", "", n); print n }')
	start=$(date +%s.%N)
	timeout -k 5 "$timeout_s" sh -c "$t" >"$log" 2>&1
	rc=$?
	secs=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
	case $rc in
	0)  pass=$((pass + 1)); echo "PASS  $name (${secs}s)" ;;
	77) skip=$((skip + 1)); echo "SKIP  $name: $(tail -n 1 "$log")" ;;
	*)  fail=$((fail + 1)); failed="$failed $name"
	    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then why="timed out after ${timeout_s}s"; else why="exit $rc"; fi
	    echo "FAIL  $name ($why)"
	    sed 's/^/      | /' "$log" | tail -n 40 ;;
	esac
done
rm -f "$log"
[ -n "$failed" ] && echo "failed:$failed"
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
