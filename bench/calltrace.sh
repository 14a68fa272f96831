#!/bin/bash
# SPDX-License-Identifier: MIT
#
# bench/calltrace.sh [--workloads "cnn decode ..."] [--no-build]
#
# What real programs ask of the driver per request, and how openmps answers
# each call: for every workload of bench/workloads.py, run natively under
# cudatrace (a pass-through libcuda.so.1 that counts every driver call) with
# R1 and then R2 requests after the same warm-up, and once under openmps with
# OPENMPS_CALL_STATS (the client counts, per driver function, the calls, the
# messages to the server and the round trips, and writes them after the
# warm-up and after R2 requests). bench/calltable.py turns each workload's
# three counts into a table per request: native calls, openmps calls,
# messages, round trips, and whether openmps answers the call in the client,
# sends it without waiting, or makes a round trip. The tables are written to
# $OUT/calltable.md (else /tmp), a summary line per workload printed last.
#
# cudatrace is taken from $CUDATRACE (a folder holding lib/libcuda.so.1, or
# its sources to build; default .cudatrace, which git ignores). Needs a GPU,
# PyTorch, HF transformers, CuPy and JAX (a workload whose framework is
# missing reports that and the others go on). Never changes a GPU setting.
#
# Environment: PYTHON (default python3), OPENMPS_NATIVE_LIB (default
# /usr/local/nvidia/lib64), CALLTRACE_WORKLOADS.
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd -P)
cd "$ROOT" || exit 1
WORKLOADS=${CALLTRACE_WORKLOADS:-cnn decode gemmfft compile compile_ro conv_train jax rawkernel}
NO_BUILD=0
while [ $# -gt 0 ]; do
	case $1 in
	--workloads) WORKLOADS=${2:-}; shift ;;
	--no-build) NO_BUILD=1 ;;
	-h|--help) sed -n '3,/^set -u/p' "$0" | sed '$d'; exit 0 ;;
	*) echo "usage: $0 [--workloads LIST] [--no-build]" >&2; exit 2 ;;
	esac
	shift
done
PYTHON=${PYTHON:-python3}
OUTDIR=$(realpath -m -- "${OUT:-/tmp}")
CUDATRACE=$(realpath -m -- "${CUDATRACE:-.cudatrace}")
MD=$OUTDIR/calltable.md

# shellcheck source=bench/daemons.sh
. "$ROOT/bench/daemons.sh"
gpu_script calltrace

if [ "$NO_BUILD" = 0 ]; then
	make -s -j16 all >/dev/null 2>&1 || make -j16 all || exit 1
fi
if [ ! -e "$CUDATRACE/lib/libcuda.so.1" ]; then
	make -s -C "$CUDATRACE" >/dev/null || { echo "cannot build cudatrace in $CUDATRACE"; exit 1; }
fi

# Requests: R1 and R2 natively, the warm-up; a decode request is 32 tokens.
counts() {
	case $1 in
	decode) R1=2 R2=10 WARM=2 ;;
	conv_train) R1=20 R2=100 WARM=10 ;;
	*) R1=40 R2=200 WARM=20 ;;
	esac
}

# The file of the process that ran the workload (its pid is in its JSON line).
pid_of() { sed -n 's/.*"pid": \([0-9]*\).*/\1/p' "$1" | head -n 1; }

{
	echo "## Driver calls per request, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)"
	echo
	echo "openmps $(git rev-parse --short HEAD 2>/dev/null); each table: calls per request of every driver function the"
	echo "program made (natively, under cudatrace; under openmps, as its client counted them), the messages those"
	echo "calls sent to the server and how many of them waited for its reply."
	echo
} >"$MD"
start_openmps || exit 1
SUMMARY=()
for w in $WORKLOADS; do
	counts "$w"
	echo "== $w: natively with $R1 and $R2 requests, then under openmps with $R2"
	ok=1
	# torch.compile compiles and autotunes on first use and caches the
	# result on disk: a first run, not counted, so that both counted runs
	# find the same cache and differ only in their requests.
	case $w in compile*)
		env CUDA_MPS_PIPE_DIRECTORY="$WORK/none" LD_LIBRARY_PATH="$NATIVE_LIB" timeout 600 "$PYTHON" bench/infer.py \
			once --model "$w" --requests 1 --warmup 1 >/dev/null 2>&1 ;;
	esac
	for r in "$R1" "$R2"; do
		env CUDA_MPS_PIPE_DIRECTORY="$WORK/none" TRACE_REAL="$NATIVE_LIB/libcuda.so.1" TRACE_OUT="$WORK/native-$w-$r" \
			LD_LIBRARY_PATH="$CUDATRACE/lib:$NATIVE_LIB" timeout 600 "$PYTHON" bench/infer.py once --model "$w" \
			--requests "$r" --warmup "$WARM" >"$WORK/native-$w-$r.json" 2>"$WORK/native-$w-$r.err" ||
			{ echo "   native ($r requests) failed:"; tail -n 5 "$WORK/native-$w-$r.err"; ok=0; }
	done
	under_openmps env OPENMPS_CALL_STATS="$WORK/om-$w" timeout 600 "$PYTHON" bench/infer.py once --model "$w" \
		--requests "$R2" --warmup "$WARM" >"$WORK/om-$w.json" 2>"$WORK/om-$w.err" ||
		{ echo "   openmps failed:"; tail -n 5 "$WORK/om-$w.err"; ok=0; }
	[ "$ok" = 1 ] || { SUMMARY+=("$w: failed"); continue; }
	p1=$(pid_of "$WORK/native-$w-$R1.json"); p2=$(pid_of "$WORK/native-$w-$R2.json"); po=$(pid_of "$WORK/om-$w.json")
	for f in "$WORK/native-$w-$R1.$p1" "$WORK/native-$w-$R2.$p2" "$WORK/om-$w.$po.warm" "$WORK/om-$w.$po.done"; do
		[ -e "$f" ] || { echo "   missing $f"; ok=0; }
	done
	[ "$ok" = 1 ] || { SUMMARY+=("$w: counts missing"); continue; }
	grep -h '"us_per_request"' "$WORK/native-$w-$R2.json" "$WORK/om-$w.json" | sed 's/^/   /'
	line=$("$PYTHON" bench/calltable.py "$w" "$WORK/native-$w-$R1.$p1" "$WORK/native-$w-$R2.$p2" "$R1" "$R2" \
		"$WORK/om-$w.$po.warm" "$WORK/om-$w.$po.done" "$R2" --md "$MD")
	echo "   $line"
	SUMMARY+=("$line")
done
stop_openmps >/dev/null 2>&1
echo
echo "tables: $MD"
printf '%s\n' "${SUMMARY[@]}"
