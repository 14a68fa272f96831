# SPDX-License-Identifier: MIT
"""The paths of NVIDIA's libraries that call the driver's private export
tables (docs/EXPORT-TABLES.md), each checked against a CPU reference. Run
by tests/gpu/exports_check.sh, natively and under openmps:

    python3 exports_check.py GROUP

GROUP is one of torch_blas, torch_fft, cupy, nvml, nvjitlink. A group is
one process; each check in it prints, as soon as it is done,

    RESULT <check> PASS|FAIL|SKIP <detail>

so when a check kills the process the ones before it are still reported
(the script reports the missing ones as the process's death).
"""
import ctypes
import glob
import os
import sys
import traceback


def result(name, ok, detail):
    status = {True: "PASS", False: "FAIL", None: "SKIP"}[ok]
    print(f"RESULT {name} {status} {detail}", flush=True)


def check(name, fn):
    """Runs fn() -> (ok, detail); an exception is a FAIL with its text."""
    try:
        ok, detail = fn()
    except ImportError as e:
        ok, detail = None, f"no module: {e}"
    except Exception as e:  # noqa: BLE001 - every failure is a result
        traceback.print_exc()
        ok, detail = False, f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
    result(name, ok, detail)


def rel_err(out, ref):
    """max |out - ref| / max |ref|, over numpy arrays."""
    import numpy as np
    cplx = np.iscomplexobj(out) or np.iscomplexobj(ref)
    out = np.asarray(out, dtype=np.complex128 if cplx else np.float64)
    ref = np.asarray(ref, dtype=out.dtype)
    return float(np.abs(out - ref).max()) / max(float(np.abs(ref).max()), 1e-30)


# ---------------------------------------------------------------------------
# PyTorch: cuBLAS / cuBLASLt (table 1734dc26 on the fp16, bf16 and fp8 paths)

def torch_blas():
    import torch
    torch.manual_seed(1)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}", flush=True)

    def mm(dtype, tol):
        def run():
            a = torch.randn(256, 384)
            b = torch.randn(384, 128)
            ref = a.double() @ b.double()
            out = (a.to("cuda", dtype) @ b.to("cuda", dtype)).double().cpu()
            e = rel_err(out.numpy(), ref.numpy())
            return e < tol, f"256x384x128 rel err {e:.1e}"
        return run

    def linear_autocast():
        lin = torch.nn.Linear(256, 512).cuda()
        x = torch.randn(64, 256, device="cuda", requires_grad=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            y = lin(x)
        y.float().sum().backward()
        torch.cuda.synchronize()
        w, bias, xd = (t.detach().cpu().double() for t in (lin.weight, lin.bias, x))
        e1 = rel_err(y.detach().double().cpu().numpy(), (xd @ w.t() + bias).numpy())
        e2 = rel_err(x.grad.double().cpu().numpy(), (torch.ones(64, 512, dtype=torch.float64) @ w).numpy())
        ok = y.dtype == torch.bfloat16 and e1 < 2e-2 and e2 < 2e-2
        return ok, f"{y.dtype}, forward {e1:.1e}, input grad {e2:.1e}"

    def scaled_mm_fp8():
        if torch.cuda.get_device_capability(0) < (8, 9) or not hasattr(torch, "_scaled_mm"):
            return None, "fp8 needs sm_89+ and torch._scaled_mm"
        a = (torch.randn(64, 128, device="cuda") * 0.5).to(torch.float8_e4m3fn)
        b = (torch.randn(96, 128, device="cuda") * 0.5).to(torch.float8_e4m3fn)
        one, two = torch.tensor(1.0, device="cuda"), torch.tensor(2.0, device="cuda")
        out = torch._scaled_mm(a, b.t(), scale_a=one, scale_b=two, out_dtype=torch.bfloat16)
        out = out[0] if isinstance(out, tuple) else out
        ref = (a.double().cpu() @ b.double().cpu().t()) * 2.0
        e = rel_err(out.double().cpu().numpy(), ref.numpy())
        return e < 2e-2, f"e4m3 64x128x96, bf16 out, rel err {e:.1e}"

    check("torch_mm_fp16", mm(torch.float16, 5e-3))
    check("torch_mm_bf16", mm(torch.bfloat16, 2e-2))
    check("torch_linear_bf16_autocast", linear_autocast)
    check("torch_scaled_mm_fp8", scaled_mm_fp8)


# ---------------------------------------------------------------------------
# PyTorch: cuFFT (table 6e163fbe)

def torch_fft():
    import numpy as np
    import torch
    rng = np.random.default_rng(2)

    def fft1d():
        x = rng.standard_normal(1024).astype(np.float32)
        out = torch.fft.fft(torch.from_numpy(x).cuda()).cpu().numpy()
        e = rel_err(out, np.fft.fft(x.astype(np.float64)))
        return e < 1e-5, f"fft of 1024 floats, rel err {e:.1e}"

    def rfft2():
        x = rng.standard_normal((64, 96)).astype(np.float32)
        out = torch.fft.rfft2(torch.from_numpy(x).cuda()).cpu().numpy()
        e = rel_err(out, np.fft.rfft2(x.astype(np.float64)))
        return e < 1e-5, f"rfft2 64x96, rel err {e:.1e}"

    check("torch_fft", fft1d)
    check("torch_rfft2", rfft2)


# ---------------------------------------------------------------------------
# CuPy: cuFFT, and NVRTC (table da9151d3). exports_check.sh gives each run a
# fresh CUPY_CACHE_DIR, so kernels are really compiled.

SAXPY = r'''
extern "C" __global__ void saxpy(float a, const float *x, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
'''


def cupy_group():
    import cupy as cp
    import numpy as np
    rng = np.random.default_rng(3)

    def fft():
        x = (rng.standard_normal(4096) + 1j * rng.standard_normal(4096)).astype(np.complex64)
        e1 = rel_err(cp.asnumpy(cp.fft.fft(cp.asarray(x))), np.fft.fft(x.astype(np.complex128)))
        y = rng.standard_normal((48, 80)).astype(np.float32)
        e2 = rel_err(cp.asnumpy(cp.fft.rfft2(cp.asarray(y))), np.fft.rfft2(y.astype(np.float64)))
        return e1 < 1e-5 and e2 < 1e-5, f"fft 4096 c64 {e1:.1e}, rfft2 48x80 {e2:.1e}"

    def rawkernel():
        n = 5000
        x = rng.standard_normal(n).astype(np.float32)
        y = rng.standard_normal(n).astype(np.float32)
        k = cp.RawKernel(SAXPY, "saxpy")
        dy = cp.asarray(y)
        k(((n + 255) // 256,), (256,), (np.float32(2.5), cp.asarray(x), dy, np.int32(n)))
        e = rel_err(cp.asnumpy(dy), 2.5 * x.astype(np.float64) + y)
        return e < 1e-6, f"NVRTC saxpy over {n}, rel err {e:.1e}"

    check("cupy_fft", fft)
    check("cupy_rawkernel", rawkernel)


# ---------------------------------------------------------------------------
# NVML (table 69a28e9f), after the driver was initialised, as PyTorch does.

class NvmlMemory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


def nvml_group():
    def run():
        cuda = ctypes.CDLL("libcuda.so.1")
        rc = cuda.cuInit(0)
        if rc:
            return False, f"cuInit -> {rc}"
        nvml = None
        for name in ("libnvidia-ml.so.1", "/usr/local/nvidia/lib64/libnvidia-ml.so.1"):
            try:
                nvml = ctypes.CDLL(name)
                break
            except OSError:
                continue
        if nvml is None:
            return None, "no libnvidia-ml.so.1"
        count, handle, mem = ctypes.c_uint(), ctypes.c_void_p(), NvmlMemory()
        for rnd in range(2):   # nvmlInit twice: the driver's slots 24/25 run each time
            rc = nvml.nvmlInit_v2()
            if rc:
                return False, f"nvmlInit_v2 -> {rc} (round {rnd})"
            rc = nvml.nvmlDeviceGetCount_v2(ctypes.byref(count))
            rc = rc or nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(handle))
            rc = rc or nvml.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(mem))
            nvml.nvmlShutdown()
            if rc:
                return False, f"NVML query -> {rc} (round {rnd})"
        ok = count.value >= 1 and mem.total > 0
        return ok, f"{count.value} devices, {mem.total >> 20} MiB on device 0"

    check("nvml", run)


# ---------------------------------------------------------------------------
# nvJitLink (table da9151d3): the kernels' PTX linked to a cubin, loaded and
# launched through libcuda.so.1 (ours under openmps).

def find_nvjitlink():
    cands = []
    try:
        import nvidia
        for base in getattr(nvidia, "__path__", []):
            cands += sorted(glob.glob(os.path.join(base, "**", "libnvJitLink.so*"), recursive=True))
    except ImportError:
        pass
    cands = [c for c in cands if ".so.13" in c] + sorted(glob.glob("/usr/local/cuda/lib64/libnvJitLink.so*")) + cands
    for c in cands:
        try:
            return ctypes.CDLL(c), c
        except OSError:
            continue
    return None, None


def jl_sym(lib, base):
    for suffix in ("_13_0", "_13_1", "_13_2", "_12_9", "_12_8", "_12_6", "_12_4", ""):
        try:
            return getattr(lib, ("__" + base + suffix) if suffix else base)
        except AttributeError:
            continue
    raise RuntimeError(f"nvJitLink has no {base}")


def nvjitlink_group():
    def run():
        import numpy as np
        ptx_path = os.environ.get("OPENMPS_TEST_PTX", "build/tests/kernels.ptx")
        if not os.path.exists(ptx_path):
            return None, f"no {ptx_path}"
        ptx = open(ptx_path, "rb").read() + b"\0"
        cuda = ctypes.CDLL("libcuda.so.1")
        dev, major, minor = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        if cuda.cuInit(0) or cuda.cuDeviceGet(ctypes.byref(dev), 0):
            return False, "cuInit/cuDeviceGet failed"
        cuda.cuDeviceGetAttribute(ctypes.byref(major), 75, dev)
        cuda.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev)
        jl, jl_path = find_nvjitlink()
        if jl is None:
            return None, "no libnvJitLink"
        arch = f"-arch=sm_{major.value}{minor.value}".encode()
        h = ctypes.c_void_p()
        opts = (ctypes.c_char_p * 1)(arch)
        rc = jl_sym(jl, "nvJitLinkCreate")(ctypes.byref(h), ctypes.c_uint32(1), opts)
        rc = rc or jl_sym(jl, "nvJitLinkAddData")(h, ctypes.c_int(2), ctypes.c_char_p(ptx), ctypes.c_size_t(len(ptx)),
                                                   ctypes.c_char_p(b"kernels.ptx"))
        rc = rc or jl_sym(jl, "nvJitLinkComplete")(h)
        if rc:
            return False, f"nvJitLink -> {rc}"
        size = ctypes.c_size_t()
        jl_sym(jl, "nvJitLinkGetLinkedCubinSize")(h, ctypes.byref(size))
        cubin = ctypes.create_string_buffer(size.value)
        jl_sym(jl, "nvJitLinkGetLinkedCubin")(h, cubin)
        jl_sym(jl, "nvJitLinkDestroy")(ctypes.byref(h))
        ctx, mod, fn = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
        rc = cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) or cuda.cuCtxSetCurrent(ctx)
        rc = rc or cuda.cuModuleLoadData(ctypes.byref(mod), cubin)
        rc = rc or cuda.cuModuleGetFunction(ctypes.byref(fn), mod, b"vadd")
        if rc:
            return False, f"loading the linked cubin -> {rc}"
        n = 4096
        a = np.arange(n, dtype=np.float32)
        b = np.full(n, 0.25, dtype=np.float32)
        d = [ctypes.c_uint64() for _ in range(3)]
        for p in d:
            cuda.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(a.nbytes))
        cuda.cuMemcpyHtoD_v2(d[0], a.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(a.nbytes))
        cuda.cuMemcpyHtoD_v2(d[1], b.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(b.nbytes))
        nn = ctypes.c_int(n)
        args = (ctypes.c_void_p * 4)(*[ctypes.cast(ctypes.byref(x), ctypes.c_void_p) for x in (d[0], d[1], d[2], nn)])
        rc = cuda.cuLaunchKernel(fn, n // 256, 1, 1, 256, 1, 1, 0, None, args, None) or cuda.cuCtxSynchronize()
        c = np.empty(n, dtype=np.float32)
        cuda.cuMemcpyDtoH_v2(c.ctypes.data_as(ctypes.c_void_p), d[2], ctypes.c_size_t(c.nbytes))
        for p in d:
            cuda.cuMemFree_v2(p)
        cuda.cuModuleUnload(mod)
        cuda.cuDevicePrimaryCtxRelease_v2(dev)
        e = rel_err(c, a + 0.25)
        return rc == 0 and e == 0.0, f"{arch.decode()} cubin of {size.value} B via {os.path.basename(jl_path)}, err {e}"

    check("nvjitlink", run)


GROUPS = {"torch_blas": torch_blas, "torch_fft": torch_fft, "cupy": cupy_group, "nvml": nvml_group,
          "nvjitlink": nvjitlink_group}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in GROUPS:
        sys.exit(f"usage: {sys.argv[0]} {'|'.join(GROUPS)}")
    try:
        GROUPS[sys.argv[1]]()
    except ImportError as e:
        print(f"RESULT {sys.argv[1]} SKIP no module: {e}", flush=True)
