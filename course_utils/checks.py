"""What the notebooks' test cells call: strict comparisons that name the likely mistake.

Every check looks at the exact type first (a learner's object must not be able to fake
equality: a float subclass or a tensor subclass with a clever __eq__ is rejected), then the
shape, then the values. A wrong value fails with CheckFailed (an AssertionError shown as its
message alone, without a traceback) whose message says what came,
what was expected, and, where the two are related in a telling way, what the mistake probably
was: a flipped sign, a factor of k, a transpose, or one of the exercise's own known mistakes
passed in as `mistakes={"description": wrong_value}`.

Also here: finite-difference gradients (`numerical_grad`), the reference the lessons compare
autograd against.
"""

import math
import struct
from collections.abc import Callable, Mapping, Sequence

import torch

_FACTORS = (2, 3, 4, 5, 8, 10, 100, 1000)


class CheckFailed(AssertionError):
    """A check's verdict on the learner's value. In a notebook IPython shows its message alone
    (`_render_traceback_`), not a traceback through course_utils: the message is the feedback.
    Errors raised inside the learner's own code keep their tracebacks: raised directly, or, where
    the test caught one to name the call ("f(1.0) raised ZeroDivisionError"), as this verdict's
    __cause__, shown above it."""

    def _render_traceback_(self) -> list[str]:
        cause = []
        if isinstance(self.__cause__, BaseException):
            import traceback
            cause = ("".join(traceback.format_exception(self.__cause__)).rstrip("\n").split("\n")
                     + [""])
        return cause + [f"Check failed: {self}"]


def _isclose(a: float, b: float, rtol: float, atol: float) -> bool:
    return math.isclose(a, b, rel_tol=rtol, abs_tol=atol)


def _type_hint(value) -> str:
    """Why a value is not a plain Python number, in a learner's terms."""
    if value is None:
        return " (did the function forget to `return`?)"
    if isinstance(value, torch.Tensor):
        return " (a torch.Tensor: use .item() to get a Python float)"
    if type(value).__module__ == "numpy":
        return " (a NumPy value: wrap it in float(...))"
    if isinstance(value, bool):
        return " (a bool is not a number here)"
    if isinstance(value, (int, float)):
        return " (a subclass of a number: return a plain float)"
    return ""


def _require_number(value, what: str) -> float:
    if type(value) not in (int, float):
        raise CheckFailed(f"{what} should be a Python float, got "
                          f"{type(value).__name__}{_type_hint(value)}")
    if not math.isfinite(value):
        raise CheckFailed(f"{what} is {value}: an overflow, a division by zero, or a log of a "
                          "non-positive number?")
    return float(value)


# a result off by at most this much of itself, where float64 is promised: float32's rounding
FLOAT32_DIGITS = 1e-6
FLOAT32_ADVICE = ("was it computed in float32, torch's default dtype? Compute in Python floats "
                  "(or float64)")


def _float32_off(actual, expected: float, rtol: float) -> float | None:
    """Where float64 is promised (rtol below float32's digits): how far off a wrong `actual` is,
    relative to `expected`, when it is a Python float that float32 holds exactly and within
    float32's rounding of `expected` (a result computed in float32 and turned into a Python float);
    else None."""
    if (rtol >= FLOAT32_DIGITS / 10 or type(actual) is not float or not expected
            or not math.isfinite(actual)):
        return None
    off = abs(actual - expected) / abs(expected)
    in_float32 = (struct.unpack("f", struct.pack("f", actual))[0] == actual if abs(actual) < 3.4e38
                  else False)
    return off if in_float32 and 0 < off <= FLOAT32_DIGITS else None


def relation(actual: float, expected: float, rtol: float = 1e-6, atol: float = 1e-9) -> str | None:
    """How a wrong number relates to the right one, in words, or None when nothing stands out.

    >>> relation(-3.0, 3.0)
    'has the opposite sign'
    >>> relation(12.0, 3.0)
    'is exactly 4 times too large'
    """
    if expected != 0 and _isclose(actual, -expected, rtol, atol):
        return "has the opposite sign"
    if actual == 0 and expected != 0:
        return "is 0"
    if expected != 0 and actual != 0:
        ratio = actual / expected
        for k in _FACTORS:
            if _isclose(ratio, k, rtol, 0.0):
                return f"is exactly {k} times too large"
            if _isclose(ratio, 1 / k, rtol, 0.0):
                return f"is exactly {k} times too small"
            if _isclose(ratio, -k, rtol, 0.0):
                return f"has the opposite sign and is {k} times too large"
    return None


def _shown(value: float, other: float) -> str:
    """value as a message shows it: 6 significant digits, or all it has (repr) where 6 would not
    tell it from `other`, the number it is compared with."""
    return repr(value) if f"{value:.6g}" == f"{other:.6g}" and value != other else f"{value:.6g}"


def _known_mistake(actual, mistakes: Mapping | None, same: Callable) -> str | None:
    for description, wrong in (mistakes or {}).items():
        if same(actual, wrong):
            return description
    return None


def check_float(actual, expected: float, name: str, *, rtol: float = 1e-6, atol: float = 1e-9,
                mistakes: Mapping[str, float] | None = None) -> None:
    """Check that `actual` is a Python number close to `expected`.

    Inputs:
    - actual: what the learner's code returned
    - expected: the right value (float)
    - name: how to call the value in messages, e.g. "circuit_grads(-2, 5, -4)[0]"
    - mistakes: {description: wrong value} for known mistakes of this exercise
    """
    value = _require_number(actual, name)
    if _isclose(value, expected, rtol, atol):
        return
    msg = f"{name} is {_shown(value, expected)}, expected {_shown(expected, value)}"
    known = _known_mistake(value, mistakes, lambda a, w: _isclose(a, w, rtol, atol))
    if known:
        raise CheckFailed(f"{msg}: {known}.")
    if (off := _float32_off(actual, expected, rtol)) is not None:
        raise CheckFailed(f"{msg}: it agrees only to float32 precision (off by {off:.0e} of "
                          f"itself): {FLOAT32_ADVICE}.")
    why = relation(value, expected, rtol, atol)
    raise CheckFailed(f"{msg} (it {why})." if why else f"{msg}.")


def check_floats(actual, expected: Sequence[float], name: str, *,
                 labels: Sequence[str] | None = None, rtol: float = 1e-6, atol: float = 1e-9,
                 mistakes: Mapping[str, Sequence[float]] | None = None,
                 promised: type | None = None) -> None:
    """Check a tuple (or list) of Python numbers against `expected`, entry by entry.

    Inputs:
    - actual: a tuple or list of length len(expected)
    - expected: the right values
    - name: how to call the whole result in messages
    - labels: a name for each entry, e.g. ("df/dx", "df/dy", "df/dz")
    - mistakes: {description: wrong tuple} for known mistakes; checked before anything generic
    - promised: tuple or list where a docstring promises "a tuple (list) of Python floats": once the
      values are right, actual must be exactly that container and every entry exactly a float (an
      int such as the 0 in `return (upstream, 0)` fails, named). None: any tuple or list of numbers.
    """
    n = len(expected)
    labels = list(labels) if labels is not None else [f"{name}[{i}]" for i in range(n)]
    if type(actual) not in (tuple, list):
        container = (promised or tuple).__name__
        hint = (f" (a torch.Tensor: {'use .tolist()' if promised is list else 'tuple(t.tolist())'}"
                " gives Python floats)"
                if isinstance(actual, torch.Tensor) else _type_hint(actual))
        raise CheckFailed(f"{name} should be a {container} of {n} floats, got "
                          f"{type(actual).__name__}{hint}")
    if len(actual) != n:
        raise CheckFailed(f"{name} should have {n} entries ({', '.join(labels)}), "
                          f"got {len(actual)}")
    values = [_require_number(v, label) for v, label in zip(actual, labels)]
    wrong = [i for i in range(n) if not _isclose(values[i], expected[i], rtol, atol)]
    if not wrong:
        if promised is not None:
            _require_promised(actual, promised, name, labels)
        return
    shown = ", ".join(_shown(v, w) for v, w in zip(values, expected))
    want = ", ".join(_shown(w, v) for v, w in zip(values, expected))
    msg = f"{name} is ({shown}), expected ({want})"

    def same(a, w):
        return len(w) == n and all(_isclose(x, y, rtol, atol) for x, y in zip(a, w))

    known = _known_mistake(values, mistakes, same)
    if known:
        raise CheckFailed(f"{msg}: {known}.")
    f32 = {i: off for i in wrong if (off := _float32_off(actual[i], expected[i], rtol)) is not None}
    related = {i: why for i in wrong
               if i not in f32 and (why := relation(values[i], expected[i], rtol, atol))}
    whys = [f"{labels[i]} {why}" for i, why in related.items()]
    if f32:   # said once, for every entry it explains
        which = "every entry" if len(f32) == n else ", ".join(labels[i] for i in f32)
        whys.insert(0, f"{which} agree{'s' if len(f32) == 1 or len(f32) == n else ''} only to "
                       f"float32 precision (off by up to {max(f32.values()):.0e}): "
                       f"{FLOAT32_ADVICE}")
    if not whys:   # the values shown say it: no list of "is wrong"
        raise CheckFailed(msg + ".")
    if others := len(wrong) - len(f32) - len(related):   # wrong, with nothing to say about them
        whys.append(f"{others} other entr{'y is' if others == 1 else 'ies are'} wrong too")
    raise CheckFailed(f"{msg}: " + "; ".join(whys) + ".")


def _require_promised(actual, promised: type, name: str, labels: Sequence[str]) -> None:
    """The values are right: is the result the container the docstring promises, of floats only?"""
    if type(actual) is not promised:
        raise CheckFailed(f"{name} has the right values, but it is a {type(actual).__name__}: the "
                          f"docstring promises a {promised.__name__} of Python floats (return "
                          f"{'(a, b, ...)' if promised is tuple else '[a, b, ...]'})")
    ints = [i for i, v in enumerate(actual) if type(v) is not float]
    if ints:
        i = ints[0]
        where = labels[i] if labels[i].startswith(name) else f"{name}: {labels[i]}"
        raise CheckFailed(f"{where} has the right value, but it is the {type(actual[i]).__name__} "
                          f"{actual[i]!r}: the docstring promises Python floats (write "
                          f"{float(actual[i])!r}, or float(...))")


def check_tensor(actual, expected: torch.Tensor, name: str, *, rtol: float = 1e-5,
                 atol: float = 1e-8, mistakes: Mapping[str, torch.Tensor] | None = None) -> None:
    """Check a tensor's exact type, shape, dtype and device, then its values.

    Inputs:
    - actual: what the learner's code returned; must be a plain torch.Tensor (not a subclass)
    - expected: the right tensor, any shape
    - mistakes: {description: wrong tensor} for known mistakes of this exercise
    """
    if not isinstance(expected, torch.Tensor):
        raise TypeError(f"expected must be a torch.Tensor, got {type(expected).__name__}")
    if type(actual) is not torch.Tensor:
        hint = (" (an nn.Parameter: return a plain tensor, e.g. p.detach())"
                if isinstance(actual, torch.nn.Parameter) else "")
        raise CheckFailed(f"{name} should be a torch.Tensor, got {type(actual).__name__}{hint}")
    if actual.shape != expected.shape:
        hint = ""
        if actual.dim() == 2 and actual.shape == expected.shape[::-1]:
            hint = ": transposed?"
        elif actual.numel() == expected.numel():
            hint = ": same number of elements, so a reshape or a missing/extra dimension?"
        raise CheckFailed(f"{name} has shape {tuple(actual.shape)}, "
                          f"expected {tuple(expected.shape)}{hint}")
    if actual.dtype != expected.dtype:
        raise CheckFailed(f"{name} has dtype {actual.dtype}, expected {expected.dtype}")
    if actual.device != expected.device:
        raise CheckFailed(f"{name} is on {actual.device}, expected {expected.device}")
    a, e = actual.detach(), expected.detach()
    if not torch.isfinite(a).all():
        raise CheckFailed(f"{name} contains nan or inf")
    if torch.allclose(a, e, rtol=rtol, atol=atol):
        return
    err = (a - e).abs().max().item()
    msg = f"{name}: not the expected values (largest difference {err:.3g})"
    for description, wrong in (mistakes or {}).items():
        if wrong.shape == a.shape and torch.allclose(a, wrong.to(a.dtype), rtol=rtol, atol=atol):
            raise CheckFailed(f"{msg}: {description}.")
    if (rtol < FLOAT32_DIGITS / 10 and e.numel() and a.dtype == torch.float64
            and torch.equal(a.float().double(), a)
            and torch.allclose(a, e, rtol=FLOAT32_DIGITS,
                               atol=FLOAT32_DIGITS * e.abs().max().item())):
        raise CheckFailed(f"{msg}: it agrees only to float32 precision: was it computed in float32 "
                          "(torch's default dtype, as in a buffer made by torch.zeros or "
                          f"torch.empty without dtype=)? Compute in {e.dtype}, the inputs' dtype.")
    if a.dim() == 2 and a.shape[0] == a.shape[1] and torch.allclose(a, e.T, rtol=rtol, atol=atol):
        raise CheckFailed(f"{msg}: it equals the expected tensor transposed.")
    if e.abs().sum() > 0:
        # One scalar factor explains every entry? Then name it.
        k = (a * e).sum().item() / (e * e).sum().item()
        if torch.allclose(a, k * e, rtol=rtol, atol=atol):
            why = relation(k, 1.0, rtol=1e-4)
            if why:
                raise CheckFailed(f"{msg}: every entry {why}.")
    raise CheckFailed(msg + ".")


def check_raises(exc_type: type[BaseException], fn: Callable, *args, name: str, **kwargs) -> None:
    """Check that fn(*args, **kwargs) raises exc_type (or a subclass), e.g. ValueError for bad
    input."""
    try:
        fn(*args, **kwargs)
    except exc_type:
        return
    except Exception as e:  # the message names what was raised instead
        raise CheckFailed(f"{name} raised {type(e).__name__}({e}), "
                          f"expected {exc_type.__name__}") from None
    raise CheckFailed(f"{name} returned normally, expected it to raise {exc_type.__name__}")


def numerical_grad(f: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor,
                   h: float = 1e-6) -> torch.Tensor:
    """Central finite differences: grad[i] = (f(x + h e_i) - f(x - h e_i)) / 2h.

    Inputs:
    - f: maps a tensor shaped like x to a scalar (a 0-dim tensor or a Python number)
    - x: float64 tensor of any shape (float32 round-off swamps the differences)
    - h: the step
    Returns: a float64 tensor of x's shape. x itself is left unchanged.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype != torch.float64:
        raise ValueError(f"x must be float64 for finite differences, got {x.dtype}: use x.double()")
    if not (isinstance(h, float) and h > 0):
        raise ValueError(f"h must be a positive float, got {h!r}")
    xs = x.detach().clone()
    flat = xs.view(-1)
    grad = torch.zeros_like(flat)
    for i in range(flat.numel()):
        old = flat[i].item()
        flat[i] = old + h
        up = float(f(xs))
        flat[i] = old - h
        down = float(f(xs))
        flat[i] = old
        grad[i] = (up - down) / (2 * h)
    return grad.view_as(x)
