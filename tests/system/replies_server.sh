#!/bin/sh
# SPDX-License-Identifier: MIT
#
# replies.sh's second half: the same tests with OPENMPS_GPU_REPLIES=0, the
# server answering every reply itself.
#
#   usage: replies_server.sh BUILD_DIR

exec "$(dirname "$0")/replies.sh" "$1" server
