"""Lesson 02 (local gradients): the checks of its four exercises, used by the visible and the hidden
tests.

Cases are plain data or the functions that build a test's graphs; `want` is what the right answers
are for those cases (the visible test's literals, or the hidden test's expect()). Each exercise is
graded on its own."""

import math

from course_utils.checks import check_float, check_floats
from course_utils.judging import (Check, MALFORMED, check_raised, name_of, outcome, raised, results,
                                  value_of)

TOL = {"rtol": 1e-9, "atol": 1e-12}


def _shown(v) -> str:
    """A value the learner's process sent, as feedback may show it: numbers, or a type's name."""
    return ("[" + ", ".join(map(_shown, v)) + "]" if type(v) is list else
            repr(v) if type(v) in (int, float) else name_of(type(v).__name__))

# Exercise 1: neuron_grads(w, x) -> (f, dw, dx) of f = sigmoid(w[0] x[0] + ... + w[n]); ValueError
# if len(w) != len(x) + 1. cases: {"neurons": [(w, x)], "bad": [(w, x)]}; want: [(f, dw, dx)] for
# the neurons.

def _neuron_mistakes(w, x, s, dz) -> tuple:
    """z, and {mistake: (dw, dx)}, from s = f and the right df/dz (the bias's gradient)."""
    z = sum(wi * xi for wi, xi in zip(w, x)) + w[-1]
    grads = lambda d: ([xi * d for xi in x] + [d], [wi * d for wi in w[:-1]])
    return z, {
        "the sigmoid's local gradient s(1 - s) is missing: df/dz = s(1 - s) times the "
        "upstream gradient 1": grads(1.0),
        "the sigmoid's local gradient is s(1 - s), not s": grads(s),
        "s(1 - s) must use s = sigmoid(z), the gate's output, not z itself": grads(z * (1 - z)),
        "the mul gates' inputs were not swapped: df/dw_i = x_i * df/dz and df/dx_i = w_i * df/dz":
            ([wi * dz for wi in w[:-1]] + [dz], [xi * dz for xi in x]),
        "the bias is added, so its gradient is df/dz itself (the add gate distributes)":
            (grads(dz)[0][:-1] + [0.0], grads(dz)[1])}

def _probe_neuron(fn, cases):
    # fresh copies: the function may change them
    copies = [(list(w), list(x)) for w, x in cases["neurons"]]
    return {"runs": [outcome(fn, w, x) | {"w": w, "x": x} for w, x in copies],
            "bad": [raised(fn, list(w), list(x)) for w, x in cases["bad"]]}

def _judge_neuron(got, want, cases):
    assert type(got) is dict and set(got) == {"runs", "bad"}, MALFORMED
    for run, (f, dw, dx), (w, x) in zip(results(got["runs"], cases["neurons"], "neuron_grads"),
                                        want, cases["neurons"]):
        name = f"neuron_grads({w}, {x})"
        result = value_of(run, name)
        assert (run.get("w"), run.get("x")) == (list(w), list(x)), \
            (f"{name} changed its inputs to {_shown(run.get('w'))}, {_shown(run.get('x'))}: leave "
             "w and x as they are")
        assert type(result) is tuple and len(result) == 3, \
            f"{name} should return a tuple (f, dw, dx), got " + name_of(type(result).__name__) + (
                f" of length {len(result)}" if type(result) in (tuple, list) else "")
        z, mistakes = _neuron_mistakes(w, x, f, dw[-1])
        check_float(result[0], f, f"{name}: f", **TOL,
                    mistakes={"f is z, the sum before the sigmoid: apply the sigmoid gate": z})
        for k, (part, mine, right) in enumerate((("dw", result[1], dw), ("dx", result[2], dx))):
            assert type(mine) is list, (f"{name}: {part} should be a list of {len(right)} Python "
                                        f"floats, got {name_of(type(mine).__name__)}")
            assert not (part == "dw" and len(mine) == len(right) - 1), (
                f"{name}: dw has one entry per input and no entry for the bias: it needs "
                f"{len(right)}, df/dz last")
            check_floats(mine, right, f"{name}: {part}",
                         labels=[f"df/{part[1]}{i}" for i in range(len(right))], **TOL,
                         mistakes={m: v[k] for m, v in mistakes.items()}, promised=list)
    for r, (w, x) in zip(results(got["bad"], cases["bad"],
                                 "neuron_grads with sizes that do not fit"), cases["bad"]):
        check_raised(r, f"neuron_grads({w}, {x})")

NEURON_GRADS = Check("neuron_grads", _probe_neuron, _judge_neuron)

# Exercise 2: topological_order(root) -> every node behind root once, each after all of its ._prev.
# cases: [(description, spec) or (description, spec, kind)]: spec {key: [keys of its inputs]}, the
# root last ("x#2": a second node named x); kind: ._prev a "tuple" (default), "list" or "set", or
# "equal" (nodes that say they equal each other).
# want: [the number of nodes of each graph].

class Node:
    """A bare graph node for the tests: a name and ._prev, the nodes it was computed from."""
    def __init__(self, name, prev=()):
        self.name, self._prev = name, prev

class EqualNode(Node):
    """A node that says it equals every other (as tensors and NumPy values can): only `is` tells two
    apart."""
    __eq__ = lambda self, other: True
    __hash__ = lambda self: 0

def graph(spec: dict, kind: str = "tuple") -> list:
    """The nodes of spec, in its order (the root last)."""
    nodes = {}
    for key, inputs in spec.items():
        prev = {"list": list, "set": set}.get(kind, tuple)(nodes[k] for k in inputs)
        nodes[key] = (EqualNode if kind == "equal" else Node)(key.split("#")[0], prev)
    return list(nodes.values())

def _probe_order(fn, cases):
    def listed(nodes):
        order = fn(nodes[-1])
        if type(order) is not list:
            return {"type": type(order).__name__}
        index = {id(n): i for i, n in enumerate(nodes)}
        return {"order": [index.get(id(m), -1) for m in order]}
    return [outcome(listed, graph(*case[1:])) for case in cases]

def _judge_order(got, want, cases):
    for seen, count, (what, spec, *kind) in zip(results(got, cases, "topological_order"), want,
                                                cases):
        keys, names = list(spec), [k.split("#")[0] for k in spec]
        name = f"topological_order({names[-1]}) for {what}"
        seen = value_of(seen, name)
        assert type(seen) is dict and len(keys) == count, MALFORMED
        assert "order" in seen, f"{name} should return a list, got {name_of(seen.get('type'))}" + (
            " (did the function forget to `return`?)" if seen.get("type") == "NoneType" else "")
        order = seen["order"]
        assert type(order) is list and all(type(i) is int and -1 <= i < count for i in order), \
            MALFORMED
        assert -1 not in order, (f"{name} holds {order.count(-1)} objects that are not nodes of "
                                 "the graph: list the nodes")
        for k in sorted(set(order)):
            assert order.count(k) == 1, (f"{name}: node {names[k]} appears {order.count(k)} times; "
                                         "every node must appear once, however many paths lead to "
                                         "it: remember which nodes you have visited")
        missing = ", ".join(names[k] for k in range(count) if k not in order)
        assert not missing, f"{name} misses [{missing}]: " + (
            "these nodes say they are equal (==) to each other, but nodes are the same only if "
            "they are the same object: compare them with `is` or by id(node)"
            if kind == ["equal"] else
            "visit the inputs (._prev) of every node you reach, not only the root's, and include "
            "the root itself")
        where = {k: i for i, k in enumerate(order)}
        edges = [(keys.index(c), keys.index(p)) for p in keys for c in spec[p]]
        listed = "[" + ", ".join(names[i] for i in order) + "]"
        assert not (edges and all(where[c] > where[p] for c, p in edges)), (
            f"{name} is {listed}: the order is reversed. Every node must come after its inputs and "
            "the root last: append a node after visiting its inputs")
        for c, p in edges:
            assert where[c] < where[p], (f"{name} is {listed}: {names[p]} comes before its "
                                         f"input {names[c]}; every node must come after all of "
                                         "its inputs")

TOPOLOGICAL_ORDER = Check("topological_order", _probe_order, _judge_order)

# Exercise 3: the Value's ops and local gradients, each _backward called by hand, twice (the second
# adds as much again).
# cases: [(op, inputs, upstream)]: op a Python expression of x (and y), inputs the data of the
# Values x (and y); want: [(out.data, the inputs' .grad after out._backward() with out.grad =
# upstream)]: None and None for ops made of others.

def make_op(op: str):
    """The function of one or two Values (x, y) that op, a Python expression such as "x * y" or
    "x.relu()", computes."""
    return eval(f"lambda {'x, y' if 'y' in op else 'x'}: {op}")  # the test's own op strings

NO_UPSTREAM = ("the upstream gradient out.grad was not multiplied in: _backward adds out.grad * "
               "(local gradient)")
OVERWRITE = ("_backward overwrote the input's .grad instead of adding to it: write x.grad += ..., "
             "not x.grad = ...; a Value used twice (a fork) must collect a gradient from each use")

def _op_mistakes(op, xs, up, right) -> dict:
    """{mistake: the inputs' .grad it gives}; right: the right grads (to take the upstream factor
    out)."""
    x, t = xs[0], math.tanh(xs[0])
    if op == "x * y":
        return {"mul's inputs were not swapped: x's local gradient is y, and y's is x":
                    (x * up, xs[1] * up),
                NO_UPSTREAM: (xs[1], x)}
    if op == "x * x":
        return {"x * x gave d/dx = x, one use's share only: use += so that both uses of x "
                "add theirs (2x)": (x * up,)}
    found = {NO_UPSTREAM: (right[0] / up,)} if right[0] != 0 and up not in (0, 1) else {}
    n = float(op[5:]) if op.startswith("x ** ") else 0
    return found | {
        "x ** ": {"the local gradient of x**n is n * x**(n - 1): the exponent n - 1 is wrong":
                      (n * x ** n * up,),
                  "the local gradient of x**n is n * x**(n - 1): the factor n is missing":
                      (x ** (n - 1) * up,)} if x > 0 else {},
        "x.exp": {"exp's local gradient is exp(x), the output itself (out.data), not x": (x * up,)},
        "x.tan": {"tanh's local gradient is 1 - t**2 with t = tanh(x), not 1 - t": ((1 - t) * up,),
                  "tanh's local gradient is 1 - t**2 with t = tanh(x), the output, not 1 - x**2":
                      ((1 - x * x) * up,),
                  "tanh's local gradient is 1 - t**2, not t**2 - 1: the sign is flipped":
                      ((t * t - 1) * up,)},
        "x.rel": {"relu's local gradient is 1 where x > 0, not x": (x * up,)} if x > 0 else
                 {"relu's local gradient at exactly x = 0 is 0, as torch's relu: pass the gradient "
                  "only where x > 0" if x == 0 else
                  "relu passes no gradient where x <= 0: its local gradient there is 0": (up,)},
    }.get(op[:5], {})

def _probe_ops(V, cases):
    def forward(xs, op):
        out = make_op(op)(*xs)
        if type(out) is not V:
            return {"type": type(out).__name__}, out
        prev = out._prev if type(out._prev) is tuple else type(out._prev).__name__
        return {"is_input": any(out is x for x in xs), "data": out.data,
                "op": type(out._op).__name__, "prev": prev if type(prev) is str
                else [next((i for i, x in enumerate(xs) if p is x), -1) for p in prev]}, out

    def twice(xs, out, up):  # the inputs' grads after one _backward(), then after a second
        out.grad = up
        grads = []
        for _ in range(2):
            out._backward()
            grads.append([x.grad for x in xs])
        return grads

    seen = []
    for op, inputs, up in cases:
        made = outcome(forward, xs := [V(v) for v in inputs], op)
        seen.append({"raised": made["raised"]} if "raised" in made else {"value": made["value"][0]})
        if up is not None and "value" in made and "data" in made["value"][0]:
            seen[-1]["backward"] = outcome(twice, xs, made["value"][1], up)
    return seen

def _judge_ops(got, want, cases):
    for seen, (data, right), (op, inputs, up) in zip(results(got, cases, "the Value ops"), want,
                                                     cases):
        name = f"{op} at {', '.join(f'{v} = {d}' for v, d in zip('xy', inputs))}"
        out = value_of(seen, name)
        assert type(out) is dict, MALFORMED
        assert "data" in out, \
            f"{name} should return a new Value, got {name_of(out.get('type'))}" + (
                " (did it forget to `return out`?)" if out.get("type") == "NoneType" else "")
        assert out.get("is_input") is False, (f"{name} returned its input itself; it must "
                                              "return a new Value")
        assert type(out["data"]) is float, (f"({name}).data should be a Python float, got "
                                            f"{name_of(type(out['data']).__name__)}")
        assert out.get("op") == "str", (f"({name})._op should be a str naming the op, got "
                                        f"{name_of(out.get('op'))}")
        check_float(out["data"], data, f"({name}).data, the forward value", rtol=1e-12, atol=1e-15)
        if right is None:  # made of other ops: only .data is checked
            continue
        prev = out.get("prev")
        assert type(prev) is list and prev[:1] == [0] and set(range(len(inputs))) <= set(prev), (
            f"({name})._prev should be a tuple of the Values it was computed from, x first "
            "(x * y: (x, y)), got "
            + (f"a tuple of {len(prev)} entries, other than expected" if type(prev) is list
               else f"a {name_of(prev)}"))
        backward = seen.get("backward")
        assert not (type(backward) is dict and "ZeroDivisionError" in (backward.get("raised") or ())
                    and 0 in inputs), (
            f"({name})._backward() raised ZeroDivisionError: its local gradient divides by an "
            "input that is 0 here (such as n * out.data / x for x ** n, or out.data / x for "
            "x * y); write it without dividing by an input")
        grads = value_of(backward, f"({name})._backward()")
        assert type(grads) is list and len(grads) == 2 and all(type(g) is list for g in grads), \
            MALFORMED
        labels = [f"{v}.grad" for v in "xy"[:len(right)]]
        for g, label in zip(grads[0] + grads[1], labels * 2):
            assert type(g) is float, (f"{label} should stay a Python float, got "
                                      f"{name_of(type(g).__name__)}")
        check_floats(grads[0], right,
                     f"{', '.join(labels)} after ({name})._backward() with out.grad = {up}",
                     labels=labels, rtol=1e-12, atol=1e-15,
                     mistakes=_op_mistakes(op, inputs, up, right))
        for g, r, label in zip(grads[1], right, labels):
            check_float(g, 2 * r, f"{label} after calling ({name})._backward() a second time",
                        rtol=1e-12, atol=1e-15, mistakes={OVERWRITE: r})

VALUE_OPS = Check("Value", _probe_ops, _judge_ops)

# Exercise 4: backward(root): every .grad behind root reset to 0.0, root.grad = 1.0, then each
# _backward once in reversed(topological_order(root)). cases: {"Value": the Value class, "order":
# the topological_order to run with, "graphs": [(description, fn, inputs)]}: fn(*Values of inputs)
# gives the root, or (root, earlier) when backward(earlier) runs first; want: [the inputs'
# gradients]. The hidden test names reference versions of exercises 2 and 3.

RECURSION = ("a node passed its gradient on once per path that reaches it (a recursive walk "
             "without a topological order). Call each node's _backward exactly once, walking "
             "reversed(topological_order(root))")
PREORDER = ("a node passed its gradient on before every use of it had added its share (each node "
            "visited once, but in a depth-first walk from the root). Walk "
            "reversed(topological_order(root)): each node after all its users")
INPUTS_FIRST = ("the _backward functions ran inputs first: walk the topological order in reverse "
                "(root first), so that each node's gradient is complete before it is passed on")

def _preorder(node, again: bool, seen: set):
    """The nodes from node down, depth first, each once (again: once per path, as a recursive walk
    calls them)."""
    if again or id(node) not in seen:
        seen.add(id(node))
        yield node
        for child in node._prev:
            yield from _preorder(child, again, seen)

def _replays(V, order, fn, inputs) -> dict:
    """{walk: the inputs' gradients}: "right" (backward()'s walk), then the wrong walks, with the
    cases' Value and order."""
    found = {}
    for how in ("right", RECURSION, PREORDER, INPUTS_FIRST):
        try:
            made = fn(*(xs := [V(v) for v in inputs]))
            if type(made) is tuple:  # (root, earlier): no replays
                return {"right": None}
            root, root.grad = made, 1.0
            walk = {RECURSION: _preorder(root, True, set()),
                    PREORDER: _preorder(root, False, set()),
                    INPUTS_FIRST: iter(order(root))}.get(how) or reversed(order(root))
            for k, n in enumerate(walk):
                if k > 20000:
                    raise RecursionError("too many paths")
                n._backward()
            found[how] = tuple(float(x.grad) for x in xs)
        except Exception:  # a walk that blows up names no mistake
            pass
    return found

def _probe_backward(fn, cases):
    names = getattr(fn, "__globals__", {})
    saved = {k: names.pop(k) for k in ("Value", "topological_order") if k in names}
    # the versions the cases name
    names.update({"Value": cases["Value"], "topological_order": cases["order"]})
    try:  # the learner's backward() runs with them, its answers to exercises 2 and 3 put back after
        return [outcome(_twice, fn, cases["Value"], *graph[1:]) for graph in cases["graphs"]]
    finally:
        names.pop("Value", None), names.pop("topological_order", None), names.update(saved)

def _twice(backward, V, fn, inputs) -> dict:
    """backward() on the graph of fn, twice: root.grad and the inputs' gradients after each."""
    made = fn(*(xs := [V(v) for v in inputs]))
    root, earlier = made if type(made) is tuple else (made, None)
    backward(earlier) if earlier is not None else None
    returned = backward(root)
    seen = {"root": root.grad, "first": [x.grad for x in xs], "returned": type(returned).__name__}
    backward(root)
    return seen | {"second": [x.grad for x in xs]}

def _judge_backward(got, want, cases):
    for seen, right, (what, fn, inputs) in zip(results(got, cases["graphs"], "backward"), want,
                                               cases["graphs"]):
        walks = _replays(cases["Value"], cases["order"], fn, inputs)
        mine = walks.pop("right", ())
        hint = "" if mine is None or len(mine) == len(right) and all(
            math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) for a, b in zip(mine, right)) else (
            " (Note: with this Value and topological_order, even the walk backward() should do "
            "does not give these gradients: make exercises 2 and 3 pass first, backward() "
            "relies on them.)")
        try:
            _judge_graph(seen, right, what, {} if hint else walks)
        except AssertionError as err:
            raise AssertionError(str(err) + hint) from err.__cause__

def _judge_graph(seen, right, what, mistakes):
    seen = value_of(seen, f"building {what} and calling backward() on it")
    assert type(seen) is dict and {"root", "first", "second"} <= set(seen), MALFORMED
    root, first, second = seen["root"], seen["first"], seen["second"]
    assert type(root) is float, (f"{what}: root.grad should be a Python float, got "
                                 f"{name_of(type(root).__name__)}")
    assert root == 1.0, (f"{what}: after backward, the root's gradient is {root}, expected 1.0: "
                         "backward() must set root.grad = 1.0 (d root / d root) after resetting "
                         "the gradients and before calling the _backward functions")
    assert type(first) is list and type(second) is list and len(second) == len(first), MALFORMED
    check_floats(first, right, f"the gradients of {what}",
                 labels=[f"d/dv{i}" for i in range(len(right))], **TOL, mistakes=mistakes)
    assert all(math.isclose(p, q, rel_tol=1e-12, abs_tol=1e-15) for p, q in zip(first, second)), (
        f"{what}: a second backward() gave different gradients, {tuple(first)} the first time and "
        f"{tuple(second)} the second: set every .grad in the graph to 0.0 before seeding the root, "
        "so that one backward() does not add to it")
    assert seen.get("returned") == "NoneType", (
        f"{what}: backward(root) returned an object of type "
        f"{name_of(seen.get('returned'))}; the docstring says it returns None (it fills in "
        "the .grad of the Values and gives nothing back)")

BACKWARD = Check("backward", _probe_backward, _judge_backward)
