#!/bin/sh
# SPDX-License-Identifier: MIT
#
# The CDI spec (src/control/cdi.c) on the stand-in's two devices:
#   - OPENMPS_CDI_SPEC: the daemon writes it once a server has told it the
#     devices; cdi_spec PATH writes it on demand and keeps that path;
#   - it passes tests/system/cdi_check.py (the CDI rules: version, kind,
#     device names, edits; mode 0644; no device node), and that checker
#     refuses a spec that breaks them;
#   - one device per GPU (ordinal and UUID) and per virtual device; vdevice
#     split and rm write it again; cdi_spec off stops that;
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

# A client given devices the way an engine gives them.
run_as one vgpu0-1
[ "$(listed one)" = "$(hex "$v1") " ] || fail "vgpu0-1 alone: $(cat "$dir/one.out" "$dir/one.err")"
run_as two 1 vgpu0-0
[ "$(listed two)" = "$(hex "$u1") $(hex "$v0") " ] || fail "GPU 1 and vgpu0-0: $(cat "$dir/two.out" "$dir/two.err")"
run_as same 0 "$u0"
[ "$(listed same)" = "$(hex "$u0") " ] || fail "GPU 0 by two names: $(cat "$dir/same.out" "$dir/same.err")"
run_as clash vgpu0-0 vgpu0-1
grep -q "list CUDA_ERROR_INVALID_DEVICE" "$dir/clash.out" || fail "two slices of one GPU: $(cat "$dir/clash.out")"

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
expect "cdi_spec" "$dir/other/o.json"
expect "cdi_spec off" ""
ui "vdevice rm small" >/dev/null
names "$dir/other/o.json" | grep -qx small || fail "written again after cdi_spec off"
expect_err "cdi_spec relative.json" "must be absolute"
expect_err "cdi_spec /tmp/x.yaml" "must end in .json"
expect_err "cdi_spec $dir/cdi" "must end in .json"
: >"$dir/plain"
expect_err "cdi_spec $dir/plain/sub/x.json" "cannot write the CDI spec $dir/plain/sub/x.json: Not a directory"
long=$(printf '%0300d' 0)
expect_err "cdi_spec $dir/$long.json" "cannot write the CDI spec .*: File name too long"
expect_err "cdi_spec a b" "usage|Usage"
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

# A bad OPENMPS_CDI_SPEC stops the daemon from starting.
out=$(OPENMPS_CDI_SPEC=relative.json "$ctl" -d 2>&1) && fail "the daemon started with OPENMPS_CDI_SPEC=relative.json"
echo "$out" | grep -q "OPENMPS_CDI_SPEC: the CDI spec's path must be absolute" || fail "bad OPENMPS_CDI_SPEC: $out"
finish
