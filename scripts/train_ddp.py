"""Data-parallel training of a small MLP on synthetic data with DistributedDataParallel (lesson 08).

Start it with torchrun, from the course folder; the same code runs on CPUs (gloo) and GPUs (NCCL):

    torchrun --standalone --nproc_per_node=2 scripts/train_ddp.py     # 2 processes, this machine
    torchrun --standalone --nproc_per_node=gpu scripts/train_ddp.py   # one process per GPU
    torchrun --nnodes=2 --node_rank=0 --master_addr=HOST --master_port=29500 \\
             --nproc_per_node=8 scripts/train_ddp.py  # on each of 2 machines (node_rank 0, 1)

Every step takes the next global batch of --batch-size examples; rank r trains on its own slice of
it, DDP averages the gradients during backward, and every rank takes the same SGD step, so the run
matches one process on the whole batch. Rank 0 prints the loss of each step over the global batch.
"""

import argparse
import gc
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from course_utils.data import blobs
from course_utils.models import MLP
from course_utils.parallel import init_from_env


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--steps", type=int, default=20, help="training steps (default 20)")
    parser.add_argument("--batch-size", type=int, default=64,
                        help="global batch, split over the ranks (default 64)")
    parser.add_argument("--lr", type=float, default=0.1, help="SGD learning rate (default 0.1)")
    parser.add_argument("--backend", choices=["gloo", "nccl"], default=None,
                        help="default: nccl with a GPU per rank")
    return parser.parse_args(argv)


def train(args: argparse.Namespace, rank: int, world_size: int, device: torch.device) -> None:
    """The training loop, inside the process group; prints from rank 0."""
    if args.batch_size % world_size:
        raise SystemExit(f"--batch-size {args.batch_size} must be divisible by the "
                         f"{world_size} ranks")
    share = args.batch_size // world_size
    # same data on every rank
    X, y = blobs(n=args.steps * args.batch_size, num_inputs=20, num_classes=4, seed=0)
    torch.manual_seed(0)
    model = MLP(num_outputs=4, num_hiddens=[64, 64], lr=args.lr, num_inputs=20).to(device)
    # copies rank 0's weights to all
    ddp = DDP(model, device_ids=[device] if device.type == "cuda" else None)
    optimizer = model.configure_optimizers()
    if rank == 0:
        print(f"world size {world_size}, backend {dist.get_backend()}, {share} examples per rank "
              "per step", flush=True)
    for step in range(args.steps):
        lo = step * args.batch_size + rank * share  # this rank's slice of the global batch
        Xb, yb = X[lo:lo + share].to(device), y[lo:lo + share].to(device)
        optimizer.zero_grad()
        loss = model.loss(ddp(Xb), yb)
        loss.backward()  # DDP all-reduces the gradients here
        optimizer.step()
        total = loss.detach().clone()
        dist.all_reduce(total)  # the mean over the global batch: average of the ranks' means
        if rank == 0:
            print(f"step {step:3d}  loss {total.item() / world_size:.4f}", flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    rank, world_size, device = init_from_env(args.backend)
    try:
        train(args, rank, world_size, device)
    finally:
        gc.collect()  # DDP must let go of the process group before it is destroyed
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
