#!/bin/sh
# SPDX-License-Identifier: MIT
#
# With no daemon running, a program using the openmps client library must
# behave exactly as with the real driver: every call passes through. Here the
# "real driver" is the software stand-in. s_passthrough runs twice, on the
# driver directly and through the client library, and both runs must pass
# and print the same thing; the client library must also say (at debug
# level) that it passed the calls through, and name the driver and the
# missing daemon when a call finds the driver lacking.
#
#   usage: passthrough.sh BUILD_DIR

build=$(cd "$1" && pwd)
dir=$(mktemp -d /tmp/openmps-pass.XXXXXX)
trap 'rm -rf "$dir"' EXIT
export CUDA_MPS_PIPE_DIRECTORY=$dir/no-daemon-here
export OPENMPS_DRIVER=$build/lib/standin/libcuda.so.1
export OPENMPS_TEST_PTX=$build/tests/kernels.ptx
export OPENMPS_TEST_SEED=12345
prog=$build/tests/system/s_passthrough
LD_LIBRARY_PATH=$build/lib/standin "$prog" >"$dir/direct" 2>&1 || {
	echo "passthrough: fails on the driver itself:"; cat "$dir/direct"; exit 1; }
OPENMPS_LOG_LEVEL=debug LD_LIBRARY_PATH=$build/lib "$prog" >"$dir/through" 2>"$dir/log" || {
	echo "passthrough: fails through openmps:"; cat "$dir/through" "$dir/log"; exit 1; }
grep -q "passing every call to the driver $OPENMPS_DRIVER" "$dir/log" || {
	echo "passthrough: the client library did not pass calls through:"; cat "$dir/log"; exit 1; }
diff -u "$dir/direct" "$dir/through" || { echo "passthrough: output differs through openmps"; exit 1; }
# A function the driver lacks (the stand-in has no cuMemcpyHtoD_v2): the
# client fails as the driver would, and the message says there is no
# daemon and which driver lacks it, not that openmps does.
LD_LIBRARY_PATH=$build/lib "$build/tests/system/c_client" init alloc:1 copy:1 >"$dir/lack.out" 2>"$dir/lack.err"
grep -q "^copy 1 CUDA_ERROR_NOT_SUPPORTED" "$dir/lack.out" &&
	grep -qF "no daemon in $CUDA_MPS_PIPE_DIRECTORY, so calls go to the driver $OPENMPS_DRIVER, which has no cuMemcpyHtoD_v2" "$dir/lack.err" || {
	echo "passthrough: a call the driver lacks is not explained:"; cat "$dir/lack.out" "$dir/lack.err"; exit 1; }
cat "$dir/through"
echo "passthrough: identical with and without the openmps client library"
