#!/bin/bash
# SPDX-License-Identifier: MIT
#
# bench/profile.sh [MODEL] [REQUESTS]: where one process serving MODEL
# (bench/workloads.py, default decode) spends its CPU, natively and under
# openmps in one run: bench/cpuprofile.py with bench/cpuprof.c's sampler
# preloaded, REQUESTS (default 20) requests after 5, then each column's
# report (by object, then the main thread's symbols). Run after `make all
# bench` on a machine with a GPU and torch.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
MODEL=${1:-decode}
REQUESTS=${2:-20}
PYTHON=${PYTHON:-python3}
# shellcheck source=bench/daemons.sh
. "$ROOT/bench/daemons.sh"
gpu_script profile
PROF=$ROOT/$BUILD/bench/libcpuprof.so
[ -e "$PROF" ] || { echo "missing $PROF: make bench"; exit 1; }

native env LD_PRELOAD="$PROF" "$PYTHON" bench/cpuprofile.py run "$MODEL" "$REQUESTS" "$WORK/native.samples"
start_openmps >/dev/null || exit 1
under_openmps env LD_PRELOAD="$PROF" "$PYTHON" bench/cpuprofile.py run "$MODEL" "$REQUESTS" "$WORK/openmps.samples"
stop_openmps >/dev/null
for c in native openmps; do
	echo
	echo "== $c"
	"$PYTHON" bench/cpuprofile.py report "$WORK/$c.samples"
done
