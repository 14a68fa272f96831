#!/bin/sh
# SPDX-License-Identifier: MIT
#
# SM partitions (server/smshare.h), on the stand-in's 16 SMs in groups of 2:
#   - sm_partition add/list/rm, and their errors;
#   - a client that names a partition (CUDA_MPS_SM_PARTITION) runs on its
#     SMs exactly and sees that count; clients in different partitions, and
#     clients outside any, never share an SM;
#   - a partition that lends its SMs: others use them while it has no
#     client and move off them at their next work once it has one;
#   - set_client_sm_partition moves a connected client in and out;
#   - a removed partition's client shares again; a partition that does not
#     fit is refused; a name no partition has leaves its client sharing;
#   - get_metrics shows each partition's SMs and clients.
#
#   usage: control_partitions.sh BUILD_DIR

name=control_partitions; . "$(dirname "$0")/c_lib.sh"
slog=$CUDA_MPS_LOG_DIRECTORY/server.log
run() {   # NAME ENV STEPS...: runs a client to its end
	cn=$1; ev=$2; shift 2
	env $ev LD_LIBRARY_PATH="$build/lib" "$build/tests/system/c_client" "$@" >"$dir/$cn.out" 2>"$dir/$cn.err"
}
# field NAME STEP N [WHICH]: field N of the WHICH-th (default first) line of STEP.
field() { awk -v s="$2" -v n="$3" -v w="${4:-1}" '$1 == s && ++k == w { print $n }' "$dir/$1.out"; }
ids() { field "$1" smids 6 "${2:-1}" | tr ',' '\n' | sort; }   # NAME [WHICH]: the SMs, one per line
disjoint() {   # A B [WHICH-A WHICH-B]: no SM in common
	ids "$1" "${3:-1}" >"$dir/a.ids"; ids "$2" "${4:-1}" >"$dir/b.ids"
	[ -s "$dir/a.ids" ] && [ -s "$dir/b.ids" ] && [ -z "$(comm -12 "$dir/a.ids" "$dir/b.ids")" ]
}
expect_sms() {   # NAME N [WHICH]: it read N SMs and its kernels ran on N
	[ "$(field "$1" sms 3 "${3:-1}")" = "$2" ] || fail "$1 reads $(field "$1" sms 3 "${3:-1}") SMs, expected $2"
	[ "$(field "$1" smids 3 "${3:-1}")" = "$2" ] || fail "$1's kernels ran on $(field "$1" smids 3 "${3:-1}") SMs, expected $2"
}

start_daemon
expect "sm_partition add A 0 4" "A"
expect "sm_partition add B 0 4" "B"
expect "sm_partition list" "A 0 4
B 0 4"
expect_err "sm_partition add bad/name 0 4" "not a partition name"
expect_err "sm_partition add none 0 4" "not a partition name"
expect_err "sm_partition add X 0 zero" "not a number of SMs"
expect_err "sm_partition add X 9 4" "not a device"
expect_err "sm_partition rm nope" "no SM partition named 'nope'"
expect_err "sm_partition split A" "usage"
expect_err "set_client_sm_partition 999999 A" "no client with PID 999999"

# A client in A, one in B, one in neither: three disjoint sets.
client PA init sms smids:64 "wait:$dir/goPA"
client PB init sms smids:64 "wait:$dir/goPB"
wait_for "$dir/PA.out" "^waiting" && wait_for "$dir/PB.out" "^waiting" || fail "PA or PB was not served"
# (they were started without the variable: moved in by set_client_sm_partition)
expect "set_client_sm_partition $(cpid PA) A" ""
expect "set_client_sm_partition $(cpid PB) B" ""
wait_for "$slog" "client $(cpid PB): SM partition B from now on" || fail "the server did not take PB's partition"
touch "$dir/goPA" "$dir/goPB"
sleep 0.2
run QA "CUDA_MPS_SM_PARTITION=A" init sms smids:64 gsmids:64
expect_sms QA 4
[ "$(field QA gsmids 3)" = 4 ] || fail "QA's graph ran on $(field QA gsmids 3) SMs"
run QB "CUDA_MPS_SM_PARTITION=B" init sms smids:64
expect_sms QB 4
run Q0 "" init sms smids:64
expect_sms Q0 8
run Q25 "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25" init sms smids:64
expect_sms Q25 4
disjoint QA QB || fail "partitions A and B share SMs: $(field QA smids 6) / $(field QB smids 6)"
disjoint QA Q0 || fail "partition A and an unpartitioned client share SMs: $(field QA smids 6) / $(field Q0 smids 6)"
disjoint QB Q0 || fail "partition B and an unpartitioned client share SMs: $(field QB smids 6) / $(field Q0 smids 6)"
disjoint QA Q25 || fail "partition A and a 25% client share SMs"

# A connected client moved into A and out again.
client M init smids:64 "wait:$dir/goM1" sms smids:64 "wait:$dir/goM2" sms smids:64
wait_for "$dir/M.out" "^waiting" || fail "M was not served"
m=$(cpid M)
expect "set_client_sm_partition $m A" ""
wait_for "$slog" "client $m: SM partition A from now on" || fail "the server did not take M's partition"
touch "$dir/goM1"
wait_for "$dir/M.out" "^waiting .*goM2" || fail "M did not go on"
expect "set_client_sm_partition $m none" ""
wait_for "$slog" "client $m: SM partition none from now on" || fail "the server did not take M out"
touch "$dir/goM2"
wait_for "$dir/M.out" "^waited" && sleep 0.3
[ "$(field M smids 3 1)" = 8 ] || fail "M before: $(field M smids 3 1) SMs, expected 8"
[ "$(field M sms 3 1)" = 4 ] && [ "$(field M smids 3 2)" = 4 ] ||
	fail "M in A: reads $(field M sms 3 1) SMs, ran on $(field M smids 3 2), expected 4"
ids QA >"$dir/qa.ids"; ids M 2 >"$dir/m.ids"
[ "$(cat "$dir/qa.ids")" = "$(cat "$dir/m.ids")" ] || fail "M in A ran on $(field M smids 6 2), A is $(field QA smids 6)"
[ "$(field M sms 3 2)" = 8 ] && [ "$(field M smids 3 3)" = 8 ] ||
	fail "M out of A: reads $(field M sms 3 2) SMs, ran on $(field M smids 3 3), expected 8"
grep -q "client $m: 4 of 16 SMs on device 0, partition A" "$slog" || fail "server.log does not say M joined A"

# Metrics: each partition's SMs; A has no client now.
metrics=$(ui get_metrics)
printf '%s\n' "$metrics" | grep -Eq '^openmps_server_sm_partition_sms\{.*partition="A"\} 4$' ||
	fail "get_metrics: no 4 SMs for A: $(printf '%s\n' "$metrics" | grep partition)"
printf '%s\n' "$metrics" | grep -Eq '^openmps_server_sm_partition_clients\{.*partition="B"\} 0$' ||
	fail "get_metrics: B's clients: $(printf '%s\n' "$metrics" | grep partition_clients)"

# Removed: its client shares again at its next work.
client R "init" "smids:64" "wait:$dir/goR" "smids:64"
wait_for "$dir/R.out" "^waiting" || fail "R was not served"
expect "set_client_sm_partition $(cpid R) B" ""
wait_for "$slog" "client $(cpid R): SM partition B from now on" || fail "the server did not take R's partition"
expect "sm_partition rm B" ""
wait_for "$slog" "SM partition B removed from device 0" || fail "the server did not remove B"
touch "$dir/goR"
wait_for "$dir/R.out" "^waited" && sleep 0.3
[ "$(field R smids 3 2)" = 12 ] || fail "R after B was removed ran on $(field R smids 3 2) SMs, expected 12"
expect "sm_partition list" "A 0 4"

# Too big to fit (A holds 4 of the 16): refused; a name nobody defined
# leaves its client sharing.
expect_err "sm_partition add Big 0 16" "16 SMs do not fit on device 0: 12 of its 16 SMs \\(groups of 2\\) are free \\(taken: A\\)"
expect_err "sm_partition add Big 0 1000" "1000 SMs do not fit on device 0"
expect "sm_partition list" "A 0 4"
run NN "CUDA_MPS_SM_PARTITION=nobody" init sms smids:64
expect_sms NN 12
grep -q "no SM partition named nobody; it shares the SMs" "$slog" || fail "no word that partition nobody is unknown"
run NX "CUDA_MPS_SM_PARTITION=no/such" init sms
grep -q "CUDA_MPS_SM_PARTITION=no/such is not a partition name; ignored" "$dir/NX.err" || fail "no warning for a bad name"
expect "sm_partition rm A" ""

# Lending: while L has no client its SMs serve others (a 100% client has
# the whole device); once a client is in L, the others move off at their
# next work, and come back after it leaves.
expect "sm_partition add L 0 8 lend" "L"
wait_for "$slog" "SM partition L: 8 SMs of device 0, lent" || fail "L was not placed"
client W init sms smids:64 "wait:$dir/goW1" sms smids:64 "wait:$dir/goW2" sms smids:64
wait_for "$dir/W.out" "^waiting" || fail "W was not served"
client LC init smids:64 "wait:$dir/goLC" smids:64 "wait:$dir/goLC2"
wait_for "$dir/LC.out" "^waiting" || fail "LC was not served"
expect "set_client_sm_partition $(cpid LC) L" ""
wait_for "$slog" "client $(cpid LC): SM partition L from now on" || fail "the server did not take LC's partition"
touch "$dir/goLC"
wait_for "$slog" "client $(cpid LC): 8 of 16 SMs on device 0, partition L" || fail "LC did not join L"
touch "$dir/goW1"
wait_for "$dir/W.out" "^waiting .*goW2" || fail "W did not go on"
wait_for "$dir/LC.out" "^waiting .*goLC2" || fail "LC did not go on"
touch "$dir/goLC2"
wait_until 10 sh -c "! kill -0 $(cpid LC) 2>/dev/null" || fail "LC did not end"
wait_for "$slog" "Client {PID: $(cpid LC).*disconnected" || fail "LC did not leave"
touch "$dir/goW2"
wait_for "$dir/W.out" "^waited" && sleep 0.3
expect_sms W 16 1
expect_sms W 8 2
[ "$(field LC smids 3 2)" = 8 ] || fail "LC in L ran on $(field LC smids 3 2) SMs"
ids W 2 >"$dir/w.ids"; ids LC 2 >"$dir/lc.ids"
[ -z "$(comm -12 "$dir/w.ids" "$dir/lc.ids")" ] || fail "W kept L's SMs while LC was in L"
expect_sms W 16 3
stop_daemon
finish
