"""Pick where tensors live: the CPU, or a CUDA GPU when there is one (d2l.ai, section 6.7).

Every notebook runs unchanged on a laptop and on a GPU machine by asking for a device
instead of naming one:

    device = try_gpu()                  # cuda:0 if there is a GPU, else cpu
    model = MLP(10, [256], lr=0.1).to(device)
    X = X.to(device)

Nothing here touches CUDA at import time; each function asks torch when it is called.
"""

import numbers

import torch

__all__ = ["num_gpus", "cpu", "try_gpu", "try_all_gpus"]


def num_gpus() -> int:
    """Return the number of CUDA GPUs torch can use here (0 on a CPU-only machine)."""
    return torch.cuda.device_count()


def cpu() -> torch.device:
    """Return the CPU device, `torch.device("cpu")`."""
    return torch.device("cpu")


def try_gpu(i: int = 0) -> torch.device:
    """Return GPU number i if it exists, else the CPU.

    Inputs:
    - i: index of the GPU, a non-negative int (bool is rejected).

    Returns:
    - torch.device("cuda:i") when at least i + 1 GPUs are present, else torch.device("cpu").

    Raises TypeError when i is not an int, ValueError when it is negative.
    """
    if not isinstance(i, numbers.Integral) or isinstance(i, bool):
        raise TypeError(f"try_gpu(i): i must be a non-negative int, got {type(i).__name__} {i!r}")
    if i < 0:
        raise ValueError(f"try_gpu(i): i must be a non-negative int, got {i}")
    if num_gpus() >= i + 1:
        return torch.device(f"cuda:{int(i)}")
    return cpu()


def try_all_gpus() -> list[torch.device]:
    """Return every GPU, or [torch.device("cpu")] when there is none.

    d2l's try_all_gpus returns [] on a CPU-only machine. We return the CPU instead, so code
    can always loop over the list (or take its first element) and still run somewhere:

        for device in try_all_gpus():
            ...

    Returns:
    - [cuda:0, cuda:1, ...] with one entry per GPU, or [cpu] when there is no GPU.
    """
    n = num_gpus()
    if n == 0:
        return [cpu()]
    return [torch.device(f"cuda:{k}") for k in range(n)]
