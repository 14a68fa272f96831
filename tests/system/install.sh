#!/bin/sh
# SPDX-License-Identifier: MIT
#
# make install and make uninstall: into a fresh PREFIX the programs, the
# client library, the stand-in driver, the man pages (with the version), the
# systemd unit (with the PREFIX) and the Slurm examples; the installed
# programs give their version; the installed daemon, on the installed
# stand-in, serves a client through the installed library and names that
# library's directory in its CDI spec; `make uninstall`
# then leaves no file behind; MPS_NAMES=1 adds NVIDIA's program names as
# links, which uninstall removes too.
#
#   usage: install.sh BUILD_DIR

build=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
name=install
tmp=$(mktemp -d /tmp/openmps-install.XXXXXX)
p=$tmp/usr
rc=0
fail() { echo "$name: FAIL: $*"; rc=1; }
mk() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$root" BUILD="$build" PREFIX="$p" "$@"; }

mk install >"$tmp/make.out" 2>&1 || fail "make install: $(tail -5 "$tmp/make.out")"
version=$(sed -n 's/.*OPENMPS_VERSION "\(.*\)"/\1/p' "$root/src/common/version.h")
for f in bin/openmps-control bin/openmps-server lib/openmps/libcuda.so.1 lib/openmps/libcuda.so \
	 lib/openmps/standin/libcuda.so.1 lib/openmps/nvml/libnvidia-ml.so.1 lib/openmps/nvml/nvidia-smi share/man/man1/openmps-control.1 share/man/man8/openmps-server.8 \
	 share/man/man7/openmps.7 lib/systemd/system/openmps.service share/doc/openmps/slurm/prolog.sh \
	 share/doc/openmps/slurm/prolog_task.sh share/doc/openmps/slurm/epilog.sh; do
	[ -e "$p/$f" ] || fail "$f was not installed"
done
# The device plugin, where it is built (gRPC installed).
if [ -x "$build/bin/openmps-device-plugin" ]; then
	for f in bin/openmps-device-plugin share/man/man8/openmps-device-plugin.8; do
		[ -e "$p/$f" ] || fail "$f was not installed"
	done
	grep -q "openmps $version" "$p/share/man/man8/openmps-device-plugin.8" || fail "the plugin's man page has no version"
fi
"$p/bin/openmps-control" --version | grep -q "^openmps-control $version " || fail "openmps-control --version: $("$p/bin/openmps-control" --version)"
"$p/bin/openmps-server" --version | grep -q "^openmps-server $version " || fail "openmps-server --version"
grep -q "openmps $version" "$p/share/man/man1/openmps-control.1" || fail "the man page does not carry the version"
grep -q "^ExecStart=$p/bin/openmps-control -f$" "$p/lib/systemd/system/openmps.service" || fail "the unit does not name the installed daemon"
if command -v groff >/dev/null; then
	for m in man1/openmps-control.1 man8/openmps-server.8 man7/openmps.7; do
		w=$(groff -man -Tutf8 -ww -z "$p/share/man/$m" 2>&1)
		[ -z "$w" ] || fail "groff warns about $m: $w"
	done
fi

# The installed pieces work together, with no GPU.
export CUDA_MPS_PIPE_DIRECTORY=$tmp/pipe CUDA_MPS_LOG_DIRECTORY=$tmp/log
OPENMPS_DRIVER=$p/lib/openmps/standin/libcuda.so.1 "$p/bin/openmps-control" -d || fail "the installed daemon did not start"
out=$(LD_LIBRARY_PATH=$p/lib/openmps "$build/tests/system/c_client" init alloc:1 sync)
echo "$out" | grep -q "^sync CUDA_SUCCESS$" || fail "a client of the installed daemon: $out"
echo get_server_list | "$p/bin/openmps-control" | grep -q "^[0-9]" || fail "the installed daemon ran no server"
# Its CDI spec brings the installed library into containers.
echo "cdi_spec $tmp/cdi/openmps.json" | "$p/bin/openmps-control" >/dev/null || fail "the installed daemon's cdi_spec"
grep -q "\"LD_LIBRARY_PATH=$(cd "$p/lib/openmps" && pwd -P):" "$tmp/cdi/openmps.json" ||
	fail "the CDI spec does not name the installed library: $(grep LD_LIBRARY_PATH "$tmp/cdi/openmps.json")"
echo quit | "$p/bin/openmps-control" >/dev/null
i=0; while [ -e "$tmp/pipe/openmps-control.pid" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done

mk uninstall >"$tmp/make.out" 2>&1 || fail "make uninstall: $(tail -5 "$tmp/make.out")"
left=$(find "$p" -type f -o -type l)
[ -z "$left" ] || fail "make uninstall left: $left"

# MPS_NAMES=1: NVIDIA's program names as links to ours, gone with the rest.
mk install MPS_NAMES=1 >"$tmp/make.out" 2>&1 || fail "make install MPS_NAMES=1: $(tail -5 "$tmp/make.out")"
[ "$(readlink "$p/bin/nvidia-cuda-mps-control")" = openmps-control ] || fail "no nvidia-cuda-mps-control link"
[ "$(readlink "$p/bin/nvidia-cuda-mps-server")" = openmps-server ] || fail "no nvidia-cuda-mps-server link"
"$p/bin/nvidia-cuda-mps-control" --version | grep -q "^openmps-control $version " ||
	fail "nvidia-cuda-mps-control --version: $("$p/bin/nvidia-cuda-mps-control" --version)"
mk uninstall >"$tmp/make.out" 2>&1 || fail "make uninstall after MPS_NAMES=1: $(tail -5 "$tmp/make.out")"
left=$(find "$p" -type f -o -type l)
[ -z "$left" ] || fail "make uninstall left after MPS_NAMES=1: $left"
rm -rf "$tmp"
[ $rc -eq 0 ] && echo "$name: passed"
exit $rc
