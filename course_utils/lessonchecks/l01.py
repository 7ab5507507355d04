"""Lesson 01 (circuits): the checks of its four exercises, used by the visible and the hidden tests.

Cases are plain tuples; `want` is what the right answers are for those cases (the visible test's
literals, or the hidden test's expect()).
"""

from course_utils.checks import check_floats
from course_utils.judging import (Check, MALFORMED, call_name, check_raised, outcome, raised,
                                  results, value_of)

GRAD_LABELS = ("df/dx", "df/dy", "df/dz")
# sums and products of Python floats: float64's rounding, no more
EXACT = {"rtol": 1e-12, "atol": 1e-15}


def _near(a: float, b: float) -> bool:
    """a != b, but close enough that an answer treating them as a tie used a tolerance."""
    return abs(a - b) <= 1e-6 * max(1.0, abs(a), abs(b))




# Exercise 1: circuit_grads(x, y, z) -> (df/dx, df/dy, df/dz) of f = (x + y) z.
# cases: [(x, y, z)]; want: [(df/dx, df/dy, df/dz)]

def _circuit_mistakes(x, y, z) -> dict:
    q = x + y
    return {
        "every sign is flipped; keep the chain rule's signs as they are": (-z, -z, -q),
        "the mul gate's inputs were not swapped: df/dq is the other input z, and df/dz is q":
            (q, q, z),
        "these are the input values, not gradients": (x, y, z),
        "x and y got only the add gate's local gradient 1: multiply it by the upstream "
        "gradient df/dq = z": (1.0, 1.0, q),
        "df/dz was computed from x alone: the mul gate's other input is the add gate's "
        "output q = x + y": (z, z, x),
        "df/dz was computed from y alone: the mul gate's other input is the add gate's "
        "output q = x + y": (z, z, y),
    }


def _judge_circuit_grads(got, want, cases):
    for g, w, (x, y, z) in zip(results(got, cases, "circuit_grads"), want, cases):
        name = call_name("circuit_grads", x, y, z)
        check_floats(value_of(g, name), w, name, labels=GRAD_LABELS,
                     mistakes=_circuit_mistakes(x, y, z), promised=tuple, **EXACT)


CIRCUIT_GRADS = Check("circuit_grads", lambda fn, cases: [outcome(fn, *case) for case in cases],
                      _judge_circuit_grads)


# Exercise 2: numerical_gradient(f, inputs, h=1e-5) -> central differences, inputs left unchanged.
# cases: [(label, f, point, h)], h None for the default step; want: [the exact gradient (h None) or
# the central difference with step h]. With the default step the answer is compared to the exact
# gradient to 1e-6; with a given step, to the central difference itself to 1e-9.

def _difference_mistakes(f, point, h) -> dict:
    def shifted(i, d):
        p = list(point)
        p[i] += d
        return f(*p)
    n = range(len(point))
    return {
        "this is the forward difference (f(x+h) - f(x)) / h; use the central difference "
        "(f(x+h) - f(x-h)) / 2h":
            [(shifted(i, h) - f(*point)) / h for i in n],
        "the difference was divided by h instead of 2h":
            [(shifted(i, h) - shifted(i, -h)) / h for i in n],
        "the step h passed in was ignored (1e-5 was used instead)":
            [(shifted(i, 1e-5) - shifted(i, -1e-5)) / 2e-5 for i in n],
    }


def _probe_numerical_gradient(fn, cases):
    out = []
    for _, f, point, h in cases:
        inputs = list(point)
        result = outcome(fn, f, inputs) if h is None else outcome(fn, f, inputs, h=h)
        out.append(result | {"inputs_after": inputs})
    return out


def _judge_numerical_gradient(got, want, cases):
    for g, w, (label, f, point, h) in zip(results(got, cases, "numerical_gradient"), want, cases):
        assert type(g) is dict and "inputs_after" in g, MALFORMED
        name = (f"numerical_gradient({label}, {point})" if h is None
                else f"numerical_gradient({label}, {point}, h={h})")
        tol, atol = (1e-6, 1e-6) if h is None else (1e-9, 1e-12)
        check_floats(value_of(g, name), w, name, rtol=tol, atol=atol,
                     mistakes=_difference_mistakes(f, point, 1e-5 if h is None else h),
                     promised=list)
        assert g["inputs_after"] == list(point), (
            f"numerical_gradient changed its inputs list from {list(point)} to "
            f"{g['inputs_after']}: shift a copy")


NUMERICAL_GRADIENT = Check("numerical_gradient", _probe_numerical_gradient,
                           _judge_numerical_gradient)


# Exercise 3: gate_backward(op, a, b, upstream) -> (d/da, d/db); ValueError for an unknown op.
# cases: {"gates": [(op, a, b, upstream)], "bad_ops": [op]}; want: [(d/da, d/db)] for the gates.

def _gate_mistakes(op, a, b, up) -> dict:
    if op == "add":
        return {"the upstream gradient was not multiplied in (add's local gradients are 1 and 1)":
                    (1.0, 1.0)}
    if op == "mul":
        return {"the inputs were not swapped: a's gradient is b * upstream, b's is a * upstream":
                    (a * up, b * up),
                "the upstream gradient was not multiplied in": (b, a)}
    if a == b:
        return {"at a tie max sent the whole gradient to a; split it equally as torch.maximum does":
                    (up, 0.0),
                "at a tie max sent the whole gradient to b; split it equally as torch.maximum does":
                    (0.0, up),
                "at a tie each input should get half the upstream gradient, not all of it":
                    (up, up)}
    hi, lo = (up, 0.0) if a > b else (0.0, up)
    split = (f"a and b differ (by {abs(a - b):.1g}) but max split the gradient as at a tie: only "
             "exactly equal inputs tie (a == b, no tolerance)" if _near(a, b) else
             "max split the gradient although a and b differ: only a tie (a == b) splits it; "
             "otherwise all of it goes to the larger input")
    return {"the gradient went to the smaller input; max routes it to the larger": (lo, hi),
            split: (up / 2, up / 2),
            "the upstream gradient was not multiplied in": (1.0, 0.0) if a > b else (0.0, 1.0),
            "max passed the gradient to both inputs; it routes all of it to the larger one only":
                (up, up)}


def _probe_gate_backward(fn, cases):
    return {"grads": [outcome(fn, *gate) for gate in cases["gates"]],
            "raised": [raised(fn, op, 1.0, 2.0, 1.0) for op in cases["bad_ops"]]}


def _judge_gate_backward(got, want, cases):
    assert type(got) is dict and set(got) == {"grads", "raised"}, MALFORMED
    for g, w, (op, a, b, up) in zip(results(got["grads"], cases["gates"], "gate_backward"), want,
                                    cases["gates"]):
        name = call_name("gate_backward", op, a, b, up)
        check_floats(value_of(g, name), w, name, labels=("d/da", "d/db"),
                     mistakes=_gate_mistakes(op, a, b, up), promised=tuple, **EXACT)
    for r, op in zip(results(got["raised"], cases["bad_ops"], "gate_backward with an unknown op"),
                     cases["bad_ops"]):
        check_raised(r, call_name("gate_backward", op, 1.0, 2.0, 1.0))


GATE_BACKWARD = Check("gate_backward", _probe_gate_backward, _judge_gate_backward)


# Exercise 4: second_circuit_grads(x, y, z, w) -> the four gradients of f = 2 (x y + max(z, w)).
# cases: [(x, y, z, w)]; want: [(df/dx, df/dy, df/dz, df/dw)]

def _second_mistakes(x, y, z, w) -> dict:
    if z == w:
        return {"at the tie z = w the max gate sent the whole gradient to z; split it equally as "
                "torch.maximum does":
                    (2 * y, 2 * x, 2.0, 0.0),
                "at the tie z = w the max gate sent the whole gradient to w; split it equally as "
                "torch.maximum does":
                    (2 * y, 2 * x, 0.0, 2.0),
                "at the tie z = w the max gate passed the whole gradient to both; each gets half":
                    (2 * y, 2 * x, 2.0, 2.0)}
    big, small = (2.0, 0.0) if z > w else (0.0, 2.0)
    return {
        (f"z and w differ (by {abs(z - w):.1g}) but the max gate split the gradient as at a tie: "
         "only exactly equal inputs tie (z == w, no tolerance)" if _near(z, w) else
         "the max gate split the gradient although z and w differ: only a tie (z == w) splits it; "
         "otherwise all of it goes to the larger input"): (2 * y, 2 * x, 1.0, 1.0),
        "the factor 2 of the last gate is missing: every gradient must be multiplied by it":
            (y, x, big / 2, small / 2),
        "the mul gate's inputs were not swapped: df/dx is 2y and df/dy is 2x":
            (2 * x, 2 * y, big, small),
        "the max gate routed the gradient to the smaller of z and w": (2 * y, 2 * x, small, big),
        "the max gate passed the gradient to both z and w; it routes it to the larger only":
            (2 * y, 2 * x, 2.0, 2.0),
    }


def _judge_second_circuit(got, want, cases):
    for g, w, point in zip(results(got, cases, "second_circuit_grads"), want, cases):
        name = call_name("second_circuit_grads", *point)
        check_floats(value_of(g, name), w, name, labels=GRAD_LABELS + ("df/dw",),
                     mistakes=_second_mistakes(*point), promised=tuple, **EXACT)


SECOND_CIRCUIT = Check("second_circuit_grads",
                       lambda fn, cases: [outcome(fn, *case) for case in cases],
                       _judge_second_circuit)
