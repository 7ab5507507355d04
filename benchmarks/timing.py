"""Wall time for the benchmarks: the fastest of several runs, waiting for the GPU when there is one.

The fastest run, not the mean: on a shared 2-core machine the other runs measure the neighbours.
"""

import time

import torch


def best_seconds(fn, repeat: int, device: torch.device) -> float:
    """Fastest wall time of fn() in seconds over `repeat` runs, synchronising CUDA around each."""
    best = float("inf")
    for _ in range(repeat):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        best = min(best, time.perf_counter() - start)
    return best
