#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tests/gpu/isolation.sh: what one client's kernels find of another's
# memory, natively, under NVIDIA MPS and under openmps (docs/CONTROL.md,
# "Isolation between clients"). In each column an owner
# (tests/gpu/isolation_probe.c) holds 256 KiB and 4 MiB of secret words
# while a second process (a) reads at the owner's two addresses, which the
# API never gave it, and (b) scans outward from an allocation of its own,
# 64 KiB steps up to 64 MiB either side, until its first fault. Columns:
# native; NVIDIA MPS; openmps as it starts by default (one server, the
# driver placing allocations); openmps with OPENMPS_PLACEMENT=random; and
# openmps with each client in a fault domain of its own
# (OPENMPS_FAULT_DOMAIN=own). Prints a table; fails when a column that must
# keep the secret does not: native and MPS (their own address spaces),
# random placement's scan (no address near one's own holds another's
# memory), separate domains (separate servers).
#
# Run from the repository after `make` and `make build/tests/kernels.ptx`
# on a machine with a GPU. Never changes a GPU setting.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
# shellcheck source=bench/daemons.sh
. "$ROOT/bench/daemons.sh"
gpu_script isolation
PROBE=$WORK/isolation_probe
cc -O2 -g -std=c11 -D_GNU_SOURCE -Itests -I"${CUDA_HOME:-/usr/local/cuda}/include" -o "$PROBE" \
	tests/gpu/isolation_probe.c tests/cuda/common.c -L"${CUDA_HOME:-/usr/local/cuda}/lib64/stubs" -lcuda -lm ||
	{ echo "isolation: cannot build the probe"; exit 1; }
rc=0

# probe MODE ARG RUNNER...: the probe's line; tried three times, 3 s
# apart, while it gives none (NVIDIA MPS fails the clients that come right
# after a fault while its server goes).
probe() {
	local mode=$1 arg=$2 out
	shift 2
	for _ in 1 2 3; do
		out=$("$@" timeout 120 "$PROBE" "$mode" "$arg" 2>&1 | grep -E "^$mode:")
		[ -n "$out" ] && { echo "$out"; return; }
		sleep 3
	done
	echo "$mode: failed"
}

# owned UP DOWN MODE ARG RUNNER...: the probe's line, with an owner
# holding its secrets and, when UP is not "-", a daemon of its own brought
# up first and DOWN after: under NVIDIA MPS a reader's fault ends every
# client of the server, the owner too, and the server takes a while to go,
# so each probe there needs a fresh daemon and a fresh owner. Sets SMALL
# and LARGE to the owner's two addresses.
owned() {
	local up=$1 down=$2 mode=$3 arg=$4 f=$WORK/owner.addr out owner
	shift 4
	rm -f "$f" "$f.done"
	if [ "$up" != - ] && ! "$up" >/dev/null; then
		echo "$mode: daemon did not start"
		return
	fi
	"$@" timeout 90 "$PROBE" own "$f" >"$WORK/owner.out" 2>&1 &
	owner=$!
	for _ in $(seq 1 200); do [ -s "$f" ] && break; sleep 0.1; done
	if read -r SMALL LARGE <"$f" 2>/dev/null; then
		[ "$arg" = small ] && arg=$SMALL
		[ "$arg" = large ] && arg=$LARGE
		out=$(probe "$mode" "$arg" "$@")
	else
		out="$mode: owner failed: $(tail -1 "$WORK/owner.out")"
	fi
	touch "$f.done"
	wait "$owner"
	[ "$down" != - ] && "$down" >/dev/null
	echo "$out"
}

# row LABEL MUST UP DOWN RUNNER...: one column. MUST: "all" (reads fault,
# scan finds nothing), "scan" (scan finds nothing) or "" (reported only).
row() {
	local label=$1 must=$2 up=$3 down=$4 rs rl sc ok=yes
	shift 4
	rs=$(owned "$up" "$down" read small "$@")
	rl=$(owned "$up" "$down" read large "$@")
	sc=$(owned "$up" "$down" scan 64 "$@")
	case $must in
	all) [[ $rs == "read: fault"* && $rl == "read: fault"* && $sc == *" 0 secret words"* ]] || ok=NO ;;
	scan) [[ $sc == *" 0 secret words"* ]] || ok=NO ;;
	*) ok="(reported)" ;;
	esac
	[ "$ok" = NO ] && rc=1
	printf '| %s | %s | %s | %s | %s |\n' "$label" "${rs#read: }" "${rl#read: }" "${sc#scan: }" "$ok"
}

echo "| column | read at the owner's 256 KiB | read at its 4 MiB | scan from one's own allocation | kept |"
echo "|---|---|---|---|---|"
row native all - - native
row "NVIDIA MPS" all start_mps stop_mps under_mps
row "openmps, one server, driver placing" "" start_openmps stop_openmps under_openmps
export OPENMPS_PLACEMENT=random
row "openmps, OPENMPS_PLACEMENT=random" scan start_openmps stop_openmps under_openmps
unset OPENMPS_PLACEMENT
row "openmps, OPENMPS_FAULT_DOMAIN=own" all start_openmps stop_openmps under_openmps env OPENMPS_FAULT_DOMAIN=own
exit $rc
