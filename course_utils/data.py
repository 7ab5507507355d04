"""Small data sets made on the spot (the course downloads nothing), deterministic given a seed.

    X, y = blobs(n=256, num_inputs=20, num_classes=4, seed=0)   # a classification problem
    X, y = linear(n=64, num_inputs=3, seed=0)                    # y = X w + b + noise
    for Xb, yb in batches(X, y, batch_size=32): ...
    idx, targets = sequences(n=64, seq_len=128, vocab_size=64, seed=0)   # next-token prediction
"""

import torch


def _check_int(name: str, value, low: int = 1) -> int:
    if type(value) is not int or value < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    return value


def blobs(n: int = 256, num_inputs: int = 20, num_classes: int = 4, spread: float = 1.0,
          seed: int = 0, dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """Gaussian clusters, one per class, around random centres.

    Returns: X of shape (n, num_inputs) and dtype `dtype`; y of shape (n,), int64 labels in [0,
    num_classes).
    """
    for name, v in (("n", n), ("num_inputs", num_inputs), ("num_classes", num_classes)):
        _check_int(name, v)
    _check_int("seed", seed, low=0)
    g = torch.Generator().manual_seed(seed)
    centres = 3.0 * torch.randn(num_classes, num_inputs, generator=g)  # (q, d)
    y = torch.arange(n) % num_classes                                   # balanced classes
    y = y[torch.randperm(n, generator=g)]                                # (n,)
    X = centres[y] + spread * torch.randn(n, num_inputs, generator=g)    # (n, d)
    return X.to(dtype), y


def linear(n: int = 64, num_inputs: int = 3, noise: float = 0.01, seed: int = 0,
           dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """A linear regression problem y = X w + b + noise with fixed w = [2, -3.4, ...] and b = 4.2.

    Returns: X of shape (n, num_inputs), y of shape (n, 1), both of dtype `dtype`.
    """
    _check_int("n", n)
    _check_int("num_inputs", num_inputs)
    _check_int("seed", seed, low=0)
    g = torch.Generator().manual_seed(seed)
    w = torch.tensor([2.0, -3.4] + [1.0] * (num_inputs - 2))[:num_inputs]
    X = torch.randn(n, num_inputs, generator=g)
    y = X @ w + 4.2 + noise * torch.randn(n, generator=g)
    return X.to(dtype), y.reshape(-1, 1).to(dtype)


def sequences(n: int = 64, seq_len: int = 128, vocab_size: int = 64,
              seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Token sequences for next-token prediction: each sequence counts up through the vocabulary
    modulo vocab_size from a random start, by a step of 1, 2 or 3 drawn per sequence, and one token
    in eight is replaced by a random one (so the step must be read from the context, never certain).

    Returns: idx and targets, int64 of shape (n, seq_len), targets[:, t] the token after idx[:, t].
    """
    for name, v in (("n", n), ("seq_len", seq_len), ("vocab_size", vocab_size)):
        _check_int(name, v)
    _check_int("seed", seed, low=0)
    g = torch.Generator().manual_seed(seed)
    start = torch.randint(0, vocab_size, (n, 1), generator=g)                # (n, 1)
    step = torch.randint(1, 4, (n, 1), generator=g)                          # (n, 1): 1, 2 or 3
    tokens = (start + step * torch.arange(seq_len + 1)) % vocab_size          # (n, seq_len + 1)
    noisy = torch.rand(n, seq_len + 1, generator=g) < 1 / 8
    tokens = torch.where(noisy, torch.randint(0, vocab_size, (n, seq_len + 1), generator=g), tokens)
    return tokens[:, :-1].clone(), tokens[:, 1:].clone()


def batches(X: torch.Tensor, y: torch.Tensor, batch_size: int):
    """Consecutive (X[i:i+b], y[i:i+b]) pairs, the last one shorter when n % b != 0."""
    if not isinstance(X, torch.Tensor) or not isinstance(y, torch.Tensor):
        raise TypeError(f"X and y must be tensors, got {type(X).__name__} and {type(y).__name__}")
    if len(X) != len(y):
        raise ValueError(f"X and y must have the same length, got {len(X)} and {len(y)}")
    _check_int("batch_size", batch_size)
    for i in range(0, len(X), batch_size):
        yield X[i:i + batch_size], y[i:i + batch_size]
