# SPDX-License-Identifier: MIT
#
# A short PyTorch workload checked against the CPU: a 512x512 matmul
# (cuBLAS), relu, a sum, a Conv2d (cuDNN), integer reductions, scans,
# sorting, indexing, softmax and layer norm, 20 steps of training, and
# pinned-memory copies on a side stream ordered by an event. tests/gpu/run.sh runs it on the
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

    # Kernels with long C++ names and several launches each: integer and
    # multi-block reductions, scans, sorting, indexing, normalisation.
    xi = torch.randint(-1000, 1000, (3_000_001,), generator=g, dtype=torch.int32)
    xid = xi.to(dev)
    ok &= check("int64 sum", xid.sum(dtype=torch.int64), xi.sum(dtype=torch.int64), rtol=0, atol=0)
    ok &= check("max", xid.max(), xi.max(), rtol=0, atol=0)
    ok &= check("value at argmax", xi[xid.argmax().item()], xi.max(), rtol=0, atol=0)
    ok &= check("cumsum", torch.cumsum(xid[:100_000].long(), 0), torch.cumsum(xi[:100_000].long(), 0),
                rtol=0, atol=0)
    ok &= check("sort", torch.sort(xid[:200_000]).values, torch.sort(xi[:200_000]).values, rtol=0, atol=0)
    ok &= check("topk", torch.topk(xid[:200_000], 50).values, torch.topk(xi[:200_000], 50).values,
                rtol=0, atol=0)
    idx = torch.randint(0, 3_000_001, (10_000,), generator=g)
    ok &= check("index_select", xid.index_select(0, idx.to(dev)), xi.index_select(0, idx), rtol=0, atol=0)
    acc = torch.zeros(64, dtype=torch.int64)
    want = acc.scatter_add(0, idx[:5000] % 64, xi[:5000].long())
    got = acc.to(dev).scatter_add(0, (idx[:5000] % 64).to(dev), xid[:5000].long())
    ok &= check("scatter_add", got, want, rtol=0, atol=0)
    m = torch.randn(256, 1000, generator=g)
    ok &= check("softmax", torch.softmax(m.to(dev), dim=1), torch.softmax(m, dim=1), rtol=1e-4, atol=1e-6)
    ln = torch.nn.LayerNorm(1000)
    with torch.no_grad():
        ok &= check("layer_norm", ln.to(dev)(m.to(dev)), ln.cpu()(m), rtol=1e-4, atol=1e-4)

    # A few steps of training: autograd, cuBLAS in both directions, the
    # optimiser's fused kernels; the same steps on the CPU give the same loss.
    def train(device):
        torch.manual_seed(7)
        net = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).to(device)
        opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
        data = torch.randn(256, 64, generator=torch.Generator().manual_seed(3)).to(device)
        label = torch.randint(0, 10, (256,), generator=torch.Generator().manual_seed(4)).to(device)
        for _ in range(20):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(net(data), label)
            loss.backward()
            opt.step()
        return loss.detach()
    ok &= check("20 training steps, loss", train(dev), train("cpu"), rtol=1e-3, atol=1e-4)

    # Streams, events and pinned memory: an asynchronous copy from pinned
    # memory on a side stream, ordered before the default stream by an event.
    pinned = torch.arange(1 << 20, dtype=torch.float32).pin_memory()
    side = torch.cuda.Stream()
    done = torch.cuda.Event()
    with torch.cuda.stream(side):
        on_dev = pinned.to(dev, non_blocking=True) * 3
        done.record()
    torch.cuda.current_stream().wait_event(done)
    back = torch.empty(1 << 20, dtype=torch.float32).pin_memory()
    back.copy_(on_dev + 1, non_blocking=True)
    torch.cuda.synchronize()
    ok &= check("pinned copies on a side stream", back, torch.arange(1 << 20, dtype=torch.float32) * 3 + 1,
                rtol=0, atol=0)

    torch.cuda.synchronize()
    print(f"  memory allocated by PyTorch: {torch.cuda.memory_allocated() >> 20} MiB")
    print(f"torch_smoke: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
