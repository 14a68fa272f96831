#!/bin/sh
# SPDX-License-Identifier: MIT
#
# OPENMPS_TRACE_ERRORS=1: a client logs every served call that fails, by
# name and result, and sums them up at exit — calls made through the
# exported symbols and through pointers from cuGetProcAddress alike — and
# traced calls still get all their arguments (t_launch's cuLaunchKernel
# passes five of its eleven on the stack). Without the variable, nothing
# is logged.
#
#   usage: trace.sh BUILD_DIR

name=trace; . "$(dirname "$0")/c_lib.sh"

start_daemon
run_client() {   # NAME [VAR=VALUE...]: c_client init baddev, output in $dir/NAME.{out,err}
	n=$1; shift
	env "$@" LD_LIBRARY_PATH="$build/lib" "$build/tests/system/c_client" init baddev >"$dir/$n.out" 2>"$dir/$n.err"
}

run_client plain
grep -q "^baddev CUDA_ERROR_INVALID_DEVICE CUDA_ERROR_INVALID_DEVICE$" "$dir/plain.out" ||
	fail "cuDeviceGet(99) without tracing: $(cat "$dir/plain.out")"
! grep -q "returned" "$dir/plain.err" || fail "failing calls were logged without OPENMPS_TRACE_ERRORS: $(cat "$dir/plain.err")"

run_client traced OPENMPS_TRACE_ERRORS=1
grep -q "^baddev CUDA_ERROR_INVALID_DEVICE CUDA_ERROR_INVALID_DEVICE$" "$dir/traced.out" ||
	fail "cuDeviceGet(99) with tracing: $(cat "$dir/traced.out")"
[ "$(grep -c "openmps: cuDeviceGet returned CUDA_ERROR_INVALID_DEVICE (101)$" "$dir/traced.err")" -eq 2 ] ||
	fail "want two logged failures of cuDeviceGet (direct and through cuGetProcAddress): $(cat "$dir/traced.err")"
grep -q "openmps: cuDeviceGet returned an error 2 times (the last CUDA_ERROR_INVALID_DEVICE, 101)$" "$dir/traced.err" ||
	fail "no summary at exit: $(cat "$dir/traced.err")"
run_client off OPENMPS_TRACE_ERRORS=0
! grep -q "returned" "$dir/off.err" || fail "OPENMPS_TRACE_ERRORS=0 logged calls: $(cat "$dir/off.err")"
stop_daemon

# Arguments on the stack, and many calls: the launch test passes traced.
if ! OPENMPS_TRACE_ERRORS=1 "$(dirname "$0")/with-openmps.sh" "$build" "$build/tests/cuda/t_launch" >"$dir/launch.out" 2>&1; then
	fail "t_launch fails when traced: $(tail -n 20 "$dir/launch.out")"
fi
finish
