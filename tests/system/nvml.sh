#!/bin/sh
# SPDX-License-Identifier: MIT
#
# openmps's libnvidia-ml.so.1 (src/nvml), as a container without NVIDIA's
# driver files loads it (its directory first on LD_LIBRARY_PATH, as the CDI
# spec and the device plugin set it), against the stand-in with the GPU
# split in two:
#   - what NVML lists is what CUDA lists, device by device (UUIDs in the
#     same order as c_client's), names, compute capability, PCI bus IDs,
#     handles found again by UUID;
#   - a container given one slice (its OPENMPS_CDI_DEVICE_ variable) sees
#     one device: the slice's UUID and its 512 MiB as the total (c_nvml
#     basic, which podman_cdi.sh runs in a container, the same lines); a
#     memory limit (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT) is the total a process
#     sees, and what it allocates shows as used;
#   - calls before nvmlInit and after the last nvmlShutdown are
#     NVML_ERROR_UNINITIALIZED; a bad handle, a short buffer, an unknown
#     UUID, a NULL answer and a wrong structure version get NVML's errors;
#   - utilisation is 0 with no work, and more than 0 (at most 100) while a
#     client's kernels run: the clients' GPU time over the time gone; the
#     memory figure is not measured (0);
#   - the running processes are the daemon's clients, a GPU's all of them
#     and a slice's those that chose it, with the memory each holds;
#   - the kernel driver's version and NVML's from sysfs or /proc (either
#     module's wording), not supported where neither can be read;
#   - the CDI spec puts the library's directory on LD_LIBRARY_PATH.
#
#   usage: nvml.sh BUILD_DIR

name=nvml; . "$(dirname "$0")/c_lib.sh"
nvml_lib="$build/lib/nvml"
[ -e "$nvml_lib/libnvidia-ml.so.1" ] || { fail "no $nvml_lib/libnvidia-ml.so.1"; finish; }
# No kernel driver's version to read unless a test gives one (OPENMPS_NVML_ROOT).
mkdir -p "$dir/none"
run_nvml() { env OPENMPS_NVML_ROOT="$dir/none" "$@" LD_LIBRARY_PATH="$nvml_lib:$build/lib" "$build/tests/system/c_nvml"; }

OPENMPS_GPU_TIME_SAMPLE=1 start_daemon
split=$(ui "vdevice split 0 2") || fail "vdevice split: $split"
v1=$(echo "$split" | awk '$1 == "vgpu0-1" { print $2 }')

# Every device, as CUDA lists it.
run_nvml >"$dir/all.out" 2>&1 || fail "c_nvml: $(cat "$dir/all.out")"
LD_LIBRARY_PATH="$build/lib" "$build/tests/system/c_client" list >"$dir/list.out" 2>&1
n=$(awk '/^list CUDA_SUCCESS/ { print $3 }' "$dir/list.out")
grep -q "^count $n$" "$dir/all.out" || fail "NVML's count is not CUDA's ($n): $(cat "$dir/all.out")"
cuda_uuids=$(awk '/^list CUDA_SUCCESS/ { for (i = 4; i <= NF; i += 2) print $i }' "$dir/list.out")
nvml_uuids=$(awk '$1 == "dev" { u = $3; sub(/^GPU-/, "", u); gsub(/-/, "", u); print u }' "$dir/all.out")
[ "$cuda_uuids" = "$nvml_uuids" ] || fail "UUIDs: CUDA $cuda_uuids, NVML $nvml_uuids"
grep -q "^before 1$" "$dir/all.out" || fail "a call before nvmlInit"
grep -q "^dev 0 GPU-[0-9a-f-]\{36\} [0-9]* [0-9]* [0-9]* [0-9]*\.[0-9] [0-9a-f]\{8\}:[0-9a-f]\{2\}:[0-9a-f]\{2\}\.0 openmps stand-in" "$dir/all.out" ||
	fail "device 0: $(grep '^dev 0' "$dir/all.out")"
for i in $(seq 0 $((n - 1))); do
	grep -q "^byuuid $i$" "$dir/all.out" || fail "device $i not found again by its UUID"
done
grep -q "^errors 2 7 6 2 3 2$" "$dir/all.out" || fail "errors: $(grep '^errors' "$dir/all.out")"
grep -q "^util 0 0 0 0 0$" "$dir/all.out" || fail "utilisation with no work: $(grep '^util 0' "$dir/all.out")"
grep -q "^still 0$" "$dir/all.out" || fail "nvmlInit twice, nvmlShutdown once must leave it initialised"
grep -q "^after 1$" "$dir/all.out" || fail "a call after the last nvmlShutdown"

# One slice: one device, its UUID, its memory.
hex=$(echo "$v1" | sed 's/^GPU-//; s/-//g' | tr 'a-f' 'A-F')
run_nvml NVIDIA_VISIBLE_DEVICES=void "OPENMPS_CDI_DEVICE_$hex=$v1" >"$dir/slice.out" 2>&1 || fail "c_nvml (slice): $(cat "$dir/slice.out")"
grep -q "^count 1$" "$dir/slice.out" || fail "a slice's count: $(cat "$dir/slice.out")"
grep -q "^dev 0 $v1 $((512 * 1048576)) " "$dir/slice.out" || fail "the slice: $(grep '^dev' "$dir/slice.out")"
grep -q "^v2 0 $((512 * 1048576)) " "$dir/slice.out" || fail "the slice, v2: $(grep '^v2' "$dir/slice.out")"
# c_nvml basic (podman_cdi.sh's, in a container): the same lines, nothing more.
env OPENMPS_NVML_ROOT="$dir/none" NVIDIA_VISIBLE_DEVICES=void "OPENMPS_CDI_DEVICE_$hex=$v1" \
	LD_LIBRARY_PATH="$nvml_lib:$build/lib" "$build/tests/system/c_nvml" basic >"$dir/basic.out" 2>&1 ||
	fail "c_nvml basic: $(cat "$dir/basic.out")"
[ "$(cat "$dir/basic.out")" = "$(grep -E '^(before|count|dev|v2) ' "$dir/slice.out")" ] ||
	fail "c_nvml basic: $(cat "$dir/basic.out"), expected the slice's before, count, dev and v2 lines"

# A memory limit is the total a process sees.
run_nvml CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=100M >"$dir/limit.out" 2>&1 || fail "c_nvml (limit): $(cat "$dir/limit.out")"
grep -q "^dev 0 GPU-[0-9a-f-]* $((100 * 1048576)) $((100 * 1048576)) 0 " "$dir/limit.out" ||
	fail "a 100M limit: $(grep '^dev 0' "$dir/limit.out")"

# Running processes, as the daemon lists them to this process (its own PID
# namespace's clients, control_pidns checks a pod's view): a client holding
# 8 MiB of the GPU and one holding 4 MiB of the slice. The GPU lists both
# (NVML lists every process on a GPU), the slice its own; the v1 records
# alike; graphics processes none.
client A init alloc:8 "wait:$dir/goA" sync
env NVIDIA_VISIBLE_DEVICES=void "OPENMPS_CDI_DEVICE_$hex=$v1" LD_LIBRARY_PATH="$build/lib" \
	"$build/tests/system/c_client" init alloc:4 "wait:$dir/goS" sync >"$dir/S.out" 2>"$dir/S.err" &
echo $! >"$dir/S.pid"
bg_pids="$bg_pids $!"
wait_for "$dir/A.out" "^waiting" && wait_for "$dir/S.out" "^waiting" || fail "the clients did not start: $(cat "$dir/A.err" "$dir/S.err")"
run_nvml >"$dir/procs.out" 2>&1 || fail "c_nvml (processes): $(cat "$dir/procs.out")"
line=$(grep "^procs 0 " "$dir/procs.out")
case "$line" in
"procs 0 0 "*" $(cpid A):8388608:ffffffff"*) ;; *) fail "the GPU's processes lack the 8 MiB client $(cpid A): $line" ;; esac
case "$line" in
"procs 0 0 "*" $(cpid S):4194304:ffffffff"*) ;; *) fail "the GPU's processes lack the slice's client $(cpid S): $line" ;; esac
case "$(grep "^procs1 0 " "$dir/procs.out")" in
"procs1 0 0 "*" $(cpid A):8388608"*) ;; *) fail "v1 records: $(grep "^procs1 0 " "$dir/procs.out")" ;; esac
run_nvml NVIDIA_VISIBLE_DEVICES=void "OPENMPS_CDI_DEVICE_$hex=$v1" >"$dir/sprocs.out" 2>&1 ||
	fail "c_nvml (the slice's processes): $(cat "$dir/sprocs.out")"
line=$(grep "^procs 0 " "$dir/sprocs.out")
case "$line" in
"procs 0 0 "*" $(cpid S):4194304:ffffffff"*) ;; *) fail "the slice's processes lack its client $(cpid S): $line" ;; esac
case "$line" in
*" $(cpid A):"*) fail "the slice lists the GPU's client $(cpid A): $line" ;; esac
touch "$dir/goA" "$dir/goS"
for c in A S; do
	wait "$(cpid "$c")" || fail "client $c failed: $(cat "$dir/$c.out" "$dir/$c.err")"
done

# Utilisation while a client's kernels run: 20 kernels of 0.1 s each
# (the stand-in's spin), every launch timed (OPENMPS_GPU_TIME_SAMPLE=1,
# the daemon's), read once they have begun.
spins=""
for _ in $(seq 1 20); do spins="$spins spin:1:32:200000000"; done
# shellcheck disable=SC2086 # one argument per kernel
client B init $spins
wait_for "$dir/B.out" "^spin" 10 || fail "the spinning client did not start: $(cat "$dir/B.err")"
run_nvml >"$dir/busy.out" 2>&1 || fail "c_nvml (busy): $(cat "$dir/busy.out")"
# shellcheck disable=SC2046 # the line's fields
set -- $(grep "^util 0 " "$dir/busy.out")
[ "$3" = 0 ] && [ "$4" = 0 ] && [ "$5" -gt 0 ] && [ "$5" -le 100 ] && [ "$6" = 0 ] ||
	fail "utilisation while kernels run: $(grep '^util 0 ' "$dir/busy.out")"
[ -n "${OPENMPS_TEST_VERBOSE:-}" ] && note "utilisation while kernels run: $5%"
kill "$(cpid B)" 2>/dev/null
wait "$(cpid B)" 2>/dev/null

# The kernel driver's version where the kernel tells it: sysfs's module
# version first, else /proc/driver/nvidia/version in either module's
# wording; NVML's version is CUDA's major and it. Nowhere: not supported.
grep -q "^driver 3 -$" "$dir/all.out" && grep -q "^nvmlver 3 -$" "$dir/all.out" ||
	fail "no driver version to read: $(grep '^driver\|^nvmlver' "$dir/all.out")"
mkdir -p "$dir/r1/sys/module/nvidia" "$dir/r1/proc/driver/nvidia" "$dir/r2/proc/driver/nvidia" "$dir/r3/proc/driver/nvidia"
echo 580.159.04 >"$dir/r1/sys/module/nvidia/version"
echo "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023" \
	>"$dir/r1/proc/driver/nvidia/version"
echo "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  (dvs-builder@U16-I3-B03-4-3)  Tue Sep 16 20:06:13 UTC 2025" \
	>"$dir/r2/proc/driver/nvidia/version"
echo "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023" \
	>"$dir/r3/proc/driver/nvidia/version"
cuda_major=$(awk '/^cuda / { print int($2 / 1000) }' "$dir/all.out")
for r in "r1 580.159.04" "r2 580.95.05" "r3 535.104.05"; do
	set -- $r
	run_nvml OPENMPS_NVML_ROOT="$dir/$1" >"$dir/$1.out" 2>&1 || fail "c_nvml ($1): $(cat "$dir/$1.out")"
	grep -q "^driver 0 $2$" "$dir/$1.out" || fail "driver version from $1: $(grep '^driver' "$dir/$1.out")"
	grep -q "^nvmlver 0 $cuda_major\.$2$" "$dir/$1.out" ||
		fail "NVML version from $1 (CUDA $cuda_major): $(grep '^nvmlver' "$dir/$1.out")"
	grep -q "^errors 2 7 6 2 7 2$" "$dir/$1.out" || fail "a short buffer for the version ($1): $(grep '^errors' "$dir/$1.out")"
done

# The CDI spec puts the library's directory on LD_LIBRARY_PATH.
ui "cdi_spec $dir/openmps.json" >/dev/null || fail "cdi_spec"
grep -q "\"LD_LIBRARY_PATH=$(cd "$build/lib" && pwd -P):$(cd "$nvml_lib" && pwd -P):" "$dir/openmps.json" ||
	fail "the CDI spec's LD_LIBRARY_PATH: $(grep LD_LIBRARY_PATH "$dir/openmps.json")"

finish
