"""Lesson 09 (a bigger batch): the checks of its four exercises, used by the visible and the hidden
tests.

loss_scale and zero_bytes_per_rank take cases {"values": [args], "bad": [args]} ("bad": arguments
the docstring says must raise ValueError); bf16_pack_unpack takes [(sizes, batch, dtype name,
seed)], a small Linear/GELU network's forward and backward under the learner's hooks;
sharded_sgd_step takes [(world_size, n, dtype name, seed)] and runs in real gloo process groups.
`want` is the right answers for the "values" cases (the visible test's literals, or the hidden
test's expect()).
"""

import gc
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.graph import saved_tensors_hooks
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._pytree import tree_leaves

from course_utils.checks import check_tensor
from course_utils.judging import (Check, MALFORMED, argument, check_raised, name_of, outcome,
                                  raised, raised_name, results, value_of)
from course_utils.lessonchecks.workers import judge_failure, run_cases
from course_utils.memory import _Recorder

HALF = {"float16": torch.float16, "bfloat16": torch.bfloat16}


# This lesson's test cells may start processes: sharded_sgd_step runs in real gloo process groups
# (course_utils.parallel.run_workers). The grader forbids it in every other lesson's test cells
# (course_utils.grader.lessonfile.probes_start_processes).
PROBES_START_PROCESSES = True


def _parts(got, keys) -> dict:
    assert type(got) is dict and set(got) == set(keys), MALFORMED
    return got


def _probe_values(call):
    """A probe for cases {"values": [args], "bad": [args]}: call(fn, *args) on each, as data."""
    def probe(fn, cases):
        return {"values": [outcome(call, fn, *args) for args in cases["values"]],
                "raised": [raised(call, fn, *args) for args in cases["bad"]]}
    return probe


def _judge_bad(found, bad, name, why) -> None:
    for r, args in zip(results(found, bad, f"{name} with invalid arguments"), bad):
        try:
            check_raised(r, name(*args) if callable(name) else name)
        except AssertionError as e:
            raise AssertionError(f"{e}: {why(*args)}") from None


# Exercise 1: loss_scale(grads, dtype) -> the largest power of two S (a Python float) with
# max|g| * S <= finfo(dtype).max; ValueError when grads has no nonzero value, a nan or an inf, when
# dtype is not float16 or bfloat16, or when at that S a nonzero |g| * S falls below dtype's smallest
# subnormal, finfo.tiny * finfo.eps. cases: (values as a list of floats, grads' dtype name, dtype
# name).

def _call_scale(fn, values, grads_dtype, dtype):
    return fn(torch.tensor(values, dtype=getattr(torch, grads_dtype)),
              HALF.get(dtype, getattr(torch, dtype)))


def _scale_call(values, grads_dtype, dtype) -> str:
    shown = ([argument(v) for v in values[:4 if len(values) <= 4 else 3]]
             + ["..."] * (len(values) > 4))
    return f"loss_scale(tensor([{', '.join(shown)}], dtype={grads_dtype}), torch.{dtype})"


def _judge_scale_value(result, values, grads_dtype, dtype, right) -> None:
    name = _scale_call(values, grads_dtype, dtype)
    if type(result) is dict and "ValueError" in (result.get("raised") or ()):
        fi = torch.finfo(HALF[dtype])
        smallest = min(abs(v) for v in values if v) * right
        hints = [h for h, applies in (("exactly equal is fine", smallest == fi.tiny * fi.eps),
                                      ("zeros never underflow: leave them out", 0.0 in values),
                                      ("grads may be float64", grads_dtype == "float64"),
                                      ("S may be below 1: 2.0 ** k with k < 0", right < 1))
                 if applies]
        raise AssertionError(f"{name} raised ValueError, but these gradients have a loss scale, "
                             f"S = {right!r}: every |g| x S is finite and the smallest nonzero "
                             f"one, {smallest:.6g}, is not below torch.{dtype}'s smallest "
                             f"subnormal {fi.tiny * fi.eps:.6g}"
                             + "".join(f" ({h})" for h in hints))
    got = value_of(result, name)
    if type(got) is not float:
        shown = f" {got!r}" if type(got) in (int, bool) else ""
        raise AssertionError(f"{name} should be a Python float, got "
                             f"{name_of(type(got).__name__)}{shown}"
                             + (" (2 ** k with an int k >= 0 is an int: float(2 ** k) or "
                                "math.ldexp(1.0, k))"
                                if type(got) is int else ""))
    assert math.isfinite(got) and got > 0, f"{name} is {got!r}: a loss scale is a finite number > 0"
    assert math.frexp(got)[0] == 0.5, \
        (f"{name} is {got!r}, not a power of two: multiplying by 2**k changes only the exponent, "
         "so scaling and unscaling are exact; any other factor rounds every gradient")
    top = torch.finfo(HALF[dtype]).max
    largest = max(abs(v) for v in values)
    if largest * got > top:
        hint = ""
        if max(values) * got <= top:
            hint = (": the largest gradient by magnitude is negative here: take "
                    "max(|g|), abs() first")
        if largest > top and got == 2 * right and got < 1:
            k = math.log2(top / largest)
            hint += (f": the exponent k = log2(finfo.max / max|g|) = {k:.3g} is negative here, and "
                     f"int() rounds it toward zero, up to {int(k)}: round down with math.floor "
                     f"({math.floor(k)})")
        elif largest > top:
            hint += (": the largest gradient alone exceeds finfo.max, so S must be below 1 "
                     "(2.0 ** k with k < 0)")
        elif got == 2 * right and math.log2(top / largest) == math.log2(got):
            hint += (f": math.log2(finfo.max / max|g|) gives {math.log2(top / largest)!r} "
                     "here, but the exact value is a little below it: the division and log2 "
                     "rounded it to a whole number. Check the product: while max|g| x 2**k > "
                     "finfo.max, lower k")
        elif math.isfinite(torch.tensor(largest * got, dtype=torch.float64).to(HALF[dtype]).item()):
            hint += (" (the bound is max|g| x S <= finfo.max: compare the product with it; a cast "
                     "to the type rounds values a little above it down)")
        product = f"{largest * got:.6g}" if f"{largest * got:.6g}" != f"{top:.6g}" else \
            f"{top:.6g} + {largest * got - top:.3g}"
        raise AssertionError(f"{name} is {got!r}: max|g| x S = {product} exceeds torch.{dtype}'s "
                             f"largest finite value {top:.6g}{hint}")
    if largest * got * 2 <= top:
        hint = (" (a gradient exactly at the limit, max|g| x S == finfo.max, is allowed: <=, not <)"
                if largest * got * 2 == top else "")
        raise AssertionError(f"{name} is {got!r}, but 2S = {2 * got!r} also keeps every gradient "
                             f"finite (max|g| x 2S = {largest * got * 2:.6g} <= {top:.6g}): the "
                             f"loss scale is the largest such power of two{hint}")
    assert got == right, f"{name} is {got!r}, expected {right!r}"


def _why_scale_bad(values, grads_dtype, dtype) -> str:
    if dtype not in HALF:
        return f"torch.{dtype} is neither float16 nor bfloat16"
    if any(not math.isfinite(v) for v in values):
        return "grads holds a nan or an inf: there is no scale for it"
    if not any(values):
        return ("grads holds no nonzero value: "
                + ("it is empty" if not values else "every gradient is 0"))
    return (f"the gradients span more than torch.{dtype}'s range: at the largest safe scale the "
            "smallest nonzero gradient falls below its smallest subnormal d = finfo.tiny x "
            "finfo.eps, where it becomes 0 or is rounded to d, off by up to all of itself (compare "
            "|g| x S with d; casting to the type rounds instead)")


def _judge_scale(got, want, cases):
    got = _parts(got, ("values", "raised"))
    for result, right, args in zip(results(got["values"], cases["values"], "loss_scale"), want,
                                   cases["values"]):
        _judge_scale_value(result, *args, right)
    _judge_bad(got["raised"], cases["bad"], _scale_call, _why_scale_bad)


LOSS_SCALE = Check("loss_scale", _probe_values(_call_scale), _judge_scale)


# Exercise 2: bf16_pack_unpack(keep) -> (pack, unpack) for torch.autograd.graph.saved_tensors_hooks:
# pack keeps a float32 tensor that shares no storage with a tensor of keep as a bfloat16 copy, any
# other tensor (keep's and their views, a tensor not float32) as it is; unpack gives the saved
# tensor back with its dtype and shape, the bfloat16-stored ones rounded to bfloat16; pack keeps
# nothing alive that the graph would free (the float32 original, or its copies after the backward).
# cases: [(layer sizes, batch, dtype name, seed)]: a Linear/GELU network and cross-entropy on a
# batch X that is a view, one row in, of a tensor `base`; keep is the parameters and base (alive
# anyway); a fifth element "micro": keep holds X instead of base, and the network runs on a
# micro-batch sliced from X (its ._base is base, not X: only storages tell that it shares X's). The
# judge holds each saved tensor to these rules; want is None.

def _hooks_problem(sizes, batch, dtype, seed):
    """(network, base, X, y): Linear layers with GELU between them, in dtype; a batch X, a view one
    row into base (as a micro-batch is: its data starts past its storage's), and its int64
    classes."""
    torch.manual_seed(seed)
    layers = []
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Linear(fan_in, fan_out))
        if i < len(sizes) - 2:
            layers.append(nn.GELU())
    net = nn.Sequential(*layers).to(getattr(torch, dtype))
    gen = torch.Generator().manual_seed(seed)
    base = torch.randn(batch + 1, sizes[0], generator=gen, dtype=torch.float64).to(
        getattr(torch, dtype))
    return net, base, base[1:], torch.randint(0, sizes[-1], (batch,), generator=gen)


def _storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def _created(call):
    """(call(), [[dtype, bytes] of each storage its aten operations made that is still alive after
    it], their weak references): what pack keeps, however it holds it (a tuple, an object, a
    closure), or what unpack makes. A view or an in-place result shares an input's storage: not
    new."""
    made = {}

    def record(name, inputs, outputs):
        # a view or in-place result is not new
        ins = {StorageWeakRef(t.untyped_storage()).cdata for t in tree_leaves(inputs)
               if isinstance(t, torch.Tensor) and t.layout == torch.strided}
        for t in tree_leaves(outputs):
            if (isinstance(t, torch.Tensor) and t.layout == torch.strided
                    and StorageWeakRef(t.untyped_storage()).cdata not in ins):
                ref = StorageWeakRef(t.untyped_storage())
                made.setdefault(ref.cdata, (str(t.dtype).removeprefix("torch."), ref,
                                            t.untyped_storage().nbytes()))

    with _Recorder(record):
        result = call()
    kept = [(dtype, ref, nbytes) for dtype, ref, nbytes in made.values() if not ref.expired()]
    return result, [[dtype, nbytes] for dtype, _, nbytes in kept], [ref for _, ref, _ in kept]


def _micro(batch: int) -> int:
    return (batch + 1) // 2


def _probe_hooks_case(fn, sizes, batch, dtype, seed, keeps="base") -> dict:
    """What the learner's hooks did with each tensor the graph saved: its dtype, shape, whether it
    shares a storage with keep, the tensors pack stored for it (dtype, bytes newly allocated), and
    unpack's result."""
    net, base, X, y = _hooks_problem(sizes, batch, dtype, seed)
    keep = [*net.parameters(), base if keeps == "base" else X]
    if keeps == "micro":
        X, y = X[:_micro(batch)], y[:_micro(batch)]   # a view of X's storage whose ._base is base
    made = outcome(fn, keep)
    if "raised" in made:
        return {"made": made}
    hooks = made["value"]
    if not (type(hooks) is tuple and len(hooks) == 2 and all(callable(h) for h in hooks)):
        return {"made": {"value": name_of(type(hooks).__name__)}}
    user_pack, user_unpack = hooks
    kept = {_storage(t) for t in keep}
    # a record per pack call; (the original's storage, pack's new storages), weakly
    saved, refs = [], []
    unpacked = []          # the storages each unpack call made (what it gave the backward), weakly

    def pack(t):
        record = {"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape),
                  "kept": _storage(t) in kept, "original": t.detach().clone()}
        saved.append(record)
        try:
            stored, record["stored"], made = _created(lambda: user_pack(t))
        except Exception as e:  # what pack raised is the observation
            record["pack_raised"] = tuple(c.__name__ for c in type(e).__mro__)
            raise
        refs.append((StorageWeakRef(t.untyped_storage()), made))
        return len(saved) - 1, stored

    def unpack(packed):
        i, stored = packed
        try:
            t, _, made = _created(lambda: user_unpack(stored))
        except Exception as e:
            saved[i]["unpack_raised"] = tuple(c.__name__ for c in type(e).__mro__)
            raise
        unpacked.append((i, made))
        saved[i]["unpacked"] = (t.detach().clone() if isinstance(t, torch.Tensor)
                                else name_of(type(t).__name__))
        return t

    def step():
        with saved_tensors_hooks(pack, unpack):
            loss = F.cross_entropy(net(X), y)
        # the forward is over: only the graph holds what it saved
        for record, (original, _) in zip(saved, refs):
            record["original_freed"] = original.expired()
        loss.backward()
        del loss   # the graph goes, and with it what pack stored
        gc.collect()
        for record, (_, made) in zip(saved, refs):
            record["copies_freed"] = all(ref.expired() for ref in made)
        for i, made in unpacked:   # the backward used what unpack gave it, and let it go
            saved[i]["unpacked_freed"] = (saved[i].get("unpacked_freed", True)
                                          and all(ref.expired() for ref in made))

    ran = outcome(step)
    return {"made": "ok", "ran": {"raised": ran["raised"]} if "raised" in ran else "ok",
            "saved": saved}


def _probe_hooks(fn, cases):
    return [_probe_hooks_case(fn, *case) for case in cases]


def _judge_saved(where, i, r) -> None:
    assert type(r) is dict and {"dtype", "shape", "kept", "original"} <= set(r), MALFORMED
    what = f"{where}: saved tensor {i + 1} ({r['dtype']}, shape {tuple(r['shape'])}" + \
           (", sharing a storage with keep: a parameter, a view of one such as W.T, or the batch)"
            if r["kept"] else ")")
    if "pack_raised" in r:
        raise AssertionError(f"{what}: pack raised {raised_name(tuple(r['pack_raised']))}")
    assert "stored" in r, MALFORMED
    new = [(dtype, nbytes) for dtype, nbytes in r["stored"]]
    nbytes = (math.prod(r["shape"])
              * torch.tensor([], dtype=getattr(torch, r["dtype"])).element_size())
    if r["kept"] or r["dtype"] != "float32":
        why = ("it shares a storage with a tensor of keep, which is alive anyway: saving it as it "
               "is costs nothing, a copy adds memory (compare storages, "
               "t.untyped_storage().data_ptr(): W.T is a view of W, a micro-batch a view of the "
               "batch's storage; t._base is the tensor the views started from, here a larger "
               "tensor, not the batch in keep)"
               if r["kept"] else f"it is {r['dtype']}, not float32: keep it as it is (int64 "
                                 "classes must stay integers, and a float64 or 16-bit tensor is "
                                 "not what the hooks shrink)")
        assert not new, f"{what}: pack stored a new {new[0][0]} copy ({new[0][1]} bytes), but {why}"
    else:
        assert new, (f"{what}: pack stored it as it is, in float32: nothing was saved (store a "
                     "bfloat16 copy, t.to(torch.bfloat16))")
        assert [d for d, _ in new] == ["bfloat16"], \
            f"{what}: pack stored {', '.join(d for d, _ in new)}, expected one bfloat16 copy" + \
            (" (float16 keeps 3 more bits than bfloat16 but not float32's range: small activations "
             "would underflow)"
             if "float16" in [d for d, _ in new] else "")
        assert sum(n for _, n in new) == nbytes // 2, \
            (f"{what}: pack stored {sum(n for _, n in new)} new bytes, expected {nbytes // 2}: a "
             "bfloat16 copy of it alone")
        if r.get("original_freed") is False:
            raise AssertionError(f"{what}: the float32 tensor is still alive after the forward "
                                 "pass beside its bfloat16 copy: what pack returns keeps it (t "
                                 "itself, or a view of it), so nothing is saved; keep only the "
                                 "copy, and what unpack needs as Python values (its dtype: "
                                 "torch.float32)")
    if r.get("copies_freed") is False:
        raise AssertionError(f"{what}: what pack stored is still alive after the backward pass: "
                             "the hooks keep it themselves (a list or dict of the closure), so "
                             "every step adds to memory; return it from pack, and autograd frees "
                             "it with the graph")
    if "unpack_raised" in r:
        raise AssertionError(f"{what}: unpack raised {raised_name(tuple(r['unpack_raised']))}")
    if r.get("unpacked_freed") is False:
        raise AssertionError(f"{what}: what unpack gave back is still alive after the backward "
                             "pass: the hooks keep it themselves (a cache of the float32 copies), "
                             "so the memory the bfloat16 copies saved comes back; return a new "
                             "tensor each call, and the backward frees it once used")
    if "unpacked" not in r:
        return   # the backward never asked for it (it stopped earlier: reported by the caller)
    got = r["unpacked"]
    assert type(got) is torch.Tensor, f"{what}: unpack returned {got!r}, not a tensor"
    assert str(got.dtype).removeprefix("torch.") == r["dtype"], \
        (f"{what}: unpack gave back {str(got.dtype).removeprefix('torch.')}, expected "
         f"{r['dtype']}: give the backward pass the dtype that was saved (.to(torch.float32) for "
         "the bfloat16 copies)")
    assert list(got.shape) == r["shape"], (f"{what}: unpack gave back shape {tuple(got.shape)}, "
                                           f"expected {tuple(r['shape'])}")
    right = (r["original"] if (r["kept"] or r["dtype"] != "float32")
             else r["original"].to(torch.bfloat16).float())
    assert torch.equal(got, right), f"{what}: unpack gave back other values than " + \
        ("the saved tensor's" if right is r["original"] else "the saved tensor rounded to bfloat16")


def _judge_hooks(got, want, cases):
    for found, (sizes, batch, dtype, seed, *keeps) in zip(results(got, cases, "bf16_pack_unpack"),
                                                          cases):
        where = f"a {dtype} network {'-'.join(map(str, sizes))}, batch {batch}" + (
            f", run on a micro-batch of {_micro(batch)} sliced from it, with the batch (itself a "
            "slice of a larger tensor) in keep" if keeps == ["micro"] else "")
        assert type(found) is dict and "made" in found, MALFORMED
        if found["made"] != "ok":
            # says what it raised, if it raised
            kind = value_of(found["made"], "bf16_pack_unpack(keep)")
            raise AssertionError(f"bf16_pack_unpack(keep) returned a {name_of(kind)}, expected a "
                                 "tuple (pack, unpack) of two functions")
        saved, ran = found.get("saved"), found.get("ran")
        assert type(saved) is list and saved, MALFORMED
        for i, r in enumerate(saved):
            _judge_saved(where, i, r)
        if ran != "ok":
            assert (type(ran) is dict and type(ran.get("raised")) in (tuple, list)
                    and ran["raised"]), MALFORMED
            raise AssertionError(f"{where}: the forward and backward pass under your hooks raised "
                                 f"{raised_name(tuple(ran['raised']))}")


BF16_PACK_UNPACK = Check("bf16_pack_unpack", _probe_hooks, _judge_hooks)


# Exercise 3: zero_bytes_per_rank(num_params, world_size, stage) -> {"params", "grads",
# "optimizer"}, bytes per rank of float32 parameters and gradients and Adam's two float32 numbers
# per parameter; stage 1 shards the optimizer state, 2 also the gradients, 3 also the parameters; a
# sharded part holds ceil(num_params / world_size) numbers per rank. ValueError when num_params or
# world_size is below 1 or stage is not in 0..3 (what a caller could pass; the types are the
# docstring's). cases: (num_params, world_size, stage).

PARTS = {"params": (4, 3, "the float32 parameters"), "grads": (4, 2, "the float32 gradients"),
         "optimizer": (8, 1, "Adam's state (exp_avg and exp_avg_sq, two float32 numbers "
                             "per parameter)")}


def _call_bytes(fn, num_params, world_size, stage):
    return fn(num_params, world_size, stage)


def _bytes_mistakes(part, num_params, world_size, stage) -> dict:
    per, first, what = PARTS[part]
    whole = per * num_params
    sharded = stage >= first and world_size > 1
    mistakes = {}
    if part != "optimizer":
        mistakes[f"{what} take 4 bytes per number (float32), not 1: bytes, not numbers"] = \
            (-(-num_params // world_size)) if sharded else num_params
    if sharded:
        mistakes[f"{what} are not sharded here, but stage {stage} shards them (stage 1 shards the "
                 "optimizer state, 2 also the gradients, 3 also the parameters)"] = whole
        mistakes[f"{num_params} / {world_size} is not a whole number: each rank holds "
                 "ceil(num_params / world_size) numbers (the shards are padded to equal size); "
                 "rounding down loses parameters"] = \
            per * (num_params // world_size)
    else:
        mistakes[f"{what} are sharded here, but stage {stage} keeps a whole copy on every rank "
                 "(stage 1 shards the optimizer state, 2 also the gradients, 3 also the "
                 "parameters)"] = per * -(-num_params // world_size)
    if part == "optimizer":
        mistakes["Adam keeps two float32 numbers per parameter (exp_avg and exp_avg_sq), "
                 "8 bytes, not 4"] = \
            (4 * -(-num_params // world_size)) if sharded else 4 * num_params
    return mistakes


def _judge_bytes(got, want, cases):
    got = _parts(got, ("values", "raised"))
    for result, right, args in zip(results(got["values"], cases["values"], "zero_bytes_per_rank"),
                                   want, cases["values"]):
        name = f"zero_bytes_per_rank{args!r}"
        if (type(result) is dict and "ValueError" in (result.get("raised") or ())
                and args[1] > args[0]):
            raise AssertionError(f"{name} raised ValueError: more ranks than parameters is allowed "
                                 "(each rank then holds ceil(num_params / world_size) = 1 number "
                                 "of each sharded part)")
        parts = value_of(result, name)
        assert (type(parts) is dict and set(parts) == set(PARTS)
                and all(type(k) is str for k in parts)), \
            f"{name} should be a dict with the keys 'params', 'grads' and 'optimizer'"
        for part in PARTS:
            value = parts[part]
            assert type(value) is int, \
                (f"{name}[{part!r}] should be an int number of bytes, got "
                 f"{name_of(type(value).__name__)}") + \
                (f" {value!r} (ceil with integers: -(-a // b), or math.ceil, which returns an int)"
                 if type(value) is float else "")
            if value != right[part]:
                known = [why for why, wrong in _bytes_mistakes(part, *args).items()
                         if wrong == value and wrong != right[part]]
                raise AssertionError(f"{name}[{part!r}] is {value}, expected {right[part]}"
                                     + (f": {known[0]}" if known else ""))

    def why(num_params, world_size, stage):
        for label, v in (("num_params", num_params), ("world_size", world_size)):
            if v < 1:
                return f"{label} = {v!r} is below 1"
        return f"stage = {stage!r} is not one of 0, 1, 2, 3"
    _judge_bad(got["raised"], cases["bad"], lambda *a: f"zero_bytes_per_rank{a!r}", why)


ZERO_BYTES_PER_RANK = Check("zero_bytes_per_rank", _probe_values(_call_bytes), _judge_bytes)


# Exercise 4: sharded_sgd_step(param, grad, momentum, lr, beta), run in every worker of a gloo
# process group: the momentum-SGD step with the mean gradient over the ranks, each rank updating
# only its shard (positions rank*s .. rank*s + s - 1 of the parameters padded to s * world_size,
# s = ceil(n / world_size)), then every rank holding the whole updated param.
# cases: [(world_size, n, dtype, seed)];
# want: [{"param": the parameters after one unsharded step, "momentum": the whole momentum after
# it}].

LR, BETA = 0.1, 0.9
PAD_HINT = ("reduce_scatter_single and all_gather_single need tensors of one dtype, param's, and "
            "of sizes s * world_size and s: pad the gradient and the parameters to s * "
            "world_size with zeros")


def zero_problem(seed: int, n: int, world_size: int, dtype: str = "float64"):
    """(param, grads, momentum): the parameters (n), one gradient per rank (world_size of n) and the
    momentum buffer (n) before the step, the same in every process that calls it with these
    arguments."""
    gen = torch.Generator().manual_seed(seed)
    dt = getattr(torch, dtype)
    param = torch.randn(n, generator=gen, dtype=torch.float64).to(dt)
    grads = [torch.randn(n, generator=gen, dtype=torch.float64).to(dt) for _ in range(world_size)]
    return param, grads, torch.randn(n, generator=gen, dtype=torch.float64).to(dt)


def _shard(full: torch.Tensor, rank: int, world_size: int) -> torch.Tensor:
    """Rank `rank`'s shard of a 1-D tensor padded with zeros to a multiple of world_size (a
    copy)."""
    s = -(-len(full) // world_size)
    padded = torch.cat([full, full.new_zeros(s * world_size - len(full))])
    return padded[rank * s:(rank + 1) * s].clone()


def _zero_worker(rank, world_size, recipe, n, dtype, seed):
    """In each worker: this rank's inputs, the learner's sharded_sgd_step (rebuilt from recipe),
    what it left."""
    from course_utils.parallel import rebuilt
    step = rebuilt(recipe)
    param, grads, momentum = zero_problem(seed, n, world_size, dtype)
    shard = _shard(momentum, rank, world_size)
    returned = step(param, grads[rank].clone(), shard, LR, BETA)
    return {"param": param, "momentum": shard, "returned": returned is None}


def _probe_step(fn, cases):
    """Each case: every rank's param and momentum shard after fn, or what went wrong (see
    run_cases)."""
    return run_cases(_zero_worker, fn, cases, "sharded_sgd_step")


def _judge_rank(where, rank, world_size, n, dtype, seed, out, want) -> None:
    param0, grads, momentum0 = zero_problem(seed, n, world_size, dtype)
    assert type(out) is dict and set(out) == {"param", "momentum", "returned"}, MALFORMED
    s = -(-n // world_size)
    lo, hi = min(rank * s, n), min((rank + 1) * s, n)
    p, m = out["param"], out["momentum"]
    tol = {"rtol": 1e-5, "atol": 1e-6} if dtype == "float32" else {"rtol": 1e-9, "atol": 1e-12}
    name = f"{where}, rank {rank}'s param after the step"
    assert out["returned"] is True, (f"{where}: sharded_sgd_step should return None (it updates "
                                     "param and momentum in place)")
    own = slice(lo, hi)
    if type(p) is torch.Tensor and p.shape == param0.shape and p.dtype == param0.dtype and hi > lo:
        ok = lambda a, b: torch.allclose(a, b, **tol)
        mean = (want["momentum"] - BETA * momentum0)
        if ok(p[own], param0[own]) and not ok(want["param"][own], param0[own]):
            raise AssertionError(f"{name}: its own shard (positions {lo}..{hi - 1}) was not "
                                 "updated: update param in place (param[...] -= ..., "
                                 "param.copy_(...)), do not rebind the name")
        for why, wrong in (("the gradients were summed over the ranks, not averaged (divide by "
                            "the world size)",
                            param0 - LR * (BETA * momentum0 + world_size * mean)),
                           ("this rank's own gradient was used: reduce the gradients over "
                            "the ranks first",
                            param0 - LR * (BETA * momentum0 + grads[rank])),
                           ("the momentum was not used: the step is param -= lr * "
                            "(beta * momentum + mean gradient)",
                            param0 - LR * mean)):
            if world_size > 1 or "own" not in why:
                if ok(p[own], wrong[own]) and not ok(wrong[own], want["param"][own]):
                    raise AssertionError(f"{name}: its own shard (positions {lo}..{hi - 1}) "
                                         f"is wrong: {why}")
        if ok(p[own], want["param"][own]) and not ok(p, want["param"]):
            raise AssertionError(f"{name}: its own shard is right, but the other ranks' shards are "
                                 "not: after the update every rank must hold the whole new param "
                                 "(all-gather the shards)")
    check_tensor(p, want["param"], name, **tol)
    wm = _shard(want["momentum"], rank, world_size)
    name = (f"{where}, rank {rank}'s momentum shard (positions {rank * s}..{rank * s + s - 1} of "
            "the padded buffer)")
    if type(m) is torch.Tensor and m.shape == wm.shape \
            and torch.allclose(m, _shard(momentum0, rank, world_size)) \
            and not torch.allclose(wm, _shard(momentum0, rank, world_size)):
        raise AssertionError(f"{name} was not updated: update the momentum shard in place "
                             "(momentum.mul_(beta).add_(...)), do not rebind the name")
    check_tensor(m, wm, name, **tol)


def _judge_step(got, want, cases):
    for found, right, (world_size, n, dtype, seed) in zip(results(got, cases, "sharded_sgd_step"),
                                                          want, cases):
        where = f"with {world_size} rank{'s' if world_size > 1 else ''}, {n} {dtype} parameters"
        if type(found) is not list:
            judge_failure(found, where, "sharded_sgd_step", PAD_HINT)
        assert len(found) == world_size, f"{where}: expected one result per rank"
        for rank, out in enumerate(found):
            _judge_rank(where, rank, world_size, n, dtype, seed, out, right)


SHARDED_SGD_STEP = Check("sharded_sgd_step", _probe_step, _judge_step)
