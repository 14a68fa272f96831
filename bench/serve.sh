#!/bin/bash
# SPDX-License-Identifier: MIT
#
# bench/serve.sh [SECONDS] [N...]: the serving loop without a framework
# (bench/serve.c: an upload, 14 small kernels, a download and a
# synchronize a request, every answer checked) at N processes (default 1 8
# 16 32), natively, under NVIDIA MPS and under openmps in one run, and one
# table: requests/s, p50 / p99 latency, the clients' CPU a request and, for
# openmps, its service threads' CPU and the server's calls a request
# (get_metrics before and after), and the slowest process's first request
# (with SERVE_IDLE_MS set: the first after that long idle, bench/serve.c).
# With SERVE_GAP_US set, each process waits about that long between its
# requests (a lightly loaded service): the latencies are then those of
# requests that each come after a quiet spell. With
# OPENMPS_CLIENT_TRACE_WAITS_US set, the openmps clients log their waits
# that long or longer (src/client/waittrace.c), summed up per N after the
# table by bench/waits.py.
# Run after `make all bench` and
# `make build/tests/kernels.ptx` on a machine with a GPU.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
SECONDS_EACH=${1:-4}
shift 2>/dev/null
NS=${*:-1 8 16 32}
# shellcheck source=bench/daemons.sh
. "$ROOT/bench/daemons.sh"
gpu_script serve
BIN=$ROOT/$BUILD/bench
[ -x "$BIN/serve" ] || { echo "missing $BIN/serve: make bench"; exit 1; }

metric() {   # NAME: the openmps server's counter, summed over servers
	echo get_metrics | om_ctl 2>/dev/null |
		awk -v m="openmps_server_$1{" 'index($0, m) == 1 { s += $NF } END { printf "%.6f\n", s + 0 }'
}

# column LABEL RUNNER N: one cell; prints "LABEL N req/s p50 p99 cpu extra".
column() {
	local label=$1 runner=$2 n=$3 out c0 s0 c1 s1 extra="- / -"
	if [ "$label" = openmps ]; then
		c0=$(metric calls_total)
		s0=$(metric service_cpu_seconds_total)
	fi
	out=$("$runner" timeout -k 5 120 "$BIN/serve" "$n" "$SECONDS_EACH" 2>&1)
	if ! printf '%s\n' "$out" | grep -q '^req_per_s='; then
		printf '| %s | %s | failed: %s |\n' "$label" "$n" "$(printf '%s' "$out" | tail -1)"
		return
	fi
	val() { printf '%s\n' "$out" | sed -n "s/^$1=//p"; }
	if [ "$label" = openmps ]; then
		c1=$(metric calls_total)
		s1=$(metric service_cpu_seconds_total)
		# Requests counted as the clients ran them: rate × seconds.
		extra=$(awk -v c0="$c0" -v c1="$c1" -v s0="$s0" -v s1="$s1" -v r="$(val req_per_s)" -v t="$SECONDS_EACH" \
			'BEGIN { q = r * t; if (q < 1) q = 1; printf "%.1f / %.1f", (s1 - s0) * 1e6 / q, (c1 - c0) / q }')
	fi
	printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$label" "$n" "$(val req_per_s)" "$(val p50_us)" \
		"$(val p99_us)" "$(val first_us)" "$(val cpu_us_per_req)" "$extra"
	if [ "$label" = openmps ] && [ -n "${OPENMPS_CLIENT_TRACE_WAITS_US:-}" ]; then
		{ printf '\nopenmps, N = %s, waits of %s µs or more:\n\n' "$n" "$OPENMPS_CLIENT_TRACE_WAITS_US"
		  printf '%s\n' "$out" | python3 "$ROOT/bench/waits.py"; } >>"$WORK/waits.md"
	fi
}

echo "| column | N | req/s | p50 µs | p99 µs | first µs | client CPU µs/req | server CPU µs/req / calls/req |"
echo "|---|---:|---:|---:|---:|---:|---:|---|"
for n in $NS; do column native native "$n"; done
if start_mps >/dev/null; then
	for n in $NS; do
		if [ "$n" -gt 48 ]; then echo "| mps | $n | refused (48 clients at most) |"; continue; fi
		column mps under_mps "$n"
	done
	stop_mps >/dev/null
fi
if start_openmps >/dev/null; then
	for n in $NS; do column openmps under_openmps "$n"; done
	stop_openmps >/dev/null
fi
if [ -f "$WORK/waits.md" ]; then cat "$WORK/waits.md"; fi
