#!/bin/bash
# SPDX-License-Identifier: MIT
#
# bench/mtlaunch.sh [SECONDS]
#
# Launch throughput as threads and processes are added: bench/mtlaunch on
# the real driver with 1..16 threads in one context, in contexts of their
# own and in green contexts of their own; then 1..16 processes of one
# thread each, natively and under openmps (with the openmps server's CPU
# time per launch). Prints one table. Needs `make bench` and a GPU.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SECS=${1:-2}
NATIVE_LIB=${OPENMPS_NATIVE_LIB:-/usr/local/nvidia/lib64}
BIN=$ROOT/build/bench/mtlaunch
export OPENMPS_TEST_PTX=$ROOT/build/tests/kernels.ptx
key() { sed -n "s/^$1=//p"; }

printf '%-8s %-4s %14s %14s %12s\n' mode n launches/s slowest/s cpu_us
for m in same own green; do
	for n in 1 2 4 8 16; do
		o=$(LD_LIBRARY_PATH=$NATIVE_LIB "$BIN" "$n" "$SECS" "$m" 2>&1)
		printf '%-8s %-4s %14s %14s %12s\n' "threads-$m" "$n" "$(key launches_per_s <<<"$o")" \
			"$(key slowest_thread_per_s <<<"$o")" "$(key cpu_us_per_launch <<<"$o")"
		grep -m1 '^error' <<<"$o"
	done
done

# N processes at once; prints the sum of their rates and their slowest,
# then the openmps server's CPU time per launch when SERVER is set.
PROCS=$(mktemp)
trap 'rm -f "$PROCS"' EXIT
cat >"$PROCS" <<'INNER'
n=$1 dir=$(mktemp -d) pid= c0=0 c1=0
if [ -n "${SERVER:-}" ]; then
	"$BIN" 1 0.1 same >/dev/null || exit 1
	pid=$(pgrep -n openmps-server)
	c0=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
fi
for i in $(seq "$n"); do "$BIN" 1 "$SECS" same >"$dir/$i" 2>&1 & done
wait
[ -n "$pid" ] && c1=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
cat "$dir"/* | awk -F= -v c="$((c1 - c0))" -v hz="$(getconf CLK_TCK)" -v t="$SECS" -v srv="${SERVER:-}" '
	/^launches_per_s/ { s += $2; if (m == "" || $2 < m) m = $2 }
	/^error/ { print > "/dev/stderr" }
	END { printf "%.0f %.0f %s\n", s, m, (srv && s > 0) ? sprintf("%.2f", c / hz / (s * t) * 1e6) : "-" }'
rm -rf "$dir"
INNER
export BIN SECS
for n in 1 2 4 8 16; do
	read -r s m c < <(LD_LIBRARY_PATH=$NATIVE_LIB bash "$PROCS" "$n")
	printf '%-8s %-4s %14s %14s %12s\n' procs-native "$n" "$s" "$m" "$c"
done
for n in 1 2 4 8 16; do
	read -r s m c < <(SERVER=1 OPENMPS_DRIVER=$NATIVE_LIB/libcuda.so.1 \
		"$ROOT/tests/system/with-openmps.sh" "$ROOT/build" bash "$PROCS" "$n")
	printf '%-8s %-4s %14s %14s %12s\n' procs-openmps "$n" "$s" "$m" "$c"
done
