# SPDX-License-Identifier: MIT
#
# bench/daemons.sh: starting and stopping NVIDIA's MPS daemon and openmps's
# for one column of a benchmark, with private pipe and log directories under
# $WORK; sourced by bench/run.sh, bench/infer.sh and the GPU scripts. The
# caller defines mps_ctl and om_ctl (the control programs run in the
# column's environment) (or calls default_ctls) and sets ROOT, BUILD,
# MPS_BIN, WORK, MPS_UP and OPENMPS_UP; or sets ROOT and calls gpu_script,
# which does all of that.
# shellcheck shell=bash
# pid... : daemon processes this script started; waits up to 15 s for them
# to exit after a quit, then ends the ones left by their pid.
wait_gone() {
	local p
	for p in "$@"; do
		for _ in $(seq 1 150); do
			kill -0 "$p" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$p" 2>/dev/null; then
			echo "   pid $p did not quit: ending it"
			kill -TERM "$p" 2>/dev/null
			sleep 2
			kill -KILL "$p" 2>/dev/null
		fi
	done
}

start_mps() {
	mkdir -p "$WORK/mps-pipe" "$WORK/mps-log"
	if [ ! -x "$MPS_BIN/nvidia-cuda-mps-control" ]; then
		echo "NVIDIA MPS: $MPS_BIN/nvidia-cuda-mps-control not found"
		return 1
	fi
	# Its output goes to a file: a daemon holding the log pipe open would keep it from closing.
	mps_ctl -d </dev/null >>"$WORK/mps-daemon.out" 2>&1 || { echo "NVIDIA MPS: the daemon did not start"; return 1; }
	MPS_UP=1
	for _ in $(seq 1 50); do
		[ -S "$WORK/mps-pipe/control" ] && return 0
		sleep 0.1
	done
	echo "NVIDIA MPS: no control socket in $WORK/mps-pipe"
	return 1
}

stop_mps() {
	local pids dpid
	[ "$MPS_UP" = 1 ] || return 0
	MPS_UP=0
	pids=$(echo get_server_list | mps_ctl 2>/dev/null | grep -E '^[0-9]+$')
	dpid=$(grep -E '^[0-9]+$' "$WORK/mps-pipe/nvidia-cuda-mps-control.pid" 2>/dev/null)
	echo quit | mps_ctl >/dev/null 2>&1
	# shellcheck disable=SC2086 # pids is a list
	wait_gone $pids $dpid
	echo "NVIDIA MPS stopped"
}

start_openmps() {
	mkdir -p "$WORK/om-pipe" "$WORK/om-log"
	if [ ! -x "$ROOT/$BUILD/bin/openmps-control" ] || [ ! -e "$ROOT/$BUILD/lib/libcuda.so.1" ]; then
		echo "openmps: $BUILD/bin/openmps-control or $BUILD/lib/libcuda.so.1 is missing"
		return 1
	fi
	om_ctl -d </dev/null >>"$WORK/om-daemon.out" 2>&1 || {
		echo "openmps: the daemon did not start"; cat "$WORK/om-daemon.out"; return 1; }
	OPENMPS_UP=1
	for _ in $(seq 1 50); do
		[ -n "$(find "$WORK/om-pipe" -maxdepth 1 -type s 2>/dev/null)" ] && return 0
		sleep 0.1
	done
	echo "openmps: no socket appeared in $WORK/om-pipe"
	return 1
}

stop_openmps() {
	local pids dpids
	[ "$OPENMPS_UP" = 1 ] || return 0
	OPENMPS_UP=0
	pids=$(echo get_server_list | om_ctl 2>/dev/null | grep -E '^[0-9]+$')
	dpids=$(cat "$WORK"/om-pipe/*.pid 2>/dev/null | grep -E '^[0-9]+$')
	echo quit | om_ctl >/dev/null 2>&1
	# shellcheck disable=SC2086 # lists of pids
	wait_gone $pids $dpids
	echo "openmps stopped"
	if [ -d "$WORK/om-log" ]; then
		for f in "$WORK"/om-log/*; do
			[ -f "$f" ] || continue
			echo "--- tail of openmps $(basename "$f")"
			tail -n 30 "$f"
		done
	fi
}

# The usual control programs: NVIDIA's from $MPS_BIN and openmps's on the
# real driver in $NATIVE_LIB, each with private directories under $WORK.
default_ctls() {
	mps_ctl() { env CUDA_MPS_PIPE_DIRECTORY="$WORK/mps-pipe" CUDA_MPS_LOG_DIRECTORY="$WORK/mps-log" \
		timeout 20 "$MPS_BIN/nvidia-cuda-mps-control" "$@"; }
	om_ctl() { env CUDA_MPS_PIPE_DIRECTORY="$WORK/om-pipe" CUDA_MPS_LOG_DIRECTORY="$WORK/om-log" \
		OPENMPS_DRIVER="$NATIVE_LIB/libcuda.so.1" timeout 20 "$ROOT/$BUILD/bin/openmps-control" "$@"; }
}

# gpu_script NAME: the set-up a GPU script of bench/ or tests/gpu/ shares,
# once it has set ROOT (and cd'ed there): BUILD, NATIVE_LIB, MPS_BIN, a
# private WORK (/tmp/openmps-NAME.*), the control functions, both daemons
# quit and WORK removed on every way out, the test kernels' PTX, and the
# three columns as commands: native, under_mps and under_openmps COMMAND...
gpu_script() {
	BUILD=build
	NATIVE_LIB=${OPENMPS_NATIVE_LIB:-/usr/local/nvidia/lib64}
	MPS_BIN=${MPS_BIN:-/usr/local/nvidia/bin}
	WORK=$(mktemp -d "/tmp/openmps-$1.XXXXXX")
	MPS_UP=0 OPENMPS_UP=0
	default_ctls
	trap 'stop_openmps >/dev/null 2>&1; stop_mps >/dev/null 2>&1; rm -rf "$WORK"' EXIT
	trap 'exit 130' INT TERM
	export OPENMPS_TEST_PTX=$ROOT/$BUILD/tests/kernels.ptx
	native() { env CUDA_MPS_PIPE_DIRECTORY="$WORK/none" LD_LIBRARY_PATH="$NATIVE_LIB" "$@"; }
	under_mps() { env CUDA_MPS_PIPE_DIRECTORY="$WORK/mps-pipe" LD_LIBRARY_PATH="$NATIVE_LIB" "$@"; }
	under_openmps() { env CUDA_MPS_PIPE_DIRECTORY="$WORK/om-pipe" LD_LIBRARY_PATH="$ROOT/$BUILD/lib" "$@"; }
}
