#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Virtual devices (server/vdevice.h) on the stand-in's two devices (16 SMs
# in groups of 2, 1 GiB each):
#   - vdevice split / add / list / rm, and their errors; layouts that do
#     not fit (more slices than SM groups, more SMs or memory than a device
#     has left, a split over another's slices) refused;
#   - a client that selects a slice by its UUID (CUDA_VISIBLE_DEVICES, or
#     OPENMPS_VISIBLE_DEVICES, which comes first) sees
#     one device with that UUID, the slice's SM count and memory, runs on
#     the slice's SMs only and cannot allocate past its memory;
#   - two slices never share an SM; a client without the variable sees the
#     GPUs, not the slices; two slices of one GPU in one client are refused;
#   - a removed slice is no longer offered; get_metrics shows each slice and
#     the clients' choices, vdevice list each slice's clients.
#
#   usage: control_vdevices.sh BUILD_DIR

name=control_vdevices; . "$(dirname "$0")/c_lib.sh"
export OPENMPS_STANDIN_DEVICES=2
MiB=1048576
run() {   # NAME ENV STEPS...: runs a client to its end
	cn=$1; ev=$2; shift 2
	env $ev LD_LIBRARY_PATH="$build/lib" "$build/tests/system/c_client" "$@" >"$dir/$cn.out" 2>"$dir/$cn.err"
}
field() { awk -v s="$2" -v n="$3" -v w="${4:-1}" '$1 == s && ++k == w { print $n }' "$dir/$1.out"; }
hex() { echo "$1" | sed 's/^GPU-//; s/-//g'; }

start_daemon
ui "vdevice split 0 2" >"$dir/split.out"; st=$?
[ $st -eq 0 ] && [ "$(wc -l <"$dir/split.out")" -eq 2 ] || fail "vdevice split 0 2: $(cat "$dir/split.out")"
u0=$(awk '$1 == "vgpu0-0" { print $2 }' "$dir/split.out")
u1=$(awk '$1 == "vgpu0-1" { print $2 }' "$dir/split.out")
case "$u0$u1" in GPU-*GPU-*) ;; *) fail "no UUIDs: $(cat "$dir/split.out")" ;; esac
[ "$u0" != "$u1" ] || fail "both slices have UUID $u0"
expect "vdevice list" "vgpu0-0 $u0 0 1/2 1/2
vgpu0-1 $u1 0 1/2 1/2"
expect_err "vdevice split 0 1" "not a number of slices"
expect_err "vdevice split 0 x" "not a number of slices"
expect_err "vdevice add bad/name 0 4 256M" "not a virtual device name"
expect_err "vdevice add v 0 0 256M" "not a number of SMs"
expect_err "vdevice add v 0 4 lots" "not a memory size"
expect_err "vdevice add v 7 4 256M" "not a device"
expect_err "vdevice rm nope" "no virtual device named 'nope'"
expect_err "vdevice bogus" "usage"
expect_err "sm_partition add vgpu0-0 0 2" "virtual device's name"
# Device 0's eight groups are the two slices'; device 1 has 1024 MiB.
expect_err "vdevice split 1 16" "device 1 has 8 SM groups \\(of 2 SMs\\); it cannot be split in 16"
expect_err "vdevice add over 0 2 64M" "2 SMs do not fit on device 0: 0 of its 16 SMs \\(groups of 2\\) are free \\(taken: vgpu0-0, vgpu0-1\\)"
expect_err "sm_partition add over 0 2" "2 SMs do not fit on device 0"
expect_err "vdevice add huge 1 2 2G" "2048 MiB do not fit on device 1: 1024 of its 1024 MiB are free"
expect_err "vdevice add many 1 99999 64M" "99999 SMs do not fit on device 1"

# A client on each slice: one device each, with the slice's UUID, SMs and memory.
run A "CUDA_VISIBLE_DEVICES=$u0" list init sms meminfo smids:64 alloc:300 alloc:300
[ "$(field A sms 3)" = 8 ] || fail "A's SM count before any work: $(field A sms 3)"
run B "CUDA_VISIBLE_DEVICES=1 OPENMPS_VISIBLE_DEVICES=$u1" init sms smids:64
[ "$(field A list 3)" = 1 ] && [ "$(field A list 4)" = "$(hex "$u0")" ] ||
	fail "A sees $(field A list 3) device(s), UUID $(field A list 4), not $u0"
[ "$(field A sms 3)" = 8 ] && [ "$(field A smids 3)" = 8 ] ||
	fail "A reads $(field A sms 3) SMs and ran on $(field A smids 3), expected 8"
[ "$(field A meminfo 4)" = $((512 * MiB)) ] || fail "A's total memory is $(field A meminfo 4), expected 512 MiB"
[ "$(field A alloc 3 1)" = CUDA_SUCCESS ] && [ "$(field A alloc 3 2)" = CUDA_ERROR_OUT_OF_MEMORY ] ||
	fail "300M twice in a 512M slice: $(grep alloc "$dir/A.out" | tr '\n' ' ')"
[ "$(field B smids 3)" = 8 ] || fail "B ran on $(field B smids 3) SMs"
field A smids 6 | tr ',' '\n' | sort >"$dir/a.ids"; field B smids 6 | tr ',' '\n' | sort >"$dir/b.ids"
[ -z "$(comm -12 "$dir/a.ids" "$dir/b.ids")" ] || fail "the slices share SMs: $(field A smids 6) / $(field B smids 6)"

# No variable: the GPUs only. Both slices of one GPU: refused.
run P "" list
[ "$(field P list 3)" = 2 ] || fail "without the variable the client sees $(field P list 3) devices, expected 2 GPUs"
run NV "OPENMPS_VISIBLE_DEVICES=GPU-ffffffff CUDA_VISIBLE_DEVICES=0" init
[ "$(field NV init 2)" = CUDA_ERROR_NO_DEVICE ] || fail "OPENMPS_VISIBLE_DEVICES naming nothing: init $(field NV init 2)"
run D "CUDA_VISIBLE_DEVICES=$u0,$u1" init
[ "$(field D init 2)" = CUDA_ERROR_INVALID_DEVICE ] || fail "two slices of one GPU: init $(field D init 2)"

# A slice of given size on device 1.
expect_re() { got=$(ui "$1"); echo "$got" | grep -Eq "$2" || fail "'$1' replied '$got'"; }
expect_re "vdevice add small 1 4 256M" "^small GPU-[0-9a-f-]{36}$"
us=$(ui "vdevice list" | awk '$1 == "small" { print $2 }')
run S "CUDA_VISIBLE_DEVICES=$us" init sms meminfo smids:64
[ "$(field S sms 3)" = 4 ] && [ "$(field S smids 3)" = 4 ] && [ "$(field S meminfo 4)" = $((256 * MiB)) ] ||
	fail "small: $(cat "$dir/S.out" | tr '\n' ' ')"

# A slice larger than what the others leave open: its SM count is the
# slice's from the start, before any work.
expect_re "vdevice add big 1 10 512M" "^big GPU-"
ub=$(ui "vdevice list" | awk '$1 == "big" { print $2 }')
run G "OPENMPS_VISIBLE_DEVICES=$ub" init sms smids:64 sms
[ "$(field G sms 3 1)" = 10 ] && [ "$(field G smids 3)" = 10 ] && [ "$(field G sms 3 2)" = 10 ] ||
	fail "big: $(cat "$dir/G.out" | tr '\n' ' ')"
expect "vdevice rm big" ""

# Metrics while a client holds a slice.
CUDA_VISIBLE_DEVICES=$u0 client K init "wait:$dir/goK"
wait_for "$dir/K.out" "^waiting" || fail "K was not served"
m=$(ui get_metrics)
printf '%s\n' "$m" | grep -Eq '^openmps_server_vdevice_clients\{.*vdevice="vgpu0-0"\} 1$' ||
	fail "get_metrics: vgpu0-0's clients: $(printf '%s\n' "$m" | grep vdevice_clients)"
printf '%s\n' "$m" | grep -Eq "^openmps_server_vdevice_sms\\{.*vdevice=\"small\".*\\} 4$" ||
	fail "get_metrics: small's SMs: $(printf '%s\n' "$m" | grep vdevice_sms)"
ui "vdevice list" | grep -Eq "^vgpu0-0 $u0 0 1/2 1/2 $(cpid K)$" ||
	fail "vdevice list does not name K as vgpu0-0's client: $(ui "vdevice list")"
printf '%s\n' "$m" | grep -Eq "^openmps_client_vdevice\{.*pid=\"$(cpid K)\".*vdevice=\"vgpu0-0\"\} 1$" ||
	fail "get_metrics: K's virtual device: $(printf '%s\n' "$m" | grep client_vdevice)"
touch "$dir/goK"
# Gone: the slice names no client once the server has seen K go.
k_gone() { ui "vdevice list" | grep -Eq "^vgpu0-0 $u0 0 1/2 1/2$"; }
wait "$(cpid K)" 2>/dev/null
wait_until 10 k_gone || fail "vgpu0-0 still names a client after K exited: $(ui "vdevice list")"

# Removed: no longer offered (the list ends there: no device).
expect "vdevice rm vgpu0-1" ""
run R "CUDA_VISIBLE_DEVICES=$u1" init
[ "$(field R init 2)" = CUDA_ERROR_NO_DEVICE ] || fail "a removed slice: init $(field R init 2)"
expect "vdevice list" "vgpu0-0 $u0 0 1/2 1/2
small $us 1 4 256M"

# A split over other slices of the device is refused, whole; one that
# re-lays the same names is not.
expect_err "vdevice split 1 2" "device 1 already holds small; remove it first"
expect "vdevice rm vgpu0-0" ""
ui "vdevice split 0 4" >/dev/null || fail "vdevice split 0 4 refused"
expect_err "vdevice split 0 2" "device 0 already holds vgpu0-2, vgpu0-3; remove them first"
[ "$(ui "vdevice list" | grep -c '^vgpu0-. .* 0 1/4 1/4$')" = 4 ] || fail "after a refused split: $(ui "vdevice list")"
ui "vdevice split 0 8" >/dev/null || fail "vdevice split 0 8 (re-laying vgpu0-0..3) refused"
[ "$(ui "vdevice list" | grep -c '^vgpu0-. .* 0 1/8 1/8$')" = 8 ] || fail "split 0 8: $(ui "vdevice list")"
stop_daemon
finish
