"""Lesson 08 (multi-device): the checks of its four exercises, used by the visible and the hidden
tests.

Each exercise's cases are a dict of lists of plain tuples (or a list, for average_gradients); `want`
is the right answers for them (the visible test's literals or autograd, or the hidden test's
expect()). Arguments that the docstring says must raise are listed under "bad" and judged in the
same run.
"""

import torch
import torch.nn.functional as F
from torch import nn

from course_utils.checks import check_float, check_tensor
from course_utils.judging import (Check, MALFORMED, argument, call_name, check_raised, name_of,
                                  outcome, raised, results, value_of)
from course_utils.lessonchecks.workers import judge_failure, run_cases


# This lesson's test cells may start processes: average_gradients runs in real gloo process groups
# (course_utils.parallel.run_workers). The grader forbids it in every other lesson's test cells
# (course_utils.grader.lessonfile.probes_start_processes).
PROBES_START_PROCESSES = True


def _parts(got, keys) -> dict:
    assert type(got) is dict and set(got) == set(keys), MALFORMED
    return got


def _why_bad(name: str, value) -> str:
    """Why an argument that must be an int >= 1 is invalid, in the docstring's terms."""
    return (f"{name} = {value!r} is "
            + (f"a {type(value).__name__}, not an int" if type(value) is not int else "below 1"))


def _judge_raised(found, bad, fn: str, why) -> None:
    """Every bad call raised ValueError; else a message with the call and why its arguments are
    invalid."""
    for r, args in zip(results(found, bad, f"{fn} with invalid arguments"), bad):
        try:
            check_raised(r, call_name(fn, *args))
        except AssertionError as e:
            raise AssertionError(f"{e}: {why(*args)}") from None


def _typed(value, name: str, kind: type):
    """value, when it is exactly a Python `kind` (a bool is not an int here)."""
    if type(value) is not kind:
        shown = (f" {value!r}" if type(value) in (int, float, bool) else " (a missing return?)"
                 if value is None else "")
        raise AssertionError(f"{name} should be a Python {kind.__name__}, got "
                             f"{name_of(type(value).__name__)}{shown}")
    return value


# Exercise 1: bubble_fraction(p, m) -> (p-1)/(m+p-1) as a Python float; ValueError unless p and m
# are ints >= 1.
# cases: {"values": [(p, m)], "bad": [(p, m)]}; want: [the bubble of each "values" case].

def _bubble_mistakes(p, m, right) -> dict:
    return {"this is the idle time relative to the busy time, (p-1)/m; "
            "the fraction of the whole schedule is (p-1)/(m+p-1)": (p - 1) / m,
            "off by one: the schedule has m + p - 1 steps each way, not m + p": (p - 1) / (m + p),
            "this is the busy fraction m/(m+p-1); the bubble is the idle part": m / (m + p - 1),
            "p stages give p - 1 idle steps each way, not p": p / (m + p - 1)}


def _probe_pairs(fn, cases):
    return {"values": [outcome(fn, *args) for args in cases["values"]],
            "raised": [raised(fn, *args) for args in cases["bad"]]}


def _judge_pairs(fn: str, kind: type, mistakes, why_bad):
    """A judge for cases {"values": [args], "bad": [args]}: each value a Python `kind` equal to
    want's (mistakes(*args, right) names known wrong ones), each bad call a ValueError
    (why_bad(*args) says why)."""
    def judge(got, want, cases):
        got = _parts(got, ("values", "raised"))
        for g, right, args in zip(results(got["values"], cases["values"], fn), want,
                                  cases["values"]):
            name = call_name(fn, *args)
            value = _typed(value_of(g, name), name, kind)
            if kind is int and value < 1:
                raise AssertionError(f"{name} is {value}: a pipeline needs at least one "
                                     "micro-batch")
            check_float(value, right, name,
                        mistakes={k: v for k, v in mistakes(*args, right).items() if v != right})
        _judge_raised(got["raised"], cases["bad"], fn, why_bad)
    return judge


BUBBLE_FRACTION = Check("bubble_fraction", _probe_pairs, _judge_pairs(
    "bubble_fraction", float, _bubble_mistakes,
    lambda p, m: _why_bad("p", p) if type(p) is not int or p < 1 else _why_bad("m", m)))


# Exercise 2: min_microbatches(p, bound) -> the smallest int m >= 1 with (p-1)/(m+p-1) <= bound;
# ValueError unless p is an int >= 1 and 0 < bound < 1 (nan is not).
# cases: {"values": [(p, bound)], "bad": [(p, bound)]}; want: [the right m of each "values" case].

def _microbatch_mistakes(p, bound, right) -> dict:
    mistakes = {}
    below = (p - 1) / (right - 1 + p - 1) if right > 1 else None
    # the bound lies a hair below the bubble at right - 1
    if below is not None and below - bound <= 1e-9 * bound:
        mistakes[f"one micro-batch too few: at m = {right - 1} the bubble (p-1)/(m+p-1) = "
                 f"{argument(below)} is above the bound, by {below - bound:.1g}: compare the "
                 "bubble, computed as bubble_fraction does, with the bound (a closed form rounded "
                 "with math.ceil can land on the wrong side of a whole number)"] = right - 1
    mistakes |= {f"one micro-batch more than needed: with m = {right} the bubble (p-1)/(m+p-1) is "
                 f"already <= {argument(bound)} (a bubble equal to the bound is allowed; a float "
                 "rounded up with math.ceil can also land one too high)":
                right + 1,
                f"one micro-batch too few: at m = {right - 1} the bubble (p-1)/(m+p-1) is still "
                f"above {argument(bound)} (a closed form rounded down, or a bubble formula with "
                "m + p in the denominator, lands here)": right - 1}
    return mistakes


MIN_MICROBATCHES = Check("min_microbatches", _probe_pairs, _judge_pairs(
    "min_microbatches", int, _microbatch_mistakes,
    lambda p, bound: _why_bad("p", p) if type(p) is not int or p < 1
    else f"bound = {bound!r} is not a number strictly between 0 and 1"))


# Exercise 3: balance_stages(layer_params, num_stages) -> num_stages non-empty lists of consecutive
# layer indices, 0..n-1 once each in order, the largest stage's parameters as few as possible;
# layer_params left unchanged; ValueError unless num_stages is an int with 1 <= num_stages <= n.
# cases: {"splits": [(layer_params, num_stages)], "bad": [(layer_params, num_stages)]};
# want: [the smallest possible largest stage of each "splits" case].

def _probe_balance(fn, cases):  # "after": the layer_params list as the call left it
    calls = [(list(params), k) for params, k in cases["splits"]]
    return {"splits": [{**outcome(fn, inputs, k), "after": inputs} for inputs, k in calls],
            "raised": [raised(fn, list(params), k) for params, k in cases["bad"]]}


def _shown(value) -> str:
    """A result as feedback may show it: lists and ints as they are, anything else by its type's
    name."""
    if type(value) is int:
        return repr(value)
    if type(value) is list:
        return ("[" + ", ".join(_shown(v) for v in value[:20])
                + (", ..." if len(value) > 20 else "") + "]")
    return f"<{name_of(type(value).__name__)}>"


def _judge_split(result, params, k, best) -> None:
    name = call_name("balance_stages", params, k)
    split = value_of(result, name)
    assert type(split) is list and all(type(s) is list for s in split), \
        f"{name} should be a list of lists of layer indices, got {_shown(split)}"
    assert len(split) == k, f"{name} has {len(split)} stages, expected {k}: one per device"
    for s, stage in enumerate(split):
        assert stage, f"{name}: stage {s} is empty: every device needs at least one layer"
        assert all(type(i) is int for i in stage), (f"{name}: stage {s} should hold int layer "
                                                    f"indices, got {_shown(stage)}")
        assert stage == list(range(stage[0], stage[0] + len(stage))), \
            (f"{name}: stage {s} holds layers {stage}, which are not contiguous: a stage must be a "
             "run of consecutive layers")
    flat = [i for stage in split for i in stage]
    assert flat == list(range(len(params))), \
        (f"{name}: the stages must hold layers 0..{len(params) - 1} once each, in order; they hold "
         f"{_shown(flat)}")
    assert result["after"] == list(params), (f"{name} changed its layer_params list: leave the "
                                             "input as it was")
    loads = [sum(params[i] for i in stage) for stage in split]
    if max(loads) != best:
        sizes = [len(stage) for stage in split]
        hint = ("; its stages hold equal numbers of layers, but equal numbers of layers per stage "
                "ignore how many parameters each layer has" if max(sizes) - min(sizes) <= 1 else "")
        raise AssertionError(f"{name}: the stages hold {loads} parameters, the largest "
                             f"{max(loads)}; a contiguous split whose largest stage holds "
                             f"{best} exists{hint}")


def _judge_balance(got, want, cases):
    got = _parts(got, ("splits", "raised"))
    for result, best, case in zip(results(got["splits"], cases["splits"], "balance_stages"), want,
                                  cases["splits"]):
        assert type(result) is dict and "after" in result, MALFORMED
        _judge_split(result, *case, best)
    _judge_raised(got["raised"], cases["bad"], "balance_stages",
                  lambda params, k: _why_bad("num_stages", k) if type(k) is not int
                  else f"num_stages = {k} is not between 1 and {len(params)}, the number of layers")


BALANCE_STAGES = Check("balance_stages", _probe_balance, _judge_balance)


# Exercise 4: average_gradients(model), run in every worker of a gloo process group after backward.
# cases: [(world_size, seed, kind)], kind "plain" | "frozen" (one parameter's .grad stays None) |
# "float32" | "no_grads" (no backward ran: every .grad is None); want: [one gradient per parameter
# of dp_problem(seed, kind)'s model on its whole batch (autograd, one process), None where .grad is
# None].

# kind: (how messages name the case, what a failed run's message adds)
KINDS = {"plain": ("", None),
         "frozen": (" and a frozen parameter",
                    "a frozen parameter's .grad is None: skip such parameters, do not "
                    "all_reduce them"),
         "float32": (" and a float32 model", "the parameters and their gradients are float32 here"),
         "no_grads": (" before any backward (every .grad None)",
                      "every .grad is None here: there is nothing to average, and "
                      "nothing to all_reduce")}


def dp_problem(seed: int, kind: str = "plain"):
    """(model, X, y): a small MLP (float64, or float32 for kind "float32") and a batch of 12, the
    same in every process that calls this with the same seed; kind "frozen" freezes the first
    bias."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {sorted(KINDS)}, got {kind!r}")
    dtype = torch.float32 if kind == "float32" else torch.float64
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 3)).to(dtype)
    if kind == "frozen":
        model[0].bias.requires_grad_(False)
    return model, torch.randn(12, 5, dtype=dtype), torch.randint(0, 3, (12,))


def _rank_grads(world_size, rank, seed, kind):
    """The model of dp_problem(seed, kind) after backward on rank `rank`'s share of the batch."""
    model, X, y = dp_problem(seed, kind)
    if kind != "no_grads":
        n = len(X) // world_size
        F.cross_entropy(model(X[rank * n:(rank + 1) * n]), y[rank * n:(rank + 1) * n]).backward()
    return model


def _dp_worker(rank, world_size, recipe, seed, kind):
    """In each worker: this rank's gradients, then the learner's average_gradients (rebuilt from
    recipe); {"grads": each parameter's .grad after it (None where None), "returned": its result's
    type name, None for None}."""
    from course_utils.parallel import rebuilt
    average_gradients = rebuilt(recipe)
    model = _rank_grads(world_size, rank, seed, kind)
    returned = average_gradients(model)
    return {"grads":
                [None if p.grad is None else p.grad.detach().clone() for p in model.parameters()],
            "returned": None if returned is None else type(returned).__name__}


# types feedback may name (a learner-made class's name is no feedback's business)
RETURNED = {"Sequential", "Module", "Tensor", "Parameter", "list", "tuple", "dict", "generator",
            "int", "float", "bool", "str"}


def _probe_average(fn, cases):
    """Each case: every rank's gradients after fn (None where .grad is None), or what went wrong
    (see run_cases)."""
    return run_cases(_dp_worker, fn, cases, "average_gradients")


def _judge_average(got, want, cases):
    for found, whole, (world_size, seed, kind) in zip(results(got, cases, "average_gradients"),
                                                      want, cases):
        where = f"with {world_size} rank{'s' if world_size > 1 else ''}{KINDS[kind][0]}"
        if type(found) is not list:
            judge_failure(found, where, "average_gradients", KINDS[kind][1])
        assert len(found) == world_size, f"{where}: expected one result per rank"
        for rank, out in enumerate(found):
            assert type(out) is dict and set(out) == {"grads", "returned"}, MALFORMED
            grads = out["grads"]
            assert type(grads) is list and len(grads) == len(whole), \
                f"{where}: rank {rank} returned no gradients"
            own = [p.grad for p in _rank_grads(world_size, rank, seed, kind).parameters()]
            for i, (e, g, mine) in enumerate(zip(whole, grads, own)):
                name = f"{where}, rank {rank}'s gradient of parameter {i}"
                if e is None:
                    why = ("the parameter is frozen" if kind == "frozen"
                           else "no backward ran, so there is no gradient")
                    assert g is None, f"{name} should stay None: {why}"
                    continue
                name += f" {tuple(e.shape)}"
                assert g is not None, (f"{name} is None: only parameters whose .grad is None "
                                       "are left alone")
                tol = (1e-5, 1e-6) if e.dtype == torch.float32 else (1e-9, 1e-12)
                check_tensor(g, e, name, rtol=tol[0], atol=tol[1], mistakes={
                    "the gradients were summed over the ranks but not divided by the world size":
                        e * world_size,
                    "this is the rank's own gradient: the all_reduce is missing, was applied to "
                    "p.data instead of p.grad, or to a copy (torch.cat, .clone()) whose result was "
                    "never copied back into p.grad":
                        mine,
                    "the rank's own gradient was divided by the world size but never all-reduced":
                        mine / world_size,
                    "the sum was divided by 2, not by the world size (dist.get_world_size())":
                        e * world_size / 2})
            if out["returned"] is not None:
                kind = out["returned"] if out["returned"] in RETURNED else "value"
                raise AssertionError(f"{where}: average_gradients returned a {kind} on rank "
                                     f"{rank}, but it should return None: it changes each p.grad "
                                     "and returns nothing, and the caller goes on with its own "
                                     "model (the docstring)")


AVERAGE_GRADIENTS = Check("average_gradients", _probe_average, _judge_average)
