"""Lesson 03 (pytorch-autograd): the checks of its four exercises, used by the visible and the
hidden tests.

Cases hold what the learner's code is called on (graphs, sizes, models, tensors), each with the text
that names it in messages, and the calls that must raise ValueError; `want` holds the right answers
(the visible test's values, or the hidden test's expect()). Known wrong answers, which name a
mistake, are computed here from the cases; a wrong value that two mistakes share names neither.
"""

from collections import deque

import torch
import torch.nn.functional as F

from course_utils.checks import check_floats, check_tensor
from course_utils.graph import next_node_number
from course_utils.judging import (Check, MALFORMED, name_of, outcome, raised, raised_name, results,
                                  value_of)

# predict_saved's "predict, don't measure" is watched in the probe's thread alone (saved-tensor
# hooks and autograd's node numbers are per thread): its test is refused while a thread from an
# earlier cell runs (course_utils.grader.lessonfile.judged_in_one_thread).
JUDGED_IN_ONE_THREAD = ("l03_predict_saved",)


def _parts(got, keys) -> dict:
    assert type(got) is dict and set(got) == set(keys), MALFORMED
    return got

def _value(seen, name: str):  # value_of() on a probe's result that carries other keys too
    assert type(seen) is dict, MALFORMED
    return value_of({k: v for k, v in seen.items() if k in ("value", "raised")}, name)

def _named(pairs, same) -> dict:  # {description: wrong value}, without values two mistakes share
    return {d: v for d, v in pairs if not any(e != d and same(v, w) for e, w in pairs)}

def _refused(r, name: str, why: str) -> None:  # r: raised()'s result for the call `name`
    if not (type(r) is tuple and "ValueError" in r):  # a subclass counts
        did = "returned normally" if r is None else f"raised {raised_name(r)}"
        raise AssertionError(f"{name} {did}, expected it to raise ValueError: {why}")

def _mro(e) -> tuple:
    return tuple(c.__name__ for c in type(e).__mro__)

def _says(e, text: str) -> bool:  # whether str(e) holds text (False where str() itself fails)
    try:
        return text in str(e)
    except Exception:  # an exception whose str() fails says nothing more
        return False

def _kind(v) -> str:  # the type a probe described as {"type": name, ...}
    return name_of(v.get("type")) if type(v) is dict else "object"


# Exercise 1: bfs_nodes(t) -> the class names of t's graph, breadth-first, each node once;
# ValueError for a tensor without a grad_fn. cases: {"graphs": [(what, t)], "no_graph":
# [(what, t)]}; want: [the names, as [n.name for n in walk(t)] gives them] for the graphs.
def _order(root, newest=False, key=lambda n: n, reverse=False, once=True, on_pop=False,
           stop_at_none=False) -> list:
    # a mistake's traversal: a stack (newest), nodes told apart by key, children reversed, each
    # listed as often as reached (once=False), marked seen when taken (on_pop), a node's children
    # after its first None entry left out (stop_at_none)
    seen, names, todo = set() if on_pop else {key(root)}, [], deque([root])
    while todo and len(names) < 100000:
        node = todo.pop() if newest else todo.popleft()
        if on_pop and key(node) in seen:
            continue
        seen.add(key(node))
        names.append(type(node).__name__)
        entries = [c for c, _ in node.next_functions]
        if stop_at_none and None in entries:
            entries = entries[:entries.index(None)]
        kids = [c for c in entries if c is not None]
        for child in kids[::-1] if reverse else kids:
            if on_pop or not once or key(child) not in seen:
                seen.add(key(child)) if not on_pop else None
                todo.append(child)
    return names

def _bfs_mistakes(t) -> dict:
    root, bfs = t.grad_fn, ("breadth-first takes the oldest node from the front of a queue "
                            "(deque.popleft())")
    return _named([
        (f"this is depth-first order (a stack: pop() takes the newest node); {bfs}",
         _order(root, newest=True)),
        (f"this is depth-first order (recursion goes deep before wide); {bfs}",
         _order(root, newest=True, reverse=True, on_pop=True)),
        ("a node reached twice was listed twice: remember the nodes already seen and list "
         "each node once",
         _order(root, once=False)),
        ("nodes were told apart by name: different nodes of one class (several AccumulateGrad) "
         "must all be listed; keep the nodes themselves in the seen set",
         _order(root, key=lambda n: type(n).__name__)),
        ("the children of each node were taken in reverse order: take them in next_functions order",
         _order(root, reverse=True)),
        ("the children listed after a None entry of next_functions were left out (a break "
         "where a continue belongs): None stands for an input that needs no gradient; skip that "
         "entry alone",
         _order(root, stop_at_none=True))], lambda a, b: a == b)

def _bfs_seen(fn, t) -> dict:
    try:
        names = fn(t)
    except NotImplementedError:
        raise
    except Exception as e:  # what was raised is the observation
        return {"raised": _mro(e),
                "on_none": isinstance(e, AttributeError) and _says(e, "NoneType")}
    if type(names) is not list:
        return {"value": {"type": type(names).__name__, "none": names is None}}
    node = torch.autograd.graph.Node
    return {"value": [v if type(v) is str
                      else {"type": type(v).__name__, "node": isinstance(v, node)}
                      for v in names[:100000]]}

def _probe_bfs(fn, cases):
    return {"graphs": [_bfs_seen(fn, t) for _, t in cases["graphs"]],
            "no_graph": [raised(fn, t) for _, t in cases["no_graph"]]}

def _judge_bfs(got, want, cases):
    got = _parts(got, ("graphs", "no_graph"))
    for seen, expected, (what, t) in zip(results(got["graphs"], cases["graphs"], "bfs_nodes"), want,
                                         cases["graphs"]):
        name = f"bfs_nodes({what})"
        if type(seen) is dict and seen.get("on_none") is True:
            raise AssertionError(f"{name} raised AttributeError on None: next_functions holds None "
                                 "for an input that needs no gradient; skip those entries")
        actual = _value(seen, name)
        if type(actual) is not list:
            hint = (" (did the function forget to `return`?)"
                    if type(actual) is dict and actual.get("none") is True else "")
            raise AssertionError(f"{name} should return a list of str, got {_kind(actual)}{hint}")
        for i, v in enumerate(actual):
            if type(v) is not str:
                hint = (": list type(node).__name__, not the node"
                        if type(v) is dict and v.get("node") is True else "")
                raise AssertionError(f"{name}[{i}] should be a str, got {_kind(v)}{hint}")
        if actual == expected:
            continue
        # the names as feedback may show them: text that is not a node's class name is not repeated
        shown = [v if len(v) <= 60
                 and all(ch.isascii() and (ch.isalnum() or ch in "_:") for ch in v)
                 else f"<a str of {len(v)} characters>" for v in actual[:12]]
        shown += [f"... {len(actual) - 12} more"] if len(actual) > 12 else []
        if any(v.startswith("torch::autograd::") for v in actual):
            why = "node.name() gives 'torch::autograd::AccumulateGrad'; use type(node).__name__"
        else:
            why = next((d for d, wrong in _bfs_mistakes(t).items() if actual == wrong), None)
            if why is None and sorted(actual) == sorted(expected):
                why = ("the right nodes in another order; go breadth-first, children in "
                       "next_functions order")
        raise AssertionError(f"{name} is wrong{': ' + why if why else ''}. It gave {shown}, "
                             f"expected {expected}")
    for r, (what, _) in zip(results(got["no_graph"], cases["no_graph"], "bfs_nodes"),
                            cases["no_graph"]):
        _refused(r, f"bfs_nodes({what})",
                 "a tensor without a grad_fn has no graph below it (walk() refuses it too)")

BFS_NODES = Check("bfs_nodes", _probe_bfs, _judge_bfs)


# Exercise 2: predict_saved(n, d, h, o, dtype=torch.float32, x_requires_grad=False) -> (num_saved,
# saved_bytes, activation_bytes), Python ints, from the sizes alone; ValueError for a size below 1.
# cases: {"sizes": [(n, d, h, o) or (n, d, h, o, dtype, x_requires_grad)], "bad": [the same]};
# want: [the three numbers] for the sizes. A case too large to build (X of 2**48 bytes or more)
# shows a measurement by the memory it cannot get; any graph built shows in autograd's node count.
LABELS = ("num_saved", "saved_bytes", "activation_bytes")

def _full(case) -> tuple:
    return tuple(case) + (torch.float32, False)[len(case) - 4:]

def _x_bytes(case) -> int:
    n, d, _, _, dtype, _ = _full(case)
    return n * d * torch.empty(0, dtype=dtype).element_size()

def _power(k: int) -> str:
    """k as feedback writes a size: 2**44 or 3**33 for a large power of 2 or 3, else its digits."""
    for base in (2, 3):
        p, rest = 0, k
        while k >= 2 ** 20 and rest % base == 0:
            p, rest = p + 1, rest // base
        if rest == 1 and p:
            return f"{base}**{p}"
    return str(k)

def _saved_call(case) -> str:
    sizes = ", ".join(_power(k) for k in case[:4])
    return (f"predict_saved({sizes}{''.join(f', {v}' for v in case[4:5])}"
            f"{''.join(f', x_requires_grad={v}' for v in case[5:])})")

def _saved_mistakes(case, right) -> dict:
    n, d, h, o, dtype, x_requires_grad = _full(case)
    e = torch.empty(0, dtype=dtype).element_size()
    X_, W1, T, W2, D = (k * e for k in (n * d, d * h, n * h, h * o, n * o))
    c, s, a = right
    found = [("Linear 1 does not save its weight here: addmm keeps W1.T only to compute the "
              "gradient of its input, and X needs none", (c + 1, s + W1, a)),
             ("X is missing: Linear 1 saves its input (for W1's gradient, G^T X) even when X needs "
              "no gradient, and X is then an activation",
              (c - 1, s - X_, a - X_))] if not x_requires_grad else [
             ("X requires grad, so it is a leaf: its memory exists anyway, and "
              "activation_bytes leaves it out",
              (c, s, a + X_)),
             ("Linear 1 also saves W1.T when X requires grad (to compute X's gradient, G W1)",
              (c - 1, s - W1, a))]
    found += [("the tanh output was counted twice: TanhBackward0 and Linear 2 save the same "
               "storage, and the bytes count each storage once", (c, s + T, a + T)),
              ("W2 was left out of saved_bytes: Linear 2 saves W2.T, a view of the weight (a leaf: "
               "in saved_bytes, not in activation_bytes)", (c - 1, s - W2, a)),
              ("num_saved counts a tensor once per node that saves it: the tanh output is saved by "
               "two nodes, TanhBackward0 and Linear 2", (c - 1, s, a)),
              ("a weight was counted as an activation: parameters are leaves, left out of "
               "activation_bytes",
               (c, s, a + W2)),
              ("y was counted: SubBackward0 saves no tensor, and the square saves only the "
               "difference net(X) - y",
               (c + 1, s + D, a + D))]
    found += ([(f"the bytes assume 4 per element: {dtype} takes {e}", (c, s * 4 // e, a * 4 // e))]
              if e != 4 else [])
    return _named(found, lambda x, y: x == y)


def _saved_seen(fn, case) -> dict:
    """predict_saved's outcome, and what shows a graph built to measure: tensors saved under the
    test's hooks ("packed") and autograd nodes made in this thread ("nodes")."""
    packed, first = [], next_node_number()
    try:
        with torch.autograd.graph.saved_tensors_hooks(lambda t: packed.append(1) or t, lambda t: t):
            seen = {"value": fn(*case)}
    except NotImplementedError:
        raise
    except Exception as e:  # what was raised is the observation
        seen = {"raised": _mro(e), "memory": isinstance(e, MemoryError) or _says(e, "allocate")}
    return {**seen, "packed": len(packed), "nodes": next_node_number() - first - 1}

def _probe_saved(fn, cases):
    return {part: [_saved_seen(fn, case) for case in cases[part]] for part in ("sizes", "bad")}

def _not_measured(seen, what: str, case) -> dict:
    assert (type(seen) is dict and type(seen.get("packed")) is int
            and type(seen.get("nodes")) is int), MALFORMED
    if seen["packed"] or seen["nodes"]:
        raise AssertionError(f"{what} built a graph ({seen['nodes']} autograd nodes were made, "
                             f"{seen['packed']} tensors saved under the test's hooks): it measured "
                             "instead of predicting; predict the numbers from the sizes "
                             "instead of measuring them")
    if "raised" in seen and seen.get("memory") is True and _x_bytes(case) >= 2 ** 48:
        raise AssertionError(f"{what} ran out of memory ({raised_name(seen['raised'])}): it "
                             "measured instead of predicting: a graph of this size cannot be built "
                             f"(X alone would take {_x_bytes(case) // 2 ** 50} PiB); compute the "
                             "three numbers from the sizes with arithmetic")
    return {k: v for k, v in seen.items() if k in ("value", "raised")}

def _judge_saved(got, want, cases):
    got = _parts(got, ("sizes", "bad"))
    for seen, right, case in zip(results(got["sizes"], cases["sizes"], "predict_saved"), want,
                                 cases["sizes"]):
        what = _saved_call(case)
        result = value_of(_not_measured(seen, what, case), what)
        if type(result) is not tuple or len(result) != 3:
            raise AssertionError(f"{what} should be a tuple of three ints (num_saved, saved_bytes, "
                                 f"activation_bytes), got {name_of(type(result).__name__)}"
                                 + (f" of length {len(result)}" if type(result) in (tuple, list)
                                    else ""))
        for label, v in zip(LABELS, result):
            if type(v) is not int:
                raise AssertionError(f"{what}: {label} should be a Python int, got "
                                     f"{name_of(type(v).__name__)}"
                                     + (" (use int(...) or //)" if type(v) is float else ""))
        if result != tuple(right):
            mistakes = _saved_mistakes(case, right)
            # floats tell these ints apart: check_floats names a mistake or the difference
            if max(right) < 2 ** 53:
                check_floats(result, right, what, rtol=0, atol=0, labels=LABELS, mistakes=mistakes)
            why = next((d for d, wrong in mistakes.items() if tuple(wrong) == result), None)
            if why is not None:
                raise AssertionError(f"{what}: {why}")
            # a few roundings of a float
            rounded = all(abs(v - w) <= w * 2 ** -48 for v, w in zip(result, right))
            raise AssertionError(f"{what}: " + "; ".join(
                f"{label} is {v - w:+d} from the right value"
                for label, v, w in zip(LABELS, result, right) if v != w)
                + ("; these numbers are past 2**53, where a float cannot hold every int: a float "
                   "on the way (/, finfo(dtype).bits / 8, math.prod of floats) rounded them; count "
                   "bytes in ints (element_size(), *, //)" if rounded else ""))
    for seen, case in zip(results(got["bad"], cases["bad"], "predict_saved"), cases["bad"]):
        what = _saved_call(case)
        _refused(_not_measured(seen, what, case).get("raised"), what,
                 "a size below 1 makes no network to predict")

PREDICT_SAVED = Check("predict_saved", _probe_saved, _judge_saved)


# Exercise 3: loss_with_weight_decay(model, X, y, lam) -> a 0-dim tensor with a grad_fn; ValueError
# for lam < 0. cases: {"models": [(what, model, X, y, lam)], "bad": [the same]}; want: [(the loss,
# [its gradient on each parameter of model.parameters()])] for the models.
NO_GRADIENT = ("the penalty was computed through .item() (or under no_grad/detach): it adds a "
               "constant with no gradient")

def _close(rtol, atol):
    return lambda a, b: a.shape == b.shape and torch.allclose(a, b.to(a.dtype), rtol=rtol,
                                                              atol=atol)

def _decay_mistakes(model, X, y, lam, close) -> dict:
    with torch.no_grad():
        data, params = F.mse_loss(model(X), y), dict(model.named_parameters())

        def decayed(keep, square=True):
            return sum(((p ** 2).sum() if square else p.norm()) for k, p in params.items()
                       if keep(k, p))
        weights = decayed(lambda k, p: k.endswith("weight"))
        return _named([
            ("the biases were decayed too: the penalty covers the weights only (names "
             "ending in 'weight')",
             data + lam / 2 * decayed(lambda k, p: True)),
            ("a parameter whose name only contains 'weight' was decayed: decay the names that "
             "end in 'weight'",
             data + lam / 2 * decayed(lambda k, p: "weight" in k)),
            ("only the weight matrices were decayed: every parameter whose name ends in 'weight' "
             "is, 1-D ones too",
             data + lam / 2 * decayed(lambda k, p: k.endswith("weight") and p.dim() > 1)),
            ("the penalty is lam / 2 times the squared norms, not lam times", data + lam * weights),
            ("the norms were not squared: the penalty is lam / 2 * ||W||^2",
             data + lam / 2 * decayed(lambda k, p: k.endswith("weight"), square=False)),
            ("the penalty is missing", data + 0 * weights)], close)

def _decay_seen(fn, model, X, y, lam) -> dict:
    seen = outcome(fn, model, X, y, lam)
    if "raised" in seen:
        return seen
    loss, params = seen["value"], [p for p in model.parameters() if p.requires_grad]
    seen["value"] = {"type": type(loss).__name__, "float": isinstance(loss, float)}
    if type(loss) is torch.Tensor:
        seen["value"].update(shape=tuple(loss.shape), requires_grad=loss.requires_grad,
                             loss=loss.detach().clone())
        if loss.dim() == 0 and loss.requires_grad:
            seen["grads"] = outcome(lambda: [None if g is None else g.detach().clone()
                                             for g in torch.autograd.grad(loss, params,
                                                                          allow_unused=True)])
    return seen

def _probe_decay(fn, cases):
    return {"models": [_decay_seen(fn, *case[1:]) for case in cases["models"]],
            "bad": [raised(fn, *case[1:]) for case in cases["bad"]]}

def _judge_decay(got, want, cases):
    got = _parts(got, ("models", "bad"))
    for seen, (value, grads), (what, model, X, y, lam) in zip(
            results(got["models"], cases["models"], "loss_with_weight_decay"), want,
            cases["models"]):
        name = f"loss_with_weight_decay({what})"
        loss = _value(seen, name)
        assert type(loss) is dict, MALFORMED
        if loss.get("type") != "Tensor" or "loss" not in loss:
            hint = (": .item() turns the loss into a number with no graph"
                    if loss.get("float") is True else "")
            raise AssertionError(f"{name} should return a torch.Tensor, got "
                                 f"{name_of(loss.get('type'))}{hint}")
        if loss.get("shape") != ():
            raise AssertionError(f"{name} should be a 0-dim tensor (one number), got shape "
                                 f"{loss.get('shape')}")
        if loss.get("requires_grad") is not True:
            raise AssertionError(f"{name} does not require grad: the whole loss was computed under "
                                 "no_grad or detached, so no gradient reaches the weights")
        rtol, atol = (1e-10, 1e-12) if value.dtype == torch.float64 else (1e-5, 1e-6)
        check_tensor(loss["loss"], value, f"the value of {name}", rtol=rtol, atol=atol,
                     mistakes=_decay_mistakes(model, X, y, lam, _close(rtol, atol)))
        got_grads = value_of(seen.get("grads"), f"torch.autograd.grad of the loss of {name}")
        params = {k: p for k, p in model.named_parameters() if p.requires_grad}
        assert type(got_grads) is list and len(got_grads) == len(params) == len(grads), MALFORMED
        data_only = torch.autograd.grad(F.mse_loss(model(X), y), list(params.values()),
                                        allow_unused=True)
        rtol, atol = rtol * 100, atol * 100
        for k, g, r, g0 in zip(params, got_grads, grads, data_only):
            g0 = torch.zeros_like(r) if g0 is None else g0
            check_tensor(torch.zeros_like(r) if g is None else g, r,
                         f"the gradient of {name} with respect to {k}",
                         rtol=rtol, atol=atol,
                         mistakes={} if _close(rtol, atol)(g0, r) else {NO_GRADIENT: g0})
    for r, case in zip(results(got["bad"], cases["bad"], "loss_with_weight_decay"), cases["bad"]):
        _refused(r, f"loss_with_weight_decay({case[0]})",
                 "a negative lam would make the weights grow")

WEIGHT_DECAY = Check("loss_with_weight_decay", _probe_decay, _judge_decay)


# Exercise 4: MulFunction, a * b with a hand-written backward; ValueError for shapes that differ.
# cases: {"pairs": [(what, a, b, upstream, gradcheck)], "bad": [(what, a, b)]}; want: [{"out": a *
# b, "grads": [the gradient on each input that requires grad: a, then b unless b is a]}] for the
# pairs. Where gradcheck is True (float64, a and b both require grad), the Jacobian the backward
# gives, one output entry at a time, is compared with the autograd of torch.mul (the oracle the
# lesson teaches).
def _inputs(a, b) -> list:
    return [(label, t, other) for label, t, other in (("a", a, b), ("b", b, a))
            if t.requires_grad and not (label == "b" and b is a)]

def _mul_seen(cls, a, b, upstream, check) -> dict:
    seen = outcome(cls.apply, a, b)
    if "raised" in seen:
        return seen
    out, wanted = seen["value"], [t for _, t, _ in _inputs(a, b)]
    seen["value"] = {"type": type(out).__name__}
    if type(out) is not torch.Tensor:
        return seen
    seen["value"]["out"] = out.detach().clone()
    if wanted:
        node = out.grad_fn
        seen["node"] = type(node).__name__
        seen["saved"] = outcome(lambda: {"count": len(node.saved_tensors), "inputs": sorted(
            s.data_ptr() for s in node.saved_tensors) == sorted([a.data_ptr(), b.data_ptr()])})
        seen["grads"] = outcome(lambda: [None if g is None else g.detach().clone()
                                         for g in torch.autograd.grad(out, wanted, upstream,
                                                                      allow_unused=True)])
    if check:
        seen["gradcheck"] = outcome(torch.autograd.gradcheck, cls.apply, (a, b),
                                    raise_exception=False)

        def rows():
            out = cls.apply(a, b)
            return torch.stack([torch.cat([g.reshape(-1) for g in torch.autograd.grad(
                out, (a, b), e.reshape(out.shape), retain_graph=True)]).detach()
                for e in torch.eye(out.numel(), dtype=out.dtype)])
        seen["jacobian"] = outcome(rows)
    return seen

def _probe_mul(cls, cases):
    return {"pairs": [_mul_seen(cls, a, b, up, check) for _, a, b, up, check in cases["pairs"]],
            "bad": [raised(cls.apply, a, b) for _, a, b in cases["bad"]]}

def _judge_mul(got, want, cases):
    got = _parts(got, ("pairs", "bad"))
    close = _close(1e-5, 1e-8)
    for seen, ref, (what, a, b, upstream, check) in zip(
            results(got["pairs"], cases["pairs"], "MulFunction.apply"), want, cases["pairs"]):
        name = f"MulFunction.apply{what}"
        out = _value(seen, name)
        assert type(out) is dict, MALFORMED
        if out.get("type") != "Tensor":
            raise AssertionError(f"{name} should return a torch.Tensor, got "
                                 f"{name_of(out.get('type'))}")
        check_tensor(out.get("out"), ref["out"], name)
        inputs = _inputs(a, b)
        if inputs:
            if seen.get("node") != "MulFunctionBackward":
                raise AssertionError(f"{name} has grad_fn {name_of(seen.get('node'))}, expected "
                                     "MulFunctionBackward")
            saved = value_of(seen.get("saved"), f"reading {name}.grad_fn.saved_tensors")
            assert type(saved) is dict, MALFORMED
            if saved.get("count") != 2:
                raise AssertionError(f"{name} saved {saved.get('count')} tensors, expected exactly "
                                     "its two inputs a and b: call ctx.save_for_backward(a, b) "
                                     "(not ctx.a = a), and save nothing else")
            if saved.get("inputs") is not True:
                raise AssertionError(f"{name} saved tensors other than its inputs a and b (copies, "
                                     "or the output): save a and b themselves, which the backward "
                                     "needs; saving a tensor allocates nothing, while a copy is a "
                                     "new tensor that the graph keeps alive until the backward")
            grads = value_of(seen.get("grads"), f"the backward of {name}")
            assert type(grads) is list and len(grads) == len(inputs) == len(ref["grads"]), MALFORMED
            for g, r, (label, t, other) in zip(grads, ref["grads"], inputs):
                if g is None:
                    raise AssertionError(f"the backward of {name} returned no gradient (None) for "
                                         f"{label}, which requires grad")
                check_tensor(g, r, f"the gradient on {label} of {name}",
                             mistakes={} if t is other else _named([
                                 (f"the gradients were not swapped: {label}'s gradient is "
                                  "grad_output times the other input",
                                  (upstream * t).detach()),
                                 ("grad_output was not multiplied in: the gradient is grad_output "
                                  "times the other input",
                                  other.detach())], close))
        if check:
            failed = (f"gradcheck(MulFunction.apply, {what}) is False: the backward disagrees with "
                      "finite differences")
            if value_of(seen.get("gradcheck"), f"gradcheck(MulFunction.apply, {what})") is not True:
                raise AssertionError(failed)
            rows = value_of(seen.get("jacobian"),
                            f"the backward of {name}, called once per output entry,")
            oracle = torch.cat([j.reshape(a.numel(), -1)
                                for j in torch.autograd.functional.jacobian(
                                    torch.mul, (a.detach(), b.detach()))], dim=1)
            if not (type(rows) is torch.Tensor and rows.shape == oracle.shape
                    and rows.dtype == oracle.dtype
                    and torch.allclose(rows, oracle, rtol=1e-7, atol=1e-10)):
                raise AssertionError(failed)
    for r, (what, _, _) in zip(results(got["bad"], cases["bad"], "MulFunction.apply"),
                               cases["bad"]):
        _refused(r, f"MulFunction.apply{what}",
                 "a and b must have the same shape (a broadcast product's backward "
                 "would return gradients of the wrong shape)")

MUL_FUNCTION = Check("MulFunction", _probe_mul, _judge_mul)
