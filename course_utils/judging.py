"""Hidden tests split in three, so that scores can be decided outside the learner's process.

A graded test cell's hidden part defines three functions and hands them to `grade`:

    ### BEGIN HIDDEN TESTS
    def probe():                  # builds inputs, calls the learner's code, returns plain data
        return {"grads": [circuit_grads(x, y, z) for x, y, z in CASES]}
    ### BEGIN EXPECTED
    def expect():                 # the right answers (and known wrong ones), never shown to the learner's code
        return {"grads": [(z, z, x + y) for x, y, z in CASES]}
    def judge(got, want):         # compares with course_utils.checks; raises AssertionError
        for g, w, case in zip(got["grads"], want["grads"], CASES):
            check_floats(g, w, f"circuit_grads{case}")
    ### END EXPECTED
    grade(probe, expect, judge)
    ### END HIDDEN TESTS

Where it runs decides what `grade` does:
- in a notebook (Validate, plain `nbgrader autograde`): judge(probe(), expect()), as an ordinary test;
- in the learner's sandbox (course_utils.hardened): the EXPECTED block is cut out before the cell
  is sent, and grade() sends encode(probe()) to the grader: the learner's process never computes,
  and so can never copy, an expected value;
- in the reference worker (the instructor's solution, trusted): grade() keeps expect() and judge,
  checks that the reference passes, and later judges each learner's decoded observations.

Observations cross between processes as JSON built by `encode`, parsed by `loads` and read by
`decode`: numbers, strings, lists, tuples, dicts with string keys and tensors (dtype, shape, values).
Anything else, or a subclass of any of these (a float with a clever __eq__), arrives as an Opaque
object whose type name is the original's, so strict checks fail with a message naming it. Nothing is
unpickled, and every size is checked before the work it costs (digits, dimensions, lengths, nesting).
"""

import json
import math
import random
import re
from collections.abc import Callable

import torch

SEED = 0
MAX_NODES = 2_000_000       # numbers, strings, containers and tensor entries in one observation
MAX_DEPTH = 32
MAX_STR = 10_000
MAX_DIMS = 32               # a tensor's shape: at most this many entries, each below 2**63
INT_MIN, INT_MAX = -2 ** 63, 2 ** 63 - 1   # encode sends bigger ints as $bigint
MAX_INT_DIGITS = 20         # loads() refuses longer integer literals before Python builds them
_DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
    torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128)}

# Set by course_utils.cellrunner when a notebook runs inside the grader (None in a notebook).
session = None


class GradingSetupError(Exception):
    """The instructor's side is wrong: the reference fails its own judge, or a test cell is malformed."""


def _seed() -> None:
    random.seed(SEED)
    torch.manual_seed(SEED)
    try:
        import numpy as np
        np.random.seed(SEED)
    except ImportError:  # pragma: no cover - numpy comes with the course
        pass


def grade(probe: Callable[[], object], expect: Callable[[], object] | None, judge: Callable[[object, object], None] | None) -> None:
    """Run a hidden test: judge(probe(), expect()) here, or split across processes by the grader.

    Inputs:
    - probe: no arguments; calls the learner's code on the hidden cases and returns plain data
      (see `encode`); it must build its own inputs (grade seeds torch, random and numpy with 0 first)
    - expect: no arguments; returns the expected values the judge compares with (None in the
      learner's sandbox, where the EXPECTED block is cut out)
    - judge: judge(got, want) raises AssertionError naming the mistake when `got` is wrong
    """
    if not callable(probe):
        raise TypeError(f"probe must be a function, got {type(probe).__name__}")
    if session is not None:
        session.grade(probe, expect, judge)
        return
    if not (callable(expect) and callable(judge)):
        raise TypeError("expect and judge must be functions (the ### BEGIN/END EXPECTED block defines them)")
    judge(run_probe(probe), run_expect(expect))


def run_probe(probe: Callable[[], object]) -> object:
    """probe() from the same seeded start everywhere (notebook, learner's worker, reference)."""
    _seed()
    return probe()


def run_expect(expect: Callable[[], object]) -> object:
    """expect() from the same seeded start as probe()."""
    _seed()
    return expect()


def raised(fn: Callable, *args, **kwargs) -> tuple[str, ...] | None:
    """For a probe: what fn(*args, **kwargs) raised, as plain data.

    Returns None when fn returned normally, else the names of the exception's classes, most
    specific first (("ValueError", "Exception", "BaseException", "object")), so a judge can ask
    `"ValueError" in got` as check_raises accepts subclasses.
    """
    try:
        fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - what was raised is the observation
        return tuple(c.__name__ for c in type(e).__mro__)
    return None


def outcome(fn: Callable, *args, **kwargs) -> dict:
    """For a probe: {"value": fn(*args, **kwargs)}, or {"raised": the exception's class names, most
    specific first} when it raised. NotImplementedError (an exercise's untouched stub) propagates,
    so the test fails with the stub's own message."""
    try:
        return {"value": fn(*args, **kwargs)}
    except NotImplementedError:
        raise
    except Exception as e:  # noqa: BLE001 - what was raised is the observation
        return {"raised": tuple(c.__name__ for c in type(e).__mro__)}


def value_of(case, name: str):
    """For a judge: the value in one of `outcome`'s results (a probe may add other keys beside it),
    or an AssertionError saying that the call `name` raised (a built-in exception by its name, never
    the learner's text)."""
    assert type(case) is dict and ("value" in case) != ("raised" in case), \
        f"{name}: the test's probe sent malformed results"
    if "raised" in case:
        raise AssertionError(f"{name} raised {raised_name(case['raised'])}")
    return case["value"]


def check_raised(names, name: str, expected: str = "ValueError") -> None:
    """For a judge: `raised()`'s result for the call `name` shows that it raised `expected` (or a
    subclass); else an AssertionError saying it returned normally or what it raised instead."""
    assert names is not None, f"{name} returned normally, expected it to raise {expected}"
    assert type(names) is tuple and expected in names, f"{name} raised {raised_name(names)}, expected {expected}"


def name_of(text) -> str:
    """For a judge: a name the learner's process sent (a type's), as feedback may show it: ASCII
    letters, digits and _ only, at most 40 ("object" when nothing is left)."""
    if type(text) is not str:
        return "object"
    return "".join(ch for ch in text if ch.isascii() and (ch.isalnum() or ch == "_"))[:40] or "object"


def raised_name(names) -> str:
    """For a judge: the first built-in exception class among `raised()`'s names, or a generic
    phrase. A class the learner's code defined is never named: no text from the learner's process
    reaches the feedback."""
    import builtins
    for n in names if type(names) in (list, tuple) else ():
        cls = getattr(builtins, n, None) if type(n) is str else None
        if isinstance(cls, type) and issubclass(cls, BaseException):
            return n
    return "an exception of the code's own type"


# ---------------------------------------------------------------------------------------------
# Observations as JSON-ready data, and back.

def encode(value, _depth: int = 0, _count: list | None = None):
    """Plain data -> JSON-ready data. Exact types only; anything else becomes {"$opaque": name}.

    >>> encode((1.5, [True, None], {"t": torch.tensor([1, 2])}))["$tuple"][0]
    1.5
    """
    count = _count if _count is not None else [0]
    count[0] += 1
    if count[0] > MAX_NODES or _depth > MAX_DEPTH:
        raise ValueError("the observation is too large or too deeply nested to send to the grader")
    t = type(value)
    if value is None or t is bool or t is str:
        if t is str and len(value) > MAX_STR:
            raise ValueError(f"a string of {len(value)} characters is too long to send to the grader")
        return value
    if t is int:
        return value if abs(value) < 2 ** 63 else {"$bigint": str(value)[:400]}
    if t is float:
        return value if math.isfinite(value) else {"$float": repr(value)}
    if t in (list, tuple):
        items = [encode(v, _depth + 1, count) for v in value]
        return items if t is list else {"$tuple": items}
    if t is dict:
        if not all(type(k) is str for k in value):
            return {"$opaque": "dict with non-string keys"}
        return {"$dict": {k: encode(v, _depth + 1, count) for k, v in value.items()}}
    if t is torch.Size:
        return {"$tuple": [int(v) for v in value]}
    if t is torch.dtype:
        return {"$dtype": str(value).removeprefix("torch.")}
    if t is torch.Tensor:
        x = value.detach().cpu()
        count[0] += x.numel()
        if count[0] > MAX_NODES:
            raise ValueError("the observation is too large to send to the grader")
        dtype = str(x.dtype).removeprefix("torch.")
        if dtype not in _DTYPES:
            return {"$opaque": f"Tensor of dtype {dtype}"}
        flat = x.reshape(-1)
        if x.is_complex():
            data = [[encode(float(z.real)), encode(float(z.imag))] for z in flat.tolist()]
        elif x.is_floating_point():
            data = [encode(float(v)) for v in flat.tolist()]
        else:
            data = flat.tolist()
        return {"$tensor": {"dtype": dtype, "shape": list(x.shape), "data": data}}
    return {"$opaque": t.__name__}


class Opaque:
    """Stands for a value that could not cross as plain data; its class is named like the original."""

    def __repr__(self):
        return f"<{type(self).__name__} object>"


_opaque_types: dict[str, type] = {}
MAX_OPAQUE_TYPES = 512  # the reference judges a whole class: learners' type names must not fill its memory


def _opaque(name: str) -> Opaque:
    if type(name) is not str:
        raise ValueError("malformed observation: $opaque needs a type name")
    name = re.sub(r"[^A-Za-z0-9_ ]", "", name)[:40] or "object"
    if name not in _opaque_types:
        if len(_opaque_types) >= MAX_OPAQUE_TYPES:
            name = "object"
        _opaque_types.setdefault(name, type(name, (Opaque,), {}))
    return _opaque_types[name]()


def loads(line: bytes | str):
    """json.loads for what a learner's worker sent: an integer literal of more than MAX_INT_DIGITS
    digits is refused (ValueError) before Python converts it (converting thousands of 4,000-digit
    literals takes seconds; encode never sends one, bigger ints cross as $bigint)."""
    return json.loads(line, parse_int=_parse_int)


def _parse_int(text: str) -> int:
    if len(text) - text.startswith("-") > MAX_INT_DIGITS:
        raise ValueError("malformed observation: an integer literal with too many digits")
    return int(text)


def _int(v) -> bool:
    """v is an int encode could have sent as a number (never bool; within int64)."""
    return type(v) is int and INT_MIN <= v <= INT_MAX


def decode(data, _depth: int = 0, _count: list | None = None):
    """encode's output (as parsed by `loads`) -> plain Python and torch values. Strict: any
    structure encode does not make raises ValueError ("malformed observation: ..."), and every
    size is checked before the work it would cost: ints within int64, tensor shapes of at most
    MAX_DIMS entries below 2**63, strings and keys of at most MAX_STR characters, MAX_NODES in all."""
    count = _count if _count is not None else [0]
    count[0] += 1
    if count[0] > MAX_NODES or _depth > MAX_DEPTH:
        raise ValueError("malformed observation: too large or too deeply nested")
    t = type(data)
    if data is None or t in (bool, float):
        return data
    if t is int:
        if not _int(data):
            raise ValueError("malformed observation: an int beyond int64 (encode sends those as $bigint)")
        return data
    if t is str:
        if len(data) > MAX_STR:
            raise ValueError("malformed observation: string too long")
        return data
    if t is list:
        return [decode(v, _depth + 1, count) for v in data]
    if t is not dict or len(data) != 1:
        raise ValueError(f"malformed observation: unexpected {t.__name__}")
    (tag, body), = data.items()
    if tag == "$tuple" and type(body) is list:
        return tuple(decode(v, _depth + 1, count) for v in body)
    if tag == "$dict" and type(body) is dict:
        if any(type(k) is not str or len(k) > MAX_STR for k in body):
            raise ValueError("malformed observation: a dict key that is not a string or is too long")
        return {k: decode(v, _depth + 1, count) for k, v in body.items()}
    if tag == "$float" and body in ("nan", "inf", "-inf"):
        return float(body)
    if tag == "$bigint" and type(body) is str and re.fullmatch(r"-?\d{1,400}", body):
        return _opaque("int too large")  # no exercise returns one; its digits could spell any text in feedback
    if tag == "$dtype" and type(body) is str and body in _DTYPES:
        return _DTYPES[body]
    if tag == "$opaque":
        return _opaque(body)
    if tag == "$tensor" and type(body) is dict and set(body) == {"dtype", "shape", "data"}:
        dtype, shape, values = body["dtype"], body["shape"], body["data"]
        # Sizes are checked before anything that costs: math.prod of unchecked entries could build
        # numbers of millions of digits.
        if type(dtype) is not str or dtype not in _DTYPES:
            raise ValueError("malformed observation: bad tensor dtype")
        if type(shape) is not list or len(shape) > MAX_DIMS or not all(_int(s) and s >= 0 for s in shape):
            raise ValueError("malformed observation: bad tensor shape")
        if type(values) is not list or len(values) > MAX_NODES or count[0] + len(values) > MAX_NODES:
            raise ValueError("malformed observation: too large")
        if len(values) != math.prod(shape):
            raise ValueError("malformed observation: tensor data does not match its shape")
        count[0] += len(values)
        d = _DTYPES[dtype]
        if d.is_complex:
            values = [complex(_number(z[0]), _number(z[1])) if type(z) is list and len(z) == 2 else _bad() for z in values]
        elif d.is_floating_point:
            values = [_number(v) for v in values]
        elif d == torch.bool:
            values = [v if type(v) is bool else _bad() for v in values]
        else:
            low, high = torch.iinfo(d).min, torch.iinfo(d).max
            values = [v if type(v) is int and low <= v <= high else _bad() for v in values]
        return torch.tensor(values, dtype=d).reshape(shape)
    raise ValueError("malformed observation: an unknown tag")


def _number(v) -> float:
    if type(v) is float or _int(v):
        return float(v)
    if type(v) is dict and len(v) == 1 and v.get("$float") in ("nan", "inf", "-inf"):
        return float(v["$float"])
    return _bad()


def _bad():
    raise ValueError("malformed observation: a tensor entry of the wrong type")
