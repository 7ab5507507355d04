"""Time a function the same way in every lesson and benchmark: the fastest of a few calls.

    from course_utils.timing import fastest_seconds
    ms = 1e3 * fastest_seconds(lambda: model(x), repeat=5, warmup=1, device=device)

The fastest call, not the mean or the median: the fastest is what the computation costs when
nothing else on the machine gets in the way, while a median also counts the moments another
program had the CPU (on a shared 2-core machine, often). On CUDA the GPU runs work queued by the
Python code later, so the clock is read only after torch.cuda.synchronize: otherwise it would time
the queueing, not the work.
"""

import math
from collections.abc import Callable
from numbers import Real
from time import perf_counter

import torch

__all__ = ["fastest_seconds"]


def fastest_seconds(fn: Callable[[], object], repeat: int = 1, warmup: int = 0,
                    budget: float | None = None,
                    device: torch.device | str | None = None) -> float:
    """The wall time of the fastest of up to `repeat` calls to fn(), in seconds.

    First `warmup` calls that are not timed (the first call of a function often pays for allocating
    memory and loading kernels), then the timed calls, one after the other.

    Inputs:
    - fn: callable with no arguments; what it returns is ignored
    - repeat: int >= 1, the number of timed calls (the most, when budget is given)
    - warmup: int >= 0, the number of untimed calls before them
    - budget: None, or seconds > 0: no timed call starts once `budget` seconds have passed since the
      first one began, provided min(repeat, 3) calls have run. None: all `repeat` calls run.
    - device: where fn's work runs (torch.device, "cuda:0", ...). When it is a CUDA device,
      torch.cuda.synchronize(device) runs before the clock starts and after each call, so the time
      includes the GPU's work; None or a CPU device: no synchronisation.
    Returns: float, the smallest of the timed calls' wall times, in seconds (time.perf_counter).
    Raises: ValueError when fn is not callable, repeat is not an int >= 1, warmup not an int >= 0,
    or budget neither None nor a number > 0.
    """
    if not callable(fn):
        raise ValueError(f"fn must be a function to call with no arguments, got {fn!r}")
    if type(repeat) is not int or repeat < 1:
        raise ValueError(f"repeat must be an int >= 1 (the number of timed calls), got {repeat!r}")
    if type(warmup) is not int or warmup < 0:
        raise ValueError("warmup must be an int >= 0 (the number of untimed calls), "
                         f"got {warmup!r}")
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, Real)
                               or math.isnan(budget) or budget <= 0):
        raise ValueError(f"budget must be None or a number of seconds > 0, got {budget!r}")
    cuda = device is not None and torch.device(device).type == "cuda"

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize(device)

    for _ in range(warmup):
        fn()
    sync()
    times = []
    begin = perf_counter()
    while len(times) < repeat and (budget is None or len(times) < 3
                                   or perf_counter() - begin < budget):
        start = perf_counter()
        fn()
        sync()
        times.append(perf_counter() - start)
    return min(times)
