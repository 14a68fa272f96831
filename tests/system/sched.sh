#!/bin/sh
# SPDX-License-Identifier: MIT
#
# The server's scheduling (src/server/sched.c). With one service thread,
# the case where clients must share it: s_fair (a flood of launches does
# not starve another client's round trips) and s_clients (many clients at
# once, each checked). Then as on a large machine (OPENMPS_CPUS=16: several
# threads may spin at once) with 128 clients arriving together (s_burst)
# and several clients working at once (s_clients): every one served, and the
# server's log free of scheduling warnings.
#
#   usage: sched.sh BUILD_DIR

build=$1
rc=0
for t in s_fair s_clients; do
	OPENMPS_THREADS=1 "$(dirname "$0")/with-openmps.sh" "$build" "$build/tests/system/$t" || rc=1
done
for t in s_burst s_clients; do
	OPENMPS_CPUS=16 OPENMPS_THREADS=16 OPENMPS_SCHED_STRICT=1 \
		"$(dirname "$0")/with-openmps.sh" "$build" "$build/tests/system/$t" || rc=1
done
exit $rc
