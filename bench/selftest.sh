#!/bin/sh
# SPDX-License-Identifier: MIT
#
# The benchmark's own logic, without a GPU: bench/infer.py selftest runs
# its parsing, summaries and tables on made-up records and fake children
# (a wrong answer, a refusal, a child that dies), so a table that would
# print a wrong ratio fails here rather than in a report; bench/calltable.py
# selftest reads made-up call counts and waits the same way,
# bench/cpuprofile.py selftest sums up made-up samples, and bench/waits.py
# selftest made-up traced waits.
#
#   usage: selftest.sh [BUILD_DIR]   (the build folder is not needed)

command -v python3 >/dev/null || { echo "needs python3"; exit 77; }
python3 "$(dirname "$0")/infer.py" selftest || exit 1
python3 "$(dirname "$0")/cpuprofile.py" selftest || exit 1
python3 "$(dirname "$0")/waits.py" selftest || exit 1
exec python3 "$(dirname "$0")/calltable.py" selftest
