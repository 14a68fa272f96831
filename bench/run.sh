#!/bin/bash
# SPDX-License-Identifier: MIT
#
# bench/run.sh [--quick] [--table-from RESULTS.tsv]
#
# Measures the same workloads three ways on one GPU and prints one table side
# by side: native (time-sliced processes on the real driver), NVIDIA MPS, and
# openmps, with the ratios openmps/native and openmps/MPS. The method is the
# one of the reference measurements (shared/reference-bench): the programs in
# bench/ are driver-API clients linked against the stub libcuda, so the same
# binaries run in every column; only LD_LIBRARY_PATH and the daemon differ.
#
# Writes bench-log.txt (everything), bench-results.tsv (the raw cells) and
# bench-results.md (the table, the date, the device, the driver) into $OUT
# when it is set, else /tmp. A failing cell prints "fail" and the run goes
# on; both daemons are quit on every exit path. Never changes a GPU setting.
#
# --quick                fewer iterations (a minute or two instead of a few)
# --no-build             use the programs already built (no make)
# --table-from FILE      only print the table from a saved bench-results.tsv
#
# Environment: OPENMPS_NATIVE_LIB (default /usr/local/nvidia/lib64),
# NVIDIA_MPS_BIN (default /usr/local/nvidia/bin), BENCH_NATIVE_CLIENT_CAP
# (default 32: how many native contexts the clients row starts),
# BENCH_MAX_CLIENTS (default 300, 128 with --quick), BENCH_COLUMNS (default
# "native mps openmps": which columns run, to compare one column under other
# settings).
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)

QUICK=0
NO_BUILD=0
TABLE_FROM=
while [ $# -gt 0 ]; do
	case $1 in
	--quick) QUICK=1 ;;
	--no-build) NO_BUILD=1 ;;
	--table-from) TABLE_FROM=${2:-}; shift ;;
	-h|--help) sed -n '3,26p' "$0"; exit 0 ;;
	*) echo "usage: $0 [--quick] [--no-build] [--table-from RESULTS.tsv]" >&2; exit 2 ;;
	esac
	shift
done
[ -n "$TABLE_FROM" ] && TABLE_FROM=$(realpath -m -- "$TABLE_FROM")
OUTDIR=$(realpath -m -- "${OUT:-/tmp}")
cd "$ROOT" || exit 1

COLS=(${BENCH_COLUMNS:-native mps openmps})
declare -A COL_TITLE=([native]="native" [mps]="NVIDIA MPS" [openmps]="openmps")

# Rows: id|label|better ("lower" or "higher").
ROWS=(
	"spin1|spin kernels, 1 process: µs per kernel|lower"
	"spin2|spin kernels, 2 processes: µs per kernel|lower"
	"spin4|spin kernels, 4 processes: µs per kernel|lower"
	"spin8|spin kernels, 8 processes: µs per kernel|lower"
	"spin16|spin kernels, 16 processes: µs per kernel|lower"
	"spin16b|spin kernels, 16 processes, a burst of 500 each: µs per kernel|lower"
	"spin8d2|spin kernels, 8 processes in 2 fault domains: µs per kernel|lower"
	"spin8d8|spin kernels, 8 processes each in its own fault domain: µs per kernel|lower"
	"burst|launch enqueue, bursts of 1000: µs|lower"
	"sustained|launch enqueue, sustained: µs|lower"
	"roundtrip|launch + synchronize: µs|lower"
	"q_ctxdev|cuCtxGetDevice: ns|lower"
	"q_primary|cuDevicePrimaryCtxGetState: ns|lower"
	"q_funcattr|cuFuncGetAttribute: ns|lower"
	"q_limit|cuCtxGetLimit: ns|lower"
	"q_capturing|cuStreamIsCapturing: ns|lower"
	"q_errstr|cuGetErrorString: ns|lower"
	"h2d4|4-byte cuMemcpyHtoD: µs|lower"
	"memset4|4-byte cuMemsetD32: µs|lower"
	"d2d4|4-byte cuMemcpyDtoD: µs|lower"
	"d2h4|4-byte cuMemcpyDtoH: µs|lower"
	"h2d_pinned|256 MiB host→device, pinned: GB/s|higher"
	"d2h_pinned|256 MiB device→host, pinned: GB/s|higher"
	"h2d_pageable|256 MiB host→device, pageable: GB/s|higher"
	"d2h_pageable|256 MiB device→host, pageable: GB/s|higher"
	"idle_mib|GPU memory per idle client: MiB|lower"
	"clients|clients at once (context + 1 MiB + kernel)|higher"
)

declare -A VAL NOTE

# ---------------------------------------------------------------------------
# The table. Cells hold a number, "fail", "skip" or "-"; a note in
# parentheses may follow. Ratios are computed where both cells are numbers.

is_num() { [[ $1 =~ ^[0-9]+([.][0-9]+)?$ ]]; }

ratio() {
	if is_num "$1" && is_num "$2" && awk -v b="$2" 'BEGIN { exit !(b > 0) }'; then
		awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'
	else
		printf -- "-"
	fi
}

# openmps / the column's cell; none against a count that was only a cap.
ratio_of() {   # row col
	case ${NOTE[$1|$2]:-} in
	*capped*) printf -- "-" ;;
	*) ratio "${VAL[$1|openmps]:-}" "${VAL[$1|$2]:-}" ;;
	esac
}

cell() {
	local v=${VAL[$1|$2]:-"-"} n=${NOTE[$1|$2]:-}
	if [ -n "$n" ]; then printf '%s (%s)' "$v" "$n"; else printf '%s' "$v"; fi
}

print_table() {
	local r id label better
	printf '| measurement | better | %s | %s | %s | openmps/native | openmps/MPS |\n' \
		"${COL_TITLE[native]}" "${COL_TITLE[mps]}" "${COL_TITLE[openmps]}"
	printf '|---|---|---:|---:|---:|---:|---:|\n'
	for r in "${ROWS[@]}"; do
		IFS='|' read -r id label better <<<"$r"
		printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$label" "$better" \
			"$(cell "$id" native)" "$(cell "$id" mps)" "$(cell "$id" openmps)" \
			"$(ratio_of "$id" native)" "$(ratio_of "$id" mps)"
	done
}

load_tsv() {
	local id col v n
	while IFS=$'\t' read -r id col v n; do
		[ -z "$id" ] && continue
		case $id in \#*) continue ;; esac
		VAL[$id|$col]=$v
		NOTE[$id|$col]=$n
	done <"$1"
}

if [ -n "$TABLE_FROM" ]; then
	[ -r "$TABLE_FROM" ] || { echo "cannot read $TABLE_FROM" >&2; exit 2; }
	load_tsv "$TABLE_FROM"
	print_table
	exit 0
fi

# ---------------------------------------------------------------------------
# Set-up

mkdir -p "$OUTDIR"
LOG=$OUTDIR/bench-log.txt
TSV=$OUTDIR/bench-results.tsv
MD=$OUTDIR/bench-results.md
: >"$LOG"
exec > >(tee -a "$LOG") 2>&1

NATIVE_LIB=${OPENMPS_NATIVE_LIB:-/usr/local/nvidia/lib64}
MPS_BIN=${NVIDIA_MPS_BIN:-/usr/local/nvidia/bin}
BUILD=${BUILD:-build}
BIN=$ROOT/$BUILD/bench
PTX=$ROOT/$BUILD/tests/kernels.ptx
WORK=$(mktemp -d /tmp/openmps-bench.XXXXXX)
START=$SECONDS
BUDGET=380              # seconds: no step starts after this
HARD=420                # seconds: every step's time limit is cut to end by then (8 minutes in all)

if [ "$QUICK" = 1 ]; then
	MAX_CLIENTS=${BENCH_MAX_CLIENTS:-128}; LAUNCH_ARGS=(--quick); COPY_ARGS=(--quick)
else
	MAX_CLIENTS=${BENCH_MAX_CLIENTS:-300}; LAUNCH_ARGS=(); COPY_ARGS=()
fi
# The reference measurement's count (shared by both modes: the kernels take
# a tenth of a second, the processes' start the rest); the burst row's
# shorter runs show what starting up costs each process.
SPIN_ITERS=2000
SPIN_BURST=500
SPIN_CYCLES=100000
NATIVE_CAP=${BENCH_NATIVE_CLIENT_CAP:-32}
[ "$NATIVE_CAP" -gt "$MAX_CLIENTS" ] && NATIVE_CAP=$MAX_CLIENTS

echo "== openmps benchmark, $(date -u '+%Y-%m-%d %H:%M:%S UTC'), quick=$QUICK, work dir $WORK"

MPS_UP=0
OPENMPS_UP=0
declare -A NOTE_SERVER

# The clients of the measurement under way (their `timeout` wrappers), so an
# interrupted run can end them; each measurement empties it once it waited.
RUNNING=()

# Ends the clients still running, then the daemons. A pid is signalled only
# while it still runs one of our programs, so a recycled pid is never hit.
cleanup() {
	local p sig
	for sig in TERM KILL; do
		for p in "${RUNNING[@]}"; do
			grep -qF "$BIN/" "/proc/$p/cmdline" 2>/dev/null && kill -"$sig" "$p" 2>/dev/null
		done
		[ ${#RUNNING[@]} -gt 0 ] && [ $sig = TERM ] && sleep 2
	done
	stop_mps
	stop_openmps
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'echo "interrupted"; exit 130' INT TERM

set_cell() {   # row col value [note]
	VAL[$1|$2]=$3
	NOTE[$1|$2]=${4:-}
	printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${4:-}" >>"$TSV"
	echo "   -> $1 [$2] = $3${4:+ ($4)}"
}

out_of_time() { [ $((SECONDS - START)) -ge "$BUDGET" ]; }

# A step's time limit: $1 seconds, cut so the step ends by HARD (at least 10).
tl() {
	local left=$((HARD - (SECONDS - START)))
	[ "$left" -lt 10 ] && left=10
	if [ "$1" -lt "$left" ]; then echo "$1"; else echo "$left"; fi
}

gpu_mem_used() {   # MiB in use summed over the GPUs; empty on failure
	nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null |
		awk '{ s += $1; n++ } END { if (n) print s }'
}

# Sets ENVV to the environment of a client of column $1, for `env "${ENVV[@]}" cmd`
# (run that way, a background command's $! is the command itself).
col_env() {
	ENVV=("OPENMPS_TEST_PTX=$PTX")
	case $1 in
	native)
		[ -d "$NATIVE_LIB" ] && ENVV+=("LD_LIBRARY_PATH=$NATIVE_LIB")
		# An empty pipe directory: no MPS daemon can be found by accident.
		ENVV+=("CUDA_MPS_PIPE_DIRECTORY=$WORK/native-pipe") ;;
	mps)
		[ -d "$NATIVE_LIB" ] && ENVV+=("LD_LIBRARY_PATH=$NATIVE_LIB")
		ENVV+=("CUDA_MPS_PIPE_DIRECTORY=$WORK/mps-pipe" "CUDA_MPS_LOG_DIRECTORY=$WORK/mps-log") ;;
	openmps)
		ENVV+=("LD_LIBRARY_PATH=$ROOT/$BUILD/lib")
		ENVV+=("CUDA_MPS_PIPE_DIRECTORY=$WORK/om-pipe" "CUDA_MPS_LOG_DIRECTORY=$WORK/om-log") ;;
	openmps-daemon)
		# The daemon and its server find the real driver themselves.
		ENVV+=("CUDA_MPS_PIPE_DIRECTORY=$WORK/om-pipe" "CUDA_MPS_LOG_DIRECTORY=$WORK/om-log") ;;
	esac
}

# Runs a command (the rest of the arguments) as a client of column $1.
in_col() {
	col_env "$1"; shift
	env "${ENVV[@]}" "$@"
}

# ---------------------------------------------------------------------------
# Daemons

mps_ctl() { in_col mps timeout 20 "$MPS_BIN/nvidia-cuda-mps-control" "$@"; }
om_ctl() { in_col openmps-daemon timeout 20 "$ROOT/$BUILD/bin/openmps-control" "$@"; }

# The daemons' start and stop (bench/daemons.sh).
# shellcheck source=bench/daemons.sh
. "$ROOT/bench/daemons.sh"

# Says whether the daemon of a column has a server: a client that silently
# fell back to the real driver would otherwise be measured as openmps.
server_check() {
	local col=$1 list
	case $col in
	mps) list=$(echo get_server_list | mps_ctl 2>/dev/null) ;;
	openmps) list=$(echo get_server_list | om_ctl 2>/dev/null) ;;
	*) return 0 ;;
	esac
	if ! grep -qE '^[0-9]+$' <<<"$list"; then
		echo "WARNING: the $col daemon lists no server after a client ran: were the clients really served by it?"
		NOTE_SERVER[$col]="its daemon listed no server after the first client: the clients may not have used it"
		return 1
	fi
	return 0
}

# ---------------------------------------------------------------------------
# Measurements. Each takes the column and records its cells.

# Starts N spin processes, releases them together, records the mean time per kernel.
# m_spin COL N [DOMAINS]: N spin processes; with DOMAINS (openmps), process i
# runs in fault domain i mod DOMAINS (N: each its own), cell spinN'd'DOMAINS.
m_spin() {
	local col=$1 n=$2 nd=${3:-} dir=$WORK/spin-$1-$2${3:+d$3} i pids=() ready t sum=0 cnt=0 v lim dom row
	row=${SPIN_ROW:-spin$n${nd:+d$nd}}
	lim=$(tl 90)
	mkdir -p "$dir"
	col_env "$col"
	for i in $(seq 1 "$n"); do
		dom=()
		[ -n "$nd" ] && dom=(OPENMPS_FAULT_DOMAIN="bench$(( i % nd ))")
		env "${ENVV[@]}" "${dom[@]}" timeout -k 5 "$lim" "$BIN/spin" "$SPIN_CYCLES" "$SPIN_ITERS" "$dir/ready.$i" "$dir/go" \
			>"$dir/out.$i" 2>&1 &
		pids+=($!); RUNNING+=($!)
	done
	for t in $(seq 1 $((lim * 10))); do
		ready=$(find "$dir" -name 'ready.*' | wc -l)
		[ "$ready" -ge "$n" ] && break
		# Stop waiting once a process died before getting ready.
		for i in $(seq 1 "$n"); do
			if [ ! -e "$dir/ready.$i" ] && ! kill -0 "${pids[$((i - 1))]}" 2>/dev/null; then
				t=0; break
			fi
		done
		[ "$t" -eq 0 ] && break
		sleep 0.1
	done
	touch "$dir/go"
	for i in "${pids[@]}"; do wait "$i"; done
	RUNNING=()
	for i in $(seq 1 "$n"); do
		v=$(sed -n 's/^per_kernel_us=//p' "$dir/out.$i")
		if is_num "$v"; then
			sum=$(awk -v s="$sum" -v v="$v" 'BEGIN { print s + v }'); cnt=$((cnt + 1))
		else
			echo "   spin process $i of $n ($col):"; sed 's/^/      /' "$dir/out.$i"
		fi
	done
	if [ "$cnt" -eq "$n" ]; then
		set_cell "$row" "$col" "$(awk -v s="$sum" -v n="$n" 'BEGIN { printf "%.1f", s / n }')"
	else
		set_cell "$row" "$col" fail "$cnt/$n ran"
		return 1
	fi
}

# Runs one program and records its key=value lines as cells (key minus unit suffix -> row).
m_keys() {   # col name timeout program args... ; rows are given in KEYMAP
	local col=$1 name=$2 limit=$3 out rc key row v; shift 3
	out=$WORK/$name-$col.out
	col_env "$col"
	env "${ENVV[@]}" timeout -k 5 "$(tl "$limit")" "$@" >"$out" 2>&1 &
	RUNNING=($!)
	wait $!
	rc=$?
	RUNNING=()
	sed 's/^/   /' "$out"
	for key in "${!KEYMAP[@]}"; do
		row=${KEYMAP[$key]}
		v=$(sed -n "s/^$key=//p" "$out")
		if is_num "$v"; then
			set_cell "$row" "$col" "$v"
		else
			set_cell "$row" "$col" fail "$({ [ "$rc" = 124 ] || [ "$rc" = 137 ]; } && echo timeout || echo "rc $rc")"
		fi
	done
	return "$rc"
}

m_launch() {
	declare -A KEYMAP=([burst_us]=burst [sustained_us]=sustained [roundtrip_us]=roundtrip [h2d4_us]=h2d4 [memset4_us]=memset4 [d2d4_us]=d2d4 [d2h4_us]=d2h4)
	m_keys "$1" launch 120 "$BIN/launch" "${LAUNCH_ARGS[@]}"
}

# What the queries frameworks make every step cost the caller (bench/queries.c).
m_queries() {
	declare -A KEYMAP=([ctx_get_device_ns]=q_ctxdev [primary_ctx_get_state_ns]=q_primary
		[func_get_attribute_ns]=q_funcattr [ctx_get_limit_ns]=q_limit [stream_is_capturing_ns]=q_capturing
		[get_error_string_ns]=q_errstr)
	m_keys "$1" queries 120 "$BIN/queries"
}

m_copy() {
	declare -A KEYMAP=([h2d_pinned_gbs]=h2d_pinned [d2h_pinned_gbs]=d2h_pinned
		[h2d_pageable_gbs]=h2d_pageable [d2h_pageable_gbs]=d2h_pageable)
	m_keys "$1" copy 120 "$BIN/copy" "${COPY_ARGS[@]}"
}

# 8 idle clients: GPU memory used while they wait, minus before, per client.
m_idle() {
	local col=$1 dir=$WORK/idle-$1 n=8 i pids=() before during t ready alive
	mkdir -p "$dir"
	before=$(gpu_mem_used)
	if ! is_num "${before:-x}"; then
		set_cell idle_mib "$col" fail "nvidia-smi"
		return 1
	fi
	col_env "$col"
	for i in $(seq 1 $n); do
		env "${ENVV[@]}" timeout -k 5 "$(tl 90)" "$BIN/idle" "$dir/ready.$i" "$dir/go" >"$dir/out.$i" 2>&1 &
		pids+=($!); RUNNING+=($!)
	done
	for t in $(seq 1 450); do
		ready=$(find "$dir" -name 'ready.*' | wc -l)
		[ "$ready" -ge $n ] && break
		# Every client that is not ready has exited: none will be.
		if [ $((t % 10)) -eq 0 ]; then
			alive=0
			for i in "${pids[@]}"; do kill -0 "$i" 2>/dev/null && alive=$((alive + 1)); done
			[ "$alive" -le "$ready" ] && break
		fi
		sleep 0.1
	done
	sleep 2
	during=$(gpu_mem_used)
	touch "$dir/go"
	for i in "${pids[@]}"; do wait "$i"; done
	RUNNING=()
	echo "   GPU memory used: $before MiB before, $during MiB with $ready idle clients"
	if [ "$ready" -ne $n ] || ! is_num "${during:-x}"; then
		for i in $(seq 1 $n); do sed "s/^/   client $i: /" "$dir/out.$i"; done
		set_cell idle_mib "$col" fail "$ready/$n ready"
		return 1
	fi
	set_cell idle_mib "$col" "$(awk -v a="$before" -v b="$during" -v n=$n 'BEGIN { printf "%.1f", (b - a) / n }')"
}

# Up to $2 clients at once: how many got a context, ran a kernel and verified it.
m_clients() {
	local col=$1 max=$2 dir=$WORK/clients-$1 i pids=() t ok fail alive lim
	lim=$(tl 150)
	mkdir -p "$dir"
	col_env "$col"
	for i in $(seq 1 "$max"); do
		env "${ENVV[@]}" timeout -k 5 "$lim" "$BIN/clients" "$dir" "$i" "$dir/go" >"$dir/out.$i" 2>&1 &
		pids+=($!); RUNNING+=($!)
	done
	# Wait until every client reported, or none is left that could.
	for t in $(seq 1 $((lim * 10 - 100))); do
		ok=$(find "$dir" -name 'ok.*' | wc -l)
		fail=$(find "$dir" -name 'fail.*' | wc -l)
		[ $((ok + fail)) -ge "$max" ] && break
		if [ $((t % 20)) -eq 0 ]; then
			alive=0
			for i in "${pids[@]}"; do kill -0 "$i" 2>/dev/null && alive=$((alive + 1)); done
			# Those that reported ok wait alive; anyone else alive may still report.
			[ "$alive" -le "$ok" ] && break
		fi
		sleep 0.1
	done
	sleep 1
	ok=$(find "$dir" -name 'ok.*' | wc -l)
	fail=$(find "$dir" -name 'fail.*' | wc -l)
	echo "   $ok of $max clients working at once, $fail refused; reasons:"
	cat "$dir"/fail.* 2>/dev/null | sort | uniq -c | sort -rn | head -5 | sed 's/^/     /'
	touch "$dir/go"
	for i in "${pids[@]}"; do wait "$i"; done
	RUNNING=()
	if [ "$ok" -eq 0 ]; then
		set_cell clients "$col" fail "0/$max"
		return 1
	fi
	if [ "$ok" -eq "$max" ]; then
		set_cell clients "$col" "$ok" "all started$([ "$col" = native ] && echo ", capped")"
	else
		set_cell clients "$col" "$ok" "of $max"
	fi
}

# ---------------------------------------------------------------------------
# Build what is missing (quietly when it is up to date).

CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
if [ "$NO_BUILD" = 1 ]; then
	echo "== build: skipped (--no-build)"
elif echo "== build" && ! make -s -j16 bench >/dev/null 2>&1; then
	# The programs need nothing of openmps: build them directly if make cannot.
	echo "make bench failed: building the programs directly"
	mkdir -p "$BIN"
	for b in spin launch queries copy idle clients; do
		cc -O2 -std=c11 -D_GNU_SOURCE -Wall -I"$CUDA_HOME/include" -o "$BIN/$b" "bench/$b.c" bench/bench.c \
			-L"$CUDA_HOME/lib64/stubs" -lcuda || echo "cannot build $b"
	done
fi
if [ "$NO_BUILD" = 0 ]; then
	make -s -j16 all >/dev/null 2>&1 || make -j16 all || echo "make all failed: the openmps column will fail"
fi
if [ "$NO_BUILD" = 0 ] || [ ! -s "$PTX" ]; then
	make -s "$BUILD/tests/kernels.ptx" >/dev/null 2>&1 ||
		{ mkdir -p "$(dirname "$PTX")" && "$CUDA_HOME/bin/nvcc" -ptx -arch=compute_90 -o "$PTX" tests/kernels/kernels.cu; }
fi
for b in spin launch queries copy idle clients; do
	[ -x "$BIN/$b" ] || { echo "missing $BIN/$b: cannot benchmark"; exit 1; }
done
[ -s "$PTX" ] || { echo "missing $PTX: cannot benchmark"; exit 1; }

GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1)
GPU_DRIVER=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n1)
echo "== device: ${GPU_NAME:-unknown}, driver ${GPU_DRIVER:-unknown}"

# ---------------------------------------------------------------------------
# The three columns, one after the other, each with its daemon up only for its run.

run_column() {
	local col=$1 n id r
	echo
	echo "== column: ${COL_TITLE[$col]} ($(( SECONDS - START )) s elapsed)"
	case $col in
	mps) start_mps || { mark_column "$col" fail "MPS did not start"; stop_mps; return; } ;;
	openmps) start_openmps || { mark_column "$col" fail "daemon did not start"; stop_openmps; return; } ;;
	esac
	for n in 1 2 4 8 16; do
		if out_of_time; then set_cell "spin$n" "$col" skip time; continue; fi
		echo "-- $col: $n spin processes x $SPIN_ITERS kernels of $SPIN_CYCLES cycles"
		m_spin "$col" "$n" || restart_daemon "$col"
		[ "$n" = 1 ] && server_check "$col"
	done
	if out_of_time; then
		set_cell spin16b "$col" skip time
	else
		echo "-- $col: 16 spin processes x $SPIN_BURST kernels"
		SPIN_ITERS=$SPIN_BURST SPIN_ROW=spin16b m_spin "$col" 16 || restart_daemon "$col"
	fi
	# What fault domains cost: the same 8 processes over 2 and 8 servers.
	for n in 2 8; do
		if [ "$col" != openmps ]; then set_cell "spin8d$n" "$col" skip "no domains"; continue; fi
		if out_of_time; then set_cell "spin8d$n" "$col" skip time; continue; fi
		echo "-- $col: 8 spin processes in $n fault domains"
		m_spin "$col" 8 "$n" || restart_daemon "$col"
	done
	for r in launch queries copy idle; do
		if out_of_time; then
			case $r in
			launch) for id in burst sustained roundtrip h2d4 memset4 d2d4 d2h4; do set_cell $id "$col" skip time; done ;;
			queries) for id in q_ctxdev q_primary q_funcattr q_limit q_capturing q_errstr; do
				set_cell $id "$col" skip time; done ;;
			copy) for id in h2d_pinned d2h_pinned h2d_pageable d2h_pageable; do set_cell $id "$col" skip time; done ;;
			idle) set_cell idle_mib "$col" skip time ;;
			esac
			continue
		fi
		echo "-- $col: $r"
		"m_$r" "$col" || restart_daemon "$col"
	done
	if out_of_time; then
		set_cell clients "$col" skip time
	else
		echo "-- $col: clients at once"
		if [ "$col" = native ]; then m_clients "$col" "$NATIVE_CAP"; else m_clients "$col" "$MAX_CLIENTS"; fi
		# The clients run was the last in this column; its failure needs no restart.
	fi
	case $col in
	mps) stop_mps ;;
	openmps) stop_openmps ;;
	esac
}

mark_column() {   # col value note
	local r id
	for r in "${ROWS[@]}"; do
		id=${r%%|*}
		set_cell "$id" "$1" "$2" "$3"
	done
}

# After a failure the daemon may be wedged: give the next step a fresh one.
restart_daemon() {
	case $1 in
	mps) echo "   (restarting NVIDIA MPS)"; stop_mps; start_mps ;;
	openmps) echo "   (restarting openmps)"; stop_openmps; start_openmps ;;
	esac
	return 0
}

: >"$TSV"
for c in "${COLS[@]}"; do
	run_column "$c"
done

# ---------------------------------------------------------------------------
# Report

for c in "${!NOTE_SERVER[@]}"; do
	echo "WARNING: ${COL_TITLE[$c]}: ${NOTE_SERVER[$c]}"
done
{
	echo "# openmps benchmark"
	echo
	echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	echo "- device: ${GPU_NAME:-unknown}"
	echo "- driver: ${GPU_DRIVER:-unknown}"
	echo "- openmps: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo "unknown revision")"
	echo "- mode: $([ "$QUICK" = 1 ] && echo quick || echo full); spin: one block of 128 threads, $SPIN_CYCLES cycles, $SPIN_ITERS kernels per process"
	echo
	print_table
	echo
	echo "Notes: ratios are openmps divided by the other column (for \"lower is better\" rows, below 1 means"
	echo "openmps is faster). GB/s is 10^9 bytes/s, best of runs. Memory per idle client is the rise in"
	echo "nvidia-smi's memory.used with 8 idle clients, divided by 8 (a daemon's server is already running)."
	echo "The native clients row starts only $NATIVE_CAP processes (each holds a real context): it is a cap, not a limit."
	for c in "${!NOTE_SERVER[@]}"; do echo "WARNING: ${COL_TITLE[$c]}: ${NOTE_SERVER[$c]}"; done
} >"$MD"
echo
cat "$MD"
echo
echo "results: $MD, log: $LOG ($(( SECONDS - START )) s)"
