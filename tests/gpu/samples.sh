#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tests/gpu/samples.sh [SAMPLESDIR]
#
# NVIDIA's CUDA samples (github.com/NVIDIA/cuda-samples, tag v13.0), built
# and run natively and under openmps side by side, their outputs compared:
# a subset (below), or with SAMPLES_ALL=1 every sample that builds here
# (build_all). SAMPLESDIR (default .samples in the repository,
# which git ignores: the samples are NVIDIA's code, under NVIDIA's licence,
# and are not part of this repository) holds them as NVIDIA lays them out:
# its LICENSE, Common/ (the helper headers) and Samples/CATEGORY/NAME/ with
# each sample's data files. The subset's were picked for the calls they make:
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
# run one after another (SAMPLES_PAR at a time), each run limited to
# SAMPLE_TIMEOUT seconds. Their
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
# the per-sample report, the table, the server's log and tarballs of the
# build logs and of the failing runs' logs go to $OUT/samples when set),
# SAMPLES_ALL=1 (every sample of the checkout that builds here, not the
# subset; see build_all), SAMPLES_PAR (samples run at once).
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

# bin DIR: where the build of the sample in $SAMPLES/Samples/DIR goes
# ($WORK/bin/CATEGORY_NAME), beside it its .log and .status.
bin() { echo "$WORK/bin/${1//\//_}"; }

# build DIR: the sample in $SAMPLES/Samples/DIR built into $(bin DIR)/ with
# what it reads beside it; the nvcc commands and their output in
# $(bin DIR).log, "ok" or "FAIL" in $(bin DIR).status.
build() {
	local dir=$1 name src out srcs=() libs=() flags=() st=ok
	name=$(basename "$dir")
	src=$SAMPLES/Samples/$dir
	out=$(bin "$dir")
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
	) >"$out.log" 2>&1 || st=FAIL
	echo "$st" >"$out.status"
	echo "build $name: $st"
}

# build_all: every sample of $SAMPLES/Samples that its CMake file builds
# here (a sample whose CMake file finds no OpenGL, Vulkan, MPI, FreeImage,
# NvSci or Windows skips itself, and one whose configuration fails for a
# library the toolkit lacks is left out; both listed in $WORK/skipped.txt),
# each for the sample's -arch only, built with CMake from a copy of the
# samples whose CMake files ask for that architecture instead of their nine.
# Every executable a sample's build leaves becomes a test (its name, or its
# name+DIRNAME where two samples make one name), in ALL_TESTS; the
# sample's build output goes to $(bin DIR) as build() leaves it.
build_all() {
	local src=$WORK/src cm=$WORK/cmake arch dirs=() d f bad exe out st n
	arch=$ARCH
	if [ "$arch" = native ]; then
		arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d '. ')
		[ -n "$arch" ] || arch=90
	fi
	arch=${arch#sm_}
	mkdir -p "$src" "$cm"
	cp -r "$SAMPLES/Samples" "$SAMPLES/Common" "$src/" || return 1
	[ -d "$SAMPLES/cmake" ] && cp -r "$SAMPLES/cmake" "$src/"
	find "$src/Samples" -name CMakeLists.txt -exec \
		sed -i -E "s/^([[:space:]]*set\(CMAKE_CUDA_ARCHITECTURES)[[:space:]][^)]*\)/\1 $arch)/" {} +
	# Every sample's directory; libNVVM's samples only through their own top.
	while IFS= read -r f; do
		d=${f#"$src/Samples/"}
		d=${d%/CMakeLists.txt}
		case $d in 7_libNVVM/*|8_Platform_Specific/*) continue ;; esac
		dirs+=("$d")
	done < <(find "$src/Samples" -mindepth 3 -maxdepth 3 -name CMakeLists.txt | sort)
	[ -f "$src/Samples/7_libNVVM/CMakeLists.txt" ] && dirs+=(7_libNVVM)
	: >"$WORK/skipped.txt"
	for _ in 1 2 3 4 5; do
		{
			echo "cmake_minimum_required(VERSION 3.20)"
			echo "project(openmps-samples LANGUAGES C CXX CUDA)"
			echo "find_package(CUDAToolkit REQUIRED)"
			for d in "${dirs[@]}"; do echo "add_subdirectory($src/Samples/$d Samples/$d)"; done
		} >"$cm/CMakeLists.txt"
		rm -rf "$cm/b"
		if cmake -S "$cm" -B "$cm/b" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$NVCC" \
			-DCMAKE_CUDA_ARCHITECTURES="$arch" >"$cm/configure.log" 2>&1; then
			break
		fi
		# Leave out the samples whose configuration failed, and try again.
		# (an error names a sample's CMakeLists.txt, or a target "in directory" of it)
		bad=$(grep -oE "(CMake Error at|in directory) $src/Samples/[^: ]+" "$cm/configure.log" |
			sed -E "s#^(CMake Error at|in directory) $src/Samples/##; s#/CMakeLists.txt\$##" |
			while read -r f; do
				for d in "${dirs[@]}"; do
					case $f in "$d" | "$d"/*) echo "$d" ;; esac
				done
			done | sort -u)
		[ -n "$bad" ] || { tail -n 30 "$cm/configure.log"; return 1; }
		for d in $bad; do
			echo "$d: configuration failed ($(grep -E -A3 "(CMake Error at|in directory) $src/Samples/$d/" \
				"$cm/configure.log" | grep -oE 'CUDA::[A-Za-z_0-9]+|[A-Za-z_0-9]+-NOTFOUND' |
				sort -u | tr '\n' ' '))" >>"$WORK/skipped.txt"
		done
		n=${#dirs[@]}
		mapfile -t dirs < <(printf '%s\n' "${dirs[@]}" | grep -vxF -f <(printf '%s\n' "$bad"))
		[ ${#dirs[@]} -lt "$n" ] || { tail -n 30 "$cm/configure.log"; return 1; }
	done
	grep -E "will not build|skipping|Skipping" "$cm/configure.log" | sed 's/^-- //' >>"$WORK/skipped.txt"
	echo "configured ${#dirs[@]} sample directories; building with $JOBS jobs"
	# With SAMPLES_ONLY, only the targets of those names (those there are).
	local targets=()
	if [ -n "${SAMPLES_ONLY:-}" ]; then
		cmake --build "$cm/b" --target help >"$cm/targets.txt" 2>/dev/null
		for n in $SAMPLES_ONLY; do
			grep -qx "\.\.\. ${n%%+*}" "$cm/targets.txt" && targets+=(--target "${n%%+*}")
		done
	fi
	cmake --build "$cm/b" -j "$JOBS" "${targets[@]}" -- -k >"$cm/build.log" 2>&1
	# Each sample directory with targets of its own: its executables.
	declare -A seen=()
	ALL_TESTS=()
	while IFS= read -r f; do
		d=${f#"$cm/b/Samples/"}
		d=${d%/CMakeFiles}
		compgen -G "$f/*.dir" >/dev/null || continue
		out=$(bin "$d")
		mkdir -p "$out"
		st=FAIL
		for exe in $(find "$cm/b/Samples/$d" -maxdepth 1 -type f -perm -u+x ! -name '*.so*' -printf '%f\n' | sort); do
			cp "$cm/b/Samples/$d/$exe" "$out/" && st=ok
			n=$exe
			[ -n "${seen[$n]:-}" ] && n="$exe+$(basename "$d")"
			seen[$n]=1
			ALL_TESTS+=("$n $d")
		done
		# What the build put beside the programs (data files, libraries, PTX).
		find "$cm/b/Samples/$d" -maxdepth 1 -type f ! -perm -u+x ! -name Makefile ! -name '*.cmake' \
			-exec cp {} "$out/" \;
		find "$cm/b/Samples/$d" -maxdepth 1 -type f -name '*.so*' -exec cp {} "$out/" \;
		grep -E "^make.*(Error|\*\*\*).*Samples/$d/" "$cm/build.log" | head -n 3 >"$out.log"
		echo "$st" >"$out.status"
		[ "$st" = ok ] || ALL_TESTS+=("$(basename "$d") $d")
	done < <(find "$cm/b/Samples" -type d -name CMakeFiles | sort)
	echo "${#ALL_TESTS[@]} programs from the samples' builds"
}

# Build every directory the selected tests use, SAMPLES_JOBS at a time.
declare -A DIRS=()
if [ "${SAMPLES_ALL:-0}" = 1 ]; then
	echo "building every sample with CMake for $ARCH from $SAMPLES into $WORK/bin"
	build_all || { echo "the samples' CMake configuration failed"; exit 1; }
	TESTS=("${ALL_TESTS[@]}")
	echo "--- not built here, by the samples' own CMake files:"
	cat "$WORK/skipped.txt"
else
	echo "building with $NVCC -arch=$ARCH from $SAMPLES into $WORK/bin"
fi
for t in "${TESTS[@]}"; do
	read -r name dir _ <<<"$t"
	selected "$name" && DIRS[$dir]=1
done
[ ${#DIRS[@]} -gt 0 ] || { echo "SAMPLES_ONLY=${SAMPLES_ONLY:-} names no test" >&2; exit 2; }
if [ "${SAMPLES_ALL:-0}" != 1 ]; then
	for dir in "${!DIRS[@]}"; do
		while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
		build "$dir" &
	done
	wait
fi
nfail=0
for dir in "${!DIRS[@]}"; do
	if [ "$(cat "$(bin "$dir").status" 2>/dev/null)" != ok ]; then
		nfail=$((nfail + 1))
		echo "--- build of $dir failed; the end of its log:"
		tail -n 25 "$(bin "$dir").log"
	fi
done
if [ -n "${OUT:-}" ]; then
	mkdir -p "$OUT/samples" "$WORK/buildlogs"
	for dir in "${!DIRS[@]}"; do
		cp "$(bin "$dir").log" "$WORK/buildlogs/${dir//\//_}.build.log" 2>/dev/null
	done
	[ "${SAMPLES_ALL:-0}" = 1 ] && cp "$WORK/skipped.txt" "$WORK/cmake/configure.log" "$WORK/cmake/build.log" \
		"$WORK/buildlogs/"
	tar -czf "$OUT/samples/build-logs.tar.gz" -C "$WORK" buildlogs
fi
if [ "${SAMPLES_BUILD_ONLY:-0}" = 1 ]; then
	echo "$(( ${#DIRS[@]} - nfail )) of ${#DIRS[@]} samples built"
	[ "$nfail" = 0 ]
	exit
fi

start_openmps || exit 1

# run_one MODE TEST DIR [ARG...]: one run of TEST's sample (the program
# named as TEST before any '+'), from a fresh copy of its directory and
# build, $WORK/run/TEST.MODE; its stdout, stderr, exit status and seconds
# taken go to $WORK/log/TEST.MODE.{out,err,rc,time}.
run_one() {
	local mode=$1 test=$2 dir=$3 rd log envv t0 rc; shift 3
	rd=$WORK/run/$test.$mode
	log=$WORK/log/$test.$mode
	if [ "$mode" = openmps ]; then
		envv=(CUDA_MPS_PIPE_DIRECTORY="$WORK/om-pipe" LD_LIBRARY_PATH="$ROOT/$BUILD/lib" OPENMPS_TRACE_ERRORS=1)
	else
		envv=(CUDA_MPS_PIPE_DIRECTORY="$WORK/none" LD_LIBRARY_PATH="$NATIVE_LIB")
	fi
	rm -rf "$rd"
	if ! cp -r "$SAMPLES/Samples/$dir" "$rd" || ! cp -r "$(bin "$dir")/." "$rd/"; then
		echo 125 >"$log.rc"
		return
	fi
	t0=$(date +%s.%N)
	(cd "$rd" && env "${envv[@]}" timeout -k 10 "$TIMEOUT" "./${test%%+*}" "$@" </dev/null >"$log.out" 2>"$log.err")
	rc=$?
	echo "$t0 $(date +%s.%N)" | awk '{ printf "%.1f\n", $2 - $1 }' >"$log.time"
	echo "$rc" >"$log.rc"
	rm -rf "$rd"
}

# run_test TEST DIR [ARG...]: TEST twice natively and once under openmps at
# the same time, then compared; what the comparison prints goes to
# $WORK/rep/TEST.txt, and a failing test's logs to $WORK/faillogs (to
# $OUT/samples/fail-logs.tar.gz at the end).
run_test() {
	local test=$1 dir=$2; shift 2
	run_one native "$test" "$dir" "$@" &
	run_one native2 "$test" "$dir" "$@" &
	run_one openmps "$test" "$dir" "$@" &
	wait
	"$PYTHON" "$ROOT/tests/gpu/samples_compare.py" one "$test" "${test%%+*}" "$WORK/log" "$WORK/run" "$WORK" \
		"$TABLE" >"$WORK/rep/$test.txt" 2>&1
	if grep -q ' FAIL ' "$WORK/rep/$test.txt"; then
		cp "$WORK/log/$test".* "$WORK/faillogs/" 2>/dev/null
	fi
}

# SAMPLES_PAR tests at a time (default 1; 3 with SAMPLES_ALL=1), each
# test's report printed whole as it ends. A sample that faults its context
# on purpose runs alone: one server's clients share a context, and a fault
# ends every client of it (as under NVIDIA MPS; docs/CONTROL.md). So does
# one whose kernels print: what kernels print is the shared context's, and
# two clients printing at once may each take the other's lines
# (docs/ARCHITECTURE.md, "What kernels print").
SOLO=" simpleAssert simpleAssert_nvrtc simplePrintf cdpSimplePrint simpleCooperativeGroups graphConditionalNodes dsl "
PAR=${SAMPLES_PAR:-1}
[ "${SAMPLES_ALL:-0}" = 1 ] && PAR=${SAMPLES_PAR:-3}
TABLE=$WORK/table.tsv
: >"$TABLE"
mkdir -p "$WORK/rep" "$WORK/faillogs"
declare -A RUNNING=()
# reap: prints and forgets the reports of the tests that have ended.
reap() {
	local pid
	for pid in "${!RUNNING[@]}"; do
		kill -0 "$pid" 2>/dev/null && continue
		wait "$pid" 2>/dev/null
		tee -a "$WORK/report.txt" <"$WORK/rep/${RUNNING[$pid]}.txt"
		unset "RUNNING[$pid]"
	done
}
for t in "${TESTS[@]}"; do
	read -r tname dir args <<<"$t"
	selected "$tname" || continue
	if [ "$(cat "$(bin "$dir").status" 2>/dev/null)" != ok ]; then
		printf '%-32s not built\n' "$tname" | tee -a "$WORK/report.txt"
		# Every sample of the subset must build; of all, those that build here.
		b=FAIL
		[ "${SAMPLES_ALL:-0}" = 1 ] && b=no
		printf '%s\t%s\t-\t-\t-\t-\n' "$tname" "$b" >>"$TABLE"
		continue
	fi
	limit=$PAR
	case $SOLO in *" $tname "*) limit=1 ;; esac
	while [ ${#RUNNING[@]} -ge "$limit" ]; do
		sleep 0.2
		reap
	done
	# shellcheck disable=SC2086 # args is a list of words
	run_test "$tname" "$dir" $args &
	RUNNING[$!]=$tname
	case $SOLO in *" $tname "*)
		while [ ${#RUNNING[@]} -gt 0 ]; do
			sleep 0.2
			reap
		done ;;
	esac
done
while [ ${#RUNNING[@]} -gt 0 ]; do
	sleep 0.2
	reap
done

stop_openmps
if [ -n "${OUT:-}" ]; then
	cp "$WORK/report.txt" "$WORK/om-log/server.log" "$OUT/samples/" 2>/dev/null
	tar -czf "$OUT/samples/fail-logs.tar.gz" -C "$WORK" faillogs
	"$PYTHON" "$ROOT/tests/gpu/samples_compare.py" table "$TABLE" >"$OUT/samples/table.txt"
fi
echo
"$PYTHON" "$ROOT/tests/gpu/samples_compare.py" table "$TABLE"
