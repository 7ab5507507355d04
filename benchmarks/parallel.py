"""What splitting a training step costs here: data parallel over gloo processes, accumulation,
pipeline bubbles.

    python benchmarks/parallel.py [--steps 5] [--batch 256]

Measured for lesson 08. Numbers vary with the machine and its load: each time is the fastest of
--steps steps after a warm-up step (on a busy machine the median mostly measures the other
programs).
1. start-up: seconds for run_workers to start N processes and join them in a gloo group (the first
   call also starts the fork server);
2. data parallel: per MLP and N = 1, 2 processes of --threads threads each (default 1: a core stands
   for a device): time per step of a global batch and per example, the bytes DDP all-reduces per
   step, and the time of one all_reduce of that many bytes alone;
3. gradient accumulation in this one process (--threads threads): k = 1, 2, 4 micro-batches, time
   per example and the peak of the activations saved for backward;
4. pipeline bubble: a GPipe step on p simulated devices (threads that sleep per micro-batch), the
   measured idle fraction against (p-1)/(m+p-1);
5. DDP bucket memory at N = 2 processes, per MLP, gradient_as_bucket_view False and True: bytes of
   the distinct storages behind the gradients and behind DDP's buckets (seen by a communication
   hook) on a rank after three steps, and of both together (a storage that is both counts once).
"""

import argparse
import os
import platform
import queue
import sys
import threading
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.nn.parallel import DistributedDataParallel as DDP

from course_utils.memory import SavedTensors, format_bytes
from course_utils.parallel import run_workers, worker_device

MODELS = {"lesson MLP": [32, 256, 256, 128, 128, 10], "wide MLP": [256, 1024, 1024, 256, 10]}


def mlp(sizes):
    """Linear and ReLU layers through the given widths, float32."""
    layers = []
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers += [nn.Linear(fan_in, fan_out)] + ([nn.ReLU()] if i < len(sizes) - 2 else [])
    return nn.Sequential(*layers)


def nothing(rank, world_size):
    return rank


def counting_hook(sizes, bucket):
    sizes.append(bucket.buffer().numel() * bucket.buffer().element_size())
    return allreduce_hook(None, bucket)


def ddp_steps(rank, world_size, sizes, batch, steps, threads):
    """In each worker: DDP training steps on this rank's share of a global batch; all_reduce
    alone."""
    torch.set_num_threads(threads)
    dev = worker_device()
    torch.manual_seed(0)
    model = mlp(sizes).to(dev)
    ddp = DDP(model, device_ids=[dev] if dev.type == "cuda" else None)
    sent = []
    ddp.register_comm_hook(sent, counting_hook)
    X = torch.randn(batch // world_size, sizes[0], device=dev)
    y = torch.randint(0, sizes[-1], (batch // world_size,), device=dev)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    step_times, reduce_times = [], []
    for i in range(steps + 1):
        start = time.perf_counter()
        optimizer.zero_grad()
        F.cross_entropy(ddp(X), y).backward()
        optimizer.step()
        if dev.type == "cuda":
            torch.cuda.synchronize()
        step_times.append(time.perf_counter() - start)
        if i == 0:
            sent_bytes = sum(sent)
    grads = torch.zeros(sum(p.numel() for p in model.parameters()), device=dev)
    for _ in range(steps + 1):
        dist.barrier()
        start = time.perf_counter()
        dist.all_reduce(grads)
        if dev.type == "cuda":
            torch.cuda.synchronize()
        reduce_times.append(time.perf_counter() - start)
    return {"step": min(step_times[1:]), "sent": sent_bytes, "all_reduce": min(reduce_times[1:]),
            "threads": torch.get_num_threads()}


def data_parallel(steps, batch, threads):
    print("\n## start-up of run_workers (gloo)")
    for world_size in (2, 2, 1):
        start = time.perf_counter()
        run_workers(nothing, world_size=world_size, backend="gloo")
        print(f"N = {world_size}: {time.perf_counter() - start:6.2f} s")
    print(f"\n## data parallel with DDP over gloo, global batch {batch}, float32")
    print(f"{'model':<12}{'N':>3}{'threads':>8}{'ms/step':>10}{'us/example':>12}{'sent/step':>12}"
          f"{'all_reduce ms':>15}{'2(N-1)/N x bytes/s':>20}")
    for name, sizes in MODELS.items():
        for world_size in (1, 2):
            r = run_workers(ddp_steps, world_size=world_size, backend="gloo", timeout=300,
                            args=(sizes, batch, steps, threads))
            step, ar, sent = (max(x["step"] for x in r), max(x["all_reduce"] for x in r),
                              r[0]["sent"])
            bus = 2 * (world_size - 1) / world_size * sent / ar if world_size > 1 else 0
            print(f"{name:<12}{world_size:>3}{r[0]['threads']:>8}{1e3 * step:>10.1f}"
                  f"{1e6 * step / batch:>12.1f}{format_bytes(sent):>12}"
                  f"{1e3 * ar:>15.2f}{format_bytes(int(bus)) + '/s':>20}")


def accumulation(steps, batch, threads):
    torch.set_num_threads(threads)
    print(f"\n## gradient accumulation in one process ({torch.get_num_threads()} threads), "
          f"batch {batch}, float32")
    print(f"{'model':<12}{'k':>3}{'us/example':>12}{'peak activations':>18}")
    for name, sizes in MODELS.items():
        torch.manual_seed(0)
        model = mlp(sizes)
        X, y = torch.randn(batch, sizes[0]), torch.randint(0, sizes[-1], (batch,))
        for k in (1, 2, 4):
            micro = [(Xj.clone(), yj.clone()) for Xj, yj in zip(X.chunk(k), y.chunk(k))]
            times = []
            for _ in range(steps + 1):
                model.zero_grad(set_to_none=True)
                start = time.perf_counter()
                with SavedTensors(exclude=model.parameters()) as saved:
                    for Xj, yj in micro:
                        (F.cross_entropy(model(Xj), yj) / k).backward()
                times.append(time.perf_counter() - start)
            t = min(times[1:])
            print(f"{name:<12}{k:>3}{1e6 * t / batch:>12.1f}{format_bytes(saved.peak_bytes):>18}")


def gpipe_bubble(p, m, slot):
    """Measured idle fraction of a GPipe step on p threads that sleep `slot` s per forward or
    backward."""
    fwd, bwd, busy = [queue.Queue() for _ in range(p)], [queue.Queue() for _ in range(p)], [0.0] * p

    def stage(s):
        for direction, inbox in (("F", fwd[s]), ("B", bwd[s])):
            for _ in range(m):
                j = inbox.get()
                start = time.perf_counter()
                time.sleep(slot)
                busy[s] += time.perf_counter() - start
                if direction == "F":
                    (fwd[s + 1] if s < p - 1 else bwd[s]).put(j)
                elif s > 0:
                    bwd[s - 1].put(j)

    for j in range(m):
        fwd[0].put(j)
    threads = [threading.Thread(target=stage, args=(s,)) for s in range(p)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    return sum(1 - b / wall for b in busy) / p, wall


def pipeline(slot=0.005):
    print(f"\n## GPipe bubble on simulated devices ({1e3 * slot:.0f} ms per micro-batch and stage, "
          "each way)")
    print(f"{'p':>3}{'m':>4}{'wall ms':>9}{'ideal ms':>10}{'measured':>10}{'(p-1)/(m+p-1)':>15}")
    for p in (2, 4, 8):
        for m in (1, 2, 4, 8, 16, 32):
            bubble, wall = gpipe_bubble(p, m, slot)
            print(f"{p:>3}{m:>4}{1e3 * wall:>9.0f}{1e3 * 2 * (m + p - 1) * slot:>10.0f}"
                  f"{bubble:>10.3f}{(p - 1) / (m + p - 1):>15.3f}")


def storages(tensors):
    """{address: bytes} of the distinct storages behind the tensors: views of one storage count
    once."""
    return {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}


def noting_hook(buckets, bucket):
    buckets.update(storages([bucket.buffer()]))
    return allreduce_hook(None, bucket)


def bucket_bytes(rank, world_size, sizes, batch):
    """In each worker: three DDP steps per gradient_as_bucket_view; the storages held after the
    last."""
    dev = worker_device()
    X = torch.randn(batch // world_size, sizes[0], device=dev)
    y = torch.randint(0, sizes[-1], (batch // world_size,), device=dev)
    held = {}
    for as_view in (False, True):
        torch.manual_seed(0)
        model = mlp(sizes).to(dev)
        ddp = DDP(model, device_ids=[dev] if dev.type == "cuda" else None,
                  gradient_as_bucket_view=as_view)
        buckets = {}
        ddp.register_comm_hook(buckets, noting_hook)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        for _ in range(3):  # DDP re-orders its buckets once, after the first step
            buckets.clear()
            optimizer.zero_grad()
            F.cross_entropy(ddp(X), y).backward()
            optimizer.step()
        grads = storages(p.grad for p in model.parameters())
        held[as_view] = {"params": sum(p.numel() * p.element_size() for p in model.parameters()),
                         "grads": sum(grads.values()), "buckets": sum(buckets.values()),
                         "shared": len(set(grads) & set(buckets)),
                         "storages": (len(grads), len(buckets)),
                         "together": sum({**grads, **buckets}.values())}
    return held


def bucket_memory(batch):
    print("\n## DDP bucket memory per rank, N = 2 processes (gloo), float32, default bucket_cap_mb")
    print(f"{'model':<12}{'as view':>8}{'params':>12}{'gradients':>12}{'buckets':>12}"
          f"{'storages g/b':>14}{'shared':>8}{'grads+buckets':>15}")
    for name, sizes in MODELS.items():
        held = run_workers(bucket_bytes, world_size=2, backend="gloo", timeout=300,
                           args=(sizes, batch))[0]
        for as_view, h in held.items():
            print(f"{name:<12}{str(as_view):>8}{format_bytes(h['params']):>12}"
                  f"{format_bytes(h['grads']):>12}{format_bytes(h['buckets']):>12}"
                  f"{'%d/%d' % h['storages']:>14}{h['shared']:>8}{format_bytes(h['together']):>15}")


def main() -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--steps", type=int, default=10,
                        help="timed steps per measurement (the fastest is kept)")
    parser.add_argument("--batch", type=int, default=256, help="global batch size")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads per process (default 1)")
    args = parser.parse_args()
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"torch {torch.__version__}, {gpu}")
    data_parallel(args.steps, args.batch, args.threads)
    accumulation(args.steps, args.batch, args.threads)
    pipeline()
    bucket_memory(args.batch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
