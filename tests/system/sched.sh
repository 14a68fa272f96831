#!/bin/sh
# SPDX-License-Identifier: MIT
#
# The server's scheduling (src/server/sched.c) with one service thread, the
# case where clients must share it: s_fair (a flood of launches does not
# starve another client's round trips) and s_clients (many clients at
# once, each checked).
#
#   usage: sched.sh BUILD_DIR

build=$1
rc=0
for t in s_fair s_clients; do
	OPENMPS_THREADS=1 "$(dirname "$0")/with-openmps.sh" "$build" "$build/tests/system/$t" || rc=1
done
exit $rc
