#!/bin/sh
# SPDX-License-Identifier: MIT
#
# The main job, end to end: builds openmps, starts the control daemon in
# private directories, runs several CUDA client processes through it at once
# (each checks its results), lists what the daemon saw, and stops it.
# On a machine with an NVIDIA GPU the server runs on the real driver; on one
# without, it says so and runs on the software stand-in driver.
#
#   usage: scripts/demo.sh      (or: make demo)

set -u
cd "$(dirname "$0")/.."
build=${BUILD:-build}
echo "openmps demo: building (a few seconds the first time)..."
make -s -j"$(nproc)" BUILD="$build" check-build || exit 1

dir=$(mktemp -d /tmp/openmps-demo.XXXXXX)
export CUDA_MPS_PIPE_DIRECTORY=$dir/pipe CUDA_MPS_LOG_DIRECTORY=$dir/log
export OPENMPS_TEST_PTX=$PWD/$build/tests/kernels.ptx

# Is there a GPU? The real driver must load and see a device.
real=""
for d in ${OPENMPS_DRIVER:-} /usr/local/nvidia/lib64/libcuda.so.1 /usr/lib/x86_64-linux-gnu/libcuda.so.1 /usr/lib64/libcuda.so.1; do
	[ -n "$d" ] && [ -e "$d" ] && { real=$d; break; }
done
if [ -n "$real" ] && command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
	export OPENMPS_DRIVER=$real
	echo "openmps demo: GPU found ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)); the server uses $real"
else
	export OPENMPS_DRIVER=$PWD/$build/lib/standin/libcuda.so.1
	echo "openmps demo: no GPU on this machine; the server runs on the software stand-in driver"
fi

"$build/bin/openmps-control" -d || exit 1
echo "openmps demo: daemon started (pipe directory $CUDA_MPS_PIPE_DIRECTORY)"
echo "openmps demo: 6 client processes at once, each verifying its results:"
LD_LIBRARY_PATH=$PWD/$build/lib "$build/tests/system/s_clients"
rc=$?
LD_LIBRARY_PATH=$PWD/$build/lib "$build/tests/cuda/t_threads" >/dev/null 2>&1 || rc=1
echo "openmps demo: servers: $(echo get_server_list | "$build/bin/openmps-control" | tr '\n' ' ')"
echo quit | "$build/bin/openmps-control"
sleep 0.5
echo "openmps demo: control.log:"
sed 's/^/  /' "$dir/log/control.log"
echo "openmps demo: server.log:"
sed 's/^/  /' "$dir/log/server.log" | tail -n 20
rm -rf "$dir"
[ $rc -eq 0 ] && echo "openmps demo: all clients correct" || echo "openmps demo: FAILED"
exit $rc
