#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tests/gpu/exports_check.sh
#
# The paths of NVIDIA's libraries that call the driver's private export
# tables (docs/EXPORT-TABLES.md), on a GPU machine, natively and under
# openmps: PyTorch fp16 and bf16 matmuls, nn.Linear under bf16 autocast and
# fp8 torch._scaled_mm (cuBLASLt), torch.fft and CuPy FFTs (cuFFT), a CuPy
# RawKernel (NVRTC), NVML and nvJitLink, each against a CPU reference; and
# tests/cuda/t_exports, which drives the tables directly. First
# tests/gpu/exports_probe.c asks the real driver what its functions that
# openmps calls in the client need (cuInit? a context?) and how long
# loading and initialising it takes.
#
# Run from anywhere in the repository; about two minutes: it starts no check
# after EXPORTS_DEADLINE seconds (default 140) and gives each at most what
# is left of 170 s. The openmps daemon
# runs with private directories and is stopped on every way out.
# Results in $OUT (default /tmp/openmps-exports-check): summary.txt (the
# table printed at the end), native.log, openmps.log (every check's
# output), exports-lines.txt (what openmps logged about export tables),
# openmps-daemon.log, probe.log, build.log. Exits 0 when nothing failed.
#
# Environment: OPENMPS_NATIVE_LIB (default /usr/local/nvidia/lib64, where
# the real libcuda.so.1 is), CUDA_HOME (default /usr/local/cuda), PYTHON
# (default python3).
set -u

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
OUT=$(realpath -m -- "${OUT:-/tmp/openmps-exports-check}")
mkdir -p "$OUT"
NATIVE_LIB=${OPENMPS_NATIVE_LIB:-/usr/local/nvidia/lib64}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
PYTHON=${PYTHON:-python3}
DEADLINE=${EXPORTS_DEADLINE:-140}
BUILD=build
WORK=$(mktemp -d /tmp/openmps-exports.XXXXXX)
OM_PIPE=$WORK/pipe
OM_LOG=$WORK/log
EMPTY_PIPE=$WORK/no-daemon
OM_UP=0
START=$SECONDS
mkdir -p "$OM_PIPE" "$OM_LOG" "$EMPTY_PIPE"
: >"$OUT/native.log"
: >"$OUT/openmps.log"

CHECK_GROUPS=(torch_blas torch_fft cupy nvml nvjitlink)
declare -A CHECKS=(
	[torch_blas]="torch_mm_fp16 torch_mm_bf16 torch_linear_bf16_autocast torch_scaled_mm_fp8"
	[torch_fft]="torch_fft torch_rfft2"
	[cupy]="cupy_fft cupy_rawkernel"
	[nvml]="nvml"
	[nvjitlink]="nvjitlink"
)
ORDER=()
for g in "${CHECK_GROUPS[@]}"; do
	for c in ${CHECKS[$g]}; do ORDER+=("$c"); done
done
ORDER+=(t_exports)
declare -A RES DETAIL

# ---------------------------------------------------------------------------
# The openmps daemon (as tests/gpu/run.sh runs it)

om_ctl() {
	CUDA_MPS_PIPE_DIRECTORY=$OM_PIPE CUDA_MPS_LOG_DIRECTORY=$OM_LOG OPENMPS_DRIVER=$NATIVE_LIB/libcuda.so.1 \
		timeout 20 "$ROOT/$BUILD/bin/openmps-control" "$@"
}

om_start() {
	local _
	om_ctl -d </dev/null >>"$WORK/daemon.out" 2>&1 || { cat "$WORK/daemon.out"; return 1; }
	OM_UP=1
	for _ in $(seq 1 50); do
		[ -n "$(find "$OM_PIPE" -maxdepth 1 -type s 2>/dev/null)" ] && return 0
		sleep 0.1
	done
	echo "openmps-control -d left no socket in $OM_PIPE"
	return 1
}

# Quits the daemon and waits for it and its servers; ends by pid any that
# do not go (only processes this script started).
om_stop() {
	local pids p _
	[ "$OM_UP" = 1 ] || return 0
	OM_UP=0
	pids="$(echo get_server_list | om_ctl 2>/dev/null | grep -E '^[0-9]+$') $(cat "$OM_PIPE"/*.pid 2>/dev/null | grep -E '^[0-9]+$')"
	echo quit | om_ctl >/dev/null 2>&1
	for p in $pids; do
		for _ in $(seq 1 100); do
			kill -0 "$p" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$p" 2>/dev/null; then
			echo "openmps process $p did not quit: ending it"
			kill -TERM "$p" 2>/dev/null; sleep 1; kill -KILL "$p" 2>/dev/null
		fi
	done
}

# shellcheck disable=SC2317   # called by the trap
cleanup() {
	om_stop
	cat "$OM_LOG"/control.log "$OM_LOG"/server.log >"$OUT/openmps-daemon.log" 2>/dev/null
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'echo "interrupted"; exit 130' INT TERM

# ---------------------------------------------------------------------------
# Running checks

# Sets ENVV for a mode: native finds the real driver first and meets no
# daemon; openmps finds our libcuda.so.1 first (NVML and the rest of the
# driver's libraries still found after it) and our daemon.
mode_env() {
	ENVV=("OPENMPS_TEST_PTX=$ROOT/$BUILD/tests/kernels.ptx" "CUPY_CACHE_DIR=$WORK/cupy-$1")
	case $1 in
	native) ENVV+=("LD_LIBRARY_PATH=$NATIVE_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
		"CUDA_MPS_PIPE_DIRECTORY=$EMPTY_PIPE") ;;
	openmps) ENVV+=("LD_LIBRARY_PATH=$ROOT/$BUILD/lib:$NATIVE_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
		"CUDA_MPS_PIPE_DIRECTORY=$OM_PIPE" "CUDA_MPS_LOG_DIRECTORY=$OM_LOG"
		"OPENMPS_DRIVER=$NATIVE_LIB/libcuda.so.1" "OPENMPS_LOG_LEVEL=debug") ;;
	esac
}

record() {   # mode check PASS|FAIL|SKIP detail
	RES[$1,$2]=$3
	DETAIL[$1,$2]=$4
	printf '%-4s  %-7s  %-28s %s\n' "$3" "$1" "$2" "$4"
}

out_of_time() {
	[ $((SECONDS - START)) -ge "$DEADLINE" ]
}

# Seconds a check may take: 60, less as the whole run nears 170 s.
limit() {
	local left=$((170 - (SECONDS - START)))
	[ "$left" -gt 60 ] && left=60
	[ "$left" -lt 10 ] && left=10
	echo "$left"
}

run_group() {   # mode group
	local mode=$1 group=$2 out=$WORK/$1-$2.out rc c line status detail
	if out_of_time; then
		for c in ${CHECKS[$group]}; do record "$mode" "$c" SKIP "out of time"; done
		return
	fi
	mode_env "$mode"
	mkdir -p "$WORK/cupy-$mode"
	timeout -k 5 "$(limit)" env "${ENVV[@]}" "$PYTHON" tests/gpu/exports_check.py "$group" >"$out" 2>&1 </dev/null
	rc=$?
	{ echo "=== $group ($mode), exit $rc"; cat "$out"; echo; } >>"$OUT/$mode.log"
	if grep -q "^RESULT $group SKIP" "$out"; then
		detail=$(grep -m1 "^RESULT $group SKIP" "$out" | cut -d' ' -f4-)
		for c in ${CHECKS[$group]}; do record "$mode" "$c" SKIP "$detail"; done
		return
	fi
	for c in ${CHECKS[$group]}; do
		line=$(grep -m1 "^RESULT $c " "$out")
		if [ -n "$line" ]; then
			status=$(echo "$line" | cut -d' ' -f3)
			detail=$(echo "$line" | cut -d' ' -f4-)
		else
			status=FAIL
			if [ "$rc" -ge 128 ] && [ "$rc" -ne 137 ]; then
				detail="no result: the process died of signal $((rc - 128))"
			elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
				detail="no result: timed out"
			else
				detail="no result: the process exited $rc ($(grep -v '^RESULT' "$out" | tail -n 1 | cut -c1-100))"
			fi
		fi
		record "$mode" "$c" "$status" "$detail"
	done
}

run_t_exports() {   # mode
	local mode=$1 out=$WORK/$1-t_exports.out rc
	if out_of_time; then record "$mode" t_exports SKIP "out of time"; return; fi
	if [ ! -x "$BUILD/tests/cuda/t_exports" ]; then record "$mode" t_exports FAIL "not built"; return; fi
	mode_env "$mode"
	timeout -k 5 "$(limit)" env "${ENVV[@]}" "$BUILD/tests/cuda/t_exports" >"$out" 2>&1 </dev/null
	rc=$?
	{ echo "=== t_exports ($mode), exit $rc"; cat "$out"; echo; } >>"$OUT/$mode.log"
	case $rc in
	0) record "$mode" t_exports PASS "$(grep -c '^info:' "$out") info lines in $mode.log" ;;
	77) record "$mode" t_exports SKIP "$(tail -n 1 "$out")" ;;
	*) record "$mode" t_exports FAIL "exit $rc: $(grep -m1 -E 't_exports\.c:[0-9]+' "$out" | cut -c1-120)" ;;
	esac
}

# ---------------------------------------------------------------------------

echo "openmps export-table check: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), results in $OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/GPU: /'

if ! make -j16 all tests-cuda "$BUILD/tests/kernels.ptx" >"$OUT/build.log" 2>&1; then
	echo "FAIL  build (make -j16 all tests-cuda $BUILD/tests/kernels.ptx); the end of $OUT/build.log:"
	tail -n 30 "$OUT/build.log"
	exit 1
fi
echo "build: $((SECONDS - START)) s"

if cc -O2 -std=c11 -D_GNU_SOURCE -I"$CUDA_HOME/include" -o "$WORK/exports_probe" tests/gpu/exports_probe.c -ldl \
	>"$OUT/probe.log" 2>&1; then
	timeout -k 5 30 "$WORK/exports_probe" "$NATIVE_LIB/libcuda.so.1" >>"$OUT/probe.log" 2>&1
fi
sed 's/^/  /' "$OUT/probe.log"

for g in "${CHECK_GROUPS[@]}"; do run_group native "$g"; done
run_t_exports native

if om_start; then
	for g in "${CHECK_GROUPS[@]}"; do
		if ! echo get_server_list | om_ctl >/dev/null 2>&1; then
			echo "the daemon stopped answering before $g: restarting it"
			om_stop; om_start || break
		fi
		run_group openmps "$g"
	done
	run_t_exports openmps
	if ! echo get_server_list | om_ctl 2>/dev/null | grep -qE '^[0-9]+$'; then
		echo "NOTE: the daemon lists no server: did the openmps checks use openmps at all?"
	fi
	om_stop
else
	for c in "${ORDER[@]}"; do record openmps "$c" FAIL "the daemon did not start"; done
fi

# What openmps said about export tables: stubs called, tables refused, the
# real driver loaded for its own tables (with how long cuInit took).
grep -hE "export table|real driver" "$OUT/openmps.log" | sed -E 's/^\[[^]]*\] //' | sort | uniq -c |
	sort -rn >"$OUT/exports-lines.txt"
echo
echo "openmps log lines about export tables ($OUT/exports-lines.txt):"
if [ -s "$OUT/exports-lines.txt" ]; then head -n 40 "$OUT/exports-lines.txt" | cut -c1-220; else echo "  (none)"; fi

failed=0
for c in "${ORDER[@]}"; do
	[ "${RES[native,$c]:-}" = FAIL ] || [ "${RES[openmps,$c]:-}" = FAIL ] && failed=1
done
{
	printf '%-28s %-8s %-8s %s\n' check native openmps "openmps detail"
	for c in "${ORDER[@]}"; do
		printf '%-28s %-8s %-8s %s\n' "$c" "${RES[native,$c]:-SKIP}" "${RES[openmps,$c]:-SKIP}" \
			"${DETAIL[openmps,$c]:-}" | cut -c1-160
	done
	echo "($((SECONDS - START)) s)"
} >"$OUT/summary.txt"
echo
cat "$OUT/summary.txt"
exit $failed
