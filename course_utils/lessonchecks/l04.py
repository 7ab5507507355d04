"""Lesson 04 (mlp-backprop): the checks of its three exercises, used by the visible and the hidden
tests.

GRADIENT_SHAPES  cases: [(X_shape, num_hiddens, num_outputs)], passed as given (a tuple or a
                 torch.Size, a list or a tuple); want: [{"X": tuple, "hidden": [tuple], "logits":
                 tuple, "weights": [tuple], "biases": [tuple]}], the shapes autograd gives.
MLP_BACKWARD     cases: [((num_inputs, num_outputs, num_hiddens), X_shape, lam, seed[, how])],
                 inputs from `backward_inputs`; want: [(weight_grads, bias_grads)], autograd's
                 gradients for them.
MEMORY_BUDGET    cases: {"budgets": [((num_inputs, num_outputs, num_hiddens), dtype name,
                 batch_size, optimizer or None for the default)], "bad": [optimizers that must raise
                 ValueError]}; want: [the measured budget dicts], one per entry of "budgets".
"""

import math
import os

import torch
from torch.nn import functional as F

from course_utils.checks import CheckFailed, check_tensor
from course_utils.graph import next_node_number
from course_utils.judging import (Check, MALFORMED, check_raised, outcome, raised, raised_name,
                                  results, value_of)
from course_utils.models import MLPScratch




# Exercise 1: gradient_shapes(X_shape, num_hiddens, num_outputs) -> dict of shapes.

def _type_tree(value, depth=0):
    """The exact types inside a result (a torch.Size reaches the judge as a plain tuple)."""
    if depth > 4:
        return "..."
    if type(value) in (tuple, list, torch.Size):
        return [type(value).__name__, [_type_tree(v, depth + 1) for v in value]]
    if type(value) is dict:
        return ["dict", {k: _type_tree(v, depth + 1) for k, v in value.items() if type(k) is str}]
    return type(value).__name__


def _probe_shapes(fn, cases):
    found = []
    for X_shape, num_hiddens, num_outputs in cases:
        result = outcome(fn, X_shape, type(num_hiddens)(num_hiddens), num_outputs)
        result["types"] = _type_tree(result.get("value"))
        found.append(result)
    return found


def _items(types, kind, n):
    if (type(types) is list and len(types) == 2 and types[0] == kind and type(types[1]) is list
            and len(types[1]) == n):
        return types[1]
    return None


def _exact_shape(value, types) -> bool:
    return (type(value) is tuple and all(type(i) is int for i in value)
            and _items(types, "tuple", len(value)) == ["int"] * len(value))


def _shown(value, types) -> str:
    if (type(value) in (tuple, list) and type(types) is list and len(types) == 2
            and type(types[1]) is list and len(types[1]) == len(value)):
        inner = ", ".join(_shown(v, t) for v, t in zip(value, types[1]))
        if types[0] == "Size":
            return f"torch.Size([{inner}])"
        return (f"[{inner}]" if types[0] == "list" else f"({inner},)" if len(value) == 1
                else f"({inner})")
    return repr(value)


def _shape_mistakes(X_shape, num_hiddens, num_outputs) -> dict:
    n, D = X_shape[0], math.prod(X_shape[1:])
    sizes = [D, *num_hiddens, num_outputs]
    return {
        "dJ/dX was flattened to (n, num_inputs): a gradient has the shape of the tensor it is "
        "taken with respect to, here the batch's own shape X_shape": {"X": (n, D)},
        "dJ/dX lost its batch dimension: there is one gradient entry per input entry, "
        "for every example":
            {"X": tuple(X_shape[1:])},
        "the weight gradients are transposed: MLPScratch stores W as (fan_in, fan_out), and "
        "dJ/dW has W's shape":
            {"weights": [(b, a) for a, b in zip(sizes[:-1], sizes[1:])]},
        "the bias gradients kept the batch dimension: every example adds into the same bias, "
        "so dJ/db has the bias's shape (fan_out,)": {"biases": [(n, b) for b in sizes[1:]]},
        "one shape too many: H_0 = X is the input, not a hidden layer; 'hidden' has one shape "
        "per hidden layer": {"hidden": [(n, D)] + [(n, w) for w in num_hiddens]},
        "one shape too many: the logits O are the output layer, not a hidden layer; 'hidden' has "
        "one shape per hidden layer": {"hidden": [(n, w) for w in sizes[1:]]},
    }


def _count_words(key, got, want) -> str:
    per = "hidden layer" if key == "hidden" else "layer (len(num_hiddens) + 1 layers)"
    if len(got) == len(want) + 1:
        return f"one gradient too many, the shapes of an extra layer: one shape per {per}"
    if len(got) + 1 == len(want):
        return f"one gradient too few, a layer's shapes are missing: one shape per {per}"
    return f"{len(got)} shapes where there should be {len(want)}, one per {per}"


def _judge_shapes(got, want, cases):
    for case, expected, (X_shape, num_hiddens, num_outputs) in zip(
            results(got, cases, "gradient_shapes"), want, cases):
        name = f"gradient_shapes({X_shape}, {num_hiddens}, {num_outputs})"
        try:
            actual = value_of(case, name)
        except AssertionError as e:
            facts = [what for what, true in [
                         ("X_shape is a torch.Size", type(X_shape) is torch.Size),
                         ("num_hiddens is a tuple", type(num_hiddens) is tuple),
                         ("num_hiddens is empty", len(num_hiddens) == 0),
                         (f"X_shape has {len(X_shape)} entries", len(X_shape) > 2)] if true]
            raise CheckFailed(f"{e}" + (f" (in this call {', '.join(facts)})"
                                        if facts else "")) from e.__cause__
        types = case.get("types")
        assert type(actual) is dict, f"{name} should return a dict, got {type(actual).__name__}"
        assert set(actual) == set(expected), (f"{name} should have the keys {sorted(expected)}, "
                                              f"got {sorted(actual)}")
        key_types = (types[1] if type(types) is list and len(types) == 2 and type(types[1]) is dict
                     else {})
        for key, right in expected.items():
            value, t = actual[key], key_types.get(key)
            where = f"{name}[{key!r}]"
            if type(right) is tuple:
                assert _exact_shape(value, t), (f"{where} should be a tuple of ints, got "
                                                f"{_shown(value, t)} (wrap a torch.Size "
                                                "in tuple(...))")
            else:
                items = _items(t, "list", len(value)) if type(value) is list else None
                assert (items is not None
                        and all(_exact_shape(s, ts) for s, ts in zip(value, items))), \
                    f"{where} should be a list of tuples of ints, got {_shown(value, t)}"
            if value == right:
                continue
            known = next((d for d, wrong
                          in _shape_mistakes(X_shape, num_hiddens, num_outputs).items()
                          if wrong.get(key) == value), None)
            if known is None and type(right) is list and len(value) != len(right):
                known = _count_words(key, value, right)
            raise CheckFailed(f"{where} is {value}, expected {right}: {known}." if known
                              else f"{where} is {value}, expected {right} (the shapes "
                                   "autograd gives).")


GRADIENT_SHAPES = Check("gradient_shapes", _probe_shapes, _judge_shapes)


# Exercise 2: mlp_backward(model, X, y, lam) -> (weight_grads, bias_grads), by hand, no autograd.
# A case's optional `how`: "float32" (model and X in float32), "ties" (X's row 0 and the hidden
# biases are 0, so every hidden pre-activation of example 0 is exactly 0: the relu's switch point).

def backward_inputs(case):
    """A case's inputs (model, X, y), from its own seed: an MLPScratch with non-zero biases (float64
    unless `how` says float32), a batch X of shape X_shape (a non-contiguous view where `how` says
    strided: its dimensions' order reversed in memory) and int64 labels y."""
    (num_inputs, num_outputs, num_hiddens), X_shape, _, seed, *how = case
    dtype = torch.float32 if "float32" in how else torch.float64
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = MLPScratch(num_inputs, num_outputs, list(num_hiddens), lr=0.1, sigma=0.5).to(dtype)
        with torch.no_grad():
            for b in model.biases:
                b.copy_(0.5 * torch.randn_like(b))
        X = (torch.randn(tuple(X_shape)[::-1], dtype=dtype).permute(*reversed(range(len(X_shape))))
             if "strided" in how else torch.randn(X_shape, dtype=dtype))
        y = torch.randint(0, num_outputs, (X_shape[0],))
    if "ties" in how:
        with torch.no_grad():
            for b in list(model.biases)[:-1]:
                b.zero_()
        X[0] = 0
    return model, X, y


def _backward_name(case) -> str:
    (num_inputs, num_outputs, num_hiddens), X_shape, lam, _, *how = case
    kind = ".float()" if "float32" in how else ""
    view = " (a non-contiguous view)" if "strided" in how else ""
    return (f"mlp_backward(MLPScratch({num_inputs}, {num_outputs}, {list(num_hiddens)}){kind}, X "
            f"of shape {tuple(X_shape)}{view}, lam={lam})")


def _backward_facts(case, y) -> str:
    (num_inputs, num_outputs, num_hiddens), X_shape, lam, _, *how = case
    classes = len(set(y.tolist()))
    facts = ["the model and X are float32" if "float32" in how else "",
             f"X has {len(X_shape)} dimensions, {num_inputs} entries per example"
             if len(X_shape) > 2 else "",
             "the model has no hidden layer" if not num_hiddens else "",
             "one example (n = 1)" if X_shape[0] == 1 else "",
             f"the labels y hold {classes} of the {num_outputs} classes" if classes < num_outputs
             else "",
             f"lam is the int {lam}" if type(lam) is int else "",
             "example 0's hidden pre-activations are exactly 0" if "ties" in how else "",
             "X is a non-contiguous view (X.is_contiguous() is False): X.view(n, -1) cannot "
             "flatten it, X.reshape(n, -1) can" if "strided" in how else ""]
    return "; ".join(f for f in facts if f)




MARK = "mlp_backward test: profiler running"


def _autograd_watched(fn) -> dict:
    """fn()'s outcome under torch.no_grad(), with what shows autograd at work while it ran:
    "backward", backward nodes run in any thread, and "dual", forward-mode dual tensors made (the
    all-threads profiler); "nodes", autograd nodes made in this thread; "intact", the profiler's two
    marks recorded."""
    from torch._C._profiler import _ExperimentalConfig
    os.environ["KINETO_LOG_LEVEL"] = "6"  # no profiler_start lines on stderr
    found, names, stub = {}, [], None
    first = next_node_number()
    try:
        with torch.autograd.profiler.profile(
                experimental_config=_ExperimentalConfig(profile_all_threads=True)) as prof:
            with torch.autograd.profiler.record_function(MARK):
                pass
            try:
                with torch.no_grad():
                    found["value"] = fn()
            except NotImplementedError as e:  # the untouched stub: its own message
                stub = e
            except Exception as e:  # what was raised is the observation
                try:
                    about_grad = "grad" in str(e)
                except Exception:
                    about_grad = False
                found.update(raised=tuple(c.__name__ for c in type(e).__mro__), autograd=about_grad)
            with torch.autograd.profiler.record_function(MARK):
                pass
        names = [e.name for e in prof.function_events]
    except Exception:  # a profiler stopped under the test's feet
        pass
    if stub is not None:
        raise stub
    found.update(backward=sum(n.startswith("autograd::engine::evaluate_function") for n in names),
                 dual=names.count("aten::_make_dual"), nodes=next_node_number() - first - 1,
                 intact=names.count(MARK) == 2)
    return found


def _probe_backward(fn, cases):
    found = []
    for case in cases:
        model, X, y = backward_inputs(case)
        found.append(_autograd_watched(lambda: fn(model, X, y, case[2])))
    return found


def _relu_variants(model, X, y, lam, ties) -> dict:
    """Wrong hidden-layer gradients (layers below the last) from a wrong relu derivative, as [grads
    of W_0.., b_0..]: no mask at all, and (where `ties`) a mask of 1 where Z = 0."""
    L = len(model.weights)
    hows = {"the relu mask is missing: G_(i-1) = (G_i @ W_i.T) * (Z_(i-1) > 0), zero where "
            "the relu was off": "none"}
    if ties:
        hows["at Z = 0 exactly the relu mask is 1 here: relu'(0) = 0 (torch's relu passes no "
             "gradient at 0), so the mask is Z > 0, not Z >= 0"] = "zero"
    out = {}
    with torch.enable_grad():
        for words, how in hows.items():
            Ws = [W.detach().clone().requires_grad_(True) for W in model.weights]
            bs = [b.detach().clone().requires_grad_(True) for b in model.biases]
            H = X.reshape(X.shape[0], -1)
            for i in range(L):
                H = H @ Ws[i] + bs[i]
                if i < L - 1:
                    H = H + (torch.relu(H) - H).detach() if how == "none" else H.clamp(min=0)
            J = F.cross_entropy(H, y) + lam / 2 * sum((W ** 2).sum() for W in Ws)
            grads = torch.autograd.grad(J, Ws[:-1] + bs[:-1])
            out[words] = (list(grads[:L - 1]), list(grads[L - 1:]))
    return out


def _backward_mistakes(model, X, lam, want, ties, y) -> tuple[list, list]:
    """{description: wrong tensor} per layer, for the weight and the bias gradients."""
    Ws, bs = [W.detach() for W in model.weights], [b.detach() for b in model.biases]
    n, (gW, gb) = X.shape[0], want
    weights = [{"the weight-decay term lam * W_i is missing from dJ/dW_i (J includes "
                "lam/2 * ||W_i||^2)": g - lam * W,
                f"the cross-entropy part is exactly n = {n} times too large: the loss is averaged "
                "over the batch, so G_L = (softmax(O) - Y) / n": (g - lam * W) * n + lam * W,
                "the weight-decay gradient is lam * W, not lam/2 * W (the 2 of the square "
                "cancels the 1/2)": g - lam / 2 * W,
                "the weight-decay gradient is lam * W, not 2 * lam * W": g + lam * W}
               for g, W in zip(gW, Ws)]
    biases = [{"weight decay was applied to the biases: the penalty covers the weights only, so "
               "dJ/db_i has no lam * b_i":
               g + lam * b,
               f"the cross-entropy part is exactly n = {n} times too large: the loss is averaged "
               "over the batch, so G_L = (softmax(O) - Y) / n": g * n} for g, b in zip(gb, bs)]
    if len(Ws) > 1:
        for words, (vW, vb) in _relu_variants(model, X, y, lam, ties).items():
            for i, (w, b) in enumerate(zip(vW, vb)):
                weights[i][words], biases[i][words] = w, b
    for i, g in enumerate(gW):
        if g.shape[0] == g.shape[1]:
            weights[i]["the weight gradient is transposed: dJ/dW_i = H_prev.T @ G has W_i's shape "
                       "(fan_in, fan_out)"] = g.T
    return weights, biases


def _close(a, e, tol) -> bool:
    return (type(a) is torch.Tensor and a.shape == e.shape and a.dtype == e.dtype
            and torch.allclose(a, e, **tol))


def _check_grad(actual, expected, name, mistakes, tol):
    if type(actual) is torch.Tensor and actual.dim() == 2 and expected.dim() == 2 \
            and actual.shape != expected.shape and actual.shape == expected.shape[::-1]:
        raise CheckFailed(f"{name} has shape {tuple(actual.shape)}, expected "
                          f"{tuple(expected.shape)}: the weight gradient is transposed; dJ/dW_i = "
                          "H_prev.T @ G has W_i's shape (fan_in, fan_out)")
    if type(actual) is torch.Tensor and actual.dim() == 2 and expected.dim() == 1:
        raise CheckFailed(f"{name} has shape {tuple(actual.shape)}, expected "
                          f"{tuple(expected.shape)}: sum G over the batch (dim=0); every example "
                          "adds into the same bias")
    check_tensor(actual, expected, name, mistakes=mistakes, **tol)


def _judge_backward(got, want, cases):
    for case, w, spec in zip(results(got, cases, "mlp_backward"), want, cases):
        name, L = _backward_name(spec), len(w[0])
        assert type(case) is dict and ("value" in case or "raised" in case) \
            and all(type(case.get(k)) is int for k in ("backward", "dual", "nodes")) \
            and type(case.get("intact")) is bool, \
            f"{name}: {MALFORMED}"
        if not case["intact"]:
            raise CheckFailed(f"{name} stopped or restarted the test's profiler (a profiler of its "
                              "own?): the test cannot check that it ran no autograd")
        if case["backward"] or case["nodes"]:
            seen = ([f"{case['nodes']} autograd nodes were made"] if case["nodes"] else []) \
                + ([f"{case['backward']} backward nodes ran"] if case["backward"] else [])
            raise CheckFailed(f"{name} used autograd under the test's torch.no_grad() "
                              f"({', '.join(seen)}): switching grad mode back on "
                              "(torch.enable_grad()) or another thread does not hide it; compute "
                              "the gradients by hand, without autograd")
        if case["dual"]:
            raise CheckFailed(f"{name} used forward-mode autograd ({case['dual']} dual tensors "
                              "were made: torch.func.jvp, jacfwd or torch.autograd.forward_ad): "
                              "compute the gradients by hand, without autograd")
        model, X, y = backward_inputs(spec)
        if "raised" in case:
            names = case["raised"]
            if type(names) is tuple and "RuntimeError" in names and case.get("autograd") is True:
                raise CheckFailed(f"{name} raised RuntimeError (about grad) under torch.no_grad(): "
                                  "compute the gradients by hand, without autograd")
            facts = _backward_facts(spec, y)
            raise CheckFailed(f"{name} raised {raised_name(names)}"
                              + (f"; this call's inputs: {facts}" if facts else ""))
        result = case["value"]
        assert type(result) is tuple and len(result) == 2, \
            f"{name} should return a tuple (weight_grads, bias_grads), got {type(result).__name__}"
        tol = ({"rtol": 1e-4, "atol": 1e-6} if "float32" in spec[4:]
               else {"rtol": 1e-9, "atol": 1e-12})
        for what, grads, right in zip(("weight_grads", "bias_grads"), result, w):
            assert type(grads) is list, (f"{name}: {what} should be a list of {L} tensors, one per "
                                         f"layer, got {type(grads).__name__}")
            if len(grads) != L:
                raise CheckFailed(f"{name}: {what} should be a list of {L} tensors, one per layer, "
                                  f"got {len(grads)} entries: "
                                  f"{_count_words(what, grads, right).split(': ')[0]}")
            shapes = [tuple(g.shape) if type(g) is torch.Tensor else None for g in grads]
            if L > 1 and (shapes == [tuple(r.shape) for r in right[::-1]]
                          != [tuple(r.shape) for r in right]
                          or all(map(_close, grads, right[::-1], [tol] * L))
                          and not all(map(_close, grads, right, [tol] * L))):
                raise CheckFailed(f"{name}: {what} is in reverse order: {what}[i] is the gradient "
                                  "of layer i (model.weights[i], model.biases[i]), though the loop "
                                  "runs from the last layer down")
        weights, biases = _backward_mistakes(model, X, spec[2], w, "ties" in spec[4:], y)
        for i in range(L):
            _check_grad(result[0][i], w[0][i], f"{name}: weight_grads[{i}]", weights[i], tol)
            _check_grad(result[1][i], w[1][i], f"{name}: bias_grads[{i}]", biases[i], tol)


MLP_BACKWARD = Check("mlp_backward", _probe_backward, _judge_backward)


# Exercise 3: training_memory_budget(model, batch_size, optimizer="sgd") -> dict of Python ints.

def budget_model(case):
    """A budget case's MLPScratch, in its dtype ("float32", "float64", "float16" or "bfloat16")."""
    (num_inputs, num_outputs, num_hiddens), dtype, _, _ = case
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return MLPScratch(num_inputs, num_outputs, list(num_hiddens), lr=0.1).to(
            getattr(torch, dtype))


def _budget_name(case) -> str:
    (num_inputs, num_outputs, num_hiddens), dtype, n, optimizer = case
    kind = {"float32": "", "float64": ".double()", "float16": ".half()",
            "bfloat16": ".bfloat16()"}[dtype]
    return (f"training_memory_budget(MLPScratch({num_inputs}, {num_outputs}, "
            f"{list(num_hiddens)}){kind}, {n}"
            + (", optimizer left out)" if optimizer is None else f", {optimizer!r})"))


def _probe_budget(fn, cases):
    budgets = []
    for case in cases["budgets"]:
        model, n, optimizer = budget_model(case), case[2], case[3]
        with torch.no_grad():
            budgets.append(outcome(fn, model, n) if optimizer is None
                           else outcome(fn, model, n, optimizer))
    small = budget_model(((4, 2, [3]), "float32", 4, None))
    return {"budgets": budgets, "raised": [raised(fn, small, 4, bad) for bad in cases["bad"]]}


def _budget_mistakes(case, right) -> dict:
    """{key: [(description, wrong value)]} for common mistakes, around the measured values
    `right`."""
    (D, q, hiddens), dtype, n, optimizer = case
    e = torch.finfo(getattr(torch, dtype)).bits // 8
    hidden, k, P = sum(hiddens), 2 * (len(hiddens) + 1), right["parameters"]
    bias_bytes = e * (hidden + q)
    dtype_words = ("the element size comes from the parameters' dtype: p.element_size() is 2 for "
                   "float16 and bfloat16, 4 for float32, 8 for float64")
    others = [s for s in (2, 4, 8) if s != e]
    params = [("the biases are missing: count every parameter, weights and biases",
               P - bias_bytes)] \
        + [(dtype_words, P * s // e) for s in others]
    default = "the optimizer was left out, so it is the default 'sgd', which keeps no state"
    state = {"sgd": [("plain SGD (no momentum) keeps no state: optimizer.state stays empty", P)],
             None: [(default, P), (default, 2 * P + 4 * k), (default, 2 * P)],
             "momentum": [("SGD with momentum keeps one momentum_buffer per parameter, "
                           "shaped like it", 0)],
             "adam": [("Adam also keeps a step counter per parameter tensor: a 0-dim float32 "
                       "tensor, 4 bytes each", 2 * P),
                      ("Adam keeps two buffers per parameter (exp_avg and exp_avg_sq), not one",
                       P + 4 * k),
                      ("Adam keeps two buffers per parameter (exp_avg and exp_avg_sq) plus a "
                       "step counter each", P)]}[optimizer]
    if optimizer == "adam" and e != 4:
        state.append(("Adam's step counters are float32 (4 bytes) whatever the parameters' dtype",
                      2 * P + e * k))
    act = right["activations"]
    acts = [("the hidden layers were counted twice: relu saves its output H_i and the next "
             "matmul saves the same H_i as its input, one storage counted once (the "
             "pre-activation Z_i is not saved)", act + e * n * hidden),
            ("the input X is missing: the first layer's matmul saves its input X to compute "
             "dJ/dW_1 = X^T G_1", act - e * n * D),
            ("the log-softmax output is missing: the cross entropy saves it, n x q elements",
             act - e * n * q),
            ("the log-softmax output was counted twice: LogSoftmaxBackward0 and NllLossBackward0 "
             "save one storage", act + e * n * q),
            ("the labels y and the 0-dim total_weight are missing: the cross entropy saves "
             "them too", act - 8 * n - e),
            ("total_weight is missing: NllLossBackward0 also saves a 0-dim tensor of "
             "the model's dtype", act - e),
            ("the labels y are missing: NllLossBackward0 saves them, int64, 8 bytes per example",
             act - 8 * n)] \
        + [(dtype_words, s * n * (D + hidden + q) + 8 * n + s) for s in others]
    if e != 8:
        acts.append(("the labels y are int64, 8 bytes each, whatever the model's dtype",
                     act - 8 * n + e * n))
    return {"parameters": params, "optimizer_state": state, "activations": acts,
            "gradients": params
            + [("there is one gradient per parameter, same shape and dtype", 0)]}


def _judge_budget(got, want, cases):
    assert type(got) is dict and set(got) == {"budgets", "raised"}, MALFORMED
    for case, right, spec in zip(results(got["budgets"], cases["budgets"],
                                         "training_memory_budget"), want, cases["budgets"]):
        name = _budget_name(spec)
        budget = value_of(case, name)
        assert type(budget) is dict, f"{name} should return a dict, got {type(budget).__name__}"
        assert set(budget) == set(right), (f"{name} should have the keys {sorted(right)}, got "
                                           f"{sorted(budget)}")
        for key, value in budget.items():
            assert type(value) is int, (f"{name}[{key!r}] should be a Python int of bytes, got "
                                        f"{type(value).__name__} {value!r}")
        mistakes = _budget_mistakes(spec, right)
        for key in ["parameters", "gradients", "optimizer_state", "activations"]:
            if budget[key] != right[key]:
                known = next((d for d, v in mistakes[key] if v == budget[key]), None)
                msg = f"{name}[{key!r}] is {budget[key]} bytes, measured {right[key]}"
                raise CheckFailed(f"{msg}: {known}." if known
                                  else f"{msg} ({budget[key] - right[key]:+d} bytes).")
        assert budget["total"] == right["total"], \
            (f"{name}['total'] is {budget['total']}, expected {right['total']}: the sum of the "
             "other four entries")
    for names, bad in zip(results(got["raised"], cases["bad"],
                                  "training_memory_budget with an unknown optimizer"),
                          cases["bad"]):
        check_raised(names, f"training_memory_budget(model, 4, {bad!r})")


MEMORY_BUDGET = Check("training_memory_budget", _probe_budget, _judge_budget)
