#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tests/gpu/run.sh [STEP...]
#
# Everything that needs a real GPU, in one script, run from anywhere in the
# repository on a machine with an NVIDIA GPU, its driver and the CUDA
# toolkit. Steps (default: all, in this order):
#
#   build       make -j16, plus the driver-API tests, the benchmark programs
#               and the kernels' PTX
#   native      every tests/cuda program on the real driver
#   openmps     every tests/cuda program under openmps (one daemon with
#               private directories under /tmp, restarted after a failure)
#   system      the multi-process tests, the waits with naps forced
#               (tests/system/naps.sh) and pass-through on the real driver
#   control     the control daemon with real clients: start, list, ps, quit
#   cudart      tests/gpu/cudart_sample.cu built with the static and the
#               shared cudart, and tests/gpu/managed_var.cu (__managed__
#               variables), each run natively and under openmps
#   frameworks  tests/gpu/torch_smoke.py and cupy_smoke.py, natively and
#               under openmps, cupy_managed.py natively and with managed
#               memory on the device, and torch_limit.py under an openmps
#               memory limit (reported, never stops the run)
#   exports     tests/gpu/exports_check.sh: the libraries that call the
#               driver's private export tables, natively and under openmps
#   integrity   tests/gpu/integrity_vs_driver.c, if present
#   procaddr    tools/check-procaddr.c, if present
#   bench       bench/run.sh (add --quick with BENCH_QUICK=1)
#
# Each check prints one PASS/FAIL/SKIP line; a table of the steps closes the
# run. Logs go to $OUT/gpu-run when OUT is set, else /tmp/openmps-gpu-run.
# Exits 0 when no step failed. Never changes a GPU setting.
#
# Environment: OPENMPS_NATIVE_LIB (default /usr/local/nvidia/lib64, where
# the real libcuda.so.1 is), CUDA_HOME (default /usr/local/cuda), PYTHON
# (default python3), TEST_TIMEOUT (seconds per test program, default 300).

# The steps are called by name ("step_$STEP"), which shellcheck cannot follow.
# shellcheck disable=SC2317
set -u

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
[ -n "${OUT:-}" ] && OUT=$(realpath -m -- "$OUT")
cd "$ROOT" || exit 1

ALL_STEPS=(build native openmps system control cudart frameworks exports integrity procaddr bench)
STEPS=("$@")
[ ${#STEPS[@]} -eq 0 ] && STEPS=("${ALL_STEPS[@]}")
for s in "${STEPS[@]}"; do
	case " ${ALL_STEPS[*]} " in
	*" $s "*) ;;
	*) echo "unknown step '$s'; steps: ${ALL_STEPS[*]}" >&2; exit 2 ;;
	esac
done

CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
NVCC=$CUDA_HOME/bin/nvcc
NATIVE_LIB=${OPENMPS_NATIVE_LIB:-/usr/local/nvidia/lib64}
PYTHON=${PYTHON:-python3}
TEST_TIMEOUT=${TEST_TIMEOUT:-300}
BUILD=build
PTX=$ROOT/$BUILD/tests/kernels.ptx
GPU_OUT=$ROOT/$BUILD/gpu
LOGDIR=${OUT:+$OUT/gpu-run}
LOGDIR=${LOGDIR:-/tmp/openmps-gpu-run}
mkdir -p "$LOGDIR" "$GPU_OUT"
WORK=$(mktemp -d /tmp/openmps-gpu.XXXXXX)
EMPTY_PIPE=$WORK/no-daemon      # a pipe directory with no daemon: native runs stay native

declare -A PASSES FAILS SKIPS
STEP=

# ---------------------------------------------------------------------------
# Reporting

result() {   # PASS|FAIL|SKIP name [detail]
	local what=$1 name=$2 detail=${3:-}
	printf '%-4s  %-40s %s\n' "$what" "$STEP: $name" "$detail"
	case $what in
	PASS) PASSES[$STEP]=$(( ${PASSES[$STEP]:-0} + 1 )) ;;
	FAIL) FAILS[$STEP]=$(( ${FAILS[$STEP]:-0} + 1 )) ;;
	SKIP) SKIPS[$STEP]=$(( ${SKIPS[$STEP]:-0} + 1 )) ;;
	esac
}

show_tail() {   # file [lines]
	[ -f "$1" ] || return 0
	echo "      --- last ${2:-25} lines of $1"
	tail -n "${2:-25}" "$1" | sed 's/^/      | /'
}

# Runs one program with a time limit in the environment of a column
# (native, openmps or plain); its output goes to a log file. 0 is PASS, 77
# SKIP, anything else FAIL (with the end of its output).
run_check() {   # name log timeout native|openmps|plain cmd...
	local name=$1 log=$2 limit=$3 rc t0; shift 3
	col_env "$1"; shift
	t0=$SECONDS
	timeout -k 10 "$limit" env "${ENVV[@]}" "$@" >"$log" 2>&1 </dev/null
	rc=$?
	case $rc in
	0) result PASS "$name" "($((SECONDS - t0)) s)" ;;
	77) result SKIP "$name" "$(tail -n 1 "$log")" ;;
	124|137) result FAIL "$name" "timed out after $limit s"; show_tail "$log" ;;
	*) result FAIL "$name" "exit $rc"; show_tail "$log" ;;
	esac
	return "$rc"
}

# ---------------------------------------------------------------------------
# Environments

OM_PIPE=$WORK/om-pipe
OM_LOG=$WORK/om-log
OM_UP=0

# Sets ENVV, the variables a client of that kind runs with (`env "${ENVV[@]}"`):
# native finds the real driver first and an empty pipe directory, so it can
# meet no daemon; openmps finds our libcuda.so.1 first and our daemon.
col_env() {
	ENVV=("OPENMPS_TEST_PTX=$PTX")
	case $1 in
	native) ENVV+=("LD_LIBRARY_PATH=$NATIVE_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
		"CUDA_MPS_PIPE_DIRECTORY=$EMPTY_PIPE") ;;
	openmps) ENVV+=("LD_LIBRARY_PATH=$ROOT/$BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
		"CUDA_MPS_PIPE_DIRECTORY=$OM_PIPE" "CUDA_MPS_LOG_DIRECTORY=$OM_LOG") ;;
	esac
}

om_ctl() {
	CUDA_MPS_PIPE_DIRECTORY=$OM_PIPE CUDA_MPS_LOG_DIRECTORY=$OM_LOG \
		timeout 20 "$ROOT/$BUILD/bin/openmps-control" "$@"
}

om_start() {
	local _
	mkdir -p "$OM_PIPE" "$OM_LOG"
	if [ ! -x "$ROOT/$BUILD/bin/openmps-control" ] || [ ! -e "$ROOT/$BUILD/lib/libcuda.so.1" ]; then
		echo "      openmps is not built ($BUILD/bin/openmps-control, $BUILD/lib/libcuda.so.1)"
		return 1
	fi
	# The daemon's output goes to a file so it never holds this script's output open.
	if ! om_ctl -d </dev/null >>"$WORK/om-daemon.out" 2>&1; then
		echo "      openmps-control -d failed:"; sed 's/^/      | /' "$WORK/om-daemon.out"
		return 1
	fi
	OM_UP=1
	for _ in $(seq 1 50); do
		[ -n "$(find "$OM_PIPE" -maxdepth 1 -type s 2>/dev/null)" ] && return 0
		sleep 0.1
	done
	echo "      openmps-control -d left no socket in $OM_PIPE"
	return 1
}

# Quits the daemon and waits for it and its servers (processes this script
# started) to go; ends by pid any that do not.
om_stop() {
	local pids p _
	[ "$OM_UP" = 1 ] || return 0
	OM_UP=0
	pids="$(echo get_server_list | om_ctl 2>/dev/null | grep -E '^[0-9]+$') $(cat "$OM_PIPE"/*.pid 2>/dev/null | grep -E '^[0-9]+$')"
	echo quit | om_ctl >/dev/null 2>&1
	for p in $pids; do
		for _ in $(seq 1 150); do
			kill -0 "$p" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$p" 2>/dev/null; then
			echo "      openmps process $p did not quit: ending it"
			kill -TERM "$p" 2>/dev/null; sleep 2; kill -KILL "$p" 2>/dev/null
		fi
	done
}

om_alive() {
	echo get_server_list | om_ctl >/dev/null 2>&1
}

om_logs() {   # shows the daemon's logs, keeps a copy
	local f
	for f in "$OM_LOG"/*; do
		[ -f "$f" ] || continue
		show_tail "$f" "${1:-40}"
		cp "$f" "$LOGDIR/openmps-$STEP-$(basename "$f")" 2>/dev/null
	done
}

cleanup() {
	om_stop
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'echo "interrupted"; exit 130' INT TERM

# ---------------------------------------------------------------------------
# Steps

test_bins() {
	local b
	for b in "$ROOT/$BUILD"/tests/cuda/t_*; do
		[ -f "$b" ] && [ -x "$b" ] && echo "$b"
	done
}

step_build() {
	local log=$LOGDIR/build.log
	: >"$log"
	if make -j16 >>"$log" 2>&1; then result PASS "make"; else result FAIL "make"; show_tail "$log" 40; fi
	if make -j16 tests-cuda bench >>"$log" 2>&1; then
		result PASS "make tests-cuda bench"
	else
		result FAIL "make tests-cuda bench"; show_tail "$log" 40
	fi
	# tests/standin/module.mk has the rule; nvcc directly if make cannot.
	make "$BUILD/tests/kernels.ptx" >>"$log" 2>&1 ||
		{ mkdir -p "$(dirname "$PTX")" && "$NVCC" -ptx -arch=compute_90 -o "$PTX" tests/kernels/kernels.cu >>"$log" 2>&1; }
	if [ -s "$PTX" ]; then result PASS "kernels PTX"; else result FAIL "kernels PTX" "$PTX missing"; fi
	nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null |
		sed 's/^/      GPU: /'
}

step_native() {
	local b any=0
	for b in $(test_bins); do
		any=1
		run_check "$(basename "$b")" "$LOGDIR/native-$(basename "$b").log" "$TEST_TIMEOUT" native "$b"
	done
	[ "$any" = 1 ] || result FAIL "tests/cuda" "no test binaries in $BUILD/tests/cuda (run the build step)"
}

step_openmps() {
	local b name any=0 served=0 rc
	om_start || { result FAIL "daemon" "did not start"; om_logs; om_stop; return; }
	for b in $(test_bins); do
		any=1
		name=$(basename "$b")
		if ! om_alive; then
			result FAIL "daemon" "not answering before $name: restarting it"
			om_logs; om_stop; om_start || { result FAIL "daemon" "did not restart"; return; }
		fi
		run_check "$name" "$LOGDIR/openmps-$name.log" "$TEST_TIMEOUT" openmps "$b"
		rc=$?
		if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then
			om_logs 30
			# A fresh daemon for the next program, so failures stay independent.
			om_stop; om_start || { result FAIL "daemon" "did not restart"; return; }
		fi
		# Clients that found no daemon would silently use the real driver.
		if [ "$served" = 0 ] && echo get_server_list | om_ctl 2>/dev/null | grep -qE '^[0-9]+$'; then
			served=1
		fi
	done
	[ "$any" = 1 ] || result FAIL "tests/cuda" "no test binaries in $BUILD/tests/cuda (run the build step)"
	if [ "$any" = 1 ] && [ "$served" = 0 ]; then
		result FAIL "daemon" "listed no server after the tests ran: did they use openmps at all?"
	fi
	om_logs 15 >/dev/null
	om_stop
}

# The multi-process tests (several clients at once, a client killed mid-stream,
# a hostile client) and pass-through, on the real driver; each system test
# brings its own daemon (tests/system/with-openmps.sh).
step_system() {
	local t d=$NATIVE_LIB/libcuda.so.1
	make -s -j16 check-build >>"$LOGDIR/build.log" 2>&1 || { result FAIL "build" "make check-build"; return; }
	for t in s_clients s_kill s_malformed s_ipc s_poolshare s_fault; do
		run_check "$t" "$LOGDIR/system-$t.log" "$TEST_TIMEOUT" plain \
			env OPENMPS_DRIVER="$d" OPENMPS_TEST_PTX="$PTX" tests/system/with-openmps.sh "$BUILD" "$BUILD/tests/system/$t"
	done
	# The tests that wait in every way, with every wait for the GPU
	# napping first (src/client/napwait.c), as it does while CPUs are
	# crowded.
	run_check "naps" "$LOGDIR/system-naps.log" "$TEST_TIMEOUT" plain \
		env OPENMPS_DRIVER="$d" OPENMPS_TEST_PTX="$PTX" tests/system/naps.sh "$BUILD"
	run_check "pass-through, same output" "$LOGDIR/system-passthrough.log" 60 plain \
		bash -c "d=\$(mktemp -d); export CUDA_MPS_PIPE_DIRECTORY=\$d OPENMPS_TEST_PTX=$PTX; \
			LD_LIBRARY_PATH=$NATIVE_LIB $BUILD/tests/system/s_passthrough >\$d/a 2>&1 && \
			OPENMPS_LOG_LEVEL=debug LD_LIBRARY_PATH=$ROOT/$BUILD/lib $BUILD/tests/system/s_passthrough >\$d/b 2>\$d/log && \
			grep -q 'passing every call' \$d/log && diff \$d/a \$d/b && cat \$d/b"
}

# The control daemon with real clients: an MPS-style start/list/quit
# sequence while three clients hold contexts and memory on the GPU; ps and
# get_client_list must show them, then quit must take everything down.
step_control() {
	local i out pids srv
	make -s -j16 check-build >>"$LOGDIR/build.log" 2>&1 || { result FAIL "build" "make check-build"; return; }
	om_start || { result FAIL "daemon" "did not start"; om_logs; om_stop; return; }
	pids=
	for i in 1 2 3; do
		env "LD_LIBRARY_PATH=$ROOT/$BUILD/lib" "CUDA_MPS_PIPE_DIRECTORY=$OM_PIPE" \
			"$BUILD/tests/system/c_client" init alloc:64 sync wait:"$WORK/ctl-go" free \
			>"$LOGDIR/control-client$i.log" 2>&1 &
		pids="$pids $!"
	done
	for i in $(seq 1 100); do
		[ "$(grep -l '^waiting' "$LOGDIR"/control-client*.log 2>/dev/null | wc -l)" -eq 3 ] && break
		sleep 0.1
	done
	srv=$(echo get_server_list | om_ctl | head -n 1)
	out=$(printf 'get_server_list\nget_server_status %s\nget_client_list %s\nps\ndevice_query\nget_device_client_list\nset_default_active_thread_percentage 50\nget_default_active_thread_percentage\n' "$srv" "$srv" | om_ctl 2>&1)
	echo "$out" | sed 's/^/      | /'
	echo "$out" >"$LOGDIR/control-session.log"
	if [ "$(echo "$out" | grep -c "$srv")" -ge 2 ] && echo "$out" | grep -q ACTIVE &&
	   [ "$(echo "$out" | awk 'NR > 1 && $3 == "'"$srv"'"' | wc -l)" -ge 3 ]; then
		result PASS "start, list, ps with 3 real clients"
	else
		result FAIL "start, list, ps with 3 real clients"
	fi
	# The per-client metrics while the three are connected.
	out=$(echo get_metrics | om_ctl 2>&1)
	echo "$out" >"$LOGDIR/control-metrics.log"
	if [ "$(echo "$out" | grep -c '^openmps_client_memory_bytes{')" -ge 3 ]; then
		result PASS "get_metrics lists the 3 clients"
	else
		result FAIL "get_metrics lists the 3 clients"; show_tail "$LOGDIR/control-metrics.log"
	fi
	touch "$WORK/ctl-go"
	for p in $pids; do wait "$p"; done
	# A client's own pinned-memory limit: its view of the device and its allocations.
	out=$(env "LD_LIBRARY_PATH=$ROOT/$BUILD/lib" "CUDA_MPS_PIPE_DIRECTORY=$OM_PIPE" \
		CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=256M "$BUILD/tests/system/c_client" \
		init meminfo alloc:200 alloc:100 free 2>&1)
	echo "$out" >"$LOGDIR/control-limit.log"
	if echo "$out" | grep -q '^meminfo CUDA_SUCCESS [0-9]* 268435456$' &&
	   echo "$out" | grep -q '^alloc 200 CUDA_SUCCESS' &&
	   echo "$out" | grep -q '^alloc 100 CUDA_ERROR_OUT_OF_MEMORY'; then
		result PASS "client limit CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=256M"
	else
		result FAIL "client limit CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=256M"; show_tail "$LOGDIR/control-limit.log"
	fi
	if [ "$(cat "$LOGDIR"/control-client*.log | grep -c '^free CUDA_SUCCESS')" -eq 3 ]; then
		result PASS "clients finished"
	else
		result FAIL "clients finished"; show_tail "$LOGDIR/control-client1.log"
	fi
	om_stop
	if [ -e "$OM_PIPE/openmps-control.pid" ]; then result FAIL "quit" "the daemon is still there"; else result PASS "quit"; fi
}

step_cudart() {
	local v bin log=$LOGDIR/cudart-build.log
	: >"$log"
	rm -f "$GPU_OUT/cudart_static" "$GPU_OUT/cudart_shared"
	# sm_90 code for H100/H200, plus its PTX for anything newer.
	if "$NVCC" -O2 -arch=sm_90 -o "$GPU_OUT/cudart_static" tests/gpu/cudart_sample.cu >>"$log" 2>&1; then
		result PASS "build static cudart"
	else
		result FAIL "build static cudart"; show_tail "$log"
	fi
	if "$NVCC" -O2 -arch=sm_90 -cudart shared -Xlinker -rpath -Xlinker "$CUDA_HOME/lib64" \
		-o "$GPU_OUT/cudart_shared" tests/gpu/cudart_sample.cu >>"$log" 2>&1; then
		result PASS "build shared cudart"
	else
		result FAIL "build shared cudart"; show_tail "$log"
	fi
	rm -f "$GPU_OUT/managed_var"
	if "$NVCC" -O2 -arch=sm_90 -o "$GPU_OUT/managed_var" tests/gpu/managed_var.cu >>"$log" 2>&1; then
		result PASS "build managed_var"
	else
		result FAIL "build managed_var"; show_tail "$log"
	fi
	for v in static shared; do
		bin=$GPU_OUT/cudart_$v
		[ -x "$bin" ] || continue
		run_check "cudart $v, native" "$LOGDIR/cudart-$v-native.log" 120 native "$bin"
	done
	[ -x "$GPU_OUT/managed_var" ] &&
		run_check "managed_var, native" "$LOGDIR/managed_var-native.log" 120 native "$GPU_OUT/managed_var"
	# The CI's cudart programs (PTX only, JIT-compiled here).
	make -s -j16 check-build >>"$LOGDIR/build.log" 2>&1
	for bin in "$ROOT/$BUILD"/tests/cudart/r_*; do
		[ -x "$bin" ] && run_check "$(basename "$bin"), native" "$LOGDIR/$(basename "$bin")-native.log" 120 native "$bin"
	done
	om_start || { result FAIL "daemon" "did not start"; om_logs; om_stop; return; }
	for v in static shared; do
		bin=$GPU_OUT/cudart_$v
		[ -x "$bin" ] || continue
		run_check "cudart $v, openmps" "$LOGDIR/cudart-$v-openmps.log" 120 openmps "$bin" || om_logs 30
	done
	[ -x "$GPU_OUT/managed_var" ] && { run_check "managed_var, openmps" "$LOGDIR/managed_var-openmps.log" 120 \
		openmps "$GPU_OUT/managed_var" || om_logs 30; }
	for bin in "$ROOT/$BUILD"/tests/cudart/r_*; do
		[ -x "$bin" ] && { run_check "$(basename "$bin"), openmps" "$LOGDIR/$(basename "$bin")-openmps.log" 120 \
			openmps "$bin" || om_logs 30; }
	done
	om_stop
}

step_frameworks() {
	local s
	for s in torch cupy; do
		run_check "$s native" "$LOGDIR/$s-native.log" 600 native "$PYTHON" "tests/gpu/${s}_smoke.py"
	done
	om_start || { result FAIL "daemon" "did not start"; om_logs; om_stop; return; }
	for s in torch cupy; do
		run_check "$s openmps" "$LOGDIR/$s-openmps.log" 600 openmps "$PYTHON" "tests/gpu/${s}_smoke.py" &&
			continue
		om_logs 30
		# Again with every failing driver call logged: which one differs.
		col_env openmps
		timeout -k 10 600 env "${ENVV[@]}" OPENMPS_TRACE_ERRORS=1 "$PYTHON" "tests/gpu/${s}_smoke.py" \
			>"$LOGDIR/$s-openmps-traced.log" 2>&1 </dev/null
		echo "      failing driver calls (OPENMPS_TRACE_ERRORS=1, $LOGDIR/$s-openmps-traced.log):"
		grep -E "openmps: cu.* returned" "$LOGDIR/$s-openmps-traced.log" | grep -v "finds nothing" | tail -n 25 |
			sed 's/^/      | /'
	done
	# CuPy on managed memory, with managed memory on the device.
	run_check "cupy managed, openmps, OPENMPS_MANAGED=device" "$LOGDIR/cupy-managed-openmps.log" 300 openmps \
		env OPENMPS_MANAGED=device "$PYTHON" tests/gpu/cupy_managed.py || om_logs 30
	om_stop
	run_check "cupy managed native" "$LOGDIR/cupy-managed-native.log" 300 native "$PYTHON" tests/gpu/cupy_managed.py
	# A memory limit the client can see: a fresh daemon, the limit set before
	# its server starts.
	om_start || { result FAIL "daemon" "did not start"; om_logs; om_stop; return; }
	om_ctl <<<"set_default_device_pinned_mem_limit 0 2G" >/dev/null
	run_check "torch under a 2 GiB limit, openmps" "$LOGDIR/torch-limit-openmps.log" 600 openmps \
		"$PYTHON" tests/gpu/torch_limit.py 2048 || om_logs 30
	om_stop
}

# Its own daemon, builds and table (tests/gpu/exports_check.sh).
step_exports() {
	if OUT=$LOGDIR/exports OPENMPS_NATIVE_LIB=$NATIVE_LIB timeout -k 10 300 tests/gpu/exports_check.sh \
		>"$LOGDIR/exports.out" 2>&1; then
		result PASS "exports_check.sh"
	else
		result FAIL "exports_check.sh" "exit $?"
	fi
	sed -n '/^check /,$p' "$LOGDIR/exports.out" | sed 's/^/      /'
}

# Builds a standalone checker from the build command its header gives
# ("//   cc ... -o NAME ..."), with the output put under build/gpu.
build_from_header() {   # source name log
	local src=$1 name=$2 log=$3 cmd
	cmd=$(sed -n '1,30{s#^//[[:space:]]\{1,\}\(\(gcc\|cc\|clang\) .*\)$#\1#p}' "$src" | head -n 1)
	if [ -z "$cmd" ] || [[ $cmd != *"$src"* ]] || [[ $cmd != *" -o $name "* ]]; then
		echo "no build line naming $src and -o $name in its header" >"$log"
		return 1
	fi
	cmd=${cmd/ -o $name / -o $GPU_OUT/$name }
	cmd="${cmd/#gcc /${CC:-gcc} }"
	echo "+ $cmd" >"$log"
	bash -c "$cmd" >>"$log" 2>&1
}

step_integrity() {
	local src=tests/gpu/integrity_vs_driver.c
	if [ ! -f "$src" ]; then result SKIP "integrity_vs_driver" "$src does not exist"; return; fi
	if build_from_header "$src" integrity_vs_driver "$LOGDIR/integrity-build.log"; then
		result PASS "build integrity_vs_driver"
		run_check "integrity_vs_driver" "$LOGDIR/integrity.log" 120 plain \
			"$GPU_OUT/integrity_vs_driver" "$NATIVE_LIB/libcuda.so.1"
		grep -E '^integrity:' "$LOGDIR/integrity.log" | sed 's/^/      /'
	else
		result FAIL "build integrity_vs_driver"; show_tail "$LOGDIR/integrity-build.log"
	fi
}

step_procaddr() {
	local src=tools/check-procaddr.c
	if [ ! -f "$src" ]; then result SKIP "check-procaddr" "$src does not exist"; return; fi
	if build_from_header "$src" check-procaddr "$LOGDIR/procaddr-build.log"; then
		result PASS "build check-procaddr"
		run_check "check-procaddr" "$LOGDIR/procaddr.log" 300 plain "$GPU_OUT/check-procaddr" "$NATIVE_LIB/libcuda.so.1"
		grep -E '^procaddr:' "$LOGDIR/procaddr.log" | sed 's/^/      /'
	else
		result FAIL "build check-procaddr"; show_tail "$LOGDIR/procaddr-build.log"
	fi
}

step_bench() {
	local args=()
	[ "${BENCH_QUICK:-0}" = 1 ] && args=(--quick)
	if OUT=$LOGDIR timeout -k 10 540 bench/run.sh "${args[@]}" >"$LOGDIR/bench.out" 2>&1; then
		result PASS "bench/run.sh" "(table in $LOGDIR/bench-results.md)"
	else
		result FAIL "bench/run.sh" "exit $?"; show_tail "$LOGDIR/bench.out" 40
	fi
	[ -f "$LOGDIR/bench-results.md" ] && sed 's/^/      /' "$LOGDIR/bench-results.md"
}

# ---------------------------------------------------------------------------

echo "openmps GPU run: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), steps: ${STEPS[*]}, logs in $LOGDIR"
mkdir -p "$EMPTY_PIPE"
declare -A WALL
for STEP in "${STEPS[@]}"; do
	echo
	echo "=== $STEP"
	t0=$SECONDS
	"step_$STEP"
	WALL[$STEP]=$((SECONDS - t0))
done

echo
echo "=== summary"
failed=0
summary=$(printf '%-12s %-6s %6s %6s %6s %7s' step result pass fail skip seconds)
for STEP in "${STEPS[@]}"; do
	p=${PASSES[$STEP]:-0}; f=${FAILS[$STEP]:-0}; s=${SKIPS[$STEP]:-0}
	if [ "$f" -gt 0 ]; then r=FAIL; failed=1
	elif [ "$p" -gt 0 ]; then r=PASS
	else r=SKIP; fi
	summary+=$'\n'$(printf '%-12s %-6s %6d %6d %6d %7d' "$STEP" "$r" "$p" "$f" "$s" "${WALL[$STEP]}")
done
echo "$summary" | tee "$LOGDIR/summary.txt"
exit $failed
