"""Lesson 05 (gradient accumulation): the checks of its three exercises, used by the visible and the
hidden tests.

`want` holds the right answers for the cases: the visible test's literals (or the full-batch step
torch computes in the visible cell), or the hidden test's expect(). Known wrong answers are
simulated here (wrong weights, no zero_grad, another loss), right answers never; so are the inputs
the probes build from seeds.
"""

import torch
from torch import nn

from course_utils.checks import check_floats, check_tensor
from course_utils.data import blobs, linear
from course_utils.judging import (Check, MALFORMED, check_raised, memory_peaks, outcome, raised,
                                  raised_name, value_of)
from course_utils.memory import SavedTensors

WHAT = "train_accumulated on {} samples, micro_batch_size={}, accumulation_steps={}"
ALIVE = ("several micro-batches' graphs were alive at once, as when the losses are summed into "
         "one graph. Call backward on each micro-batch's loss before the next forward, so its "
         "graph is freed")


def _listed(got, cases, what: str) -> list:
    assert type(got) is list and len(got) == len(cases), f"{what} was not run on every case"
    return got


def _distinct(mistakes: dict, expected, close) -> dict:
    """The mistakes wrong here, those with the same answer merged: feedback never names one cause of
    several."""
    kept: list[tuple[list[str], object]] = []
    for description, wrong in mistakes.items():
        if not close(wrong, expected):
            same = next((k for k in kept if close(k[1], wrong)), None)
            same[0].append(description) if same else kept.append(([description], wrong))
    return {d[0] if len(d) == 1
            else "one of these mistakes, which give the same result here: " + "; or ".join(d): w
            for d, w in kept}


# Exercise 1: micro_batch_weights(sizes) -> [n_i / N], Python floats in a list; ValueError for an
# empty sequence or a size below 1. cases: {"sizes": [a list or tuple of sizes], "bad": [sizes that
# must raise]};
# want: [the right weights] for cases["sizes"].

def _weight_mistakes(sizes) -> dict:
    k, total = len(sizes), sum(sizes)
    return {
        "every micro-batch got 1/k: dividing by the number of micro-batches is exact only when "
        "they are equal; weight each by its share of the samples, n_i / N": [1 / k] * k,
        "these are the sizes themselves: divide each by the total number of samples N so the "
        "weights sum to 1":
            [float(n) for n in sizes],
        "the weights are upside down (1/n_i): a micro-batch with more samples must "
        "weigh more, n_i / N":
            [1 / n for n in sizes],
        "the weights were computed with integer division (//), which rounds n_i / N down: "
        "use / for floats":
            [float(n // total) for n in sizes],
    }


def _probe_weights(fn, cases):
    fresh = lambda sizes: list(sizes) if type(sizes) is list else sizes  # a copy of a list
    return {"weights": [outcome(fn, fresh(sizes)) for sizes in cases["sizes"]],
            "raised": [raised(fn, fresh(bad)) for bad in cases["bad"]]}


def _judge_weights(got, want, cases):
    assert type(got) is dict and set(got) == {"weights", "raised"}, MALFORMED
    for case, sizes, expected in zip(_listed(got["weights"], cases["sizes"], "micro_batch_weights"),
                                     cases["sizes"], want):
        name = f"micro_batch_weights({sizes!r})"
        weights = value_of(case, name)
        check_floats(weights, expected, name,
                     mistakes=_distinct(_weight_mistakes(sizes), expected, lambda a, b: all(
                         abs(x - y) <= 1e-9 + 1e-6 * abs(y) for x, y in zip(a, b))),
                     promised=list, rtol=1e-12, atol=1e-15)
    for names, bad in zip(_listed(got["raised"], cases["bad"], "micro_batch_weights on bad sizes"),
                          cases["bad"]):
        check_raised(names, f"micro_batch_weights({bad!r})")


MICRO_BATCH_WEIGHTS = Check("micro_batch_weights", _probe_weights, _judge_weights)


# Exercise 2: train_accumulated(model, loss_fn, X, y, micro_batch_size b, accumulation_steps k,
# optimizer).
# cases: {"runs": [RUN], "bad": [(b, k)] that must raise ValueError, "memory": [(N, b, k)] whose
# saved activations must peak at one micro-batch's, "big": None or (N, b, k, lr), whose peak the
# grader measures}; RUN = (N, b, k, the groups' sample ranges [(start, end)], what is special, task:
# "mse", "huber" (inputs (N, 2, 3), targets (N,)) or "cross entropy", data seed, model seed, lr).
# want: {"runs": [{"steps": int, "parameters": flat(model) after, "losses": [float]}], "big": the
# same}, of full-batch SGD steps on the groups.

class StepCounter(torch.optim.SGD):
    """Plain SGD that counts its step() calls."""
    steps = 0

    def step(self, closure=None):
        self.steps += 1
        return super().step(closure)


def flat(model) -> torch.Tensor:
    """Every parameter of `model`, detached, in one vector."""
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def accumulation_inputs(run):
    """(model, loss_fn, X, y) of a RUN, float64, from its seeds. When there are samples, the model's
    .grad holds a stale gradient, the full batch's (as after logging its norm)."""
    N, _, _, _, _, task, data_seed, model_seed, _ = run
    with torch.random.fork_rng():
        torch.manual_seed(model_seed)
        model = {"cross entropy": lambda: nn.Sequential(nn.Linear(3, 8), nn.Tanh(),
                                                        nn.Linear(8, 3)),
                 "huber": lambda: nn.Sequential(nn.Flatten(), nn.Linear(6, 8), nn.Tanh(),
                                                nn.Linear(8, 1), nn.Flatten(0)),
                 "mse": lambda: nn.Sequential(nn.Linear(3, 8), nn.Tanh(),
                                              nn.Linear(8, 1))}[task]().double()
    X, y = (blobs(n=N + 1, num_inputs=3, num_classes=3, seed=data_seed, dtype=torch.float64)
            if task == "cross entropy"
            else linear(n=N + 1, num_inputs=6 if task == "huber" else 3, seed=data_seed,
                        dtype=torch.float64))
    if task == "huber":
        X, y = X.reshape(-1, 2, 3), y.reshape(-1)
    loss_fn = {"cross entropy": nn.CrossEntropyLoss(), "huber": nn.HuberLoss(delta=0.5),
               "mse": nn.MSELoss()}[task]
    X, y = X[:N].clone(), y[:N].clone()  # (one sample more, so that N = 0 works, then dropped)
    if N > 0:
        loss_fn(model(X), y).backward()
    return model, loss_fn, X, y


def memory_inputs(N):
    """The wider model and data of the saved-activation checks: 64 Tanh units, N samples."""
    X, y = linear(n=N, num_inputs=3, seed=5, dtype=torch.float64)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return (nn.Sequential(nn.Linear(3, 64), nn.Tanh(), nn.Linear(64, 1)).double(), nn.MSELoss(),
                X, y)


def big_inputs(big):
    """The case whose peak the grader measures outside the learner's process: three Tanh layers
    2,048 wide, float64. Micro-batches of 2,048 save 96 MB each: two graphs alive cost 96 MB more,
    one summed graph of 4, 288 MB."""
    X, y = linear(n=big[0], num_inputs=3, seed=7, dtype=torch.float64)
    with torch.random.fork_rng():
        torch.manual_seed(1)
        model = nn.Sequential(nn.Linear(3, 2048), nn.Tanh(), nn.Tanh(), nn.Tanh(),
                              nn.Linear(2048, 1)).double()
    return model, nn.MSELoss(), X, y


def _wrong(run, rule: str) -> torch.Tensor:
    """The parameters after a WRONG loop over a RUN's groups: micro-batch weights by a wrong `rule`,
    or one full-batch step per group without zero_grad ("no zero_grad") or on a mean squared error
    ("mse"), or the right weights with zero_grad before every micro-batch ("zero_grad each")."""
    model, loss_fn, X, y = accumulation_inputs(run)
    N, b, k, groups = run[:4]
    for a, end in groups:
        if rule != "no zero_grad":
            model.zero_grad()
        if rule in ("no zero_grad", "mse"):
            (nn.MSELoss() if rule == "mse" else loss_fn)(model(X[a:end]), y[a:end]).backward()
        for s in [] if rule in ("no zero_grad", "mse") else range(a, end, b):
            weight = {"one": 1.0, "k": 1 / k, "count": 1 / -(-(end - a) // b),
                      "k twice": 1 / k ** 2, "data set": len(X[s:s + b]) / N,
                      "zero_grad each": len(X[s:s + b]) / (end - a)}[rule]
            if rule == "zero_grad each":
                model.zero_grad()
            (loss_fn(model(X[s:s + b]), y[s:s + b]) * weight).backward()
        with torch.no_grad():
            for p in model.parameters():
                p -= run[-1] * p.grad
    return flat(model)


def _train_mistakes(run) -> dict:
    """{description: the parameters that mistake ends with} for a RUN."""
    (N, b, k, groups), task = run[:4], run[5]
    # one group of k full micro-batches: the factors are exact
    even = len(groups) == 1 and N == b * k
    mistakes = {
        (f"the gradient is exactly {k} times too large: the loss was not divided by "
         "accumulation_steps" if even else
         f"the loss was not divided by accumulation_steps, so the gradient is up to {k} "
         "times too large"):
            _wrong(run, "one"),
        ("the gradient is twice the full batch's: zero_grad was not called before the group, so "
         "the stale gradient already in .grad was added and the step doubled"
         if len(groups) == 1 else
         "zero_grad was not called before each group: the stale gradient in .grad (or the previous "
         "group's) was added to the group's own"): _wrong(run, "no zero_grad"),
        "every micro-batch was divided by accumulation_steps: that is exact only when all "
        "groups have k micro-batches of equal size; weight each by its share of the group's "
        "samples, n_i / n_group":
            _wrong(run, "k"),
        "each micro-batch was divided by the number of micro-batches in its group: that is "
        "exact only when they have equal sizes; weight each by its share of the group's "
        "samples, n_i / n_group": _wrong(run, "count"),
        (f"the gradient is exactly {k} times too small: " if even else "")
        + "the loss was divided by accumulation_steps twice": _wrong(run, "k twice"),
        "each micro-batch was weighted by its share of the whole data set, n_i / N: weight it by "
        "its share of its own group's samples, n_i / n_group": _wrong(run, "data set"),
        "zero_grad was called before every micro-batch, so only the last micro-batch of each group "
        "reached the step: call it once per group, before the group's first "
        "micro-batch": _wrong(run, "zero_grad each"),
    }
    if task == "huber":
        mistakes["the loss was computed as a mean squared error instead of with the "
                 "loss_fn passed in"] = _wrong(run, "mse")
    return mistakes


def _probe_train(fn, cases):
    def run_on(inputs, b, k, lr):
        model, loss_fn, X, y = inputs
        optimizer = StepCounter(model.parameters(), lr=lr)
        return {**outcome(fn, model, loss_fn, X, y, b, k, optimizer), "steps": optimizer.steps,
                "parameters": flat(model)}
    runs = [run_on(accumulation_inputs(run), run[1], run[2], run[-1]) for run in cases["runs"]]
    bad = [raised(fn, *inputs, b, k, StepCounter(inputs[0].parameters(), lr=0.01))
           for b, k in cases["bad"] for inputs in [memory_inputs(6)]]
    big = run_on(big_inputs(cases["big"]), *cases["big"][1:]) if cases["big"] else None
    # only one micro-batch's graph may be alive at a time: the peak of the saved activations
    memory = []
    for N, b, k in cases["memory"]:
        model, loss_fn, X, y = memory_inputs(N)
        with SavedTensors(exclude=[*model.parameters(), X, y]) as saved:
            result = outcome(fn, model, loss_fn, X, y, b, k,
                             StepCounter(model.parameters(), lr=0.01))
        memory.append({"raised": result["raised"]} if "raised" in result
                      else {"peak_bytes": saved.peak_bytes})
    return {"runs": runs, "bad": bad, "big": big, "memory": memory}


def _check_run(got, w, run, what):
    assert type(got) is dict and {"steps", "parameters"} <= set(got), f"{what}: {MALFORMED}"
    losses = value_of(got, what)
    steps, params, expected = got["steps"], got["parameters"], w["parameters"]
    assert type(steps) is int, f"{what}: the optimizer's step count could not be read"
    assert steps == w["steps"], (
        f"{what}: optimizer.step() was called {steps} times, expected {w['steps']}: step once per "
        "group of accumulation_steps micro-batches (and once for a shorter last group), not after "
        "every micro-batch")
    assert (type(params) is torch.Tensor and params.shape == expected.shape
            and params.dtype == expected.dtype), \
        f"{what}: the model's parameters changed their number or dtype"
    close = lambda a, b: torch.allclose(a, b, rtol=1e-9, atol=1e-12)
    # mistakes simulated if needed:
    mistakes = (_distinct(_train_mistakes(run), expected, close)
                if run and not close(params, expected) else {})
    check_tensor(params, expected, f"the parameters after {what}", rtol=1e-9, atol=1e-12,
                 mistakes=mistakes)
    check_floats(losses, w["losses"], f"the losses returned by {what}", rtol=1e-9, atol=1e-12,
                 labels=[f"the loss of step {i + 1} returned by {what}"
                         for i in range(len(w["losses"]))], promised=list)


def _judge_train(got, want, cases):
    assert (type(got) is dict and set(got) == {"runs", "bad", "big", "memory"}
            and type(want) is dict), MALFORMED
    for g, w, run in zip(_listed(got["runs"], cases["runs"], "train_accumulated"), want["runs"],
                         cases["runs"]):
        _check_run(g, w, run, WHAT.format(*run[:3]) + f" ({run[4]})")
    for names, (b, k) in zip(_listed(got["bad"], cases["bad"],
                                     "train_accumulated on bad arguments"), cases["bad"]):
        check_raised(names, f"train_accumulated(..., micro_batch_size={b}, "
                            f"accumulation_steps={k}, optimizer)")
    if cases["big"]:  # before the saved-activation checks, which a learner's process can fake
        what = WHAT.format(*cases["big"][:3])
        _check_run(got["big"], want["big"], None, what)
        # measured by the operating system while the test ran; None in a notebook
        peaks = memory_peaks()
        if peaks is not None:
            extra = (peaks[0] - peaks[1]) / 2 ** 20
            assert extra < 64, (
                f"while this test ran, your code had {extra:.0f} MB more memory in use than "
                "the reference solution at the peak (measured by the operating system, on "
                f"{what}): {ALIVE}")
    for g, (N, b, k) in zip(_listed(got["memory"], cases["memory"], "the memory check"),
                            cases["memory"]):
        what = WHAT.format(N, b, k)
        assert type(g) is dict and len(g) == 1, f"{what}: {MALFORMED}"
        assert "raised" not in g, f"{what} raised {raised_name(g['raised'])}"
        model, loss_fn, X, y = memory_inputs(N)
        with SavedTensors(exclude=[*model.parameters(), X, y]) as one:
            loss_fn(model(X[:b]), y[:b]).backward()
        peak, one = g.get("peak_bytes"), one.peak_bytes
        assert type(peak) is int, f"{what}: {MALFORMED}"
        assert peak / one < 1.5, (
            f"{what}: the saved activations peaked at {peak / one:.1f} times one micro-batch's "
            f"({peak} bytes, one micro-batch {one}): {ALIVE}")


TRAIN_ACCUMULATED = Check("train_accumulated", _probe_train, _judge_train)


# Exercise 3: plan_accumulation(effective_batch, bytes_per_sample, budget_bytes) -> (b, k), Python
# ints.
# cases: {"plans": [(effective_batch, bytes_per_sample, budget_bytes)], "bad": [arguments that must
# raise ValueError]}; want: [(micro_batch_size, accumulation_steps)] for cases["plans"].

def _probe_plan(fn, cases):
    return {"plans": [outcome(fn, *args) for args in cases["plans"]],
            "raised": [raised(fn, *args) for args in cases["bad"]]}


def _judge_plan(got, want, cases):
    assert type(got) is dict and set(got) == {"plans", "raised"}, MALFORMED
    for case, args, expected in zip(_listed(got["plans"], cases["plans"], "plan_accumulation"),
                                    cases["plans"], want):
        (B, s, budget), name = args, f"plan_accumulation{args}"
        if type(case) is dict and "raised" in case and type(budget) is float:
            raise AssertionError(f"{name} raised {raised_name(case['raised'])}; budget_bytes is a "
                                 "float here, which the docstring allows")
        plan = value_of(case, name)
        assert type(plan) is tuple and len(plan) == 2 and all(type(v) is int for v in plan), (
            f"{name} should return a tuple of two Python ints (micro_batch_size, "
            f"accumulation_steps), got {plan!r}")
        b, k = plan
        assert b >= 1 and b * s <= budget, (f"{name} = {plan}: {b} samples need {b * s} bytes, "
                                            f"more than the budget of {budget}")
        assert B % b == 0, (
            f"{name} = {plan}: micro_batch_size {b} does not divide the effective batch {B}, so "
            f"the micro-batches would be unequal; choose the largest divisor of {B} that fits")
        assert b * k == B, (f"{name} = {plan}: {b} x {k} = {b * k} samples per step, expected the "
                            f"effective batch {B}")
        if b != expected[0]:
            hint = (" (the budget holds b samples when b * bytes_per_sample <= budget_bytes: "
                    "use <=, not <)"
                    if expected[0] * s == budget else "")
            raise AssertionError(f"{name} = {plan}: a larger micro-batch, {expected[0]}, divides "
                                 f"{B} and fits the budget{hint}")
    for names, args in zip(_listed(got["raised"], cases["bad"],
                                   "plan_accumulation on bad arguments"), cases["bad"]):
        check_raised(names, f"plan_accumulation{args}")


PLAN_ACCUMULATION = Check("plan_accumulation", _probe_plan, _judge_plan)
