"""The grader's wire format: what a learner's probe observed, as JSON, and back.

Observations cross between processes as JSON built by `encode`, parsed by `loads` and read by
`decode`: numbers, strings, lists, tuples, dicts with string keys and tensors (dtype, shape,
values). Anything else, or a subclass of any of these (a float with a clever __eq__), arrives as an
Opaque object whose type name is the original's, so strict checks fail with a message naming it.
Nothing is unpickled, and every size is checked before the work it costs (digits, dimensions,
lengths, nesting).

    line = json.dumps(encode(probe()))   # in the learner's worker (course_utils.grader.cellrunner)
    got = decode(loads(line))            # in the grader, then in the reference worker's judge
"""

import json
import math
import re

import torch

MAX_NODES = 2_000_000       # numbers, strings, containers and tensor entries in one observation
MAX_DEPTH = 32
MAX_STR = 10_000
MAX_DIMS = 32               # a tensor's shape: at most this many entries, each below 2**63
INT_MIN, INT_MAX = -2 ** 63, 2 ** 63 - 1   # encode sends bigger ints as $bigint
MAX_INT_DIGITS = 20         # loads() refuses longer integer literals before Python builds them
_DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32,
    torch.int16, torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128)}


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
            raise ValueError(f"a string of {len(value)} characters is too long "
                             "to send to the grader")
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
    """Stands for a value that could not cross as plain data; its class is named like the
    original."""

    def __repr__(self):
        return f"<{type(self).__name__} object>"


MAX_OPAQUE_TYPES = 512  # type names made in one observation; the rest arrive as "object"


def _opaque(name: str, types: dict[str, type]) -> Opaque:
    """An Opaque object whose class is called `name` (cleaned). `types` belongs to one decode()
    call: classes are never kept between observations, so no learner's names reach another's
    feedback or stay in the reference's memory."""
    if type(name) is not str:
        raise ValueError("malformed observation: $opaque needs a type name")
    name = re.sub(r"[^A-Za-z0-9_ ]", "", name)[:40] or "object"
    if name not in types:
        if len(types) >= MAX_OPAQUE_TYPES:
            name = "object"
        types.setdefault(name, type(name, (Opaque,), {}))
    return types[name]()


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


def decode(data, _depth: int = 0, _state: tuple[list, dict] | None = None):
    """encode's output (as parsed by `loads`) -> plain Python and torch values. Strict: any
    structure encode does not make raises ValueError ("malformed observation: ..."), and every
    size is checked before the work it would cost: ints within int64, tensor shapes of at most
    MAX_DIMS entries below 2**63, strings and keys of at most MAX_STR characters, MAX_NODES in
    all."""
    # (nodes decoded, Opaque classes made): per call
    state = _state if _state is not None else ([0], {})
    count, types = state
    count[0] += 1
    if count[0] > MAX_NODES or _depth > MAX_DEPTH:
        raise ValueError("malformed observation: too large or too deeply nested")
    t = type(data)
    if data is None or t in (bool, float):
        return data
    if t is int:
        if not _int(data):
            raise ValueError("malformed observation: an int beyond int64 "
                             "(encode sends those as $bigint)")
        return data
    if t is str:
        if len(data) > MAX_STR:
            raise ValueError("malformed observation: string too long")
        return data
    if t is list:
        return [decode(v, _depth + 1, state) for v in data]
    if t is not dict or len(data) != 1:
        raise ValueError(f"malformed observation: unexpected {t.__name__}")
    (tag, body), = data.items()
    if tag == "$tuple" and type(body) is list:
        return tuple(decode(v, _depth + 1, state) for v in body)
    if tag == "$dict" and type(body) is dict:
        if any(type(k) is not str or len(k) > MAX_STR for k in body):
            raise ValueError("malformed observation: a dict key that is not a string "
                             "or is too long")
        return {k: decode(v, _depth + 1, state) for k, v in body.items()}
    if tag == "$float" and body in ("nan", "inf", "-inf"):
        return float(body)
    if tag == "$bigint" and type(body) is str and re.fullmatch(r"-?\d{1,400}", body):
        # no exercise returns one; its digits could spell any text in feedback
        return _opaque("int too large", types)
    if tag == "$dtype" and type(body) is str and body in _DTYPES:
        return _DTYPES[body]
    if tag == "$opaque":
        return _opaque(body, types)
    if tag == "$tensor" and type(body) is dict and set(body) == {"dtype", "shape", "data"}:
        dtype, shape, values = body["dtype"], body["shape"], body["data"]
        # Sizes are checked before anything that costs: math.prod of unchecked entries could build
        # numbers of millions of digits.
        if type(dtype) is not str or dtype not in _DTYPES:
            raise ValueError("malformed observation: bad tensor dtype")
        if (type(shape) is not list or len(shape) > MAX_DIMS
                or not all(_int(s) and s >= 0 for s in shape)):
            raise ValueError("malformed observation: bad tensor shape")
        if (type(values) is not list or len(values) > MAX_NODES
                or count[0] + len(values) > MAX_NODES):
            raise ValueError("malformed observation: too large")
        if len(values) != math.prod(shape):
            raise ValueError("malformed observation: tensor data does not match its shape")
        count[0] += len(values)
        d = _DTYPES[dtype]
        if d.is_complex:
            values = [complex(_number(z[0]), _number(z[1])) if type(z) is list and len(z) == 2
                      else _bad() for z in values]
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
