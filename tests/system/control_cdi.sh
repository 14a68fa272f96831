#!/bin/sh
# SPDX-License-Identifier: MIT
#
# The CDI spec (src/control/cdi.c) on the stand-in's two devices:
#   - OPENMPS_CDI_SPEC: the daemon writes it once a server has told it the
#     devices; cdi_spec PATH writes it on demand and keeps that path;
#   - it passes tests/system/cdi_check.py (the CDI rules: version, kind,
#     device names, edits, annotations; mode 0644; no device node), and
#     that checker refuses a spec that breaks them: a bad name, kind, mode,
#     device node, annotation key or value, too many annotations, and
#     annotations in a spec that says 0.5.0;
#   - one device per GPU (ordinal and UUID) and per virtual device; vdevice
#     split and rm write it again; cdi_spec off stops that;
#   - cdiVersion 0.6.0, each device annotated with what the daemon knows of
#     it: its UUID, memory (a GPU's 1 GiB, a half slice's 512 MiB, an added
#     device's 64 MiB), and a virtual device's GPU and SMs (8 for a half, 2
#     asked of groups of 2), the figures its server reports in get_metrics;
#   - 0.5.0 (cdi_spec PATH 0.5.0, OPENMPS_CDI_VERSION=0.5.0 at start): the
#     same spec without annotations, kept for the rewrites until cdi_spec
#     gives another; any other version is refused by cdi_spec and stops the
#     daemon from starting;
#   - the spec's edits, applied as an engine would (its env), give a client
#     exactly the devices asked for, several of them together;
#   - paths with characters JSON escapes come out whole;
#   - bad paths (relative, not .json, a name too long, a directory that
#     cannot be made) get one Error line; only an admin may write it.
#
#   usage: control_cdi.sh BUILD_DIR

name=control_cdi; . "$(dirname "$0")/c_lib.sh"
export OPENMPS_STANDIN_DEVICES=2
check="$(dirname "$0")/cdi_check.py"
command -v python3 >/dev/null || { echo "needs python3"; cleanup_only; exit 77; }
spec="$dir/cdi/openmps.json"

# names SPEC: the device names, one a line.
names() { python3 -c 'import json,sys; [print(d["name"]) for d in json.load(open(sys.argv[1]))["devices"]]' "$1"; }
# edits SPEC NAME...: the env an engine gives a container asking for these devices, one a line.
edits() {
	python3 - "$@" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
env = {}
for e in s.get("containerEdits", {}).get("env", []) + [e for n in sys.argv[2:] for d in s["devices"]
                                                      if d["name"] == n for e in d["containerEdits"]["env"]]:
    k, v = e.split("=", 1)
    env[k] = v
for k, v in env.items():
    print("%s=%s" % (k, v))
EOF
}
hex() { echo "$1" | sed 's/^GPU-//; s/-//g'; }
# notes SPEC NAME: the device's annotations, KEY=VALUE sorted, on one line.
notes() {
	python3 -c 'import json,sys
d = [d for d in json.load(open(sys.argv[1]))["devices"] if d["name"] == sys.argv[2]]
print(" ".join("%s=%s" % kv for kv in sorted(d[0].get("annotations", {}).items())) if d else "none")' "$1" "$2"
}
# plain SPEC: the spec without its version and annotations, as one canonical line.
plain() {
	python3 -c 'import json,sys
s = json.load(open(sys.argv[1]))
del s["cdiVersion"]
s.pop("annotations", None)
for d in s["devices"]: d.pop("annotations", None)
print(json.dumps(s, sort_keys=True))' "$1"
}
version() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["cdiVersion"])' "$1"; }
# annotate SPEC OUT PYTHON: OUT is SPEC after PYTHON on it (s), mode 0644.
annotate() {
	python3 -c 'import json,sys
s = json.load(open(sys.argv[1]))
exec(sys.argv[3])
json.dump(s, open(sys.argv[2], "w"))' "$@" && chmod 644 "$2"
}
# metric NAME VDEVICE: its server's figure in get_metrics.
metric() { ui get_metrics | awk -v m="$1{" -v v="vdevice=\"$2\"" 'index($0, m) == 1 && index($0, v) { print $2; exit }'; }
MiB=1048576
# run_as NAME DEVICE...: c_client `list` with the env the spec gives for those devices.
run_as() {
	cn=$1; shift
	edits "$spec" "$@" >"$dir/$cn.env" || fail "cannot read $spec"
	# shellcheck disable=SC2046 # one word a line: the spec's values have no blanks
	env -u CUDA_MPS_PIPE_DIRECTORY $(cat "$dir/$cn.env") "$build/tests/system/c_client" list \
		>"$dir/$cn.out" 2>"$dir/$cn.err"
}
listed() { awk '$1 == "list" { for (i = 4; i <= NF; i += 2) printf "%s ", $i }' "$dir/$1.out"; }

export OPENMPS_CDI_SPEC="$spec"
start_daemon
unset OPENMPS_CDI_SPEC
wait_until 10 test -e "$spec" || fail "OPENMPS_CDI_SPEC: no spec written"
python3 "$check" "$spec" || fail "the daemon's spec is not a valid CDI spec"
u0=$(ui device_query | awk '$1 == "0" { print $2 }'); u1=$(ui device_query | awk '$1 == "1" { print $2 }')
case "$u0$u1" in GPU-*GPU-*) ;; *) fail "device_query gave no UUIDs: $u0 $u1" ;; esac
[ "$(names "$spec" | tr '\n' ' ')" = "0 $u0 1 $u1 " ] || fail "devices: $(names "$spec" | tr '\n' ' ')"
grep -q '/dev/' "$spec" && fail "the spec names a device node: $(grep /dev/ "$spec")"
[ "$(stat -c %a "$spec")" = 644 ] || fail "mode $(stat -c %a "$spec")"
[ "$(version "$spec")" = 0.6.0 ] || fail "cdiVersion $(version "$spec"), expected 0.6.0 by default"
m0=$(($(ui device_query | awk '$1 == "0" { print $3 }') * MiB)); m1=$(($(ui device_query | awk '$1 == "1" { print $3 }') * MiB))
[ "$m0" -gt 0 ] || fail "device_query gave no memory: $(ui device_query)"
for n in 0 "$u0"; do
	[ "$(notes "$spec" "$n")" = "openmps.io/memory-bytes=$m0 openmps.io/uuid=$u0" ] ||
		fail "GPU 0's annotations (as $n): $(notes "$spec" "$n")"
done
[ "$(notes "$spec" 1)" = "openmps.io/memory-bytes=$m1 openmps.io/uuid=$u1" ] || fail "GPU 1's annotations: $(notes "$spec" 1)"

# The checker is not a rubber stamp.
sed 's/"name": "0"/"name": "-bad"/' "$spec" >"$dir/bad1.json"; chmod 644 "$dir/bad1.json"
python3 "$check" "$dir/bad1.json" >/dev/null && fail "cdi_check.py took a bad device name"
python3 - "$spec" "$dir/bad2.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
s["devices"][0]["containerEdits"]["deviceNodes"] = [{"path": "/dev/nvidia0"}]
json.dump(s, open(sys.argv[2], "w"))
EOF
chmod 644 "$dir/bad2.json"
python3 "$check" "$dir/bad2.json" >/dev/null && fail "cdi_check.py took a device node"
sed 's/"kind": "openmps.io\/gpu"/"kind": "openmps"/' "$spec" >"$dir/bad3.json"; chmod 600 "$dir/bad3.json"
[ "$(python3 "$check" "$dir/bad3.json" | wc -l)" -eq 2 ] || fail "cdi_check.py: a bad kind and mode 600 not both found"
# Annotations: only from 0.6.0 on, keys as Kubernetes takes them, string
# values, 256 KiB at most; valid ones pass.
sed 's/"cdiVersion": "0.6.0"/"cdiVersion": "0.5.0"/' "$spec" >"$dir/bad4.json"; chmod 644 "$dir/bad4.json"
python3 "$check" "$dir/bad4.json" | grep -q "devices\[0\].annotations needs cdiVersion 0.6.0 or later, the spec says 0.5.0" ||
	fail "cdi_check.py took annotations in a 0.5.0 spec: $(python3 "$check" "$dir/bad4.json")"
for b in '"bad key": "x"' '"-openmps.io/x": "x"' '"openmps_io/x": "x"' '"openmps.io/x/y": "x"' '"openmps.io/": "x"' \
	 "\"openmps.io/$(printf '%064d' 0)\": \"x\"" '"openmps.io/n": 1' '"openmps.io/n": null'; do
	annotate "$spec" "$dir/bad5.json" "s['devices'][0]['annotations'].update(json.loads('{' + sys.argv[4] + '}'))" "$b"
	python3 "$check" "$dir/bad5.json" >/dev/null && fail "cdi_check.py took the annotation $b"
done
annotate "$spec" "$dir/bad6.json" 's["annotations"] = {"openmps.io/big": "x" * (256 * 1024)}'
python3 "$check" "$dir/bad6.json" | grep -q ": annotations: .* more than 262144" ||
	fail "cdi_check.py took 256 KiB of annotations: $(python3 "$check" "$dir/bad6.json" | cut -c 1-200)"
annotate "$spec" "$dir/good.json" 's["annotations"] = {"openmps.io/x": "", "x": "y", "A.b-c/D_e.f": "1"}'
python3 "$check" "$dir/good.json" || fail "cdi_check.py refused valid spec-level annotations"

# The spec's own edits: the pipe directory and our library, no NVIDIA runtime.
edits "$spec" >"$dir/common.env"
grep -qx "CUDA_MPS_PIPE_DIRECTORY=$(cd "$CUDA_MPS_PIPE_DIRECTORY" && pwd -P)" "$dir/common.env" ||
	fail "CUDA_MPS_PIPE_DIRECTORY: $(cat "$dir/common.env")"
grep -q "^LD_LIBRARY_PATH=$(cd "$build/lib" && pwd -P):" "$dir/common.env" || fail "LD_LIBRARY_PATH: $(cat "$dir/common.env")"
grep -qx "NVIDIA_VISIBLE_DEVICES=void" "$dir/common.env" || fail "NVIDIA_VISIBLE_DEVICES is not void"
# openmps's nvidia-smi where images look for it, read-only.
smi_mount=$(python3 -c 'import json,sys
for m in json.load(open(sys.argv[1]))["containerEdits"]["mounts"]:
    if m["containerPath"] == "/usr/bin/nvidia-smi": print(m["hostPath"], "ro" in m["options"])' "$spec")
[ "$smi_mount" = "$(cd "$build/lib" && pwd -P)/nvml/nvidia-smi True" ] || fail "the nvidia-smi mount: '$smi_mount'"

# Virtual devices: written again on split and rm.
ui "vdevice split 0 2" >"$dir/split.out" || fail "vdevice split: $(cat "$dir/split.out")"
v0=$(awk '$1 == "vgpu0-0" { print $2 }' "$dir/split.out"); v1=$(awk '$1 == "vgpu0-1" { print $2 }' "$dir/split.out")
[ "$(names "$spec" | tr '\n' ' ')" = "0 $u0 1 $u1 vgpu0-0 vgpu0-1 " ] || fail "after split: $(names "$spec" | tr '\n' ' ')"
python3 "$check" "$spec" || fail "the spec after split is not valid"
[ "$(notes "$spec" vgpu0-0)" = "openmps.io/gpu=$u0 openmps.io/memory-bytes=$((m0 / 2)) openmps.io/sms=8 openmps.io/uuid=$v0" ] ||
	fail "vgpu0-0's annotations: $(notes "$spec" vgpu0-0)"
[ "$(notes "$spec" vgpu0-1)" = "openmps.io/gpu=$u0 openmps.io/memory-bytes=$((m0 / 2)) openmps.io/sms=8 openmps.io/uuid=$v1" ] ||
	fail "vgpu0-1's annotations: $(notes "$spec" vgpu0-1)"

# A client given devices the way an engine gives them.
run_as one vgpu0-1
[ "$(listed one)" = "$(hex "$v1") " ] || fail "vgpu0-1 alone: $(cat "$dir/one.out" "$dir/one.err")"
run_as two 1 vgpu0-0
[ "$(listed two)" = "$(hex "$u1") $(hex "$v0") " ] || fail "GPU 1 and vgpu0-0: $(cat "$dir/two.out" "$dir/two.err")"
run_as same 0 "$u0"
[ "$(listed same)" = "$(hex "$u0") " ] || fail "GPU 0 by two names: $(cat "$dir/same.out" "$dir/same.err")"
run_as clash vgpu0-0 vgpu0-1
grep -q "list CUDA_ERROR_INVALID_DEVICE" "$dir/clash.out" || fail "two slices of one GPU: $(cat "$dir/clash.out")"
# The annotations' figures are the server's.
sms=$(metric openmps_server_vdevice_sms vgpu0-1); mem=$(metric openmps_server_vdevice_memory_bytes vgpu0-1)
[ "$sms $mem" = "8 $((m0 / 2))" ] || fail "vgpu0-1 in get_metrics: '$sms' SMs, '$mem' bytes"

ui "vdevice rm vgpu0-1" >/dev/null
[ "$(names "$spec" | tr '\n' ' ')" = "0 $u0 1 $u1 vgpu0-0 " ] || fail "after rm: $(names "$spec" | tr '\n' ' ')"
# shellcheck disable=SC2046 # as in run_as
env -u CUDA_MPS_PIPE_DIRECTORY $(cat "$dir/one.env") "$build/tests/system/c_client" list >"$dir/stale.out" 2>&1
[ "$(listed stale)" = "" ] || fail "a removed device's old edits still give $(listed stale)"
for f in "$dir"/cdi/*; do
	[ "$f" = "$spec" ] || fail "left in the spec's directory: $f"
done

# cdi_spec: another path, kept from then on; off.
expect "cdi_spec $dir/other/o.json" "$dir/other/o.json"
python3 "$check" "$dir/other/o.json" || fail "cdi_spec's spec is not valid"
ui "vdevice add small 1 2 64M" >/dev/null
names "$dir/other/o.json" | grep -qx small || fail "cdi_spec's path not written again after vdevice add"
small=$(ui "vdevice list" | awk '$1 == "small" { print $2 }')
[ "$(notes "$dir/other/o.json" small)" = "openmps.io/gpu=$u1 openmps.io/memory-bytes=$((64 * MiB)) openmps.io/sms=2 openmps.io/uuid=$small" ] ||
	fail "small's annotations: $(notes "$dir/other/o.json" small)"
expect "cdi_spec" "$dir/other/o.json"
expect "cdi_spec off" ""
ui "vdevice rm small" >/dev/null
names "$dir/other/o.json" | grep -qx small || fail "written again after cdi_spec off"

# cdi_spec's version: 0.5.0 is the same spec without annotations, kept for
# the rewrites until another is given; no other is taken.
ui "vdevice add small 1 2 64M" >/dev/null
expect "cdi_spec $dir/v6.json" "$dir/v6.json"
expect "cdi_spec $dir/v5.json 0.5.0" "$dir/v5.json"
python3 "$check" "$dir/v5.json" || fail "the 0.5.0 spec is not valid"
[ "$(version "$dir/v6.json") $(version "$dir/v5.json")" = "0.6.0 0.5.0" ] ||
	fail "versions: $(version "$dir/v6.json") and $(version "$dir/v5.json"), expected 0.6.0 and 0.5.0"
grep -q '"annotations"' "$dir/v5.json" && fail "the 0.5.0 spec has annotations"
[ "$(plain "$dir/v5.json")" = "$(plain "$dir/v6.json")" ] || fail "the 0.5.0 spec differs from 0.6.0's but for its annotations"
ui "vdevice rm small" >/dev/null
names "$dir/v5.json" | grep -qx small && fail "the 0.5.0 spec not written again after vdevice rm"
[ "$(version "$dir/v5.json")" = 0.5.0 ] || fail "the 0.5.0 spec written again as $(version "$dir/v5.json")"
python3 "$check" "$dir/v5.json" || fail "the 0.5.0 spec written again is not valid"
expect "cdi_spec 0.6.0" "$dir/v5.json"
[ "$(version "$dir/v5.json") $(notes "$dir/v5.json" 1)" = "0.6.0 openmps.io/memory-bytes=$m1 openmps.io/uuid=$u1" ] ||
	fail "cdi_spec 0.6.0: $(version "$dir/v5.json"), GPU 1's annotations $(notes "$dir/v5.json" 1)"
for v in 0.7.0 0.6 v0.6.0 1.0.0; do
	expect_err "cdi_spec $dir/v7.json $v" "version must be 0\.6\.0 \(the default\) or 0\.5\.0 .*not '$v'"
done
[ -e "$dir/v7.json" ] && fail "cdi_spec wrote a spec of a version it refused"
expect "cdi_spec off" ""
expect_err "cdi_spec relative.json" "must be absolute"
expect_err "cdi_spec /tmp/x.yaml" "must end in .json"
expect_err "cdi_spec $dir/cdi" "must end in .json"
: >"$dir/plain"
expect_err "cdi_spec $dir/plain/sub/x.json" "cannot write the CDI spec $dir/plain/sub/x.json: Not a directory"
long=$(printf '%0300d' 0)
expect_err "cdi_spec $dir/$long.json" "cannot write the CDI spec .*: File name too long"
expect_err "cdi_spec a b c" "usage|Usage"
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null && as_user "$other_uid" test -x "$ctl"; then
	got=$(printf 'cdi_spec %s/u.json\n' "$dir" | as_user "$other_uid" "$ctl" 2>&1)
	echo "$got" | grep -q "^Error: cdi_spec is a root-only command" || fail "another user's cdi_spec: $got"
	[ -e "$dir/u.json" ] && fail "another user wrote a spec"
fi
stop_daemon

# Paths JSON must escape: a pipe directory with a quote, a backslash and a tab.
odd=$(printf '%s/p"q\\r\ts' "$dir")
mkdir -p "$odd" && CUDA_MPS_PIPE_DIRECTORY=$odd && export CUDA_MPS_PIPE_DIRECTORY
start_daemon
expect "cdi_spec $dir/odd.json" "$dir/odd.json"
python3 "$check" "$dir/odd.json" || fail "the spec of an odd pipe directory is not valid"
edits "$dir/odd.json" | grep -qxF "CUDA_MPS_PIPE_DIRECTORY=$odd" || fail "the odd pipe directory came out as $(edits "$dir/odd.json" | head -1)"
stop_daemon
CUDA_MPS_PIPE_DIRECTORY="$dir/pipe"

# OPENMPS_CDI_VERSION=0.5.0: the daemon's spec says 0.5.0, without annotations.
export OPENMPS_CDI_SPEC="$dir/env5.json" OPENMPS_CDI_VERSION=0.5.0
# shellcheck disable=SC2119 # no options: the daemon as it starts by default
start_daemon
unset OPENMPS_CDI_SPEC OPENMPS_CDI_VERSION
wait_until 10 test -e "$dir/env5.json" || fail "OPENMPS_CDI_VERSION=0.5.0: no spec written"
[ "$(version "$dir/env5.json")" = 0.5.0 ] || fail "OPENMPS_CDI_VERSION=0.5.0 gave $(version "$dir/env5.json")"
grep -q '"annotations"' "$dir/env5.json" && fail "OPENMPS_CDI_VERSION=0.5.0: the spec has annotations"
python3 "$check" "$dir/env5.json" || fail "OPENMPS_CDI_VERSION=0.5.0: the spec is not valid"
stop_daemon

# A bad OPENMPS_CDI_SPEC or OPENMPS_CDI_VERSION stops the daemon from starting.
out=$(OPENMPS_CDI_SPEC=relative.json "$ctl" -d 2>&1) && fail "the daemon started with OPENMPS_CDI_SPEC=relative.json"
echo "$out" | grep -q "OPENMPS_CDI_SPEC: the CDI spec's path must be absolute" || fail "bad OPENMPS_CDI_SPEC: $out"
for v in 0.7.0 0.6 v0.5.0 "0.5.0 " 1.0.0; do
	out=$(OPENMPS_CDI_VERSION=$v "$ctl" -d 2>&1) && { fail "the daemon started with OPENMPS_CDI_VERSION='$v'"; stop_daemon; }
	echo "$out" | grep -qF "OPENMPS_CDI_VERSION: the CDI spec's version must be 0.6.0 (the default) or 0.5.0" ||
		fail "OPENMPS_CDI_VERSION='$v': $out"
done
finish
