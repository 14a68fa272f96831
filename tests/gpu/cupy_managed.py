# SPDX-License-Identifier: MIT
"""CuPy on managed memory: every array from a pool of cudaMallocManaged
memory; a 1024x1024 float64 matmul, an FFT and a reduction, three rounds
with the input changed between them, each compared with NumPy. Exits 0 when
all match. Natively, and under openmps with OPENMPS_MANAGED=device (managed
memory on the device, src/client/migrate.c), from tests/gpu/run.sh's
frameworks step."""
import sys, numpy as np, cupy as cp
cp.cuda.set_allocator(cp.cuda.MemoryPool(cp.cuda.malloc_managed).malloc)
rng = np.random.default_rng(5)
a = rng.standard_normal((1024, 1024)); b = rng.standard_normal((1024, 1024))
ok = True
for it in range(3):
    ga = cp.asarray(a); gb = cp.asarray(b)
    c = (ga @ gb).get(); ok &= np.allclose(c, a @ b, rtol=1e-9, atol=1e-9)
    f = cp.fft.fft(ga[0]).get(); ok &= np.allclose(f, np.fft.fft(a[0]))
    s = float(cp.sum(ga * 2.0 + 1.0)); ok &= abs(s - float(np.sum(a * 2.0 + 1.0))) < 1e-6 * max(1, abs(s))
    a[3, 3] += 1.0
print("cupy managed:", "ok" if ok else "MISMATCH"); sys.exit(0 if ok else 1)
