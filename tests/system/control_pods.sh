#!/bin/sh
# SPDX-License-Identifier: MIT
#
# get_metrics' pod_uid and container_id labels (server/pod.h), on clients
# put in cgroups named as the kubelet names them: one in the cgroupfs
# layout (/kubepods/burstable/pod<UID>/<id>), one in the systemd layout
# (kubepods-besteffort-pod<UID_>.slice/cri-containerd-<id>.scope), one in
# no pod (no such labels). The labels are read when a client connects: a
# client moved to another cgroup afterwards keeps them. Needs root and a
# cgroup hierarchy it may make cgroups in (a v1 named or pids hierarchy,
# else the v2 one); skipped otherwise.
#
#   usage: control_pods.sh BUILD_DIR

name=control_pods; . "$(dirname "$0")/c_lib.sh"
[ "$(id -u)" -eq 0 ] || { echo "needs root to make cgroups"; cleanup_only; exit 77; }
cg=""
for h in /sys/fs/cgroup/systemd /sys/fs/cgroup/pids /sys/fs/cgroup/unified /sys/fs/cgroup; do
	if [ -w "$h/cgroup.procs" ] && mkdir "$h/openmps-test.$$" 2>/dev/null; then
		rmdir "$h/openmps-test.$$"; cg=$h; break
	fi
done
[ -n "$cg" ] || { echo "no cgroup hierarchy to make cgroups in"; cleanup_only; exit 77; }
# Where this shell is now in that hierarchy, to put clients back.
home=$(awk -F: -v h="$(basename "$cg")" '$2 == "name=" h || $2 == h || ((h == "cgroup" || h == "unified") && $1 == 0) {
	print $3; exit }' /proc/self/cgroup)

uid1=0a1b2c3d-4e5f-6789-abcd-ef0123456789
uid2=11112222-3333-4444-5555-666677778888
cid1=$(printf '%064d' 1 | tr 0 a)
cid2=$(printf '%064d' 2 | tr 0 b)
cg1="$cg/kubepods/burstable/pod$uid1/$cid1"
cg2="$cg/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod$(echo $uid2 | tr - _).slice/cri-containerd-$cid2.scope"
# Our own top cgroups only if they are not there already (a real node's).
made=""
for top in "$cg/kubepods" "$cg/kubepods.slice"; do [ -d "$top" ] || made="$made $top"; done
mkdir -p "$cg1" "$cg2" || fail "cannot make the cgroups"

# in_cgroup NAME CGROUP STEPS...: a client that enters CGROUP before it starts.
in_cgroup() {
	cn=$1; where=$2; shift 2
	# shellcheck disable=SC2016 # expanded by the inner shell
	LD_LIBRARY_PATH="$build/lib" sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$where" \
		"$build/tests/system/c_client" "$@" >"$dir/$cn.out" 2>"$dir/$cn.err" &
	echo $! >"$dir/$cn.pid"
	bg_pids="$bg_pids $!"
}

start_daemon
in_cgroup A "$cg1" init "wait:$dir/go"
in_cgroup B "$cg2" init "wait:$dir/go"
client C init "wait:$dir/go"
for c in A B C; do wait_for "$dir/$c.out" "^waiting" || fail "$c was not served: $(cat "$dir/$c.err")"; done
a=$(cpid A); b=$(cpid B); c=$(cpid C)
grep -q "kubepods/burstable/pod$uid1/$cid1" "/proc/$a/cgroup" || fail "A is not in its cgroup: $(cat "/proc/$a/cgroup")"
labels() { echo "$m" | grep "^openmps_client_calls_total{" | grep "pid=\"$1\"" | sed 's/^[^{]*{//; s/}.*//'; }
m=$(ui get_metrics)
labels "$a" | grep -q ",comm=\"c_client\",pod_uid=\"$uid1\",container_id=\"$cid1\"$" || fail "A's labels: $(labels "$a")"
labels "$b" | grep -q ",pod_uid=\"$uid2\",container_id=\"$cid2\"$" || fail "B's labels: $(labels "$b")"
[ -n "$(labels "$c")" ] || fail "no metrics for C"
labels "$c" | grep -q "pod_uid\|container_id" && fail "C, in no pod, has $(labels "$c")"
# The same labels on every family of the client.
n=$(echo "$m" | grep "^openmps_client_" | grep -c "pid=\"$a\"")
[ "$(echo "$m" | grep "^openmps_client_" | grep "pid=\"$a\"" | grep -c "pod_uid=\"$uid1\"")" = "$n" ] ||
	fail "not every sample of A has its pod"
# Read once, at the greeting: moving A out changes nothing.
echo "$a" >"$cg$home/cgroup.procs" || fail "cannot move A back"
m=$(ui get_metrics)
labels "$a" | grep -q "pod_uid=\"$uid1\"" || fail "A's labels after it moved: $(labels "$a")"

touch "$dir/go"
for p in $bg_pids; do wait "$p" 2>/dev/null; done
stop_daemon
rmdir "$cg1" "$(dirname "$cg1")" "$cg2" "$(dirname "$cg2")" "$(dirname "$(dirname "$cg2")")" 2>/dev/null
rmdir "$cg/kubepods/burstable" 2>/dev/null
for top in $made; do rmdir "$top" 2>/dev/null || fail "cannot remove $top"; done
finish
