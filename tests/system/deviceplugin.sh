#!/bin/sh
# SPDX-License-Identifier: MIT
#
# openmps-device-plugin against a fake kubelet (tests/deviceplugin/
# fake_kubelet.cc: the kubelet's side of the real API, v1beta1 over gRPC on
# unix sockets), with openmps's daemon on the stand-in and its GPU split in
# two virtual devices:
#   - the plugin registers its resource and endpoint; its options; the
#     devices it lists (the GPU and both slices, healthy);
#   - Allocate for a slice: its CDI name, the spec's edits as environment
#     and mounts (no device node), and a CUDA client run with exactly that
#     environment sees that slice only; two IDs in one container; two
#     containers; an unknown ID, an empty container and bytes that are not
#     gRPC get clear errors and the plugin serves on;
#   - the daemon quits: every device turns Unhealthy; it comes back (slices
#     made again): Healthy;
#   - the kubelet restarts (it removes every socket in its directory): the
#     plugin serves and registers again;
#   - the server is killed under a client that holds memory (as a GPU fault
#     ends a server): the daemon counts it (openmps_server_failures_total),
#     every device turns Unhealthy for a look and Healthy again, and a
#     container given a slice is served by the fresh server the daemon
#     starts;
#   - with two GPUs, the second split: a GPU fault on the second turns that
#     GPU and its slices Unhealthy for a look, the first stays Healthy, and
#     openmps_device_server_failures_total counts it on that GPU alone;
#   - replicas: --replicas 3 lists each GPU three times, and a replica's
#     allocation carries the share MPS's replicas get (100/3 % of the SMs,
#     a third of the memory), which the client then sees;
#   - bad options are refused with their reason.
# Skipped where the plugin is not built (no gRPC development files).
#
#   usage: deviceplugin.sh BUILD_DIR

name=deviceplugin; . "$(dirname "$0")/c_lib.sh"
plugin="$build/bin/openmps-device-plugin"
fake="$build/tests/deviceplugin/fake_kubelet"
if [ ! -x "$plugin" ] || [ ! -x "$fake" ]; then
	echo "the device plugin is not built (gRPC and protobuf development files missing)"; cleanup_only; exit 77
fi
kd="$dir/kubelet"
mkdir -p "$kd"

start_daemon
split=$(ui "vdevice split 0 2") || fail "vdevice split: $split"
gpu=$(ui device_query | awk 'NR > 1 { print $2; exit }')
v0=$(echo "$split" | awk '$1 == "vgpu0-0" { print $2 }')
v1=$(echo "$split" | awk '$1 == "vgpu0-1" { print $2 }')
if [ -z "$gpu" ] || [ -z "$v0" ] || [ -z "$v1" ]; then fail "no devices: $gpu / $split"; finish; fi

# Bad options.
for bad in "--replicas 0" "--replicas 49" "--devices some" "--resource gpu" "--socket a/b.sock" \
	   "--pipe-dir relative" "--interval-ms 5" "--nonsense x" "--resource"; do
	# shellcheck disable=SC2086 # one word each
	out=$("$plugin" $bad 2>&1); st=$?
	[ $st -eq 2 ] || fail "'$bad' exited $st: $out"
	echo "$out" | grep -q "usage:" || fail "'$bad' printed no usage: $out"
done

"$plugin" --plugin-dir "$kd" --devices all --interval-ms 200 --control "$ctl" \
	--pipe-dir "$CUDA_MPS_PIPE_DIRECTORY" --lib-dir "$build/lib" >"$dir/plugin.out" 2>&1 &
pp=$!; bg_pids="$bg_pids $pp"

"$fake" "$kd" register options list "alloc:$v1" "alloc:$gpu,$v0" "alloc2:$v0/$v1" "alloc:GPU-nope" \
	"alloc:$v0,no-such-id" "alloc2:$v0/" garbage options "touch:$dir/listed" "await:$dir/down" \
	health:Unhealthy "touch:$dir/seen_down" "await:$dir/up" health:Healthy >"$dir/k1.out" 2>&1 &
kp=$!; bg_pids="$bg_pids $kp"
wait_until 60 sh -c "test -e '$dir/listed' || ! kill -0 $kp 2>/dev/null"
[ -e "$dir/listed" ] || { fail "the first steps did not end"; finish; }

k1=$dir/k1.out
grep -q "^registered openmps.io/gpu openmps-gpu.sock v1beta1$" "$k1" || fail "registration: $(head -1 "$k1")"
grep -q "^options 0 0$" "$k1" || fail "options"
grep -q "^list 3 $(printf '%s\n' "$gpu=Healthy" "$v0=Healthy" "$v1=Healthy" | sort | tr '\n' ' ' | sed 's/ $//')$" "$k1" ||
	fail "the first list: $(grep '^list' "$k1")"
# The first allocation: one slice.
sed -n '/^alloc ok$/,/^alloc/p' "$k1" | sed '1d' >"$dir/a1"
grep -q "^cdi openmps.io/gpu=vgpu0-1$" "$dir/a1" || fail "no CDI name for the slice: $(cat "$dir/a1")"
[ "$(grep -c '^cdi ' "$dir/a1")" -eq 1 ] || fail "CDI names: $(grep '^cdi' "$dir/a1")"
grep -q "^env CUDA_MPS_PIPE_DIRECTORY=$CUDA_MPS_PIPE_DIRECTORY$" "$dir/a1" || fail "pipe directory env"
grep -q "^env LD_LIBRARY_PATH=$build/lib:" "$dir/a1" || fail "library path env"
grep -q "^env NVIDIA_VISIBLE_DEVICES=void$" "$dir/a1" || fail "NVIDIA_VISIBLE_DEVICES"
grep -q "^env OPENMPS_CDI_DEVICE_[0-9A-F]\{32\}=$v1$" "$dir/a1" || fail "the slice's selection env"
[ "$(grep -c '^env OPENMPS_CDI_DEVICE_' "$dir/a1")" -eq 1 ] || fail "selection envs: $(cat "$dir/a1")"
grep -q "^mount $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_PIPE_DIRECTORY rw$" "$dir/a1" || fail "pipe mount"
grep -q "^mount $build/lib $build/lib ro$" "$dir/a1" || fail "library mount"
grep -q "^mount /usr/bin/nvidia-smi $build/lib/nvml/nvidia-smi ro$" "$dir/a1" || fail "nvidia-smi mount: $(grep nvidia-smi "$dir/a1")"
grep -q "^device " "$dir/a1" && fail "a device node was handed out"
# The same selection the CDI spec makes: a client with exactly that
# environment sees the slice and nothing else.
sel=$(sed -n 's/^env \(OPENMPS_CDI_DEVICE_[^=]*=.*\)$/\1/p' "$dir/a1")
env NVIDIA_VISIBLE_DEVICES=void "$sel" LD_LIBRARY_PATH="$build/lib" "$build/tests/system/c_client" list >"$dir/list.out" 2>&1
grep -q "^list CUDA_SUCCESS 1 " "$dir/list.out" || fail "the allocated slice as a client sees it: $(cat "$dir/list.out")"
grep -qi "$(echo "$v1" | sed 's/^GPU-//; s/-//g')" "$dir/list.out" || fail "the client sees another device: $(cat "$dir/list.out")"
# Two devices in one container; two containers.
awk '/^alloc ok$/ { n++ } n == 2' "$k1" | grep -c "^cdi " | grep -q "^2$" || fail "two devices, one container"
grep -q "^alloc2 ok 2$" "$k1" || fail "two containers"
# Refusals, and the plugin still serves.
grep -q "^alloc error 3 openmps: unknown device ID 'GPU-nope'" "$k1" || fail "unknown ID: $(grep 'alloc error' "$k1")"
grep -q "^alloc error 3 openmps: unknown device ID 'no-such-id'" "$k1" || fail "an unknown ID beside a known one"
grep -q "^alloc error 3 openmps: a container asked for no device" "$k1" || fail "an empty container"
grep -q "^garbage sent$" "$k1" || fail "garbage"
[ "$(grep -c '^options 0 0$' "$k1")" -eq 2 ] || fail "the plugin did not serve after the garbage"

# The daemon goes: every device Unhealthy; it comes back: Healthy.
stop_daemon
touch "$dir/down"
wait_until 30 test -e "$dir/seen_down" || fail "the devices did not turn Unhealthy: $(tail -3 "$k1")"
start_daemon
ui "vdevice split 0 2" >/dev/null
touch "$dir/up"
wait "$kp" || fail "the fake kubelet failed: $(tail -3 "$k1")"
grep -q "^health Unhealthy 3$" "$k1" || fail "Unhealthy"
grep -q "^health Healthy 3$" "$k1" || fail "Healthy again"

# The kubelet restarts: it removes the plugins' sockets and serves anew.
rm -f "$kd/openmps-gpu.sock" "$kd/kubelet.sock"
"$fake" "$kd" register list "alloc:$v0" >"$dir/k2.out" 2>&1 || fail "after the kubelet's restart: $(cat "$dir/k2.out")"
grep -q "^registered openmps.io/gpu openmps-gpu.sock v1beta1$" "$dir/k2.out" || fail "no second registration"
grep -q "^list 3 " "$dir/k2.out" || fail "no list after the restart"
grep -q "^cdi openmps.io/gpu=vgpu0-0$" "$dir/k2.out" || fail "no allocation after the restart"
grep -q "serving and registering again" "$dir/plugin.out" || fail "the plugin did not say why it registered again"

# The server killed under a client: Unhealthy for a look, then a fresh
# server serves the next.
failures=$(ui get_metrics | sed -n 's/^openmps_server_failures_total //p')
LD_LIBRARY_PATH="$build/lib" "$build/tests/system/c_client" init alloc:1 "wait:$dir/go4" >"$dir/held.out" 2>&1 &
cp4=$!; bg_pids="$bg_pids $cp4"
wait_for "$dir/held.out" "^waiting" 20 || fail "the client did not start: $(cat "$dir/held.out")"
rm -f "$kd/openmps-gpu.sock" "$kd/kubelet.sock"   # a kubelet of its own: it restarts
"$fake" "$kd" register list "touch:$dir/k4ready" "await:$dir/k4killed" health:Unhealthy health:Healthy "alloc:$v1" \
	>"$dir/k4.out" 2>&1 &
kp4=$!; bg_pids="$bg_pids $kp4"
wait_until 30 sh -c "test -e '$dir/k4ready' || ! kill -0 $kp4 2>/dev/null"
srv=$(ui get_server_list | grep -E '^[0-9]+$' | head -1)
if [ -n "$srv" ]; then
	kill -9 "$srv"
	wait_until 20 sh -c "! echo get_server_list | '$ctl' | grep -qx '$srv'" || fail "the killed server $srv stays listed"
else
	fail "no server listed while a client held memory"
fi
touch "$dir/go4" "$dir/k4killed"
wait "$cp4" 2>/dev/null
wait "$kp4" || fail "after the server was killed: $(tail -3 "$dir/k4.out")"
[ "$(ui get_metrics | sed -n 's/^openmps_server_failures_total //p')" = $((failures + 1)) ] ||
	fail "openmps_server_failures_total did not count the killed server: $(ui get_metrics | grep failures)"
grep -q "^health Unhealthy 3$" "$dir/k4.out" || fail "no Unhealthy after the server was killed"
grep -q "^health Healthy 3$" "$dir/k4.out" || fail "not Healthy again after the server was killed"
grep -q "a server failed since the last look" "$dir/plugin.out" || fail "the plugin did not say a server failed"
sel=$(sed -n 's/^env \(OPENMPS_CDI_DEVICE_[^=]*=.*\)$/\1/p' "$dir/k4.out")
env NVIDIA_VISIBLE_DEVICES=void "$sel" LD_LIBRARY_PATH="$build/lib" "$build/tests/system/c_client" init alloc:1 list \
	>"$dir/list4.out" 2>&1
grep -q "^alloc 1 CUDA_SUCCESS" "$dir/list4.out" && grep -q "^list CUDA_SUCCESS 1 " "$dir/list4.out" ||
	fail "a container's client after the server was killed: $(cat "$dir/list4.out")"
kill "$pp"; wait "$pp" 2>/dev/null
[ -e "$kd/openmps-gpu.sock" ] && fail "the plugin left its socket behind"

# Two GPUs, the second split in two: a GPU fault on the second turns it and
# its slices Unhealthy for a look, not the first (a kill, above, takes
# every device: a server serves them all).
stop_daemon
export OPENMPS_STANDIN_DEVICES=2
start_daemon
ui "vdevice split 1 2" >/dev/null || fail "vdevice split 1 2"
g0=$(ui device_query | awk 'NR > 1 && $1 == "0" { print $2 }')
g1=$(ui device_query | awk 'NR > 1 && $1 == "1" { print $2 }')
s10=$(ui "vdevice list" | awk '$1 == "vgpu1-0" { print $2 }')
s11=$(ui "vdevice list" | awk '$1 == "vgpu1-1" { print $2 }')
[ -n "$g0" ] && [ -n "$g1" ] && [ -n "$s10" ] && [ -n "$s11" ] || fail "two GPUs: $(ui device_query; ui 'vdevice list')"
"$plugin" --plugin-dir "$kd" --devices all --interval-ms 200 --control "$ctl" \
	--pipe-dir "$CUDA_MPS_PIPE_DIRECTORY" --lib-dir "$build/lib" >"$dir/plugin5.out" 2>&1 &
pp=$!; bg_pids="$bg_pids $pp"
rm -f "$kd/kubelet.sock"
"$fake" "$kd" register list "touch:$dir/k5ready" "await:$dir/k5fault" unhealthy:3 health:Healthy \
	>"$dir/k5.out" 2>&1 &
kp5=$!; bg_pids="$bg_pids $kp5"
wait_until 30 sh -c "test -e '$dir/k5ready' || ! kill -0 $kp5 2>/dev/null"
grep -q "^list 4 .*=Healthy .*=Healthy .*=Healthy .*=Healthy$" "$dir/k5.out" || fail "two GPUs' list: $(grep '^list' "$dir/k5.out")"
per=$(ui get_metrics | grep -c '^openmps_device_server_failures_total{device="[01]",uuid="GPU-')
[ "$per" = 2 ] || fail "failures by device: $(ui get_metrics | grep device_server_failures)"
LD_LIBRARY_PATH="$build/lib" "$build/tests/system/c_client" init dev:1 fault >"$dir/fault.out" 2>&1
grep -q "^fault CUDA_ERROR_ILLEGAL_ADDRESS" "$dir/fault.out" || fail "no fault on the second GPU: $(cat "$dir/fault.out")"
touch "$dir/k5fault"
wait "$kp5" || fail "after the fault: $(tail -3 "$dir/k5.out")"
grep -q "^unhealthy 3 $(printf '%s\n' "$g1" "$s10" "$s11" | sort | tr '\n' ' ' | sed 's/ $//')$" "$dir/k5.out" ||
	fail "not the faulted GPU and its slices alone: $(grep '^unhealthy' "$dir/k5.out") (GPU 0 $g0)"
grep -q "^health Healthy 4$" "$dir/k5.out" || fail "not Healthy again after the fault"
ui get_metrics | grep -q "^openmps_device_server_failures_total{device=\"1\",uuid=\"$g1\"} 1$" ||
	fail "the fault not counted on GPU 1: $(ui get_metrics | grep device_server_failures)"
ui get_metrics | grep -q "^openmps_device_server_failures_total{device=\"0\",uuid=\"$g0\"} 0$" ||
	fail "the fault counted on GPU 0: $(ui get_metrics | grep device_server_failures)"
grep -q "taking down $g1$" "$dir/plugin5.out" || fail "the plugin did not name the GPU: $(tail -3 "$dir/plugin5.out")"
kill "$pp"; wait "$pp" 2>/dev/null
stop_daemon
unset OPENMPS_STANDIN_DEVICES
start_daemon

# Replicas of the GPU: three IDs, and a replica's share as limits the client sees.
"$plugin" --plugin-dir "$kd" --resource openmps.io/shared --replicas 3 --interval-ms 200 --control "$ctl" \
	--pipe-dir "$CUDA_MPS_PIPE_DIRECTORY" --lib-dir "$build/lib" >"$dir/plugin2.out" 2>&1 &
pp=$!; bg_pids="$bg_pids $pp"
"$fake" "$kd" register list "alloc:$gpu::1" >"$dir/k3.out" 2>&1 || fail "replicas: $(cat "$dir/k3.out")"
grep -q "^registered openmps.io/shared openmps-shared.sock v1beta1$" "$dir/k3.out" || fail "replicas' registration"
grep -q "^list 3 $gpu::0=Healthy $gpu::1=Healthy $gpu::2=Healthy$" "$dir/k3.out" ||
	fail "replicas' list: $(grep '^list' "$dir/k3.out")"
grep -q "^env CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=33$" "$dir/k3.out" || fail "a replica's SM share"
grep -q "^env CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=341M$" "$dir/k3.out" || fail "a replica's memory: $(grep MEM "$dir/k3.out")"
grep -q "^cdi openmps.io/gpu=$gpu$" "$dir/k3.out" || fail "a replica's CDI name"
mem=$(sed -n 's/^env CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=//p' "$dir/k3.out")
env CUDA_MPS_PINNED_DEVICE_MEM_LIMIT="$mem" LD_LIBRARY_PATH="$build/lib" "$build/tests/system/c_client" init meminfo \
	>"$dir/mem.out" 2>&1
grep -q "^meminfo CUDA_SUCCESS [0-9]* $((341 * 1048576))$" "$dir/mem.out" || fail "a replica's memory as the client sees it: $(cat "$dir/mem.out")"
kill "$pp"; wait "$pp" 2>/dev/null

finish
