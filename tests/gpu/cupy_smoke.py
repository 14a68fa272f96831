# SPDX-License-Identifier: MIT
#
# A short CuPy workload checked against NumPy: arange and a reduction, an
# elementwise expression and a user ElementwiseKernel (both compiled at run
# time and loaded through the driver's module API), a 256x256 matmul
# (cuBLAS), integer sums, scans, sorting and unique (CUB and Thrust), a
# RawKernel, and pinned-memory copies on a stream. tests/gpu/run.sh runs it on the real driver and under openmps.
# Exits 0 when everything matches, 1 otherwise, 77 when CuPy or a device is
# missing.
import sys

try:
    import cupy as cp
    import numpy as np
except ImportError as e:
    print(f"cupy_smoke: SKIP (cannot import cupy/numpy: {e})")
    sys.exit(77)


def check(name, got, want, rtol, atol):
    got = cp.asnumpy(got)
    ok = np.allclose(got, want, rtol=rtol, atol=atol)
    err = float(np.max(np.abs(got - want))) if np.shape(got) == np.shape(want) else float("nan")
    print(f"  {name}: {'ok' if ok else 'WRONG'} (max abs error {err:.3g})")
    return ok


def main():
    try:
        n = cp.cuda.runtime.getDeviceCount()
    except cp.cuda.runtime.CUDARuntimeError as e:
        print(f"cupy_smoke: SKIP (no device: {e})")
        return 77
    if n < 1:
        print("cupy_smoke: SKIP (no device)")
        return 77
    props = cp.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    print(f"cupy {cp.__version__}, device {name}")
    ok = True

    a = cp.arange(1_000_000, dtype=cp.float64)
    ok &= check("arange + sum", a.sum(), np.arange(1_000_000, dtype=np.float64).sum(), rtol=1e-12, atol=0)

    rng = np.random.default_rng(1234)
    x = rng.standard_normal(1 << 20).astype(np.float32)
    xd = cp.asarray(x)
    ok &= check("elementwise 2x+1", xd * 2 + 1, x * 2 + 1, rtol=1e-6, atol=1e-6)

    squared_diff = cp.ElementwiseKernel("float32 x, float32 y", "float32 z", "z = (x - y) * (x - y)",
                                        "squared_diff")
    y = rng.standard_normal(1 << 20).astype(np.float32)
    ok &= check("ElementwiseKernel", squared_diff(xd, cp.asarray(y)), (x - y) * (x - y), rtol=1e-5, atol=1e-6)

    m1 = rng.standard_normal((256, 256)).astype(np.float32)
    m2 = rng.standard_normal((256, 256)).astype(np.float32)
    ok &= check("matmul 256x256", cp.asarray(m1) @ cp.asarray(m2), m1 @ m2, rtol=1e-4, atol=1e-3)

    # CUB and Thrust underneath: kernels with long C++ names.
    xi = rng.integers(-1000, 1000, 3_000_001, dtype=np.int32)
    xid = cp.asarray(xi)
    ok &= check("int64 sum", xid.sum(dtype=cp.int64), xi.sum(dtype=np.int64), rtol=0, atol=0)
    ok &= check("cumsum", cp.cumsum(xid[:100_000], dtype=cp.int64), np.cumsum(xi[:100_000], dtype=np.int64),
                rtol=0, atol=0)
    ok &= check("sort", cp.sort(xid[:500_000]), np.sort(xi[:500_000]), rtol=0, atol=0)
    ok &= check("unique", cp.unique(xid[:100_000]), np.unique(xi[:100_000]), rtol=0, atol=0)

    # A raw kernel from source, and pinned memory copied on a stream.
    scale = cp.RawKernel(r"""
    extern "C" __global__ void scale_add(const float *x, float *y, float a, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = a * x[i] + y[i];
    }""", "scale_add")
    yd = cp.ones(1 << 20, dtype=cp.float32)
    scale(((1 << 20) // 256,), (256,), (xd, yd, cp.float32(3.0), cp.int32(1 << 20)))
    ok &= check("RawKernel", yd, 3.0 * x + 1.0, rtol=1e-6, atol=1e-6)
    pinned = cp.cuda.alloc_pinned_memory(x.nbytes)
    host = np.frombuffer(pinned, dtype=np.float32, count=x.size)
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        dev_copy = cp.empty_like(xd)
        dev_copy.set(x, stream=stream)
        (dev_copy * 4).get(stream=stream, out=host)
    stream.synchronize()
    ok &= check("pinned copies on a stream", host, x * 4, rtol=0, atol=0)

    cp.cuda.Device(0).synchronize()
    print(f"cupy_smoke: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
