"""Peak activation memory and time of gradient accumulation against micro-batch size (lesson 05).

    python benchmarks/accumulation_memory.py [--repeat 5]

The settings of lesson 05, section 7: course_utils.models.MLP with hidden layers [256, 256] on
256 samples of 20-feature, 4-class blobs (float32), an effective batch of 256 split into
micro-batches of b samples, k = 256 / b of them per step. For each device (the CPU, and CUDA when
there is one) it prints, per b:

- the peak bytes of saved activations (course_utils.memory.SavedTensors, the data set and the
  parameters excluded) for accumulation (backward after every micro-batch) and for the loop that
  sums the k losses into one graph (one backward at the end);
- on CUDA, the same two runs' peak as the caching allocator saw it (cuda_peak_bytes: gradients,
  temporaries and 512-byte rounding included);
- milliseconds per effective batch, best of --repeat runs, for both loops.

Then the same two peaks at a fixed b = 32 for k = 1, 2, 4, 8. The saved-tensor bytes are exact
and equal on every machine; the times are not (they depend on the CPU and its load).
"""

import argparse
import os
import platform
import sys

import torch

from course_utils.data import blobs
from course_utils.devices import try_all_gpus
from course_utils.memory import SavedTensors, cuda_peak_bytes
from course_utils.models import MLP
from course_utils.timing import fastest_seconds

EFFECTIVE_BATCH = 256
SIZES = [1, 2, 4, 8, 16, 32, 64, 128, 256]


def accumulate(model, X, y, micro_batch_size, summed=False):
    """Gradient of the mean loss over X into .grad, micro-batch by micro-batch (len(X) % b == 0).
    summed=True adds the losses into one graph and calls backward once at the end instead."""
    model.zero_grad()
    k = len(X) // micro_batch_size
    total = 0
    for i in range(0, len(X), micro_batch_size):
        loss = model.loss(model(X[i:i + micro_batch_size]), y[i:i + micro_batch_size]) / k
        if summed:
            total = total + loss
        else:
            loss.backward()
    if summed:
        total.backward()


def peak_saved_bytes(model, X, y, micro_batch_size, summed=False):
    with SavedTensors(exclude=[*model.parameters(), X, y]) as saved:
        accumulate(model, X, y, micro_batch_size, summed)
    return saved.peak_bytes


def run(device, repeat):
    torch.manual_seed(0)
    model = MLP(4, [256, 256], lr=0.1, num_inputs=20).to(device)
    X, y = (t.to(device) for t in blobs(n=EFFECTIVE_BATCH, num_inputs=20, num_classes=4, seed=0))
    cuda = device.type == "cuda"
    accumulate(model, X, y, 32)  # warm-up: allocate .grad once, load kernels
    head = f"{'b':>4} {'k':>4} {'saved: accum':>13} {'saved: summed':>14}"
    head += f" {'cuda: accum':>12} {'cuda: summed':>13}" if cuda else ""
    print(f"\n## {device} (effective batch {EFFECTIVE_BATCH}; bytes; ms per effective batch, "
          f"best of {repeat})")
    print(head + f" {'ms accum':>9} {'ms summed':>10}")
    for b in SIZES:
        row = f"{b:>4} {EFFECTIVE_BATCH // b:>4} {peak_saved_bytes(model, X, y, b):>13} "
        row += f"{peak_saved_bytes(model, X, y, b, summed=True):>14}"
        if cuda:
            row += f" {cuda_peak_bytes(lambda: accumulate(model, X, y, b), device):>12}"
            row += (
                f" {cuda_peak_bytes(lambda: accumulate(model, X, y, b, summed=True), device):>13}")
        row += f""" {1e3 * fastest_seconds(lambda: accumulate(model, X, y, b), repeat=repeat,
                                           device=device):>9.2f}"""
        row += f""" {1e3 * fastest_seconds(lambda: accumulate(model, X, y, b, summed=True),
                                           repeat=repeat, device=device):>10.2f}"""
        print(row, flush=True)
    print(f"\nfixed b = 32: {'k':>2} {'saved: accum':>13} {'saved: summed':>14}")
    for k in (1, 2, 4, 8):
        Xk, yk = X[:32 * k], y[:32 * k]
        print(f"{'':>14}{k:>2} {peak_saved_bytes(model, Xk, yk, 32):>13} "
              f"{peak_saved_bytes(model, Xk, yk, 32, summed=True):>14}")


def main() -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--repeat", type=int, default=5,
                        help="timed runs per setting (best is printed)")
    args = parser.parse_args()
    gpus = [d for d in try_all_gpus() if d.type == "cuda"]
    gpu = torch.cuda.get_device_name(0) if gpus else "no GPU"
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores "
          f"({torch.get_num_threads()} torch threads), torch {torch.__version__}, {gpu}")
    for device in [torch.device("cpu")] + gpus[:1]:
        run(device, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
