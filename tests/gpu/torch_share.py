# SPDX-License-Identifier: MIT
"""tests/gpu/torch_share.py: what PyTorch sees and does under an active
thread percentage: the SM count it reads, matmuls at fp32/bf16/fp16 checked
against a float64 reference on the CPU, a CUDA graph captured and replayed
(checked), and the time of a large bf16 matmul. One line:

  share SMS MATMUL_MS ok        (or: share ... FAIL: why)

Run it natively, under NVIDIA MPS and under openmps with
CUDA_MPS_ACTIVE_THREAD_PERCENTAGE set, and compare the lines."""
import sys
import time

import torch


def main():
    dev = torch.device("cuda")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    torch.manual_seed(1234)
    why = []
    for dt, tol in ((torch.float32, 1e-3), (torch.bfloat16, 3e-2), (torch.float16, 1e-2)):
        a = torch.randn(512, 384, dtype=torch.float64)
        b = torch.randn(384, 256, dtype=torch.float64)
        ref = a @ b
        got = (a.to(dev, dt) @ b.to(dev, dt)).double().cpu()
        err = ((got - ref).abs().max() / ref.abs().max()).item()
        if not err < tol:
            why.append("%s matmul off by %.3g" % (dt, err))
    # A CUDA graph: captured once, replayed on new input.
    x = torch.randn(1024, 1024, device=dev)
    w = torch.randn(1024, 1024, device=dev)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            y = torch.relu(x @ w) + 1.0
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = torch.relu(x @ w) + 1.0
    x.copy_(torch.randn(1024, 1024, device=dev))
    g.replay()
    torch.cuda.synchronize()
    ref = torch.relu(x.double().cpu() @ w.double().cpu()) + 1.0
    err = ((y.double().cpu() - ref).abs().max() / ref.abs().max()).item()
    if not err < 1e-2:
        why.append("graph replay off by %.3g" % err)
    # Time: a large bf16 matmul, best of five after a warm-up.
    m = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    (m @ m).sum().item()
    best = 1e9
    for _ in range(5):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(4):
            p = m @ m
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t0) * 1e3 / 4)
    if not torch.isfinite(p.float().sum()).item():
        why.append("matmul result not finite")
    print("share %d %.3f %s" % (sms, best, "ok" if not why else "FAIL: " + "; ".join(why)))
    return 0 if not why else 1


if __name__ == "__main__":
    sys.exit(main())
