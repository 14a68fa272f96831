#!/bin/sh
# SPDX-License-Identifier: MIT
#
# The queries frameworks make every step are answered in the client: run
# t_queries (thousands of attribute, limit, capture-status and context
# queries, and sets that leave a value as it was) with OPENMPS_CALL_STATS
# and check, function by function, how many calls reached the server and
# how many of those waited for a reply. The server's own count of round
# trips (get_metrics) must agree that few did. A regression that sends a
# query to the server again fails here, not only in a benchmark.
#
#   usage: queries.sh BUILD_DIR

name=queries; . "$(dirname "$0")/c_lib.sh"

start_daemon
OPENMPS_CALL_STATS="$dir/stats" LD_LIBRARY_PATH="$build/lib" "$build/tests/cuda/t_queries" >"$dir/t.out" 2>&1 ||
	fail "t_queries failed: $(tail -n 20 "$dir/t.out")"
stats=$(ls "$dir"/stats.* 2>/dev/null | head -n 1)
[ -n "$stats" ] || { fail "no OPENMPS_CALL_STATS file"; finish; }

# row FUNCTION: "calls messages round_trips" of one function (zeros if absent;
# the table's rows are "calls messages round_trips wait_us function").
row() { awk -v f="$1" '$5 == f { print $1, $2, $3; found = 1 } END { if (!found) print 0, 0, 0 }' "$stats"; }

# at_most FUNCTION MIN_CALLS MAX_MESSAGES MAX_ROUND_TRIPS
at_most() {
	set -- "$1" "$2" "$3" "$4" $(row "$1")
	[ "$5" -ge "$2" ] || fail "$1: $5 calls counted, t_queries makes at least $2"
	[ "$6" -le "$3" ] || fail "$1: $6 of $5 calls sent a message (at most $3 may)"
	[ "$7" -le "$4" ] || fail "$1: $7 of $5 calls waited for the server (at most $4 may)"
}

# Fetched once per function (and again after a set the driver judged).
at_most cuFuncGetAttribute 40000 8 8
at_most cuKernelGetAttribute 16000 3 3
# Sets that change nothing cost nothing; a checked change is sent, not waited for.
at_most cuFuncSetAttribute 1000 12 6
at_most cuKernelSetAttribute 1000 2 0
at_most cuFuncSetCacheConfig 2 2 0
at_most cuKernelSetCacheConfig 1 1 0
# Limits: published by the server; only an unknown one is asked.
at_most cuCtxGetLimit 11000 1 1
at_most cuCtxSetLimit 1000 1 1
# Pointer attributes: asked once per allocation and attribute.
at_most cuPointerGetAttribute 4000 12 12
at_most cuPointerGetAttributes 1000 3 3
at_most cuStreamIsCapturing 1000 0 0
at_most cuStreamGetCaptureInfo_v3 1000 0 0
at_most cuCtxGetDevice 1000 0 0
at_most cuStreamGetCtx 1000 0 0
grep -q "^# total: [0-9]* messages, [0-9]* round trips$" "$stats" || fail "no total line: $(tail -n 2 "$stats")"

# The server counts the round trips of the clients that left too.
trips=$(ui get_metrics | sed -n 's/^openmps_server_round_trips_total{[^}]*} \([0-9]*\)$/\1/p')
calls=$(ui get_metrics | sed -n 's/^openmps_server_calls_total{[^}]*} \([0-9]*\)$/\1/p')
client_msgs=$(sed -n 's/^# total: \([0-9]*\) messages.*/\1/p' "$stats")
if [ -z "$trips" ] || [ -z "$calls" ]; then
	fail "get_metrics has no server totals: $(ui get_metrics | grep server_ | head -n 5)"
else
	[ "$trips" -gt 0 ] && [ "$trips" -le 200 ] || fail "the server counted $trips round trips (t_queries needs about 100)"
	[ "$calls" -ge "$client_msgs" ] || fail "the server counted $calls messages, the client sent $client_msgs"
fi
stop_daemon
finish
