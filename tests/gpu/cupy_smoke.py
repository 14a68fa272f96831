# SPDX-License-Identifier: MIT
#
# A short CuPy workload checked against NumPy: arange and a reduction, an
# elementwise expression and a user ElementwiseKernel (both compiled at run
# time and loaded through the driver's module API), and a 256x256 matmul
# (cuBLAS). tests/gpu/run.sh runs it on the real driver and under openmps.
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

    cp.cuda.Device(0).synchronize()
    print(f"cupy_smoke: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
