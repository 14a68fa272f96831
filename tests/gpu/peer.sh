#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tests/gpu/peer.sh TESTDIR [PYTEST_ARG...]
#
# Another project's own GPU test suite, run natively and under openmps side
# by side, test by test. TESTDIR is a checkout of that project's tests at
# the version installed on this machine (for example CuPy's tests/ at the
# tag of the installed cupy); the suite is run with pytest twice at the same
# time: on the real driver (an empty pipe directory, so it meets no daemon)
# and as clients of an openmps daemon this script starts in private
# directories under /tmp. Each run's verbose log (one line per test, so a
# run cut short by PEER_TIMEOUT still counts what it ran) is compared by test
# id. Prints the pass/fail/skip/error counts of each side and every test
# whose outcome differs, and exits 0 when every test that passed natively
# also passed under openmps, among the tests both sides reached.
#
# pytest must be importable; PEER_PYLIB names a folder appended to the
# module path for it (pure-Python packages such as pytest and pluggy).
# Environment: OPENMPS_NATIVE_LIB (default /usr/local/nvidia/lib64), PYTHON
# (default python3), PEER_TIMEOUT (seconds for each side, default 420),
# OUT (the reports are copied there when set).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -ge 1 ] || { echo "usage: $0 TESTDIR [PYTEST_ARG...]" >&2; exit 2; }
TESTDIR=$(realpath -- "$1"); shift
NATIVE_LIB=${OPENMPS_NATIVE_LIB:-/usr/local/nvidia/lib64}
PYTHON=${PYTHON:-python3}
BUILD=build
WORK=$(mktemp -d /tmp/openmps-peer.XXXXXX)
MPS_UP=0 OPENMPS_UP=0

om_ctl() { env CUDA_MPS_PIPE_DIRECTORY="$WORK/om-pipe" CUDA_MPS_LOG_DIRECTORY="$WORK/om-log" \
	OPENMPS_DRIVER="$NATIVE_LIB/libcuda.so.1" timeout 20 "$ROOT/$BUILD/bin/openmps-control" "$@"; }
mps_ctl() { :; }
# shellcheck source=bench/daemons.sh
. "$ROOT/bench/daemons.sh"
cleanup() { stop_openmps >/dev/null 2>&1; rm -rf "$WORK"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

start_openmps || exit 1

# side name pipe-dir lib-dir: one pytest run, its verbose log in $WORK/name.log.
side() {
	local name=$1 pipe=$2 lib=$3; shift 3
	(cd "$TESTDIR" && env CUDA_MPS_PIPE_DIRECTORY="$pipe" LD_LIBRARY_PATH="$lib" \
		PEER_PYLIB="${PEER_PYLIB:-}" timeout "${PEER_TIMEOUT:-420}" "$PYTHON" -c '
import os, sys
if os.environ.get("PEER_PYLIB"):
    sys.path.append(os.environ["PEER_PYLIB"])
import pytest
sys.exit(pytest.main(sys.argv[1:]))' -v -p no:cacheprovider -o xfail_strict=false "$@") >"$WORK/$name.log" 2>&1
	echo "$name: pytest exit $?"
}
side native "$WORK/none" "$NATIVE_LIB" "$@" &
side openmps "$WORK/om-pipe" "$ROOT/$BUILD/lib" "$@" &
wait

if [ -n "${OUT:-}" ]; then
	mkdir -p "$OUT"
	for f in native openmps; do
		cp "$WORK/$f.log" "$OUT/peer-$f.log" 2>/dev/null
	done
fi
"$PYTHON" - "$WORK/native.log" "$WORK/openmps.log" <<'EOF'
import re
import sys

LINE = re.compile(r"^(\S.*?::.*?) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)(?:\s|$)")
KIND = {"PASSED": "pass", "XPASS": "pass", "FAILED": "fail", "ERROR": "error", "SKIPPED": "skip", "XFAIL": "skip"}

def outcomes(path):
    out = {}
    try:
        with open(path, errors="replace") as f:
            for line in f:
                m = LINE.match(line)
                if m:
                    out[m.group(1)] = KIND[m.group(2)]
    except OSError as e:
        print(f"{path}: no log ({e})")
    return out

native, om = outcomes(sys.argv[1]), outcomes(sys.argv[2])
for name, res in (("native", native), ("openmps", om)):
    counts = {k: sum(1 for v in res.values() if v == k) for k in ("pass", "fail", "error", "skip")}
    print(f"{name:8} " + "  ".join(f"{k} {v}" for k, v in counts.items()) + f"  ({len(res)} reached)")
both = [t for t in native if t in om]
lost = [t for t in both if native[t] == "pass" and om[t] != "pass"]
gained = [t for t in both if om[t] == "pass" and native[t] != "pass"]
for t in lost:
    print(f"LOST     {t}: {om[t]} under openmps")
for t in gained:
    print(f"GAINED   {t}: {native[t]} natively")
passed = sum(1 for t in both if native[t] == "pass")
ok = passed > 0 and not lost
print(("PASS" if ok else "FAIL") + f"  peer suite: {len(both)} tests reached by both, {passed} passed natively,"
      f" {len(lost)} of them not under openmps")
sys.exit(0 if ok else 1)
EOF
