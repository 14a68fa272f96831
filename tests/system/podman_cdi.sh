#!/bin/sh
# SPDX-License-Identifier: MIT
#
# A real container engine given openmps devices by CDI name, in `make
# test`. A daemon on the stand-in (two devices of 16 SMs and 1 GiB) writes
# its spec, `vdevice split 0 2` makes vgpu0-0 and vgpu0-1 (8 SMs and 512
# MiB each), and the spec is copied into /var/run/cdi, where podman reads
# it. podman (with runc) runs c_client and c_nvml in a minimal root
# filesystem (the host's c_client, c_nvml, true and the libraries they,
# openmps's nvidia-smi and its NVML load, nothing of openmps's: the spec
# brings the libraries, nvidia-smi and the pipe directory) with --device
# openmps.io/gpu=NAME:
#   - the container sees exactly the devices asked for: vgpu0-1 alone, or
#     GPU 1 and vgpu0-0;
#   - a client given vgpu0-1 sees the slice: 8 SMs
#     (CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT) and 512 MiB (cuMemGetInfo's
#     total);
#   - while it holds a context and 1 MiB, get_metrics on the host shows it,
#     under its host PID (podman inspect's, in another PID namespace): its
#     virtual device, memory, memory limit and SMs; so does vdevice list;
#   - it cannot open /dev/nvidiactl or /dev/nvidia0 (ENOENT): the spec
#     brings no device node;
#   - in a container given vgpu0-1, openmps's nvidia-smi, where the spec
#     mounts it (/usr/bin/nvidia-smi), lists with -L exactly one GPU, the
#     slice's UUID; and NVML (c_nvml basic: what pynvml asks) counts one
#     device with the slice's UUID, 512 MiB in all, and the name
#     nvidia-smi gives.
#
# Skipped (77) without root, podman or runc, or where podman cannot start
# even a trivial container from the same root filesystem (true), and where
# another spec in /var/run/cdi already defines openmps.io/gpu devices (an
# installed daemon's): podman resolves no device two specs there define.
# Runs of the test take turns (flock on this file) for the same reason; a
# copy a killed run left is removed. The copy, the containers (--rm, and
# removed by name on every way out) and the folders go whatever happens.
# No network: --network=none, and --rootfs needs no image.
#
# The daemon starts with OPENMPS_CDI_VERSION=0.5.0 unless the environment
# names another (0.6.0 for podman 4.7 or later): podman before 4.7, such as
# Debian 12's 4.3, reads no spec past 0.5.0 and resolves no device from one
# that says 0.6.0. In a sandbox without CAP_SYS_RESOURCE the default rlimits
# cannot be set, hence the lowered --ulimit; crun there refuses a hybrid
# cgroup set-up, hence runc.
#
#   usage: podman_cdi.sh BUILD_DIR

for p in podman runc; do
	command -v $p >/dev/null || { echo "needs $p"; exit 77; }
done
[ "$(id -u)" -eq 0 ] || { echo "needs root (podman with /var/run/cdi)"; exit 77; }
if [ -z "${OPENMPS_PODMAN_CDI_LOCKED:-}" ] && command -v flock >/dev/null; then
	export OPENMPS_PODMAN_CDI_LOCKED=1
	flock -o -E 75 -w 60 "$0" sh "$0" "$@"; st=$?
	[ $st -eq 75 ] && echo "podman_cdi: FAIL: another run of the test held its lock for 60 s"
	exit $st
fi

name=podman_cdi
# shellcheck source-path=SCRIPTDIR source=c_lib.sh
. "$(dirname "$0")/c_lib.sh"
export OPENMPS_STANDIN_DEVICES=2
MiB=1048576
cdi=/var/run/cdi
copy=$cdi/openmps-test-$$.json
made_cdi=""
rootfs="$dir/rootfs"
containers="openmps-test-$$-probe openmps-test-$$-two openmps-test-$$-slice openmps-test-$$-smi openmps-test-$$-nvml"

# Whatever the way out (finish, a skip, a signal): the containers (their
# own --rm may not have run: a podman run killed), the copy.
podman_cleanup() {
	# shellcheck disable=SC2086 # the names, one word each
	[ -n "$containers" ] && podman rm -f -i -t 0 $containers >/dev/null 2>&1
	containers=""
	rm -f "$copy"
	[ -n "$made_cdi" ] && rmdir "$cdi" 2>/dev/null
	made_cdi=""
}
trap podman_cleanup EXIT
trap 'fail "interrupted"; podman_cleanup; finish' HUP INT TERM
skip() { echo "$*"; podman_cleanup; cleanup_only; exit 77; }

# pod NAME ARGS...: podman run, the container named openmps-test-PID-NAME
# (one of $containers).
pod() {
	cn="openmps-test-$$-$1"; shift
	podman run --runtime "$(command -v runc)" --rm --name "$cn" --network=none \
		--ulimit nofile=4096:4096 --ulimit nproc=4096:4096 "$@"
}
field() { awk -v s="$2" -v n="$3" -v w="${4:-1}" '$1 == s && ++k == w { print $n }' "$dir/$1.out"; }
hex() { echo "$1" | sed 's/^GPU-//; s/-//g'; }

# The root filesystem: c_client, c_nvml and true with the libraries they
# load, and those openmps's nvidia-smi and NVML load, openmps's own
# (libcuda, its NVML, nvidia-smi: the spec brings them) excepted.
mkdir -p "$rootfs/usr/bin" "$rootfs/proc" "$rootfs/dev" "$rootfs/sys" "$rootfs/tmp" "$rootfs/sig" "$dir/sig"
truebin=$(command -v true | grep /) || truebin=/bin/true
cp "$build/tests/system/c_client" "$build/tests/system/c_nvml" "$truebin" "$rootfs/usr/bin/"
for l in $(LD_LIBRARY_PATH="$build/lib" ldd "$build/tests/system/c_client" "$build/tests/system/c_nvml" "$truebin" \
		"$build/lib/nvml/nvidia-smi" "$build/lib/nvml/libnvidia-ml.so.1" |
	   awk '$3 ~ /^\// { print $3 } $1 ~ /^\/.*ld-linux/ { print $1 }' | grep -v -e '/libcuda\.' -e '/libnvidia-ml\.' | sort -u); do
	mkdir -p "$rootfs$(dirname "$l")"; cp -L "$l" "$rootfs$l"
done

# Can this machine run a container at all? Only that failing skips.
if ! pod probe --rootfs "$rootfs" /usr/bin/true >"$dir/probe.log" 2>&1; then
	skip "podman cannot run a container here: $(tail -n 1 "$dir/probe.log")"
fi

# The spec's copy; one a killed run left goes, another's devices skip.
for f in "$cdi"/openmps-test-*.json; do
	[ -e "$f" ] || continue
	p=${f##*/openmps-test-}; p=${p%.json}
	kill -0 "$p" 2>/dev/null || rm -f "$f"
done
other=$(grep -l 'openmps\.io/gpu' "$cdi"/*.json "$cdi"/*.yaml 2>/dev/null | head -n 1)
[ -z "$other" ] || skip "$other already defines openmps.io/gpu devices, which a second spec there would hide from podman"

cdi_version=${OPENMPS_CDI_VERSION:-0.5.0}
export OPENMPS_CDI_SPEC="$dir/cdi/openmps.json" OPENMPS_CDI_VERSION="$cdi_version"
# shellcheck disable=SC2119 # no options: the daemon as it starts by default
start_daemon
unset OPENMPS_CDI_SPEC OPENMPS_CDI_VERSION
ui "vdevice split 0 2" >"$dir/split.out" || fail "vdevice split 0 2: $(cat "$dir/split.out")"
wait_for "$dir/cdi/openmps.json" '"vgpu0-1"' || fail "the daemon's spec names no vgpu0-1"
grep -q "^  \"cdiVersion\": \"$cdi_version\",\$" "$dir/cdi/openmps.json" ||
	fail "the daemon's spec does not say cdiVersion $cdi_version: $(grep cdiVersion "$dir/cdi/openmps.json")"
[ -d "$cdi" ] || { mkdir -p "$cdi" && made_cdi=1; }
cp "$dir/cdi/openmps.json" "$copy" || fail "cannot write $copy"
u1=$(hex "$(ui device_query | awk '$1 == "1" { print $2 }')")
v0=$(hex "$(awk '$1 == "vgpu0-0" { print $2 }' "$dir/split.out")")
v1_uuid=$(awk '$1 == "vgpu0-1" { print $2 }' "$dir/split.out")
v1=$(hex "$v1_uuid")

# Two devices: exactly those, the GPU first.
pod two --device openmps.io/gpu=1 --device openmps.io/gpu=vgpu0-0 --rootfs "$rootfs" \
	/usr/bin/c_client list >"$dir/two.out" 2>&1
grep -q "^list CUDA_SUCCESS 2 $u1 [^ ]* $v0 " "$dir/two.out" || fail "1 and vgpu0-0: $(cat "$dir/two.out")"

# vgpu0-1 alone, held until the host has looked: its devices, the slice's
# SMs and memory, no device node.
pod slice --device openmps.io/gpu=vgpu0-1 --volume "$dir/sig:/sig" --rootfs "$rootfs" \
	/usr/bin/c_client open:/dev/nvidiactl open:/dev/nvidia0 list init sms meminfo alloc:1 wait:/sig/go \
	>"$dir/slice.out" 2>&1 &
slice_pid=$!
bg_pids="$bg_pids $slice_pid"
# metric NAME LABELS VALUE: get_metrics has NAME of the container's client,
# with LABELS (a pattern), at VALUE.
metric() {
	grep -Eq "^$1\\{[^}]*pid=\"$hpid\"[^}]*$2\\} $3\$" "$dir/metrics.out" ||
		fail "get_metrics: no $1 of the container's client (pid $hpid) with $2 at $3: $(grep "^$1{" "$dir/metrics.out" | tr '\n' ' ')"
}
if wait_for "$dir/slice.out" "^waiting" 30; then
	hpid=$(podman inspect --format '{{.State.Pid}}' "openmps-test-$$-slice")
	ns=$(readlink "/proc/${hpid:-none}/ns/pid")
	if [ -z "$ns" ] || [ "$ns" = "$(readlink /proc/self/ns/pid)" ]; then
		fail "podman inspect's pid '$hpid' is no process in a PID namespace of its own"
	fi
	ui get_metrics >"$dir/metrics.out"
	metric openmps_client_vdevice 'comm="c_client",device="0",vdevice="vgpu0-1"' 1
	metric openmps_client_memory_bytes 'device="0"' "$MiB"
	metric openmps_client_memory_limit_bytes 'device="0"' $((512 * MiB))
	metric openmps_client_sms 'device="0"' 8
	ui "vdevice list" | grep -Eq "^vgpu0-1 GPU-[0-9a-f-]+ 0 1/2 1/2 $hpid\$" ||
		fail "vdevice list does not name the container's client ($hpid): $(ui "vdevice list")"
	touch "$dir/sig/go"
	wait_for "$dir/slice.out" "^waited" 30 || { fail "the container's client did not see /sig/go"; podman_cleanup; }
else
	fail "the container's client was not served"
	podman_cleanup   # stops the container, and so its podman run
fi
wait "$slice_pid"; st=$?
[ $st -eq 0 ] || fail "podman run (vgpu0-1) exited $st"
for n in nvidiactl nvidia0; do
	[ "$(awk -v p="/dev/$n" '$1 == "open" && $2 == p { print $3 }' "$dir/slice.out")" = 2 ] ||
		fail "/dev/$n in the container: $(grep "^open /dev/$n " "$dir/slice.out"), expected ENOENT (2)"
done
grep -q "^list CUDA_SUCCESS 1 $v1 " "$dir/slice.out" || fail "vgpu0-1: $(grep '^list' "$dir/slice.out")"
[ "$(field slice init 2)" = CUDA_SUCCESS ] || fail "init in the container: $(field slice init 2)"
[ "$(field slice sms 3)" = 8 ] || fail "the container's client reads $(field slice sms 3) SMs, expected vgpu0-1's 8"
[ "$(field slice meminfo 4)" = $((512 * MiB)) ] ||
	fail "the container's client has $(field slice meminfo 4) bytes in all, expected vgpu0-1's 512 MiB"
[ "$(field slice alloc 3)" = CUDA_SUCCESS ] || fail "alloc:1 in the container: $(field slice alloc 3)"

# nvidia-smi and NVML in a container given vgpu0-1: the slice alone.
pod smi --device openmps.io/gpu=vgpu0-1 --rootfs "$rootfs" /usr/bin/nvidia-smi -L >"$dir/smi.out" 2>&1 ||
	fail "nvidia-smi -L in the container exited $?: $(cat "$dir/smi.out")"
smi_name=$(sed -n 's/^GPU 0: \(.*\) (UUID: \(GPU-[0-9a-f-]*\))$/\1 \2/p' "$dir/smi.out")
[ "$(wc -l <"$dir/smi.out") ${smi_name##* }" = "1 $v1_uuid" ] ||
	fail "nvidia-smi -L in the container: '$(cat "$dir/smi.out")', expected one line, GPU 0 with UUID $v1_uuid"
smi_name=${smi_name% *}
pod nvml --device openmps.io/gpu=vgpu0-1 --rootfs "$rootfs" /usr/bin/c_nvml basic >"$dir/nvml.out" 2>&1 ||
	fail "c_nvml basic in the container exited $?: $(cat "$dir/nvml.out")"
[ "$(field nvml count 2)" = 1 ] || fail "NVML in the container counts '$(field nvml count 2)' devices, expected 1"
[ "$(field nvml dev 3)" = "$v1_uuid" ] || fail "NVML in the container: device 0 is '$(field nvml dev 3)', expected $v1_uuid"
[ "$(field nvml dev 4)" = $((512 * MiB)) ] ||
	fail "NVML in the container: $(field nvml dev 4) bytes in all, expected vgpu0-1's 512 MiB"
nvml_name=$(awk '$1 == "dev" { $1 = $2 = $3 = $4 = $5 = $6 = $7 = $8 = ""; sub(/^ */, ""); print }' "$dir/nvml.out")
[ "${nvml_name:-none}" = "$smi_name" ] || fail "NVML's name in the container: '$nvml_name', nvidia-smi's '$smi_name'"

stop_daemon
finish
