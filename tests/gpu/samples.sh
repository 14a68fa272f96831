#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tests/gpu/samples.sh [SAMPLESDIR]
#
# A subset of NVIDIA's CUDA samples (github.com/NVIDIA/cuda-samples, tag
# v13.0), built with nvcc and run natively and under openmps side by side,
# their outputs compared. SAMPLESDIR (default .samples in the repository,
# which git ignores: the samples are NVIDIA's code, under NVIDIA's licence,
# and are not part of this repository) holds them as NVIDIA lays them out:
# its LICENSE, Common/ (the helper headers) and Samples/CATEGORY/NAME/ with
# each sample's data files. They were picked for the driver calls they make:
# managed memory (cudaMallocManaged, cudaStreamAttachMemAsync,
# cudaMemPrefetchAsync), CUDA arrays, textures and surfaces (2D, layered,
# cubemap, pitch-linear, and the driver API's cuArrayCreate and
# cuTexObjectCreate), registered and mapped host memory (cudaHostRegister,
# cudaHostAlloc with cudaDeviceMapHost), stream callbacks and host functions
# (also as graph nodes), the JIT linker (cuLinkCreate, cuModuleLoadDataEx
# from PTX, a driver loaded with dlopen), 3D copies (cudaMemcpy3D into
# layered and cubemap arrays, and as graph nodes). The TESTS table below
# says which sample covers what.
#
# Each sample is built (in parallel) into a private directory under /tmp
# with the toolkit's nvcc, as the samples' CMake files build it (separable
# compilation; the driver-API ones linked with the toolkit's stub libcuda,
# with their PTX or fatbin generated beside them). Then each runs three
# times at once, from a fresh copy of its own directory so it finds its data
# files: twice on the real driver (an empty pipe directory, so it meets no
# daemon) and once as a client of an openmps daemon this script starts in
# private directories under /tmp, with OPENMPS_TRACE_ERRORS=1. The samples
# run one after another, each run limited to SAMPLE_TIMEOUT seconds. Their
# exit statuses are compared (0 passed, 2 waived), and their outputs after
# normalising: the numbers on lines about time, rates and bandwidth are
# masked, and so are the few lines per sample that change from run to run
# on the driver alone (listed in RULES below); openmps's own log lines are
# set aside and shown. When the two native runs differ from each other and
# the openmps run matches neither, the output "varies" and is not held
# against openmps. Prints a line per sample as it finishes, with a diff
# excerpt where outputs differ, and a table at the end; exits 0 when every
# sample built and every one that passed natively passed under openmps
# too, with the same output.
#
# Run from the repository after `make`, on a machine with a GPU, the CUDA
# 13 toolkit and python3. Environment: NVCC (default nvcc on PATH, else
# /usr/local/cuda/bin/nvcc), SAMPLES_ARCH (nvcc -arch, default native),
# SAMPLES_JOBS (parallel builds, default the number of CPUs),
# SAMPLES_BUILD_ONLY=1 (build, report and stop: needs no GPU and no
# daemon), SAMPLES_ONLY (test names separated by spaces: only these),
# OPENMPS_NATIVE_LIB (default /usr/local/nvidia/lib64), SAMPLE_TIMEOUT
# (seconds for each run, default 120), PYTHON (default python3),
# SAMPLES_KEEP=1 (keep the work directory), OUT (the build and run logs,
# the per-sample report and the table are copied to $OUT/samples when set).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -le 1 ] || { echo "usage: $0 [SAMPLESDIR]" >&2; exit 2; }
SAMPLES=$(realpath -- "${1:-$ROOT/.samples}")
if [ ! -d "$SAMPLES/Samples" ] || [ ! -d "$SAMPLES/Common" ]; then
	echo "$SAMPLES: no Samples/ and Common/ of NVIDIA's cuda-samples here" >&2
	exit 2
fi
NATIVE_LIB=${OPENMPS_NATIVE_LIB:-/usr/local/nvidia/lib64}
TIMEOUT=${SAMPLE_TIMEOUT:-120}
ARCH=${SAMPLES_ARCH:-native}
PYTHON=${PYTHON:-python3}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -x "$NVCC" ] || { echo "nvcc not found (NVCC=$NVCC)" >&2; exit 2; }
CUDA_HOME=$(dirname "$(dirname "$(readlink -f "$NVCC")")")
JOBS=${SAMPLES_JOBS:-$(nproc)}
BUILD=build
WORK=$(mktemp -d /tmp/openmps-samples.XXXXXX)
MPS_UP=0 OPENMPS_UP=0

# name, directory under Samples/, arguments. A name is the sample's (its
# directory's) or the sample's with a variant after a '+'. What each one
# exercises of the groups above (every one also allocates, copies and
# launches):
#   UnifiedMemoryStreams: cudaMallocManaged, cudaStreamAttachMemAsync
#     (host and single) from OpenMP threads, cuBLAS dgemv on managed memory
#   systemWideAtomics: cudaMallocManaged (or malloc'd memory where the GPU
#     can reach pageable memory), atomics from the GPU and the CPU at once
#   conjugateGradientUM: cudaMallocManaged read by cuSPARSE and cuBLAS
#   conjugateGradientMultiBlockCG: cudaMallocManaged, cooperative launch
#   UnifiedMemoryPerf: cudaMallocManaged, cudaMemPrefetchAsync to the host
#     and the device, cudaStreamAttachMemAsync, mapped pinned memory
#     (cudaHostGetDevicePointer), a kernel spinning on a host-written flag
#   simpleAttributes: cudaStreamSetAttribute (access policy window),
#     cudaDeviceSetLimit(persisting L2), cudaCtxResetPersistingL2Cache
#   simpleTexture: cudaMallocArray, cudaMemcpyToArray, texture object
#   simpleSurfaceWrite: cudaMallocArray (surface load/store), surface and
#     texture objects on arrays
#   simpleLayeredTexture: cudaMalloc3DArray(cudaArrayLayered), cudaMemcpy3D
#   simpleCubemapTexture: cudaMalloc3DArray(cudaArrayCubemap), cudaMemcpy3D
#   simplePitchLinearTexture: texture objects on pitched linear memory
#     (cudaMallocPitch, cudaMemcpy2D) and on an array, cudaMemcpyToArray
#   simpleTextureDrv: cuModuleLoadData (fatbin), cuArrayCreate,
#     cuMemcpy2D to an array, cuTexObjectCreate
#   simpleZeroCopy: cudaSetDeviceFlags(cudaDeviceMapHost), cudaHostAlloc
#     (mapped), cudaHostGetDevicePointer; +generic: cudaHostRegister
#     (mapped) of malloc'd memory, cudaHostUnregister
#   simpleStreams: mmap'd memory pinned with cudaHostRegister (mapped),
#     cudaSetDeviceFlags, async copies on 4 streams, events;
#     +blocking: cudaDeviceBlockingSync, blocking-sync events, cudaMallocHost
#   simpleCallback: cudaStreamAddCallback from 8 threads, the callback
#     starting a thread that frees the stream
#   simpleCudaGraphs: graphs built by hand (host node, 3D memcpy nodes,
#     memset, kernel) and by stream capture (cudaLaunchHostFunc), cloned
#   jacobiCudaGraphs: graphs with 3D memcpy and memset nodes, kernel-node
#     parameter updates; +update: cudaGraphExecUpdate of captured graphs
#   ptxjit: cuLinkCreate, cuLinkAddData (PTX), cuLinkComplete with wall
#     time and logs, cuModuleLoadData of the result, mixed with the runtime
#   matrixMulDynlinkJIT: libcuda.so.1 opened with dlopen and ~150 symbols
#     (old ones too: cuTexRef*, cuParamSet*) looked up with dlsym,
#     cuCtxCreate, cuModuleLoadDataEx from PTX with JIT options
TESTS=(
	"UnifiedMemoryStreams 0_Introduction/UnifiedMemoryStreams"
	"systemWideAtomics 0_Introduction/systemWideAtomics"
	"conjugateGradientUM 4_CUDA_Libraries/conjugateGradientUM"
	"conjugateGradientMultiBlockCG 4_CUDA_Libraries/conjugateGradientMultiBlockCG"
	"UnifiedMemoryPerf 6_Performance/UnifiedMemoryPerf"
	"simpleAttributes 0_Introduction/simpleAttributes"
	"simpleTexture 0_Introduction/simpleTexture"
	"simpleSurfaceWrite 0_Introduction/simpleSurfaceWrite"
	"simpleLayeredTexture 0_Introduction/simpleLayeredTexture"
	"simpleCubemapTexture 0_Introduction/simpleCubemapTexture"
	"simplePitchLinearTexture 0_Introduction/simplePitchLinearTexture"
	"simpleTextureDrv 0_Introduction/simpleTextureDrv"
	"simpleZeroCopy 0_Introduction/simpleZeroCopy"
	"simpleZeroCopy+generic 0_Introduction/simpleZeroCopy -use_generic_memory"
	"simpleStreams 0_Introduction/simpleStreams"
	"simpleStreams+blocking 0_Introduction/simpleStreams --sync_method=4 --use_cuda_malloc_host"
	"simpleCallback 0_Introduction/simpleCallback"
	"simpleCudaGraphs 3_CUDA_Features/simpleCudaGraphs"
	"jacobiCudaGraphs 3_CUDA_Features/jacobiCudaGraphs"
	"jacobiCudaGraphs+update 3_CUDA_Features/jacobiCudaGraphs -gpumethod=1"
	"ptxjit 3_CUDA_Features/ptxjit"
	"matrixMulDynlinkJIT 0_Introduction/matrixMulDynlinkJIT"
)

cleanup() {
	local p
	for p in $(jobs -p); do kill "$p" 2>/dev/null; done
	stop_openmps >/dev/null 2>&1
	if [ "${SAMPLES_KEEP:-0}" = 1 ]; then echo "work directory kept: $WORK"; else rm -rf "$WORK"; fi
}
om_ctl() { env CUDA_MPS_PIPE_DIRECTORY="$WORK/om-pipe" CUDA_MPS_LOG_DIRECTORY="$WORK/om-log" \
	OPENMPS_DRIVER="$NATIVE_LIB/libcuda.so.1" timeout 20 "$ROOT/$BUILD/bin/openmps-control" "$@"; }
mps_ctl() { :; }
# shellcheck source=bench/daemons.sh
. "$ROOT/bench/daemons.sh"
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$WORK/bin" "$WORK/run" "$WORK/log" "$WORK/none"

# selected NAME: whether SAMPLES_ONLY leaves test NAME in.
selected() {
	[ -z "${SAMPLES_ONLY:-}" ] && return 0
	case " $SAMPLES_ONLY " in *" $1 "*) return 0 ;; esac
	return 1
}

# build DIR: the sample in $SAMPLES/Samples/DIR built into $WORK/bin/NAME/
# (NAME: DIR's last part), with what it reads beside it; the nvcc commands
# and their output in $WORK/bin/NAME.log, "ok" or "FAIL" in
# $WORK/bin/NAME.status.
build() {
	local dir=$1 name src out srcs=() libs=() flags=() st=ok
	name=$(basename "$dir")
	src=$SAMPLES/Samples/$dir
	out=$WORK/bin/$name
	mkdir -p "$out"
	case $name in
	UnifiedMemoryStreams) srcs=(UnifiedMemoryStreams.cu); flags=(-Xcompiler -fopenmp); libs=(-lcublas -lgomp) ;;
	conjugateGradientUM) srcs=(main.cpp); libs=(-lcublas -lcusparse) ;;
	conjugateGradientMultiBlockCG) srcs=(conjugateGradientMultiBlockCG.cu); libs=(-lcublas -lcusparse) ;;
	UnifiedMemoryPerf) srcs=(helperFunctions.cpp matrixMultiplyPerf.cu commonKernels.cu) ;;
	simpleTextureDrv) srcs=(simpleTextureDrv.cpp); libs=(-lcuda) ;;
	simpleCallback) srcs=(simpleCallback.cu multithreading.cpp) ;;
	jacobiCudaGraphs) srcs=(jacobi.cu main.cpp) ;;
	ptxjit) srcs=(ptxjit.cpp); libs=(-lcuda) ;;
	matrixMulDynlinkJIT)
		srcs=(cuda_drvapi_dynlink.c matrixMulDynlinkJIT.cpp matrixMul_gold.cpp
			matrixMul_kernel_32_ptxdump.c matrixMul_kernel_64_ptxdump.c)
		libs=(-lcuda -ldl) ;;
	*) srcs=("$name.cu") ;;
	esac
	(
		cd "$out" || exit 1
		# One nvcc line, logged before it runs.
		nv() { echo "+ $NVCC $*"; "$NVCC" "$@"; }
		case $name in
		# As their CMake files do: a fatbin for the sample's -arch, PTX for nvcc's default one.
		simpleTextureDrv)
			nv -Wno-deprecated-gpu-targets -I"$SAMPLES/Common" -arch="$ARCH" -fatbin \
				-o simpleTexture_kernel64.fatbin "$src/simpleTexture_kernel.cu" || exit 1 ;;
		ptxjit)
			nv -Wno-deprecated-gpu-targets -I"$SAMPLES/Common" -ptx -o ptxjit_kernel64.ptx "$src/ptxjit_kernel.cu" || exit 1 ;;
		esac
		# libcuda.so.1 comes from LD_LIBRARY_PATH at run time (the stub in
		# the toolkit's lib64/stubs only links); the toolkit's libraries
		# (cuBLAS, cuSPARSE) from a RUNPATH, which LD_LIBRARY_PATH overrides.
		nv -std=c++17 -O2 -lineinfo -rdc=true --extended-lambda -Wno-deprecated-gpu-targets -arch="$ARCH" \
			-I"$SAMPLES/Common" "${flags[@]}" -o "$name" "${srcs[@]/#/$src/}" "${libs[@]}" \
			-Xlinker --enable-new-dtags -Xlinker -rpath -Xlinker "$CUDA_HOME/lib64"
	) >"$WORK/bin/$name.log" 2>&1 || st=FAIL
	echo "$st" >"$WORK/bin/$name.status"
	echo "build $name: $st"
}

# The comparison: normalises and compares the logs of one test's runs and
# adds its row to the table, or prints the table.
cat >"$WORK/compare.py" <<'EOF'
import difflib
import os
import re
import sys

# Lines about time, rates or bandwidth: their numbers are masked.
TIMEISH = re.compile(r"(?i)(time|elapsed|msec|usec|walltime|\d\s*(ms|us|µs|s|sec|seconds)\b|/s(ec)?\b|bandwidth"
                     r"|throughput|flops|gflop|rate\b|latency|speed)")
NUM = re.compile(r"[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?")
ADDR = re.compile(r"0x[0-9a-fA-F]{6,}")
# openmps's log lines: [YYYY-MM-DD HH:MM:SS.mmm Role PID] message
OMLOG = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \w+ +\d+\] ")
PROBES = re.compile(r"openmps: (cuGetProcAddress\w*|cuGetExportTable) returned an error")
# sample: (lines whose numbers are masked, lines left out) -- output that
# changes from run to run on the driver alone.
RULES = {
    # Task sizes drawn from a clock-seeded generator, handed to OpenMP threads in no set order.
    "UnifiedMemoryStreams": (None, r"^Task \[\d+\], thread \[\d+\] executing on"),
    # A table of timings.
    "UnifiedMemoryPerf": (r".", None),
    # Timings without a unit: "memcopy:  0.35", "4 streams:  1.20".
    "simpleStreams": (r"^(memcopy|kernel|non-streamed|\d+ streams):", None),
    # Residuals from reductions whose order the GPU picks (atomics, cuSPARSE).
    "conjugateGradientUM": (r"residual|Error amount", None),
    "conjugateGradientMultiBlockCG": (r"residual|Error amount", None),
    "jacobiCudaGraphs": (r"^GPU error", None),
}


def status(rc):
    if rc is None:
        return "no run"
    if rc == 0:
        return "pass"
    if rc == 2:
        return "waived"
    if rc in (124, 137):
        return "timeout"
    if rc > 128:
        return f"signal {rc - 128}"
    return f"fail {rc}"


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return None


def run(logdir, test, mode, sample, rundir, work):
    """(exit status or None, normalised output lines, openmps log lines) of one run."""
    base = os.path.join(logdir, f"{test}.{mode}")
    rc = read(base + ".rc")
    if rc is None:
        return None, None, []
    mask, drop = RULES.get(sample, (None, None))
    out, log = [], []
    for part in ("out", "err"):
        out.append(f"--- std{part}")
        for line in (read(f"{base}.{part}") or "").splitlines():
            line = line.replace(rundir, "<rundir>").replace(work, "<work>")
            if OMLOG.match(line):
                log.append(OMLOG.sub("", line))
                continue
            if drop and re.search(drop, line):
                continue
            line = ADDR.sub("0x<addr>", line)
            if TIMEISH.search(line) or (mask and re.search(mask, line)):
                # Masked numbers of other widths leave other padding:
                # the spacing of such a line is not compared either.
                line = " ".join(NUM.sub("<n>", line).split())
            out.append(line.rstrip())
    return int(rc.strip() or -1), out, log


def one(test, sample, logdir, rundirs, work, table):
    n1 = run(logdir, test, "native", sample, f"{rundirs}/{test}.native", work)
    n2 = run(logdir, test, "native2", sample, f"{rundirs}/{test}.native2", work)
    om = run(logdir, test, "openmps", sample, f"{rundirs}/{test}.openmps", work)
    s1, s2, so = status(n1[0]), status(n2[0]), status(om[0])
    native = s1 if n2[0] is None or s2 == s1 else f"{s1}/{s2}"
    if n1[1] is None or om[1] is None:
        same = "-"
    elif om[1] == n1[1] or (n2[1] is not None and om[1] == n2[1]):
        same = "same"
    elif n2[1] is not None and n2[1] != n1[1]:
        same = "varies"
    else:
        same = "DIFFERS"
    counted = s1 == "pass" and s2 in ("pass", "no run")
    if not counted:
        verdict = "-"
    elif so != "pass" or same == "DIFFERS":
        verdict = "FAIL"
    else:
        verdict = "ok"
    took = [(read(os.path.join(logdir, f"{test}.{m}.time")) or "?").strip() for m in ("native", "openmps")]
    print(f"{test:32} native {native:10} openmps {so:10} output {same:8} {verdict:4}"
          f"  ({took[0]} s native, {took[1]} s openmps)", flush=True)
    if same in ("DIFFERS", "varies") or verdict == "FAIL":
        diff = list(difflib.unified_diff(n1[1] or [], om[1] or [], "native", "openmps", lineterm="", n=1))
        for line in diff[:40]:
            print("      " + line)
        if len(diff) > 40:
            print(f"      ... {len(diff) - 40} more diff lines")
    # Not the counts of failed lookups: the runtime probes for functions.
    shown = [line for line in om[2] if not PROBES.search(line)]
    for line in shown[:12]:
        print("      openmps log: " + line)
    if len(shown) > 12:
        print(f"      ... {len(shown) - 12} more openmps log lines")
    with open(table, "a") as f:
        f.write("\t".join((test, "ok", native, so, same, verdict)) + "\n")


def summary(table):
    rows = []
    with open(table) as f:
        for line in f:
            rows.append(line.rstrip("\n").split("\t"))
    head = ("sample", "build", "native", "openmps", "same output", "")
    width = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
    for r in [head] + rows:
        print(" | ".join(c.ljust(w) for c, w in zip(r, width)).rstrip())
    built = sum(1 for r in rows if r[1] == "ok")
    passed = [r for r in rows if r[5] in ("ok", "FAIL")]
    lost = [r for r in passed if r[5] == "FAIL"]
    ok = built == len(rows) and passed and not lost
    print(("PASS" if ok else "FAIL") + f"  samples: {built} of {len(rows)} built, {len(passed)} passed natively,"
          f" {len(lost)} of them not under openmps or with other output")
    return 0 if ok else 1


if sys.argv[1] == "one":
    one(*sys.argv[2:8])
else:
    sys.exit(summary(sys.argv[2]))
EOF

# Build every directory the selected tests use, SAMPLES_JOBS at a time.
echo "building with $NVCC -arch=$ARCH from $SAMPLES into $WORK/bin"
declare -A DIRS=()
for t in "${TESTS[@]}"; do
	read -r name dir _ <<<"$t"
	selected "$name" && DIRS[$dir]=1
done
[ ${#DIRS[@]} -gt 0 ] || { echo "SAMPLES_ONLY=${SAMPLES_ONLY:-} names no test" >&2; exit 2; }
for dir in "${!DIRS[@]}"; do
	while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
	build "$dir" &
done
wait
nfail=0
for dir in "${!DIRS[@]}"; do
	name=$(basename "$dir")
	if [ "$(cat "$WORK/bin/$name.status" 2>/dev/null)" != ok ]; then
		nfail=$((nfail + 1))
		echo "--- build of $name failed; the end of its log:"
		tail -n 25 "$WORK/bin/$name.log"
	fi
done
if [ -n "${OUT:-}" ]; then
	mkdir -p "$OUT/samples"
	for dir in "${!DIRS[@]}"; do
		name=$(basename "$dir")
		cp "$WORK/bin/$name.log" "$OUT/samples/$name.build.log" 2>/dev/null
	done
fi
if [ "${SAMPLES_BUILD_ONLY:-0}" = 1 ]; then
	echo "$(( ${#DIRS[@]} - nfail )) of ${#DIRS[@]} samples built"
	[ "$nfail" = 0 ]
	exit
fi

start_openmps || exit 1

# run_one MODE TEST DIR [ARG...]: one run of TEST's sample, from a fresh
# copy of its directory and build, $WORK/run/TEST.MODE; its stdout, stderr,
# exit status and seconds taken go to $WORK/log/TEST.MODE.{out,err,rc,time}.
run_one() {
	local mode=$1 test=$2 dir=$3 name rd log envv t0 rc; shift 3
	name=$(basename "$dir")
	rd=$WORK/run/$test.$mode
	log=$WORK/log/$test.$mode
	if [ "$mode" = openmps ]; then
		envv=(CUDA_MPS_PIPE_DIRECTORY="$WORK/om-pipe" LD_LIBRARY_PATH="$ROOT/$BUILD/lib" OPENMPS_TRACE_ERRORS=1)
	else
		envv=(CUDA_MPS_PIPE_DIRECTORY="$WORK/none" LD_LIBRARY_PATH="$NATIVE_LIB")
	fi
	rm -rf "$rd"
	if ! cp -r "$SAMPLES/Samples/$dir" "$rd" || ! cp -r "$WORK/bin/$name/." "$rd/"; then
		echo 125 >"$log.rc"
		return
	fi
	t0=$(date +%s.%N)
	(cd "$rd" && env "${envv[@]}" timeout -k 10 "$TIMEOUT" "./$name" "$@" </dev/null >"$log.out" 2>"$log.err")
	rc=$?
	echo "$t0 $(date +%s.%N)" | awk '{ printf "%.1f\n", $2 - $1 }' >"$log.time"
	echo "$rc" >"$log.rc"
}

TABLE=$WORK/table.tsv
: >"$TABLE"
for t in "${TESTS[@]}"; do
	read -r tname dir args <<<"$t"
	selected "$tname" || continue
	name=$(basename "$dir")
	if [ "$(cat "$WORK/bin/$name.status" 2>/dev/null)" != ok ]; then
		printf '%-32s not built\n' "$tname"
		printf '%s\tFAIL\t-\t-\t-\tFAIL\n' "$tname" >>"$TABLE"
		continue
	fi
	# shellcheck disable=SC2086 # args is a list of words
	{
		run_one native "$tname" "$dir" $args &
		run_one native2 "$tname" "$dir" $args &
		run_one openmps "$tname" "$dir" $args &
		wait
	}
	"$PYTHON" "$WORK/compare.py" one "$tname" "$name" "$WORK/log" "$WORK/run" "$WORK" "$TABLE" |
		tee -a "$WORK/report.txt"
done

stop_openmps
if [ -n "${OUT:-}" ]; then
	cp "$WORK"/log/* "$WORK/report.txt" "$OUT/samples/" 2>/dev/null
	"$PYTHON" "$WORK/compare.py" table "$TABLE" >"$OUT/samples/table.txt"
fi
echo
"$PYTHON" "$WORK/compare.py" table "$TABLE"
