#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Replies longer than one packet (common/reply.h): with 60 clients,
# get_metrics is well past 64 KiB and comes whole (every client's memory
# sample, the last family's last line), ps -v lists every client, NVML's
# process list (src/nvml, read from the same metrics) has every client,
# and the connection goes on: a command after a long reply is answered on
# it. Replies under a packet are one packet, as before (control_cli).
#
#   usage: control_replies.sh BUILD_DIR

name=control_replies; . "$(dirname "$0")/c_lib.sh"
N=${N:-60}

start_daemon
k=0
while [ $k -lt $N ]; do
	client "c$k" init alloc:1 "wait:$dir/go"
	k=$((k + 1))
done
k=0
while [ $k -lt $N ]; do
	wait_for "$dir/c$k.out" "^waiting" 30 || fail "client $k was not served: $(cat "$dir/c$k.err")"
	k=$((k + 1))
done

ui get_metrics >"$dir/metrics" || fail "get_metrics failed"
bytes=$(wc -c <"$dir/metrics")
[ "$bytes" -gt 65536 ] || fail "get_metrics is $bytes bytes: too short to need packets"
n=$(grep -c '^openmps_client_memory_bytes{.*device="0"} 1048576$' "$dir/metrics")
[ "$n" = $N ] || fail "get_metrics has $n clients' memory samples (want $N)"
tail -n 1 "$dir/metrics" | grep -q '^openmps_server_vdevice_clients\|^openmps_[a-z_]*{.*} [0-9.e+-]*$' ||
	fail "get_metrics' last line: $(tail -n 1 "$dir/metrics")"
[ "$(tail -c 1 "$dir/metrics" | od -An -c | tr -d ' ')" = '\n' ] || fail "get_metrics does not end a line"

rows=$(ui "ps -v" | awk 'NR > 1' | wc -l)
[ "$rows" = $N ] || fail "ps -v lists $rows clients (want $N)"

# Two long replies and a short one on one connection.
printf 'get_metrics\nget_metrics\nget_server_list\n' | "$ctl" >"$dir/three" || fail "three commands on one connection"
[ "$(grep -c '^openmps_servers 1$' "$dir/three")" = 2 ] || fail "two get_metrics on one connection: $(grep -c '^openmps_servers' "$dir/three")"
tail -n 1 "$dir/three" | grep -q '^[0-9][0-9]*$' || fail "the short reply after two long ones: $(tail -n 1 "$dir/three")"

lib="$build/lib/nvml"
if [ -e "$lib/libnvidia-ml.so.1" ]; then
	env LD_LIBRARY_PATH="$lib:$build/lib" "$build/tests/system/c_nvml" >"$dir/nvml.out" 2>&1 ||
		fail "c_nvml: $(cat "$dir/nvml.out")"
	got=$(awk '$1 == "procs" && $2 == 0 { n = 0; for (i = 5; i <= NF; i++) if ($i ~ /:1048576:/) n++; print n }' "$dir/nvml.out")
	[ "$got" = $N ] || fail "NVML lists $got clients of 1 MiB (want $N): $(grep '^procs ' "$dir/nvml.out")"
fi

touch "$dir/go"
k=0
while [ $k -lt $N ]; do
	wait "$(cpid "c$k")" || fail "client $k failed: $(cat "$dir/c$k.err")"
	k=$((k + 1))
done
stop_daemon
finish
