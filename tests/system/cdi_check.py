#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks a CDI spec file against the Container Device Interface's rules,
as its specification and JSON schema state them (written down here, not
copied): the top-level keys and their types, cdiVersion a released version,
kind "vendor/class" with the allowed characters, at least one device, each
with a valid name and non-empty containerEdits, and every edit of the known
kinds with its required fields and types. Each feature a version added needs
cdiVersion at least that version, as CDI's loader requires (a mount's type
0.4.0; a device name starting with a digit, a device node's hostPath 0.5.0;
annotations, a dot in the class 0.6.0; intelRdt, additionalGIDs 0.7.0).
Annotations, of the spec and of each device, follow Kubernetes' annotation
rules: a key is a name of at most 63 characters (letters, digits, '-', '_',
'.', starting and ending with a letter or digit), optionally after a DNS
subdomain prefix and '/'; values are strings; keys and values together at
most 256 KiB. Then what openmps adds: no device node anywhere, the mode 0644.

   usage: cdi_check.py SPEC.json     exit 0 valid, 1 not (each problem printed)
"""
import json
import os
import re
import stat
import sys

VERSIONS = ["0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0"]
# vendor: a DNS-like name; class and device names: letters, digits and a few
# separators, starting and ending with a letter or digit.
VENDOR = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$")
CLASS = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$")
DEVICE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.:-]*[A-Za-z0-9])?$")
ENV = re.compile(r"^[^=\x00]+=")
EDIT_KEYS = {"env", "deviceNodes", "mounts", "hooks", "intelRdt", "additionalGIDs"}
HOOK_NAMES = {"prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop"}
# Annotation keys (Kubernetes' qualified names, compared in lower case).
NOTE_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
NOTE_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
NOTES_MAX = 256 * 1024

problems = []
needs = []   # (version, what): features and the version that added each


def bad(where, what):
    problems.append("%s: %s" % (where, what))


def need(version, what):
    needs.append((version, what))


def vkey(v):
    return tuple(int(x) for x in v.split("."))


def check_notes(where, notes):
    """Annotations: an object of strings, keys as Kubernetes takes them."""
    need("0.6.0", where)
    if not isinstance(notes, dict):
        bad(where, "not an object")
        return
    size = 0
    for k, v in notes.items():
        size += len(k) + (len(v) if isinstance(v, str) else 0)
        if not isinstance(v, str):
            bad(where, "the value of %r is not a string" % k)
        parts = k.lower().split("/")
        if len(parts) > 2:
            bad(where, "key %r has more than one '/'" % k)
            continue
        name = parts[-1]
        if len(parts) == 2 and (len(parts[0]) > 253 or not NOTE_PREFIX.match(parts[0])):
            bad(where, "key %r: the prefix is not a DNS subdomain" % k)
        if len(name) > 63 or not NOTE_NAME.match(name):
            bad(where, "key %r: the name is not 1 to 63 letters, digits, '-', '_' or '.' "
                "starting and ending with a letter or digit" % k)
    if size > NOTES_MAX:
        bad(where, "%d bytes of keys and values, more than %d" % (size, NOTES_MAX))


def strings(where, v):
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        bad(where, "not an array of strings")
        return False
    return True


def check_edits(where, e, device):
    if not isinstance(e, dict):
        bad(where, "not an object")
        return
    for k in e:
        if k not in EDIT_KEYS:
            bad(where, "unknown key %r" % k)
    if device and not any(e.get(k) for k in EDIT_KEYS):
        bad(where, "a device's containerEdits must not be empty")
    if "env" in e and strings(where + ".env", e["env"]):
        for x in e["env"]:
            if not ENV.match(x):
                bad(where + ".env", "%r is not KEY=VALUE" % x)
    if e.get("deviceNodes"):
        bad(where, "device nodes %r: an openmps container reaches the GPU only through openmps" % e["deviceNodes"])
        if isinstance(e["deviceNodes"], list) and any(isinstance(n, dict) and n.get("hostPath")
                                                      for n in e["deviceNodes"]):
            need("0.5.0", where + ".deviceNodes[].hostPath")
    for k in ("intelRdt", "additionalGIDs"):
        if e.get(k):
            need("0.7.0", "%s.%s" % (where, k))
    for i, m in enumerate(e.get("mounts", [])):
        w = "%s.mounts[%d]" % (where, i)
        if not isinstance(m, dict):
            bad(w, "not an object")
            continue
        for k in ("hostPath", "containerPath"):
            if not isinstance(m.get(k), str) or not m[k]:
                bad(w, "%s missing or not a string" % k)
        if isinstance(m.get("containerPath"), str) and not m["containerPath"].startswith("/"):
            bad(w, "containerPath is not absolute")
        if "type" in m and not isinstance(m["type"], str):
            bad(w, "type is not a string")
        if m.get("type"):
            need("0.4.0", w + ".type")
        if "options" in m:
            strings(w + ".options", m["options"])
        for k in m:
            if k not in ("hostPath", "containerPath", "type", "options"):
                bad(w, "unknown key %r" % k)
    for i, h in enumerate(e.get("hooks", [])):
        w = "%s.hooks[%d]" % (where, i)
        if not isinstance(h, dict) or h.get("hookName") not in HOOK_NAMES or not isinstance(h.get("path"), str):
            bad(w, "a hook needs a known hookName and a path")


def main():
    path = sys.argv[1]
    try:
        with open(path, "rb") as f:
            spec = json.loads(f.read().decode("utf-8"))
    except (OSError, ValueError) as e:
        print("%s: not valid JSON: %s" % (path, e))
        return 1
    mode = stat.S_IMODE(os.stat(path).st_mode)
    if mode != 0o644:
        bad(path, "mode %o, expected 644" % mode)
    if not isinstance(spec, dict):
        bad("spec", "not an object")
    else:
        for k in spec:
            if k not in ("cdiVersion", "kind", "annotations", "devices", "containerEdits"):
                bad("spec", "unknown key %r" % k)
        if spec.get("cdiVersion") not in VERSIONS:
            bad("cdiVersion", "%r is not a released CDI version" % spec.get("cdiVersion"))
        kind = spec.get("kind")
        if not isinstance(kind, str) or kind.count("/") != 1:
            bad("kind", "%r is not vendor/class" % kind)
        else:
            vendor, cls = kind.split("/")
            if not VENDOR.match(vendor) or len(vendor) > 253:
                bad("kind", "vendor %r is not a valid name" % vendor)
            if not CLASS.match(cls) or len(cls) > 63:
                bad("kind", "class %r is not a valid name" % cls)
            elif "." in cls:
                need("0.6.0", "a dot in the kind's class")
        devices = spec.get("devices")
        if not isinstance(devices, list) or not devices:
            bad("devices", "missing or empty")
            devices = []
        names = set()
        for i, d in enumerate(devices):
            w = "devices[%d]" % i
            if not isinstance(d, dict):
                bad(w, "not an object")
                continue
            for k in d:
                if k not in ("name", "annotations", "containerEdits"):
                    bad(w, "unknown key %r" % k)
            n = d.get("name")
            if not isinstance(n, str) or not DEVICE.match(n):
                bad(w, "name %r is not a valid device name" % n)
            elif n in names:
                bad(w, "name %r given twice" % n)
            elif n[0].isdigit():
                need("0.5.0", "%s: a name starting with a digit" % w)
            names.add(n)
            if "annotations" in d:
                check_notes(w + ".annotations", d["annotations"])
            if "containerEdits" not in d:
                bad(w, "containerEdits missing")
            else:
                check_edits(w + ".containerEdits", d["containerEdits"], True)
        if "containerEdits" in spec:
            check_edits("containerEdits", spec["containerEdits"], False)
        if "annotations" in spec:
            check_notes("annotations", spec["annotations"])
        version = spec.get("cdiVersion")
        if version in VERSIONS:
            for v, what in needs:
                if vkey(version) < vkey(v):
                    bad("cdiVersion", "%s needs cdiVersion %s or later, the spec says %s" % (what, v, version))
    for p in problems:
        print("%s: %s" % (path, p))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
