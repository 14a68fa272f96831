#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Runs every cudart program (tests/cudart, built into BUILD_DIR/tests/cudart)
# as a client of its own openmps daemon on the stand-in driver. Skips (77)
# when none was built: nvcc found no C++ host compiler.
#
#   usage: cudart.sh BUILD_DIR

build=$1
here=$(dirname "$0")
n=0
rc=0
# nvcc's programs are not instrumented: under a sanitizer build, the client
# library's runtime (libasan, libtsan) must be loaded first, into the
# program only.
rt=$(ldd "$build/lib/libcuda.so.1" 2>/dev/null | grep -o '/[^ ]*lib[at]san[^ ]*' | head -n 1)
for prog in "$build"/tests/cudart/r_*; do
	[ -x "$prog" ] || continue
	n=$((n + 1))
	if [ -n "$rt" ]; then
		"$here/../system/with-openmps.sh" "$build" env LD_PRELOAD="$rt" "$prog" || rc=1
	else
		"$here/../system/with-openmps.sh" "$build" "$prog" || rc=1
	fi
done
if [ $n -eq 0 ]; then
	echo "no cudart programs in $build/tests/cudart: nvcc needs a C++ host compiler (g++)"
	exit 77
fi
exit $rc
