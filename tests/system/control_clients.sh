#!/bin/sh
# SPDX-License-Identifier: MIT
#
# The commands with real clients (c_client, through the openmps client
# library, on two stand-in devices):
#   - a client that arrives while its server starts is queued, not refused
#     (the server is made slow to start), and the server goes
#     INITIALIZING -> ACTIVE;
#   - the pinned memory limit reaches the clients: over it, cuMemAlloc
#     fails with CUDA_ERROR_OUT_OF_MEMORY, and cuMemGetInfo shows the limit
#     as the total and what is left of it as free; a per-server change
#     applies to clients that connect later, not to those already there;
#   - get_client_list, ps (PID, ID, SERVER, DEVICE per device used,
#     NAMESPACE, COMMAND; with -v the memory held on each device and its
#     peak) and get_device_client_list show the clients;
#   - terminate_client prints 0, the client is gone from the lists at once,
#     its memory is back (a fresh client sees as much free memory as before
#     it allocated), and its next calls fail; a pinned allocation under way
#     when the termination comes fails as terminated.
#
#   usage: control_clients.sh BUILD_DIR

name=control_clients; . "$(dirname "$0")/c_lib.sh"
export OPENMPS_STANDIN_DEVICES=2 OPENMPS_STANDIN_SLOW_REGISTER=3145728:2000
# The server starts only when the test says so (or after 30 s).
cat >"$dir/slow-server" <<EOF
#!/bin/sh
i=0
while [ ! -e "$dir/server-go" ] && [ \$i -lt 600 ]; do sleep 0.05; i=\$((i + 1)); done
exec "$build/bin/openmps-server" "\$@"
EOF
chmod 755 "$dir/slow-server"
OPENMPS_SERVER="$dir/slow-server" start_daemon
expect "set_default_device_pinned_mem_limit 0 64M" ""
expect "set_default_active_thread_percentage 50" "50.0"

# A comes while its server starts: queued, then served.
client A init alloc:32 alloc:48 alloc:16 dev:1 alloc:100 "wait:$dir/goA" dev:0 alloc:16 sync free
wait_until 20 eval 'test -n "$(ui get_server_list)"' || fail "no server started for the first client"
srv=$(ui get_server_list)
expect "get_server_status $srv" "INITIALIZING"
wait_for "$CUDA_MPS_LOG_DIRECTORY/control.log" "NEW CLIENT $(cpid A) " || fail "A never reached the daemon"
sleep 0.2
[ ! -s "$dir/A.out" ] || fail "A ran before its server was ready: $(cat "$dir/A.out")"
kill -0 "$(cpid A)" 2>/dev/null || fail "A gave up while its server started: $(cat "$dir/A.err")"
touch "$dir/server-go"
wait_for "$dir/A.out" "^waiting" 20 || fail "client A was not served after its server started"
expect "get_server_status $srv" "ACTIVE"
grep -q "NEW CLIENT $(cpid A) from user $(id -u): Server is not ready, push client to pending list" \
	"$CUDA_MPS_LOG_DIRECTORY/control.log" || fail "control.log does not show A queued"
[ "$(sed -n 1,6p "$dir/A.out" | tr '\n' ' ')" = "init CUDA_SUCCESS alloc 32 CUDA_SUCCESS alloc 48 CUDA_ERROR_OUT_OF_MEMORY alloc 16 CUDA_SUCCESS dev 1 CUDA_SUCCESS alloc 100 CUDA_SUCCESS " ] ||
	fail "the 64M limit on device 0 (none on device 1) was not applied to A: $(cat "$dir/A.out")"

# The listings with A.
a=$(cpid A)
expect "get_client_list $srv" "$a"
ns=$(readlink "/proc/$a/ns/pid" | tr -dc 0-9)
ps_out=$(ui ps)
rows=$(echo "$ps_out" | awk -v p="$a" '$1 == p')
[ "$(echo "$rows" | wc -l)" -eq 2 ] || fail "ps should show A once per device it used: $ps_out"
echo "$rows" | awk -v s="$srv" -v n="$ns" '$2 != "0" || $3 != s || $5 != n || $6 !~ /c_client$/ || $7 != "init" { bad = 1 } END { exit bad }' ||
	fail "ps rows for A (want ID 0, SERVER $srv, NAMESPACE $ns, COMMAND c_client init ...): $rows"
devs=$(echo "$rows" | awk '{ print $4 }' | sort | tr '\n' ' ')
uuids=$(ui device_query | awk 'NR > 1 { print substr($2, 1, 22) }' | sort | tr '\n' ' ')
[ "$devs" = "$uuids" ] || fail "ps devices '$devs', the devices are '$uuids'"
[ "$(ui "ps -p $srv")" = "$ps_out" ] || fail "ps -p differs from ps with one server"

# A baseline of free memory on device 1 (no limit there), then B with 32M
# of its own.
client M0 init dev:1 meminfo
wait_for "$dir/M0.out" "^meminfo" || fail "M0 did not report its memory"
free0=$(awk '/^meminfo/ { print $3 }' "$dir/M0.out")
client B init dev:1 alloc:32 "wait:$dir/goB" sync alloc:1
wait_for "$dir/B.out" "^waiting" || fail "client B was not served"
b=$(cpid B)
client M1 init dev:1 meminfo
wait_for "$dir/M1.out" "^meminfo" || fail "M1 did not report its memory"
free1=$(awk '/^meminfo/ { print $3 }' "$dir/M1.out")
[ $((free0 - free1)) -ge $((32 << 20)) ] || fail "B's 32M does not show in the free memory ($free0 -> $free1)"
# M0 and M1 end once they have reported, and the server lets them go on
# its own time: the listings below, two snapshots compared, are of A and B.
only_ab() { [ "$(ui "get_client_list $srv")" = "$(printf '%s\n%s' "$a" "$b" | sort -n)" ]; }
wait_until 20 only_ab || fail "M0 and M1 still listed after they ended: $(ui "get_client_list $srv")"
# ps -v: the same rows with each client's device memory and its peak (MiB),
# its SMs on that device, its active thread percentage and priority.
psv=$(ui "ps -v")
[ "$(echo "$psv" | head -1 | awk '{ print $4, $5, $6, $7, $8, $9, $10, $11 }')" = \
	"DEVICE MEM_MIB PEAK_MIB SMS PCT PRIO GPU_S NAMESPACE" ] || fail "ps -v header: $(echo "$psv" | head -1)"
dev1=$(ui device_query | awk '$1 == 1 { print substr($2, 1, 22) }')
[ "$(echo "$psv" | awk -v p="$b" -v d="$dev1" '$1 == p && $4 == d { print $5, $6, $7, $8, $9 }')" = "32.0 32.0 8 50.0 0" ] ||
	fail "ps -v: B's 32M on device 1 ($dev1), 8 SMs (the default 50%), priority 0: $(echo "$psv" | awk -v p="$b" '$1 == p')"
[ "$(echo "$psv" | wc -l)" = "$(ui ps | wc -l)" ] || fail "ps -v and ps list different rows"
[ "$(ui "ps -p $srv -v")" = "$psv" ] || fail "ps -p -v differs from ps -v with one server"
expect_err "ps -x" "usage"
expect_err "ps -v -v" "usage"
expect "get_client_list $srv" "$(printf '%s\n%s' "$a" "$b" | sort -n)"
u0=$(echo "$uuids" | awk '{ print $1 }')
out=$(ui get_device_client_list)
echo "$out" | grep -q "^Device 0 (GPU-.*): $(printf '%s\n%s' "$a" "$b" | sort -n | tr '\n' ' ' | sed 's/ $//')$" ||
	fail "get_device_client_list, device 0: $out"
echo "$out" | grep -q "^Device 1 (GPU-.*): $(printf '%s\n%s' "$a" "$b" | sort -n | tr '\n' ' ' | sed 's/ $//')$" ||
	fail "get_device_client_list, device 1: $out"

# terminate_client B: "0", gone at once, memory back, later calls fail.
expect "terminate_client $srv $b" "0"
expect "get_client_list $srv" "$a"
ui ps | awk -v p="$b" '$1 == p { exit 1 }' || fail "ps still shows the terminated client"
client M2 init dev:1 meminfo
wait_for "$dir/M2.out" "^meminfo" || fail "M2 did not report its memory"
free2=$(awk '/^meminfo/ { print $3 }' "$dir/M2.out")
[ "$free2" = "$free0" ] || fail "the terminated client's memory is not back ($free0 before, $free2 after)"
# A client killed while it holds a CUDA array and a texture-less array
# object: the array's memory comes back too.
client AR init dev:1 array:16 "wait:$dir/goAR"
wait_for "$dir/AR.out" "^waiting" || fail "AR was not served"
grep -q "^array 16 CUDA_SUCCESS$" "$dir/AR.out" || fail "AR's array: $(cat "$dir/AR.out")"
client M3 init dev:1 meminfo
wait_for "$dir/M3.out" "^meminfo" || fail "M3 did not report its memory"
[ $((free0 - $(awk '/^meminfo/ { print $3 }' "$dir/M3.out"))) -ge $((16 << 20)) ] || fail "AR's 16 MiB array does not show"
kill -KILL "$(cpid AR)"
wait_until 10 eval '[ "$(ui "get_client_list $srv" | grep -c "^$(cpid AR)$")" = 0 ]' || fail "AR is still listed"
client M4 init dev:1 meminfo
wait_for "$dir/M4.out" "^meminfo" || fail "M4 did not report its memory"
[ "$(awk '/^meminfo/ { print $3 }' "$dir/M4.out")" = "$free0" ] ||
	fail "a killed client's array memory is not back ($free0 before, $(awk '/^meminfo/ { print $3 }' "$dir/M4.out") after)"
touch "$dir/goB"
wait_for "$dir/B.out" "^alloc 1 " || fail "B did not finish"
grep -Eq "^sync CUDA_ERROR_MPS_CLIENT_TERMINATED$" "$dir/B.out" ||
	fail "the terminated client's next call did not fail as terminated: $(cat "$dir/B.out")"
grep -Eq "^alloc 1 CUDA_ERROR_MPS_CLIENT_TERMINATED$" "$dir/B.out" ||
	fail "the terminated client's later calls did not fail: $(cat "$dir/B.out")"
grep -q "client $b: terminated by the control daemon (terminate_client)" "$CUDA_MPS_LOG_DIRECTORY/server.log" ||
	fail "server.log does not record the termination"
expect_err "terminate_client $srv $b" "has no client $b"

# A termination that lands while a pinned allocation is in the server (the
# stand-in takes 2 s to register 3 MiB): the allocation fails as
# terminated, not as out of memory.
client E init halloc:3
wait_for "$dir/E.out" "^init CUDA_SUCCESS" || fail "client E was not served"
sleep 0.5
expect "terminate_client $srv $(cpid E)" "0"
wait_for "$dir/E.out" "^halloc 3 " 10 || fail "E's allocation did not end: $(cat "$dir/E.out")"
grep -q "^halloc 3 CUDA_ERROR_MPS_CLIENT_TERMINATED$" "$dir/E.out" ||
	fail "a pinned allocation under way when its client was terminated: $(grep halloc "$dir/E.out")"

# A per-server limit applies to clients that come later, not to A.
expect "set_device_pinned_mem_limit $srv 0 16M" ""
client D init meminfo alloc:32 alloc:8 meminfo dev:1 meminfo
wait_until 10 eval '[ "$(grep -c "^meminfo" "$dir/D.out")" -ge 3 ]' || fail "client D did not finish: $(cat "$dir/D.out")"
[ "$(sed -n 2,5p "$dir/D.out" | tr '\n' ' ')" = "meminfo CUDA_SUCCESS 16777216 16777216 alloc 32 CUDA_ERROR_OUT_OF_MEMORY alloc 8 CUDA_SUCCESS meminfo CUDA_SUCCESS 8388608 16777216 " ] ||
	fail "the server's 16M limit was not applied to (or not shown to) a new client: $(cat "$dir/D.out")"
d1=$(awk '/^meminfo/ { n++; if (n == 3) print $4 }' "$dir/D.out")
t1=$(awk '/^meminfo/ { print $4 }' "$dir/M0.out")
[ -n "$d1" ] && [ "$d1" = "$t1" ] || fail "device 1 (no limit) shows $d1 bytes in all to D, $t1 to M0"
touch "$dir/goA"
wait_for "$dir/A.out" "^free " || fail "client A did not finish"
[ "$(sed -n 9,12p "$dir/A.out" | tr '\n' ' ')" = "dev 0 CUDA_SUCCESS alloc 16 CUDA_SUCCESS sync CUDA_SUCCESS free CUDA_SUCCESS " ] ||
	fail "A's own limit changed under it: $(cat "$dir/A.out")"
wait_until 5 eval 'test -z "$(ui "get_client_list $srv")"' || fail "clients still listed after they all left"

stop_daemon
finish
