#!/bin/sh
# SPDX-License-Identifier: MIT
#
# CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER under openmps, on the stand-in's
# two devices: the devices a client sees for each form of the variable
# (ordinals, lists, GPU-UUIDs and prefixes, entries that end the list, a
# device named twice, an empty value), the GPUs a container was given
# (NVIDIA_VISIBLE_DEVICES: NVML indexes in PCI order or UUIDs, all, none),
# and that a client pinned to device 1 allocates on the server's device 1,
# not its device 0.
#
#   usage: control_visible.sh BUILD_DIR

name=control_visible
. "$(dirname "$0")/c_lib.sh"
export OPENMPS_STANDIN_DEVICES=2

start_daemon

# see VALUE EXPECTED: a client with CUDA_VISIBLE_DEVICES=VALUE ("unset" for
# none) lists EXPECTED: "RESULT N UUID PCI ...".
see() {
	if [ "$1" = unset ]; then
		got=$(env -u CUDA_VISIBLE_DEVICES LD_LIBRARY_PATH="$build/lib" "$build/tests/system/c_client" list)
	else
		got=$(CUDA_VISIBLE_DEVICES="$1" LD_LIBRARY_PATH="$build/lib" "$build/tests/system/c_client" list)
	fi
	[ "$got" = "list $2" ] || fail "CUDA_VISIBLE_DEVICES='$1': saw '$got', expected 'list $2'"
}

all=$(env -u CUDA_VISIBLE_DEVICES LD_LIBRARY_PATH="$build/lib" "$build/tests/system/c_client" list)
set -- $all
[ "$2" = CUDA_SUCCESS ] && [ "$3" = 2 ] || { fail "without the variable: '$all'"; finish; }
u0=$4 p0=$5 u1=$6 p1=$7
g1="GPU-$(echo "$u1" | sed 's/^\(........\)\(....\)\(....\)\(....\)\(.*\)$/\1-\2-\3-\4-\5/')"
g0="GPU-$(echo "$u0" | sed 's/^\(........\)\(....\)\(....\)\(....\)\(.*\)$/\1-\2-\3-\4-\5/')"
none="CUDA_ERROR_NO_DEVICE 0"

see unset "CUDA_SUCCESS 2 $u0 $p0 $u1 $p1"
see 1 "CUDA_SUCCESS 1 $u1 $p1"
see 0 "CUDA_SUCCESS 1 $u0 $p0"
see 1,0 "CUDA_SUCCESS 2 $u1 $p1 $u0 $p0"
see " 1 , 0" "CUDA_SUCCESS 2 $u1 $p1 $u0 $p0"
see "1,7,0" "CUDA_SUCCESS 1 $u1 $p1"
see "0,-1,1" "CUDA_SUCCESS 1 $u0 $p0"
see "$g1" "CUDA_SUCCESS 1 $u1 $p1"
see "$(echo "$g1" | cut -c1-10)" "CUDA_SUCCESS 1 $u1 $p1"
see "$g1,0" "CUDA_SUCCESS 1 $u1 $p1"
see "GPU-00000000" "$none"
see "MIG-1" "$none"
see "" "$none"
see -1 "$none"
see 1,1 "CUDA_ERROR_INVALID_DEVICE 0"
got=$(CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=1 LD_LIBRARY_PATH="$build/lib" \
	"$build/tests/system/c_client" list)
[ "$got" = "list CUDA_SUCCESS 1 $u1 $p1" ] || fail "PCI_BUS_ID order, device 1: '$got'"

# A container's GPUs (NVIDIA_VISIBLE_DEVICES), CUDA_VISIBLE_DEVICES among them;
# read only where the driver's device nodes are not there.
see_in() {
	[ -e /dev/nvidiactl ] && return 0   # NVIDIA_VISIBLE_DEVICES CUDA_VISIBLE_DEVICES EXPECTED
	got=$(env -u CUDA_VISIBLE_DEVICES ${2:+CUDA_VISIBLE_DEVICES=$2} NVIDIA_VISIBLE_DEVICES="$1" \
		LD_LIBRARY_PATH="$build/lib" "$build/tests/system/c_client" list)
	[ "$got" = "list $3" ] || fail "NVIDIA_VISIBLE_DEVICES='$1' CUDA_VISIBLE_DEVICES='$2': saw '$got', expected 'list $3'"
}
see_in all "" "CUDA_SUCCESS 2 $u0 $p0 $u1 $p1"
see_in none "" "$none"
see_in void "" "$none"
see_in "$g1" "" "CUDA_SUCCESS 1 $u1 $p1"
see_in "$g1" 0 "CUDA_SUCCESS 1 $u1 $p1"
see_in "$g1" 1 "$none"
see_in "GPU-00000000" "" "$none"
if [ "$(printf '%s\n%s\n' "$p0" "$p1" | sort -f | head -n 1)" = "$p0" ]; then first=0; else first=1; fi
if [ $first = 0 ]; then see_in 0 "" "CUDA_SUCCESS 1 $u0 $p0"; else see_in 0 "" "CUDA_SUCCESS 1 $u1 $p1"; fi
see_in 1,0 "" "CUDA_SUCCESS 2 $u0 $p0 $u1 $p1"

# With the driver's device nodes (NVIDIA's runtime gave the container its
# GPUs' nodes, the server serves them all): UUIDs still choose the
# container's GPUs; indexes are the host's and are left alone. A /dev of
# its own with a /dev/nvidiactl, in a mount namespace (root only).
see_nodes() {   # NVIDIA_VISIBLE_DEVICES EXPECTED
	got=$(unshare -m sh -c 'mount -t tmpfs tmpfs /dev && mknod -m 666 /dev/null c 1 3 && touch /dev/nvidiactl &&
		exec env -u CUDA_VISIBLE_DEVICES NVIDIA_VISIBLE_DEVICES="$1" LD_LIBRARY_PATH="$2/lib" \
			"$2/tests/system/c_client" list' sh "$1" "$build" 2>&1)
	[ "$got" = "list $2" ] || fail "with /dev/nvidiactl, NVIDIA_VISIBLE_DEVICES='$1': saw '$got', expected 'list $2'"
}
if [ "$(id -u)" = 0 ] && unshare -m sh -c 'mount -t tmpfs tmpfs /dev' 2>/dev/null; then
	see_nodes "$g1" "CUDA_SUCCESS 1 $u1 $p1"
	see_nodes " $g1,$g0" "CUDA_SUCCESS 2 $u0 $p0 $u1 $p1"   # in the server's order, as above
	see_nodes "GPU-00000000" "$none"
	see_nodes 1 "CUDA_SUCCESS 2 $u0 $p0 $u1 $p1"
	see_nodes all "CUDA_SUCCESS 2 $u0 $p0 $u1 $p1"
else
	note "not root or no mount namespaces: the device-node cases are skipped"
fi

# Memory of a client pinned to device 1 is the server's device 1's.
before0=$(LD_LIBRARY_PATH="$build/lib" "$build/tests/system/c_client" init meminfo | awk '/^meminfo/ {print $3}')
before1=$(LD_LIBRARY_PATH="$build/lib" "$build/tests/system/c_client" init dev:1 meminfo | awk '/^meminfo/ {print $3}')
CUDA_VISIBLE_DEVICES=1 client pinned init alloc:256 wait:"$dir/go"
for _ in $(seq 100); do grep -q "^alloc 256" "$dir/pinned.out" 2>/dev/null && break; sleep 0.05; done
grep -q "^alloc 256 CUDA_SUCCESS" "$dir/pinned.out" || fail "the pinned client's allocation: $(cat "$dir/pinned.out")"
after0=$(LD_LIBRARY_PATH="$build/lib" "$build/tests/system/c_client" init meminfo | awk '/^meminfo/ {print $3}')
after1=$(LD_LIBRARY_PATH="$build/lib" "$build/tests/system/c_client" init dev:1 meminfo | awk '/^meminfo/ {print $3}')
touch "$dir/go"
[ $((before1 - after1)) -ge $((256 << 20)) ] || fail "device 1's free memory went $before1 -> $after1"
[ $((before0 - after0)) -lt $((64 << 20)) ] || fail "device 0's free memory went $before0 -> $after0"
note "device 1 lost $(((before1 - after1) >> 20)) MiB, device 0 $(((before0 - after0) >> 20)) MiB"

finish
