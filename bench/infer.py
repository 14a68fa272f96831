#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
#
# bench/infer.py run|table|selftest ...
#
# The inference benchmark's worker and its report. `run` measures what an
# interactive inference server gets from a shared GPU: N processes, each
# answering batch-1 requests with a small PyTorch model (a CNN or a
# transformer encoder), each request a fresh host input copied to the GPU,
# one forward pass, and the result copied back to the host. It reports the
# requests per second of all N together (each process's requests over the
# time they took, summed: no rounding to whole requests, which for a
# 32-token decode would be a seventh of the figure) and the p50/p99 latency
# of one request, as one JSON line per N on stdout (progress goes to stderr).
#
# How: the launcher imports torch once and forks the N children before any
# CUDA call (the parent never touches CUDA, so every child makes its own
# context, or its own MPS/openmps client). Each child builds the model from
# a fixed seed, runs its first input on the CPU for reference, moves the
# model to the GPU, checks that the GPU's first answer matches the CPU's,
# warms up, and says it is ready. Once every child is ready (or has failed)
# the launcher gives one start time and one end time to all of them, so the
# N run the same window; each records the latency of every request that
# ended inside it and sends the count and the latencies back through a
# pipe. A child that cannot start (NVIDIA MPS refuses clients past its
# limit) is reported as refused, a mismatch with the CPU makes the cell
# "wrong", never a number.
#
# `table` turns those JSON lines (and the server-CPU lines bench/infer.sh
# writes) into the markdown tables and a TSV; `selftest` checks the parts
# that need no GPU and no torch (statistics, tables, and the fork/start/
# report machinery with a pure-Python stand-in model, --model fake).
#
#   infer.py run --mode openmps --model cnn --n 1,8,16 [--window 2] [--warmup 50]
#                [--device cuda|cpu] [--budget-s S] [--dry-run]
#   infer.py table RESULTS... [--md FILE] [--tsv FILE]
#   infer.py selftest
#
# Exit status: 0 when it ran (whatever the cells say), 2 for bad arguments,
# 77 when torch is needed and cannot be imported.

import argparse
import array
import heapq
import io
import json
import math
import os
import re
import resource
import sys
import subprocess
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workloads  # noqa: E402  (bench/workloads.py: the programs measured)

MODES = ("native", "mps", "openmps")
MODE_TITLE = {"native": "native", "mps": "NVIDIA MPS", "openmps": "openmps"}
MODELS = workloads.NAMES + ("fake",)
INPUT_POOL = workloads.INPUT_POOL   # distinct host inputs a child cycles through

# Errors that mean "no room for another client" rather than a failure:
# NVIDIA MPS answers its 49th client with cudaErrorDevicesUnavailable (on a
# Hopper, CUDA 12/13), which PyTorch reports as "all CUDA-capable devices
# are busy or unavailable"; newer drivers may say MpsMaxClientsReached.
REFUSED_RE = re.compile(r"busy or unavailable|devices?[ _]?unavailable|DEVICE_UNAVAILABLE"
                        r"|MaxClientsReached|MAX_CLIENTS_REACHED|maximum number of clients", re.I)


# ---------------------------------------------------------------------------
# Statistics and one cell's verdict (no torch)

def percentile(sorted_values, q):
    """Nearest-rank percentile (q in [0, 1]) of an ascending sequence; None if empty."""
    n = len(sorted_values)
    if n == 0:
        return None
    k = max(0, min(n - 1, math.ceil(q * n) - 1))
    return sorted_values[k]


def is_refusal(text):
    return bool(text) and REFUSED_RE.search(text) is not None


def tail_where(children):
    """Where the slowest 1% of a cell's requests lie: how many processes
    hold them, the share that came in the first tenth of their process's
    window (a process still settling in), and the four slowest as
    [process, request index, ms]."""
    tagged = [(t, i, k, len(c["lat_ns"])) for i, c in enumerate(children) if c.get("state") == "done"
              for k, t in enumerate(c["lat_ns"])]
    if not tagged:
        return {}
    top = heapq.nlargest(max(1, len(tagged) // 100), tagged)
    return {"tail_procs": len({i for _t, i, _k, _m in top}),
            "tail_early": round(sum(1 for _t, _i, k, m in top if k < max(1, m // 10)) / len(top), 2),
            "tail_worst": [[i, k, round(t / 1e6, 2)] for t, i, k, _m in top[:4]]}


def summarise(mode, model, n, window_s, children, extra=None):
    """One cell's record from its children's outcomes.

    children: one dict per child: {"state": "done"|"error", "count": int,
    "lat_ns": array of ns, "check": "ok"|"wrong", "error": text}.
    A wrong answer outranks a failure, which outranks a refusal: the cell is
    a number only when every child ran and agreed with the CPU."""
    lats = []
    counts = []
    rates = []
    child_p99 = []
    spans, off_gpu = [], []
    parts = []                  # INFER_GPU_SPANS with marks: each part's spans
    ru = {}
    wrong = refused = failed = 0
    first_error = first_wrong = ""
    for c in children:
        if c.get("check") == "wrong":
            wrong += 1
            first_wrong = first_wrong or c.get("error", "")
        if c.get("state") == "done":
            counts.append(c["count"])
            lats.extend(c["lat_ns"])
            busy_ns = sum(c["lat_ns"])
            rates.append(c["count"] * 1e9 / busy_ns if busy_ns > 0 else 0.0)
            if len(c["lat_ns"]):
                child_p99.append(percentile(sorted(c["lat_ns"]), 0.99))
            g = c.get("gpu_ns") or ()
            if len(g) == len(c["lat_ns"]):
                spans.extend(g)
                off_gpu.extend(t - x for t, x in zip(c["lat_ns"], g))
                sg = c.get("seg_ns") or ()
                if len(g) and len(sg) % len(g) == 0 and len(sg) > len(g):
                    k = len(sg) // len(g)
                    if not parts:
                        parts.extend([] for _ in range(k))
                    if len(parts) == k:
                        for j in range(k):
                            parts[j].extend(sg[j::k])
            for k, v in (c.get("ru") or {}).items():
                ru[k] = ru.get(k, 0) + v
        elif is_refusal(c.get("error", "")):
            refused += 1
            first_error = first_error or c.get("error", "")
        else:
            failed += 1
            first_error = first_error or c.get("error", "")
    lats.sort()
    total = sum(counts)
    rec = {
        "kind": "infer", "mode": mode, "model": model, "n": n,
        "status": "ok", "rps": None, "p50_us": None, "p99_us": None,
        "requests": total, "window_s": window_s,
        "ran": len(counts), "failed": failed, "refused": refused, "wrong": wrong,
        "error": "",
    }
    if counts and window_s > 0 and total:
        # Each process asks for its next request as soon as one ends (a
        # closed loop), so its rate is its requests over the time they took;
        # the cell's is the sum. Counting whole requests inside the window
        # instead would be off by up to one request a process: 14% for a
        # 32-token decode (about 7 of them in a 2 s window).
        rec["rps"] = round(sum(rates), 1)
        rec["rps_window"] = round(total / window_s, 1)
        rec["min_child_rps"] = round(min(rates), 1)
        rec["max_child_rps"] = round(max(rates), 1)
    if ru and total:
        # The clients' own CPU (all their threads) and how often the
        # scheduler took a CPU from one that could still run.
        rec["client_us_per_req"] = round(ru["cpu_s"] * 1e6 / total, 1)
        rec["client_sys_us_per_req"] = round(ru["sys_s"] * 1e6 / total, 1)
        rec["preempted_per_req"] = round(ru["ivcsw"] / total, 3)
        rec["slept_per_req"] = round(ru["vcsw"] / total, 3)
    if lats:
        rec["p50_us"] = round(percentile(lats, 0.50) / 1000, 1)
        rec["p99_us"] = round(percentile(lats, 0.99) / 1000, 1)
        # Where the tail lies: spread evenly (every process's p99 near the
        # cell's) or on a few processes (an unfair share).
        rec["p90_us"] = round(percentile(lats, 0.90) / 1000, 1)
        rec["p999_us"] = round(percentile(lats, 0.999) / 1000, 1)
        rec["max_us"] = round(lats[-1] / 1000, 1)
        rec["child_p99_us"] = [round(min(child_p99) / 1000, 1), round(max(child_p99) / 1000, 1)]
        rec.update(tail_where(children))
    if spans and len(spans) == len(lats):
        # INFER_GPU_SPANS: the GPU's part of each request, and the rest.
        spans.sort()
        off_gpu.sort()
        rec["gpu_span_us"] = [round(percentile(spans, q) / 1000, 1) for q in (0.5, 0.9, 0.99)]
        rec["off_gpu_us"] = [round(percentile(off_gpu, q) / 1000, 1) for q in (0.5, 0.9, 0.99)]
        if parts and all(len(p) == len(lats) for p in parts):
            rec["gpu_parts_us"] = [[round(percentile(sorted(p), q) / 1000, 1) for q in (0.5, 0.9, 0.99)]
                                   for p in parts]
            names = workloads.MARK_NAMES.get(model, ())
            if len(names) == len(parts):
                rec["gpu_part_names"] = list(names)
    if wrong:
        rec.update(status="wrong", error=first_wrong)
    elif failed:
        rec.update(status="fail", error=first_error)
    elif refused:
        rec.update(status="refused", error=first_error)
    elif total == 0:
        rec.update(status="fail", error="no request ended inside the window")
    if rec["status"] != "ok":
        # Never a number beside a verdict: the figures stay in the log only.
        rec["partial"] = {"rps": rec["rps"], "p50_us": rec["p50_us"], "p99_us": rec["p99_us"]}
        rec.update(rps=None, p50_us=None, p99_us=None)
    if extra:
        rec.update(extra)
    return rec


# ---------------------------------------------------------------------------
# Workloads. Each child calls prepare() (build, reference, move to the
# device, check the first answer), then request() in its loop.

class FakeWorkload:
    """A pure-Python stand-in for a model: burns fake_us of CPU per request.
    It exercises the fork/start/report machinery where torch is absent, and
    can be told to fail, refuse, answer wrong or die, to test the verdicts."""

    def __init__(self, args, idx):
        self.args, self.idx = args, idx

    def _answer(self, x):
        end = time.perf_counter_ns() + int(self.args.fake_us * 1000)
        acc = x
        while time.perf_counter_ns() < end:
            acc = (acc * 1103515245 + 12345) & 0x7fffffff
        return x * 3 + 1

    def prepare(self):
        a, i = self.args, self.idx
        if i < a.fake_refuse:
            raise RuntimeError("CUDA error: all CUDA-capable devices are busy or unavailable")
        if i < a.fake_refuse + a.fake_fail:
            raise RuntimeError("fake failure at init")
        if i < a.fake_refuse + a.fake_fail + a.fake_die:
            os._exit(9)          # dies without a word, as a crashed child would
        self.inputs = [self.idx * 100 + k for k in range(INPUT_POOL)]
        ref = self.inputs[0] * 3 + 1
        got = self.request(0)
        if i >= a.cur_n - a.fake_wrong:
            got += 1
        return ("ok", "") if got == ref else ("wrong", f"child {i}: got {got}, want {ref}")

    def request(self, k):
        return self._answer(self.inputs[k % INPUT_POOL])


# ---------------------------------------------------------------------------
# The child

def die_with_parent(parent):
    """A child whose launcher is gone (ended by a timeout, say) must not
    live on holding a context: the kernel sends it SIGKILL then."""
    try:
        import ctypes
        import signal
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:      # it went before prctl took effect
        os._exit(1)


def child_main(idx, args, conn, go, times, parent):
    """Runs in the forked child; never returns into the launcher's code
    (multiprocessing ends the process when this returns)."""
    die_with_parent(parent)
    stage = "start"
    try:
        if args.model == "fake":
            wl = FakeWorkload(args, idx)
            ctx = _null_context
        else:
            wl = workloads.make(args.model, args, idx)
            ctx = wl.context
        t0 = time.perf_counter()
        stage = "init"
        check, detail = wl.prepare()
        stage = "warm-up"
        with ctx():
            for k in range(args.warmup):
                wl.request(k)
        maps = mapped_libcuda()
        conn.send(("ready", {"init_s": time.perf_counter() - t0, "check": check, "error": detail,
                             "libcuda": maps, "mode": openmps_mode(maps),
                             "answer": getattr(wl, "answer", None)}))
    except BaseException as e:      # noqa: BLE001 - every failure is reported, none kills the launcher
        text = f"{type(e).__name__}: {e}".strip().replace("\n", " ")
        try:
            conn.send(("error", stage, text[:500], traceback.format_exc()[-2000:]))
        finally:
            conn.close()
        return
    if not go.wait(args.init_timeout + 60):
        conn.send(("error", "start", "the launcher never said go"))
        return
    start_ns, end_ns = times[0], times[1]
    lat = array.array("q")
    try:
        # Everyone starts at the same instant: the launcher set it a little
        # ahead so that the last child to wake up is not late. (A sleep, not
        # a spin: 64 spinning children would delay the wake-up of the rest.)
        wait_ns = start_ns - time.perf_counter_ns()
        if wait_ns > 0:
            time.sleep(wait_ns / 1e9)
        k = 0
        # Under OPENMPS_CALL_STATS the client library's tables at the
        # window's ends: what the window's requests sent and waited for.
        mark = call_stats_mark() if os.environ.get("OPENMPS_CALL_STATS") else None
        if mark:
            mark(b"warm")
        spans = array.array("q")
        segs = array.array("q")
        timer = GpuSpans(args.model, getattr(wl, "MARKS", ())) if os.environ.get("INFER_GPU_SPANS") == "1" else None
        if timer and timer.marks:
            wl.mark = timer.mark
        ru0 = resource.getrusage(resource.RUSAGE_SELF)
        with ctx():
            while True:
                t0 = time.perf_counter_ns()
                if t0 >= end_ns:
                    break
                if timer:
                    timer.begin()
                wl.request(k)
                parts = timer.end_ns() if timer else ()
                k += 1
                t1 = time.perf_counter_ns()
                if t1 > end_ns:   # ended outside the window: not counted
                    break
                lat.append(t1 - t0)
                if timer:
                    spans.append(sum(parts))
                    segs.extend(parts)
        ru1 = resource.getrusage(resource.RUSAGE_SELF)
        if mark:
            mark(f"done-{k}".encode())
        conn.send(("result", len(lat), lat.tobytes(),
                   {"cpu_s": ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime,
                    "sys_s": ru1.ru_stime - ru0.ru_stime,
                    "ivcsw": ru1.ru_nivcsw - ru0.ru_nivcsw, "vcsw": ru1.ru_nvcsw - ru0.ru_nvcsw},
                   spans.tobytes(), segs.tobytes()))
    except BaseException as e:      # noqa: BLE001
        conn.send(("error", "run", f"{type(e).__name__}: {e}"[:500]))
    finally:
        conn.close()


class GpuSpans:
    """INFER_GPU_SPANS=1: each request's span on the GPU, from an event
    recorded on the current stream before it to one recorded after it (the
    framework's own events: CuPy's for the CuPy workloads, PyTorch's for the
    rest). Against the request's latency it tells time on the GPU (queued
    behind other processes' kernels included) from time on the way there
    and back. Costs two event records and an elapsed-time query a request.

    A workload's MARKS (bench/workloads.py) add an event at each: the span
    is then cut into parts, the last from the last mark to the closing
    event. An event recorded just after a synchronisation runs when the
    GPU gets the program's next command, so the part that ends there is
    the copy, the program's wait and the way back to the GPU: time that
    counts as "on the GPU" although the GPU is idle for that stream."""

    def __init__(self, model, marks=()):
        self.marks = tuple(marks)
        self.lib = None
        if model in ("gemmfft", "rawkernel"):
            import cupy
            self.lib, self.make = "cupy", lambda: cupy.cuda.Event()
            self.elapsed_ms = cupy.cuda.get_elapsed_time
        else:
            import torch
            self.lib, self.make = "torch", lambda: torch.cuda.Event(enable_timing=True)
            self.elapsed_ms = lambda a, b: a.elapsed_time(b)
        self.a, self.b = self.make(), self.make()
        self.m = [self.make() for _ in self.marks]
        self.chain = [self.a] + self.m + [self.b]

    def begin(self):
        self.a.record()

    def mark(self, i):
        self.m[i].record()

    def end_ns(self):
        """The request's parts in ns (one when there are no marks)."""
        self.b.record()
        self.b.synchronize()
        return [int(self.elapsed_ms(x, y) * 1e6) for x, y in zip(self.chain, self.chain[1:])]


def mapped_libcuda():
    """The libcuda files this process has mapped: which driver it really
    uses (openmps's client library, or the real driver: natively, under
    MPS, or an openmps client that found no daemon and passed through)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            return sorted({line.split(None, 5)[5].strip() for line in f
                           if "libcuda.so" in line and len(line.split(None, 5)) == 6})
    except OSError:
        return []


def call_stats_mark():
    """openmps's openmps_call_stats_mark(label) when openmps's client library
    is mapped (it writes OPENMPS_CALL_STATS tables at the points a program
    chooses), else None."""
    import ctypes
    for p in mapped_libcuda():
        try:
            mark = ctypes.CDLL(p, mode=getattr(os, "RTLD_NOLOAD", 4)).openmps_call_stats_mark
        except (OSError, AttributeError):
            continue
        mark.argtypes = [ctypes.c_char_p]
        return mark
    return None


def openmps_mode(paths):
    """How openmps's client library in this process sends its calls (1 to the
    real driver, 2 to the server, 3 refused), or 0 without one. The real
    driver may be mapped beside it (it serves a few private tables of the
    driver's own), so the library is asked rather than the maps read."""
    import ctypes
    for p in paths:
        try:
            fn = ctypes.CDLL(p, mode=getattr(os, "RTLD_NOLOAD", 4)).openmps_client_mode
        except (OSError, AttributeError):
            continue
        fn.restype = ctypes.c_int
        return fn()
    return 0


def libcuda_warning(paths, expect, forbid, modes=None):
    """Why the libraries the children mapped (and the modes openmps's
    library reported) do not fit the column, or ""."""
    if expect:
        ours = [p for p in paths if p.startswith(expect)]
        if not ours:
            return f"no process mapped openmps's library (mapped: {', '.join(paths) or 'no libcuda'})"
        if modes is not None and any(m != 2 for m in modes):
            return ("a process was not served by the openmps server: pass-through or refused "
                    f"(modes {sorted(set(modes))})")
    if forbid and any(p.startswith(forbid) for p in paths):
        return "openmps's library was mapped in a column that should not use it"
    return ""


class _null_context:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


# ---------------------------------------------------------------------------
# The launcher: one cell = N children

def log(msg):
    print(f"[infer] {msg}", file=sys.stderr, flush=True)


class Probe:
    """What the machine and the column's server did during a window: the
    CPUs' user and system time (/proc/stat), the server processes' CPU time
    (their pids from get_server_list), and for openmps the messages its
    servers handled and the round trips among them (get_metrics). --ctl is
    the column's control program (with its environment), or empty."""

    def __init__(self, ctl):
        self.ctl = ctl

    def _ask(self, command):
        if not self.ctl:
            return ""
        try:
            return subprocess.run(self.ctl, shell=True, input=command + "\n", capture_output=True, text=True,
                                  timeout=20).stdout
        except (OSError, subprocess.SubprocessError):
            return ""

    @staticmethod
    def _cpu():
        with open("/proc/stat", encoding="ascii") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        # user nice system idle iowait irq softirq steal ...
        return {"user": v[0] + v[1], "system": v[2] + v[5] + v[6], "total": sum(v[:8])}

    @staticmethod
    def _ticks(pid):
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            return None

    def snap(self):
        d = {"t": time.perf_counter(), "cpu": self._cpu(), "pids": [], "ticks": {}}
        d["pids"] = [int(x) for x in self._ask("get_server_list").split() if x.isdigit()]
        for pid in d["pids"]:
            d["ticks"][pid] = self._ticks(pid)
        # Summed over the servers: the messages and round trips, and the
        # service threads' CPU, time running messages, time in the driver's
        # launch calls, launches, turns and wake-ups.
        d["m"] = {}
        for line in self._ask("get_metrics").splitlines():
            m = re.match(r"openmps_server_(\w+)_total\{[^}]*?(?:(?:why|op)=\"(\w+)\")?\} ([0-9.]+)$", line)
            if m and m.group(1) in self.METRICS:
                key = m.group(1) + ("_" + m.group(2) if m.group(2) else "")
                d["m"][key] = d["m"].get(key, 0.0) + float(m.group(3))
        d["calls"], d["trips"] = d["m"].get("calls"), d["m"].get("round_trips")
        return d

    METRICS = ("calls", "round_trips", "service_cpu_seconds", "serving_seconds", "launch_seconds", "launches",
               "turns", "wakeups", "replayed_kernels", "replay_holds_ended", "replay_chunks", "replay_seconds", "replay_node_updates", "replay_update_seconds",
               "poll_seconds", "op_calls",
               "op_seconds")

    @staticmethod
    def figures(a, b, requests):
        """The record's fields for the window between snapshots a and b."""
        out = {}
        dt = b["cpu"]["total"] - a["cpu"]["total"]
        if dt > 0:
            out["user_pct"] = round(100.0 * (b["cpu"]["user"] - a["cpu"]["user"]) / dt, 1)
            out["sys_pct"] = round(100.0 * (b["cpu"]["system"] - a["cpu"]["system"]) / dt, 1)
        hz = os.sysconf("SC_CLK_TCK")
        both = [p for p in b["ticks"] if a["ticks"].get(p) is not None and b["ticks"][p] is not None]
        if both and requests:
            ticks = sum(b["ticks"][p] - a["ticks"][p] for p in both)
            out["server_us_per_req"] = round(ticks / hz * 1e6 / requests, 1)
            out["server_cpu_pct"] = round(100.0 * ticks / hz / max(b["t"] - a["t"], 1e-9), 1)
        if a["calls"] is not None and b["calls"] is not None and requests:
            out["calls_per_req"] = round((b["calls"] - a["calls"]) / requests, 2)
            out["trips_per_req"] = round((b["trips"] - a["trips"]) / requests, 2)

        def delta(key):
            return b["m"][key] - a["m"][key] if key in a["m"] and key in b["m"] else None
        if requests and delta("service_cpu_seconds") is not None:
            out["svc_us_per_req"] = round(delta("service_cpu_seconds") * 1e6 / requests, 1)
            out["serve_us_per_req"] = round(delta("serving_seconds") * 1e6 / requests, 1)
            out["launch_us_per_req"] = round(delta("launch_seconds") * 1e6 / requests, 1)
            if delta("launches"):
                out["us_per_launch"] = round(delta("launch_seconds") * 1e6 / delta("launches"), 2)
            if delta("turns"):
                out["msgs_per_turn"] = round(delta("calls") / delta("turns"), 2)
            out["wakeups_per_req"] = round(delta("wakeups") / requests, 2)
            if delta("replayed_kernels") is not None:
                out["replayed_per_req"] = round(delta("replayed_kernels") / requests, 2)
            if delta("replay_seconds") is not None:
                out["replay_us_per_req"] = round(delta("replay_seconds") * 1e6 / requests, 1)
            if delta("replay_node_updates") is not None:
                out["updates_per_req"] = round(delta("replay_node_updates") / requests, 2)
                out["update_us_per_req"] = round(delta("replay_update_seconds") * 1e6 / requests, 1)
            if delta("poll_seconds") is not None:
                out["poll_us_per_req"] = round(delta("poll_seconds") * 1e6 / requests, 1)
            # The operations that took most of the time running messages.
            ops = []
            for key in b["m"]:
                if key.startswith("op_seconds_") and delta(key):
                    name = key[len("op_seconds_"):]
                    ops.append((delta(key) * 1e6 / requests, (delta("op_calls_" + name) or 0) / requests, name))
            out["top_ops"] = ", ".join(f"{name} {n:.2g}x {us:.1f}" for us, n, name in sorted(ops, reverse=True)[:8])
            runs = [(k[len("replay_chunks_"):], delta(k)) for k in b["m"] if k.startswith("replay_chunks_")]
            if any(n for _, n in runs):
                out["replay_chunks"] = ", ".join(f"{why} {n / requests:.3g}" for why, n in runs if n)
            if delta("replay_holds_ended_time") is not None:
                out["holds_expired_per_req"] = round(delta("replay_holds_ended_time") / requests, 3)
                out["holds_let_go_per_req"] = round(delta("replay_holds_ended_other") / requests, 3)
        return out


def run_cell(args, mp, n):
    """Forks n children, starts them together, collects their outcomes;
    returns the cell's record."""
    from multiprocessing.connection import wait as conn_wait

    args.cur_n = n
    go = mp.Event()
    times = mp.RawArray("q", 2)          # start and end of the window, ns of perf_counter
    procs, conns, states = [], [], []
    t_fork = time.perf_counter()
    for i in range(n):
        r, w = mp.Pipe(duplex=False)
        p = mp.Process(target=child_main, args=(i, args, w, go, times, os.getpid()), daemon=True)
        p.start()
        w.close()                        # only the child writes: EOF when it dies
        procs.append(p)
        conns.append(r)
        states.append({"state": "init", "count": 0, "lat_ns": [], "check": "", "error": ""})
    owner = {id(c): i for i, c in enumerate(conns)}
    traceback_shown = [False]
    libcuda = set()
    modes = []
    answers = {}

    def collect(pending, want, deadline):
        """Reads messages until no child in pending is still in a state in
        want, or the deadline; a closed pipe is a child that died."""
        while pending and time.perf_counter() < deadline:
            for c in conn_wait(list(pending), timeout=max(0.0, deadline - time.perf_counter())):
                i = owner[id(c)]
                s = states[i]
                try:
                    msg = c.recv()
                except (EOFError, OSError):
                    if s["state"] in want:
                        code = procs[i].exitcode
                        s.update(state="error", error=f"child {i} died during {s['state']}"
                                 + (f" (exit status {code})" if code is not None else ""))
                    pending.discard(c)
                    continue
                if msg[0] == "ready":
                    s.update(state="ready", check=msg[1]["check"], init_s=msg[1]["init_s"])
                    libcuda.update(msg[1].get("libcuda", ()))
                    modes.append(msg[1].get("mode", 0))
                    if msg[1].get("answer"):
                        answers[i] = msg[1]["answer"]
                    if msg[1]["check"] == "wrong":
                        s["error"] = msg[1]["error"]
                elif msg[0] == "error":
                    s.update(state="error", error=f"child {i}, {msg[1]}: {msg[2]}")
                    if len(msg) > 3 and not traceback_shown[0]:
                        traceback_shown[0] = True
                        log(f"first child error, its traceback:\n{msg[3]}")
                elif msg[0] == "result":
                    s.update(state="done", count=msg[1], lat_ns=array.array("q", msg[2]),
                             ru=msg[3] if len(msg) > 3 else None,
                             gpu_ns=array.array("q", msg[4]) if len(msg) > 4 else array.array("q"),
                             seg_ns=array.array("q", msg[5]) if len(msg) > 5 else array.array("q"))
                if s["state"] not in want:
                    pending.discard(c)

    pending = set(conns)
    collect(pending, ("init",), time.perf_counter() + args.init_timeout)
    for i, s in enumerate(states):
        if s["state"] == "init":
            s.update(state="error", error=f"child {i} not ready within {args.init_timeout:.0f} s")
            procs[i].kill()
    ready = [i for i, s in enumerate(states) if s["state"] == "ready"]
    init_s = time.perf_counter() - t_fork
    log(f"{args.mode} {args.model} N={n}: {len(ready)} of {n} ready after {init_s:.1f} s")

    # The window: shortly ahead, so that every child is waiting when it opens.
    probe = Probe(args.ctl if os.environ.get("INFER_PROBE", "1") != "0" else "")
    start = time.perf_counter_ns() + 100_000_000
    times[0], times[1] = start, start + int(args.window * 1e9)
    go.set()
    snaps = []
    gate = os.environ.get("INFER_GATE")
    if ready and args.model != "fake":
        time.sleep(max(0.0, (start - time.perf_counter_ns()) / 1e9))
        snaps.append(probe.snap())
        if gate:
            open(gate, "w").close()
        time.sleep(max(0.0, (times[1] - time.perf_counter_ns()) / 1e9))
        if gate:
            os.unlink(gate)
        snaps.append(probe.snap())
    pending = {conns[i] for i in ready}
    collect(pending, ("ready",), time.perf_counter() + args.window + 60)
    for i in ready:
        if states[i]["state"] == "ready":
            states[i].update(state="error", error=f"child {i} sent no result")
    # One deadline for all: 64 stuck children must not cost 64 timeouts.
    deadline = time.perf_counter() + 30
    for p in procs:
        p.join(timeout=max(0.0, deadline - time.perf_counter()))
    stuck = [p for p in procs if p.is_alive()]
    if stuck:
        log(f"{args.mode} {args.model} N={n}: {len(stuck)} children did not exit within 30 s: killing them")
        for p in stuck:
            p.kill()
        deadline = time.perf_counter() + 10
        for p in stuck:
            p.join(timeout=max(0.0, deadline - time.perf_counter()))
    for c in conns:
        c.close()
    rec = summarise(args.mode, args.model, n, args.window, states,
                    {"device": args.device, "init_s": round(init_s, 2), "warmup": args.warmup,
                     "libcuda": sorted(libcuda), "items": workloads.ITEMS.get(args.model, 1)})
    if answers:
        rec["answer0"] = answers.get(0)
    if len(snaps) == 2:
        rec.update(Probe.figures(snaps[0], snaps[1], rec.get("requests") or 0))
    if ready and args.model != "fake" and args.device != "cpu":
        rec["warning"] = libcuda_warning(rec["libcuda"], args.expect_libcuda, args.forbid_libcuda, modes)
        if rec["warning"]:
            log(f"WARNING: {args.mode} {args.model} N={n}: {rec['warning']}")
    return rec


def skipped(args, n, why):
    return {"kind": "infer", "mode": args.mode, "model": args.model, "n": n, "status": "skip",
            "rps": None, "p50_us": None, "p99_us": None, "error": why}


def parse_ns(values):
    """"1,2,4" or several arguments, or both -> a list of positive ints."""
    out = []
    for v in values:
        for part in re.split(r"[,\s]+", v.strip()):
            if not part:
                continue
            if not part.isdigit() or int(part) <= 0:
                raise ValueError(f"not a process count: {part!r}")
            out.append(int(part))
    if not out:
        raise ValueError("no process counts given")
    return out


def cmd_run(args):
    try:
        ns = parse_ns(args.n)
    except ValueError as e:
        print(f"infer.py: {e}", file=sys.stderr)
        return 2
    if args.dry_run:
        print(f"plan: mode={args.mode} model={args.model} device={args.device} window={args.window} s "
              f"warmup={args.warmup} threads/child={args.threads} budget={args.budget_s or 'none'} s")
        for n in ns:
            print(f"  cell: N={n}: fork {n} children, each: build {args.model} (seed {args.seed}), "
                  f"CPU reference, {args.warmup} warm-up requests, then {args.window} s of requests together")
        return 0
    # Before torch (and the BLAS under it) starts: one CPU thread per child,
    # as a server of N processes on a shared host would run; and no BLAS
    # threads in the launcher that the forked children would lack.
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(var, str(args.threads))
    torch_version = None
    if args.model in workloads.NEEDS_TORCH:
        # Imported once here, before the fork: the children share it.
        try:
            import torch
            if args.model == "decode":
                # The classes themselves, not only the package: transformers
                # imports them lazily, and 16 children doing so at once
                # failed ("Could not import module 'GPT2LMHeadModel'").
                from transformers import GPT2Config, GPT2LMHeadModel  # noqa: F401
        except Exception as e:      # noqa: BLE001
            print(f"infer.py: cannot import what --model {args.model} needs ({type(e).__name__}: {e}); "
                  f"(--model fake runs without it)", file=sys.stderr)
            return 77
        torch_version = torch.__version__
        # The launcher must not initialise CUDA: its children could not use it
        # after the fork. Nothing above touched torch.cuda; say so if it did.
        if getattr(torch.cuda, "_initialized", False):
            print("infer.py: CUDA was initialised before the fork", file=sys.stderr)
            return 2
    import multiprocessing
    mp = multiprocessing.get_context("fork")
    # Under OPENMPS_CALL_STATS (INFER_CALL_STATS=1 in infer.sh), each cell's
    # processes write their tables under a prefix of the cell's own.
    stats_base = os.environ.get("OPENMPS_CALL_STATS") if args.mode == "openmps" else None
    t_start = time.perf_counter()
    for k, n in enumerate(ns):
        if k:
            # The last cell's processes have exited, but a daemon may still be
            # letting go of them: NVIDIA MPS counts a client until then, and
            # would refuse the next cell's 48th.
            time.sleep(args.settle)
        elapsed = time.perf_counter() - t_start
        if args.budget_s and elapsed + args.window + 5 > args.budget_s:
            rec = skipped(args, n, f"out of time ({elapsed:.0f} s of {args.budget_s:.0f})")
        else:
            log(f"{args.mode} {args.model} N={n}: starting {n} processes")
            if stats_base:
                os.environ["OPENMPS_CALL_STATS"] = f"{stats_base}.{args.model}.n{n}"
            rec = run_cell(args, mp, n)
            if stats_base and rec["status"] == "ok":
                rec.update(call_waits(f"{stats_base}.{args.model}.n{n}"))
            if torch_version:
                rec["torch"] = torch_version
        print(json.dumps(rec), flush=True)
        if rec["status"] == "ok":
            log(f"{args.mode} {args.model} N={n}: {rec['rps']} req/s, p50 {rec['p50_us']} µs, "
                f"p99 {rec['p99_us']} µs (p90 {rec.get('p90_us')}, p99.9 {rec.get('p999_us')}, max {rec.get('max_us')}, "
                f"p99 per process {rec.get('child_p99_us')}; slowest 1% on {rec.get('tail_procs')} processes, "
                f"{rec.get('tail_early')} of it early, worst [process, request, ms] {rec.get('tail_worst')}"
                + (f"; on the GPU p50/p90/p99 {rec['gpu_span_us']}, off it {rec['off_gpu_us']}" if "gpu_span_us" in rec else "")
                + ("; its parts " + ", ".join(f"{nm} {v}" for nm, v in zip(
                    rec.get("gpu_part_names") or [f"part {j}" for j in range(len(rec["gpu_parts_us"]))],
                    rec["gpu_parts_us"])) if "gpu_parts_us" in rec else "")
                + f"; per process {rec['min_child_rps']}..{rec['max_child_rps']} req/s; "
                f"client CPU {rec.get('client_us_per_req')} µs/req, sys {rec.get('client_sys_us_per_req')}, "
                f"preempted {rec.get('preempted_per_req')}/req, slept {rec.get('slept_per_req')}/req)")
        else:
            log(f"{args.mode} {args.model} N={n}: {rec['status']}: {rec.get('error')}"
                + (f" (the {rec['ran']} that ran: {rec['partial']['rps']} req/s)" if rec.get("ran") else ""))
    return 0


def call_waits(prefix):
    """What a request of the window waited for replies, from the client
    library's tables (bench/calltable.py window): the total µs and the
    functions that waited, most first, then the naps taken through waits
    for the GPU (how many a request, the share that ended after the GPU's
    store, µs napped a request)."""
    import calltable
    sums, procs = calltable.window_sums(prefix)
    if not procs:
        return {}
    waited = [(name, w) for name, _c, _m, _t, w in calltable.rows_of(sums) if w > 0]
    waits = ", ".join(f"{name} {w:.1f}" for name, w in waited[:4])
    naps = calltable.naps_of(sums)
    if naps and naps[0] > 0:
        waits += f"; naps {naps[0]:.2f} ({naps[1] / naps[0]:.0%} overslept), {naps[2]:.0f} µs"
    return {"waited_us_per_req": round(sum(w for _n, w in waited), 1), "waits": waits}


def cmd_once(args):
    """One process, no fork: build, check, warm up, then --requests requests;
    exits normally, so what counts calls at exit (bench/calltrace.sh) sees
    them all. Between the warm-up and the requests, and after them, it calls
    openmps_call_stats_mark() when openmps's client library offers it (its
    OPENMPS_CALL_STATS tables then hold those two points)."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(var, str(args.threads))
    wl = workloads.make(args.model, args, 0)
    check, detail = wl.prepare()
    if check != "ok":
        print(f"once: {args.model}: {detail}", file=sys.stderr)
        return 1
    mark = call_stats_mark()
    with wl.context():
        for k in range(args.warmup):
            wl.request(k)
        if mark:
            mark(b"warm")
        t0 = time.perf_counter()
        for k in range(args.requests):
            wl.request(k)
        dt = time.perf_counter() - t0
        if mark:
            mark(b"done")
    print(json.dumps({"model": args.model, "pid": os.getpid(), "requests": args.requests, "warmup": args.warmup,
                      "seconds": round(dt, 4), "us_per_request": round(dt / max(args.requests, 1) * 1e6, 1),
                      "answer": getattr(wl, "answer", None), "libcuda": mapped_libcuda()}), flush=True)
    return 0


# ---------------------------------------------------------------------------
# Tables

# Where openmps's service threads spent their time, per request (serve_table).
SERVE_FIELDS = ("svc_us_per_req", "serve_us_per_req", "launch_us_per_req", "us_per_launch", "replay_us_per_req",
                "updates_per_req", "update_us_per_req", "poll_us_per_req",
                "msgs_per_turn", "wakeups_per_req", "replayed_per_req", "holds_expired_per_req",
                "holds_let_go_per_req")
TSV_FIELDS = ("kind", "model", "n", "mode", "status", "rps", "p50_us", "p99_us", "value",
              "ran", "failed", "refused", "wrong", "warning", "error", "items", "user_pct", "sys_pct",
              "server_us_per_req", "server_cpu_pct", "calls_per_req", "trips_per_req", "answer0",
              "client_us_per_req", "client_sys_us_per_req", "preempted_per_req", "slept_per_req") + SERVE_FIELDS + (
                  "top_ops", "replay_chunks", "waited_us_per_req", "waits")
NUM_FIELDS = ("rps", "p50_us", "p99_us", "value", "user_pct", "sys_pct", "server_us_per_req", "server_cpu_pct",
              "calls_per_req", "trips_per_req", "client_us_per_req", "client_sys_us_per_req", "preempted_per_req",
              "slept_per_req", "waited_us_per_req") + SERVE_FIELDS

# The server-CPU rows bench/infer.sh measures: id, label ({n}: the record's n).
CPU_ROWS = (
    ("idle_cpu_pct", "server CPU, {n} idle clients: % of one core"),
    ("launch_server_us", "server CPU per async launch: µs"),
    ("launch_client_us", "client CPU per async launch: µs"),
    ("launch_wall_us", "wall time per async launch: µs"),
    ("sync_server_us", "server CPU per call, launch + synchronize: µs"),
    ("sync_client_us", "client CPU per call, launch + synchronize: µs"),
    ("sync_wall_us", "wall time per call, launch + synchronize: µs"),
    ("spin_server_us", "server CPU per ~100 µs kernel + synchronize: µs"),
    ("spin_client_us", "client CPU per ~100 µs kernel + synchronize: µs"),
    ("spin_wall_us", "wall time per ~100 µs kernel + synchronize: µs"),
)


def clean(text):
    return re.sub(r"[\t\r\n|]+", " ", str(text or "")).strip()


def merge_passes(recs):
    """One record from a cell's passes (INFER_REPEAT, the columns taken in
    turn): the medians of the passes that gave a number, with every pass's
    requests/s kept in "passes"; a pass that answered wrong or failed makes
    the cell that verdict; passes out of time are left out."""
    ok = [r for r in recs if r.get("status") == "ok" and r.get("rps") is not None]
    bad = [r for r in recs if r.get("status") not in ("ok", "skip")]
    if bad or not ok:
        return (bad or recs)[-1]
    out = dict(ok[-1])
    if len(ok) > 1:
        for k in ("rps", "p50_us", "p99_us"):
            v = sorted(r[k] for r in ok if r.get(k) is not None)
            out[k] = (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2 if v else None
        out["passes"] = [r["rps"] for r in ok]
    return out


def read_records(paths):
    """Records from JSON lines (infer.py run, bench/infer.sh) or a TSV this
    file wrote; several records of one inference cell are its passes
    (merge_passes); otherwise a later record replaces an earlier one."""
    recs = {}
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.rstrip("\n")
                if not line.strip() or line.startswith("#"):
                    continue
                if line.lstrip().startswith("{"):
                    r = json.loads(line)
                else:
                    r = dict(zip(TSV_FIELDS, line.split("\t")))
                    for k in NUM_FIELDS:
                        r[k] = float(r[k]) if r.get(k) not in (None, "", "-") else None
                    for k in ("n", "ran", "failed", "refused", "wrong", "items"):
                        r[k] = int(r[k]) if r.get(k) not in (None, "", "-") else None
                key = (r.get("kind", "infer"), r.get("model"), r.get("n"), r.get("mode"))
                if key[0] == "infer":
                    recs.setdefault(key, []).append(r)
                else:
                    recs[key] = [r]
    return [merge_passes(v) if k[0] == "infer" else v[-1] for k, v in recs.items()]


def write_tsv(recs, out):
    out.write("#" + "\t".join(TSV_FIELDS) + "\n")
    for r in recs:
        row = []
        for k in TSV_FIELDS:
            v = r.get(k)
            row.append("" if v is None else clean(v))
        out.write("\t".join(row) + "\n")


def fmt_num(v):
    if v is None:
        return "-"
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.1f}" if abs(v) >= 10 else f"{v:.2f}"


def fmt_ratio(a, b):
    if a is None or b is None or b <= 0:
        return "-"
    return f"{a / b:.2f}"


def verdict(r):
    """The text of a cell that is not a number."""
    st = r.get("status", "-")
    n = r.get("n") or 0
    if st == "refused":
        return f"refused ({r.get('refused', '?')} of {n})"
    if st == "fail" and r.get("ran") is not None and r.get("kind") == "infer":
        return f"fail ({r.get('ran')}/{n} ran)"
    return st


def infer_table(recs):
    cells = {(r["model"], int(r["n"]), r["mode"]): r for r in recs if r.get("kind", "infer") == "infer"}
    if not cells:
        return ""
    order = {m: i for i, m in enumerate(MODELS)}
    rows = sorted({(m, n) for (m, n, _) in cells}, key=lambda k: (order.get(k[0], 99), k[0], k[1]))
    t = [MODE_TITLE[m] for m in MODES]
    out = ["| model | N | unit | " + " | ".join(t) + " | openmps/MPS | openmps/native | p50 µs "
           + " | p50 µs ".join(t) + " | p99 µs " + " | p99 µs ".join(t) + " |",
           "|---|---:|---|" + "---:|" * 11]
    for model, n in rows:
        items = workloads.ITEMS.get(model, 1)

        def get(mode, key, scale=1):
            r = cells.get((model, n, mode))
            if r is None:
                return "-", None
            if r.get("status") != "ok" or r.get(key) is None:
                return verdict(r), None
            return fmt_num(r[key] * scale), r[key] * scale
        rps = {m: get(m, "rps", items) for m in MODES}
        line = [model, str(n), workloads.UNITS.get(model, "req/s")] + [rps[m][0] for m in MODES]
        line += [fmt_ratio(rps["openmps"][1], rps["mps"][1]), fmt_ratio(rps["openmps"][1], rps["native"][1])]
        line += [get(m, "p50_us")[0] for m in MODES] + [get(m, "p99_us")[0] for m in MODES]
        out.append("| " + " | ".join(line) + " |")
    return "\n".join(out) + "\n"


def passes_table(recs):
    """With INFER_REPEAT, every pass of every cell (the table above gives
    their medians): how far runs of one setting differ."""
    cells = {(r["model"], int(r["n"]), r["mode"]): r for r in recs if r.get("kind", "infer") == "infer"}
    if not any(r.get("passes") for r in cells.values()):
        return ""
    order = {m: i for i, m in enumerate(MODELS)}
    rows = sorted({(m, n) for (m, n, _) in cells}, key=lambda k: (order.get(k[0], 99), k[0], k[1]))
    out = ["Each pass (the columns in turn, the medians above): " + ", ".join(MODE_TITLE[m] for m in MODES), ""]
    out += ["| model | N | " + " | ".join(MODE_TITLE[m] for m in MODES) + " |", "|---|---:|" + "---|" * len(MODES)]
    for model, n in rows:
        items = workloads.ITEMS.get(model, 1)
        line = [model, str(n)]
        for m in MODES:
            r = cells.get((model, n, m)) or {}
            line.append(" / ".join(fmt_num(v * items) for v in r.get("passes", [])) or "-")
        out.append("| " + " | ".join(line) + " |")
    return "\n".join(out) + "\n"


def load_table(recs):
    """The machine's and the servers' side of each cell: user and system CPU
    of the whole machine during the window, the server's CPU per request
    (NVIDIA MPS and openmps), and what reached openmps's server per request."""
    cells = {(r["model"], int(r["n"]), r["mode"]): r for r in recs if r.get("kind", "infer") == "infer"}
    if not any(r.get("user_pct") is not None for r in cells.values()):
        return ""
    order = {m: i for i, m in enumerate(MODELS)}
    rows = sorted({(m, n) for (m, n, _) in cells}, key=lambda k: (order.get(k[0], 99), k[0], k[1]))
    t = [MODE_TITLE[m] for m in MODES]
    out = ["| model | N | user % " + " | user % ".join(t) + " | sys % " + " | sys % ".join(t)
           + " | server µs/req NVIDIA MPS | server µs/req openmps | openmps calls/req | openmps round trips/req |",
           "|---|---:|" + "---:|" * 10]
    for model, n in rows:
        def val(mode, key):
            r = cells.get((model, n, mode))
            v = r.get(key) if r else None
            return "-" if v is None else fmt_num(float(v))
        line = [model, str(n)] + [val(m, "user_pct") for m in MODES] + [val(m, "sys_pct") for m in MODES]
        line += [val("mps", "server_us_per_req"), val("openmps", "server_us_per_req"),
                 val("openmps", "calls_per_req"), val("openmps", "trips_per_req")]
        out.append("| " + " | ".join(line) + " |")
    answers = {}
    for (model, n, mode), r in cells.items():
        if r.get("answer0"):
            answers.setdefault(model, {}).setdefault(mode, set()).add(r["answer0"])
    for model, by_mode in sorted(answers.items()):
        every = set().union(*by_mode.values())
        out.append("")
        out.append(f"{model}: the first process's output "
                   + ("is the same in every cell and column" if len(every) == 1 else
                      "DIFFERS: " + "; ".join(f"{MODE_TITLE.get(m, m)} {sorted(v)}" for m, v in sorted(by_mode.items()))))
    return "\n".join(out) + "\n"


def serve_table(recs):
    """Where openmps's service threads spent their time per request: their
    CPU, the part running messages, the part inside the driver's launch
    calls (and per launch), messages per turn, wake-ups from sleep, and the
    kernels launched as part of a replayed run (src/server/replay.h)."""
    cells = {(r["model"], int(r["n"])): r for r in recs
             if r.get("kind", "infer") == "infer" and r.get("mode") == "openmps" and r.get("svc_us_per_req") is not None}
    if not cells:
        return ""
    order = {m: i for i, m in enumerate(MODELS)}
    keys = SERVE_FIELDS
    out = ["| model | N | service CPU µs/req | running messages µs/req | in driver launches µs/req "
           "| µs per driver launch | graph launches µs/req | nodes updated/req | node updates µs/req "
           "| polling completions µs/req | messages per turn "
           "| wake-ups/req "
           "| kernels replayed/req | holds timed out/req | holds let go/req |",
           "|---|---:|" + "---:|" * len(keys)]
    cells_sorted = sorted(cells, key=lambda k: (order.get(k[0], 99), k[0], k[1]))
    for model, n in cells_sorted:
        r = cells[(model, n)]
        out.append("| " + " | ".join([model, str(n)] + [fmt_num(r.get(k)) for k in keys]) + " |")
    # Which messages that time went to: operation, calls per request, µs per request.
    out.append("")
    out.append("| model | N | running messages by operation: calls/req × µs/req |")
    out.append("|---|---:|---|")
    for model, n in cells_sorted:
        if cells[(model, n)].get("top_ops"):
            out.append(f"| {model} | {n} | {cells[(model, n)]['top_ops']} |")
    # What became of its chunks of launches (replay.h), by outcome, per request.
    ran = [(m, n) for m, n in cells_sorted if cells[(m, n)].get("replay_chunks")]
    if ran:
        out.append("")
        out.append("| model | N | chunks of launches per request, by outcome |")
        out.append("|---|---:|---|")
        for model, n in ran:
            out.append(f"| {model} | {n} | {cells[(model, n)]['replay_chunks']} |")
    # What a request waited for replies, as the client counted (INFER_CALL_STATS=1).
    waited = [(m, n) for m, n in cells_sorted if cells[(m, n)].get("waits")]
    if waited:
        out.append("")
        out.append("| model | N | µs waited for replies per request | by function (µs) |")
        out.append("|---|---:|---:|---|")
        for model, n in waited:
            r = cells[(model, n)]
            out.append(f"| {model} | {n} | {fmt_num(r.get('waited_us_per_req'))} | {r['waits']} |")
    return "\n".join(out) + "\n"


def cpu_table(recs):
    cells = {(r["model"], r["mode"]): r for r in recs if r.get("kind") == "cpu"}
    if not cells:
        return ""
    out = ["| measurement | native | NVIDIA MPS | openmps | openmps/MPS |", "|---|---:|---:|---:|---:|"]
    for rid, label in CPU_ROWS:
        got = {m: cells.get((rid, m)) for m in MODES}
        if not any(got.values()):
            continue
        n = next((r.get("n") for r in got.values() if r and r.get("n")), "?")
        vals, text = {}, []
        for m in MODES:
            r = got[m]
            if r is None:
                vals[m] = None
                text.append("-")
            elif r.get("status") == "ok" and r.get("value") is not None:
                vals[m] = float(r["value"])
                text.append(fmt_num(vals[m]))
            else:
                vals[m] = None
                text.append(r.get("status", "-") + (f" ({clean(r['error'])})" if r.get("error") else ""))
        out.append(f"| {label.format(n=n)} | " + " | ".join(text) + f" | {fmt_ratio(vals['openmps'], vals['mps'])} |")
    return "\n".join(out) + "\n"


def cmd_table(args):
    recs = read_records(args.files)
    if args.tsv:
        with open(args.tsv, "w", encoding="utf-8") as f:
            write_tsv(recs, f)
    text = infer_table(recs)
    passes = passes_table(recs)
    if passes:
        text += "\n" + passes
    load = load_table(recs)
    if load:
        text += "\n" + load
    serve = serve_table(recs)
    if serve:
        text += "\n" + serve
    cpu = cpu_table(recs)
    if cpu:
        text += "\n" + cpu
    # One line per column and reason, naming the cells it covers.
    why = {}
    for r in recs:
        if r.get("status") not in ("ok", None) and r.get("error"):
            cell = f"{r.get('model')}" + (f" N={r['n']}" if r.get("kind", "infer") == "infer" else "")
            why.setdefault((MODE_TITLE.get(r.get("mode"), r.get("mode")), clean(r["error"])), []).append(cell)
    if why:
        text += "\nWhy the cells that are not numbers are not (the first error of each cell):\n\n"
        for (mode, err), cells in sorted(why.items())[:40]:
            more = f" and {len(cells) - 4} more" if len(cells) > 4 else ""
            text += f"- {mode}: {err} ({', '.join(cells[:4])}{more})\n"
    warnings = sorted({(MODE_TITLE.get(r.get("mode"), r.get("mode")), clean(r["warning"]))
                       for r in recs if r.get("warning")})
    if warnings:
        text += "\n" + "".join(f"WARNING: {mode}: {w}\n" for mode, w in warnings)
    if args.md:
        with open(args.md, "a", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


# ---------------------------------------------------------------------------
# Self-check: what can be tested without a GPU or torch

def cmd_selftest(args):
    fails = []

    def check(name, cond):
        print(f"{'PASS' if cond else 'FAIL'}  {name}")
        if not cond:
            fails.append(name)

    v = list(range(1, 101))
    check("percentile p50 of 1..100", percentile(v, 0.5) == 50)
    check("percentile p99 of 1..100", percentile(v, 0.99) == 99)
    check("percentile of one value", percentile([7], 0.99) == 7)
    check("percentile of nothing", percentile([], 0.5) is None)
    check("parse_ns", parse_ns(["1,2", "4 8"]) == [1, 2, 4, 8])
    try:
        parse_ns(["1,x"])
        check("parse_ns rejects junk", False)
    except ValueError:
        check("parse_ns rejects junk", True)
    check("refusal recognised", is_refusal("RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable"))
    check("cudaErrorDevicesUnavailable recognised", is_refusal("cudaErrorDevicesUnavailable"))
    check("an ordinary error is no refusal", not is_refusal("RuntimeError: CUDA error: out of memory"))

    om = "/x/build/lib/"
    check("libcuda: openmps served", libcuda_warning([om + "libcuda.so.1"], om, "") == "")
    check("libcuda: openmps served beside the real driver",
          libcuda_warning([om + "libcuda.so.1", "/usr/lib/libcuda.so.1"], om, "", [2, 2]) == "")
    check("libcuda: openmps passed through",
          "pass-through" in libcuda_warning([om + "libcuda.so.1", "/usr/lib/libcuda.so.1"], om, "", [2, 1]))
    check("libcuda: openmps column on the real driver", "no process" in libcuda_warning(["/usr/lib/libcuda.so.1"], om, ""))
    check("libcuda: native on openmps", libcuda_warning([om + "libcuda.so.1"], "", om) != "")
    check("libcuda: native on the driver", libcuda_warning(["/usr/lib/libcuda.so.1"], "", om) == "")

    ok_child = {"state": "done", "count": 100, "lat_ns": array.array("q", [20_000_000] * 100), "check": "ok"}
    r = summarise("mps", "cnn", 2, 2.0, [ok_child, dict(ok_child)])
    ru = {"cpu_s": 0.03, "sys_s": 0.01, "ivcsw": 5, "vcsw": 100}
    r2 = summarise("mps", "cnn", 2, 2.0, [dict(ok_child, ru=ru), dict(ok_child, ru=ru)])
    check("clients' CPU per request", r2.get("client_us_per_req") == 300.0 and r2.get("client_sys_us_per_req") == 100.0
          and r2.get("preempted_per_req") == 0.05 and r2.get("slept_per_req") == 1.0)
    check("two children: 100 req/s, p50 20 ms", r["status"] == "ok" and r["rps"] == 100.0 and r["p50_us"] == 20000.0)
    late = array.array("q", [20_000_000] * 100)
    late[0], late[70] = 90_000_000, 80_000_000
    t = summarise("mps", "cnn", 2, 2.0, [ok_child, dict(ok_child, lat_ns=late)])
    check("the tail's place: process 1, its first request, then its 71st",
          t.get("tail_procs") == 1 and t.get("tail_early") == 0.5 and t.get("tail_worst", [])[:2] == [[1, 0, 90.0], [1, 70, 80.0]])
    check("no GPU spans unless measured", "gpu_span_us" not in r)
    lat = array.array("q", [1_000_000 * (i + 1) for i in range(100)])   # 1..100 ms
    gpu = array.array("q", [400_000 * (i + 1) for i in range(100)])     # 0.4..40 ms of each on the GPU
    timed = {"state": "done", "count": 100, "lat_ns": lat, "gpu_ns": gpu, "check": "ok"}
    r = summarise("openmps", "gemmfft", 1, 2.0, [timed])
    check("GPU spans: p50/p90/p99 20/36/39.6 ms, the rest 30/54/59.4",
          r.get("gpu_span_us") == [20000.0, 36000.0, 39600.0] and r.get("off_gpu_us") == [30000.0, 54000.0, 59400.0])
    seg = array.array("q")
    for x in gpu:
        seg.extend((x // 4, x // 4, x // 4, x - 3 * (x // 4)))
    r = summarise("openmps", "gemmfft", 1, 2.0, [dict(timed, seg_ns=seg)])
    check("GPU spans in parts: four, named, each a quarter",
          r.get("gpu_parts_us") == [[5000.0, 9000.0, 9900.0]] * 4
          and r.get("gpu_part_names") == ["gemm+fft+sum", "sync 1", "abs+max", "copy back + wait"])
    r = summarise("openmps", "gemmfft", 1, 2.0, [dict(timed, seg_ns=seg[:-1])])
    check("GPU spans in parts: a ragged array gives none", "gpu_parts_us" not in r and "gpu_span_us" in r)
    r = summarise("openmps", "gemmfft", 2, 2.0, [timed, ok_child])
    check("GPU spans from only some children: none given", "gpu_span_us" not in r)
    slow = {"state": "done", "count": 7, "lat_ns": array.array("q", [280_000_000] * 7), "check": "ok"}
    r = summarise("mps", "decode", 1, 2.0, [slow])
    check("7 requests of 280 ms in 2 s: 3.57 req/s, not 3.5", r["rps"] == 3.6 and r["rps_window"] == 3.5)
    r = summarise("mps", "cnn", 2, 2.0, [ok_child, {"state": "error", "error": "busy or unavailable"}])
    check("a refused child makes the cell refused, no number", r["status"] == "refused" and r["rps"] is None
          and r["refused"] == 1)
    r = summarise("mps", "cnn", 2, 2.0, [dict(ok_child, check="wrong", error="x"), ok_child])
    check("a wrong answer makes the cell wrong", r["status"] == "wrong" and r["rps"] is None)
    r = summarise("mps", "cnn", 2, 2.0, [ok_child, {"state": "error", "error": "boom"}])
    check("any other failure makes it fail", r["status"] == "fail" and r["ran"] == 1)

    recs = [
        {"kind": "infer", "model": "cnn", "n": 16, "mode": "native", "status": "ok", "rps": 4900.0, "p50_us": 3000.0, "p99_us": 9000.0},
        {"kind": "infer", "model": "cnn", "n": 16, "mode": "mps", "status": "ok", "rps": 40000.0, "p50_us": 390.0, "p99_us": 800.0},
        {"kind": "infer", "model": "cnn", "n": 16, "mode": "openmps", "status": "ok", "rps": 20000.0, "p50_us": 700.0, "p99_us": 1500.0},
        {"kind": "infer", "model": "cnn", "n": 64, "mode": "mps", "status": "refused", "rps": None, "refused": 16, "ran": 48, "error": "busy or unavailable"},
        {"kind": "cpu", "model": "idle_cpu_pct", "n": 16, "mode": "openmps", "status": "ok", "value": 1.5},
        {"kind": "cpu", "model": "idle_cpu_pct", "n": 16, "mode": "mps", "status": "ok", "value": 3.0},
    ]
    t = infer_table(recs)
    check("table: openmps/MPS ratio 0.50", "| cnn | 16 | req/s | 4900 | 40000 | 20000 | 0.50 | 4.08 |" in t)
    dec = [dict(r, model="decode", rps=r["rps"] / 1000 if r.get("rps") else None) for r in recs[:3]]
    check("table: decode in tokens/s", "| decode | 16 | tokens/s | 157 | 1280 | 640 | 0.50 |" in infer_table(dec))
    ld = load_table([dict(recs[2], user_pct=60.0, sys_pct=2.5, server_us_per_req=12.0, calls_per_req=18.0,
                          trips_per_req=2.0, answer0="ab"), dict(recs[1], user_pct=99.0, sys_pct=0.1, answer0="ab")])
    check("load table", "| cnn | 16 | - | 99.0 | 60.0 | - | 0.10 | 2.50 | - | 12.0 | 18.0 | 2.00 |" in ld
          and "the same in every cell" in ld)
    check("table: refused cell", "refused (16 of 64)" in t)
    snap = {"t": 0.0, "cpu": {"user": 0, "system": 0, "total": 0}, "ticks": {}, "calls": 0.0, "trips": 0.0,
            "m": {"calls": 0.0, "round_trips": 0.0, "service_cpu_seconds": 1.0, "serving_seconds": 0.5,
                  "launch_seconds": 0.25, "launches": 0.0, "turns": 0.0, "wakeups": 0.0}}
    later = {"t": 1.0, "cpu": {"user": 0, "system": 0, "total": 0}, "ticks": {}, "calls": 17000.0,
             "trips": 2000.0, "m": {"calls": 17000.0, "round_trips": 2000.0, "service_cpu_seconds": 1.16,
                                    "serving_seconds": 0.58, "launch_seconds": 0.314, "launches": 16000.0,
                                    "turns": 4250.0, "wakeups": 500.0}}
    fig = Probe.figures(snap, later, 1000)
    check("server figures per request", fig.get("svc_us_per_req") == 160.0 and fig.get("serve_us_per_req") == 80.0
          and fig.get("launch_us_per_req") == 64.0 and fig.get("us_per_launch") == 4.0
          and fig.get("msgs_per_turn") == 4.0 and fig.get("wakeups_per_req") == 0.5
          and fig.get("calls_per_req") == 17.0)
    st = serve_table([dict(recs[2], **fig)])
    check("serve table", "| cnn | 16 | 160 | 80.0 | 64.0 | 4.00 | - | - | - | - | 4.00 | 0.50 | - | - | - |" in st)
    import tempfile
    cs = tempfile.mkdtemp()
    for name, text in (("s.cnn.n16.7.warm", "# x\n10 10 0 0 cuLaunchKernel\n1 1 1 40 cuStreamSynchronize\n"),
                       ("s.cnn.n16.7.done-10", "# x\n150 150 0 0 cuLaunchKernel\n11 11 11 540 cuStreamSynchronize\n"
                                              "10 10 10 1230 cuMemcpyDtoHAsync\n")):
        with open(os.path.join(cs, name), "w", encoding="utf-8") as f:
            f.write(text)
    w = call_waits(os.path.join(cs, "s.cnn.n16"))
    check("waits from the client's tables", w == {"waited_us_per_req": 173.0,
                                                  "waits": "cuMemcpyDtoHAsync 123.0, cuStreamSynchronize 50.0"})
    for name, text in (("s.nap.n16.7.warm", "# x\n1 1 1 40 cuStreamSynchronize\n# naps: 2, 0 overslept, 900 us\n"),
                       ("s.nap.n16.7.done-10", "# x\n11 11 11 9040 cuStreamSynchronize\n"
                                              "# naps: 10, 2 overslept, 6900 us\n")):
        with open(os.path.join(cs, name), "w", encoding="utf-8") as f:
            f.write(text)
    check("waits and naps", call_waits(os.path.join(cs, "s.nap.n16")) == {
        "waited_us_per_req": 900.0, "waits": "cuStreamSynchronize 900.0; naps 0.80 (25% overslept), 600 µs"})
    st = serve_table([dict(recs[2], **fig, **w)])
    check("serve table: waits", "| cnn | 16 | 173 | cuMemcpyDtoHAsync 123.0, cuStreamSynchronize 50.0 |" in st)
    c = cpu_table(recs)
    check("cpu table: 16 idle clients, ratio 0.50", "16 idle clients" in c and "| 0.50 |" in c)
    buf = io.StringIO()
    write_tsv(recs, buf)
    with tempfile.NamedTemporaryFile("w", suffix=".tsv", delete=False) as f:
        f.write(buf.getvalue())
    back = read_records([f.name])
    os.unlink(f.name)
    check("TSV round trip gives the same tables", infer_table(back) == t and cpu_table(back) == c)
    passes = [dict(recs[2], rps=v, p50_us=p, p99_us=p * 2) for v, p in ((30000.0, 500.0), (36000.0, 400.0),
                                                                      (33000.0, 450.0))]
    skip = {"kind": "infer", "model": "cnn", "n": 16, "mode": "openmps", "status": "skip", "rps": None}
    m = merge_passes(passes + [skip])
    check("passes: medians, each pass kept, a pass out of time left out",
          m["rps"] == 33000.0 and m["p50_us"] == 450.0 and m["p99_us"] == 900.0 and m["passes"] == [30000.0, 36000.0, 33000.0])
    check("passes: a failed pass makes the cell fail",
          merge_passes(passes + [dict(skip, status="fail")])["status"] == "fail")
    check("passes: a table of every pass", "| cnn | 16 | - | - | 30000 / 36000 / 33000 |" in passes_table([m]))

    # The fork/start/report machinery, with the stand-in model.
    import multiprocessing
    mp = multiprocessing.get_context("fork")
    a = make_parser().parse_args(["run", "--mode", "native", "--model", "fake", "--n", "4",
                                  "--window", "0.3", "--warmup", "5", "--fake-us", "200", "--init-timeout", "20"])
    r = run_cell(a, mp, 4)
    check(f"fake, 4 children: ok, ~{r['rps']} req/s (at most 4 x 5000)",
          r["status"] == "ok" and r["ran"] == 4 and 0 < r["rps"] <= 4 * 5000 * 1.05)
    a.fake_refuse = 1
    r = run_cell(a, mp, 4)
    check("fake, 1 of 4 refused: refused", r["status"] == "refused" and r["ran"] == 3 and r["refused"] == 1)
    a.fake_refuse, a.fake_die = 0, 1
    r = run_cell(a, mp, 3)
    check("fake, 1 of 3 dies at init: fail", r["status"] == "fail" and r["ran"] == 2 and "died" in r["error"])
    a.fake_die, a.fake_wrong = 0, 1
    r = run_cell(a, mp, 2)
    check("fake, 1 of 2 wrong: wrong", r["status"] == "wrong" and r["rps"] is None)
    print(f"selftest: {'PASS' if not fails else 'FAIL: ' + ', '.join(fails)}")
    return 0 if not fails else 1


# ---------------------------------------------------------------------------

def make_parser():
    p = argparse.ArgumentParser(description="batch-1 inference benchmark: worker, report, self-check")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="measure cells (one JSON line each on stdout)")
    r.add_argument("--mode", default="native", help="the column this run is measured for (a label: "
                   "the environment decides what the processes really use)")
    r.add_argument("--model", choices=MODELS, default="cnn")
    r.add_argument("--n", nargs="+", default=["1"], help="process counts, e.g. 1,2,4 or 1 2 4")
    r.add_argument("--window", type=float, default=2.0, help="seconds of timed requests (default 2)")
    r.add_argument("--warmup", type=int, default=50, help="requests before the window (default 50)")
    r.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    r.add_argument("--threads", type=int, default=1, help="CPU threads per child (default 1)")
    r.add_argument("--seed", type=int, default=1234)
    r.add_argument("--init-timeout", type=float, default=180, help="seconds for all children to be ready")
    r.add_argument("--budget-s", type=float, default=0, help="start no cell after this many seconds")
    r.add_argument("--settle", type=float, default=0.5, help="seconds between cells (default 0.5)")
    r.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")
    r.add_argument("--expect-libcuda", default="", metavar="PREFIX",
                   help="warn unless the children mapped a libcuda under PREFIX, and only there")
    r.add_argument("--forbid-libcuda", default="", metavar="PREFIX",
                   help="warn if the children mapped a libcuda under PREFIX")
    for k, h in (("refuse", "refuse like MPS past its limit"), ("fail", "fail at init"),
                 ("die", "die at init"), ("wrong", "answer wrong")):
        r.add_argument(f"--fake-{k}", type=int, default=0, help=f"--model fake: this many children {h}")
    r.add_argument("--fake-us", type=float, default=300, help="--model fake: CPU µs per request")
    r.add_argument("--ctl", default="", help="a shell command that runs the column's control program, to ask "
                   "its servers' pids and (openmps) their calls during each window")
    o = sub.add_parser("once", help="one process: check, warm up, then a number of requests (for tracing)")
    o.add_argument("--model", choices=workloads.NAMES, default="cnn")
    o.add_argument("--requests", type=int, default=100)
    o.add_argument("--warmup", type=int, default=20)
    o.add_argument("--device", default="cuda")
    o.add_argument("--threads", type=int, default=1)
    o.add_argument("--seed", type=int, default=1234)
    t = sub.add_parser("table", help="markdown tables (and a TSV) from results")
    t.add_argument("files", nargs="+", help="JSON lines or a TSV written by this command")
    t.add_argument("--md", help="append the tables to this file instead of printing them")
    t.add_argument("--tsv", help="write every record to this TSV")
    sub.add_parser("selftest", help="check statistics, tables and the fork machinery (no GPU, no torch)")
    return p


def main():
    args = make_parser().parse_args()
    if args.cmd == "run":
        if args.window <= 0 or args.warmup < 0 or args.threads <= 0:
            print("infer.py: --window must be positive, --warmup and --threads sensible", file=sys.stderr)
            return 2
        return cmd_run(args)
    if args.cmd == "table":
        return cmd_table(args)
    if args.cmd == "once":
        return cmd_once(args)
    return cmd_selftest(args)


if __name__ == "__main__":
    sys.exit(main())
