#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Runs one program as a client of a fresh openmps daemon on the software
# stand-in driver (or on the real driver with OPENMPS_DRIVER set to it), in
# private pipe and log directories, and stops the daemon afterwards. The
# program's exit status is this script's, except that a sanitizer's report
# in the daemon's or the server's log (a sanitized build's data race, say,
# which does not stop the process) fails it too. On failure the daemon's and
# the server's logs are shown.
#
#   usage: with-openmps.sh BUILD_DIR PROGRAM [ARGS...]

build=$(cd "$1" && pwd); shift
dir=$(mktemp -d /tmp/openmps-run.XXXXXX)
export CUDA_MPS_PIPE_DIRECTORY=$dir/pipe CUDA_MPS_LOG_DIRECTORY=$dir/log
export OPENMPS_DRIVER=${OPENMPS_DRIVER:-$build/lib/standin/libcuda.so.1}
export OPENMPS_TEST_PTX=${OPENMPS_TEST_PTX:-$build/tests/kernels.ptx}
# Two stand-in devices, so work on a second device is tested (the stand-in
# alone shows one); several copy threads even on a small machine, so the
# parallel path is tested.
export OPENMPS_STANDIN_DEVICES=${OPENMPS_STANDIN_DEVICES:-2}
export OPENMPS_COPY_THREADS=${OPENMPS_COPY_THREADS:-3}

"$build/bin/openmps-control" -d || { echo "with-openmps: the daemon did not start"; exit 1; }
LD_LIBRARY_PATH=$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$@"
rc=$?
echo quit | "$build/bin/openmps-control" >/dev/null 2>&1
# Wait for the daemon to finish, so nothing outlives the test.
i=0
while [ -e "$dir/pipe/openmps-control.pid" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
if grep -q "ThreadSanitizer\|AddressSanitizer\|LeakSanitizer\|runtime error:" "$dir/log/server.log" "$dir/log/control.log" 2>/dev/null; then
	echo "SANITIZER REPORT in the daemon's or server's log"; grep -A8 "ThreadSanitizer\|AddressSanitizer\|runtime error:" "$dir/log/server.log" "$dir/log/control.log" | head -40
	rc=1
fi
if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
	echo "--- control.log"; tail -n 20 "$dir/log/control.log" 2>/dev/null
	echo "--- server.log"; tail -n 30 "$dir/log/server.log" 2>/dev/null
fi
rm -rf "$dir"
exit $rc
