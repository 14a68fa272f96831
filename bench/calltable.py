#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
#
# bench/calltable.py: what a program asks of the driver per request, and how
# openmps answers each call, from the files bench/calltrace.sh collects:
#
#   native  two counts of the same program natively under cudatrace (a
#           pass-through libcuda.so.1 that counts every call), one with R1
#           requests after the warm-up and one with R2: the difference over
#           R2 - R1 is what one request costs, set-up excluded;
#   openmps the program under openmps with OPENMPS_CALL_STATS, whose client
#           writes (calls, messages, round trips, µs waited for replies) per
#           driver function right
#           after the warm-up and after R requests (openmps_call_stats_mark).
#
# For each function: calls per request natively and under openmps, the
# messages to the server, the round trips and the µs waited per request, and how openmps
# answers it: "client" (no message), "sent" (messages, none waited for) or
# "round trip". Names are compared without their version suffixes (cudart
# asks cuGetProcAddress for cuMemcpyAsync and gets cuMemcpyAsync_v2 ...).
#
#   calltable.py WORKLOAD NATIVE_R1_FILE NATIVE_R2_FILE R1 R2 OM_WARM OM_DONE R [--md FILE]
#   calltable.py window PREFIX
#   calltable.py selftest
#
# "window" reads the tables that bench/infer.py's processes write under
# OPENMPS_CALL_STATS=PREFIX at the ends of their timed window
# (PREFIX.<pid>.warm and PREFIX.<pid>.done-<requests>) and prints, per
# driver function, what one request of the window cost on average over the
# processes: calls, messages, round trips and µs waited for replies.
#
# Prints a markdown section (appended to FILE with --md) and one summary line.

import re
import sys


def base_name(name):
    """cuMemcpyAsync@4000, cuMemcpyAsync_v2, cuMemcpyAsync_v2_ptsz -> cuMemcpyAsync."""
    name = name.split("@", 1)[0]
    name = re.sub(r"_(ptsz|ptds)$", "", name)
    return re.sub(r"_v\d+$", "", name)


def read_cudatrace(path):
    """{function: calls} from a cudatrace report ("%10lu name" lines)."""
    out = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = re.match(r"\s*(\d+) (\S+)$", line)
            if m:
                n = base_name(m.group(2))
                out[n] = out.get(n, 0) + int(m.group(1))
    return out


# The key under which read_stats keeps a table's naps through GPU waits:
# [naps, overslept, 0, µs napped] (newer tables only).
NAPS = "(naps)"


def read_stats(path):
    """{function: [calls, messages, round_trips, wait_us]} and the totals
    from an OPENMPS_CALL_STATS table (rows "calls messages round_trips
    wait_us name"; older tables have no wait_us), with NAPS when the
    table counts naps."""
    out, total = {}, [0, 0]
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = re.match(r"(\d+) (\d+) (\d+) (?:(\d+) )?(\D.*)$", line.strip())
            if m:
                n = m.group(5) if m.group(5).startswith("(") else base_name(m.group(5))
                row = out.setdefault(n, [0, 0, 0, 0])
                for i in range(4):
                    row[i] += int(m.group(i + 1) or 0)
            m = re.match(r"# total: (\d+) messages, (\d+) round trips", line)
            if m:
                total = [int(m.group(1)), int(m.group(2))]
            m = re.match(r"# naps: (\d+), (\d+) overslept, (\d+) us", line)
            if m:
                out[NAPS] = [int(m.group(1)), int(m.group(2)), 0, int(m.group(3))]
    return out, total


def per_request(a, b, n):
    return (b - a) / n if n > 0 else 0.0


def how(msgs, trips):
    if trips > 0:
        return "round trip"
    if msgs > 0:
        return "sent"
    return "client"


def fmt(v):
    if v == 0:
        return "0"
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.1f}" if abs(v) >= 1 else f"{v:.2f}"


def table(workload, nat1, nat2, r1, r2, om_warm, om_done, r):
    (w, wt), (d, dt) = om_warm, om_done
    names = (set(nat2) | set(nat1) | set(d)) - {NAPS}
    rows = []
    for n in names:
        nat = per_request(nat1.get(n, 0), nat2.get(n, 0), r2 - r1)
        a, b = w.get(n, [0, 0, 0, 0]), d.get(n, [0, 0, 0, 0])
        calls, msgs, trips, waited = (per_request(a[i], b[i], r) for i in range(4))
        if nat < 0.005 and calls < 0.005 and msgs < 0.005:
            continue
        rows.append((n, nat, calls, msgs, trips, waited))
    rows.sort(key=lambda x: (-max(x[1], x[2]), x[0]))
    nat_total = sum(x[1] for x in rows if not x[0].startswith("("))
    msgs_total = per_request(wt[0], dt[0], r)
    trips_total = per_request(wt[1], dt[1], r)
    wait_total = sum(x[5] for x in rows)
    lines = [f"### {workload}", "",
             f"Per request: {fmt(nat_total)} driver calls natively; under openmps {fmt(msgs_total)} messages to the "
             f"server, {fmt(trips_total)} of them round trips, {fmt(wait_total)} µs waited for replies.", "",
             "| function | native calls | openmps calls | messages | round trips | µs waited | openmps answers |",
             "|---|---:|---:|---:|---:|---:|---|"]
    for n, nat, calls, msgs, trips, waited in rows:
        lines.append(f"| {n} | {fmt(nat)} | {fmt(calls)} | {fmt(msgs)} | {fmt(trips)} | {fmt(waited)} "
                     f"| {how(msgs, trips)} |")
    summary = (f"{workload}: {fmt(nat_total)} driver calls/request natively; openmps {fmt(msgs_total)} "
               f"messages/request, {fmt(trips_total)} round trips/request, {fmt(wait_total)} µs waited/request")
    return "\n".join(lines) + "\n", summary, rows


def window_sums(prefix):
    """{function: [calls, messages, round trips, µs waited]} for one request
    of an infer.py window (see the top of the file), averaged over the
    processes, and how many processes were read."""
    import glob
    sums, procs = {}, 0
    for warm in sorted(glob.glob(glob.escape(prefix) + ".*.warm")):
        done = glob.glob(glob.escape(warm[:-len("warm")]) + "done-*")
        if len(done) != 1:
            continue
        k = int(done[0].rsplit("-", 1)[1])
        if k <= 0:
            continue
        (a, _), (b, _) = read_stats(warm), read_stats(done[0])
        for n in set(a) | set(b):
            x, y = a.get(n, [0, 0, 0, 0]), b.get(n, [0, 0, 0, 0])
            row = sums.setdefault(n, [0.0, 0.0, 0.0, 0.0])
            for i in range(4):
                row[i] += (y[i] - x[i]) / k
        procs += 1
    return {n: [v / procs for v in r] for n, r in sums.items()} if procs else {}, procs


def rows_of(sums):
    """window_sums' functions as rows (function, calls, messages, round
    trips, µs waited), most waited first."""
    return sorted(((n, *r) for n, r in sums.items() if n != NAPS and any(r)),
                  key=lambda x: (-x[4], -x[2], x[0]))


def naps_of(sums):
    """window_sums' naps through GPU waits a request: (naps, overslept, µs
    napped), or None when the tables do not count them."""
    n = sums.get(NAPS)
    return (n[0], n[1], n[3]) if n else None


def window_rows(prefix):
    """Per-request averages over the processes of one infer.py window:
    rows_of, and the processes read."""
    sums, procs = window_sums(prefix)
    return rows_of(sums), procs


def window(prefix):
    """window_rows as a table: the text, and the processes read."""
    rows, procs = window_rows(prefix)
    lines = [f"Per request, averaged over {procs} processes: "
             f"{fmt(sum(x[2] for x in rows))} messages, {fmt(sum(x[3] for x in rows))} round trips, "
             f"{fmt(sum(x[4] for x in rows))} µs waited.", "",
             "| function | calls | messages | round trips | µs waited |", "|---|---:|---:|---:|---:|"]
    for n, calls, msgs, trips, waited in rows:
        lines.append(f"| {n} | {fmt(calls)} | {fmt(msgs)} | {fmt(trips)} | {fmt(waited)} |")
    return "\n".join(lines) + "\n", procs


def selftest():
    import os
    import tempfile
    fails = []
    d = tempfile.mkdtemp()

    def w(name, text):
        p = os.path.join(d, name)
        with open(p, "w", encoding="utf-8") as f:
            f.write(text)
        return p
    n1 = w("n1", "export table 6bd5fb6c -> 0, slot0=1\n        10 cuLaunchKernel\n       100 cuCtxGetDevice\n"
                 "         5 cuKernelGetAttribute@12000\n")
    n2 = w("n2", "        30 cuLaunchKernel\n       300 cuCtxGetDevice\n        45 cuKernelGetAttribute@12000\n"
                 "         3 cuMemcpyDtoHAsync_v2\n")
    s1 = w("s1", "# x\n10 10 0 cuLaunchKernel\n100 0 0 cuCtxGetDevice\n5 1 1 cuKernelGetAttribute\n"
                 "0 2 0 (outside driver calls)\n# total: 13 messages, 1 round trips\n")
    # s1 is a table from before waits were counted; s2 counts them.
    s2 = w("s2", "# x\n30 30 0 0 cuLaunchKernel\n300 0 0 0 cuCtxGetDevice\n45 1 1 9 cuKernelGetAttribute\n"
                 "3 3 3 120 cuMemcpyDtoHAsync_v2\n0 2 0 0 (outside driver calls)\n"
                 "# total: 36 messages, 4 round trips\n")
    text, summary, rows = table("t", read_cudatrace(n1), read_cudatrace(n2), 10, 30, read_stats(s1),
                                read_stats(s2), 20)
    got = {r[0]: r[1:] for r in rows}
    for name, cond in (
            ("names lose their versions", base_name("cuMemcpyAsync_v2_ptsz") == "cuMemcpyAsync"
             and base_name("cuGetProcAddress@12000") == "cuGetProcAddress"),
            ("native per request", got["cuLaunchKernel"][0] == 1.0 and got["cuCtxGetDevice"][0] == 10.0
             and got["cuKernelGetAttribute"][0] == 2.0),
            ("queries answered in the client", "| cuKernelGetAttribute | 2.0 | 2.0 | 0 | 0 | 0.45 | client |" in text),
            ("launches sent", "| cuLaunchKernel | 1.0 | 1.0 | 1.0 | 0 | 0 | sent |" in text),
            ("copies round trips", "| cuMemcpyDtoHAsync | 0.15 | 0.15 | 0.15 | 0.15 | 6.0 | round trip |" in text),
            ("totals", "13.2 driver calls/request natively; openmps 1.1 messages/request, 0.15 round trips"
             "/request, 6.5 µs waited" in summary),
    ):
        print(("PASS  " if cond else "FAIL  ") + name)
        if not cond:
            fails.append(name)
    w("p.7.warm", "# x\n10 10 0 0 cuLaunchKernel\n2 2 2 50 cuStreamSynchronize\n")
    w("p.7.done-4", "# x\n50 50 0 0 cuLaunchKernel\n6 6 6 130 cuStreamSynchronize\n")
    w("p.8.warm", "# x\n0 0 0 0 cuLaunchKernel\n# naps: 1, 0 overslept, 100 us\n")
    w("p.8.done-2", "# x\n20 20 0 0 cuLaunchKernel\n2 2 2 60 cuStreamSynchronize\n# naps: 5, 1 overslept, 900 us\n")
    wtext, procs = window(os.path.join(d, "p"))
    for name, cond in (
            ("window: processes", procs == 2),
            ("window: per request, averaged", "| cuLaunchKernel | 10.0 | 10.0 | 0 | 0 |" in wtext
             and "| cuStreamSynchronize | 1.0 | 1.0 | 1.0 | 25.0 |" in wtext),
            ("window: totals", "11.0 messages, 1.0 round trips, 25.0 µs waited" in wtext),
            ("window: naps are no function's", "(naps)" not in wtext),
            ("window: naps a request", naps_of(window_sums(os.path.join(d, "p"))[0]) == (1.0, 0.25, 200.0)),
            ("window: no naps counted", naps_of(window_sums(os.path.join(d, "none"))[0]) is None),
    ):
        print(("PASS  " if cond else "FAIL  ") + name)
        if not cond:
            fails.append(name)
    if fails:
        print(text)
        print(wtext)
    print("calltable selftest: " + ("PASS" if not fails else "FAIL"))
    return 1 if fails else 0


def main(argv):
    if len(argv) == 2 and argv[1] == "selftest":
        return selftest()
    if len(argv) == 3 and argv[1] == "window":
        text, procs = window(argv[2])
        sys.stdout.write(text)
        return 0 if procs else 1
    md = None
    if "--md" in argv:
        i = argv.index("--md")
        md = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    if len(argv) != 9:
        print("usage: calltable.py WORKLOAD NATIVE_R1 NATIVE_R2 R1 R2 OM_WARM OM_DONE R [--md FILE]",
              file=sys.stderr)
        return 2
    wl, n1, n2, r1, r2, ow, od, r = argv[1:]
    text, summary, _ = table(wl, read_cudatrace(n1), read_cudatrace(n2), int(r1), int(r2), read_stats(ow),
                             read_stats(od), int(r))
    if md:
        with open(md, "a", encoding="utf-8") as f:
            f.write(text + "\n")
    else:
        sys.stdout.write(text)
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
