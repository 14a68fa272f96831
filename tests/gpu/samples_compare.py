#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Compares the runs of one NVIDIA CUDA sample, natively and under openmps.

Used by tests/gpu/samples.sh. `one TEST SAMPLE LOGDIR RUNDIRS WORK TABLE`
reads the exit status and output of TEST's runs (LOGDIR/TEST.MODE.{rc,out,
err,time}, MODE native, native2, openmps), normalises the outputs (numbers
on lines about time, rates and bandwidth masked, addresses masked, the
lines RULES names for SAMPLE masked or left out, openmps's own log lines
set aside and shown), prints a line with both verdicts and a diff excerpt
where they differ, and appends the row to TABLE. `table TABLE` prints the
table and a PASS/FAIL line and exits 0 when every sample built and every
one that passed natively passed under openmps with the same output. When
the two native runs differ from each other and openmps matches neither,
the output "varies" and is not held against openmps.
"""
import difflib
import os
import re
import sys

# Lines about time, rates or bandwidth: their numbers are masked.
TIMEISH = re.compile(r"(?i)(time|elapsed|msec|usec|walltime|\d\s*(ms|us|µs|s|sec|seconds)\b|/s(ec)?\b|per second|bandwidth"
                     r"|throughput|flops|gflop|rate\b|latency|speed)")
NUM = re.compile(r"[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?")
ADDR = re.compile(r"0x[0-9a-fA-F]{6,}")
# openmps's log lines: [YYYY-MM-DD HH:MM:SS.mmm Role PID] message
OMLOG = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \w+ +\d+\] ")
PROBES = re.compile(r"openmps: (cuGetProcAddress\w*|cuGetExportTable) returned an error")
# sample: (lines whose numbers are masked, lines left out) -- output that
# changes from run to run on the driver alone.
RULES = {
    # Task sizes drawn from a clock-seeded generator, handed to OpenMP threads in no set order.
    "UnifiedMemoryStreams": (None, r"^Task \[\d+\], thread \[\d+\] executing on"),
    # A table of timings.
    "UnifiedMemoryPerf": (r".", None),
    # Timings without a unit: "memcopy:  0.35", "4 streams:  1.20".
    "simpleStreams": (r"^(memcopy|kernel|non-streamed|\d+ streams):", None),
    # Residuals from reductions whose order the GPU picks (atomics, cuSPARSE).
    "conjugateGradientUM": (r"residual|Error amount", None),
    "conjugateGradientMultiBlockCG": (r"residual|Error amount", None),
    "jacobiCudaGraphs": (r"^GPU error", None),
}


def status(rc):
    if rc is None:
        return "no run"
    if rc == 0:
        return "pass"
    if rc == 2:
        return "waived"
    if rc in (124, 137):
        return "timeout"
    if rc > 128:
        return f"signal {rc - 128}"
    return f"fail {rc}"


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return None


def run(logdir, test, mode, sample, rundir, work):
    """(exit status or None, normalised output lines, openmps log lines) of one run."""
    base = os.path.join(logdir, f"{test}.{mode}")
    rc = read(base + ".rc")
    if rc is None:
        return None, None, []
    mask, drop = RULES.get(sample, (None, None))
    out, log = [], []
    for part in ("out", "err"):
        out.append(f"--- std{part}")
        for line in (read(f"{base}.{part}") or "").splitlines():
            line = line.replace(rundir, "<rundir>").replace(work, "<work>")
            if OMLOG.match(line):
                log.append(OMLOG.sub("", line))
                continue
            if drop and re.search(drop, line):
                continue
            line = ADDR.sub("0x<addr>", line)
            if TIMEISH.search(line) or (mask and re.search(mask, line)):
                # Masked numbers of other widths leave other padding:
                # the spacing of such a line is not compared either.
                line = " ".join(NUM.sub("<n>", line).split())
            out.append(line.rstrip())
    return int(rc.strip() or -1), out, log


def one(test, sample, logdir, rundirs, work, table):
    n1 = run(logdir, test, "native", sample, f"{rundirs}/{test}.native", work)
    n2 = run(logdir, test, "native2", sample, f"{rundirs}/{test}.native2", work)
    om = run(logdir, test, "openmps", sample, f"{rundirs}/{test}.openmps", work)
    s1, s2, so = status(n1[0]), status(n2[0]), status(om[0])
    native = s1 if n2[0] is None or s2 == s1 else f"{s1}/{s2}"
    if n1[1] is None or om[1] is None:
        same = "-"
    elif om[1] == n1[1] or (n2[1] is not None and om[1] == n2[1]):
        same = "same"
    elif n2[1] is not None and n2[1] != n1[1]:
        same = "varies"
    else:
        same = "DIFFERS"
    counted = s1 == "pass" and s2 in ("pass", "no run")
    if not counted:
        verdict = "-"
    elif so != "pass" or same == "DIFFERS":
        verdict = "FAIL"
    else:
        verdict = "ok"
    took = [(read(os.path.join(logdir, f"{test}.{m}.time")) or "?").strip() for m in ("native", "openmps")]
    print(f"{test:32} native {native:10} openmps {so:10} output {same:8} {verdict:4}"
          f"  ({took[0]} s native, {took[1]} s openmps)", flush=True)
    if same in ("DIFFERS", "varies") or verdict == "FAIL":
        diff = list(difflib.unified_diff(n1[1] or [], om[1] or [], "native", "openmps", lineterm="", n=1))
        for line in diff[:40]:
            print("      " + line)
        if len(diff) > 40:
            print(f"      ... {len(diff) - 40} more diff lines")
    # Not the counts of failed lookups: the runtime probes for functions.
    shown = [line for line in om[2] if not PROBES.search(line)]
    for line in shown[:12]:
        print("      openmps log: " + line)
    if len(shown) > 12:
        print(f"      ... {len(shown) - 12} more openmps log lines")
    with open(table, "a") as f:
        f.write("\t".join((test, "ok", native, so, same, verdict)) + "\n")


def summary(table):
    rows = []
    with open(table) as f:
        for line in f:
            rows.append(line.rstrip("\n").split("\t"))
    rows.sort(key=lambda r: r[0].lower())
    head = ("sample", "build", "native", "openmps", "same output", "")
    width = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
    for r in [head] + rows:
        print(" | ".join(c.ljust(w) for c, w in zip(r, width)).rstrip())
    built = sum(1 for r in rows if r[1] == "ok")
    unbuilt = sum(1 for r in rows if r[1] == "no")   # samples that do not build here, natively either
    passed = [r for r in rows if r[5] in ("ok", "FAIL")]
    lost = [r for r in passed if r[5] == "FAIL"]
    ok = built + unbuilt == len(rows) and passed and not lost
    print(("PASS" if ok else "FAIL") + f"  samples: {built} of {len(rows)} built, {len(passed)} passed natively,"
          f" {len(lost)} of them not under openmps or with other output")
    return 0 if ok else 1


if sys.argv[1] == "one":
    one(*sys.argv[2:8])
else:
    sys.exit(summary(sys.argv[2]))
