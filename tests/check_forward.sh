#!/bin/sh
# SPDX-License-Identifier: MIT
#
# The generated forwarding layer (src/client/gen, src/server/gen, from
# src/common/forward.def) is what tools/gen-forward.py writes today: the
# same check as `make check-forward`, run by make test so a hand edit of a
# generated file, or a forward.def change without `make regen-forward`,
# fails here.
#
#   usage: check_forward.sh [BUILD_DIR]   (the build folder is not needed)

command -v python3 >/dev/null || { echo "needs python3"; exit 77; }
cd "$(dirname "$0")/.." || exit 1
exec python3 tools/gen-forward.py --cuda-home "${CUDA_HOME:-/usr/local/cuda}" --cc "${CC:-cc}" --check
