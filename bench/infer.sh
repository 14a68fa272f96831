#!/bin/bash
# SPDX-License-Identifier: MIT
#
# bench/infer.sh [--quick] [--no-build] [--dry-run] [--ns "1 2 4"] [--models "cnn transformer"]
#                [--table-from FILE]
#
# What an interactive inference service gets from one shared GPU, measured
# three ways in one run and printed side by side: native (time-sliced
# processes on the real driver), NVIDIA MPS and openmps. For each model
# (a small CNN, a small transformer) and each process count N, N processes
# answer batch-1 requests for a fixed window (bench/infer.py: host input ->
# GPU -> forward -> result back to the host, each answer checked once
# against the CPU); the table gives requests/s for all N together and the
# p50/p99 latency of one request. NVIDIA MPS refuses clients past its limit
# (48 on a Hopper): such a cell reads "refused".
#
# With the daemons up it also measures their servers' CPU: the server's CPU
# use while 16 clients sleep (a context and 1 MiB each), and the server's
# CPU time per forwarded call while one client makes 200,000 asynchronous
# launches of an empty kernel, then 20,000 launch + synchronize round trips,
# then 5,000 launches of a ~100 µs kernel each followed by a synchronize
# (bench/calls.c; wall and client CPU time in every column, natively too).
#
# Each column is set up as bench/run.sh does it: native finds the real
# driver and an empty pipe directory; NVIDIA MPS and openmps each get their
# daemon with private pipe and log directories under /tmp, up only for
# their column and quit on every exit path. Never changes a GPU setting.
#
# Writes infer-log.txt (everything), infer-results.tsv (every cell) and
# infer-results.md (the tables, the date, the device, the driver) into $OUT
# when it is set, else /tmp. After the build the run keeps to INFER_BUDGET_S
# seconds (default 400; a cell under way may end up to a minute later): each
# model and column gets its share, and a cell that would start after it
# reads "skip". Model by model, so that a short budget costs the last
# model's cells first rather than one column of every model.
#
# --quick            N = 1 8 16 32 64, the CNN only (a few minutes)
# --no-build         use the programs already built (no make)
# --dry-run          print the plan and the environments, run nothing
# --ns LIST          the process counts (default 1 2 4 8 16 32 48 64)
# --models LIST      cnn, transformer (default both); "fake" runs without torch
# --table-from FILE  only print the tables from a saved infer-results.tsv
#
# Environment: PYTHON (default python3, with torch), OPENMPS_NATIVE_LIB
# (default /usr/local/nvidia/lib64), NVIDIA_MPS_BIN (default
# /usr/local/nvidia/bin), INFER_NS and INFER_MODELS (as the flags),
# INFER_WINDOW_S (default 2), INFER_WARMUP (default 50), INFER_BUDGET_S,
# INFER_IDLE_CLIENTS (default 16), INFER_LAUNCHES (default 200000),
# INFER_SYNCS (default 20000), INFER_SPINS (default 5000), INFER_DEVICE
# (default cuda), INFER_COLUMNS (default "native mps openmps": which columns
# run, to compare one column under other settings), INFER_SERVER_ROWS
# (default 1; 0 skips the idle and per-call server-CPU rows),
# INFER_CALL_STATS (default 0; 1: openmps's clients count their calls and
# time their waits for replies, OPENMPS_CALL_STATS, and the tables say what
# a request of each cell waited for, by function, and the naps its waits
# for the GPU took; the counting costs a
# little, so the figures of such a run are not the headline's),
# INFER_GPU_SPANS (default 0; 1: each request's span on the GPU, between
# events of its framework recorded before and after it, and the rest of
# its latency, p50/p90/p99 in the log: whether a tail is on the GPU or on
# the way there; two event records a request),
# INFER_REPEAT (default 1; R: each model's columns run R times in turn,
# native, MPS, openmps, native, ..., and each cell is the median of its R
# passes, every pass listed below the table: runs of one setting on one
# machine differ by 10-15%, more than many of the differences measured),
# INFER_KEEP_LOGS (default 0; 1: the openmps daemon's and servers' logs
# are copied into $OUT/openmps-logs at the end, whole: with
# OPENMPS_LOG_LEVEL=debug in the environment, what the servers said),
# INFER_GATE (a path: it exists while a cell's window is open, for a
# sampler that keeps only the window, bench/cpuprof.c's CPUPROF_GATE),
# INFER_PROBE (default 1; 0: the daemons are not asked for their servers
# and metrics at a window's ends, so the server columns stay empty).
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd -P)

QUICK=0
NO_BUILD=0
DRY_RUN=0
TABLE_FROM=
NS_ARG=${INFER_NS:-}
MODELS_ARG=${INFER_MODELS:-}
while [ $# -gt 0 ]; do
	case $1 in
	--quick) QUICK=1 ;;
	--no-build) NO_BUILD=1 ;;
	--dry-run) DRY_RUN=1 ;;
	--ns) NS_ARG=${2:-}; shift ;;
	--models) MODELS_ARG=${2:-}; shift ;;
	--table-from) TABLE_FROM=${2:-}; shift ;;
	-h|--help) sed -n '3,/^set -u/p' "$0" | sed '$d'; exit 0 ;;
	*) echo "usage: $0 [--quick] [--no-build] [--dry-run] [--ns LIST] [--models LIST] [--table-from FILE]" >&2
	   exit 2 ;;
	esac
	shift
done
[ -n "$TABLE_FROM" ] && TABLE_FROM=$(realpath -m -- "$TABLE_FROM")
OUTDIR=$(realpath -m -- "${OUT:-/tmp}")
cd "$ROOT" || exit 1
PYTHON=${PYTHON:-python3}

if [ -n "$TABLE_FROM" ]; then
	[ -r "$TABLE_FROM" ] || { echo "cannot read $TABLE_FROM" >&2; exit 2; }
	exec "$PYTHON" bench/infer.py table "$TABLE_FROM"
fi

COLS=(${INFER_COLUMNS:-native mps openmps})
declare -A COL_TITLE=([native]="native" [mps]="NVIDIA MPS" [openmps]="openmps")
if [ "$QUICK" = 1 ]; then
	NS_DEFAULT="1 8 16 32 64"; MODELS_DEFAULT="cnn"
else
	NS_DEFAULT="1 8 16 32 64"; MODELS_DEFAULT="cnn decode gemmfft"
fi
read -r -a NS <<<"${NS_ARG:-$NS_DEFAULT}"
read -r -a MODELS <<<"${MODELS_ARG:-$MODELS_DEFAULT}"
for n in "${NS[@]}"; do
	[[ $n =~ ^[1-9][0-9]*$ ]] || { echo "not a process count: $n" >&2; exit 2; }
done
for m in "${MODELS[@]}"; do
	case $m in cnn|transformer|decode|gemmfft|fake) ;;
	*) echo "unknown model: $m (cnn, transformer, decode, gemmfft, fake)" >&2; exit 2 ;; esac
done
WINDOW=${INFER_WINDOW_S:-2}
WARMUP=${INFER_WARMUP:-50}
BUDGET=${INFER_BUDGET_S:-400}
IDLE_N=${INFER_IDLE_CLIENTS:-16}
SERVER_ROWS=${INFER_SERVER_ROWS:-1}
LAUNCHES=${INFER_LAUNCHES:-200000}
SYNCS=${INFER_SYNCS:-20000}
SPINS=${INFER_SPINS:-5000}
DEVICE=${INFER_DEVICE:-cuda}
NATIVE_LIB=${OPENMPS_NATIVE_LIB:-/usr/local/nvidia/lib64}
MPS_BIN=${NVIDIA_MPS_BIN:-/usr/local/nvidia/bin}
BUILD=${BUILD:-build}
BIN=$ROOT/$BUILD/bench
PTX=$ROOT/$BUILD/tests/kernels.ptx
REPEAT=${INFER_REPEAT:-1}
case $REPEAT in ''|*[!0-9]*|0) echo "INFER_REPEAT is a whole number from 1, not '$REPEAT'" >&2; exit 2 ;; esac
NSLOTS=$(( ${#COLS[@]} * ${#MODELS[@]} * REPEAT ))
NEED_TORCH=0
for m in "${MODELS[@]}"; do [ "$m" = fake ] || NEED_TORCH=1; done

# The real driver, for the openmps server (and its clients' pass-through).
REAL_DRIVER=
[ -e "$NATIVE_LIB/libcuda.so.1" ] && REAL_DRIVER=$NATIVE_LIB/libcuda.so.1

# Sets ENVV to the environment of a process of column $1, for
# `env "${ENVV[@]}" cmd` (run that way, a background command's $! is the
# command itself). Python keeps the LD_LIBRARY_PATH it came with, after ours.
col_env() {
	local llp=${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	ENVV=("OPENMPS_TEST_PTX=$PTX")
	case $1 in
	native)
		[ -d "$NATIVE_LIB" ] && ENVV+=("LD_LIBRARY_PATH=$NATIVE_LIB$llp")
		# An empty pipe directory: no MPS daemon can be found by accident.
		ENVV+=("CUDA_MPS_PIPE_DIRECTORY=$WORK/native-pipe") ;;
	mps)
		[ -d "$NATIVE_LIB" ] && ENVV+=("LD_LIBRARY_PATH=$NATIVE_LIB$llp")
		ENVV+=("CUDA_MPS_PIPE_DIRECTORY=$WORK/mps-pipe" "CUDA_MPS_LOG_DIRECTORY=$WORK/mps-log") ;;
	openmps)
		ENVV+=("LD_LIBRARY_PATH=$ROOT/$BUILD/lib$llp")
		ENVV+=("CUDA_MPS_PIPE_DIRECTORY=$WORK/om-pipe" "CUDA_MPS_LOG_DIRECTORY=$WORK/om-log")
		[ "${INFER_CALL_STATS:-0}" = 1 ] && ENVV+=("OPENMPS_CALL_STATS=$WORK/callstats/s")
		[ -n "$REAL_DRIVER" ] && ENVV+=("OPENMPS_DRIVER=$REAL_DRIVER") ;;
	openmps-daemon)
		# The daemon and its server find the real driver (OPENMPS_DRIVER says which).
		ENVV+=("CUDA_MPS_PIPE_DIRECTORY=$WORK/om-pipe" "CUDA_MPS_LOG_DIRECTORY=$WORK/om-log")
		[ -n "$REAL_DRIVER" ] && ENVV+=("OPENMPS_DRIVER=$REAL_DRIVER") ;;
	esac
}

# The folder of openmps's libcuda.so.1 as /proc/PID/maps will name it: a
# child of the openmps column must map it (and not the real driver, which
# would mean it found no daemon and passed through); the others must not.
# Set again after the build, which may have made the folder.
om_libdir() {
	OM_LIBDIR=$(cd "$ROOT/$BUILD/lib" 2>/dev/null && pwd -P)
	OM_LIBDIR=${OM_LIBDIR:-$ROOT/$BUILD/lib}/
}
om_libdir

# A decode request is 32 tokens (~0.2 s alone): fewer of them warm up, in a
# longer window.
model_warmup() { [ "$1" = decode ] && echo $(( WARMUP < 3 ? WARMUP : 3 )) || echo "$WARMUP"; }
model_window() { [ "$1" = decode ] && awk -v w="$WINDOW" 'BEGIN { print (w < 4 ? 4 : w) }' || echo "$WINDOW"; }

infer_args() {   # col model budget_s: the arguments of one launcher
	INFER_ARGS=(bench/infer.py run --mode "$1" --model "$2" --n "${NS[*]}" --window "$(model_window "$2")"
		--warmup "$(model_warmup "$2")" --device "$DEVICE" --init-timeout 120 --budget-s "$3")
	# Its control program, for the servers' CPU and calls in each window.
	case $1 in
	mps) INFER_ARGS+=(--ctl "env CUDA_MPS_PIPE_DIRECTORY=$WORK/mps-pipe CUDA_MPS_LOG_DIRECTORY=$WORK/mps-log $MPS_BIN/nvidia-cuda-mps-control") ;;
	openmps) INFER_ARGS+=(--ctl "env CUDA_MPS_PIPE_DIRECTORY=$WORK/om-pipe CUDA_MPS_LOG_DIRECTORY=$WORK/om-log $ROOT/$BUILD/bin/openmps-control") ;;
	esac
	if [ "$1" = openmps ]; then
		INFER_ARGS+=(--expect-libcuda "$OM_LIBDIR")
	else
		INFER_ARGS+=(--forbid-libcuda "$OM_LIBDIR")
	fi
}

if [ "$DRY_RUN" = 1 ]; then
	WORK=/tmp/openmps-infer.XXXXXX
	echo "plan: columns ${COLS[*]}; models ${MODELS[*]}; N = ${NS[*]}; window $WINDOW s, warm-up $WARMUP requests,"
	echo "      device $DEVICE, budget $BUDGET s after the build (a share of $(( BUDGET / NSLOTS )) s per model and column)"
	echo "      results to $OUTDIR/infer-results.{md,tsv}, log $OUTDIR/infer-log.txt; python: $PYTHON"
	echo "      server CPU: $IDLE_N idle clients for 5 s; $LAUNCHES async launches; $SYNCS launch + synchronize;"
	echo "      $SPINS ~100 µs kernels + synchronize"
	[ -n "$REAL_DRIVER" ] || echo "      note: no $NATIVE_LIB/libcuda.so.1: the openmps server finds the driver itself"
	[ -x "$MPS_BIN/nvidia-cuda-mps-control" ] || echo "      note: no $MPS_BIN/nvidia-cuda-mps-control: the MPS column will fail"
	for c in "${COLS[@]}"; do
		echo "column ${COL_TITLE[$c]}:"
		case $c in
		mps) col_env mps; echo "  start: env ${ENVV[*]:1} $MPS_BIN/nvidia-cuda-mps-control -d" ;;
		openmps) col_env openmps-daemon; echo "  start: env ${ENVV[*]:1} $BUILD/bin/openmps-control -d" ;;
		esac
		col_env "$c"
		if [ "$c" != native ]; then
			echo "  server CPU: env ${ENVV[*]} $BUILD/bench/hold READY GO  (x $IDLE_N, then 5 s of /proc/SERVER/stat)"
		fi
		echo "  calls:      env ${ENVV[*]} $BUILD/bench/calls launch $LAUNCHES [SERVER]; ... sync $SYNCS; ... spin $SPINS"
		for m in "${MODELS[@]}"; do
			infer_args "$c" "$m" "S"
			echo "  sweep:      env ${ENVV[*]} $PYTHON ${INFER_ARGS[*]}"
		done
		case $c in
		mps|openmps) echo "  stop:  echo quit | ...-control" ;;
		esac
	done
	infer_args native "${MODELS[0]}" 0
	"$PYTHON" "${INFER_ARGS[@]}" --dry-run
	exit $?
fi

# ---------------------------------------------------------------------------
# Set-up

mkdir -p "$OUTDIR"
LOG=$OUTDIR/infer-log.txt
TSV=$OUTDIR/infer-results.tsv
MD=$OUTDIR/infer-results.md
: >"$LOG"
exec > >(tee -a "$LOG") 2>&1
WORK=$(mktemp -d /tmp/openmps-infer.XXXXXX)
RAW=$WORK/results.jsonl
: >"$RAW"
START=$SECONDS
CLK_TCK=$(getconf CLK_TCK)

echo "== openmps inference benchmark, $(date -u '+%Y-%m-%d %H:%M:%S UTC'), models ${MODELS[*]}, N = ${NS[*]}," \
	"window $WINDOW s, budget $BUDGET s, work dir $WORK"

MPS_UP=0
OPENMPS_UP=0

# The processes of the measurement under way (their `timeout` wrappers, or
# the clients themselves), so an interrupted run can end them.
RUNNING=()

# Ends what is still running, then the daemons. A pid is signalled only
# while it still runs one of our programs, so a recycled pid is never hit.
cleanup() {
	local p sig
	for sig in TERM KILL; do
		for p in "${RUNNING[@]}"; do
			grep -qE "$BIN/|bench/infer.py" "/proc/$p/cmdline" 2>/dev/null && kill -"$sig" "$p" 2>/dev/null
		done
		[ ${#RUNNING[@]} -gt 0 ] && [ $sig = TERM ] && sleep 2
	done
	RUNNING=()
	stop_mps
	stop_openmps
	if [ "${INFER_KEEP_LOGS:-0}" = 1 ] && [ -d "$WORK/om-log" ]; then
		mkdir -p "$OUTDIR/openmps-logs" && cp -p "$WORK"/om-log/* "$OUTDIR/openmps-logs/" 2>/dev/null
	fi
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'echo "interrupted"; exit 130' INT TERM

# Appends one record of the server-CPU table to the results.
cpu_cell() {   # row col status value n [note]
	printf '{"kind":"cpu","model":"%s","mode":"%s","status":"%s","value":%s,"n":%s,"error":"%s"}\n' \
		"$1" "$2" "$3" "${4:-null}" "${5:-null}" "${6:-}" >>"$RAW"
	echo "   -> $1 [$2] = $([ "$3" = ok ] && echo "$4" || echo "$3${6:+ ($6)}")"
}

# Appends a record for an inference cell that produced none.
infer_cell() {   # model n col status note
	printf '{"kind":"infer","model":"%s","n":%s,"mode":"%s","status":"%s","rps":null,"p50_us":null,"p99_us":null,"error":"%s"}\n' \
		"$1" "$2" "$3" "$4" "$5" >>"$RAW"
	echo "   -> $1 N=$2 [$3] = $4 ($5)"
}

is_num() { [[ $1 =~ ^[0-9]+([.][0-9]+)?$ ]]; }

# ---------------------------------------------------------------------------
# Daemons (as bench/run.sh starts and stops them)

mps_ctl() { col_env mps; env "${ENVV[@]}" timeout 20 "$MPS_BIN/nvidia-cuda-mps-control" "$@"; }
om_ctl() { col_env openmps-daemon; env "${ENVV[@]}" timeout 20 "$ROOT/$BUILD/bin/openmps-control" "$@"; }

# shellcheck source=bench/daemons.sh
. "$ROOT/bench/daemons.sh"

# The pid of the column's server (the newest), or nothing.
server_pid() {
	local list
	case $1 in
	mps) list=$(echo get_server_list | mps_ctl 2>/dev/null) ;;
	openmps) list=$(echo get_server_list | om_ctl 2>/dev/null) ;;
	*) return 0 ;;
	esac
	grep -E '^[0-9]+$' <<<"$list" | tail -n 1
}

# utime + stime of a process in clock ticks, all its threads; fails if it is gone.
cpu_ticks() {
	local s
	s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	# Fields counted after the command name, which may hold spaces: utime
	# and stime are the 12th and 13th after its closing parenthesis.
	s=${s##*) }
	# shellcheck disable=SC2086 # split into fields on purpose
	set -- $s
	echo $(( ${12} + ${13} ))
}

# ---------------------------------------------------------------------------
# Server CPU

# IDLE_N clients hold a context and 1 MiB each (bench/hold.c, asleep);
# the server's CPU over 5 s.
m_idle_cpu() {
	local col=$1 dir=$WORK/idle-$1 i pids=() t ready alive pid a b note
	mkdir -p "$dir"
	col_env "$col"
	for i in $(seq 1 "$IDLE_N"); do
		env "${ENVV[@]}" timeout -k 5 120 "$BIN/hold" "$dir/ready.$i" "$dir/go" >"$dir/out.$i" 2>&1 &
		pids+=($!); RUNNING+=($!)
	done
	for t in $(seq 1 300); do
		ready=$(find "$dir" -name 'ready.*' | wc -l)
		[ "$ready" -ge "$IDLE_N" ] && break
		# Every client that is not ready has exited: none will be.
		if [ $((t % 10)) -eq 0 ]; then
			alive=0
			for i in "${pids[@]}"; do kill -0 "$i" 2>/dev/null && alive=$((alive + 1)); done
			[ "$alive" -le "$ready" ] && break
		fi
		sleep 0.1
	done
	pid=$(server_pid "$col")
	if [ "$ready" -ne "$IDLE_N" ] || [ -z "$pid" ]; then
		note="$ready/$IDLE_N clients started"
		[ -z "$pid" ] && note="$note, no server"
		echo "   $note; what the others said:"
		cat "$dir"/out.* 2>/dev/null | sort | uniq -c | sort -rn | head -3 | sed 's/^/     /'
		cpu_cell idle_cpu_pct "$col" fail null "$IDLE_N" "$note"
	else
		sleep 1   # let the last client's setup settle
		a=$(cpu_ticks "$pid"); sleep 5; b=$(cpu_ticks "$pid")
		if is_num "${a:-x}" && is_num "${b:-x}"; then
			echo "   server $pid: $((b - a)) ticks of 1/$CLK_TCK s in 5 s with $IDLE_N idle clients"
			cpu_cell idle_cpu_pct "$col" ok "$(awk -v d=$((b - a)) -v h="$CLK_TCK" 'BEGIN { printf "%.2f", d / h / 5 * 100 }')" "$IDLE_N"
		else
			cpu_cell idle_cpu_pct "$col" fail null "$IDLE_N" "server $pid exited"
		fi
	fi
	touch "$dir/go"
	for i in "${pids[@]}"; do wait "$i"; done
	RUNNING=()
}

# One client's calls (bench/calls.c), with the server's CPU time per call.
m_calls() {
	local col=$1 dir=$WORK/calls-$1 pid holder='' kind count per out rc key v t
	mkdir -p "$dir"
	col_env "$col"
	pid=$(server_pid "$col")
	if [ "$col" != native ] && [ -z "$pid" ]; then
		# No server yet: an idle client brings one up and keeps it for the calls.
		env "${ENVV[@]}" timeout -k 5 120 "$BIN/hold" "$dir/ready" "$dir/go" >"$dir/holder.out" 2>&1 &
		holder=$!; RUNNING+=($!)
		for t in $(seq 1 300); do [ -e "$dir/ready" ] && break; kill -0 "$holder" 2>/dev/null || break; sleep 0.1; done
		pid=$(server_pid "$col")
	fi
	for kind in launch sync spin; do
		case $kind in
		launch) count=$LAUNCHES; per=call ;;
		sync) count=$SYNCS; per=call ;;
		spin) count=$SPINS; per=iter ;;   # per kernel: one launch and its synchronize
		esac
		out=$dir/$kind.out
		if [ "$col" != native ] && [ -z "$pid" ]; then
			for key in server client wall; do cpu_cell "${kind}_${key}_us" "$col" fail null null "no server"; done
			continue
		fi
		env "${ENVV[@]}" timeout -k 5 45 "$BIN/calls" "$kind" "$count" "${pid:-0}" >"$out" 2>&1 &
		RUNNING+=($!)
		wait $!
		rc=$?
		sed 's/^/   /' "$out"
		for key in server client wall; do
			[ "$col" = native ] && [ $key = server ] && continue
			case $key in
			server) v=$(sed -n "s/^server_cpu_us_per_$per=//p" "$out") ;;
			client) v=$(sed -n "s/^client_cpu_us_per_$per=//p" "$out") ;;
			wall) v=$(sed -n "s/^wall_us_per_$per=//p" "$out") ;;
			esac
			if is_num "$v"; then
				cpu_cell "${kind}_${key}_us" "$col" ok "$v"
			else
				cpu_cell "${kind}_${key}_us" "$col" fail null null "$({ [ "$rc" = 124 ] || [ "$rc" = 137 ]; } && echo timeout || echo "rc $rc")"
			fi
		done
	done
	if [ -n "$holder" ]; then
		touch "$dir/go"
		wait "$holder"
	fi
	RUNNING=()
}

# ---------------------------------------------------------------------------
# The sweep: one launcher per column and model, every N in turn.

m_sweep() {   # col model deadline (seconds since START) pass
	local col=$1 model=$2 left=$(( $3 - (SECONDS - START) )) out rc n
	out=$WORK/cells-$col-$model-$4.jsonl
	if [ "$left" -lt $(( ${WINDOW%.*} + 10 )) ]; then
		for n in "${NS[@]}"; do infer_cell "$model" "$n" "$col" skip "out of time"; done
		return 0
	fi
	echo "-- $col: $model, N = ${NS[*]} (cells start within $left s)"
	infer_args "$col" "$model" "$left"
	col_env "$col"
	# A cell that started just in time may still need its children's start,
	# the window and their exit: 120 s more before the launcher is ended.
	env "${ENVV[@]}" timeout -k 10 $((left + 120)) "$PYTHON" "${INFER_ARGS[@]}" >"$out" &
	RUNNING=($!)
	wait $!
	rc=$?
	RUNNING=()
	cat "$out" >>"$RAW"
	for n in "${NS[@]}"; do
		grep -q "\"n\": $n," "$out" && continue
		infer_cell "$model" "$n" "$col" fail "$({ [ "$rc" = 124 ] || [ "$rc" = 137 ]; } && echo "launcher timed out" || echo "launcher exit $rc")"
	done
	return "$rc"
}

# ---------------------------------------------------------------------------
# Build what is missing, check torch

TORCH=
if [ "$NEED_TORCH" = 1 ]; then
	# (cudnn.version() loads cuDNN's library but initialises no CUDA.)
	TORCH=$("$PYTHON" -c 'import torch; print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}")' 2>&1 | tail -n 1)
	if ! "$PYTHON" -c 'import torch' >/dev/null 2>&1; then
		echo "cannot import torch with $PYTHON ($TORCH): set PYTHON to a python with PyTorch"
		exit 77
	fi
fi

CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
if [ "$NO_BUILD" = 1 ]; then
	echo "== build: skipped (--no-build)"
else
	echo "== build"
	make -s -j16 all bench >/dev/null 2>&1 || make -j16 all bench || echo "make failed: some columns will fail"
	make -s "$BUILD/tests/kernels.ptx" >/dev/null 2>&1 ||
		{ mkdir -p "$(dirname "$PTX")" && "$CUDA_HOME/bin/nvcc" -ptx -arch=compute_90 -o "$PTX" tests/kernels/kernels.cu; }
fi
om_libdir
for b in calls hold; do
	[ -x "$BIN/$b" ] || echo "missing $BIN/$b: the server-CPU rows will fail"
done
GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1)
GPU_DRIVER=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n1)
echo "== device: ${GPU_NAME:-unknown}, driver ${GPU_DRIVER:-unknown}${TORCH:+, $TORCH}, $(nproc) CPUs"
mkdir -p "$WORK/native-pipe" "$WORK/callstats"

# ---------------------------------------------------------------------------
# Model by model, the three columns one after the other, each with its
# daemon up only for its run (the server-CPU rows are measured on the first
# pass). So when time runs short it is the last model that loses cells,
# never one column of a model. Pass k of the NSLOTS passes may start cells
# until (k + 1.5) / NSLOTS of the budget: what one pass leaves unused goes
# to the next, and one that needs it may borrow half a share from the rest.

SWEEP_START=$SECONDS
slot=0
first=$SERVER_ROWS
for m in "${MODELS[@]}"; do
	for pass in $(seq 1 "$REPEAT"); do
	for col in "${COLS[@]}"; do
		deadline=$(( SWEEP_START - START + BUDGET * (2 * slot + 3) / (2 * NSLOTS) ))
		[ "$deadline" -gt $(( SWEEP_START - START + BUDGET )) ] && deadline=$(( SWEEP_START - START + BUDGET ))
		slot=$((slot + 1))
		echo
		echo "== $m, ${COL_TITLE[$col]}$([ "$REPEAT" -gt 1 ] && echo ", pass $pass of $REPEAT") ($(( SECONDS - START )) s elapsed)"
		up=1
		case $col in
		mps) start_mps || up=0 ;;
		openmps) start_openmps || up=0 ;;
		esac
		if [ "$up" = 0 ]; then
			for n in "${NS[@]}"; do infer_cell "$m" "$n" "$col" fail "daemon did not start"; done
			if [ "$first" = 1 ]; then
				for r in idle_cpu_pct {launch,sync,spin}_{server,client,wall}_us; do
					cpu_cell "$r" "$col" fail null "$IDLE_N" "daemon did not start"
				done
			fi
			case $col in mps) stop_mps ;; openmps) stop_openmps ;; esac
			continue
		fi
		if [ "$first" = 1 ]; then
			if [ "$col" != native ]; then
				echo "-- $col: server CPU with $IDLE_N idle clients"
				m_idle_cpu "$col"
			fi
			echo "-- $col: $LAUNCHES async launches, $SYNCS launch + synchronize, $SPINS ~100 µs kernels + synchronize"
			m_calls "$col" || true
		fi
		m_sweep "$col" "$m" "$deadline" "$pass"
		case $col in
		mps) stop_mps ;;
		openmps) stop_openmps ;;
		esac
	done
	first=0
	done
done

# ---------------------------------------------------------------------------
# Report

{
	echo "# openmps inference benchmark"
	echo
	echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	echo "- device: ${GPU_NAME:-unknown}, $(nproc) CPUs"
	echo "- driver: ${GPU_DRIVER:-unknown}"
	echo "- ${TORCH:-torch: not used}"
	echo "- openmps: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo "unknown revision")"
	echo "- each process: batch 1, one CPU thread, fp32 (TF32 off); a request is a new host input ->" \
		".to(cuda) -> forward -> .cpu(); window $WINDOW s after $WARMUP warm-up requests, all N together" \
		"$([ "$REPEAT" -gt 1 ] && echo "; each cell the median of $REPEAT passes, the columns in turn")"
	case " ${MODELS[*]} " in *" cnn "*)
		echo "- cnn: 4 x (conv 3x3 + batch norm + ReLU), 3 -> 32 -> 64 -> 128 -> 128 channels, on 3x64x64, pool, linear to 10" ;;
	esac
	case " ${MODELS[*]} " in *" transformer "*)
		echo "- transformer: embedding + 2-layer nn.TransformerEncoder (d_model 256, 4 heads, feed-forward 1024)" \
			"on 64 tokens, mean pool, linear to 10" ;;
	esac
	case " ${MODELS[*]} " in *" decode "*)
		echo "- decode: HF transformers GPT-2 (124M, from its configuration, seeded), fp16, batch 1, greedy, 32 new" \
			"tokens after 8, KV cache (generate()); throughput in tokens/s; warm-up $(model_warmup decode), window $(model_window decode) s" ;;
	esac
	case " ${MODELS[*]} " in *" gemmfft "*)
		echo "- gemmfft: CuPy DGEMM 1024x1024, FFT of 2^20 complex doubles, two reductions, the sum to the host" ;;
	esac
	case " ${MODELS[*]} " in *" fake "*)
		echo "- fake: a pure-Python stand-in that burns CPU per request (tests the machinery; no GPU)" ;;
	esac
	echo
} >"$MD"
if ! "$PYTHON" bench/infer.py table "$RAW" --md "$MD" --tsv "$TSV"; then
	echo "could not build the tables; the raw records:"
	cat "$RAW"
fi
{
	echo
	echo "Notes: req/s is the sum over the N processes of the requests each ended inside the window divided"
	echo "by the time those requests took (each process asks again as soon as one ends); p50/p99 are over"
	echo "every such request. \"refused\": some processes could not start because the daemon refused them"
	echo "(NVIDIA MPS: 48 clients per GPU); \"wrong\": a process's first answer differed from the CPU's;"
	echo "\"fail\": a process failed otherwise; \"skip\": out of time. Ratios are openmps divided by the other"
	echo "column (for req/s, above 1 means openmps served more). Server CPU is utime + stime of the server"
	echo "process (all threads) from /proc, in clock ticks of 1/$CLK_TCK s; idle clients: $IDLE_N processes"
	echo "each holding a context and 1 MiB after one kernel, asleep, measured over 5 s; per call: one client making"
	echo "$LAUNCHES async launches of an empty kernel (+1 synchronize), then $SYNCS launch + synchronize pairs,"
	echo "then $SPINS launches of a one-block kernel spinning 200,000 cycles (~100 µs), each + synchronize."
} >>"$MD"
echo
cat "$MD"
echo
echo "results: $MD, $TSV, log: $LOG ($(( SECONDS - START )) s)"
