"""Lesson 10 (fit it yourself): the checks of its two exercises, used by the visible and the hidden
tests.

Right answers come from the test cell (its literals or expect()) or from the lesson's own oracles:
what SavedTensors measures on a course_utils.models.Block, and the plain full-batch step of a
Transformer.
"""

import math

import torch

from course_utils.checks import CheckFailed
from course_utils.data import sequences
from course_utils.judging import Check, MALFORMED, memory_peaks, outcome, raised_name, results
from course_utils.memory import SavedTensors
from course_utils.models import Block, Transformer
from course_utils.stepcost import measured_step

MIB = 2 ** 20


def _fail(message: str):
    raise CheckFailed(message)


# Exercise 1: block_activation_bytes(batch, seq, d_model, num_heads, fused=False) -> int, the bytes
# autograd saves in one Block's forward on a float32 input that requires grad (parameters left out).
# cases: [(batch, seq, d_model, num_heads, fused)]; want: [bytes], measured (measured_block_bytes)
# where the case is small enough, else the instructor's formula.

def measured_block_bytes(batch: int, seq: int, d_model: int, num_heads: int,
                         fused: bool = False) -> int:
    """The oracle: SavedTensors' activation bytes of one float32 Block's forward on a (batch, seq,
    d_model) input computed from a leaf (so that the input is an activation, as a block's input is
    in a model)."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        block = Block(d_model, num_heads, fused)
        x = torch.randn(batch, seq, d_model, requires_grad=True)
    h = x * 1.0  # the block's input: an activation, as the previous block's output is
    with SavedTensors(exclude=block.parameters()) as saved:
        block(h)
    return saved.activation_bytes


def _block_mistakes(b, s, d, h, fused, want) -> dict:
    """{description: the bytes that mistake gives} for one case."""
    scores = 4 * b * h * s * s
    mistakes = {
        "the causal mask is missing: masked_fill saves it, a (seq, seq) bool tensor, 1 byte per "
        "entry, once per block whatever the batch": want - (0 if fused else s * s),
        "the mask was counted per example and head: it is one (seq, seq) bool tensor, broadcast":
            want + (0 if fused else (b * h - 1) * s * s),
        "LayerNorm's statistics are missing: each of the two saves a mean and a reciprocal "
        "standard deviation per position, 2 floats": want - 16 * b * s,
        "the block's input is missing: ln1 saves it (the first thing a block keeps)":
            want - 4 * b * s * d,
        "the MLP's hidden activation was counted once: the GELU saves its input and the second "
        "Linear its input (the GELU's output), each 4 * d_model wide": want - 16 * b * s * d,
        "the attention scores were counted once for all heads: there are num_heads (seq, seq) "
        "matrices per example":
            want - (0 if fused else scores - scores // h),
        "the attention scores were counted twice: the softmax saves its output; the scaling and "
        "the mask save no copy of them": want + (0 if fused else scores),
    }
    if fused:
        why = ("fused attention saves no (seq, seq) scores: scaled_dot_product_attention keeps its "
               "output and one logsumexp per head and position instead")
        mistakes[why] = want - 4 * b * h * s + scores + s * s
        mistakes[why + " (and no mask)"] = want - 4 * b * h * s + scores
    return mistakes


def _probe_block(fn, cases):
    return [outcome(fn, *case) for case in cases]


def _judge_block(got, want, cases):
    for g, w, case in zip(results(got, cases, "block_activation_bytes"), want, cases):
        name = (f"block_activation_bytes"
                f"{tuple(case[:4]) + (('fused=True',) if case[4] else ())}").replace("'", "")
        assert type(g) is dict and ("value" in g) != ("raised" in g), MALFORMED
        if "raised" in g:
            _fail(f"{name} raised {raised_name(g['raised'])}")
        value = g["value"]
        if type(value) is not int:
            _fail(f"{name} returned a {type(value).__name__}, expected an int (bytes are whole: "
                  "use // or int())"
                  if type(value) in (float, bool) or isinstance(value, torch.Tensor) else
                  f"{name} should return a Python int (convert it with int(...))")
        if value == w:
            continue
        b, s, d, h, fused = case
        named = [why for why, bytes_ in _block_mistakes(b, s, d, h, fused, w).items()
                 if bytes_ == value]
        mask = 0 if fused else s * s
        if value in ((w - mask) // 4 + mask, (w - mask) // 4, w // 4):
            named.append("the counts are elements, not bytes: a float32 is 4 bytes (the "
                         "mask's bool is 1)")
        hint = f": {named[0]}" if named else ""
        _fail(f"{name} = {value:,}, expected {w:,} bytes (off by {value - w:+,}){hint}")


BLOCK_ACTIVATION_BYTES = Check("block_activation_bytes", _probe_block, _judge_block)


# Exercise 2 (the capstone): fit_step(model, optimizer, idx, targets, budget_bytes) -> float, one
# training step on the whole batch whose peak stays within budget_bytes. cases: [(config, batch,
# budget_mib, seed)], config (vocab, d_model, heads, layers, seq); want: [the plain step's
# {"update", "loss", "peak", "flops", "calls"}] (plain_step_measured), or None in the visible test,
# where the judge measures it.

# at most this many times the plain step's floating-point operations (one recomputation)
FLOP_FACTOR = 1.5
# at least this many: a fitting step does the plain step's work and more (1.00 to about 1.4 x)
FLOP_FLOOR = 0.9
# at most this many times its operator calls: the cost of many small micro-batches
CALL_FACTOR = 8
# the update within 2 % of the plain step's (norm of the difference over the norm)
UPDATE_RTOL = 0.02
HEADROOM_MIB = 64     # the kernel's peak may exceed the reference solution's by less than this


class Momentum(torch.optim.SGD):
    """SGD with momentum 0.9 that counts its step() calls (the capstone's optimizer)."""
    steps = 0
    LR = 0.1

    def __init__(self, params, lr=LR):
        super().__init__(params, lr=lr, momentum=0.9)

    def step(self, closure=None):
        self.steps += 1
        return super().step(closure)


# the capstone's model predicts with some confidence: its head's weights 5 times their initial scale
HEAD_SCALE = 5


def capstone_inputs(config, batch: int, seed: int):
    """(model, optimizer, idx, targets) of a case, the same wherever it is built: float32, on the
    CPU. Each parameter still holds the gradient a previous step left in .grad (stale_grads), as in
    a training loop. As in a real batch, its sequences' losses differ: the model predicts with some
    confidence (HEAD_SCALE), and the later a sequence is in the batch, the more of its targets are
    what the model predicts (sequence i of B: each target with probability i / (B - 1)). In the
    lesson's cases with a vocabulary of 64 the first half of a batch has a mean loss of about 4.0
    and the second about 3.0 (3.4 and 2.7 with 32), so a step that returns one micro-batch's loss,
    or weighs them wrongly, shows; autocast to bfloat16 still updates within 1 % of the float32
    step."""
    vocab, d, h, layers, seq = config
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = Transformer(vocab, d, h, layers, seq)
    idx, targets = sequences(n=batch, seq_len=seq, vocab_size=vocab, seed=seed)
    with torch.no_grad():
        model.head.weight.mul_(HEAD_SCALE)
        predicted = model(idx).argmax(dim=-1)                                   # (B, seq)
    # (B,): 0 first, 1 last
    share = torch.arange(batch, dtype=torch.float64) / max(batch - 1, 1)
    gen = torch.Generator().manual_seed(20_000 + seed)
    agree = torch.rand(targets.shape, generator=gen, dtype=torch.float64) < share[:, None]
    targets = torch.where(agree, predicted, targets)                            # (B, seq)
    for p, g in zip(model.parameters(), stale_grads(model, seed)):
        p.grad = g
    return model, Momentum(model.parameters()), idx, targets


def stale_grads(model, seed: int) -> list:
    """The gradients a previous step left, one per parameter: small random numbers, the same for a
    seed."""
    gen = torch.Generator().manual_seed(10_000 + seed)
    return [0.01 * torch.randn(p.shape, generator=gen) for p in model.parameters()]


def flat(model) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1).double() for p in model.parameters()])


def plain_step_measured(config, batch: int, seed: int) -> dict:
    """The oracle: the plain full-batch step (zero_grad, loss, backward, step) measured, and its
    update."""
    model, optimizer, idx, targets = capstone_inputs(config, batch, seed)
    before = flat(model)

    def step():
        optimizer.zero_grad()
        loss = model.loss(model(idx), targets)
        loss.backward()
        optimizer.step()
        return loss.item()
    seen = measured_step(step)
    return {"update": flat(model) - before, "loss": seen["value"], "peak": seen["peak"],
            "flops": seen["flops"], "calls": seen["calls"]}


def _probe_fit(fn, cases):
    found = []
    for config, batch, budget_mib, seed in cases:
        model, optimizer, idx, targets = capstone_inputs(config, batch, seed)
        before = flat(model)
        seen = measured_step(lambda: fn(model, optimizer, idx, targets, budget_mib * MIB))
        found.append({**seen, "steps": optimizer.steps,
                      "dtypes": sorted({str(p.dtype) for p in model.parameters()}),
                      "update": flat(model) - before
                      if all(p.dtype == torch.float32 for p in model.parameters())
                      else None})
        model = optimizer = None   # freed before the next case (a del: ruff F821 in the lambda)
    return found


def _case_name(config, batch, budget_mib):
    vocab, d, h, layers, seq = config
    return (f"fit_step on a {layers}-layer transformer (d_model {d}, {h} heads, sequences of "
            f"{seq}) with a batch of {batch} and a budget of {budget_mib} MiB")


def _most_off(model, update, want) -> str:
    """Where an update differs most from the plain step's: the parameter with the largest relative
    difference."""
    worst, where, start = -1.0, "", 0
    for pname, p in model.named_parameters():
        u, v = update[start:start + p.numel()], want[start:start + p.numel()]
        start += p.numel()
        off = float((u - v).norm() / v.norm()) if float(v.norm()) > 0 else float((u - v).norm() > 0)
        if off > worst or math.isnan(off):   # a nan is the most off
            if math.isnan(worst):
                continue
            worst, where = off, pname
    return f"most in {where}, {100 * worst:.1f} % off"


def _judge_case(g, w, case):
    config, batch, budget_mib, _ = case
    name = _case_name(config, batch, budget_mib)
    keys = {"peak", "flops", "calls", "steps", "dtypes", "update"}
    assert type(g) is dict and keys <= set(g) and ("value" in g) != ("raised" in g), \
        f"{name}: {MALFORMED}"
    if "raised" in g:
        _fail(f"{name} raised {raised_name(g['raised'])}")
    assert type(g["dtypes"]) is list and all(type(t) is str for t in g["dtypes"]), \
        f"{name}: {MALFORMED}"
    if g["dtypes"] != ["torch.float32"]:
        _fail(f"{name}: the parameters are now {', '.join(t[6:] for t in g['dtypes'])}: keep them "
              "float32 (the master weights); torch.autocast computes in bfloat16 while the "
              "parameters, their gradients and the update stay float32")
    steps = g["steps"]
    assert type(steps) is int, f"{name}: {MALFORMED}"
    if steps != 1:
        _fail(f"{name}: optimizer.step() was called {steps} times, expected once: the whole batch "
              "is one step (accumulate the micro-batches' gradients, then step)")
    peak, budget = g["peak"], budget_mib * MIB
    assert type(peak) is int and type(g["flops"]) is int and type(g["calls"]) is int, \
        f"{name}: {MALFORMED}"
    if peak > budget:
        _fail(f"{name}: the peak of your step was {peak / MIB:.1f} MiB, "
              f"{(peak - budget) / MIB:.1f} MiB over the budget (the plain step peaks at "
              f"{w['peak'] / MIB:.1f} MiB): split the batch into more micro-batches, checkpoint "
              "the blocks, or both")
    update, want = g["update"], w["update"]
    if type(update) is not torch.Tensor or update.shape != want.shape:
        _fail(f"{name}: the parameters changed in number or shape")
    error = float((update - want).norm() / want.norm())
    if not error <= UPDATE_RTOL:   # a nan update too
        model = capstone_inputs(config, 1, case[3])[0]
        stale = torch.cat([g.reshape(-1).double() for g in stale_grads(model, case[3])])
        if float((update - (want - Momentum.LR * stale)).norm() / want.norm()) < UPDATE_RTOL:
            _fail(f"{name}: the update includes the gradients a previous step left in .grad: call "
                  "optimizer.zero_grad() before the first micro-batch's backward")
        ratio = float(update @ want / (want @ want))
        k = round(ratio) if ratio >= 1 else -round(1 / ratio) if ratio > 0 else 0
        why = (f"the update is {k} times the plain step's: each micro-batch's loss must be divided "
               "by the number of micro-batches (or weighted by its share of the batch)"
               if k >= 2 and abs(ratio - k) < 0.05 * k else
               f"the update is 1/{-k} of the plain step's: the loss was divided by the number of "
               "micro-batches more than once, or only some micro-batches' gradients were kept"
               if k <= -2 and abs(1 / ratio + k) < 0.05 * -k
               else "is every micro-batch's gradient accumulated (no zero_grad between them), and "
                    "the whole batch used?")
        _fail(f"{name}: the parameter update differs from the plain full-batch step's by "
              f"{100 * error:.1f} % (at most {100 * UPDATE_RTOL:.0f} % is allowed; "
              f"{_most_off(model, update, want)}): {why}")
    value = g["value"]
    if type(value) is not float:
        _fail(f"{name} should return the batch's loss as a Python float (loss.item()), got a "
              f"{type(value).__name__}")
    if not math.isclose(value, w["loss"], rel_tol=UPDATE_RTOL):
        _fail(f"{name} returned a loss of {value:.4f}, expected the whole batch's mean loss, "
              f"{w['loss']:.4f} (the mean of the micro-batches' losses weighted by their sizes)")
    # after the update's check: a step that skips work is told so there
    if g["flops"] < FLOP_FLOOR * w["flops"]:
        _fail(f"{name}: the course's counters saw {g['flops'] / w['flops']:.2f} times the plain "
              f"step's floating-point operations, less than {FLOP_FLOOR}: the whole batch's "
              "forward and backward must run where measured_step sees them (work hidden from "
              "torch's dispatch cannot be shown to fit)")
    if g["flops"] > FLOP_FACTOR * w["flops"]:
        _fail(f"{name}: your step did {g['flops'] / w['flops']:.2f} times the plain "
              f"step's floating-point operations, more than {FLOP_FACTOR}: recompute each "
              "block at most once")
    if g["calls"] > CALL_FACTOR * w["calls"]:
        _fail(f"{name}: your step made {g['calls'] / w['calls']:.1f} times the plain step's "
              f"operator calls, more than {CALL_FACTOR} (each costs time whatever its size): use "
              "fewer, larger micro-batches, the largest that fit; checkpointing each block lets "
              "larger ones fit")


def _judge_fit(got, want, cases):
    # the visible test: the plain step is no secret (run it yourself), so it is measured here
    if want is None:
        want = [plain_step_measured(config, batch, seed) for config, batch, _, seed in cases]
    for g, w, case in zip(results(got, cases, "fit_step"), want, cases):
        _judge_case(g, w, case)
    # measured by the operating system while the test ran; None in a notebook
    peaks = memory_peaks()
    if peaks is not None and (peaks[0] - peaks[1]) / MIB >= HEADROOM_MIB:
        _fail(f"while this test ran, your code had {(peaks[0] - peaks[1]) / MIB:.0f} MiB more "
              "memory in use than the reference solution at the peak (measured by the operating "
              "system): the step did not stay within its budget; free each micro-batch's graph "
              "(call backward on it) before the next, and keep no reference to activations")


FIT_STEP = Check("fit_step", _probe_fit, _judge_fit)
