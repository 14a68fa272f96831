#!/bin/sh
# SPDX-License-Identifier: MIT
#
# openmps-control in the place of nvidia-cuda-mps-control, driven as the
# Kubernetes engines drive NVIDIA's daemon:
#   - NVIDIA's k8s-device-plugin: the daemon started by name with an
#     environment of only the pipe and log directories (no PATH: the server
#     is found beside the program), then, right after -d returns, each
#     command a run of its own with no trailing newline and only the exit
#     status read (a device's pinned memory by ordinal, the active thread
#     percentage), the percentage asked again as its health check, its
#     pods' clients given only the pipe directory, control.log there to
#     tail, quit;
#   - NVIDIA's DRA driver: commands with a trailing newline and devices
#     named by UUID, -M for a multi-user daemon, and NVIDIA's default
#     directories when none is given; its start replayed as it is made
#     (root, in a mount namespace of its own over NVIDIA's directories;
#     skipped otherwise): `sh -c "nvidia-cuda-mps-control -d -M"` found on
#     PATH, with CUDA_VISIBLE_DEVICES naming the claim's GPU, the second of
#     two (the driver applies it to the server: the stand-in as the real
#     one does) and no pipe or log variable, then a limit by UUID, the
#     health check, a client of the default pipe directory that sees that
#     GPU alone and the limit, and quit.
# Beside NVIDIA's two variables the daemon gets OPENMPS_DRIVER only, for
# the stand-in (a GPU machine's driver is found in the usual places).
#
#   usage: control_dropin.sh BUILD_DIR

name=control_dropin; . "$(dirname "$0")/c_lib.sh"
mkdir -p "$dir/bin"
ln -s "$build/bin/openmps-control" "$dir/bin/nvidia-cuda-mps-control"
ln -s "$build/bin/openmps-server" "$dir/bin/nvidia-cuda-mps-server"
mps=$dir/bin/nvidia-cuda-mps-control
MiB=1048576

# The device plugin's environment, and one command as it sends one.
plugin() { env -i CUDA_MPS_PIPE_DIRECTORY="$CUDA_MPS_PIPE_DIRECTORY" CUDA_MPS_LOG_DIRECTORY="$CUDA_MPS_LOG_DIRECTORY" \
	OPENMPS_DRIVER="$OPENMPS_DRIVER" "$mps" "$@"; }
send() { printf '%s' "$1" | plugin; }

plugin -d || { fail "-d in the plugin's environment exited $?"; finish; }
send "set_default_device_pinned_mem_limit 0 512M" >/dev/null || fail "the pinned memory limit, sent as the plugin does, exited $?"
send "set_default_active_thread_percentage 50" >/dev/null || fail "the percentage, sent as the plugin does, exited $?"
got=$(send "get_default_active_thread_percentage"); st=$?
[ $st -eq 0 ] && [ "$got" = "50.0" ] || fail "the health check exited $st with '$got', expected 50.0"
got=$(send "get_default_device_pinned_mem_limit 0")
[ "$got" = "512M" ] || fail "the pinned memory limit of device 0 reads '$got', expected 512M"
[ -s "$CUDA_MPS_LOG_DIRECTORY/control.log" ] || fail "no control.log to tail"

# A pod's client: only the pipe directory (and the library) in its environment.
env -i CUDA_MPS_PIPE_DIRECTORY="$CUDA_MPS_PIPE_DIRECTORY" LD_LIBRARY_PATH="$build/lib" \
	OPENMPS_TEST_PTX="$OPENMPS_TEST_PTX" "$build/tests/system/c_client" init meminfo >"$dir/pod.out" 2>"$dir/pod.err" ||
	fail "a pod's client failed: $(tail -3 "$dir/pod.err")"
[ "$(awk '/^meminfo/ { print $4 }' "$dir/pod.out")" = $((512 * MiB)) ] ||
	fail "a pod's client does not see the 512M limit: $(grep meminfo "$dir/pod.out")"

# The DRA driver's way: a newline, the device by UUID.
hex=$(env -i LD_LIBRARY_PATH="$build/lib" OPENMPS_DRIVER="$OPENMPS_DRIVER" CUDA_MPS_PIPE_DIRECTORY="$dir/none" \
	"$build/tests/system/c_client" list | awk '/^list/ { print $4; exit }')
uuid=$(echo "$hex" | sed -E 's/^(.{8})(.{4})(.{4})(.{4})(.{12})$/GPU-\1-\2-\3-\4-\5/')
case $uuid in GPU-*-*-*-*-*) ;; *) fail "no device UUID ('$hex')" ;; esac
got=$(printf 'set_default_device_pinned_mem_limit %s 256M\n' "$uuid" | plugin); st=$?
[ $st -eq 0 ] || fail "the limit by UUID exited $st: $got"
got=$(printf 'get_default_device_pinned_mem_limit 0\n' | plugin)
[ "$got" = "256M" ] || fail "after a limit by UUID device 0 reads '$got', expected 256M"

send "quit" || fail "quit, sent as the plugin does, exited $?"
wait_daemon_gone || fail "the daemon did not exit after quit"

# The DRA driver's start: no pipe or log variable, so NVIDIA's directories,
# here tmpfs in a mount namespace of the test's own; the claim is the
# second of two GPUs.
hex1=$(env -i LD_LIBRARY_PATH="$build/lib" OPENMPS_DRIVER="$OPENMPS_DRIVER" CUDA_MPS_PIPE_DIRECTORY="$dir/none" \
	OPENMPS_STANDIN_DEVICES=2 "$build/tests/system/c_client" list | awk '/^list/ && $3 == 2 { print $6; exit }')
uuid1=$(echo "$hex1" | sed -E 's/^(.{8})(.{4})(.{4})(.{4})(.{12})$/GPU-\1-\2-\3-\4-\5/')
case $uuid1 in GPU-*-*-*-*-*) [ "$uuid1" != "$uuid" ] || fail "two GPUs, one UUID" ;; *) fail "no second UUID ('$hex1')" ;; esac
made=""
for d in /tmp/nvidia-mps /var/log/nvidia-mps; do
	[ -e "$d" ] || { mkdir -p "$d" 2>/dev/null && made="$made $d"; }
done
if [ "$(id -u)" -ne 0 ] || ! command -v unshare >/dev/null || ! unshare -m true 2>/dev/null ||
	[ ! -d /tmp/nvidia-mps ] || [ ! -d /var/log/nvidia-mps ]; then
	note "not root or no mount namespaces: the DRA driver's start is skipped"
else
	unshare -m sh -c '
		dir=$1 build=$2 uuid=$3 drv=$4
		mount -t tmpfs tmpfs /tmp/nvidia-mps && mount -t tmpfs tmpfs /var/log/nvidia-mps || exit 3
		ctl() { env -i PATH="$dir/bin:/usr/bin:/bin" OPENMPS_DRIVER="$drv" nvidia-cuda-mps-control; }
		env -i PATH="$dir/bin:/usr/bin:/bin" CUDA_VISIBLE_DEVICES="$uuid" OPENMPS_DRIVER="$drv" \
			OPENMPS_STANDIN_DEVICES=2 sh -c "nvidia-cuda-mps-control -d -M" || { echo "start: exit $?"; exit 4; }
		ls /tmp/nvidia-mps | tr "
" " " | sed "s/^/pipe: /"; echo
		[ -s /var/log/nvidia-mps/control.log ] && echo "log: control.log"
		echo "set_default_device_pinned_mem_limit $uuid 320M" | ctl; echo "limit: exit $?"
		echo "get_default_active_thread_percentage" | ctl | sed "s/^/health: /"
		env -i CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps LD_LIBRARY_PATH="$build/lib" \
			"$build/tests/system/c_client" init meminfo list 2>&1 | sed "s/^/client: /"
		echo quit | ctl; echo "quit: exit $?"
		i=0; while [ -e /tmp/nvidia-mps/openmps-control.pid ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
		[ -e /tmp/nvidia-mps/openmps-control.pid ] && echo "still running"
		exit 0' sh "$dir" "$build" "$uuid1" "$OPENMPS_DRIVER" >"$dir/dra.out" 2>&1 || fail "the DRA driver's start: $(cat "$dir/dra.out")"
	grep -q "^pipe: .*openmps.sock" "$dir/dra.out" || fail "no control socket in /tmp/nvidia-mps: $(cat "$dir/dra.out")"
	grep -q "^log: control.log" "$dir/dra.out" || fail "no control.log in /var/log/nvidia-mps"
	grep -q "^limit: exit 0" "$dir/dra.out" || fail "the limit by UUID: $(grep limit "$dir/dra.out")"
	grep -q "^health: 100.0" "$dir/dra.out" || fail "the health check: $(grep health "$dir/dra.out")"
	grep -q "^client: meminfo CUDA_SUCCESS [0-9]* $((320 * MiB))$" "$dir/dra.out" ||
		fail "a claim's client does not see the 320M limit: $(grep client "$dir/dra.out")"
	grep -q "^client: list CUDA_SUCCESS 1 $hex1 " "$dir/dra.out" ||
		fail "a claim's client does not see the claim's GPU alone ($hex1): $(grep client "$dir/dra.out")"
	grep -q "^quit: exit 0" "$dir/dra.out" || fail "quit: $(grep quit "$dir/dra.out")"
	grep -q "still running" "$dir/dra.out" && fail "the daemon did not exit after quit"
fi
for d in $made; do rmdir "$d" 2>/dev/null; done

# -M is NVIDIA's multi-user switch (it goes with -d or -f); NVIDIA's
# directories are the defaults under NVIDIA's name, ours under ours.
err=$("$mps" -M 2>&1); st=$?
[ $st -eq 2 ] && echo "$err" | grep -q "go with -d or -f" || fail "-M alone: exit $st, '$err'"
"$mps" -h | grep -q "CUDA_MPS_PIPE_DIRECTORY (default /tmp/nvidia-mps)" || fail "under NVIDIA's name the default pipe directory is not NVIDIA's"
"$mps" -h | grep -q "CUDA_MPS_LOG_DIRECTORY (default /var/log/nvidia-mps)" || fail "under NVIDIA's name the default log directory is not NVIDIA's"
"$ctl" -h | grep -q "CUDA_MPS_PIPE_DIRECTORY (default /tmp/openmps)" || fail "under its own name the default pipe directory changed"
finish
