"""Sharded data parallel measured (lesson 09): bytes per rank and step time for DDP, ZeRO-1/2/3 and
FSDP.

    python benchmarks/sharding_memory.py [--world-sizes 2 3] [--steps 5] [--width 512]

Lesson 09's model (Linear(64, d) -> GELU -> Linear(d, d) -> GELU -> Linear(d, d) -> GELU ->
Linear(d, 10), float32), Adam, a batch of 256 split over the ranks, in real process groups
(course_utils.parallel: gloo on CPUs, NCCL when each rank has a GPU). Each way trains --steps steps;
then every rank reports

- at rest: the bytes of its parameters, gradients and Adam state (distinct storages; a DTensor
  counts its local shard), next to the ZeRO formula of lesson 09 (a sharded part holds ceil(P/N)
  numbers);
- the step's peak above what existed before it: tensors followed by
  course_utils.memory.TensorAllocations on a CPU (every tensor an operation creates, the
  all-gathered parameters of FSDP included), the caching allocator's peak on a GPU;
- the fastest step (its slowest rank), and the ratio to DDP's.

The ways:
  DDP                        DistributedDataParallel(gradient_as_bucket_view=True) + Adam
                             (ZeRO stage 0)
  ZeRO-1                     DDP + torch.distributed.optim.ZeroRedundancyOptimizer(Adam)
                             (stage 1)
  ZeRO-2 (FSDP, no reshard)  fully_shard(reshard_after_forward=False): each layer's parameters are
                             gathered once per step and kept from its forward to its backward, as
                             ZeRO-2 keeps them (FSDP's SHARD_GRAD_OP); at rest, after the step, FSDP
                             holds them sharded, so the bytes at rest are stage 3's
  ZeRO-3 (FSDP)              fully_shard on each Linear and the model
                             (stage 3)

Measured on a 2-core CPU (torch 2.13, gloo), 2 processes: the bytes at rest equal the formula for
DDP, FSDP and ZeRO-1's parameters and gradients; ZeroRedundancyOptimizer's Adam state is uneven
(2.25 MiB on the largest rank against 2.15 MiB: it places whole parameters); at 3 processes FSDP
holds 736.8 KiB of parameters per rank against ceil(P/3) = 734.0 KiB (each parameter is padded to a
multiple of 3 rows). Step times on a shared 2-core machine move with its load; the ratio to DDP is
the figure to read.
"""

import argparse
import math
import platform
import time

import torch
import torch.nn.functional as F
from torch import nn

from course_utils.data import blobs
from course_utils.memory import TensorAllocations, format_bytes, storage_bytes
from course_utils.parallel import pick_backend, run_workers, worker_device

WAYS = ["DDP", "ZeRO-1", "ZeRO-2 (FSDP, no reshard)", "ZeRO-3 (FSDP)"]
# at rest, FSDP shards all three
STAGE = {"DDP": 0, "ZeRO-1": 1, "ZeRO-2 (FSDP, no reshard)": 3, "ZeRO-3 (FSDP)": 3}


def make_mlp(width: int) -> nn.Sequential:
    torch.manual_seed(0)
    sizes = [64, width, width, width, 10]
    layers = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(nn.GELU())
    return nn.Sequential(*layers)


def run_way(rank: int, world_size: int, way: str, width: int, steps: int) -> dict:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel as DDP
    dev = worker_device()
    X, y = blobs(n=256, num_inputs=64, num_classes=10, seed=0, dtype=torch.float32)
    n = len(X) // world_size
    Xr, yr = X[rank * n:(rank + 1) * n].to(dev), y[rank * n:(rank + 1) * n].to(dev)
    model = make_mlp(width).to(dev)
    if way.startswith("ZeRO-2") or way.startswith("ZeRO-3"):
        reshard = way.startswith("ZeRO-3")
        # the default mesh is on a GPU wherever there is one
        mesh = init_device_mesh(dev.type, (world_size,))
        for layer in model:
            if isinstance(layer, nn.Linear):
                fully_shard(layer, mesh=mesh, reshard_after_forward=reshard)
        net = fully_shard(model, mesh=mesh, reshard_after_forward=reshard)
    else:
        net = DDP(model, device_ids=[dev] if dev.type == "cuda" else None,
                  gradient_as_bucket_view=True)
    if way == "ZeRO-1":
        opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam, lr=1e-3)
        state = opt.optim.state
    else:
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        state = opt.state

    def step():
        opt.zero_grad(set_to_none=False)
        F.cross_entropy(net(Xr), yr).backward()
        opt.step()

    step()  # gradients and Adam's state exist from here on
    times = []
    for _ in range(steps):
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        start = time.perf_counter()
        step()
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        times.append(time.perf_counter() - start)
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
        before = torch.cuda.memory_allocated(dev)
        step()
        peak = torch.cuda.max_memory_allocated(dev) - before
    else:
        with TensorAllocations(dev) as mem:
            step()
        peak = mem.peak_bytes
    params = list(model.parameters())
    return {"params": storage_bytes(params), "grads": storage_bytes(p.grad for p in params),
            "optimizer": storage_bytes(t for s in state.values() for t in s.values()
                                       if torch.is_tensor(t) and t.dim() > 0),
            "peak": peak, "seconds": min(times)}


def worker(rank: int, world_size: int, width: int, steps: int) -> dict:
    if worker_device().type == "cpu":
        torch.set_num_threads(1)  # one core per rank, standing in for one device
    return {way: run_way(rank, world_size, way, width, steps) for way in WAYS}


def formula(num_params: int, world_size: int, stage: int) -> dict:
    """Lesson 09's ZeRO bytes per rank: float32 parameters and gradients, Adam's two float32
    numbers."""
    shard = math.ceil(num_params / world_size)
    return {"params": 4 * (shard if stage >= 3 else num_params),
            "grads": 4 * (shard if stage >= 2 else num_params),
            "optimizer": 8 * (shard if stage >= 1 else num_params)}


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--world-sizes", type=int, nargs="+", default=[2, 3])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--width", type=int, default=512)
    args = parser.parse_args()
    P = sum(p.numel() for p in make_mlp(args.width).parameters())
    print(f"# sharded data parallel, torch {torch.__version__}, {platform.machine()}, "
          f"{P:,} parameters (float32), Adam, batch 256")
    for world_size in args.world_sizes:
        ranks = run_workers(worker, world_size=world_size, args=(args.width, args.steps),
                            timeout=600)
        print(f"\n## {world_size} processes ({pick_backend(world_size)}); bytes per rank: "
              "the largest rank, [ZeRO formula]")
        print(f"{'':26}{'params':>22}{'grads':>22}{'Adam state':>22}{'step peak':>12}{'step ms':>9}"
              f"{'vs DDP':>8}")
        ddp = max(r["DDP"]["seconds"] for r in ranks)
        for way in WAYS:
            want = formula(P, world_size, STAGE[way])
            cells = [f"{format_bytes(max(r[way][k] for r in ranks))} [{format_bytes(want[k])}]"
                     for k in ("params", "grads", "optimizer")]
            seconds = max(r[way]["seconds"] for r in ranks)
            print(f"{way:26}" + "".join(f"{c:>22}" for c in cells)
                  + f"{format_bytes(max(r[way]['peak'] for r in ranks)):>12}"
                    f"{1e3 * seconds:9.1f}{seconds / ddp:8.2f}")


if __name__ == "__main__":
    main()
