#!/bin/sh
# SPDX-License-Identifier: MIT
#
# get_metrics: per-client metrics in the Prometheus text exposition format.
# Two clients do known work (one allocates 64 MiB and 8 MiB of pinned host
# memory, launches 37 kernels and copies 3 MiB each way; the other
# allocates 16 MiB and asks for memory it may not have); the figures must be
# exactly those, every family must have its HELP and TYPE once, before its
# samples, and every sample line must parse; the server's driver streams go
# back to none when the clients leave, their peak kept. GPU time: clients
# running kernels of known length (the stand-in's spin sleeps 1 ms per
# 2,000,000 cycles) show about that long, timing every launch
# (OPENMPS_GPU_TIME_SAMPLE=1) and one in 16 (the default); a rate that
# cannot be read is ignored with a warning.
#
#   usage: control_metrics.sh BUILD_DIR

name=control_metrics; . "$(dirname "$0")/c_lib.sh"
MiB=1048576

start_daemon
out=$(ui get_metrics)
echo "$out" | grep -q "^openmps_servers 0$" || fail "with no server: $out"

client A init alloc:64 halloc:8 launch:37 copy:3 "wait:$dir/goA"
client B init alloc:16 alloc:100000 "wait:$dir/goB"
wait_for "$dir/A.out" "^waiting" || fail "A was not served"
wait_for "$dir/B.out" "^waiting" || fail "B was not served"
a=$(cpid A); b=$(cpid B)
m=$(ui get_metrics); st=$?
[ $st -eq 0 ] || fail "get_metrics exited $st"
sample() {   # METRIC PID [EXTRA-LABEL]: the sample's value
	echo "$m" | grep "^$1{" | grep "pid=\"$2\"" | grep "${3:-}" | awk '{ print $NF }'
}
# A's memory: its 64 MiB, and the graphs the server may have made of its 37
# launches (charged to it, 16 KiB a kernel: docs/ARCHITECTURE.md).
within() { [ -n "$1" ] && [ "$1" -ge "$2" ] && [ "$1" -le $(($2 + 37 * 16384)) ]; }
within "$(sample openmps_client_memory_bytes "$a" 'device="0"')" $((64 * MiB)) ||
	fail "A's memory: $(sample openmps_client_memory_bytes "$a")"
within "$(sample openmps_client_memory_peak_bytes "$a" 'device="0"')" $((64 * MiB)) || fail "A's peak"
[ "$(sample openmps_client_pinned_host_bytes "$a")" -ge $((8 * MiB)) ] || fail "A's pinned host memory (8M and its staging): $(sample openmps_client_pinned_host_bytes "$a")"
[ "$(sample openmps_client_kernels_total "$a")" = 37 ] || fail "A's kernels: $(sample openmps_client_kernels_total "$a")"
[ "$(sample openmps_client_copy_bytes_total "$a" 'direction="h2d"')" -ge $((3 * MiB)) ] || fail "A's h2d bytes"
[ "$(sample openmps_client_copy_bytes_total "$a" 'direction="d2h"')" -ge $((3 * MiB)) ] || fail "A's d2h bytes"
[ "$(sample openmps_client_errors_total "$a")" = 0 ] || fail "A's errors: $(sample openmps_client_errors_total "$a")"
[ "$(sample openmps_client_memory_bytes "$b" 'device="0"')" = $((16 * MiB)) ] || fail "B's memory"
[ "$(sample openmps_client_errors_total "$b")" -ge 1 ] || fail "B's failed allocation is not counted"
[ "$(sample openmps_client_kernels_total "$b")" = 0 ] || fail "B's kernels"
echo "$m" | grep -q '^openmps_server_clients{server="[0-9]*"} 2$' || fail "server clients: $(echo "$m" | grep server_clients)"
# The devices by ordinal, so that the samples' device labels find a UUID.
echo "$m" | grep -q '^openmps_device_info{device="0",uuid="GPU-[0-9a-f-]\{36\}",name="openmps stand-in device 0"} 1$' ||
	fail "device info: $(echo "$m" | grep device_info)"
within "$(echo "$m" | sed -n 's/^openmps_server_memory_bytes{server="[0-9]*",device="0"} //p')" $((80 * MiB)) ||
	fail "server memory: $(echo "$m" | grep server_memory)"
# The service threads: 37 kernels launched by them (one by one, or as
# part of replayed chunks when the machine is busy: src/server/replay.h),
# time running calls within their CPU time (plus a tick's rounding),
# launch time within that.
srv() { echo "$m" | grep "^openmps_server_$1{" | awk '{ print $NF }'; }
[ $(($(srv launches_total) + $(srv replayed_kernels_total))) = 37 ] ||
	fail "server launches: $(srv launches_total) + $(srv replayed_kernels_total) replayed"
# By operation: the 37 launches, and their time within the time running calls.
op_calls=$(echo "$m" | grep '^openmps_server_op_calls_total{.*op="LAUNCH"}' | awk '{ print $NF }')
op_secs=$(echo "$m" | grep '^openmps_server_op_seconds_total{.*op="LAUNCH"}' | awk '{ print $NF }')
[ "$op_calls" = 37 ] || fail "launches by operation: $(echo "$m" | grep op_calls)"
awk -v s="$op_secs" -v run="$(srv serving_seconds_total)" 'BEGIN { exit !(s > 0 && s <= run) }' ||
	fail "launch time by operation: $op_secs of $(srv serving_seconds_total)"
[ -n "$(srv poll_seconds_total)" ] || fail "no openmps_server_poll_seconds_total"
for k in service_cpu_seconds_total serving_seconds_total launch_seconds_total turns_total wakeups_total; do
	[ -n "$(srv $k)" ] || fail "no openmps_server_$k"
done
awk -v cpu="$(srv service_cpu_seconds_total)" -v run="$(srv serving_seconds_total)" -v l="$(srv launch_seconds_total)" \
	-v t="$(srv turns_total)" 'BEGIN { exit !(cpu > 0 && run > 0 && l > 0 && l <= run && t >= 1) }' ||
	fail "service time: cpu $(srv service_cpu_seconds_total) running $(srv serving_seconds_total) launches $(srv launch_seconds_total) turns $(srv turns_total)"
# The format: HELP then TYPE once per family, before its samples; samples parse.
echo "$m" | awk '
	/^# HELP / { if (seen[$3]++) bad = bad " twice:" $3; help = $3; next }
	/^# TYPE / { if ($3 != help || ($4 != "gauge" && $4 != "counter")) bad = bad " type:" $3; fam = $3; next }
	/^#/ { next }
	{ split($1, p, "{"); if (p[1] != fam) bad = bad " outside:" p[1];
	  if ($0 !~ /^[a-z_]+(\{([a-z]+="[^"]*",?)*\})? [0-9.]+$/) bad = bad " parse:" $0 }
	END { if (bad != "") { print bad; exit 1 } }' || fail "not the exposition format: $(echo "$m" | head -5)"
# Driver streams: A's while it runs; none once the clients have gone, the
# peak kept.
streams() { echo "$1" | grep "^openmps_server_streams$2{" | awk '{ print $NF }'; }
now=$(streams "$m" ""); peak=$(streams "$m" _peak)
[ "${now:-0}" -ge 1 ] && [ "${peak:-0}" -ge "$now" ] || fail "server streams $now, peak $peak"
touch "$dir/goA" "$dir/goB"
gone() { m=$(ui get_metrics); [ "$(streams "$m" "")" = 0 ]; }
wait_until 10 gone || fail "the server still holds $(streams "$m" "") streams after its clients left"
[ "$(streams "$m" _peak)" -ge "$peak" ] || fail "the streams peak went from $peak to $(streams "$m" _peak)"
stop_daemon

# GPU time: 20 kernels of 1 ms each timed one by one, 64 sampled 1 in 16.
spins() { n=$1; s=""; while [ "$n" -gt 0 ]; do s="$s spin:1:32:2000000"; n=$((n - 1)); done; echo "$s"; }
within() {   # VALUE LO HI
	awk -v v="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(v != "" && v >= lo && v <= hi) }'
}
for rate in 1 16; do
	if [ $rate = 1 ]; then n=20; else n=64; fi
	OPENMPS_GPU_TIME_SAMPLE=$rate start_daemon
	# shellcheck disable=SC2046 # one step per word
	client "T$rate" init $(spins $n) "wait:$dir/goT$rate"
	wait_for "$dir/T$rate.out" "^waiting" 20 || fail "T$rate was not served"
	m=$(ui get_metrics)
	g=$(sample openmps_client_gpu_seconds_total "$(cpid "T$rate")")
	within "$g" "$(echo "$n" | awk '{ print $1 * 0.0009 }')" "$(echo "$n" | awk '{ print $1 * 0.004 + 0.02 }')" ||
		fail "$n kernels of 1 ms, one in $rate timed: $g s of GPU time"
	[ -n "${OPENMPS_TEST_VERBOSE:-}" ] && note "$n kernels of 1 ms, one in $rate timed: $g s"
	touch "$dir/goT$rate"
	stop_daemon
done
# A rate that cannot be read: said so, the default kept, clients served.
OPENMPS_GPU_TIME_SAMPLE=often start_daemon
client U init launch:3
wait_for "$dir/U.out" "^launch 3 CUDA_SUCCESS$" || fail "a client under an unreadable sampling rate: $(cat "$dir/U.out")"
grep -q "ignoring OPENMPS_GPU_TIME_SAMPLE=often (want 1..1000000)" "$CUDA_MPS_LOG_DIRECTORY/server.log" ||
	fail "OPENMPS_GPU_TIME_SAMPLE=often passed in silence"
stop_daemon
finish
