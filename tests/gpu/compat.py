#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
#
# tests/gpu/compat.py [--native-only | --openmps-only] [--only TEXT]... [--list]
#
# Compatibility with real workloads: PyTorch training and inference (a small
# transformer and a small CNN, each in fp32, TF32, fp16 and bf16 autocast),
# CUDA graphs, torch.compile, FFT, sparse, linear algebra, random numbers,
# fp8 and int8 matmuls, the cudaMallocAsync and expandable-segments
# allocators, pinned memory and streams; CuPy elementwise, reductions,
# matmuls, FFT, sparse, linear algebra, random numbers, NVRTC kernels, CUDA
# graphs and the stream-ordered memory pool. Every workload runs in a
# process of its own, on the real driver ("native": an empty pipe directory,
# so it meets no daemon) and as a client of openmps (a daemon this script
# starts in private directories under /tmp, as tests/gpu/run.sh does, and
# quits on every way out); the two runs of one workload go at the same time
# unless --serial. Each workload checks its results against a float64
# reference on the CPU (or a second computation on the GPU) with tolerances
# fit for its precision, on fresh random inputs (the seed is printed; set it
# with --seed); any exception is a failure. One line per workload as it
# finishes, then one table: workload | native | openmps. Under openmps the
# clients run with OPENMPS_TRACE_ERRORS=1, and a failure lists the driver
# calls that were unsupported or failed; after the table, every driver call,
# export table and table slot openmps refused in any workload, passed or
# not (what the driver serves natively). The results go to $OUT/compat.json
# when OUT is set. Exits 0 when every workload that passed natively also
# passed under openmps (with one mode only: when none failed). The whole run
# keeps to --budget seconds (COMPAT_BUDGET, default 540, for a device command
# of at most 600): workloads left past it are NOT RUN and the run fails.
#
# Run it from the repository after `make`, on a machine with an NVIDIA GPU:
#   python3 tests/gpu/compat.py                  everything, both modes
#   python3 tests/gpu/compat.py --only cupy      the workloads whose name has "cupy"
# Environment: OPENMPS_NATIVE_LIB (default /usr/local/nvidia/lib64, where the
# real libcuda.so.1 is), OPENMPS_DRIVER (default $OPENMPS_NATIVE_LIB/libcuda.so.1).
# A workload whose framework is not installed is a SKIP, as is one that the
# GPU or the installed version cannot run natively (fp8 below sm_89,
# torch.compile without Triton); under openmps a missing device is a FAIL.
import argparse
import contextlib
import copy
import importlib.metadata
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SKIP_RC = 77
DEFAULT_TIMEOUT = 150     # seconds per run of one workload
DEFAULT_BUDGET = 540      # seconds for the whole script (a device command may last 600)

# ---------------------------------------------------------------------------
# The workloads. Each is a function that raises Skip when it cannot run here,
# raises anything else (AssertionError from Checks.finish) when it fails and
# returns when it passes. They run in the worker process (--run NAME), which
# sets MODE and SEED.

MODE = "native"
SEED = 0


class Skip(Exception):
    pass


class Workload:
    def __init__(self, name, fn, env=None, timeout=DEFAULT_TIMEOUT):
        self.name, self.fn, self.env, self.timeout = name, fn, env or {}, timeout


WORKLOADS = []


def workload(name, env=None, timeout=DEFAULT_TIMEOUT):
    def register(fn):
        WORKLOADS.append(Workload(name, fn, env, timeout))
        return fn
    return register


def no_device(why):
    # Natively a machine without a usable device skips; under openmps the
    # device is there (the native run sees it), so not seeing it is the bug.
    if MODE == "openmps":
        raise RuntimeError(f"no usable CUDA device under openmps: {why}")
    raise Skip(why)


def _numpy():
    try:
        import numpy as np
    except ImportError as e:
        raise Skip(f"cannot import numpy ({e})")
    return np


def as_numpy(x):
    """A float64 (or complex128) NumPy copy of a torch tensor, CuPy array or array-like."""
    np = _numpy()
    mod = type(x).__module__
    if mod.startswith("torch"):
        import torch
        t = x.detach().cpu()
        if t.is_complex():
            t = t.to(torch.complex128)
        elif t.is_floating_point():
            t = t.double() if t.dtype == torch.float64 else t.float().double()   # fp8 converts only to float32
        else:
            t = t.to(torch.int64).double()
        return t.numpy()
    if mod.startswith("cupy"):
        import cupy
        x = cupy.asnumpy(x)
    a = np.asarray(x)
    return a.astype(np.complex128 if np.iscomplexobj(a) else np.float64)


class Checks:
    """Collects checks, prints each, and fails at the end if any was wrong."""

    def __init__(self):
        self.wrong = []

    def _report(self, name, ok, detail):
        print(f"  {name}: {'ok' if ok else 'WRONG'}{f' ({detail})' if detail else ''}", flush=True)
        if not ok:
            self.wrong.append(f"{name} ({detail})" if detail else name)
        return ok

    def close(self, name, got, want, rtol, atol=0.0):
        """max |got - want| <= atol + rtol * max |want|: errors measured against
        the size of the result, the way rounding errors of sums grow."""
        np = _numpy()
        g, w = as_numpy(got), as_numpy(want)
        if g.shape != w.shape:
            return self._report(name, False, f"shape {g.shape}, expected {w.shape}")
        if not np.all(np.isfinite(g)):
            return self._report(name, False, f"{int(np.size(g) - np.isfinite(g).sum())} values not finite")
        err = float(np.max(np.abs(g - w))) if g.size else 0.0
        tol = atol + rtol * (float(np.max(np.abs(w))) if w.size else 0.0)
        return self._report(name, err <= tol, f"max error {err:.3g}, allowed {tol:.3g}")

    def equal(self, name, got, want):
        np = _numpy()
        g, w = as_numpy(got), as_numpy(want)
        if g.shape != w.shape:
            return self._report(name, False, f"shape {g.shape}, expected {w.shape}")
        bad = int(np.sum(g != w))
        return self._report(name, bad == 0, f"{bad} of {g.size} differ" if bad else "")

    def true(self, name, cond, detail=""):
        return self._report(name, bool(cond), detail)

    def finish(self):
        if self.wrong:
            raise AssertionError(f"{len(self.wrong)} check(s) wrong: " + "; ".join(self.wrong))


# ------------------------------------------------------------------ PyTorch

def _torch():
    try:
        import torch
    except ImportError as e:
        raise Skip(f"cannot import torch ({e})")
    _numpy()
    if not torch.cuda.is_available():
        no_device("torch.cuda.is_available() is False")
    # float32 means float32 unless a workload asks for TF32.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_num_threads(4)   # the CPU references; two workers share the machine
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, device {torch.cuda.get_device_name(0)}",
          flush=True)
    return torch


def _gen(torch):
    """The CPU generator every input is drawn from: fresh each run, from SEED."""
    return torch.Generator().manual_seed(SEED)


def _transformer(torch, g):
    nn = torch.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Linear(16, 64)
            layer = nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, dropout=0.0,
                                               batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
            self.head = nn.Linear(64, 10)

        def forward(self, x):
            return self.head(self.encoder(self.embed(x)).mean(dim=1))

    x = torch.randn(16, 32, 16, generator=g)
    y = torch.randint(0, 10, (16,), generator=g)
    return Net(), x, y


def _cnn(torch, g):
    nn = torch.nn
    net = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
    x = torch.randn(32, 3, 32, 32, generator=g)
    y = torch.randint(0, 10, (32,), generator=g)
    return net, x, y


# precision: (autocast dtype, TF32 on, inference tolerance, training tolerance),
# tolerances relative to the largest value of the float64 reference.
PRECISIONS = {
    "fp32": (None, False, 1e-4, 1e-4),
    "tf32": (None, True, 1e-2, 1e-2),
    "fp16-autocast": ("float16", False, 2e-2, 1e-2),
    "bf16-autocast": ("bfloat16", False, 6e-2, 3e-2),
}
TRAIN_STEPS = 10
LR = {"transformer": 0.05, "cnn": 0.1}


def _train(torch, model, x, y, amp, lr, fp16=False):
    """TRAIN_STEPS of SGD on one batch; the loss before each step, as float64 on the CPU."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    scaler = None
    if fp16:
        scale_args = dict(init_scale=1024.0, growth_interval=1000)
        scaler = (torch.amp.GradScaler("cuda", **scale_args) if hasattr(torch.amp, "GradScaler")
                  else torch.cuda.amp.GradScaler(**scale_args))
    losses = []
    for _ in range(TRAIN_STEPS):
        opt.zero_grad(set_to_none=True)
        with amp():
            out = model(x)
            loss = torch.nn.functional.cross_entropy(out.to(torch.promote_types(out.dtype, torch.float32)), y)
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        losses.append(loss.detach().double())
    losses = torch.stack(losses).cpu()
    if scaler and scaler.get_scale() != 1024.0:
        raise AssertionError(f"GradScaler skipped steps (inf or NaN gradients): scale {scaler.get_scale()}")
    return losses


def model_cell(kind, prec):
    """One cell of the model table: inference and TRAIN_STEPS of training of a
    small model at one precision, each against the same model in float64 on
    the CPU, from the same weights and inputs."""
    torch = _torch()
    cast, tf32, infer_tol, train_tol = PRECISIONS[prec]
    if cast == "bfloat16" and not torch.cuda.is_bf16_supported():
        raise Skip("bf16 is not supported on this device")
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = kind == "cnn"   # cuDNN tries its algorithms: more kernels, more memory
    g = _gen(torch)
    torch.manual_seed(SEED)
    model, x, y = (_transformer if kind == "transformer" else _cnn)(torch, g)
    ref = copy.deepcopy(model).double()
    dev = copy.deepcopy(model).cuda()
    amp = (lambda: torch.autocast("cuda", dtype=getattr(torch, cast))) if cast else contextlib.nullcontext
    xd, yd = x.cuda(), y.cuda()
    c = Checks()

    dev.eval()
    ref.eval()
    with torch.inference_mode():
        with amp():
            got = dev(xd)
        want = ref(x.double())
    c.close(f"inference, batch of {len(x)}", got, want, rtol=infer_tol)

    dev.train()
    ref.train()
    got = _train(torch, dev, xd, yd, amp, LR[kind], fp16=cast == "float16")
    want = _train(torch, ref, x.double(), y, contextlib.nullcontext, LR[kind])
    print(f"  losses: {' '.join(f'{v:.4f}' for v in got.tolist())}")
    c.close(f"{TRAIN_STEPS} training steps, loss before each", got, want, rtol=train_tol)
    c.true("training lowers the loss", got[-1] < got[0], f"{got[0]:.4f} -> {got[-1]:.4f}")
    torch.cuda.synchronize()
    c.finish()


for _kind in ("transformer", "cnn"):
    for _prec in PRECISIONS:
        workload(f"torch {_kind} {_prec}")(lambda k=_kind, p=_prec: model_cell(k, p))


@workload("torch cuda graph")
def torch_cuda_graph():
    """Capture of an inference and of a whole training step (forward, backward,
    optimizer), replayed on new inputs and compared with eager execution."""
    torch = _torch()
    nn = torch.nn
    g = _gen(torch)
    torch.manual_seed(SEED)
    c = Checks()
    model = nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 256), nn.LayerNorm(256)).cuda()
    ref = copy.deepcopy(model).cpu().double()
    static_in = torch.randn(64, 256, generator=g).cuda()

    side = torch.cuda.Stream()   # warm-up on a side stream, as capture wants
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad():
        for _ in range(3):
            model(static_in)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(graph):
        static_out = model(static_in)
    for i in range(3):
        x = torch.randn(64, 256, generator=g)
        static_in.copy_(x.cuda())
        graph.replay()
        with torch.no_grad():
            eager = model(x.cuda())
            want = ref(x.double())
        c.close(f"inference replay {i} vs eager", static_out, eager, rtol=1e-5)
        c.close(f"inference replay {i} vs float64 CPU", static_out, want, rtol=1e-4)

    # A whole training step in one graph; a copy trained eagerly alongside.
    loss_fn = nn.MSELoss()
    static_x = torch.randn(64, 256, generator=g).cuda()
    static_t = torch.randn(64, 256, generator=g).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            loss_fn(model(static_x), static_t).backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(side)
    eager = copy.deepcopy(model)
    eager_opt = torch.optim.SGD(eager.parameters(), lr=0.1)
    step = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(step):
        static_loss = loss_fn(model(static_x), static_t)
        static_loss.backward()
        opt.step()
    for i in range(3):
        x, t = torch.randn(64, 256, generator=g).cuda(), torch.randn(64, 256, generator=g).cuda()
        static_x.copy_(x)
        static_t.copy_(t)
        step.replay()
        eager_opt.zero_grad(set_to_none=True)
        loss = loss_fn(eager(x), t)
        loss.backward()
        eager_opt.step()
        c.close(f"training step replay {i}: loss vs eager", static_loss, loss, rtol=1e-4)
    c.close("weights after 3 graphed vs 3 eager steps", model[0].weight, eager[0].weight, rtol=1e-4)
    torch.cuda.synchronize()
    c.finish()


@workload("torch compile reduce-overhead", timeout=360)
def torch_compile():
    """torch.compile(mode="reduce-overhead"): Inductor's Triton kernels run
    through CUDA graphs; compared with the same function run eagerly."""
    torch = _torch()
    try:
        from torch.utils._triton import has_triton
    except ImportError:
        raise Skip("torch.utils._triton is missing")
    if not has_triton():
        raise Skip("Triton is not available")
    nn = torch.nn
    g = _gen(torch)
    torch.manual_seed(SEED)
    model = nn.Sequential(nn.Linear(128, 256), nn.GELU(), nn.Linear(256, 128), nn.LayerNorm(128)).cuda().eval()

    def fn(x):
        return model(x).relu() * 2 + torch.sin(x) * x.sum(dim=1, keepdim=True).tanh()

    compiled = torch.compile(fn, mode="reduce-overhead")
    c = Checks()
    with torch.no_grad():
        for i in range(5):
            x = torch.randn(32, 128, generator=g).cuda()
            got = compiled(x).clone()   # CUDA graph outputs are overwritten by the next replay
            c.close(f"call {i} vs eager", got, fn(x), rtol=1e-4)
    torch.cuda.synchronize()
    c.finish()


@workload("triton tma descriptors", timeout=240)
def triton_tma():
    """Triton kernels that load and store through host-built tensor maps
    (TensorDescriptor: the launcher calls cuTensorMapEncodeTiled before each
    launch), as Hopper matmuls do: a copy with a scale, checked exactly, and
    an fp16 matmul over K in steps, against torch.matmul."""
    torch = _torch()
    try:
        import triton
        import triton.language as tl
        from triton.tools.tensor_descriptor import TensorDescriptor
    except ImportError as e:
        raise Skip(f"Triton with host tensor descriptors is missing ({e})")
    if torch.cuda.get_device_capability()[0] < 9:
        raise Skip("tensor maps need compute capability 9.0")

    @triton.jit
    def scale(src, dst, alpha, BM: tl.constexpr, BN: tl.constexpr):
        m = tl.program_id(0) * BM
        n = tl.program_id(1) * BN
        dst.store([m, n], src.load([m, n]) * alpha)

    @triton.jit
    def matmul(a, b, c, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        m = tl.program_id(0) * BM
        n = tl.program_id(1) * BN
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, K, BK):
            acc = tl.dot(a.load([m, k]), b.load([k, n]), acc)
        c.store([m, n], acc.to(tl.float16))

    g = _gen(torch)
    c = Checks()
    x = torch.randn(1000, 520, generator=g).cuda()   # edges that are not whole boxes
    y = torch.empty_like(x)
    grid = (triton.cdiv(1000, 64), triton.cdiv(520, 64))
    for i in range(20):
        y.zero_()
        scale[grid](TensorDescriptor.from_tensor(x, [64, 64]), TensorDescriptor.from_tensor(y, [64, 64]),
                    1.5 + i, BM=64, BN=64)
        c.equal(f"scale {i}", y, x * (1.5 + i))
    a = torch.randn(512, 384, generator=g).half().cuda()
    b = torch.randn(384, 256, generator=g).half().cuda()
    out = torch.empty(512, 256, dtype=torch.float16, device="cuda")
    matmul[(512 // 128, 256 // 64)](TensorDescriptor.from_tensor(a, [128, 64]), TensorDescriptor.from_tensor(b, [64, 64]),
                                    TensorDescriptor.from_tensor(out, [128, 64]), 384, BM=128, BN=64, BK=64)
    c.close("matmul fp16", out.float(), a.float() @ b.float(), rtol=2e-2, atol=5e-2)
    torch.cuda.synchronize()
    c.finish()


@workload("torch fft")
def torch_fft():
    torch = _torch()
    np = _numpy()
    g = _gen(torch)
    c = Checks()
    for dtype, tol in ((torch.complex64, 1e-5), (torch.complex128, 1e-12)):
        x = torch.randn(8, 4096, dtype=dtype, generator=g)
        xn = as_numpy(x)
        xd = x.cuda()
        c.close(f"fft {dtype}", torch.fft.fft(xd), np.fft.fft(xn), rtol=tol)
        c.close(f"ifft(fft) {dtype}", torch.fft.ifft(torch.fft.fft(xd)), xn, rtol=tol)
        c.close(f"fft n=1000 {dtype}", torch.fft.fft(xd[:, :1000]), np.fft.fft(xn[:, :1000]), rtol=tol)
        c.close(f"fft2 {dtype}", torch.fft.fft2(xd.reshape(64, 512)), np.fft.fft2(xn.reshape(64, 512)), rtol=tol)
    for dtype, tol in ((torch.float32, 1e-5), (torch.float64, 1e-12)):
        r = torch.randn(16, 3000, dtype=dtype, generator=g)
        rn = as_numpy(r)
        rd = r.cuda()
        c.close(f"rfft {dtype}", torch.fft.rfft(rd), np.fft.rfft(rn), rtol=tol)
        c.close(f"irfft(rfft) {dtype}", torch.fft.irfft(torch.fft.rfft(rd), n=3000), rn, rtol=tol)
        c.close(f"rfftn {dtype}", torch.fft.rfftn(rd.reshape(4, 4, 3000)), np.fft.rfftn(rn.reshape(4, 4, 3000)),
                rtol=tol)
    torch.cuda.synchronize()
    c.finish()


@workload("torch sparse")
def torch_sparse():
    torch = _torch()
    g = _gen(torch)
    c = Checks()
    a = torch.randn(1024, 512, generator=g)
    a = a * (torch.rand(1024, 512, generator=g) < 0.05)   # about 5% non-zero
    b = torch.randn(512, 64, generator=g)
    v = torch.randn(512, 1, generator=g)
    want = a.double() @ b.double()
    coo = a.cuda().to_sparse()
    csr = a.cuda().to_sparse_csr()
    bd = b.cuda()
    c.true("COO has the non-zeros", coo._nnz() == int((a != 0).sum()), f"{coo._nnz()} stored")
    c.close("torch.sparse.mm(COO, dense)", torch.sparse.mm(coo, bd), want, rtol=1e-5)
    c.close("torch.sparse.mm(CSR, dense)", torch.sparse.mm(csr, bd), want, rtol=1e-5)
    c.close("CSR @ vector", csr @ v.cuda(), a.double() @ v.double(), rtol=1e-5)
    at = a.t().contiguous()
    prod = torch.sparse.mm(coo, at.cuda().to_sparse())
    c.close("torch.sparse.mm(COO, COO)", prod.to_dense(), a.double() @ at.double(), rtol=1e-5)
    c.close("COO to dense", coo.to_dense(), a, rtol=0)
    c.close("CSR to dense", csr.to_dense(), a, rtol=0)
    torch.cuda.synchronize()
    c.finish()


@workload("torch linalg")
def torch_linalg():
    torch = _torch()
    g = _gen(torch)
    c = Checks()
    n = 128
    for dtype, tol in ((torch.float32, 1e-4), (torch.float64, 1e-10)):
        a = torch.randn(n, n, dtype=dtype, generator=g)
        shifted = a + n * torch.eye(n, dtype=dtype)         # well conditioned
        spd = a @ a.T + n * torch.eye(n, dtype=dtype)       # symmetric positive definite
        sym = (a + a.T) / 2
        rhs = torch.randn(n, 8, dtype=dtype, generator=g)
        a64, s64, spd64, sym64, rhs64 = (t.double() for t in (a, shifted, spd, sym, rhs))
        ad, sd, spdd, symd = a.cuda(), shifted.cuda(), spd.cuda(), sym.cuda()
        eye = torch.eye(n, dtype=torch.float64)
        name = str(dtype).replace("torch.", "")

        c.close(f"solve {name}", torch.linalg.solve(sd, rhs.cuda()), torch.linalg.solve(s64, rhs64), rtol=tol)
        batch = torch.randn(16, 32, 32, dtype=dtype, generator=g) + 32 * torch.eye(32, dtype=dtype)
        brhs = torch.randn(16, 32, 2, dtype=dtype, generator=g)
        c.close(f"batched solve {name}", torch.linalg.solve(batch.cuda(), brhs.cuda()),
                torch.linalg.solve(batch.double(), brhs.double()), rtol=tol)
        c.close(f"cholesky {name}", torch.linalg.cholesky(spdd), torch.linalg.cholesky(spd64), rtol=tol)
        u, s, vh = torch.linalg.svd(ad, full_matrices=False)
        c.close(f"svd singular values {name}", s, torch.linalg.svdvals(a64), rtol=tol)
        c.close(f"svd U S Vh = A {name}", (u * s) @ vh, a64, rtol=tol)
        c.close(f"svd U orthogonal {name}", u.T @ u, eye, rtol=tol, atol=tol)
        w, vec = torch.linalg.eigh(symd)
        c.close(f"eigh eigenvalues {name}", w, torch.linalg.eigvalsh(sym64), rtol=tol)
        c.close(f"eigh V W V^T = A {name}", (vec * w) @ vec.T, sym64, rtol=tol)
        q, r = torch.linalg.qr(ad)
        c.close(f"qr Q R = A {name}", q @ r, a64, rtol=tol)
        c.close(f"qr Q orthogonal {name}", q.T @ q, eye, rtol=tol, atol=tol)
        c.close(f"qr R triangular {name}", torch.tril(r, diagonal=-1), torch.zeros(n, n), rtol=0, atol=0)
        inv = torch.linalg.inv(sd)
        c.close(f"inv {name}", inv, torch.linalg.inv(s64), rtol=tol)
        c.close(f"inv(A) A = I {name}", inv @ sd, eye, rtol=tol, atol=tol)
    torch.cuda.synchronize()
    c.finish()


@workload("torch random")
def torch_random():
    torch = _torch()
    c = Checks()
    n = 1 << 24
    x = torch.randn(n, device="cuda", dtype=torch.float64)
    mean, std = x.mean().item(), x.std().item()
    c.true("randn mean 0", abs(mean) < 6 / n ** 0.5, f"{mean:.2e}")
    c.true("randn std 1", abs(std - 1) < 6 / (2 * n) ** 0.5, f"{std:.6f}")
    inside = (x.abs() < 1).double().mean().item()   # 68.27% within one sigma
    c.true("randn within 1 sigma", abs(inside - 0.682689) < 6 * (0.6827 * 0.3173 / n) ** 0.5, f"{inside:.5f}")
    u = torch.rand(n, device="cuda")
    c.true("rand in [0, 1)", u.min().item() >= 0 and u.max().item() < 1)
    c.true("rand mean 1/2", abs(u.double().mean().item() - 0.5) < 6 * (1 / 12 / n) ** 0.5,
           f"{u.double().mean().item():.6f}")
    p = torch.randperm(100_000, device="cuda")
    c.equal("randperm is a permutation", p.sort().values, torch.arange(100_000))
    r = torch.randint(-5, 7, (1 << 20,), device="cuda")
    c.true("randint in range", r.min().item() == -5 and r.max().item() == 6)

    gen = torch.Generator(device="cuda")
    gen.manual_seed(SEED)
    a = torch.randn(4096, device="cuda", generator=gen)
    gen.manual_seed(SEED)
    b = torch.randn(4096, device="cuda", generator=gen)
    gen.manual_seed(SEED + 1)
    d = torch.randn(4096, device="cuda", generator=gen)
    c.equal("Generator: same seed, same numbers", a, b)
    c.true("Generator: another seed, other numbers", not torch.equal(a, d))
    torch.cuda.manual_seed(SEED)
    a = torch.rand(4096, device="cuda")
    state = torch.cuda.get_rng_state()
    b = torch.rand(4096, device="cuda")
    torch.cuda.manual_seed(SEED)
    c.equal("manual_seed: same numbers again", torch.rand(4096, device="cuda"), a)
    torch.cuda.set_rng_state(state)
    c.equal("get/set_rng_state: same numbers again", torch.rand(4096, device="cuda"), b)
    drop = torch.nn.functional.dropout(torch.ones(1 << 20, device="cuda"), p=0.25)
    kept = (drop != 0).double().mean().item()
    c.true("dropout keeps 3/4", abs(kept - 0.75) < 0.005, f"{kept:.4f}")
    torch.cuda.synchronize()
    c.finish()


@workload("torch fp8 matmul")
def torch_fp8():
    torch = _torch()
    if torch.cuda.get_device_capability() < (8, 9):
        raise Skip(f"fp8 needs sm_89 or newer, this is sm_{''.join(map(str, torch.cuda.get_device_capability()))}")
    if not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
        raise Skip("this torch has no torch._scaled_mm")
    g = _gen(torch)
    c = Checks()
    for m, k, n in ((64, 128, 96), (256, 512, 128)):
        a = (torch.randn(m, k, generator=g) / 2).to(torch.float8_e4m3fn)
        b = (torch.randn(n, k, generator=g) / 2).to(torch.float8_e4m3fn)
        bd = b.cuda().t()   # (k, n) column-major, as cuBLASLt wants it
        sa, sb = torch.tensor(1.5, device="cuda"), torch.tensor(0.75, device="cuda")
        # The products of fp8 values are exact in float64.
        want = (as_numpy(a) @ as_numpy(b).T) * 1.5 * 0.75
        for out_dtype, tol in ((torch.bfloat16, 1e-2), (torch.float32, 5e-3)):
            got = torch._scaled_mm(a.cuda(), bd, scale_a=sa, scale_b=sb, out_dtype=out_dtype)
            if isinstance(got, tuple):   # (out, amax) before torch 2.4
                got = got[0]
            c.close(f"_scaled_mm {m}x{k}x{n} -> {out_dtype}", got, want, rtol=tol)
    torch.cuda.synchronize()
    c.finish()


@workload("torch int8 matmul")
def torch_int8():
    torch = _torch()
    if not hasattr(torch, "_int_mm"):
        raise Skip("this torch has no torch._int_mm")
    g = _gen(torch)
    c = Checks()
    for m, k, n in ((32, 64, 32), (256, 512, 128)):
        a = torch.randint(-128, 128, (m, k), dtype=torch.int8, generator=g)
        b = torch.randint(-128, 128, (k, n), dtype=torch.int8, generator=g)
        got = torch._int_mm(a.cuda(), b.cuda())
        c.true(f"_int_mm {m}x{k}x{n} gives int32", got.dtype == torch.int32, str(got.dtype))
        c.equal(f"_int_mm {m}x{k}x{n}", got, a.long() @ b.long())
    torch.cuda.synchronize()
    c.finish()


def _allocator_churn(torch, c, g):
    """Tensors of many sizes allocated, written, computed on and freed, on two
    streams, each result checked; what both allocator workloads run."""
    side = torch.cuda.Stream()
    sizes = [1, 7, 512, 4096, 1 << 16, 3 << 18, 1 << 20, 5 << 20, 1 << 22, 3 << 22]
    kept = []
    for rnd in range(3):
        for i, size in enumerate(sizes):
            host = torch.randn(size, generator=g)
            stream = side if i % 2 else torch.cuda.current_stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                dev = host.cuda() * 2 + 1
                tmp = torch.empty(size * 2, device="cuda")   # freed at once: churn
                tmp.fill_(1.0)
                dev = dev * tmp[:size]
            torch.cuda.current_stream().wait_stream(stream)
            if stream is side:   # made on the side stream, used on the default one
                dev.record_stream(torch.cuda.current_stream())
            kept.append((host, dev))
        # Free every other tensor, then check the rest.
        for j, (host, dev) in enumerate(kept):
            if j % 2 == 0:
                c.equal(f"round {rnd}, {host.numel()} floats", dev, host * 2 + 1)
        kept = kept[1::2]
        torch.cuda.empty_cache()
    big = torch.randn(1 << 26, device="cuda")   # 256 MiB at once
    c.true("256 MiB tensor sums", abs(big.double().sum().item()) < 6 * (1 << 13), f"{big.double().sum().item():.1f}")
    del big, kept
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


@workload("torch cudaMallocAsync allocator", env={"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"})
def torch_malloc_async():
    torch = _torch()
    backend = torch.cuda.get_allocator_backend()
    c = Checks()
    if not c.true("allocator backend is cudaMallocAsync", backend == "cudaMallocAsync", backend):
        c.finish()
    _allocator_churn(torch, c, _gen(torch))
    free, total = torch.cuda.mem_get_info()
    c.true("mem_get_info", 0 < free <= total, f"{free >> 20} of {total >> 20} MiB free")
    c.finish()


@workload("torch expandable segments", env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
def torch_expandable():
    torch = _torch()
    c = Checks()
    _allocator_churn(torch, c, _gen(torch))
    # Growing allocations: an expandable segment maps more memory into one range.
    grow = []
    for i in range(1, 9):
        grow.append(torch.full((i << 20,), float(i), device="cuda"))
    c.equal("growing tensors", torch.stack([t.sum() for t in grow]).cpu(),
            torch.tensor([float(i * (i << 20)) for i in range(1, 9)]))
    segments = torch.cuda.memory_snapshot()
    print(f"  {len(segments)} segment(s), {torch.cuda.memory_reserved() >> 20} MiB reserved")
    del grow
    torch.cuda.empty_cache()
    torch.cuda.synchronize()
    c.finish()


@workload("torch pinned memory, non_blocking, side stream")
def torch_pinned():
    torch = _torch()
    g = _gen(torch)
    c = Checks()
    chunks = [torch.randn(1 << 20, generator=g).pin_memory() for _ in range(8)]
    c.true("pin_memory() is pinned", all(t.is_pinned() for t in chunks))
    results = [torch.empty(1 << 20, pin_memory=True) for _ in chunks]
    side = torch.cuda.Stream()
    done = []
    for host, back in zip(chunks, results):
        with torch.cuda.stream(side):
            dev = host.to("cuda", non_blocking=True)
            out = dev * 3 + 1
            back.copy_(out, non_blocking=True)
            ev = torch.cuda.Event()
            ev.record(side)
            done.append(ev)
    for ev in done:
        ev.synchronize()
    for i, (host, back) in enumerate(zip(chunks, results)):
        c.equal(f"chunk {i} back through pinned memory", back, host * 3 + 1)
    # A device-to-host copy into pageable memory with non_blocking: synchronous.
    dev = chunks[0].cuda(non_blocking=True)
    pageable = dev.to("cpu", non_blocking=True)
    torch.cuda.current_stream().synchronize()
    c.equal("non_blocking copy to pageable memory", pageable, chunks[0])
    # The default stream waits for the side stream by an event.
    with torch.cuda.stream(side):
        on_side = chunks[1].to("cuda", non_blocking=True) - 5
        ev = torch.cuda.Event()
        ev.record()
    torch.cuda.current_stream().wait_event(ev)
    c.equal("default stream after side stream's event", (on_side * 2).cpu(), (chunks[1] - 5) * 2)
    torch.cuda.synchronize()
    c.finish()


@workload("torch streams and events")
def torch_streams():
    torch = _torch()
    g = _gen(torch)
    c = Checks()
    n = 512
    streams = [torch.cuda.Stream() for _ in range(3)] + [torch.cuda.Stream(priority=-1)]
    mats = [torch.randn(n, n, generator=g) / n ** 0.5 for _ in streams]
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    events, outs = [], []
    for s, m in zip(streams, mats):
        s.wait_event(start)
        with torch.cuda.stream(s):
            x = m.cuda(non_blocking=True)
            y = x
            for _ in range(6):
                y = torch.tanh(y @ x)
            ev = torch.cuda.Event()
            ev.record()
        events.append(ev)
        outs.append(y)
    final = torch.cuda.Stream()
    for ev in events:
        final.wait_event(ev)
    with torch.cuda.stream(final):
        total = sum(outs)
        done = torch.cuda.Event()
        done.record()
    torch.cuda.current_stream().wait_stream(final)
    end.record()
    end.synchronize()
    c.true("event query after synchronize", done.query() and all(ev.query() for ev in events))
    elapsed = start.elapsed_time(end)
    c.true("elapsed_time is positive", elapsed > 0, f"{elapsed:.3f} ms")
    want = 0
    for m in mats:
        m = m.double()
        y = m
        for _ in range(6):
            y = torch.tanh(y @ m)
        want = want + y
    c.close("4 streams joined by events", total, want, rtol=1e-4)
    c.true("stream priority", streams[-1].priority == -1 or torch.cuda.Stream.priority_range()[1] == 0,
           f"priority {streams[-1].priority}, range {torch.cuda.Stream.priority_range()}")
    torch.cuda.synchronize()
    c.finish()


# --------------------------------------------------------------------- CuPy

def _cupy():
    try:
        import cupy as cp
    except ImportError as e:
        raise Skip(f"cannot import cupy ({e})")
    _numpy()
    try:
        n = cp.cuda.runtime.getDeviceCount()
    except cp.cuda.runtime.CUDARuntimeError as e:
        no_device(f"getDeviceCount: {e}")
    if n < 1:
        no_device("no device")
    name = cp.cuda.runtime.getDeviceProperties(0)["name"]
    name = name.decode() if isinstance(name, bytes) else name
    print(f"cupy {cp.__version__}, CUDA runtime {cp.cuda.runtime.runtimeGetVersion()}, device {name}", flush=True)
    return cp


def _rng():
    return _numpy().random.default_rng(SEED)


@workload("cupy elementwise")
def cupy_elementwise():
    cp = _cupy()
    np = _numpy()
    rng = _rng()
    c = Checks()
    x = rng.standard_normal(1 << 20).astype(np.float32)
    y = rng.standard_normal(1 << 20).astype(np.float32)
    xd, yd = cp.asarray(x), cp.asarray(y)
    c.close("x * y + 2", xd * yd + 2, x.astype(np.float64) * y + 2, rtol=1e-6)
    c.close("sin, exp", cp.sin(xd) + cp.exp(xd / 4), np.sin(x.astype(np.float64)) + np.exp(x / 4.0), rtol=1e-5)
    c.close("where", cp.where(xd > 0, xd, yd), np.where(x > 0, x, y), rtol=0)
    c.close("broadcast", xd.reshape(1024, 1024) + yd[:1024], x.reshape(1024, 1024) + y[:1024], rtol=1e-6)
    xi = rng.integers(-1 << 20, 1 << 20, 1 << 20)
    yi = rng.integers(1, 1 << 10, 1 << 20)
    c.equal("int64 xor, floor division", (cp.asarray(xi) ^ cp.asarray(yi)) + cp.asarray(xi) // cp.asarray(yi),
            (xi ^ yi) + xi // yi)
    z = (x + 1j * y).astype(np.complex128)
    c.close("complex128 z * conj(z) + z", cp.asarray(z) * cp.conj(cp.asarray(z)) + cp.asarray(z), z * np.conj(z) + z,
            rtol=1e-14)
    kern = cp.ElementwiseKernel("float32 x, float32 y", "float32 s, float32 d", "s = x + y; d = (x - y) * (x - y)",
                                "compat_sum_diff")
    s, d = kern(xd, yd)
    c.close("ElementwiseKernel, two outputs", cp.stack([s, d]), np.stack([x + y, (x - y) ** 2]), rtol=1e-5)

    @cp.fuse()
    def fused(a, b):
        return cp.tanh(a) * b + a

    c.close("cupy.fuse", fused(xd, yd), np.tanh(x.astype(np.float64)) * y + x, rtol=1e-5)
    cp.cuda.Device().synchronize()
    c.finish()


@workload("cupy reductions")
def cupy_reductions():
    cp = _cupy()
    np = _numpy()
    rng = _rng()
    c = Checks()
    a = rng.standard_normal((1000, 1500))
    ad = cp.asarray(a)
    for axis in (None, 0, 1):
        c.close(f"sum axis={axis}", ad.sum(axis=axis), a.sum(axis=axis), rtol=1e-12)
        c.close(f"mean axis={axis}", ad.mean(axis=axis), a.mean(axis=axis), rtol=1e-12)
        c.close(f"std axis={axis}", ad.std(axis=axis), a.std(axis=axis), rtol=1e-12)
        c.close(f"max axis={axis}", ad.max(axis=axis), a.max(axis=axis), rtol=0)
        c.equal(f"argmin axis={axis}", ad.argmin(axis=axis), a.argmin(axis=axis))
    f = a.astype(np.float32)
    c.close("float32 sum", cp.asarray(f).sum(), f.astype(np.float64).sum(), rtol=0, atol=1e-6 * np.abs(f).sum())
    c.close("cumsum", cp.cumsum(ad[0]), np.cumsum(a[0]), rtol=1e-12)
    c.true("any, all", bool(cp.any(ad > 4)) == bool(np.any(a > 4)) and bool(cp.all(ad < 100)))
    c.close("nansum", cp.nansum(cp.where(ad > 1, cp.nan, ad)), np.nansum(np.where(a > 1, np.nan, a)), rtol=1e-12)
    l2 = cp.ReductionKernel("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", "compat_l2norm")
    c.close("ReductionKernel L2 norm", l2(ad, axis=1), np.sqrt((a * a).sum(axis=1)), rtol=1e-12)
    xi = rng.integers(-1000, 1000, 3_000_001).astype(np.int32)
    c.equal("int32 sum as int64", cp.asarray(xi).sum(dtype=cp.int64), xi.sum(dtype=np.int64))
    try:   # CUB's device-wide reductions, where this CuPy has the switch
        from cupy._core import _accelerator
        old = _accelerator.get_reduction_accelerators()
        _accelerator.set_reduction_accelerators(["cub"])
        try:
            c.close("sum through CUB", ad.sum(), a.sum(), rtol=1e-12)
            c.close("max through CUB", cp.asarray(xi).max(), xi.max(), rtol=0)
        finally:
            _accelerator.set_reduction_accelerators(old)
    except ImportError:
        print("  (no cupy._core._accelerator: CUB not selected)")
    cp.cuda.Device().synchronize()
    c.finish()


@workload("cupy matmul fp16/fp32/fp64")
def cupy_matmul():
    cp = _cupy()
    np = _numpy()
    rng = _rng()
    c = Checks()
    for dtype, tol in ((np.float16, 2e-2), (np.float32, 1e-4), (np.float64, 1e-12)):
        a = rng.standard_normal((256, 384)).astype(dtype)
        b = rng.standard_normal((384, 200)).astype(dtype)
        want = a.astype(np.float64) @ b.astype(np.float64)   # of the rounded inputs
        c.close(f"matmul {np.dtype(dtype).name}", cp.asarray(a) @ cp.asarray(b), want, rtol=tol)
        bat = rng.standard_normal((8, 64, 96)).astype(dtype)
        bbt = rng.standard_normal((8, 96, 32)).astype(dtype)
        c.close(f"batched matmul {np.dtype(dtype).name}", cp.matmul(cp.asarray(bat), cp.asarray(bbt)),
                np.matmul(bat.astype(np.float64), bbt.astype(np.float64)), rtol=tol)
        v = rng.standard_normal(384).astype(dtype)
        c.close(f"matrix-vector {np.dtype(dtype).name}", cp.asarray(a) @ cp.asarray(v),
                a.astype(np.float64) @ v.astype(np.float64), rtol=tol)
    z = (rng.standard_normal((128, 128)) + 1j * rng.standard_normal((128, 128))).astype(np.complex64)
    c.close("matmul complex64", cp.asarray(z) @ cp.asarray(z), z.astype(np.complex128) @ z.astype(np.complex128),
            rtol=1e-4)
    cp.cuda.Device().synchronize()
    c.finish()


@workload("cupy fft")
def cupy_fft():
    cp = _cupy()
    np = _numpy()
    rng = _rng()
    c = Checks()
    for dtype, tol in ((np.complex64, 1e-5), (np.complex128, 1e-12)):
        x = (rng.standard_normal((8, 4096)) + 1j * rng.standard_normal((8, 4096))).astype(dtype)
        xd = cp.asarray(x)
        name = np.dtype(dtype).name
        c.close(f"fft {name}", cp.fft.fft(xd), np.fft.fft(x.astype(np.complex128)), rtol=tol)
        c.close(f"ifft(fft) {name}", cp.fft.ifft(cp.fft.fft(xd)), x, rtol=tol)
        c.close(f"fft n=1000 {name}", cp.fft.fft(xd[:, :1000]), np.fft.fft(x[:, :1000].astype(np.complex128)),
                rtol=tol)
        c.close(f"fft2 {name}", cp.fft.fft2(xd.reshape(64, 512)), np.fft.fft2(x.reshape(64, 512).astype(np.complex128)),
                rtol=tol)
        c.close(f"fftn {name}", cp.fft.fftn(xd.reshape(8, 64, 64)),
                np.fft.fftn(x.reshape(8, 64, 64).astype(np.complex128)), rtol=tol)
    for dtype, tol in ((np.float32, 1e-5), (np.float64, 1e-12)):
        r = rng.standard_normal((16, 3000)).astype(dtype)
        rd = cp.asarray(r)
        name = np.dtype(dtype).name
        c.close(f"rfft {name}", cp.fft.rfft(rd), np.fft.rfft(r.astype(np.float64)), rtol=tol)
        c.close(f"irfft(rfft) {name}", cp.fft.irfft(cp.fft.rfft(rd), n=3000), r, rtol=tol)
    cp.cuda.Device().synchronize()
    c.finish()


@workload("cupy sparse")
def cupy_sparse():
    cp = _cupy()
    np = _numpy()
    try:
        import scipy.sparse as sps
        import cupyx.scipy.sparse as csp
        import cupyx.scipy.sparse.linalg as cspl
    except ImportError as e:
        raise Skip(f"cannot import scipy.sparse or cupyx.scipy.sparse ({e})")
    rng = _rng()
    c = Checks()
    a = sps.random(2000, 1500, density=0.01, format="csr", dtype=np.float64, random_state=rng) * 2 - \
        sps.random(2000, 1500, density=0.01, format="csr", dtype=np.float64, random_state=rng)
    a = a.tocsr()
    b = sps.random(1500, 800, density=0.02, format="csr", dtype=np.float64, random_state=rng)
    x = rng.standard_normal(1500)
    xm = rng.standard_normal((1500, 16))
    ad, bd = csp.csr_matrix(a), csp.csr_matrix(b)
    c.true("nnz kept", ad.nnz == a.nnz, f"{ad.nnz} vs {a.nnz}")
    c.close("CSR @ vector", ad @ cp.asarray(x), a @ x, rtol=1e-12)
    c.close("CSR @ dense matrix", ad @ cp.asarray(xm), a @ xm, rtol=1e-12)
    c.close("CSR.T @ vector", ad.T @ cp.asarray(a @ x), a.T @ (a @ x), rtol=1e-12)
    c.close("CSR @ CSR", (ad @ bd).toarray(), (a @ b).toarray(), rtol=1e-12)
    c.close("CSR + CSR", (ad + ad * 3).toarray(), (a + a * 3).toarray(), rtol=1e-12)
    c.close("CSR to COO to CSC", ad.tocoo().tocsc().toarray(), a.toarray(), rtol=0)
    c.close("sum over rows", ad.sum(axis=0), a.sum(axis=0), rtol=1e-12)
    # Conjugate gradient on a sparse symmetric positive definite system.
    m = (a[:, :1500].T @ a[:, :1500] + sps.identity(1500) * 5).tocsr()
    rhs = rng.standard_normal(1500)
    try:
        sol, info = cspl.cg(csp.csr_matrix(m), cp.asarray(rhs), rtol=1e-10, maxiter=2000)
    except TypeError:   # CuPy before 14 calls it tol
        sol, info = cspl.cg(csp.csr_matrix(m), cp.asarray(rhs), tol=1e-10, maxiter=2000)
    c.true("cg converged", info == 0, f"info {info}")
    c.close("cg solution: M x = b", csp.csr_matrix(m) @ sol, rhs, rtol=1e-7)
    cp.cuda.Device().synchronize()
    c.finish()


@workload("cupy linalg")
def cupy_linalg():
    cp = _cupy()
    np = _numpy()
    rng = _rng()
    c = Checks()
    n = 128
    for dtype, tol in ((np.float32, 1e-4), (np.float64, 1e-10)):
        a = rng.standard_normal((n, n)).astype(dtype)
        shifted = (a + n * np.eye(n)).astype(dtype)
        spd = (a @ a.T + n * np.eye(n)).astype(dtype)
        sym = ((a + a.T) / 2).astype(dtype)
        rhs = rng.standard_normal((n, 4)).astype(dtype)
        a64, s64, spd64, sym64 = (m.astype(np.float64) for m in (a, shifted, spd, sym))
        name = np.dtype(dtype).name
        eye = np.eye(n)
        c.close(f"solve {name}", cp.linalg.solve(cp.asarray(shifted), cp.asarray(rhs)),
                np.linalg.solve(s64, rhs.astype(np.float64)), rtol=tol)
        c.close(f"inv {name}", cp.linalg.inv(cp.asarray(shifted)), np.linalg.inv(s64), rtol=tol)
        c.close(f"cholesky {name}", cp.linalg.cholesky(cp.asarray(spd)), np.linalg.cholesky(spd64), rtol=tol)
        q, r = cp.linalg.qr(cp.asarray(a))
        c.close(f"qr Q R = A {name}", q @ r, a64, rtol=tol)
        c.close(f"qr Q orthogonal {name}", q.T @ q, eye, rtol=tol, atol=tol)
        u, s, vh = cp.linalg.svd(cp.asarray(a), full_matrices=False)
        c.close(f"svd singular values {name}", s, np.linalg.svd(a64, compute_uv=False), rtol=tol)
        c.close(f"svd U S Vh = A {name}", (u * s) @ vh, a64, rtol=tol)
        w, v = cp.linalg.eigh(cp.asarray(sym))
        c.close(f"eigh eigenvalues {name}", w, np.linalg.eigvalsh(sym64), rtol=tol)
        c.close(f"eigh V W V^T = A {name}", (v * w) @ v.T, sym64, rtol=tol)
        c.close(f"det {name}", cp.linalg.slogdet(cp.asarray(shifted))[1], np.linalg.slogdet(s64)[1], rtol=tol)
        tall = rng.standard_normal((300, 20)).astype(dtype)
        y = rng.standard_normal(300).astype(dtype)
        c.close(f"lstsq {name}", cp.linalg.lstsq(cp.asarray(tall), cp.asarray(y), rcond=None)[0],
                np.linalg.lstsq(tall.astype(np.float64), y.astype(np.float64), rcond=None)[0], rtol=tol * 10)
    cp.cuda.Device().synchronize()
    c.finish()


@workload("cupy random")
def cupy_random():
    cp = _cupy()
    c = Checks()
    n = 1 << 24
    cp.random.seed(SEED)
    x = cp.random.standard_normal(n, dtype=cp.float64)
    mean, std = float(x.mean()), float(x.std())
    c.true("standard_normal mean 0", abs(mean) < 6 / n ** 0.5, f"{mean:.2e}")
    c.true("standard_normal std 1", abs(std - 1) < 6 / (2 * n) ** 0.5, f"{std:.6f}")
    u = cp.random.random(n)
    c.true("random in [0, 1)", float(u.min()) >= 0 and float(u.max()) < 1)
    c.true("random mean 1/2", abs(float(u.mean()) - 0.5) < 6 * (1 / 12 / n) ** 0.5, f"{float(u.mean()):.6f}")
    r = cp.random.randint(-5, 7, 1 << 20)
    c.true("randint in range", int(r.min()) == -5 and int(r.max()) == 6)
    c.equal("permutation", cp.sort(cp.random.permutation(100_000)), _numpy().arange(100_000))
    rs1, rs2 = cp.random.RandomState(SEED), cp.random.RandomState(SEED)
    c.equal("RandomState: same seed, same numbers", rs1.normal(size=4096), rs2.normal(size=4096))
    c.true("RandomState: another seed, other numbers",
           not bool(cp.all(cp.random.RandomState(SEED + 1).normal(size=4096) == rs1.normal(size=4096))))
    g1, g2 = cp.random.default_rng(SEED), cp.random.default_rng(SEED)
    c.equal("default_rng: same seed, same numbers", g1.standard_normal(4096), g2.standard_normal(4096))
    e = g1.exponential(size=n)
    c.true("default_rng exponential mean 1", abs(float(e.mean()) - 1) < 6 / n ** 0.5, f"{float(e.mean()):.6f}")
    cp.cuda.Device().synchronize()
    c.finish()


@workload("cupy RawKernel (NVRTC)")
def cupy_rawkernel():
    cp = _cupy()
    np = _numpy()
    rng = _rng()
    c = Checks()
    # The seed in the source: NVRTC compiles a new program every run.
    src = r"""
    extern "C" __global__ void compat_saxpy_%d(const float *x, float *y, float a, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = a * x[i] + y[i];
    }
    extern "C" __global__ void compat_block_sum(const double *x, double *out, int n) {
        extern __shared__ double part[];
        double s = 0;
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) s += x[i];
        part[threadIdx.x] = s;
        __syncthreads();
        for (int w = blockDim.x / 2; w > 0; w /= 2) {
            if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
            __syncthreads();
        }
        if (threadIdx.x == 0) atomicAdd(out, part[0]);
    }
    template<typename T> __global__ void compat_scale(T *x, T a, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) x[i] *= a;
    }
    """ % (SEED % 100000)
    n = 1 << 20
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    saxpy = cp.RawKernel(src, f"compat_saxpy_{SEED % 100000}")
    yd = cp.asarray(y)
    saxpy((n // 256,), (256,), (cp.asarray(x), yd, cp.float32(2.5), cp.int32(n)))
    c.close("RawKernel saxpy", yd, 2.5 * x.astype(np.float64) + y, rtol=1e-6)
    mod = cp.RawModule(code=src, options=("-std=c++17",),
                       name_expressions=("compat_scale<float>", "compat_scale<double>"))
    d = rng.standard_normal(n)
    dd = cp.asarray(d)
    out = cp.zeros(1, dtype=cp.float64)
    mod.get_function("compat_block_sum")((120,), (256,), (dd, out, cp.int32(n)), shared_mem=256 * 8)
    c.close("RawModule block sum, dynamic shared memory, atomicAdd", out[0], d.sum(), rtol=1e-12)
    mod.get_function("compat_scale<double>")((n // 256,), (256,), (dd, cp.float64(-3.0), cp.int32(n)))
    c.close("RawModule template, double", dd, -3.0 * d, rtol=0)
    xf = cp.asarray(x)
    mod.get_function("compat_scale<float>")((n // 256,), (256,), (xf, cp.float32(0.5), cp.int32(n)))
    c.close("RawModule template, float", xf, 0.5 * x, rtol=0)
    attrs = saxpy.attributes
    c.true("kernel attributes", attrs.get("max_threads_per_block", 0) >= 256, f"{attrs.get('max_threads_per_block')}")
    cp.cuda.Device().synchronize()
    c.finish()


@workload("cupy cuda graph")
def cupy_graph():
    cp = _cupy()
    np = _numpy()
    rng = _rng()
    c = Checks()
    a0 = rng.random(100_000)
    a = cp.asarray(a0)
    cp.fft.fft(a * 2)   # the FFT plan exists before capture
    cp.cuda.Device().synchronize()
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        s.begin_capture()
        out = cp.sqrt(3 * cp.sin(a) + 4) * 7.5
        spec = cp.fft.fft(a * 2)
        graph = s.end_capture()
        graph.launch()
    s.synchronize()

    def want(v):
        return np.sqrt(3 * np.sin(v) + 4) * 7.5, np.fft.fft(v * 2)
    w_out, w_spec = want(a0)
    c.close("graph launch: elementwise", out, w_out, rtol=1e-12)
    c.close("graph launch: fft", spec, w_spec, rtol=1e-12)
    for i in range(3):   # new input written in place; replay sees it
        a1 = rng.random(100_000)
        a.set(a1)
        cp.cuda.Device().synchronize()
        with s:
            graph.launch()
        s.synchronize()
        w_out, w_spec = want(a1)
        c.close(f"replay {i}: elementwise", out, w_out, rtol=1e-12)
        c.close(f"replay {i}: fft", spec, w_spec, rtol=1e-12)
    s2 = cp.cuda.Stream(non_blocking=True)
    a.set(a0)
    cp.cuda.Device().synchronize()
    with s2:
        graph.launch()
    s2.synchronize()
    c.close("launch on another stream", out, want(a0)[0], rtol=1e-12)
    c.finish()


@workload("cupy MemoryAsyncPool (malloc_async)")
def cupy_async_pool():
    cp = _cupy()
    rt = cp.cuda.runtime
    if not rt.deviceGetAttribute(getattr(rt, "cudaDevAttrMemoryPoolsSupported", 115), cp.cuda.Device().id):
        no_device("the device does not support memory pools")
    rng = _rng()
    c = Checks()
    pool = cp.cuda.MemoryAsyncPool()
    cp.cuda.set_allocator(pool.malloc)
    try:
        streams = [cp.cuda.Stream(non_blocking=True) for _ in range(3)]
        kept = []
        for rnd in range(3):
            for i, size in enumerate((1, 100, 4096, 1 << 16, 1 << 20, 3 << 20, 1 << 23)):
                host = rng.standard_normal(size)
                with streams[i % 3]:
                    d = cp.asarray(host)
                    tmp = cp.full(size * 2, 1.0)   # freed at once: stream-ordered churn
                    d = d * 2 * tmp[:size]
                    del tmp
                kept.append((streams[i % 3], host, d))
            for j, (stream, host, d) in enumerate(kept):
                if j % 2 == 0:
                    stream.synchronize()
                    c.equal(f"round {rnd}, {host.size} doubles", d, host * 2)
            kept = kept[1::2]
        used = pool.used_bytes()
        c.true("pool.used_bytes", used > 0, f"{used} bytes")
        del kept, d
        for s in streams:
            s.synchronize()
        pool.free_all_blocks()
        c.true("pool.total_bytes after free_all_blocks", pool.total_bytes() >= 0, f"{pool.total_bytes()} bytes")
        # malloc_async directly, without the pool object.
        cp.cuda.set_allocator(cp.cuda.memory.malloc_async)
        v = rng.standard_normal(1 << 18)
        c.close("malloc_async allocator", cp.asarray(v).sum(), v.sum(), rtol=1e-12)
    finally:
        cp.cuda.set_allocator(cp.cuda.MemoryPool().malloc)
    cp.cuda.Device().synchronize()
    c.finish()


# ---------------------------------------------------------------------------
# The worker: runs one workload in this process.

def worker(name):
    global MODE, SEED
    MODE = os.environ.get("COMPAT_MODE", "native")
    SEED = int(os.environ.get("COMPAT_SEED") or int.from_bytes(os.urandom(4), "little"))
    w = {w.name: w for w in WORKLOADS}.get(name)
    if w is None:
        print(f"FAIL: no workload named {name!r}")
        return 2
    print(f"{name} ({MODE}, seed {SEED})", flush=True)
    try:
        w.fn()
    except Skip as e:
        print(f"SKIP: {e}", flush=True)
        return SKIP_RC
    except BaseException as e:   # noqa: B902 - anything at all is a failure
        traceback.print_exc()
        msg = " ".join(str(e).split())
        print(f"FAIL: {type(e).__name__}: {msg[:400]}", flush=True)
        return 1
    print("PASS", flush=True)
    return 0


# ---------------------------------------------------------------------------
# The driver: the daemon, the runs, the table.

class Daemon:
    """An openmps daemon in private directories: started, restarted, quit."""

    def __init__(self, work, driver):
        self.pipe, self.log = work / "om-pipe", work / "om-log"
        self.out = work / "om-daemon.out"
        self.ctl = ROOT / "build" / "bin" / "openmps-control"
        self.env = dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=str(self.pipe), CUDA_MPS_LOG_DIRECTORY=str(self.log),
                        OPENMPS_DRIVER=driver)
        self.up = False
        self.served = False
        self.pids = set()

    def control(self, *args, stdin=""):
        try:
            r = subprocess.run([str(self.ctl), *args], input=stdin, env=self.env, capture_output=True, text=True,
                               timeout=20)
            return r.returncode, r.stdout
        except (OSError, subprocess.TimeoutExpired) as e:
            return -1, str(e)

    def start(self):
        self.pipe.mkdir(parents=True, exist_ok=True)
        self.log.mkdir(parents=True, exist_ok=True)
        # The daemon's output goes to a file, so it never holds ours open.
        with open(self.out, "ab") as out:
            try:
                rc = subprocess.run([str(self.ctl), "-d"], stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                    env=self.env, timeout=30).returncode
            except (OSError, subprocess.TimeoutExpired) as e:
                return f"openmps-control -d: {e}"
        self.up = True
        self.pids |= self._pidfiles()
        if rc != 0:
            return f"openmps-control -d exited {rc}: {self.out.read_text(errors='replace')[-500:]}"
        for _ in range(100):
            if any(p.is_socket() for p in self.pipe.iterdir()):
                self.pids |= self._pidfiles()
                return None
            time.sleep(0.1)
        return f"openmps-control -d left no socket in {self.pipe}"

    def _pidfiles(self):
        pids = set()
        for f in self.pipe.glob("*.pid"):
            with contextlib.suppress(OSError, ValueError):
                pids.add(int(f.read_text().split()[0]))
        return pids

    def servers(self):
        rc, out = self.control(stdin="get_server_list\n")
        pids = {int(w) for w in out.split() if w.isdigit()} if rc == 0 else set()
        if pids:
            self.served = True
            self.pids |= pids
        return pids

    def alive(self):
        return self.up and self.control(stdin="get_server_list\n")[0] == 0

    def log_tail(self, lines=20):
        text = []
        for f in sorted(self.log.glob("*.log")):
            with contextlib.suppress(OSError):
                text += [f"{f.name}: {line}" for line in f.read_text(errors="replace").splitlines()[-lines:]]
        return text

    def stop(self):
        """Quits the daemon and waits for it and its servers (processes this
        script started); ends by pid any that do not go."""
        if not self.up:
            return
        self.up = False
        self.servers()
        self.pids |= self._pidfiles()
        self.control(stdin="quit\n")
        deadline = time.monotonic() + 15
        for pid in sorted(self.pids):
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if _alive(pid):
                print(f"openmps process {pid} did not quit: ending it", flush=True)
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGTERM)
                time.sleep(2)
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        self.pids = set()


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours counts as gone.
    with contextlib.suppress(OSError):
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    return True


RUNNING = set()   # worker processes under way, ended if this script is interrupted
RUNNING_LOCK = threading.Lock()

TRACE_RE = re.compile(r"openmps: (cu\w+) (is not supported yet|returned (?:an error \d+ times? \(the last )?(\w+))")
# What the client logs, traced or not, of the private tables: a slot it
# does not implement, and a table it does not provide.
SLOT_RE = re.compile(r"openmps: export table ([0-9a-f]{8})[0-9a-f-]* slot (\d+), called from ([^ ]+?)(?:\+0x[0-9a-f]+)?, "
                     r"is not implemented")
TABLE_RE = re.compile(r"openmps: export table ([0-9a-f]{8})[0-9a-f-]*, asked for by .*?, is not provided")


def driver_calls(text):
    """Unsupported and failing driver calls that OPENMPS_TRACE_ERRORS logged,
    the unimplemented export table slots and unprovided tables among the
    unsupported."""
    unsupported, failing = [], {}
    for m in TRACE_RE.finditer(text):
        fn = m.group(1)
        if m.group(2) == "is not supported yet":
            if fn not in unsupported:
                unsupported.append(fn)
        elif fn not in failing and fn not in unsupported:
            failing[fn] = m.group(3)
    for m in SLOT_RE.finditer(text):
        what = f"export table {m.group(1)} slot {m.group(2)} ({m.group(3)})"
        if what not in unsupported:
            unsupported.append(what)
    for m in TABLE_RE.finditer(text):
        what = f"export table {m.group(1)}"
        if what not in unsupported:
            unsupported.append(what)
    return unsupported, [f"{fn} {err}" for fn, err in failing.items() if fn not in unsupported]


def run_one(w, mode, env, logdir, timeout):
    """Runs workload w in a new process; returns its result as a dict."""
    log = logdir / f"{mode}-{re.sub(r'[^A-Za-z0-9]+', '-', w.name).strip('-')}.log"
    cache = Path(tempfile.mkdtemp(prefix="openmps-compat-cache."))
    # Fresh kernel caches in every run, so each compiles its kernels itself.
    env = dict(env, **w.env, COMPAT_MODE=mode, CUPY_CACHE_DIR=str(cache / "cupy"),
               TORCHINDUCTOR_CACHE_DIR=str(cache / "inductor"), TRITON_CACHE_DIR=str(cache / "triton"),
               PYTORCH_KERNEL_CACHE_PATH=str(cache / "torch"))
    t0 = time.monotonic()
    status = "FAIL"
    with open(log, "wb") as out:
        # A session of its own, so a timeout ends its children too.
        p = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--run", w.name], stdin=subprocess.DEVNULL,
                             stdout=out, stderr=subprocess.STDOUT, env=env, cwd=str(ROOT), start_new_session=True)
        with RUNNING_LOCK:
            RUNNING.add(p)
        try:
            rc = p.wait(timeout=timeout)
            status = {0: "PASS", SKIP_RC: "SKIP"}.get(rc, "FAIL")
        except subprocess.TimeoutExpired:
            rc = None
            status = "TIMEOUT"
        finally:
            _end_group(p)   # and whatever it left running (compile workers): no stray clients
            with RUNNING_LOCK:
                RUNNING.discard(p)
    shutil.rmtree(cache, ignore_errors=True)
    text = log.read_text(errors="replace")
    lines = [ln for ln in text.splitlines() if ln.strip()]
    detail = ""
    if status == "TIMEOUT":
        detail = f"timed out after {timeout:.0f} s"
    elif status in ("FAIL", "SKIP"):
        tagged = [ln for ln in lines if ln.startswith(("FAIL: ", "SKIP: "))]
        detail = tagged[-1].split(": ", 1)[1] if tagged else (f"exit {rc}: " + (lines[-1] if lines else "no output"))
    res = {"status": status, "seconds": round(time.monotonic() - t0, 1), "detail": detail, "log": str(log)}
    if mode == "openmps":
        res["unsupported"], res["failing_calls"] = driver_calls(text)
    if status not in ("PASS", "SKIP"):
        res["tail"] = lines[-40:]
    return res


def _end_group(p):
    with contextlib.suppress(OSError):
        os.killpg(p.pid, signal.SIGKILL)
    with contextlib.suppress(Exception):
        p.wait(timeout=10)


def envs(work, args):
    native_lib = os.environ.get("OPENMPS_NATIVE_LIB", "/usr/local/nvidia/lib64")
    driver = os.environ.get("OPENMPS_DRIVER") or os.path.join(native_lib, "libcuda.so.1")
    ld = os.environ.get("LD_LIBRARY_PATH", "")
    empty = work / "no-daemon"   # a pipe directory with no daemon: native runs stay native
    empty.mkdir()
    native = dict(os.environ, LD_LIBRARY_PATH=native_lib + (":" + ld if ld else ""),
                  CUDA_MPS_PIPE_DIRECTORY=str(empty))
    openmps = dict(os.environ, LD_LIBRARY_PATH=str(ROOT / "build" / "lib") + (":" + ld if ld else ""),
                   OPENMPS_DRIVER=driver)
    if not args.no_trace:
        openmps["OPENMPS_TRACE_ERRORS"] = "1"
    return native, openmps, driver


def versions():
    v = {}
    for dist in ("torch", "triton", "cupy-cuda13x", "cupy-cuda12x", "cupy", "numpy", "scipy"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            v[dist] = importlib.metadata.version(dist)
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip().splitlines()
        if gpu:
            v["gpu"] = gpu[0]
    return v


def cell(r):
    if r is None:
        return "-"
    return r["status"] if r["status"] in ("SKIP", "NOT RUN") else f"{r['status']} {r['seconds']:.0f}s"


def regression(res, modes):
    """Whether this workload counts against openmps: it passed natively and
    not under openmps, or (one mode only) it failed."""
    if len(modes) == 2:
        return res["native"]["status"] == "PASS" and res["openmps"]["status"] != "PASS"
    return res[modes[0]]["status"] in ("FAIL", "TIMEOUT")


def main():
    ap = argparse.ArgumentParser(description="PyTorch and CuPy workloads natively and under openmps.")
    one = ap.add_mutually_exclusive_group()
    one.add_argument("--native-only", action="store_true", help="run on the real driver only")
    one.add_argument("--openmps-only", action="store_true", help="run under openmps only")
    ap.add_argument("--only", action="append", default=[], metavar="TEXT",
                    help="the workloads whose name contains TEXT (repeatable)")
    ap.add_argument("--serial", action="store_true", help="the two runs of a workload one after the other")
    ap.add_argument("--timeout", type=float, default=None, help="seconds per run (default: each workload's own)")
    ap.add_argument("--budget", type=float, default=float(os.environ.get("COMPAT_BUDGET", DEFAULT_BUDGET)),
                    help=f"seconds for everything; workloads past it are NOT RUN (default {DEFAULT_BUDGET})")
    ap.add_argument("--seed", type=int, default=None, help="the inputs' seed (default: fresh for each workload)")
    ap.add_argument("--no-trace", action="store_true", help="without OPENMPS_TRACE_ERRORS=1 under openmps")
    ap.add_argument("--logs", default="/tmp/openmps-compat-logs", help="where each run's output goes")
    ap.add_argument("--list", action="store_true", help="list the workloads and exit")
    ap.add_argument("--run", metavar="NAME", help=argparse.SUPPRESS)   # the worker
    args = ap.parse_args()
    if args.run:
        return worker(args.run)
    selected = [w for w in WORKLOADS if not args.only or any(t.lower() in w.name.lower() for t in args.only)]
    if args.list:
        for w in selected:
            print(w.name)
        return 0
    if not selected:
        print(f"compat: no workload matches {args.only}")
        return 2
    modes = ["native"] if args.native_only else ["openmps"] if args.openmps_only else ["native", "openmps"]
    if "openmps" in modes:
        missing = [p for p in (ROOT / "build/bin/openmps-control", ROOT / "build/lib/libcuda.so.1") if not p.exists()]
        if missing:
            print(f"compat: openmps is not built ({', '.join(str(p.relative_to(ROOT)) for p in missing)}): run make")
            return 2

    t_start = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="openmps-compat."))
    logdir = Path(args.logs)
    logdir.mkdir(parents=True, exist_ok=True)
    for old in [*logdir.glob("native-*.log"), *logdir.glob("openmps-*.log")]:   # a previous run's
        old.unlink()
    native_env, openmps_env, driver = envs(work, args)
    daemon = Daemon(work, driver) if "openmps" in modes else None
    if daemon:
        openmps_env.update(CUDA_MPS_PIPE_DIRECTORY=str(daemon.pipe), CUDA_MPS_LOG_DIRECTORY=str(daemon.log))

    def on_signal(signum, frame):
        raise SystemExit(128 + signum)   # unwinds through the finally below
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)

    info = versions()
    print(f"openmps compat: {len(selected)} workloads, {' and '.join(modes)}; "
          f"{', '.join(f'{k} {v}' for k, v in info.items())}; driver {driver}; logs in {logdir}", flush=True)
    results = {}
    daemon_note = ""
    interrupted = False
    try:
        if daemon:
            err = daemon.start()
            if err:
                daemon_note = f"the daemon did not start: {err}"
                print(f"compat: {daemon_note}", flush=True)
        for i, w in enumerate(selected, 1):
            left = args.budget - (time.monotonic() - t_start)
            if left < 20:
                results[w.name] = {m: {"status": "NOT RUN", "seconds": 0, "detail": "past the time budget"}
                                   for m in modes}
                continue
            timeout = min(args.timeout or w.timeout, left - 10)
            if daemon and daemon_note == "" and not daemon.alive():
                daemon.stop()
                err = daemon.start()
                if err:
                    daemon_note = f"the daemon did not restart: {err}"
            res = {}
            if daemon_note and "openmps" in modes:
                res["openmps"] = {"status": "FAIL", "seconds": 0, "detail": daemon_note}
            todo = [m for m in modes if m not in res]
            env = {"native": native_env, "openmps": openmps_env}
            seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
            for m in todo:
                env[m] = dict(env[m], COMPAT_SEED=str(seed))
            if args.serial or len(todo) < 2:
                for m in todo:
                    res[m] = run_one(w, m, env[m], logdir, timeout)
            else:
                threads = {}
                for m in todo:
                    def go(m=m):
                        res[m] = run_one(w, m, env[m], logdir, timeout)
                    threads[m] = threading.Thread(target=go, daemon=True)
                    threads[m].start()
                for t in threads.values():
                    while t.is_alive():
                        t.join(0.2)
            res["seed"] = seed
            if daemon and "openmps" in res and not daemon_note:
                daemon.servers()
                if res["openmps"]["status"] not in ("PASS", "SKIP"):
                    res["openmps"]["daemon_log"] = daemon.log_tail()
                    # A fresh daemon for the next workload, so failures stay independent.
                    daemon.stop()
                    err = daemon.start()
                    if err:
                        daemon_note = f"the daemon did not restart: {err}"
            results[w.name] = res
            line = " | ".join(f"{m} {cell(res[m])}" for m in modes)
            print(f"[{i:2d}/{len(selected)}] {w.name:<46} {line}", flush=True)
            skips = set()
            for m in modes:
                r = res[m]
                if r["status"] == "SKIP" and r["detail"] not in skips:   # each reason once
                    skips.add(r["detail"])
                    print(f"        {m}: skipped: {r['detail']}", flush=True)
                if r["status"] in ("FAIL", "TIMEOUT"):
                    print(f"        {m}: {r['detail']}", flush=True)
                    if r.get("unsupported"):
                        print(f"        {m}: unsupported: {', '.join(r['unsupported'][:8])}", flush=True)
                    if r.get("failing_calls"):
                        print(f"        {m}: failing driver calls: {', '.join(r['failing_calls'][:8])}", flush=True)
    except (KeyboardInterrupt, SystemExit) as e:
        interrupted = True
        print(f"compat: interrupted ({type(e).__name__})", flush=True)
    finally:
        # Nothing interrupts the cleanup: the daemon must go.
        handlers = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
        with RUNNING_LOCK:
            for p in list(RUNNING):
                _end_group(p)
        if daemon:
            daemon.stop()
        shutil.rmtree(work, ignore_errors=True)
        for sig, handler in handlers.items():
            signal.signal(sig, handler)

    # The table.
    width = max(len(w.name) for w in selected)
    print()
    print(f"{'workload':<{width}} | " + " | ".join(f"{m:<10}" for m in modes))
    print("-" * width + "-+-" + "-+-".join("-" * 10 for _ in modes))
    bad = []
    for w in selected:
        res = results.get(w.name)
        if res is None:
            res = {m: {"status": "NOT RUN", "seconds": 0, "detail": "interrupted"} for m in modes}
            results[w.name] = res
        print(f"{w.name:<{width}} | " + " | ".join(f"{cell(res[m]):<10}" for m in modes))
        if regression(res, modes):
            bad.append(w.name)
    served_ok = True
    if daemon and not daemon.served and any(r.get("openmps", {}).get("status") == "PASS" for r in results.values()):
        served_ok = False
        print("compat: openmps listed no server while workloads passed: did they use openmps at all?")
    both = [w.name for w in selected if all(results[w.name][m]["status"] == "PASS" for m in modes)]
    not_run = [w.name for w in selected if any(results[w.name][m]["status"] == "NOT RUN" for m in modes)]
    if not_run:
        print(f"compat: {len(not_run)} workloads not run (time budget or interruption): {', '.join(not_run)}")
    rc = 1 if bad or not_run or not served_ok or interrupted else 0
    # What openmps refused even where the workload passed (the driver
    # serves it natively): each refused call, table or slot, with where.
    refused = {}
    for w in selected:
        for what in results[w.name].get("openmps", {}).get("unsupported") or []:
            refused.setdefault(what, []).append(w.name)
    for what, names in refused.items():
        print(f"compat: openmps refused {what} in {len(names)} workloads: {', '.join(names[:4])}"
              f"{', ...' if len(names) > 4 else ''}")
    if "openmps" in modes and not refused:
        print("compat: openmps refused no driver call, export table or slot")
    if len(modes) == 2:
        print(f"compat: {len(both)} of {len(selected)} workloads pass natively and under openmps; "
              f"{len(bad)} pass natively but not under openmps{': ' + ', '.join(bad) if bad else ''}")
    else:
        print(f"compat: {len(both)} of {len(selected)} workloads pass {modes[0]}; {len(bad)} fail")

    out_dir = os.environ.get("OUT")
    if out_dir:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        report = {"modes": modes, "versions": info, "driver": driver, "seconds": round(time.monotonic() - t_start, 1),
                  "exit": rc, "regressions": bad, "not_run": not_run, "refused": refused,
                  "daemon_served": daemon.served if daemon else None,
                  "daemon_note": daemon_note,
                  "workloads": [dict(name=w.name, env=w.env, **results[w.name]) for w in selected]}
        Path(out_dir, "compat.json").write_text(json.dumps(report, indent=1) + "\n")
        print(f"compat: results in {Path(out_dir, 'compat.json')}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
