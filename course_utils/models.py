"""d2l-style models: multilayer perceptrons (d2l.ai section 5.2) and a small decoder-only
transformer.

    MLPScratch   explicit weight matrices and bias vectors, forward written with @ and relu
    MLP          the same network from nn.Flatten, nn.Linear and nn.ReLU in an nn.Sequential
    train_step   one SGD step: zero_grad, loss, backward, step
    Transformer  a GPT-style language model (d2l.ai chapter 11, nanoGPT): token and position
                 embeddings, pre-LayerNorm blocks of causal self-attention and a GELU MLP, a
                 final LayerNorm and a linear head; small enough to train on a 2-core CPU

Both classify: forward returns logits of shape (n, num_outputs), `loss` is the cross entropy
against integer labels, `configure_optimizers` returns SGD with the model's learning rate.
num_hiddens=[] gives softmax regression; [256] is d2l's one-hidden-layer MLP.

    model = MLPScratch(784, 10, [256, 128], lr=0.1)
    optimizer = model.configure_optimizers()
    for X, y in batches:
        loss = train_step(model, optimizer, X, y)

Inputs are checked before any arithmetic, so a wrong device, dtype or shape fails with a
message that names what was expected and what came, not deep inside torch.
"""

import math
import numbers

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["MLPScratch", "MLP", "train_step", "CausalSelfAttention", "Block", "Transformer"]


def _check_size(name: str, value) -> int:
    """Return value as an int if it is a positive int (bool rejected), else raise."""
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise TypeError(f"{name} must be a positive int, got {type(value).__name__} {value!r}")
    if value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value}")
    return int(value)


def _check_hiddens(num_hiddens) -> tuple[int, ...]:
    """Return num_hiddens as a tuple of positive ints if it is a list or tuple of them."""
    expected = "num_hiddens must be a list or tuple of positive ints (hidden layer sizes)"
    if isinstance(num_hiddens, numbers.Integral) and not isinstance(num_hiddens, bool):
        raise TypeError(
            f"{expected}, got the int {num_hiddens}; "
            f"for one hidden layer of {num_hiddens} units write [{num_hiddens}]"
        )
    if not isinstance(num_hiddens, (list, tuple)):
        raise TypeError(f"{expected}, got {type(num_hiddens).__name__} {num_hiddens!r}")
    return tuple(_check_size(f"num_hiddens[{k}]", h) for k, h in enumerate(num_hiddens))


def _check_number(name: str, value, allow_zero: bool = False) -> float:
    """Return value as a float if it is a finite positive (or, with allow_zero, >= 0) number."""
    kind = "a non-negative number" if allow_zero else "a positive number"
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise TypeError(f"{name} must be {kind}, got {type(value).__name__} {value!r}")
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name} must be {kind}, got {value!r}")
    return float(value)


def _describe(x) -> str:
    """Name the type of x for an error message, with numpy's module (numpy.ndarray)."""
    cls = type(x)
    return cls.__name__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__name__}"


class _Classifier(nn.Module):
    """What both MLPs share: the input checks, the cross-entropy loss and the optimizer."""

    lr: float

    def _check_X(self, X, num_inputs: int | None) -> None:
        """Raise unless X is a tensor of shape (n, ...) on the parameters' device and dtype.

        num_inputs, when known, is the number of features per example: prod(X.shape[1:]).
        """
        p = next(self.parameters())
        if not isinstance(X, torch.Tensor):
            how = "torch.as_tensor(X" if _describe(X) == "numpy.ndarray" else "torch.tensor(X"
            raise TypeError(
                f"X must be a torch.Tensor, got {_describe(X)}; "
                f"convert it with {how}, dtype={p.dtype})"
            )
        if X.dim() < 2:
            raise ValueError(
                f"X must have shape (n, ...) with the batch dimension first, "
                f"got shape {tuple(X.shape)}; for a single example use X.unsqueeze(0)"
            )
        if X.device != p.device:
            raise ValueError(
                f"X is on device {X.device} but the model's parameters are on {p.device}; "
                f"move it with X.to('{p.device}'), or X.to(device) with the model's device"
            )
        if X.dtype != p.dtype:
            raise TypeError(
                f"X must be a floating tensor of dtype {p.dtype} like the model's parameters, "
                f"got {X.dtype}; convert it with X.to({p.dtype})"
            )
        features = math.prod(X.shape[1:])
        if num_inputs is not None and features != num_inputs:
            raise ValueError(
                f"X must have {num_inputs} features per example (num_inputs, the product "
                f"of X.shape[1:]), got shape {tuple(X.shape)} with {features}"
            )

    def loss(self, y_hat: torch.Tensor, y: torch.Tensor, averaged: bool = True) -> torch.Tensor:
        """Cross entropy between logits and integer class labels.

        Inputs:
        - y_hat: logits, floating tensor of shape (n, q), e.g. the output of forward.
        - y: labels, integer tensor of shape (n,) with values in [0, q), on y_hat's device.
        - averaged: True for the mean over the n examples, False for one loss per example.

        Returns:
        - loss: tensor of shape () when averaged, else of shape (n,).
        """
        for name, t in (("y_hat", y_hat), ("y", y)):
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"{name} must be a torch.Tensor, got {_describe(t)}")
        if not isinstance(averaged, bool):
            raise TypeError(f"averaged must be True or False, got {averaged!r}")
        if y_hat.dim() != 2 or not y_hat.is_floating_point():
            raise ValueError(
                f"y_hat must be floating logits of shape (n, q), "
                f"got {y_hat.dtype} of shape {tuple(y_hat.shape)}"
            )
        if y.is_floating_point() or y.is_complex() or y.dtype == torch.bool:
            raise TypeError(
                f"y must hold integer class labels (e.g. torch.int64), got {y.dtype}; "
                f"convert it with y.long()"
            )
        n, q = y_hat.shape
        if tuple(y.shape) != (n,):
            raise ValueError(
                f"y must have shape (n,) = ({n},) to match y_hat of shape {tuple(y_hat.shape)}, "
                f"got {tuple(y.shape)}"
            )
        if y.device != y_hat.device:
            raise ValueError(
                f"y is on device {y.device} but y_hat is on {y_hat.device}; "
                f"move it with y.to('{y_hat.device}')"
            )
        # Out-of-range labels would be a device-side assert on CUDA, which breaks the session.
        if n > 0 and bool(((y < 0) | (y >= q)).any()):
            raise ValueError(
                f"y must hold labels in [0, q) = [0, {q}), "
                f"got values from {int(y.min())} to {int(y.max())}"
            )
        # cross_entropy wants int64 labels; int32 ones (from numpy, say) are fine here.
        return F.cross_entropy(y_hat, y.long(), reduction="mean" if averaged else "none")

    def configure_optimizers(self) -> torch.optim.SGD:
        """Return minibatch SGD over all parameters with the model's learning rate lr."""
        return torch.optim.SGD(self.parameters(), lr=self.lr)


class MLPScratch(_Classifier):
    """An MLP from explicit parameters: hidden layers relu(H @ W + b), a linear output layer.

    Layer i has weight self.weights[i] of shape (fan_in, fan_out), drawn from N(0, sigma^2),
    and bias self.biases[i] of shape (fan_out,), zeros. Fan sizes run through
    (num_inputs, *num_hiddens, num_outputs), so there are len(num_hiddens) + 1 layers.

    Inputs:
    - num_inputs: features per example, D; forward reshapes X of shape (n, ...) to (n, D).
    - num_outputs: number of classes, q.
    - num_hiddens: list or tuple of hidden layer sizes; [] gives softmax regression.
    - lr: learning rate for configure_optimizers, a positive number.
    - sigma: standard deviation of the initial weights, a non-negative number.
    """

    def __init__(self, num_inputs: int, num_outputs: int, num_hiddens: list[int] | tuple[int, ...],
                 lr: float, sigma: float = 0.01):
        super().__init__()
        self.num_inputs = _check_size("num_inputs", num_inputs)
        self.num_outputs = _check_size("num_outputs", num_outputs)
        self.num_hiddens = _check_hiddens(num_hiddens)
        self.lr = _check_number("lr", lr)
        self.sigma = _check_number("sigma", sigma, allow_zero=True)
        sizes = (self.num_inputs, *self.num_hiddens, self.num_outputs)
        fans = list(zip(sizes[:-1], sizes[1:]))
        self.weights = nn.ParameterList(
            nn.Parameter(torch.randn(fan_in, fan_out) * self.sigma) for fan_in, fan_out in fans
        )
        self.biases = nn.ParameterList(nn.Parameter(torch.zeros(fan_out)) for _, fan_out in fans)

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        """Map X of shape (n, ...), num_inputs elements per example, on the parameters'
        device and of their dtype, to logits of shape (n, num_outputs)."""
        self._check_X(X, self.num_inputs)
        H = X.reshape(X.shape[0], self.num_inputs)  # (n, D)
        last = len(self.weights) - 1
        for i, (W, b) in enumerate(zip(self.weights, self.biases)):
            H = H @ W + b  # (n, fan_in) @ (fan_in, fan_out) + (fan_out,) -> (n, fan_out)
            if i < last:
                H = torch.relu(H)  # hidden layers only: the output layer stays linear
        return H  # (n, q)

    def extra_repr(self) -> str:
        sizes = f"num_inputs={self.num_inputs}, num_hiddens={list(self.num_hiddens)}"
        return f"{sizes}, num_outputs={self.num_outputs}, lr={self.lr}, sigma={self.sigma}"


class MLP(_Classifier):
    """The same MLP from torch.nn: Flatten, then Linear + ReLU per hidden size, then Linear.

    With num_inputs=None the first layer is an nn.LazyLinear, as in d2l: its weight stays an
    UninitializedParameter until the first forward fixes the number of features (counting
    parameters before then fails; creating the optimizer, .to() and .double() do not).
    With num_inputs given every layer is an nn.Linear, initialised at once. nn.Linear stores
    weight of shape (fan_out, fan_in), the transpose of MLPScratch's.

    Inputs:
    - num_outputs: number of classes, q.
    - num_hiddens: list or tuple of hidden layer sizes; [] gives softmax regression.
    - lr: learning rate for configure_optimizers, a positive number.
    - num_inputs: features per example, D, or None to infer it from the first batch.
    """

    def __init__(self, num_outputs: int, num_hiddens: list[int] | tuple[int, ...], lr: float,
                 num_inputs: int | None = None):
        super().__init__()
        self.num_inputs = None if num_inputs is None else _check_size("num_inputs", num_inputs)
        self.num_outputs = _check_size("num_outputs", num_outputs)
        self.num_hiddens = _check_hiddens(num_hiddens)
        self.lr = _check_number("lr", lr)
        layers: list[nn.Module] = [nn.Flatten()]  # (n, ...) -> (n, D)
        fan_in = self.num_inputs
        for fan_out in (*self.num_hiddens, self.num_outputs):
            layers.append(nn.LazyLinear(fan_out) if fan_in is None else nn.Linear(fan_in, fan_out))
            layers.append(nn.ReLU())
            fan_in = fan_out
        self.net = nn.Sequential(*layers[:-1])  # no ReLU after the output layer

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        """Map X of shape (n, ...), on the parameters' device and of their dtype, to logits
        of shape (n, num_outputs)."""
        first = self.net[1]
        # Once a LazyLinear has seen a batch it turns into an nn.Linear with in_features set.
        self._check_X(X, None if isinstance(first, nn.LazyLinear) else first.in_features)
        return self.net(X)  # (n, q)


def train_step(model: _Classifier, optimizer: torch.optim.Optimizer,
               X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Take one optimizer step on the minibatch (X, y) and return its loss.

    Inputs:
    - model: an MLPScratch or MLP (anything with forward and loss).
    - optimizer: over the model's parameters, e.g. model.configure_optimizers().
    - X: inputs of shape (n, ...); y: integer labels of shape (n,).

    Returns:
    - loss: the averaged loss before the step, shape (), detached from the graph.
    """
    optimizer.zero_grad()
    loss = model.loss(model(X), y)  # ()
    loss.backward()
    optimizer.step()
    return loss.detach()


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention where position t sees positions 0..t only.

    The scores are computed as written (not with F.scaled_dot_product_attention unless fused=True),
    so autograd saves the softmax's (batch, heads, seq, seq) output: the activation that grows with
    the sequence length squared. fused=True calls F.scaled_dot_product_attention(is_causal=True)
    instead, which computes the same function and, on a CPU or a GPU with a flash kernel, saves no
    (seq, seq) tensor.
    """

    def __init__(self, d_model: int, num_heads: int, fused: bool = False):
        super().__init__()
        self.d_model, self.num_heads = (_check_size("d_model", d_model),
                                        _check_size("num_heads", num_heads))
        if d_model % num_heads:
            raise ValueError(f"d_model ({d_model}) must be a multiple of num_heads ({num_heads})")
        self.fused = fused
        # queries, keys and values of every head, in one matmul
        self.qkv = nn.Linear(d_model, 3 * d_model)
        # the heads' outputs mixed back into the residual stream
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape                                # (batch, seq, d_model)
        h = self.num_heads
        q, k, v = self.qkv(x).split(d, dim=2)            # 3 x (b, s, d)
        # 3 x (b, h, s, d/h)
        q, k, v = (t.view(b, s, h, d // h).transpose(1, 2) for t in (q, k, v))
        if self.fused:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)       # (b, h, s, d/h)
        else:
            scores = q @ k.transpose(-2, -1) / math.sqrt(d // h)               # (b, h, s, s)
            # (s, s): True above the diagonal
            future = torch.ones(s, s, dtype=torch.bool, device=x.device).triu(1)
            # (b, h, s, s), rows sum to 1
            weights = scores.masked_fill(future, float("-inf")).softmax(dim=-1)
            out = weights @ v                                                     # (b, h, s, d/h)
        return self.proj(out.transpose(1, 2).reshape(b, s, d))                    # (b, s, d)


class Block(nn.Module):
    """A pre-LayerNorm transformer block: x + attention(LN(x)), then x + MLP(LN(x)), the MLP 4x
    wide."""

    def __init__(self, d_model: int, num_heads: int, fused: bool = False):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, num_heads, fused)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(),
                                 nn.Linear(4 * d_model, d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))                   # (b, s, d)
        return x + self.mlp(self.ln2(x))                 # (b, s, d)


class Transformer(nn.Module):
    """A decoder-only (GPT-style) language model: logits for the next token at every position.

    Inputs:
    - vocab_size: number of distinct tokens, V.
    - d_model: width of the residual stream, d (a multiple of num_heads).
    - num_heads: attention heads per block, h.
    - num_layers: number of blocks, L.
    - max_len: the longest sequence it accepts (the position embedding's rows).
    - fused: attention through F.scaled_dot_product_attention (no (seq, seq) tensor saved).

    forward(idx) maps token ids of shape (b, s), int64, s <= max_len, to logits of shape (b, s, V);
    loss(logits, targets) is the mean cross entropy over all b * s positions. Parameters are
    initialised as GPT-2's: N(0, 0.02) weights, zero biases, LayerNorm at (1, 0).

        model = Transformer(vocab_size=64, d_model=64, num_heads=4, num_layers=2, max_len=128)
        loss = model.loss(model(idx), targets)        # idx, targets: (b, s) token ids
    """

    def __init__(self, vocab_size: int, d_model: int, num_heads: int, num_layers: int, max_len: int,
                 fused: bool = False):
        super().__init__()
        self.vocab_size, self.max_len = (_check_size("vocab_size", vocab_size),
                                         _check_size("max_len", max_len))
        _check_size("num_layers", num_layers)
        self.tok = nn.Embedding(vocab_size, d_model)     # (V, d)
        self.pos = nn.Embedding(max_len, d_model)        # (max_len, d)
        self.blocks = nn.Sequential(*(Block(d_model, num_heads, fused) for _ in range(num_layers)))
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)   # (V, d)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        if (not isinstance(idx, torch.Tensor) or idx.dim() != 2 or idx.is_floating_point()
                or idx.is_complex()):
            raise TypeError("idx must be an integer tensor of token ids of shape (batch, seq), "
                            f"got {_describe(idx)}"
                            + (f" {idx.dtype} of shape {tuple(idx.shape)}"
                               if isinstance(idx, torch.Tensor) else ""))
        b, s = idx.shape
        if s > self.max_len:
            raise ValueError(f"sequences of {s} tokens are longer than max_len = {self.max_len}")
        x = self.tok(idx) + self.pos(torch.arange(s, device=idx.device))   # (b, s, d)
        x = self.blocks(x)                                                   # (b, s, d)
        return self.head(self.ln_f(x))                                       # (b, s, V)

    def loss(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """The mean cross entropy of logits (b, s, V) against targets (b, s), a tensor of shape
        ()."""
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())
