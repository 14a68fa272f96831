#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
#
# bench/allreduce.py [MIB] [REPS]: a multi-process NCCL job on one host, one
# process per GPU (torch.distributed, NCCL backend): an all-reduce checked
# against the expected sum, a few steps of DDP training checked against the
# same steps on one process, then the all-reduce's bus bandwidth. One line:
# "allreduce WORLD GBPS ok". Run it natively, under NVIDIA MPS and under
# openmps (tests/gpu/multigpu.sh does). A job that has not ended after
# $ALLREDUCE_DEADLINE seconds (default 300) is ended, each process's Python
# stacks and threads' kernel waits written to stderr first.
import faulthandler
import os
import signal
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def where(pid):
    """What each thread of a process waits in (its name and kernel wait)."""
    lines = []
    for tid in sorted(os.listdir("/proc/%d/task" % pid), key=int):
        try:
            with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                comm = f.read().strip()
            with open("/proc/%d/task/%s/wchan" % (pid, tid)) as f:
                wchan = f.read().strip()
        except OSError:
            continue
        lines.append("allreduce: hung pid %d thread %s %s waits in %s\n" % (pid, tid, comm, wchan))
    return "".join(lines)


def worker(rank, world, port, mib, reps, out):
    faulthandler.register(signal.SIGUSR1)   # a hung job's stacks, asked for by main()
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=world)
    n = mib << 18
    x = torch.full((n,), float(rank + 1), device="cuda")
    dist.all_reduce(x)
    torch.cuda.synchronize()
    want = world * (world + 1) / 2
    ok = bool(torch.all(x == want).item())
    # DDP: every rank must end with the same weights, those of one process
    # training on the whole batch.
    torch.manual_seed(0)
    model = torch.nn.Linear(256, 256).cuda()
    ref = torch.nn.Linear(256, 256).cuda()
    ref.load_state_dict(model.state_dict())
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank])
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    ropt = torch.optim.SGD(ref.parameters(), lr=0.1)
    g = torch.Generator(device="cuda").manual_seed(1)
    for _ in range(3):
        batch = torch.randn(world * 8, 256, device="cuda", generator=g)
        opt.zero_grad()
        ddp(batch[rank * 8:(rank + 1) * 8]).pow(2).mean().backward()
        opt.step()
        ropt.zero_grad()
        (ref(batch).pow(2).mean()).backward()
        ropt.step()
    torch.cuda.synchronize()
    ok = ok and all(torch.allclose(a, b, rtol=1e-4, atol=1e-5)
                    for a, b in zip(model.parameters(), ref.parameters()))
    for _ in range(3):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(reps):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    secs = time.perf_counter() - t0
    busbw = (mib / 1024) * reps * 2 * (world - 1) / world / secs
    oks = [None] * world
    dist.all_gather_object(oks, ok)
    if rank == 0:
        out.put((busbw, all(oks)))
    dist.destroy_process_group()


def main():
    mib = int(sys.argv[1]) if len(sys.argv) > 1 else 256
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    world = torch.cuda.device_count()
    if world < 2:
        print("allreduce: fewer than two devices")
        return 77
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=worker, args=(r, world, port, mib, reps, q)) for r in range(world)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + float(os.environ.get("ALLREDUCE_DEADLINE", "300"))
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
    hung = [p for p in procs if p.is_alive()]
    for p in hung:   # a hung job: where each process waits, then end it, leaving the GPUs free
        os.kill(p.pid, signal.SIGUSR1)
        time.sleep(1)
        sys.stderr.write(where(p.pid))
    for p in hung:
        p.kill()
        p.join()
    if any(p.exitcode != 0 for p in procs) or q.empty():
        print("allreduce %d failed (exit codes %s)" % (world, [p.exitcode for p in procs]))
        return 1
    busbw, ok = q.get()
    print("allreduce %d %.1f %s" % (world, busbw, "ok" if ok else "WRONG"))
    return 0 if ok else 1


if __name__ == "__main__":
    os.environ.setdefault("NCCL_DEBUG", "WARN")
    sys.exit(main())
