#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
#
# bench/cpuprofile.py run|report|selftest ...
#
# Where one process's CPU goes while it serves requests, for machines
# without perf. `run` builds one workload of bench/workloads.py in this
# process, serves a few requests to warm up, then REQUESTS more with
# bench/cpuprof.c's sampler on (when it is preloaded), and prints the wall
# time, the process's CPU and the main thread's CPU a request; the samples
# go to OUT. `report` sums samples up by object (libcuda.so.1, libtorch_*,
# python3, ...) and, for the main thread, by symbol (nm's, nearest below
# the address; "?" where an object has no symbols). bench/profile.sh runs
# both natively and under openmps.
#
#   cpuprofile.py run MODEL REQUESTS OUT [--warmup N]
#   cpuprofile.py report SAMPLES [--top N]
#   cpuprofile.py selftest

import argparse
import bisect
import collections
import ctypes
import os
import resource
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def cmd_run(args):
    import workloads
    opts = argparse.Namespace(device="cuda", seed=1234, threads=1)
    w = workloads.make(args.model, opts, 0)
    check, why = w.prepare()
    if check != "ok":
        print(f"{args.model}: the first answer is {check}: {why}")
        return 1
    for k in range(args.warmup):
        w.request(k)
    lib = ctypes.CDLL(None)
    prof = hasattr(lib, "cpuprof_start")
    if prof:
        lib.cpuprof_start()
    t0, r0, m0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF), time.thread_time()
    for k in range(args.requests):
        w.request(k)
    t1, r1, m1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF), time.thread_time()
    if prof:
        lib.cpuprof_stop()
        lib.cpuprof_dump.argtypes = [ctypes.c_char_p]
        if lib.cpuprof_dump(args.out.encode()) != 0:
            print(f"could not write {args.out}")
    n = args.requests
    cpu = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
    print(f"{args.model}: {(t1 - t0) * 1e3 / n:.2f} ms a request, process CPU {cpu * 1e3 / n:.2f} ms "
          f"(system {(r1.ru_stime - r0.ru_stime) * 1e3 / n:.2f}), main thread {(m1 - m0) * 1e3 / n:.2f} ms"
          + ("" if prof else " (no sampler preloaded)"))
    return 0


def symbols(path, cache={}):
    """[(offset, name)] of an object, sorted (nm's defined text symbols)."""
    if path not in cache:
        table = []
        for opts in (["--defined-only"], ["-D", "--defined-only"]):
            try:
                out = subprocess.run(["nm"] + opts + [path], capture_output=True, text=True).stdout
            except OSError:
                out = ""
            for line in out.splitlines():
                p = line.split()
                if len(p) >= 3 and p[1] in "tTwW":
                    try:
                        table.append((int(p[0], 16), p[2]))
                    except ValueError:
                        pass
            if table:
                break
        table.sort()
        cache[path] = table
    return cache[path]


def summarise(lines, top=25, lookup=symbols, threads=False):
    """The report's text from the sampler's lines ("MAIN FILE OFFSET
    [THREAD]"). With threads, symbols count every thread's samples and a
    table gives each thread name's share by object."""
    rows = [(l.split() + ["?", "?", "0"])[:6] for l in lines
            if len(l.split()) in (3, 4, 6) and not l.startswith("#")]
    ioctls = [l.split()[1:] for l in lines if l.startswith("#ioctl ") and len(l.split()) == 3]
    total = len(rows)
    if not total:
        return "no samples\n"
    by_obj, by_obj_main, by_sym = collections.Counter(), collections.Counter(), collections.Counter()
    by_thread, by_thread_obj = collections.Counter(), collections.Counter()
    by_caller = collections.Counter()

    def sym(obj, off):
        if obj == "?":
            return "?"
        t = lookup(obj)
        i = bisect.bisect_right(t, (int(off, 16), "\uffff")) - 1
        return t[i][1] if i >= 0 else "?"

    for main, obj, off, thread, cobj, coff in rows:
        if threads and cobj != "?" and os.path.basename(cobj) != os.path.basename(obj):
            by_caller[(os.path.basename(obj), sym(obj, off), os.path.basename(cobj), sym(cobj, coff))] += 1
        by_obj[obj] += 1
        by_thread[thread] += 1
        by_thread_obj[(thread, os.path.basename(obj))] += 1
        if main == "1":
            by_obj_main[obj] += 1
        if main == "1" or threads:
            by_sym[(os.path.basename(obj), sym(obj, off))] += 1
    out = [f"{total} samples, {sum(by_obj_main.values())} in the main thread", "", "% all  % main  object"]
    for obj, n in by_obj.most_common(top):
        out.append(f"{100 * n / total:5.1f}  {100 * by_obj_main[obj] / total:6.1f}  {os.path.basename(obj)}")
    if threads:
        out += ["", "% all  thread: its objects (% all)"]
        for thread, n in by_thread.most_common(top):
            objs = sorted(((m, o) for (t, o), m in by_thread_obj.items() if t == thread), reverse=True)[:4]
            out.append(f"{100 * n / total:5.1f}  {thread}: "
                       + ", ".join(f"{o} {100 * m / total:.1f}" for m, o in objs))
    out += ["", "% all  " + ("every thread" if threads else "main thread") + ": object, symbol"]
    for (obj, name), n in by_sym.most_common(top):
        out.append(f"{100 * n / total:5.1f}  {obj} {name[:90]}")
    if ioctls:
        out += ["", "ioctl calls by request: " + ", ".join(f"{r} {n}" for r, n in
                                                          sorted(ioctls, key=lambda x: -int(x[1])))]
    if by_caller:
        out += ["", "% all  called from another object (the word at the stack pointer: right for leaf functions)"]
        for (obj, name, cobj, cname), n in by_caller.most_common(top):
            out.append(f"{100 * n / total:5.1f}  {obj} {name[:40]} <- {cobj} {cname[:50]}")
    return "\n".join(out) + "\n"


def cmd_report(args):
    with open(args.samples, encoding="utf-8", errors="replace") as f:
        sys.stdout.write(summarise(f.readlines(), args.top, threads=args.threads))
    return 0


def cmd_selftest(_args):
    fails = 0

    def check(what, ok):
        nonlocal fails
        print(("PASS  " if ok else "FAIL  ") + what)
        fails += not ok

    table = {"/lib/a.so": [(0x100, "alpha"), (0x200, "beta")]}
    lines = ["1 /lib/a.so 150", "1 /lib/a.so 250", "1 /lib/a.so 260", "1 /lib/a.so 10", "0 /lib/a.so 150",
             "1 ? 7f00", "x"]
    text = summarise(lines, lookup=lambda p: table.get(p, []))
    check("samples counted, the main thread's apart", text.startswith("6 samples, 5 in the main thread"))
    check("by object", " 83.3    66.7  a.so" in text and " 16.7    16.7  ?" in text)
    check("by symbol, nearest below", " 33.3  a.so beta" in text and " 16.7  a.so alpha" in text)
    check("below the first symbol, or in no object: ?", " 16.7  a.so ?" in text and " 16.7  ? ?" in text)
    check("no samples", summarise([]) == "no samples\n")
    lines = ["1 /lib/a.so 150 main", "0 /lib/a.so 250 worker", "0 ? 10 worker", "0 /lib/a.so 260 worker"]
    text = summarise(lines, lookup=lambda p: table.get(p, []), threads=True)
    check("threads: each name's share by object", " 75.0  worker: a.so 50.0, ? 25.0" in text
          and " 25.0  main: a.so 25.0" in text)
    check("threads: symbols of every thread", " 50.0  a.so beta" in text and " 25.0  a.so alpha" in text)
    lines = ["0 /lib/a.so 150 w /bin/p 20", "0 /lib/a.so 150 w /lib/a.so 250", "0 /bin/p 10 w ? 0"]
    table["/bin/p"] = [(0x0, "main"), (0x18, "caller")]
    text = summarise(lines, lookup=lambda p: table.get(p, []), threads=True)
    check("callers in another object", " 33.3  a.so alpha <- p caller" in text and "<- a.so" not in text)
    text = summarise(["1 /lib/a.so 150", "#ioctl 0x2a 7", "#ioctl 0x4e 9"], lookup=lambda p: table.get(p, []))
    check("ioctl counts, most first", "1 samples," in text and "ioctl calls by request: 0x4e 9, 0x2a 7" in text)
    print(f"profile selftest: {'PASS' if not fails else 'FAIL'}")
    return 1 if fails else 0


def main():
    p = argparse.ArgumentParser(description="one process's CPU, sampled")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("model")
    r.add_argument("requests", type=int)
    r.add_argument("out")
    r.add_argument("--warmup", type=int, default=5)
    r.set_defaults(fn=cmd_run)
    s = sub.add_parser("report")
    s.add_argument("samples")
    s.add_argument("--top", type=int, default=25)
    s.add_argument("--threads", action="store_true", help="every thread's symbols, and a table by thread name")
    s.set_defaults(fn=cmd_report)
    sub.add_parser("selftest").set_defaults(fn=cmd_selftest)
    args = p.parse_args()
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
