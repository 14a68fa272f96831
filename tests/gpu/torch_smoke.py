# SPDX-License-Identifier: MIT
#
# A short PyTorch workload checked against the CPU: a 512x512 matmul
# (cuBLAS), relu, a sum, and a Conv2d (cuDNN). tests/gpu/run.sh runs it on the
# real driver and under openmps. TF32 is turned off so the GPU results can be
# held to float32 tolerances. Exits 0 when everything matches, 1 otherwise,
# 77 when PyTorch or a CUDA device is missing.
import sys

try:
    import torch
except ImportError as e:
    print(f"torch_smoke: SKIP (cannot import torch: {e})")
    sys.exit(77)


def check(name, got, want, rtol, atol):
    got = got.detach().cpu()
    ok = torch.allclose(got, want, rtol=rtol, atol=atol)
    err = (got - want).abs().max().item() if got.shape == want.shape else float("nan")
    print(f"  {name}: {'ok' if ok else 'WRONG'} (max abs error {err:.3g})")
    return ok


def main():
    if not torch.cuda.is_available():
        print("torch_smoke: SKIP (torch.cuda.is_available() is False)")
        return 77
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}, "
          f"device {torch.cuda.get_device_name(0)}")
    g = torch.Generator().manual_seed(1234)
    ok = True

    a = torch.randn(512, 512, generator=g)
    b = torch.randn(512, 512, generator=g)
    ok &= check("matmul 512x512", a.to(dev) @ b.to(dev), a @ b, rtol=1e-4, atol=1e-3)

    x = torch.randn(1 << 20, generator=g)
    xd = x.to(dev)
    ok &= check("relu", torch.relu(xd), torch.relu(x), rtol=0, atol=0)
    ok &= check("sum", xd.sum(), x.double().sum().float(), rtol=1e-4, atol=1e-2)

    conv = torch.nn.Conv2d(3, 16, kernel_size=3, padding=1)
    img = torch.randn(4, 3, 64, 64, generator=g)
    with torch.no_grad():
        want = conv(img)
        got = conv.to(dev)(img.to(dev))
    ok &= check("conv2d", got, want, rtol=1e-4, atol=1e-4)

    torch.cuda.synchronize()
    print(f"  memory allocated by PyTorch: {torch.cuda.memory_allocated() >> 20} MiB")
    print(f"torch_smoke: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
