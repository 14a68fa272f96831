#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Sums up the waits a client logged with OPENMPS_CLIENT_TRACE_WAITS_US.

    waits.py [FILE...]     (standard input without one)
    waits.py selftest

Each line "openmps: wait T us, op N, ..." (src/client/waittrace.c) is one
wait for a reply that lasted at least the threshold. Per kind of wait (the
op, or a staging chunk), it prints how many there were and, as p50 / p90 /
max in µs from the wait's start: how long they took, when the server
handed the answer to the GPU, and, of those that slept, when they asked to
be woken and when they woke; and how many began with the server still
owing the answer, napped, slept, or yielded. Where a slow request's time
goes: a late "handed" is the server's (its threads busy or asleep), an
early one with a late end the GPU's or the wake's (a wait that slept and
woke long after it asked waited for a wake)."""
import re
import sys

LINE = re.compile(r"openmps: wait (\d+) us, (op \d+|a staging chunk), .*?: (.*)$")
PHASE = re.compile(r"(handed to the GPU|flagged|asked|woken) (\d+)")
NAP = re.compile(r"nap (\d+)-(\d+)")
SLEPT = re.compile(r"slept (\d+)")
YIELDS = re.compile(r"(\d+) yields")
BEGAN = re.compile(r"began ([A-Z_?]+)")


def parse(lines):
    """The waits of the lines, as dicts; other lines are skipped."""
    waits = []
    for line in lines:
        m = LINE.search(line)
        if not m:
            continue
        rest = m.group(3)
        w = {"total": int(m.group(1)), "kind": m.group(2), "phases": {}}
        for p in PHASE.finditer(rest):
            w["phases"][p.group(1)] = int(p.group(2))
        b = BEGAN.search(rest)
        w["began"] = b.group(1) if b else "?"
        n = NAP.search(rest)
        w["nap"] = (int(n.group(1)), int(n.group(2))) if n else None
        s = SLEPT.search(rest)
        w["slept"] = int(s.group(1)) if s else 0
        y = YIELDS.search(rest)
        w["yields"] = int(y.group(1)) if y else 0
        waits.append(w)
    return waits


def spread(values):
    """p50 / p90 / max of values, or '-'."""
    if not values:
        return "-"
    v = sorted(values)
    return "%d / %d / %d" % (v[len(v) // 2], v[min(len(v) - 1, len(v) * 9 // 10)], v[-1])


def summary(waits):
    """One table row per kind of wait, most waits first."""
    kinds = {}
    for w in waits:
        kinds.setdefault(w["kind"], []).append(w)
    rows = ["| wait | n | µs p50 / p90 / max | handed to the GPU | asked | woken | "
            "began BUSY | napped | slept | yielded |",
            "|---|---:|---|---|---|---|---:|---:|---:|---:|"]
    for kind, ws in sorted(kinds.items(), key=lambda kv: -len(kv[1])):
        slept = [w for w in ws if w["slept"]]
        rows.append("| %s | %d | %s | %s | %s | %s | %d | %d | %d | %d |" % (
            kind, len(ws), spread([w["total"] for w in ws]),
            spread([w["phases"]["handed to the GPU"] for w in ws if "handed to the GPU" in w["phases"]]),
            spread([w["phases"]["asked"] for w in slept if "asked" in w["phases"]]),
            spread([w["phases"]["woken"] for w in slept if "woken" in w["phases"]]),
            sum(1 for w in ws if w["began"] in ("BUSY", "SLEEPING")),
            sum(1 for w in ws if w["nap"]), len(slept), sum(1 for w in ws if w["yields"])))
    return "\n".join(rows)


def selftest():
    lines = [
        "[2026-11-30 02:10:53.856 Client 19741] openmps: wait 1883 us, op 12, 17 messages since the thread's "
        "last wait, pid 19741 thread 19741: began BUSY, spin advised 0 us; handed to the GPU 92; flagged 800; "
        "asked 800; slept 1; woken 1880; 19 yields",
        "openmps: wait 700 us, op 12, 17 messages since the thread's last wait, pid 1 thread 1: began BUSY, "
        "spin advised 0 us; handed to the GPU 40; nap 41-520",
        "openmps: wait 300 us, a staging chunk, 1 message since the thread's last wait, pid 1 thread 1: "
        "began GPU, spin advised 1000 us",
        "something else entirely",
    ]
    waits = parse(lines)
    assert len(waits) == 3, waits
    assert waits[0]["phases"] == {"handed to the GPU": 92, "flagged": 800, "asked": 800, "woken": 1880}, waits[0]
    assert waits[0]["slept"] == 1 and waits[0]["yields"] == 19 and waits[0]["began"] == "BUSY"
    assert waits[1]["nap"] == (41, 520) and waits[1]["slept"] == 0
    assert waits[2]["kind"] == "a staging chunk" and waits[2]["began"] == "GPU"
    table = summary(waits)
    assert "| op 12 | 2 | 1883 / 1883 / 1883 | 92 / 92 / 92 | 800 / 800 / 800 | 1880 / 1880 / 1880 | 2 | 1 | 1 | 1 |" \
        in table, table
    assert "| a staging chunk | 1 | 300 / 300 / 300 | - | - | - | 0 | 0 | 0 | 0 |" in table, table
    assert spread([5, 1, 3]) == "3 / 5 / 5"
    print("waits.py selftest: passed")


def main(argv):
    if argv[1:] == ["selftest"]:
        selftest()
        return 0
    lines = []
    if len(argv) > 1:
        for name in argv[1:]:
            with open(name, encoding="utf-8", errors="replace") as f:
                lines.extend(f)
    else:
        lines = sys.stdin.readlines()
    waits = parse(lines)
    if not waits:
        print("no traced waits")
        return 0
    print(summary(waits))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
