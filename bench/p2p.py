#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
#
# bench/p2p.py [MIB] [REPS]: copy bandwidth between GPU 0 and GPU 1 with
# PyTorch, both ways, and whether each can access the other as a peer. One
# line: "p2p can01 can10 gbps_1to0 gbps_0to1". The copies are checked (the
# destination equals the source) before they are timed. Run it natively,
# under NVIDIA MPS and under openmps (tests/gpu/multigpu.sh does).
import sys
import time

import torch


def bandwidth(src, dst, mib, reps):
    a = torch.randint(0, 1 << 30, (mib << 18,), dtype=torch.int32, device=src)
    b = torch.empty_like(a, device=dst)
    b.copy_(a)
    torch.cuda.synchronize(src)
    torch.cuda.synchronize(dst)
    if not torch.equal(b.cpu(), a.cpu()):
        raise SystemExit("p2p: the copy GPU %d -> GPU %d is wrong" % (src, dst))
    for _ in range(3):
        b.copy_(a)
    torch.cuda.synchronize(src)
    torch.cuda.synchronize(dst)
    t0 = time.perf_counter()
    for _ in range(reps):
        b.copy_(a, non_blocking=True)
    torch.cuda.synchronize(src)
    torch.cuda.synchronize(dst)
    return mib * reps / 1024 / (time.perf_counter() - t0)


def main():
    mib = int(sys.argv[1]) if len(sys.argv) > 1 else 256
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    if torch.cuda.device_count() < 2:
        print("p2p: fewer than two devices")
        return 77
    can01 = torch.cuda.can_device_access_peer(0, 1)
    can10 = torch.cuda.can_device_access_peer(1, 0)
    print("p2p %d %d %.1f %.1f" % (can01, can10, bandwidth(1, 0, mib, reps), bandwidth(0, 1, mib, reps)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
