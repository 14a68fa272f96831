#!/bin/sh
# SPDX-License-Identifier: MIT
#
# A daemon that runs as an ordinary user serves only that user: a client of
# another user is refused with a clear error, decided from the kernel's peer
# credentials, while the daemon's own user is served. Needs root (to run as
# two users) and setpriv; skips otherwise.
#
#   usage: peercred.sh BUILD_DIR

build=$(cd "$1" && pwd)
[ "$(id -u)" -eq 0 ] || { echo "needs root to act as two users"; exit 77; }
command -v setpriv >/dev/null || { echo "needs setpriv (util-linux)"; exit 77; }
user=nobody
uid=$(id -u $user 2>/dev/null) || { echo "no user $user"; exit 77; }
dir=$(mktemp -d /tmp/openmps-cred.XXXXXX)
chmod 755 "$dir"
mkdir -p "$dir/pipe" "$dir/log"
chown $user "$dir/pipe" "$dir/log"
# The build folder must be readable by the other user.
if ! setpriv --reuid=$uid --regid=$uid --clear-groups test -x "$build/bin/openmps-control"; then
	rm -rf "$dir"; echo "the build folder is not reachable by $user"; exit 77
fi
export CUDA_MPS_PIPE_DIRECTORY=$dir/pipe CUDA_MPS_LOG_DIRECTORY=$dir/log
export OPENMPS_DRIVER=$build/lib/standin/libcuda.so.1 OPENMPS_TEST_PTX=$build/tests/kernels.ptx
as_user() { setpriv --reuid=$uid --regid=$uid --clear-groups "$@"; }
rc=0
as_user "$build/bin/openmps-control" -d || { echo "peercred: the daemon did not start"; exit 1; }
# root's client: refused, with the reason on its stderr.
LD_LIBRARY_PATH=$build/lib "$build/tests/cuda/t_device" >"$dir/root.out" 2>&1 && {
	echo "peercred: a client of another user was served"; rc=1; }
grep -q "serves only its own user" "$dir/root.out" || {
	echo "peercred: the refusal did not say why:"; cat "$dir/root.out"; rc=1; }
# The daemon's own user: served.
as_user env LD_LIBRARY_PATH=$build/lib "$build/tests/cuda/t_device" >"$dir/user.out" 2>&1 || {
	echo "peercred: the daemon's own user was not served:"; cat "$dir/user.out"; rc=1; }
echo quit | as_user "$build/bin/openmps-control"
i=0; while [ -e "$dir/pipe/openmps-control.pid" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
grep -q "refusing client" "$dir/log/control.log" || { echo "peercred: control.log does not record the refusal"; rc=1; }
rm -rf "$dir"
[ $rc -eq 0 ] && echo "peercred: another user's client was refused; the daemon's user was served"
exit $rc
