"""Wall time for the benchmarks: course_utils.timing, the loop the lessons use too.

The fastest run, not the mean: on a shared 2-core machine the other runs measure the neighbours.
"""

import torch

from course_utils.timing import fastest_seconds


def best_seconds(fn, repeat: int, device: torch.device) -> float:
    """Fastest wall time of fn() in seconds over `repeat` runs, synchronising CUDA around each.

    fastest_seconds(fn, repeat=repeat, device=device): no warm-up call, every run timed.
    """
    return fastest_seconds(fn, repeat=repeat, device=device)
