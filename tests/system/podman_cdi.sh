#!/bin/sh
# SPDX-License-Identifier: MIT
#
# By hand, not in `make test` (it needs root, podman and runc, and changes
# /var/run/cdi): a real container engine given openmps devices by CDI name.
# A daemon on the stand-in writes its spec, which is copied into
# /var/run/cdi; podman runs c_client in a minimal root filesystem (the
# host's c_client and libc, nothing of openmps's: the spec brings the
# library and the pipe directory) with --device openmps.io/gpu=...; the
# container must see exactly the devices asked for.
#
# The spec says cdiVersion 0.5.0, all podman 4.3 (Debian 12) reads;
# OPENMPS_CDI_VERSION rewrites it in the copy to try another. In a sandbox without CAP_SYS_RESOURCE the default rlimits
# cannot be set, hence the lowered --ulimit; crun there refuses a hybrid
# cgroup set-up, hence runc.
#
#   usage: podman_cdi.sh BUILD_DIR

name=podman_cdi; . "$(dirname "$0")/c_lib.sh"
export OPENMPS_STANDIN_DEVICES=2
for p in podman runc python3; do
	command -v $p >/dev/null || { echo "needs $p"; cleanup_only; exit 77; }
done
[ "$(id -u)" -eq 0 ] || { echo "needs root"; cleanup_only; exit 77; }
copy=/var/run/cdi/openmps-test-$$.json
rootfs="$dir/rootfs"
mkdir -p "$rootfs/usr/bin" "$rootfs/proc" "$rootfs/dev" "$rootfs/sys" "$rootfs/tmp"
cp "$build/tests/system/c_client" "$rootfs/usr/bin/"
for l in $(ldd "$build/tests/system/c_client" | awk '$3 ~ /^\// { print $3 } $1 ~ /^\/.*ld-linux/ { print $1 }'); do
	mkdir -p "$rootfs$(dirname "$l")"; cp -L "$l" "$rootfs$l"
done

export OPENMPS_CDI_SPEC="$dir/cdi/openmps.json"
start_daemon
unset OPENMPS_CDI_SPEC
ui "vdevice split 0 2" >"$dir/split.out"
mkdir -p /var/run/cdi
sed "s/\"cdiVersion\": \"[0-9.]*\"/\"cdiVersion\": \"${OPENMPS_CDI_VERSION:-0.5.0}\"/" "$dir/cdi/openmps.json" >"$copy"
u1=$(ui device_query | awk '$1 == "1" { print $2 }' | sed 's/^GPU-//; s/-//g')
v0=$(awk '$1 == "vgpu0-0" { print $2 }' "$dir/split.out" | sed 's/^GPU-//; s/-//g')
v1=$(awk '$1 == "vgpu0-1" { print $2 }' "$dir/split.out" | sed 's/^GPU-//; s/-//g')
pod() {
	podman run --runtime "$(command -v runc)" --rm --network=none --ulimit nofile=4096:4096 \
		--ulimit nproc=4096:4096 "$@" --rootfs "$rootfs" /usr/bin/c_client list 2>&1
}
got=$(pod --device openmps.io/gpu=vgpu0-1)
echo "$got" | grep -q "^list CUDA_SUCCESS 1 $v1 " || fail "vgpu0-1: $got"
got=$(pod --device openmps.io/gpu=1 --device openmps.io/gpu=vgpu0-0)
echo "$got" | grep -q "^list CUDA_SUCCESS 2 $u1 [^ ]* $v0 " || fail "1 and vgpu0-0: $got"
rm -f "$copy"
finish
