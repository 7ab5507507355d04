"""Lesson 07 (second derivatives): the checks of its three exercises, used by the visible and the
hidden tests.

Cases hold the functions and tensors to call the learner's code with; `want` is what the right
answers are for those cases (the visible test's values, or the hidden test's expect()). The judges
may use the oracles the lesson teaches (torch.func.grad and hessian) to name a known mistake, never
to decide a score.
"""

import warnings

import torch
from torch.func import grad, hessian

from course_utils.checks import CheckFailed, check_tensor
from course_utils.judging import Check, MALFORMED, name_of, raised_name, results, value_of

LINALG_ERROR = torch.linalg.LinAlgError.__name__  # "_LinAlgError": what raised() names it




def _tolerance(x) -> tuple[float, float]:
    return (1e-4, 1e-5) if x.dtype == torch.float32 else (1e-8, 1e-10)


def _shape(x) -> str:
    note = "" if x.dtype == torch.float64 else f", {str(x.dtype).removeprefix('torch.')}"
    note += "" if x.is_contiguous() else ", non-contiguous"
    return f"x of shape {tuple(x.shape)}{note}"


def _call(fn, args, x) -> dict:
    """{"value": fn(*args)} or {"raised": class names, "autograd": which autograd error it was}, and
    what the call did to the caller's x: its values, its requires_grad flag, its .grad. Warnings are
    kept off stderr. NotImplementedError (the untouched stub) propagates."""
    seen = {}
    with warnings.catch_warnings(record=True):  # also .grad of a non-leaf x, which warns
        warnings.simplefilter("always")
        before, flag, grad_before = x.detach().clone(), x.requires_grad, x.grad
        try:
            result = fn(*args)
        except NotImplementedError:
            raise
        except Exception as e:  # what was raised is the observation
            text = str(e)
            seen["raised"] = tuple(c.__name__ for c in type(e).__mro__)
            seen["memory"] = isinstance(e, MemoryError) or "allocate" in text
            seen["autograd"] = ("no graph" if "does not require grad" in text else
                                "second backward"
                                if "backward through the graph a second time" in text else
                                "view" if "view size is not compatible" in text else
                                "not a dot product" if any(t in text for t in (
                                    "shapes cannot be multiplied", "1D tensors expected",
                                    "size mismatch", "inconsistent tensor size")) else None)
        else:
            seen["value"] = result
            seen["requires_grad"] = isinstance(result, torch.Tensor) and bool(result.requires_grad)
        seen["x_changed"] = x.shape != before.shape or not torch.equal(x.detach(), before)
        seen["flag_changed"] = x.requires_grad != flag
        seen["grad_changed"] = x.grad is not grad_before
    return seen


def _check_caller_x(seen, name: str) -> None:
    assert seen["x_changed"] is False, (f"{name} changed the values of x: work on x.detach() "
                                        "(a copy) instead")
    assert seen["flag_changed"] is False, \
        (f"{name} set requires_grad on the caller's x: work on a fresh leaf, "
         "x.detach().requires_grad_()")
    assert seen["grad_changed"] is False, \
        (f"{name} changed x.grad: take gradients with torch.autograd.grad, not .backward(), "
         "on a fresh leaf")


def _check_close(actual, want, name: str, mistakes: dict, approx: str) -> None:
    """check_tensor, and, when no known mistake explains a result that is close but not within the
    tolerance, `approx`, which says what such a result is (rather than a bare difference)."""
    rtol, atol = _tolerance(want)
    if (type(actual) is torch.Tensor and actual.shape == want.shape and actual.dtype == want.dtype
            and torch.isfinite(actual).all()
            and not torch.allclose(actual, want, rtol=rtol, atol=atol)
            and not any(w.shape == actual.shape
                        and torch.allclose(actual, w.to(actual.dtype), rtol=rtol, atol=atol)
                        for w in mistakes.values())):
        err = (actual - want).abs().max().item()
        scale = want.abs().max().item()
        if err <= 1e-3 * max(scale, 1.0):
            raise CheckFailed(f"{name}: at most {err:.3g} from the expected values (of values up "
                              f"to {scale:.3g}): {approx}")
    check_tensor(actual, want, name, rtol=rtol, atol=atol, mistakes=mistakes)


# Exercise 1: hvp(f, x, v) -> H v, of x's shape and dtype, without a graph; zeros when f is linear.
# cases: [(label, f, x, v)]: label says what f is; want: [H v, a tensor of x's shape and dtype]

# an x of more entries gets no explicit Hessian here: for 5 * 10**5 entries it would hold 2 TB
LARGE = 4096


def _hvp_mistakes(f, x, v) -> tuple[dict, bool]:
    """Known wrong answers, and whether f is linear near x (its Hessian is zero); none for a LARGE
    x."""
    n, xd = x.numel(), x.detach()
    if n > LARGE:
        return {"this is the gradient of f, not H v: differentiate the gradient once more, along v":
                    grad(f)(xd)}, False
    H, g = hessian(f)(xd).reshape(n, n), grad(f)(xd)
    flat = v.reshape(n)
    return {
        "this is the gradient of f, not H v: differentiate the gradient once more, along v": g,
        "v was not used: differentiating g.sum() gives H times a vector of ones, not H v; "
        "differentiate (g * v).sum()":
            (H @ torch.ones(n, dtype=x.dtype)).reshape(x.shape),
        "the gradient was dotted with itself (g . g), not with v: that gives 2 H g":
            (2 * H @ g.reshape(n)).reshape(x.shape),
        "only the Hessian's diagonal was used (H_ii v_i): H v needs every entry of H":
            (H.diagonal() * flat).reshape(x.shape),
        "the result is all zeros, as when the first gradient carries no graph: take the first "
        "gradient with create_graph=True, and do not detach it or compute it under no_grad":
            torch.zeros_like(xd),
    }, bool((H == 0).all())


def _hvp_name(label, x) -> str:
    return f"hvp({label}, {_shape(x)}, v)"


def _probe_hvp(fn, cases):
    return [_call(fn, (f, x, v), x) for _, f, x, v in cases]


def _judge_hvp(got, want, cases):
    for seen, w, (label, f, x, v) in zip(results(got, cases, "hvp"), want, cases):
        name = _hvp_name(label, x)
        assert type(seen) is dict and {"x_changed", "flag_changed", "grad_changed"} <= set(seen), \
            f"{name}: {MALFORMED}"
        if "raised" in seen and seen.get("memory") is True and x.numel() > LARGE:
            raise AssertionError(
                f"{name} ran out of memory ({raised_name(seen['raised'])}): it formed the Hessian, "
                f"which for an x of {x.numel():,} entries holds {x.numel() ** 2:.2g} numbers "
                f"({x.numel() ** 2 * x.element_size() / 1e12:.2g} TB). Compute H v without forming "
                "H (the docstring): on a fresh leaf, x.detach().requires_grad_(), one gradient "
                "with create_graph=True, then the gradient of (g * v).sum(); or "
                "jvp(grad(f), (x.detach(),), (v,))[1]")
        mistakes, linear = _hvp_mistakes(f, x, v)
        if "raised" in seen and seen.get("autograd") == "no graph":
            if linear:
                raise AssertionError(
                    f"{name} raised {raised_name(seen['raised'])}: autograd was asked to "
                    "differentiate a tensor that does not require grad. This f is linear in x: its "
                    "gradient is a constant that autograd does not record, so H v is zero: return "
                    "zeros of x's shape and dtype then (the docstring)")
            raise AssertionError(
                f"{name} raised {raised_name(seen['raised'])}: autograd was asked to differentiate "
                "a tensor that does not require grad. The gradient must carry a graph to be "
                "differentiated again: take it from an x that requires grad (x = "
                "x.detach().requires_grad_()) and take the first gradient with create_graph=True")
        if "raised" in seen and seen.get("autograd") == "second backward":
            raise AssertionError(
                f"{name} raised {raised_name(seen['raised'])}: autograd was asked to backward "
                "through the graph a second time. Take the first gradient with create_graph=True: "
                "it records the backward pass and keeps the graph for the second one")
        if "raised" in seen and seen.get("autograd") == "not a dot product" and x.dim() != 1:
            raise AssertionError(
                f"{name} raised {raised_name(seen['raised'])}: a product of the gradient g with v "
                f"had the wrong shape. For an x of {x.dim()} dimensions, g @ v is a matrix product "
                "(or fails) and torch.dot takes 1-D tensors only; the dot product g . v over every "
                "entry is (g * v).sum(), whatever x's shape")
        if "raised" in seen and seen.get("autograd") == "view":
            given = "" if x.is_contiguous() and v.is_contiguous() else \
                " (x and v are transposes here, which the docstring allows)"
            raise AssertionError(
                f"{name} raised {raised_name(seen['raised'])}: .view() of a non-contiguous "
                f"tensor{given}. Use .reshape() or .flatten(), which copy when they must, or "
                "(g * v).sum(), which needs no reshaping")
        hv = value_of(seen, name)
        _check_caller_x(seen, name)
        _check_close(hv, w, name, mistakes,
                     "close to H v but not exact: an approximation (finite differences of the "
                     "gradient, or float32 arithmetic), not the exact Hessian-vector product that "
                     "double backward or jvp(grad(f)) gives")
        assert seen.get("requires_grad") is False, (
            f"{name} returned a tensor that requires grad (it carries a graph): take the second "
            "gradient without create_graph=True, or detach the result")


HVP = Check("hvp", _probe_hvp, _judge_hvp)


# Exercise 2: newton_step(f, x) -> x - H^-1 grad f(x), of x's shape and dtype, without a graph;
# torch.linalg.LinAlgError when H is singular.
# cases: {"steps": [(label, f, x, n)]: n steps from x, each from the last one's result,
#         "singular": [(label, f, x)]: H singular at x (optional key)}
# want: [the point after the n steps, a tensor of x's shape and dtype], one per "steps" case

def _newton_mistakes(f, x, want) -> dict:
    xd = x.detach()
    g, H = grad(f)(xd), hessian(f)(xd)
    d = xd - want  # the right step, from the expected point
    return {
        "this is a gradient step x - g: a Newton step multiplies g by the inverse "
        "Hessian, x - H^-1 g": xd - g,
        "the step has the wrong sign (x + H^-1 g goes uphill): subtract H^-1 g": xd + d,
        "g was multiplied by H, not by its inverse: solve H d = g (torch.linalg.solve(H, g)) "
        "and take x - d":
            xd - H @ g,
        "only the Hessian's diagonal was used (x - g / diag(H)): solve with the whole H":
            xd - g / H.diagonal(),
        "this is the step d = H^-1 g itself; return the new point x - d": d,
    }


def _newton_name(label, x, n) -> str:
    return f"newton_step({label}, {_shape(x)})" + (f" applied {n} times" if n > 1 else "")


def _probe_newton(fn, cases):
    steps = []
    for _, f, x, n in cases["steps"]:
        point = x
        for i in range(n):  # each step from the last one's result, until one goes wrong
            seen = _call(fn, (f, point), point)
            seen["done"] = i
            ok = ("value" in seen and type(seen["value"]) is torch.Tensor
                  and not seen["requires_grad"])
            if (not ok or seen["x_changed"] or seen["flag_changed"] or seen["grad_changed"]
                    or i == n - 1):
                break
            point = seen["value"]
        steps.append(seen)
    return {"steps": steps,
            "singular": [_call(fn, (f, x), x) for _, f, x in cases.get("singular", ())]}


def _judge_newton(got, want, cases):
    assert type(got) is dict and set(got) == {"steps", "singular"}, MALFORMED
    for seen, w, (label, f, x, n) in zip(results(got["steps"], cases["steps"], "newton_step"), want,
                                         cases["steps"]):
        name = _newton_name(label, x, n)
        assert (type(seen) is dict
                and {"x_changed", "flag_changed", "grad_changed", "done"} <= set(seen)), \
            f"{name}: {MALFORMED}"
        at = f" (at step {seen['done'] + 1})" if n > 1 and type(seen["done"]) is int else ""
        result = value_of(seen, name + at)
        _check_caller_x(seen, name + at)
        mistakes = _newton_mistakes(f, x, w) if n == 1 else {}
        _check_close(result, w, name, mistakes,
                     "close to the Newton step but not exact: an approximation (a "
                     "finite-difference gradient or Hessian, float32 arithmetic, or an iterative "
                     "solve stopped early), not x - H^-1 g solved exactly")
        assert seen.get("requires_grad") is False, (
            f"{name} returned a tensor that requires grad (it carries a graph back to x): "
            "compute on x.detach()")
    singular = cases.get("singular", ())
    for seen, (label, f, x) in zip(results(got["singular"], singular,
                                           "newton_step at a singular Hessian"), singular):
        name = _newton_name(label, x, 1)
        assert type(seen) is dict and {"x_changed", "flag_changed", "grad_changed"} <= set(seen), \
            f"{name}: {MALFORMED}"
        if "value" in seen:
            raise AssertionError(f"{name} returned normally, expected it to raise "
                                 "torch.linalg.LinAlgError: the Hessian is singular here, so there "
                                 "is no Newton step (torch.linalg.solve raises it; a "
                                 "pseudo-inverse or least squares hides it)")
        names = seen.get("raised")
        assert type(names) is tuple and LINALG_ERROR in names, \
            (f"{name} raised {raised_name(names)}, expected torch.linalg.LinAlgError (the "
             "Hessian is singular)")
        _check_caller_x(seen, name)


NEWTON_STEP = Check("newton_step", _probe_newton, _judge_newton)


# Exercise 3: has_second_order_graph(g) -> bool.
# cases: [(name, make)]: make() returns g, or (g, w) where w is a leaf whose .grad to clear
# afterwards (it breaks the cycle w -> w.grad -> graph -> w); want: [(the right answer, why it is
# right)]

def _probe_second_order(fn, cases):
    found = []
    for _, make in cases:
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            made = make()
            g, owner = made if type(made) is tuple else (made, None)
            try:
                answer = fn(g)
            except NotImplementedError:
                raise
            except Exception as e:  # what was raised is the observation
                seen = {"raised": tuple(c.__name__ for c in type(e).__mro__)}
            else:
                seen = {"value": answer if type(answer) is bool else None,
                        "type": type(answer).__name__,
                        "tensor_or_node":
                            isinstance(answer, (torch.Tensor, torch.autograd.graph.Node))}
        if owner is not None:
            owner.grad = None
        found.append(seen)
    return found


def _judge_second_order(got, want, cases):
    for seen, (expected, why), (name, _) in zip(results(got, cases, "has_second_order_graph"), want,
                                                cases):
        assert type(seen) is dict and ("value" in seen) != ("raised" in seen), \
            f"{name}: {MALFORMED}"
        if "raised" in seen:
            raise AssertionError(f"{name} raised {raised_name(seen['raised'])}; expected "
                                 f"{expected}: {why}")
        answer = seen["value"]
        if type(answer) is not bool:
            hint = " (a tensor or a Node: turn the test into True/False, e.g. with `is not None`)" \
                if seen.get("tensor_or_node") is True else ""
            raise AssertionError(f"{name} returned {name_of(seen.get('type'))}, expected a "
                                 f"Python bool{hint}")
        assert answer == expected, f"{name} returned {answer}, expected {expected}: {why}"


SECOND_ORDER_GRAPH = Check("has_second_order_graph", _probe_second_order, _judge_second_order)
