#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Launch replay (src/server/replay.h): t_replay's serving loops, with the
# server replaying whenever it can (OPENMPS_REPLAY=always), must give the
# same results, and the server must have replayed: most of the 80 runs of
# the first two loops go as graph launches: chunks cut by content by
# default (a run of 8 is one), two of 4 kernels a run with
# OPENMPS_REPLAY_SEGMENT=4, one of the whole run with 0, eight of one with
# 1. A decoder's step (seven different runs in turn) is replayed whole;
# more different runs than the server keeps chunks of still give exact
# results while it drops chunks and graphs.
# With OPENMPS_REPLAY=0 nothing is replayed and the results are the
# same. The graphs are charged to the client's memory limit and give way
# to its allocations. The runs of a "growing cache", one kernel's grid changing each
# time, are replayed (their node given each launch's grid) by default, and
# not with OPENMPS_REPLAY_GRIDS=0; the results are exact either way. With
# replay as by default (while CPUs are busy or the service threads are
# launch-bound) and the launch demand's threshold at its lowest
# (OPENMPS_REPLAY_DEMAND_PCT=1), one client's loop of 0.3 s is replayed.
# Values it cannot read are said in the log and the defaults kept.
#
# The counts depend on the client keeping its CPU: a server that finds a
# client's ring empty stops watching it and lets what it holds go (counted
# as holds ended by time), so on a machine busy with other work runs are
# cut short and fewer replayed (two busy loops on two CPUs: 40-620 of
# 1,206 kernels, 87-178 holds cut, against 1,196-1,204 and 0-1 alone). A
# part whose counts fall short is run again, up to three times in all, and
# fails only if it never reaches them; the holds cut are in its message.
#
#   usage: replay.sh BUILD_DIR

name=replay; . "$(dirname "$0")/c_lib.sh"

metric() { ui get_metrics | sed -n "s/^openmps_server_$1{[^}]*} \([0-9.]*\)$/\1/p"; }

# run_t_replay OUT WHAT [VAR=VALUE...]: t_replay as a client of the daemon,
# with those variables, its output in $dir/OUT.out; fails with its tail.
run_t_replay() {
	out=$1 what=$2
	shift 2
	env "$@" LD_LIBRARY_PATH="$build/lib" "$build/tests/cuda/t_replay" >"$dir/$out.out" 2>&1 ||
		fail "t_replay, $what: $(tail -n 20 "$dir/$out.out")"
}

# Holds the server let go because nobody watched the client (or its time
# ran out).
cut() { ui get_metrics | sed -n 's/^openmps_server_replay_holds_ended_total{[^}]*why="time"} \([0-9]*\)$/\1/p'; }

# counted PART...: runs PART (a function that starts and stops its own
# daemon and sets $short to what fell short, empty if nothing) up to
# three times, until nothing falls short; fails with the last shortfall.
counted() {
	for try in 1 2 3; do
		short=""
		"$@"
		[ -z "$short" ] && return 0
		note "$* (try $try of 3): $short"
	done
	fail "$short"
}

# A long hold, so a client the machine keeps from its CPU mid-run still
# has its runs replayed (the run cut short waits that long each time).
# replaying SEGMENT MIN_GRAPH_LAUNCHES MIN_KERNELS_PER_GRAPH_LAUNCH (x10)
replaying() {
	if [ "$1" = default ]; then
		OPENMPS_REPLAY=always OPENMPS_REPLAY_HOLD_US=200000 start_daemon
	else
		OPENMPS_REPLAY=always OPENMPS_REPLAY_HOLD_US=200000 OPENMPS_REPLAY_SEGMENT=$1 start_daemon
	fi
	run_t_replay "always.$1" "replaying always, segments of $1"
	replays=$(metric replays_total)
	kernels=$(metric replayed_kernels_total)
	[ -n "$replays" ] && [ "$replays" -ge "$2" ] ||
		short="segments of $1: $replays graph launches (want at least $2), $(cut) holds cut"
	[ -n "$kernels" ] && [ $((kernels * 10)) -ge $((replays * $3)) ] ||
		short="segments of $1: $kernels kernels in $replays graph launches (want $3/10 a launch or more)"
	[ -n "${OPENMPS_TEST_VERBOSE:-}" ] && note "segments of $1: $replays graph launches, $kernels kernels"
	stop_daemon
}
# Runs of 8 or 9 launches, a few of 4 or 7.
counted replaying default 60 60
counted replaying 4 120 35
counted replaying 0 60 70
counted replaying 1 480 10

# A decoder's step: seven runs in turn (67 launches a turn), 20 turns;
# each run's chunks are kept and replayed from the second turn on (a
# server that kept one run would replay one of the seven, about 170 of
# the 1206 kernels). The two that part after five launches share their
# first chunk's start. Alone it replays 1,100 or more; a machine busy with
# other work cuts holds short (960-1,032 seen beside a sanitizer's build),
# so half of them is the bar.
turns() {
	OPENMPS_REPLAY=always OPENMPS_REPLAY_HOLD_US=200000 start_daemon
	run_t_replay turns "turns" T_REPLAY_TURNS=1
	kernels=$(metric replayed_kernels_total)
	[ -n "$kernels" ] && [ "$kernels" -ge 600 ] ||
		short="turns: $kernels kernels replayed (want 600 of 1206), $(cut) holds cut"
	[ -n "${OPENMPS_TEST_VERBOSE:-}" ] && note "turns: $kernels kernels replayed"
	stop_daemon
}
counted turns

# More chunks than are kept (128), with 16 executable graphs allowed: the
# server drops kept chunks and graphs as new ones come, still replays, and
# every result is exact. (Alone it builds 36 graphs and launches 97; a
# machine busy with other work cuts holds short: 23 built were seen with 24
# allowed, so the bar is 16.)
chunks() { ui get_metrics | sed -n "s/^openmps_server_replay_chunks_total{[^}]*why=\"$1\"} \([0-9]*\)$/\1/p"; }
churn() {
	OPENMPS_REPLAY=always OPENMPS_REPLAY_HOLD_US=200000 OPENMPS_REPLAY_EXECS=16 start_daemon
	run_t_replay churn "churn" T_REPLAY_CHURN=1
	replays=$(metric replays_total)
	dropped=$(chunks dropped)
	built=$(chunks built)
	[ -n "$replays" ] && [ "$replays" -ge 20 ] ||
		short="churn: $replays graph launches (want 20 or more), $(cut) holds cut"
	[ -n "$dropped" ] && [ "$dropped" -gt 0 ] || short="churn: no kept chunk dropped ($dropped), $(cut) holds cut"
	[ -n "$built" ] && [ "$built" -gt 16 ] ||
		short="churn: $built chunks built (want more than the 16 graphs kept), $(cut) holds cut"
	[ -n "${OPENMPS_TEST_VERBOSE:-}" ] && note "churn: $replays graph launches, $built built, $dropped dropped"
	stop_daemon
}
counted churn

# The growing cache's runs (32 of 9 launches, one kernel's grid changing
# each time, alone: T_REPLAY_GROW) are replayed only where a node's grid
# may change (alone: 30 graph launches against none).
grids() {
	OPENMPS_REPLAY=always OPENMPS_REPLAY_HOLD_US=200000 OPENMPS_REPLAY_GRIDS=0 start_daemon
	run_t_replay grids0 "grids fixed" T_REPLAY_GROW=1
	fixed=$(metric replays_total)
	stop_daemon
	OPENMPS_REPLAY=always OPENMPS_REPLAY_HOLD_US=200000 OPENMPS_REPLAY_GRIDS=1 start_daemon
	run_t_replay grids1 "grids vary" T_REPLAY_GROW=1
	varying=$(metric replays_total)
	[ -n "$fixed" ] && [ -n "$varying" ] && [ "$varying" -ge $((fixed + 20)) ] ||
		short="grids that vary: $varying graph launches against $fixed with grids fixed (want 20 more), $(cut) holds cut"
	stop_daemon
}
counted grids
# At debug level the server says what it sets in a node, for the first 64
# of a client: which kernel, how many argument bytes differ and from which
# parameter, counted from 0 (t_replay's affine_u32 takes its multiplier and
# addend as parameters 1 and 2, which its loops change). A run of its own:
# the logging slows the server, which the count of graph launches above
# must not depend on.
OPENMPS_REPLAY=always OPENMPS_REPLAY_HOLD_US=200000 OPENMPS_REPLAY_GRIDS=1 OPENMPS_LOG_LEVEL=debug start_daemon
run_t_replay grids1-debug "grids vary, debug log"
stop_daemon
told=$(grep -c "replay sets node" "$CUDA_MPS_LOG_DIRECTORY/server.log")
grep -Eq "replay sets node [0-9]+ \(affine_u32\): [0-9]+ of 20 argument bytes differ, the first at [0-9]+ \(parameter [0-9], from 0\)" \
	"$CUDA_MPS_LOG_DIRECTORY/server.log" || fail "no node update of affine_u32 described at debug level ($told lines)"
[ "$told" -le 64 ] || fail "$told node updates described, past the 64 a client's"
[ -n "${OPENMPS_TEST_VERBOSE:-}" ] && note "graph launches: $varying with grids varying, $fixed fixed"

OPENMPS_REPLAY_DEMAND_PCT=1 start_daemon
run_t_replay demand "launch-bound" T_REPLAY_LOOP_MS=300
replays=$(metric replays_total)
[ -n "$replays" ] && [ "$replays" -gt 0 ] || fail "launch-bound at 1%: no graph launch ($replays)"
[ -n "${OPENMPS_TEST_VERBOSE:-}" ] && note "launch-bound: $replays graph launches"
stop_daemon

OPENMPS_REPLAY=0 start_daemon
run_t_replay off "replay off"
[ "$(metric replays_total)" = 0 ] || fail "replay off: $(metric replays_total) graph launches"
stop_daemon

# The graphs the server makes of a client's launches hold device memory on
# its behalf: charged to it (cuMemGetInfo's free falls while they are
# kept), never past its limit (t_replay under a 1 MiB limit: graphs it
# cannot hold are not made, the results stay exact), and they make way for
# an allocation of its own that would not fit beside them.
OPENMPS_REPLAY=always OPENMPS_REPLAY_HOLD_US=200000 start_daemon
run_t_replay limited "under a 1 MiB limit" CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=1M
over=$(ui get_metrics | sed -n 's/^openmps_server_replay_chunks_total{[^}]*why="over_limit"} //p')
[ -n "$over" ] && [ "$over" -gt 0 ] || fail "under a 1 MiB limit: no graph refused ($over)"
CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=2M LD_LIBRARY_PATH="$build/lib" "$build/tests/system/c_client" init meminfo \
	launch:64 launch:64 launch:64 launch:64 meminfo alloc:2 meminfo >"$dir/shed.out" 2>&1
free0=$(awk '$1 == "meminfo" { print $3; exit }' "$dir/shed.out")
free1=$(awk '$1 == "meminfo" { n++; if (n == 2) print $3 }' "$dir/shed.out")
[ -n "$free0" ] && [ -n "$free1" ] && [ "$free1" -lt "$free0" ] ||
	fail "graphs not charged: free $free0 before the launches, $free1 after ($(cat "$dir/shed.out"))"
grep -q "^alloc 2 CUDA_SUCCESS" "$dir/shed.out" ||
	fail "2 MiB under a 2 MiB limit beside the client's graphs: $(grep "^alloc" "$dir/shed.out")"
grep -q "its launches' graphs make way for its allocation" "$CUDA_MPS_LOG_DIRECTORY/server.log" ||
	fail "the allocation did not make the graphs go"
stop_daemon

OPENMPS_REPLAY=sometimes OPENMPS_REPLAY_HOLD_US=-4 OPENMPS_BUSY_THREADS=two OPENMPS_REPLAY_SEGMENT=257 \
	OPENMPS_REPLAY_DEMAND_PCT=0 OPENMPS_REPLAY_GRIDS=2 OPENMPS_REPLAY_ALTS=16 OPENMPS_REPLAY_EXECS=0 start_daemon
run_t_replay bad "OPENMPS_REPLAY=sometimes"
grep -q "ignoring OPENMPS_REPLAY=sometimes (want 0, 1 or always)" "$CUDA_MPS_LOG_DIRECTORY/server.log" ||
	fail "OPENMPS_REPLAY=sometimes passed in silence"
grep -q "ignoring OPENMPS_REPLAY_HOLD_US=-4 (want 1..10000000)" "$CUDA_MPS_LOG_DIRECTORY/server.log" ||
	fail "OPENMPS_REPLAY_HOLD_US=-4 passed in silence"
grep -q "ignoring OPENMPS_BUSY_THREADS=two (want 0..256)" "$CUDA_MPS_LOG_DIRECTORY/server.log" ||
	fail "OPENMPS_BUSY_THREADS=two passed in silence"
grep -q "ignoring OPENMPS_REPLAY_SEGMENT=257 (want 0..256)" "$CUDA_MPS_LOG_DIRECTORY/server.log" ||
	fail "OPENMPS_REPLAY_SEGMENT=257 passed in silence"
grep -q "ignoring OPENMPS_REPLAY_DEMAND_PCT=0 (want 1..100000)" "$CUDA_MPS_LOG_DIRECTORY/server.log" ||
	fail "OPENMPS_REPLAY_DEMAND_PCT=0 passed in silence"
grep -q "ignoring OPENMPS_REPLAY_GRIDS=2 (want 0..1)" "$CUDA_MPS_LOG_DIRECTORY/server.log" ||
	fail "OPENMPS_REPLAY_GRIDS=2 passed in silence"
grep -q "ignoring OPENMPS_REPLAY_ALTS=16 (want 0..15)" "$CUDA_MPS_LOG_DIRECTORY/server.log" ||
	fail "OPENMPS_REPLAY_ALTS=16 passed in silence"
grep -q "ignoring OPENMPS_REPLAY_EXECS=0 (want 1..65536)" "$CUDA_MPS_LOG_DIRECTORY/server.log" ||
	fail "OPENMPS_REPLAY_EXECS=0 passed in silence"
stop_daemon
finish
