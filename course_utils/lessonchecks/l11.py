"""Lesson 11 (when one device cannot hold a layer): the checks of its three exercises, used by the
visible and the hidden tests.

tp_mlp takes [(world_size, seed, b, d, h, dtype name)]: one forward and backward of a tensor-
parallel MLP in real gloo process groups, on tp_problem's inputs, with every collective counted.
one_f_one_b takes {"values": [(p, m)], "bad": [(p, m)]} ("bad": arguments the docstring says must
raise ValueError); its judge checks the schedule's rules, not one grid. `want` comes from the test
cell (its literals or expect()): tp_mlp's whole outputs and gradients from one process's autograd,
one_f_one_b's length and in-flight bounds. overlapped_allreduce takes
[(world_size, seed, kind, bucket_bytes)]: two steps of data parallel in real gloo process groups on
overlap_problem's model, every dist.all_reduce noted with the gradients accumulated when it was
made; `want`, the whole batch's gradients and the bucket layout, from the test cell's expect().
"""

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from course_utils.checks import check_tensor
from course_utils.judging import (Check, MALFORMED, call_name, check_raised, name_of, outcome,
                                  raised, raised_name, results, value_of)
from course_utils.lessonchecks.workers import judge_failure, run_cases

# This lesson's test cells may start processes: tp_mlp and overlapped_allreduce run in real gloo
# process groups (course_utils.parallel.run_workers). The grader forbids it in every other
# lesson's test cells (course_utils.grader.lessonfile.probes_start_processes).
PROBES_START_PROCESSES = True


def _parts(got, keys) -> dict:
    assert type(got) is dict and set(got) == set(keys), MALFORMED
    return got


# Exercise 1: tp_mlp(x, dy, W1, b1, W2, b2), run in every rank of a gloo group: the MLP
# y = tanh(x W1^T + b1) W2^T + b2 with W1, b1 split by rows (column-parallel) and W2 by the same
# columns (row-parallel); returns {"y", "dx"} whole and {"dW1", "db1", "dW2"} this rank's shards,
# "db2" whole; one all_reduce (SUM) in the forward and one in the backward, no other collective.
# cases: [(world_size, seed, b, d, h, dtype)];
# want: [{"y", "dx", "dW1", "db1", "dW2", "db2"}: the whole tensors of tp_problem(seed, b, d, h,
# dtype)'s MLP, one process's autograd].

OUTPUTS = ("y", "dx", "dW1", "db1", "dW2", "db2")
DTYPES = {"float64": torch.float64, "float32": torch.float32}

# What the probe counts, by kind (the index in this tuple): the collectives of torch.distributed
# (c10d), of its functional collectives and of DTensor, by their ops' names. Barriers, waits and
# other helpers of those namespaces are not counted.
KINDS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "reduce",
         "gather", "scatter", "send or recv")
_KIND_OF = {name: KINDS.index(kind) for kind, names in (
    ("all_reduce", ("allreduce", "all_reduce", "allreduce_coalesced", "all_reduce_coalesced")),
    ("all_gather", ("allgather", "allgather_base", "allgather_coalesced",
                    "allgather_into_tensor_coalesced", "all_gather_into_tensor",
                    "all_gather_into_tensor_coalesced", "all_gather_into_tensor_out")),
    ("reduce_scatter", ("reduce_scatter", "reduce_scatter_base", "reduce_scatter_tensor",
                        "reduce_scatter_tensor_coalesced", "reduce_scatter_tensor_out")),
    ("broadcast", ("broadcast",)),
    ("all_to_all", ("alltoall", "alltoall_base", "all_to_all_single", "shard_dim_alltoall")),
    ("reduce", ("reduce",)), ("gather", ("gather",)), ("scatter", ("scatter",)),
    ("send or recv", ("send", "recv", "recv_any_source", "isend", "irecv", "batch_p2p_ops")))
    for name in names}
_NAMESPACES = {"c10d", "_c10d_functional", "c10d_functional", "_c10d_functional_autograd",
               "_dtensor"}


class _Collectives(TorchDispatchMode):
    """Counts the collectives that run inside it by kind (KINDS), plain torch.distributed calls,
    functional collectives and DTensor's alike, in the forward and in autograd's backward."""

    def __init__(self):
        super().__init__()
        self.counts = [0] * len(KINDS)
        self.first_summed = None    # a copy of what the first all_reduce summed, before it ran

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        from torch.distributed.tensor import DTensor
        if any(issubclass(t, DTensor) for t in types):
            return NotImplemented   # DTensor first turns into local ops and collectives
        schema = getattr(func, "_schema", None)   # a higher-order operator has none
        namespace, _, name = (schema.name if schema is not None else "").partition("::")
        name = name.strip("_")
        collective = namespace in _NAMESPACES and name in _KIND_OF
        if collective and _KIND_OF[name] == 0 and self.first_summed is None:
            first = args[0][0] if isinstance(args[0], (list, tuple)) else args[0]
            if type(first) is torch.Tensor:
                self.first_summed = first.detach().clone()
        out = func(*args, **(kwargs or {}))
        if collective:
            self.counts[_KIND_OF[name]] += 1
        return out


def tp_problem(seed: int, b: int, d: int, h: int, dtype: str = "float64"):
    """(x, dy, W1, b1, W2, b2): a batch x (b, d), the gradient dy (b, d) of a loss with respect to
    the MLP's output, and the MLP's whole weights in nn.Linear's layout, W1 (h, d), b1 (h,),
    W2 (d, h), b2 (d,), of dtype "float64" or "float32"; the same in every process that calls it
    with the same arguments."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
    gen = torch.Generator().manual_seed(seed)

    def draw(*shape, scale=1.0):
        return (torch.randn(*shape, generator=gen, dtype=torch.float64) * scale).to(DTYPES[dtype])

    return (draw(b, d), draw(b, d), draw(h, d, scale=d ** -0.5), draw(h, scale=0.5),
            draw(d, h, scale=h ** -0.5), draw(d, scale=0.5))


def _tp_worker(rank, world_size, recipe, seed, b, d, h, dtype):
    """In each worker: the learner's tp_mlp (rebuilt from recipe) on tp_problem's inputs, its
    collectives counted; {"returned": the result's type name, "outputs": {key: tensor, the name of
    another type, or None when missing} (None when the result is no dict), "collectives": the
    counts by KINDS}."""
    from torch.distributed._functional_collectives import AsyncCollectiveTensor

    from course_utils.parallel import rebuilt

    def plain(value):
        """A tensor's copy (a functional collective's result, waited for), else its type's name."""
        if isinstance(value, AsyncCollectiveTensor):
            value = value.trigger_wait()
        return value.detach().clone() if type(value) is torch.Tensor else type(value).__name__

    tp_mlp = rebuilt(recipe)
    inputs = tp_problem(seed, b, d, h, dtype)
    with _Collectives() as seen:
        result = tp_mlp(*inputs)
    outputs = None
    if isinstance(result, dict):
        outputs = {k: None if result.get(k) is None else plain(result[k]) for k in OUTPUTS}
    return {"returned": type(result).__name__, "outputs": outputs, "collectives": seen.counts,
            "first_summed": seen.first_summed}


def _probe_tp(fn, cases):
    """Each case: every rank's outputs and collectives, or what went wrong (see run_cases)."""
    return run_cases(_tp_worker, fn, cases, "tp_mlp")


def _where(world_size, b, d, h, dtype) -> str:
    return (f"tp_mlp with {world_size} rank{'s' if world_size > 1 else ''}, x of shape ({b}, {d}), "
            f"h = {h}, {dtype}")


def _rank_parts(problem, rank: int, world_size: int) -> dict:
    """Known wrong answers of rank `rank`: its partial y (before the all_reduce, without b2) and
    its partial dx (its hidden units' contribution), from its own shards."""
    x, dy, W1, b1, W2, b2 = problem
    k = W1.shape[0] // world_size
    rows = slice(rank * k, (rank + 1) * k)
    t = torch.tanh(x @ W1[rows].T + b1[rows])
    return {"y": t @ W2[:, rows].T, "dx": ((dy @ W2[:, rows]) * (1 - t * t)) @ W1[rows]}


def _shard(key: str, whole: torch.Tensor, rows) -> torch.Tensor:
    """The part of a whole output or gradient that one rank returns (rows: its hidden units)."""
    return whole[:, rows] if key == "dW2" else whole[rows] if key in ("dW1", "db1") else whole


def _shape_hints(key, b, d, h, world_size) -> dict:
    """{a wrong shape: why} for one output."""
    hints = {}
    if world_size > 1:
        whole = {"dW1": (h, d), "db1": (h,), "dW2": (d, h)}
        if key in whole:
            hints[whole[key]] = (f"the whole {key}'s shape: return this rank's shard, its h/N = "
                                 f"{h // world_size} hidden units")
        if key == "dW1" and d % world_size == 0:
            hints[(h, d // world_size)] = ("W1 is split by its rows, the output features "
                                           "(column-parallel), not its columns")
        if key == "dW2" and d % world_size == 0:
            hints[(d // world_size, h)] = ("W2 is split by its columns, the input features "
                                           "(row-parallel), not its rows")
    return hints


def _mistakes(key, right, whole, parts, problem, rank, world_size) -> dict:
    """{description: wrong tensor} for one output of one rank."""
    n = world_size
    b2 = problem[5]
    many = ("dy was all-reduced again in the backward (as torch.distributed.nn.functional."
            "all_reduce's backward does): the all_reduce's backward is the identity, every rank "
            f"already holds the whole dy, so every gradient comes out {n} times too large")
    if key == "y":
        partial = ("the row-parallel Linear's output is a partial sum on each rank: all_reduce it "
                   "(SUM)")
        return {partial: parts["y"] + b2, f"{partial}, then add b2": parts["y"],
                f"b2 is added on every rank before the all_reduce, so it is counted {n} times: add "
                "it after": right + (n - 1) * b2,
                "b2 is missing: add it once, after the all_reduce": right - b2}
    if key == "dx":
        return {"the backward needs an all_reduce of dx: each rank's dx is the contribution of "
                "its h/N hidden units": parts["dx"], many: n * right}
    if key == "db2":
        return {"db2 was summed over the ranks: b2 is not split, every rank's db2 = dy.sum(0) is "
                "already whole": n * right}
    k = right.shape[-1] if key == "dW2" else right.shape[0]
    wrong = {many: n * right}
    for other in range(n):
        if other != rank:
            wrong[f"this is rank {other}'s shard: rank r keeps hidden units r*h/N .. "
                  f"(r+1)*h/N - 1, here {rank * k} .. {rank * k + k - 1}"] = \
                _shard(key, whole, slice(other * k, (other + 1) * k))
    wrong[f"this shard holds hidden units {rank}, {rank + n}, {rank + 2 * n}, ... (a strided "
          "split): rank r keeps the contiguous hidden units r*h/N .. (r+1)*h/N - 1"] = \
        _shard(key, whole, slice(rank, None, n))
    return wrong


def _counted(counts) -> str:
    """Collective counts (by KINDS) as words: '3 all_reduce calls and 1 all_gather'."""
    parts = [f"{c} {kind}" + (" calls" if kind == "all_reduce" and c > 1 else "")
             for kind, c in zip(KINDS, counts) if c]
    if not parts:
        return "no collective"
    return ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1]


def _judge_tp_rank(where, rank, case, out, whole) -> None:
    world_size, seed, b, d, h, dtype = case
    assert type(out) is dict and set(out) == {"returned", "outputs", "collectives",
                                               "first_summed"}, MALFORMED
    if out["outputs"] is None:
        raise AssertionError(f"{where}: tp_mlp should return a dict with the keys "
                             f"{list(OUTPUTS)}, got a {name_of(out['returned'])} on rank {rank}")
    outputs = _parts(out["outputs"], OUTPUTS)
    missing = [k for k in OUTPUTS if outputs[k] is None]
    assert not missing, (f"{where}: rank {rank}'s dict has no {missing} (or None there): tp_mlp "
                         f"returns {list(OUTPUTS)}")
    problem = tp_problem(seed, b, d, h, dtype)
    parts = _rank_parts(problem, rank, world_size)
    k = h // world_size
    rows = slice(rank * k, (rank + 1) * k)
    tol = ({"rtol": 1e-5, "atol": 1e-6} if dtype == "float32"
           else {"rtol": 1e-9, "atol": 1e-12})
    for key in OUTPUTS:
        got, right = outputs[key], _shard(key, whole[key], rows)
        name = f"{where}, rank {rank}'s {key}"
        if type(got) is str:
            hint = {"DTensor": ": return its local shard (.to_local()) or the whole tensor "
                               "(.full_tensor()), as the docstring says",
                    "Parameter": ": return a plain tensor (.detach())"}.get(got, "")
            raise AssertionError(f"{name} should be a torch.Tensor, got {name_of(got)}{hint}")
        if type(got) is torch.Tensor:
            shape = tuple(got.shape)
            hint = _shape_hints(key, b, d, h, world_size).get(shape)
            if hint:
                raise AssertionError(f"{name} has shape {shape}, expected "
                                     f"{tuple(right.shape)}: {hint}")
            if shape == tuple(right.shape) and got.dtype != right.dtype:
                raise AssertionError(f"{name} has dtype {got.dtype}, expected {right.dtype}: "
                                     "keep the inputs' dtype (a buffer made without dtype= is "
                                     "torch's default, float32)")
        check_tensor(got, right, name, **tol, mistakes={
            why: wrong for why, wrong in _mistakes(key, right, whole[key], parts, problem, rank,
                                                   world_size).items()
            if not torch.allclose(wrong, right, **tol)})
    summed = out["first_summed"]
    assert summed is None or type(summed) is torch.Tensor, MALFORMED
    whole_y = whole["y"] - problem[5]       # the whole MLP's output before b2
    if (world_size > 1 and summed is not None and summed.shape == whole_y.shape
            and summed.dtype == whole_y.dtype
            and any(torch.allclose(summed, w, **tol) for w in (whole_y, whole["y"]))):
        raise AssertionError(f"{where}: rank {rank} all-reduced the whole MLP's output: every rank "
                             "computed all h hidden units, which is no split at all; each rank "
                             "computes only its h/N hidden units, and the all_reduce sums their "
                             "partial outputs")
    counts = out["collectives"]
    assert type(counts) is list and len(counts) == len(KINDS) \
        and all(type(c) is int for c in counts), MALFORMED
    # with one rank, DTensor skips the all_reduces (they would change nothing): none is fine too
    if (counts[0] != 2 or sum(counts) != 2) and not (world_size == 1 and sum(counts) == 0):
        one = " (with one rank, no collective at all is fine too)" if world_size == 1 else ""
        if counts[KINDS.index("scatter")] or counts[KINDS.index("broadcast")]:
            one += (" (parallelize_module and distribute_tensor send rank 0's weights to the "
                    "others unless src_data_rank=None: every rank holds them already)")
        raise AssertionError(f"{where}: rank {rank} made {_counted(counts)}: exactly one "
                             "all_reduce in the forward (of y's partial sum) and one in the "
                             f"backward (of dx's partial sum), no other collective{one}")


def _judge_tp(got, want, cases):
    for found, whole, case in zip(results(got, cases, "tp_mlp"), want, cases):
        where = _where(case[0], *case[2:])
        if type(found) is not list:
            judge_failure(found, where, "tp_mlp",
                          "rank r keeps rows r*h/N .. (r+1)*h/N - 1 of W1 and b1 and the same "
                          "columns of W2; the two all_reduces are of (b, d) tensors")
        assert len(found) == case[0], f"{where}: expected one result per rank"
        for rank, out in enumerate(found):
            _judge_tp_rank(where, rank, case, out, whole)


TP_MLP = Check("tp_mlp", _probe_tp, _judge_tp)


# Exercise 2: one_f_one_b(p, m) -> the 1F1B schedule in lesson 08's grid format: p rows (stage 0
# first) of 2(m + p - 1) strings, "F{j}", "B{j}" or "" (idle); each F j and B j once per stage; F j
# on stage s strictly after F j on stage s - 1; B j on stage s strictly after B j on stage s + 1
# (on the last stage after its own F j); after every step stage s holds at most min(m, p - s)
# micro-batches (forwarded, not yet backwarded). ValueError unless p and m are ints >= 1.
# cases: {"values": [(p, m)], "bad": [(p, m)]};
# want: [{"steps": 2(m + p - 1), "in_flight": [min(m, p - s) for each stage s]}] for "values".

def _probe_pairs(fn, cases):
    return {"values": [outcome(fn, *args) for args in cases["values"]],
            "raised": [raised(fn, *args) for args in cases["bad"]]}


def _why_bad(name: str, value) -> str:
    """Why an argument that must be an int >= 1 is invalid, in the docstring's terms."""
    return (f"{name} = {value!r} is "
            + (f"a {type(value).__name__}, not an int" if type(value) is not int else "below 1"))


def _op(cell, m: int):
    """("F" or "B", j) for a valid entry of the grid, ("", None) for an idle step, None for
    anything else."""
    if type(cell) is not str:
        return None
    if cell == "":
        return ("", None)
    digits = cell[1:]
    if (cell[:1] in ("F", "B") and digits.isascii() and digits.isdigit()
            and str(int(digits)) == digits and int(digits) < m):
        return (cell[0], int(digits))
    return None


def _kind_of(value) -> str:
    return "None" if value is None else f"a {name_of(type(value).__name__)}"


def _first_order_error(name, p, m, times) -> str | None:
    """The earliest step at which a dependency is broken, as a message (of equal steps, the one
    nearest the start of the micro-batch's flow: forwards down the stages, then backwards up);
    None when none is."""
    found = []   # (step, place in the flow, message)
    for j in range(m):
        for s in range(1, p):
            t, before = times["F"][s][j], times["F"][s - 1][j]
            if t <= before:
                when = "in the same step as" if t == before else f"before (step {before})"
                found.append((t, s, f"{name}: stage {s} runs F{j} at step {t}, {when} stage "
                                    f"{s - 1}: F{j} on stage {s} needs stage {s - 1}'s output "
                                    "from an earlier step"))
        t, own = times["B"][p - 1][j], times["F"][p - 1][j]
        if t <= own:
            found.append((t, p, f"{name}: the last stage, {p - 1}, runs B{j} at step {t} and F{j} "
                                f"at step {own}: the backward of a micro-batch starts on the last "
                                "stage strictly after its forward"))
        for s in range(p - 1):
            t, after = times["B"][s][j], times["B"][s + 1][j]
            if t <= after:
                when = "in the same step as" if t == after else f"before (step {after})"
                found.append((t, 2 * p - s, f"{name}: stage {s} runs B{j} at step {t}, {when} "
                                            f"stage {s + 1}: B{j} on stage {s} needs stage "
                                            f"{s + 1}'s gradient from an earlier step"))
    return min(found)[2] if found else None


def _judge_schedule(result, p, m, want) -> None:
    name = call_name("one_f_one_b", p, m)
    grid = value_of(result, name)
    assert type(want) is dict and set(want) == {"steps", "in_flight"}, MALFORMED
    steps, caps = want["steps"], want["in_flight"]
    if not (type(grid) is list and all(type(row) is list for row in grid)):
        raise AssertionError(f"{name} should be a list of {p} lists, one row of strings per "
                             f"stage, got {_kind_of(grid)}"
                             + (" of rows that are not all lists" if type(grid) is list else ""))
    assert len(grid) == p, f"{name} has {len(grid)} rows, expected {p}: one per stage"
    for s, row in enumerate(grid):
        for t, cell in enumerate(row):
            if _op(cell, m) is None:
                shown = repr(cell) if type(cell) is str else _kind_of(cell)
                raise AssertionError(f"{name}: stage {s}'s step {t} holds {shown}: each entry is "
                                     f"\"\" (idle), \"F{{j}}\" or \"B{{j}}\" with j from 0 to "
                                     f"m - 1 = {m - 1}, written as gpipe_schedule writes them")
    lengths = [len(row) for row in grid]
    if len(set(lengths)) > 1:
        raise AssertionError(f"{name}: the rows hold {lengths} entries: pad every row with \"\" "
                             f"to 2(m + p - 1) = {steps} steps, one entry per time step")
    if 0 < lengths[0] < steps and all("" not in row for row in grid):
        raise AssertionError(f"{name}: the rows hold only their {lengths[0]} operations, no idle "
                             "steps: a row has one entry per time step, \"\" where the stage "
                             f"waits, 2(m + p - 1) = {steps} in all")
    times = {"F": [[None] * m for _ in range(p)], "B": [[None] * m for _ in range(p)]}
    for s, row in enumerate(grid):
        for t, cell in enumerate(row):
            kind, j = _op(cell, m)
            if kind:
                assert times[kind][s][j] is None, \
                    (f"{name}: stage {s} runs {kind}{j} twice (steps {times[kind][s][j]} and {t}): "
                     "each stage runs each micro-batch's forward and backward once")
                times[kind][s][j] = t
    # the missing operation that comes first in the flow of micro-batch j: forwards down the
    # stages, then backwards up
    never = [(j, kind == "B", s if kind == "F" else p - 1 - s, s, kind)
             for kind in ("F", "B") for s in range(p) for j in range(m)
             if times[kind][s][j] is None]
    if never:
        j, _, _, s, kind = min(never)
        raise AssertionError(f"{name}: stage {s} never runs {kind}{j}: each stage runs the forward "
                             "and the backward of every micro-batch")
    wrong = _first_order_error(name, p, m, times)
    if wrong:
        raise AssertionError(wrong)
    gpipe = all(max(times["F"][s]) < min(times["B"][s]) for s in range(p))
    for s in range(p):
        held, most, when = 0, 0, 0
        for t in range(lengths[0]):
            held += (t in times["F"][s]) - (t in times["B"][s])
            if held > most:
                most, when = held, t
        if most <= caps[s]:
            continue
        said = (f"{name}: stage {s} holds {most} micro-batches after step {when}; 1F1B holds at "
                f"most min(m, p - s) = {caps[s]} there")
        if gpipe and most == m:
            raise AssertionError(f"{said}: that is GPipe's order (every forward before the first "
                                 "backward): start a stage's backwards as soon as their gradients "
                                 "arrive, and stop its forwards at min(m, p - s) in flight")
        if most == min(m, p):
            raise AssertionError(f"{said}: a bound of p (or m) on every stage is too loose: stage "
                                 "s's first gradient comes back 2(p - s) - 1 steps after its first "
                                 "forward, so p - s micro-batches in flight keep it busy")
        raise AssertionError(f"{said}: run a backward as soon as its gradient arrives, and a "
                             "forward only while the stage holds fewer")
    if lengths[0] != steps:
        raise AssertionError(f"{name} takes {lengths[0]} steps; 1F1B takes 2(m + p - 1) = {steps}: "
                             "a stage waits longer than it must (run a backward as soon as its "
                             "gradient arrives, and a forward whenever the stage may hold one "
                             "more), or the rows have idle steps past the last operation")


def _judge_one_f_one_b(got, want, cases):
    got = _parts(got, ("values", "raised"))
    for result, right, (p, m) in zip(results(got["values"], cases["values"], "one_f_one_b"), want,
                                     cases["values"]):
        _judge_schedule(result, p, m, right)
    for r, args in zip(results(got["raised"], cases["bad"], "one_f_one_b with invalid arguments"),
                       cases["bad"]):
        try:
            check_raised(r, call_name("one_f_one_b", *args))
        except AssertionError as e:
            p, m = args
            why = _why_bad("p", p) if type(p) is not int or p < 1 else _why_bad("m", m)
            raise AssertionError(f"{e}: {why}") from None


ONE_F_ONE_B = Check("one_f_one_b", _probe_pairs, _judge_one_f_one_b)


# Exercise 3: overlapped_allreduce(model, bucket_bytes) -> finish, in every rank. cases:
# (world_size, seed, kind, bucket_bytes); want: per case {"grads": [for each step, the whole
# batch's gradient of each parameter, None where frozen], "buckets": [parameters per bucket, in
# launch order]} (the instructor's expect(): the bucket layout by the docstring's rule). Each step
# has a batch of its own: a bucket's buffer left from the step before cannot pass.

OVERLAP_KINDS = {"plain": ("", None),
                 "frozen": (" and a frozen parameter",
                            "a frozen parameter never gets a gradient: leave it out of the "
                            "buckets"),
                 "float32": (" and a float32 model",
                             "the parameters and their gradients are float32 here")}
OVERLAP_STEPS = 2       # a second backward after finish(): what finish makes ready is used


def overlap_problem(seed: int, kind: str = "plain"):
    """(model, X): an MLP of four Linear layers (8 parameters; float64, or float32 for kind
    "float32") and X of shape (OVERLAP_STEPS, 12, 5), a batch of 12 for each step, the same in every
    process that calls this with the same seed; kind "frozen" freezes the second layer's bias. The
    loss of a batch is model(batch).square().sum(1).mean()."""
    if kind not in OVERLAP_KINDS:
        raise ValueError(f"kind must be one of {sorted(OVERLAP_KINDS)}, got {kind!r}")
    dtype = torch.float32 if kind == "float32" else torch.float64
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(5, 6), nn.Tanh(), nn.Linear(6, 6), nn.Tanh(),
                          nn.Linear(6, 6), nn.Tanh(), nn.Linear(6, 3)).to(dtype)
    if kind == "frozen":
        model[2].bias.requires_grad_(False)
    return model, torch.randn(OVERLAP_STEPS, 12, 5, dtype=dtype)


def _overlap_worker(rank, world_size, recipe, seed, kind, bucket_bytes):
    """In each worker: the learner's overlapped_allreduce on this rank's model, then OVERLAP_STEPS
    steps of backward on this rank's share and finish(); per step each parameter's .grad after
    finish, how finish ended (None: it returned None) and every dist.all_reduce call: the
    gradients accumulated when it was made (counted by hooks registered before the learner's, so
    they run first), the phase (backward or finish), whether it was async, its size."""
    import torch.distributed as dist

    from course_utils.parallel import rebuilt
    overlapped_allreduce = rebuilt(recipe)
    model, X = overlap_problem(seed, kind)
    n = X.shape[1]
    mine = X[:, rank * n // world_size:(rank + 1) * n // world_size]    # each step's share
    state = {"arrived": 0, "phase": "setup"}

    def count(p):
        state["arrived"] += 1

    for p in model.parameters():
        if p.requires_grad:
            p.register_post_accumulate_grad_hook(count)
    calls, real = [], dist.all_reduce

    def all_reduce(tensor, *args, **kwargs):
        async_op = kwargs.get("async_op", args[2] if len(args) > 2 else False)
        call = {"arrived": state["arrived"], "phase": state["phase"], "async": bool(async_op),
                "numel": tensor.numel(), "waited": None}
        calls.append(call)
        work = real(tensor, *args, **kwargs)
        return work if work is None else _WatchedWork(work, call, state)

    dist.all_reduce = all_reduce
    try:
        finish = overlapped_allreduce(model, bucket_bytes)
        steps = []
        for step in range(OVERLAP_STEPS):
            model.zero_grad()
            state["arrived"] = 0
            del calls[:]
            loss = model(mine[step]).square().sum(1).mean()
            state["phase"] = "backward"
            loss.backward()
            state["phase"] = "finish"
            try:     # what finish raised is judged after the calls that explain it
                ended = (("not callable",) if not callable(finish) else
                         None if finish() is None else ("returned",))
            except Exception as e:  # the learner's error: an observation
                ended = ("raised", type(e).__name__)
            state["phase"] = "after"
            steps.append({"grads": [None if p.grad is None else p.grad.detach().clone()
                                    for p in model.parameters()],
                          "calls": list(calls),
                          "ended": ended})
    finally:
        dist.all_reduce = real
    return steps


class _WatchedWork:
    """An async all_reduce's Work, noting in which phase (backward, finish) it was first waited
    for."""

    def __init__(self, work, call: dict, state: dict):
        self._work, self._call, self._state = work, call, state

    def wait(self, *args, **kwargs):
        if self._call["waited"] is None:
            self._call["waited"] = self._state["phase"]
        return self._work.wait(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._work, name)


def _probe_overlap(fn, cases):
    """Each case: every rank's steps (see _overlap_worker), or what went wrong (run_cases)."""
    return run_cases(_overlap_worker, fn, cases, "overlapped_allreduce", timeout=15)


def _rank_overlap_grads(world_size, rank, seed, kind, step):
    """Each parameter's gradient of rank `rank`'s share of step `step`'s batch alone (None where
    frozen)."""
    model, X = overlap_problem(seed, kind)
    n = X.shape[1]
    model(X[step, rank * n // world_size:(rank + 1) * n // world_size]).square().sum(1).mean() \
        .backward()
    return [p.grad for p in model.parameters()]


def _judge_overlap_calls(calls, buckets, where):
    """The all-reduces of one backward and finish: one per bucket, async, each launched during the
    backward when its bucket's last gradient arrived."""
    sizes = ", ".join(str(n) for n in buckets)
    during = [c for c in calls if c["phase"] == "backward"]
    if calls and not during:
        raise AssertionError(f"{where}: every all_reduce was made after the backward (in "
                             "finish), where overlap was asked: launch each bucket's all_reduce "
                             "from the hooks, as soon as its last gradient has arrived")
    why = ("" if len(calls) == len(buckets) else
           ": one per parameter ignores bucket_bytes" if len(calls) == sum(buckets) else
           ": more buckets than the rule makes, a parameter joins the bucket while the bucket's "
           "bytes stay <= bucket_bytes (equal included)" if len(calls) > len(buckets) else
           ": fewer buckets than the rule makes, a bucket's bytes never exceed bucket_bytes "
           "unless it holds one parameter")
    assert len(calls) == len(buckets), \
        (f"{where}: {len(calls)} all_reduce calls, expected {len(buckets)}, one per bucket "
         f"(parameters per bucket, last layers first: {sizes}){why}")
    assert len(during) == len(calls), \
        (f"{where}: {len(calls) - len(during)} of the {len(calls)} all_reduces were made after "
         "the backward (in finish): launch each from the hooks, during the backward")
    for i, c in enumerate(calls):
        assert c["waited"] != "backward", \
            (f"{where}: all_reduce {i} was waited for inside the backward (in the hook): the "
             "backward stops there until it is done, and nothing overlaps; keep its Work and "
             "wait in finish")
        assert c["async"], \
            (f"{where}: all_reduce {i} was blocking (async_op=False): the backward waits for it "
             "inside the hook and nothing overlaps; pass async_op=True and wait in finish")
    due = [sum(buckets[:i + 1]) for i in range(len(buckets))]
    for i, (c, ready) in enumerate(zip(calls, due)):
        assert c["arrived"] == ready, \
            (f"{where}: bucket {i}'s all_reduce was made when {c['arrived']} gradients had "
             f"arrived, expected {ready} (the moment the bucket's last gradient arrives; buckets "
             "are filled from the last parameter of model.parameters() back, the order in which "
             f"the backward makes them; parameters per bucket: {sizes})")


def _judge_overlap(got, want, cases):
    for found, right, (world_size, seed, kind, bucket_bytes) in zip(
            results(got, cases, "overlapped_allreduce"), want, cases):
        where = (f"with {world_size} rank{'s' if world_size > 1 else ''}, bucket_bytes "
                 f"{bucket_bytes}{OVERLAP_KINDS[kind][0]}")
        if type(found) is not list:
            judge_failure(found, where, "overlapped_allreduce", OVERLAP_KINDS[kind][1])
        assert len(found) == world_size, f"{where}: expected one result per rank"
        buckets = right["buckets"]
        for rank, steps in enumerate(found):
            assert type(steps) is list and len(steps) == OVERLAP_STEPS, MALFORMED
            for step, out in enumerate(steps):
                whole = right["grads"][step]
                own = _rank_overlap_grads(world_size, rank, seed, kind, step)
                assert type(out) is dict and set(out) == {"grads", "calls", "ended"}, MALFORMED
                at = f"{where}, rank {rank}, backward {step + 1}"
                ended = out["ended"]
                assert ended is None or type(ended) is tuple, MALFORMED
                if ended == ("not callable",):
                    raise AssertionError(f"{where}: overlapped_allreduce should return finish, a "
                                         "function to call after each backward")
                if step and steps[0]["calls"] and not out["calls"]:
                    raise AssertionError(f"{at}: no all_reduce was made: finish must make ready "
                                         "for the next backward (reset what counts the arrived "
                                         "gradients and the launched buckets)")
                _judge_overlap_calls(out["calls"], buckets, at)
                if ended and ended[0] == "raised":
                    raise AssertionError(f"{at}: finish raised {raised_name(ended[1:])}")
                assert ended is None, \
                    (f"{at}: finish returned a value: it should return None (it leaves the mean "
                     "gradient in each .grad)")
                grads = out["grads"]
                assert type(grads) is list and len(grads) == len(whole), MALFORMED
                for i, (e, g, mine) in enumerate(zip(whole, grads, own)):
                    name = f"{at}: the gradient of parameter {i}"
                    if e is None:
                        assert g is None, f"{name} should stay None: the parameter is frozen"
                        continue
                    assert g is not None, f"{name} is None"
                    tol = (1e-5, 1e-6) if e.dtype == torch.float32 else (1e-9, 1e-12)
                    mistakes = {
                        "the gradients were summed over the ranks but not divided by the world "
                        "size": e * world_size,
                        "this is the rank's own gradient: the all-reduced bucket was never "
                        "copied back into .grad, or never all-reduced": mine,
                        "the rank's own gradient was divided by the world size but never "
                        "all-reduced": mine / world_size}
                    if step:
                        mistakes["this is the previous backward's mean gradient: each backward's "
                                 "buckets must take that backward's gradients (a buffer made "
                                 "once and reused keeps the old values)"] = \
                            right["grads"][step - 1][i]
                    check_tensor(g, e, name, rtol=tol[0], atol=tol[1], mistakes=mistakes)


OVERLAPPED_ALLREDUCE = Check("overlapped_allreduce", _probe_overlap, _judge_overlap)
