#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Replies the GPU writes (src/common/region.h, MPS_SLOT_GPU) on the two paths
# the default timing rarely takes: with OPENMPS_CLIENT_YIELD_US=0 every
# waiting thread goes to sleep after a spin long enough for the server to
# have handed the reply to the GPU (OPENMPS_CLIENT_SPIN_US=2000), and must be
# woken by the server (MPS_OP_SLOT_WAKE); with OPENMPS_GPU_REPLIES=0
# (replies_server.sh, which runs this script so) the server answers every
# reply itself. Each runs the tests that synchronize in every way: streams,
# events, copies, threads, stream memory operations (whose last case fails
# if a sleeper is woken only by its own liveness check). The two are two
# scripts so that each stays well within the runner's time limit under
# ThreadSanitizer.
#
#   usage: replies.sh BUILD_DIR [server]

build=$1
rc=0
for t in t_stream t_event t_memory t_threads t_memops; do
	if [ "${2:-}" = server ]; then
		OPENMPS_GPU_REPLIES=0 "$(dirname "$0")/with-openmps.sh" "$build" "$build/tests/cuda/$t" || rc=1
	else
		OPENMPS_CLIENT_SPIN_US=2000 OPENMPS_CLIENT_YIELD_US=0 \
			"$(dirname "$0")/with-openmps.sh" "$build" "$build/tests/cuda/$t" || rc=1
	fi
done
exit $rc
