"""Lesson 06 (checkpointing): the checks of its three exercises, used by the visible and the hidden
tests.

Right answers come from the test cell (its literals or expect()) or from the lesson's own oracles:
the peak that cpu_peak_bytes measures (`measured_peak`) and the plain, unchecked chain run by
autograd.
"""

import functools
import math
import warnings

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint_sequential

from course_utils.checks import CheckFailed, check_tensor
from course_utils.judging import (Check, MALFORMED, check_raised, memory_peaks, name_of, outcome,
                                  raised, raised_name, results, value_of)
from course_utils.memory import SavedTensors, TensorAllocations, cpu_peak_bytes

MEASURE_ACT = 256 * 32 * 4  # one activation of measured_peak's chain, in bytes


def _fail(message: str):
    raise CheckFailed(message)


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise CheckFailed(message)




@functools.lru_cache(maxsize=None)
def measured_peak(n: int, segments: int) -> int:
    """The oracle of Exercise 1: peak bytes of one step of n float32 blocks Linear(32, 32) -> Tanh
    on a batch of 256 in checkpoint_sequential(segments), measured by cpu_peak_bytes (1 segment:
    nothing is checkpointed). Its segments are those of Exercise 1 only when n % segments is 0 or
    1."""
    torch.manual_seed(0)
    chain = nn.Sequential(*[nn.Sequential(nn.Linear(32, 32), nn.Tanh()) for _ in range(n)])
    x = torch.randn(256, 32)
    chain(x).sum().backward()  # allocate .grad once
    return cpu_peak_bytes(lambda: checkpoint_sequential(chain, segments, x,
                                                        use_reentrant=False).sum().backward())


# Exercise 1: checkpoint_peak_bytes(n, segments, act_bytes) -> int bytes.
# cases: [(n, segments, act_bytes, "measured" | "exact")]; want: [peak bytes]. A "measured" want is
# measured_peak(n, segments) (act_bytes MEASURE_ACT), matched within half an activation; "exact"
# exactly. Known mistakes, as functions of (n, s, act, want): a cause is named only when one
# explains every case.
PEAK_MISTAKES = {
    "the recomputed segment is missing: at the peak the last segment's ceil(n / segments) "
    "activations are alive":
        lambda n, s, a, w: s * a,
    "the kept segment inputs are missing: segments - 1 of them are alive "
    "(the batch existed before)":
        lambda n, s, a, w: w - (s - 1) * a,
    "the longest segment was counted as n // segments blocks: with cut points i * n // segments "
    "the last segment is a longest one, of ceil(n / segments) blocks":
        lambda n, s, a, w: (s + n // s) * a,
    "ceil(n / segments) was written as n // segments + 1, one too many when segments divides n":
        lambda n, s, a, w: (s + n // s + 1) * a,
    "one activation short: count the temporary (a pre-activation or the gradient flowing back) too":
        lambda n, s, a, w: w - a,
    "one activation too many: the batch x existed before the step, so it is not counted":
        lambda n, s, a, w: w + a,
    "this is the peak without checkpointing (n + 1 activations)": lambda n, s, a, w: (n + 1) * a,
}


def _judge_peak(got, want, cases):
    rows = []  # (got, want, n, s, act, tolerance)
    for g, w, (n, s, act, how) in zip(results(got, cases, "checkpoint_peak_bytes"), want, cases):
        name = f"checkpoint_peak_bytes({n}, {s}, {act})"
        g = value_of(g, name)
        if type(g) is not int:
            _fail(f"{name} should be a Python int of bytes, got {name_of(type(g).__name__)}"
                  + (" (a whole number of bytes is still an int: no float)" if type(g) is float
                     else ""))
        rows.append((g, w, n, s, act, act / 2 if how == "measured" else 0))
    wrong = [r for r in rows if abs(r[0] - r[1]) > r[5]]
    if not wrong:
        return
    g, w, n, s, act, tol = wrong[0]
    message = f"checkpoint_peak_bytes({n}, {s}, {act}) is {g}, expected {w}" + (
        " (the measured peak, within half an activation)" if tol else "")
    causes = [c for c, f in PEAK_MISTAKES.items()
              if all(abs(r[0] - f(*r[2:5], r[1])) <= r[5] / 2 for r in rows)]
    if all(r[0] == round(r[1] / r[4]) for r in rows):
        causes.append("this is the peak in activations: multiply by act_bytes for bytes")
    if len(causes) == 1:
        _fail(f"{message}: {causes[0]}.")
    # whole activations: against the model's count (a measured peak is a little above it)
    if g % act == 0:
        k = g // act - round(w / act)
        if k:
            _fail(f"{message}: {abs(k)} activation{'s' * (abs(k) > 1)} too "
                  f"{'many' if k > 0 else 'few'}.")
    _fail(f"{message}: that is {g / act:.3g} activations, not a whole number: the peak is a count "
          "of whole activations of act_bytes each.")


CHECKPOINT_PEAK = Check("checkpoint_peak_bytes",
                        lambda fn, cases: [outcome(fn, *c[:3]) for c in cases], _judge_peak)


# Exercise 2: checkpointed_forward(layers, x, segments) -> the chain's output, every segment
# checkpointed.
# cases: {"chains": [(n, segments, x_requires_grad, how)], "bad": [(n, segments)], "big": bool};
# how: what holds the Linear -> Tanh blocks ("list", "Sequential", "ModuleList"), or "dropout" (a
# list of Linear -> Dropout -> Tanh blocks). want: {"peaks": [each chain's peak in activations by
# Exercise 1's model, or None: not checked], "big": the plain big chain's row sums {"out", "grad"}
# (when cases["big"])}. Outputs and gradients are compared with the plain chain (each block once,
# nothing checkpointed), run by the judge with autograd.
CKPT_BATCH, CKPT_WIDTH = 128, 16
WARNINGS = {"use_reentrant": "torch.utils.checkpoint: the use_reentrant parameter should be "
                             "passed explicitly",
            "no_input_requires_grad": "None of the inputs have requires_grad=True. "
                                      "Gradients will be None"}
KEYS = ("raised", "out", "warned_forward", "requires_grad", "missing", "x_missing", "grads",
        "order", "kept", "peak", "warned")
HOW = {"Sequential": " in an nn.Sequential", "ModuleList": " in an nn.ModuleList",
       "dropout": " with dropout"}


def _chain(n, x_requires_grad=False, how="list"):
    """n float64 blocks, the log of their forward calls (in order), the layers as `how` holds them,
    x, weights."""
    torch.manual_seed(0)
    d, extra = CKPT_WIDTH, [nn.Dropout(0.5)] if how == "dropout" else []
    blocks = [nn.Sequential(nn.Linear(d, d), *extra, nn.Tanh()).double() for _ in range(n)]
    order = []
    for i, blk in enumerate(blocks):
        blk.register_forward_pre_hook(lambda module, args, i=i: order.append(i))
    layers = (nn.Sequential(*blocks) if how == "Sequential" else nn.ModuleList(blocks)
              if how == "ModuleList" else list(blocks))
    torch.manual_seed(1)
    x = torch.randn(CKPT_BATCH, d, dtype=torch.float64, requires_grad=x_requires_grad)
    # the loss: (out * weights).sum()
    return blocks, order, layers, x, torch.randn(CKPT_BATCH, d, dtype=torch.float64)


def _first_warning(caught):
    return None if not caught else {"category": caught[0].category.__name__, "known": next(
        (k for k, quote in WARNINGS.items() if quote.split(". ")[0] in str(caught[0].message)),
        None)}


def _observe(fn, n, segments, x_requires_grad, how):
    """What the judge looks at, as data: output, warnings, gradients, the blocks' calls, kept
    tensors, peak."""
    seen = dict.fromkeys(KEYS)
    blocks, order, layers, x, weights = _chain(n, x_requires_grad, how)
    params = [p for blk in blocks for p in blk.parameters()]
    stage = "forward"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            torch.manual_seed(2)  # the dropout masks, as in the plain chain
            out = seen["out"] = fn(layers, x, segments)
            if type(out) is not torch.Tensor:
                return seen
            seen["warned_forward"], seen["requires_grad"] = (_first_warning(caught),
                                                             bool(out.requires_grad))
            if not out.requires_grad:
                return seen
            stage = "backward"
            (out * weights).sum().backward()
            del out
            seen["order"], seen["missing"] = list(order), sum(p.grad is None for p in params)
            seen["x_missing"] = x_requires_grad and x.grad is None
            if seen["missing"] or seen["x_missing"]:
                return seen
            seen["grads"] = torch.cat([p.grad.flatten() for p in params]
                                      + ([x.grad.flatten()] if x_requires_grad else []))
            # .grad exists now (the step adds into it), and the batch does not require grad
            stage = "memory"
            for p in params:
                p.grad.zero_()
            with SavedTensors(exclude=params) as kept:
                out = fn(layers, x.detach(), segments)
                seen["kept"] = len(kept.saved)
                del out
            with TensorAllocations() as mem:
                fn(layers, x.detach(), segments).sum().backward()
            seen["peak"] = int(mem.peak_bytes)
        except NotImplementedError:
            raise
        except Exception as e:  # what was raised is the observation
            seen["raised"] = (stage, tuple(c.__name__ for c in type(e).__mro__))
        finally:
            seen["warned"] = _first_warning(caught)
    return seen


def big_chain_sums(fn=None):
    """The big case, 64 Tanh layers on an 8 MB batch (256 x 4096, float64) that requires grad, in 8
    segments (plain: 64 outputs kept, 512 MB; checkpointed: 8 kept and 8 recomputed, 128 MB): the
    output's and the input gradient's row sums, through fn(layers, x, 8), or through the plain chain
    when fn is None."""
    torch.manual_seed(3)
    x = torch.randn(256, 4096, dtype=torch.float64, requires_grad=True)
    layers, weights, out = ([nn.Tanh() for _ in range(64)],
                            torch.randn(256, 4096, dtype=torch.float64), x)
    if fn is not None:
        out = fn(layers, x, 8)
        if type(out) is not torch.Tensor or not out.requires_grad:
            return {"out": None, "grad": None}
    for layer in layers * (fn is None):
        out = layer(out)
    (out * weights).sum().backward()
    return {"out": out.detach().sum(1), "grad": None if x.grad is None else x.grad.sum(1)}


def _probe_forward(fn, cases):
    got = {"chains": [_observe(fn, *case) for case in cases["chains"]],
           "raised": [raised(fn, *_chain(n)[2:4], s) for n, s in cases["bad"]]}
    return {**got, "big": outcome(big_chain_sums, fn)} if cases.get("big") else got


def _warned(w):
    assert type(w) is dict and set(w) == {"category", "known"}, MALFORMED
    return f"checkpoint warned {WARNINGS[w['known']]!r}" if w["known"] in WARNINGS else \
        f"checkpoint (or the code around it) warned a {name_of(w['category'])}"


def _span(blocks) -> str:
    """[0, 1, 2, 5] -> "0-2, 5": block numbers as runs."""
    runs = []
    for b in blocks:
        runs = runs[:-1] + [(runs[-1][0], b)] if runs and b == runs[-1][1] + 1 else runs + [(b, b)]
    return ", ".join(f"{lo}" if lo == hi else f"{lo}-{hi}" for lo, hi in runs)


def _judge_chain(seen, peak, n, segments, x_requires_grad, how):
    name = f"checkpointed_forward(<{n} blocks{HOW.get(how, '')}>, x, segments={segments})"
    assert type(seen) is dict and set(seen) == set(KEYS), f"{name}: {MALFORMED}"
    if seen["raised"] is not None:
        where = {"forward": name, "backward": "backward() through the output of " + name}.get(
            seen["raised"][0], name + ", run again on a batch that does not require grad,")
        _fail(f"{where} raised {raised_name(seen['raised'][1])}")
    # the plain chain: each block once, no checkpoint
    blocks, _, _, x, weights = _chain(n, x_requires_grad, how)
    torch.manual_seed(2)
    h, short, whole = x, None, (n // segments) * segments
    for i, blk in enumerate(blocks):
        short, h = h.detach() if i == whole else short, blk(h)
    leaves = [p for blk in blocks for p in blk.parameters()] + [x] * x_requires_grad
    grads = torch.cat([g.flatten() for g in torch.autograd.grad((h * weights).sum(), leaves)])
    _check(type(seen["out"]) is torch.Tensor,
           f"{name} should return a torch.Tensor, got {name_of(type(seen['out']).__name__)}")
    check_tensor(seen["out"], h.detach(), f"the output of {name}", rtol=1e-12, atol=1e-12,
                 mistakes={} if short is None
                 else {f"the last {n - whole} blocks were left out: the segments must cover "
                       f"all {n} blocks": short})
    if seen["warned_forward"] is not None:
        _fail(f"{name}: {_warned(seen['warned_forward'])}...: pass use_reentrant=False to every "
              "checkpoint call")
    _check(seen["requires_grad"] is True,
           f"the output of {name} does not require grad, so no gradient reaches the layers: "
           "pass use_reentrant=False (the reentrant checkpoint records nothing when its input does "
           "not require grad, and a batch never does)")
    _check(seen["missing"] == 0,
           f"after backward, {seen['missing']} parameters of {name} have no gradient")
    _check(seen["x_missing"] is False,
           f"after backward, x has no gradient in {name}, though it requires grad: the output "
           "must be computed from x itself, not from a detached copy")
    order = seen["order"]
    assert type(order) is list and all(type(i) is int and 0 <= i < n for i in order), \
        f"{name}: malformed results"
    calls = [order.count(i) for i in range(n)]
    # the backward recomputed other blocks than each segment's own
    if min(calls) == 1 and max(calls) > 2:
        times = {}
        for i, c in enumerate(calls):
            times.setdefault(c, []).append(i)
        ran = "; ".join(f"block{'s' * (len(b) > 1)} {_span(b)} ran "
                        f"{'once' if c == 1 else f'{c} times'}"
                        for c, b in sorted(times.items()))
        _fail(f"{name}: {ran}: the backward recomputed the same segment again and again instead of "
              "each segment's own blocks. Does the segment's function read a loop variable (lo, "
              "hi) that has moved on by the time the backward calls it (a late-binding closure)? "
              "Bind the values when it is made: a function that returns the segment's function, or "
              "lambda h, lo=lo, hi=hi: ...")
    g = seen["grads"]
    _check(how != "dropout" or type(g) is not torch.Tensor or g.shape != grads.shape
           or torch.allclose(g, grads, 1e-10, 1e-12),
           f"the gradients after {name} differ from the plain chain's, though the output is right: "
           "the recomputation must draw the forward's dropout masks (keep checkpoint's default "
           "preserve_rng_state=True)")
    check_tensor(g, grads, f"the gradients (parameters{' and x' * x_requires_grad}) after {name}",
                 rtol=1e-10, atol=1e-12)
    _check(min(calls) > 0, f"{name}: block {calls.index(min(calls))} never ran")
    _check(max(calls) > 1,
           f"{name}: no block ran again in the backward, so nothing was recomputed: "
           "run each segment through torch.utils.checkpoint.checkpoint")
    _check(min(calls) > 1, f"{name}: blocks {[i for i, c in enumerate(calls) if c == 1]} ran only "
                           "once, so they were not checkpointed: every segment, the last one too, "
                           "goes through checkpoint (checkpoint_sequential leaves the last out)")
    _check(max(calls) <= 2, f"{name}: block {calls.index(max(calls))} ran {max(calls)} times; each "
                            "block should run twice, once in the forward and once when its segment "
                            "is recomputed in the backward")
    # the backward recomputes one segment at a time, the last first: runs of consecutive blocks
    runs = []
    for i in order[n:]:
        runs = runs[:-1] + [runs[-1] + [i]] if runs and i == runs[-1][-1] + 1 else runs + [[i]]
    longest = -(-n // segments)
    _check(max(len(r) for r in runs) <= longest,
           f"{name}: the segments have {[len(r) for r in reversed(runs)]} blocks; cut "
           f"the {n} blocks as evenly as possible (lengths differ by at most one, so the longest "
           f"has {longest}): the longest segment is what the backward recomputes at the peak")
    kept, d, act = seen["kept"], CKPT_WIDTH, CKPT_BATCH * CKPT_WIDTH * 8
    assert type(kept) is int and type(seen["peak"]) is int, f"{name}: {MALFORMED}"
    _check(kept != n or segments == n,
           f"{name}: the forward kept {n} tensors, one per block: every block was "
           f"checkpointed on its own; make {segments} segments of several blocks each")
    _check(kept == segments,
           f"{name}: the forward kept {kept} tensors; {segments} checkpointed segments "
           f"keep exactly their {segments} inputs: are there {segments} segments?")
    _check(peak is None or seen["peak"] <= peak * act + (d * d + d) * 8 + 64,
           f"{name}: the peak of a step was "
           f"{round((seen['peak'] - (d * d + d) * 8) / act)} activations, expected {peak}: is "
           "something holding on to tensors (a list of outputs, a variable kept alive)?")
    if seen["warned"] is not None:
        _fail(f"{name}: {_warned(seen['warned'])}...: pass use_reentrant=False")


def _judge_forward(got, want, cases):
    assert (type(got) is dict
            and set(got) == {"chains", "raised", *["big"] * bool(cases.get("big"))}), \
        "malformed results"
    for seen, peak, case in zip(results(got["chains"], cases["chains"], "checkpointed_forward"),
                                want["peaks"], cases["chains"]):
        _judge_chain(seen, peak, *case)
    for names, (n, s) in zip(results(got["raised"], cases["bad"], "checkpointed_forward"),
                             cases["bad"]):
        check_raised(names, f"checkpointed_forward(<{n} blocks>, x, segments={s})")
    if not cases.get("big"):
        return
    name = "checkpointed_forward(<64 Tanh layers>, x, segments=8)"
    big = value_of(got["big"], name)
    assert type(big) is dict and set(big) == {"out", "grad"}, f"{name}: {MALFORMED}"
    for key, what, missing in (("out", f"the output of {name}",
                                "the output is not a tensor that requires grad"),
                               ("grad", f"the gradient of x after {name}",
                                "after backward, x has no gradient")):
        if type(big[key]) is not torch.Tensor:
            _fail(f"{name}: {missing}")
        check_tensor(big[key], want["big"][key], f"{what} (its rows' sums)", rtol=1e-10, atol=1e-10)
    # measured by the operating system while the test ran; None in a notebook
    peaks = memory_peaks()
    if peaks is not None and (peaks[0] - peaks[1]) / 2 ** 20 >= 64:
        _fail(f"while this test ran, your code had {(peaks[0] - peaks[1]) / 2 ** 20:.0f} MB more "
              "memory in use than the reference solution at the peak (measured by the operating "
              f"system, on {name}): the layers' outputs were kept, as without checkpointing; run "
              "each segment through torch.utils.checkpoint.checkpoint and keep no other reference "
              "to the outputs")


CHECKPOINTED_FORWARD = Check("checkpointed_forward", _probe_forward, _judge_forward)


# Exercise 3: best_segments(n, act_bytes, budget_bytes) -> the fewest segments whose peak fits.
# cases: {"calls": [(n, act_bytes, budget_bytes) or (n, act_bytes, budget_bytes, model)], "bad":
# [(n, act_bytes, budget_bytes)] that must raise ValueError, "peaks": the checkpoint_peak_bytes put
# in the learner's place while the probe runs (the hidden test's reference copy of Exercise 1, or
# "measured": measured_peak in whole activations, times act_bytes), so that a mistake in Exercise 1
# does not count twice}; a call's own model (a function whose docstring says what it models) takes
# that place for that call: the docstring lets the answer lie anywhere in 1..n, and with a peak that
# falls with every segment it lies far above sqrt(n), or at n. want: [the fewest segments, for each
# call].

def _measured_model(n, segments, act_bytes):
    return round(measured_peak(n, segments) / MEASURE_ACT) * act_bytes


def _probe_best(fn, cases):
    default = _measured_model if cases["peaks"] == "measured" else cases["peaks"]
    space, missing = getattr(fn, "__globals__", {}), object()
    before = space.get("checkpoint_peak_bytes", missing)
    space["checkpoint_peak_bytes"] = default
    try:
        calls = []
        for n, act, budget, *model in cases["calls"]:
            peak = model[0] if model else default
            space["checkpoint_peak_bytes"] = peak
            seen = outcome(fn, n, act, budget)
            s = seen.get("value")
            top = s if type(s) is int and 1 <= s <= n else n if "raised" in seen else 0
            # what the judge names
            calls.append({**seen, "peaks": [peak(n, k, act) for k in range(1, top + 1)]})
        space["checkpoint_peak_bytes"] = default
        return {"calls": calls, "raised": [raised(fn, *args) for args in cases["bad"]]}
    finally:
        (space.pop("checkpoint_peak_bytes", None) if before is missing
         else space.update(checkpoint_peak_bytes=before))


STRICT = "a peak exactly equal to the budget fits too (use <=)"


def _segments(k, verb: str = "") -> str:
    """"1 segment fits", "3 segments fit": k segments, with the verb (if any) agreeing."""
    said = "1 segment" if k == 1 else f"{k} segments"
    return f"{said} {verb}{'s' if k == 1 else ''}" if verb else said


def _judge_best(got, want, cases):
    assert type(got) is dict and set(got) == {"calls", "raised"}, MALFORMED
    calls = results(got["calls"], cases["calls"], "best_segments")
    values = [c.get("value") if type(c) is dict else None for c in calls]
    divisors = all(v >= 1 and n % v == 0 for v, (n, *_) in zip(values, cases["calls"])
                   if type(v) is int)
    # uses_le: some call whose fewest segments peak exactly at the budget was answered right, so <=
    # is not the mistake
    uses_le = any(type(c) is dict and v == w and type(c.get("peaks")) is list
                  and len(c["peaks"]) >= w and c["peaks"][w - 1] == call[2]
                  for c, v, w, call in zip(calls, values, want, cases["calls"]))
    for seen, w, (n, act, budget, *model) in zip(calls, want, cases["calls"]):
        name = f"best_segments({n}, {act}, {budget})" + (
            f" (with checkpoint_peak_bytes a model in which {model[0].__doc__})" if model else "")
        peaks = seen.get("peaks") if type(seen) is dict else None
        assert type(peaks) is list and all(type(p) in (int, float) for p in peaks), \
            f"{name}: malformed results"
        tie = len(peaks) >= w and peaks[w - 1] == budget
        far = (f"the answer is n = {n} itself: the search must reach s = n" if w == n else
               f"the answer, {w}, lies far above sqrt(n) = {math.sqrt(n):.3g}: a search that stops "
               "near sqrt(n), or a formula in place of calling checkpoint_peak_bytes, misses it"
               if w > math.isqrt(n) + 1 else None)
        far = far and f"{far} (every s in 1..n may be the answer)"
        if "raised" in seen and "ValueError" in seen["raised"] and len(peaks) >= w:
            _fail(f"{name} raised ValueError, but {_segments(w, 'fit')}: "
                  + (far if far and (uses_le or not tie) else f"the peak is {peaks[w - 1]} bytes"
                     + (f", exactly the budget: {STRICT}" + (f"; and {far}" if far else "")
                        if tie else
                        f", within the budget of {budget}")))
        g = value_of(seen, name)
        _check(type(g) is int, f"{name} should be an int, the number of segments, got "
                               f"{name_of(type(g).__name__)}")
        if g == w:
            continue
        message = f"{name} is {g}, expected {w}"
        _check(1 <= g <= n and len(peaks) >= g,
               f"{message}: the number of segments is between 1 and n = {n}")
        _check(peaks[g - 1] <= budget, f"{message}: {_segments(g, 'peak')} at {peaks[g - 1]} "
                                       f"bytes, over the budget of {budget} bytes")
        _check(g < w or peaks[w - 1] != budget or not peaks[g - 1] < budget <= min(peaks[:g - 1]),
               f"{message}: {_segments(w, 'peak')} at exactly {budget} bytes: {STRICT}")
        if g > w:
            _fail(f"{message}: the budget allows fewer segments: {_segments(w, 'peak')} at "
                  f"{peaks[w - 1]} bytes, within the budget of {budget}, and fewer segments "
                  "recompute less: return the fewest that fit"
                  + (" (every count returned divides n, but counts that do not divide n are "
                     "allowed too: segment lengths may differ by one)" if divisors and n % w
                     else ""))
        _fail(f"{message}: {_segments(g, 'peak')} at {peaks[g - 1]} bytes by the peak model, "
              f"within the budget, but {w} is the fewest that fit")
    for names, args in zip(results(got["raised"], cases["bad"], "best_segments"), cases["bad"]):
        check_raised(names, f"best_segments{args} (no number of segments fits)")


BEST_SEGMENTS = Check("best_segments", _probe_best, _judge_best)
