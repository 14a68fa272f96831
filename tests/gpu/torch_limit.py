# SPDX-License-Identifier: MIT
#
# PyTorch under a pinned device memory limit (openmps only; tests/gpu/run.sh
# sets the limit with set_default_device_pinned_mem_limit before the server
# starts). usage: torch_limit.py LIMIT_MIB
#   - torch.cuda.mem_get_info() shows the limit as the total and at most
#     the limit as free;
#   - a tensor of a quarter of the limit is allocated, filled and summed
#     correctly, and the free figure drops by at least its size;
#   - a tensor larger than the limit fails with torch.OutOfMemoryError, and
#     the process goes on working afterwards.
# Exits 0 when all hold, 1 otherwise, 77 when PyTorch or a device is missing.
import sys

try:
    import torch
except ImportError as e:
    print(f"torch_limit: SKIP (cannot import torch: {e})")
    sys.exit(77)

MIB = 1 << 20


def main():
    if len(sys.argv) != 2:
        print("usage: torch_limit.py LIMIT_MIB")
        return 2
    if not torch.cuda.is_available():
        print("torch_limit: SKIP (torch.cuda.is_available() is False)")
        return 77
    limit = int(sys.argv[1]) * MIB
    ok = True

    free0, total = torch.cuda.mem_get_info()
    print(f"  mem_get_info: {free0 // MIB} MiB free of {total // MIB} MiB")
    if total != limit or free0 > limit:
        print(f"  WRONG: want a total of {limit // MIB} MiB and at most that free")
        ok = False

    n = limit // 4 // 4          # int32 elements in a quarter of the limit
    x = torch.arange(n, device="cuda", dtype=torch.int32).remainder_(1024)
    want = (n // 1024) * (1023 * 1024 // 2) + sum(range(n % 1024))
    got = int(x.sum(dtype=torch.int64).item())
    print(f"  {n * 4 // MIB} MiB tensor: sum {got}, want {want}")
    ok &= got == want
    free1, _ = torch.cuda.mem_get_info()
    print(f"  after it: {free1 // MIB} MiB free")
    if free0 - free1 < n * 4:
        print("  WRONG: the tensor does not show in the free memory")
        ok = False

    try:
        y = torch.empty(limit + 64 * MIB, dtype=torch.uint8, device="cuda")
        print(f"  WRONG: {y.numel() // MIB} MiB allocated past the limit")
        ok = False
    except torch.OutOfMemoryError as e:
        print(f"  past the limit: OutOfMemoryError ({str(e).splitlines()[0][:80]})")

    z = (x[:1024] * 2).sum().item()
    print(f"  after the refusal: sum {z}, want {1023 * 1024}")
    ok &= z == 1023 * 1024
    print("torch_limit: " + ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
