#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tests/gpu/faults.sh: GPU faults on the real driver. tests/system/s_fault
# (a fault in the shared server: every client gets the driver's error, the
# log names the culprit or suspects, a new client works at once; a fault in
# a fault domain of its own leaves a bystander in another domain running
# with correct results) and tests/system/s_soak (SOAK_CLIENTS clients doing
# checked work for SOAK_SECONDS while a chaos loop kills them, terminates
# them and faults the GPU in domains of their own; afterwards the shared
# server, its descriptors and threads, and the device's memory are as
# before). Each runs as clients of a fresh openmps daemon on the real
# driver. Run after `make` and the test programs are built. Prints a
# PASS/FAIL line each and the tests' own summaries; exits 0 when both pass.
# Environment: OPENMPS_NATIVE_LIB (default /usr/local/nvidia/lib64),
# SOAK_CLIENTS (default 16), SOAK_SECONDS (default 600), SOAK_FAULT_MS (the
# least time between two faults, default 2000); each test's whole
# output goes to $OUT/faults (/tmp/faults without OUT). The soak runs for
# longer than one command may: tests/gpu/detach.sh runs it detached.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
BUILD=build
NATIVE_LIB=${OPENMPS_NATIVE_LIB:-/usr/local/nvidia/lib64}
rc=0
# SOAK_DIAG: a command the soak runs with the server's pid when the server
# kept a thread (a debugger's backtraces, say: attaching cuda-gdb there was
# seen to crash the server afterwards, so it is not the default).
SOAK_DIAG=${SOAK_DIAG:-}
# Each test's whole output, the daemon's and server's logs included on failure.
LOGS=${OUT:-/tmp}/faults
mkdir -p "$LOGS"

run() {   # name program [env...]
	local name=$1 prog=$2 out; shift 2
	out=$(env "$@" OPENMPS_DRIVER="$NATIVE_LIB/libcuda.so.1" OPENMPS_STANDIN_DEVICES= \
		tests/system/with-openmps.sh "$BUILD" "$BUILD/tests/system/$prog" 2>&1)
	if [ $? -eq 0 ]; then printf 'PASS  %s\n' "$name"; else printf 'FAIL  %s\n' "$name"; rc=1; fi
	printf '%s\n' "$out" | grep -E "^s_(fault|soak):|FAIL" | sort | uniq -c | sed 's/^/      /'
	printf '%s\n' "$out" >"$LOGS/$prog.log"
}

# Where threads the server's own threads start in a library come from
# (tests/gpu/threadspy.c), preloaded for the soak.
SPY=() SPYLOG=$LOGS/threads-started.log
rm -f "$SPYLOG"
if cc -O2 -g -fPIC -shared -o "$LOGS/threadspy.so" tests/gpu/threadspy.c -ldl 2>/dev/null; then
	SPY=(LD_PRELOAD="$LOGS/threadspy.so" OPENMPS_THREADSPY_LOG="$SPYLOG")
fi

run "fault in the shared server, then in a domain of its own" s_fault
run "soak: ${SOAK_CLIENTS:-16} clients, ${SOAK_SECONDS:-600} s of kills, terminations and faults" s_soak \
	OPENMPS_SOAK_CLIENTS="${SOAK_CLIENTS:-16}" OPENMPS_SOAK_SECONDS="${SOAK_SECONDS:-600}" \
	OPENMPS_SOAK_FAULT_MS="${SOAK_FAULT_MS:-2000}" OPENMPS_SOAK_DIAG="$SOAK_DIAG" "${SPY[@]}"
# Threads a library started from the server's teardown threads, with where
# in the server each was asked for (the driver names its own threads after
# the thread that starts them).
if [ -s "$SPYLOG" ] && grep -q "started by omps-teardown" "$SPYLOG"; then
	echo "      threads started from a client's teardown (all of $SPYLOG):"
	awk '/^---/ { show = /omps-teardown/ } show' "$SPYLOG" | head -80 | while IFS= read -r line; do
		off=$(sed -n 's/^.*openmps-server(+\(0x[0-9a-f]*\)).*$/\1/p' <<<"$line")
		if [ -n "$off" ] && command -v addr2line >/dev/null; then
			line="$line  $(addr2line -f -s -e "$BUILD/bin/openmps-server" "$off" | paste -sd' ')"
		fi
		printf '        %s\n' "$line"
	done
fi
exit $rc
