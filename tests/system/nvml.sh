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
#     one device: the slice's UUID and its 512 MiB as the total; a memory
#     limit (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT) is the total a process sees,
#     and what it allocates shows as used;
#   - calls before nvmlInit and after the last nvmlShutdown are
#     NVML_ERROR_UNINITIALIZED; a bad handle, a short buffer, an unknown
#     UUID and a wrong structure version get NVML's errors; what openmps
#     cannot answer truthfully (utilisation, the kernel driver's version)
#     is NVML_ERROR_NOT_SUPPORTED;
#   - the CDI spec puts the library's directory on LD_LIBRARY_PATH.
#
#   usage: nvml.sh BUILD_DIR

name=nvml; . "$(dirname "$0")/c_lib.sh"
nvml_lib="$build/lib/nvml"
[ -e "$nvml_lib/libnvidia-ml.so.1" ] || { fail "no $nvml_lib/libnvidia-ml.so.1"; finish; }
run_nvml() { env "$@" LD_LIBRARY_PATH="$nvml_lib:$build/lib" "$build/tests/system/c_nvml"; }

start_daemon
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
grep -q "^errors 2 7 6 3 3 2$" "$dir/all.out" || fail "errors: $(grep '^errors' "$dir/all.out")"
grep -q "^still 0$" "$dir/all.out" || fail "nvmlInit twice, nvmlShutdown once must leave it initialised"
grep -q "^after 1$" "$dir/all.out" || fail "a call after the last nvmlShutdown"

# One slice: one device, its UUID, its memory.
hex=$(echo "$v1" | sed 's/^GPU-//; s/-//g' | tr 'a-f' 'A-F')
run_nvml NVIDIA_VISIBLE_DEVICES=void "OPENMPS_CDI_DEVICE_$hex=$v1" >"$dir/slice.out" 2>&1 || fail "c_nvml (slice): $(cat "$dir/slice.out")"
grep -q "^count 1$" "$dir/slice.out" || fail "a slice's count: $(cat "$dir/slice.out")"
grep -q "^dev 0 $v1 $((512 * 1048576)) " "$dir/slice.out" || fail "the slice: $(grep '^dev' "$dir/slice.out")"
grep -q "^v2 0 $((512 * 1048576)) " "$dir/slice.out" || fail "the slice, v2: $(grep '^v2' "$dir/slice.out")"

# A memory limit is the total a process sees.
run_nvml CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=100M >"$dir/limit.out" 2>&1 || fail "c_nvml (limit): $(cat "$dir/limit.out")"
grep -q "^dev 0 GPU-[0-9a-f-]* $((100 * 1048576)) $((100 * 1048576)) 0 " "$dir/limit.out" ||
	fail "a 100M limit: $(grep '^dev 0' "$dir/limit.out")"

# The CDI spec puts the library's directory on LD_LIBRARY_PATH.
ui "cdi_spec $dir/openmps.json" >/dev/null || fail "cdi_spec"
grep -q "\"LD_LIBRARY_PATH=$(cd "$build/lib" && pwd -P):$(cd "$nvml_lib" && pwd -P):" "$dir/openmps.json" ||
	fail "the CDI spec's LD_LIBRARY_PATH: $(grep LD_LIBRARY_PATH "$dir/openmps.json")"

finish
