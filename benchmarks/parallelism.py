"""What splitting one layer over processes costs here, and what overlapping data parallel's
all-reduces with the backward pass buys: tensor, sequence, pipeline and overlapped data parallel
over gloo.

    python benchmarks/parallelism.py [--steps 5] [--tau 0.01]

Measured for lesson 11 on CPUs, in real gloo process groups (course_utils.parallel.run_workers),
each rank with one torch thread (a core stands for a device; 4 ranks on a 2-core machine share
them). Each time is the fastest of --steps steps after a warm-up step, on the slowest rank.
1. start-up: seconds for run_workers to start N = 2 and 4 processes (one trivial call each; the
   first call also starts the fork server);
2. tensor parallel, a Megatron MLP (Linear d -> 4d, GELU, Linear 4d -> d, d = 256) on x of shape
   (8, 128, 256), float32, N = 1, 2, 4, written by hand (an autograd Function per all_reduce) and
   with DTensor (ColwiseParallel, RowwiseParallel): the largest difference from one process on the
   full MLP (output and every gradient, the input's too), the collectives of the forward and of
   the backward (CommDebugMode), and per rank the bytes of its parameters, of the activations
   saved for backward, of each collective's full tensor B and what a ring sends per step (an
   all_reduce 2(N-1)/N x B, an all_gather or reduce_scatter (N-1)/N x B), and the time per step;
3. sequence parallel: LayerNorm -> Linear -> GELU -> Linear plus the residual on (8, 128, 256),
   tensor parallel alone (the LayerNorm replicated) against TP + SequenceParallel at N = 2, 4: the
   same figures, and the saved tensors one by one;
4. pipeline schedules of torch.distributed.pipelining, GPipe, 1F1B and interleaved 1F1B (two
   stages per rank), at p = 2 and 4 ranks and m = 4 and 8 micro-batches, on stages of
   course_utils.pipeline.SlowStage (a Linear and tanh that sleep --tau seconds forward and twice
   that backward per micro-batch, split over a rank's stages): the step's time against the
   formula's (no overheads), each rank's idle share against (p - 1) / (v m + p - 1), the most
   micro-batches each rank held (GPipe m, 1F1B min(m, p - rank)), and the bytes sent between
   stages per step;
5. overlapped data parallel at N = 2: 4 Linear(512, 512) with ReLU between, a batch of 256 split
   over the ranks, each gradient all-reduced (a) after backward() returns, (b) per parameter from
   its post-accumulate-grad hook, async, (c) in buckets of ~1 MiB and ~4 MiB (greedy in reverse
   parameter order, all-reduced async when their last gradient arrived); the difference from the
   full batch's gradient in one process, the time per step and up to backward()'s return, the
   all-reduces issued before it returned, the share of their time (issue to completion) that
   passed before it, and the wait after it (these steps are short and noisy: the fastest of
   4 x --steps);
6. context parallel: torch.distributed.tensor.experimental.context_parallel around one
   scaled_dot_product_attention at N = 2 on the CPU: what it does (or the error it raises);
7. a 2-D DeviceMesh of 4 ranks, data parallel x tensor parallel: gradients against one process,
   the collectives of a step.
"""

import argparse
import copy
import os
import platform
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Shard
from torch.distributed.tensor.debug import CommDebugMode
from torch.distributed.tensor.experimental import context_parallel
from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel, SequenceParallel,
                                               parallelize_module)
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from course_utils.memory import SavedTensors, format_bytes, storage_bytes
from course_utils.parallel import WorkerError, run_workers
from course_utils.pipeline import SlowStage, idle_fraction, record_actions

BATCH, SEQ, D = 8, 128, 256          # tensor and sequence parallel: x is (BATCH, SEQ, D)
DP_WIDTH, DP_LAYERS, DP_BATCH = 512, 4, 256


# ---------------------------------------------------------------- 1. start-up


def nothing(rank, world_size):
    return rank


def startup():
    print("\n## 1. start-up of run_workers (gloo), one trivial call")
    for world_size, note in ((2, "  (first call: also starts the fork server)"), (2, ""), (4, "")):
        start = time.perf_counter()
        run_workers(nothing, world_size=world_size, backend="gloo")
        print(f"N = {world_size}: {time.perf_counter() - start:6.2f} s{note}")


# ---------------------------------------------------------------- watching a step (in workers)


def collective_sizes():
    """A dispatch mode that notes (name, bytes) of every collective it sees: the bytes of the
    largest tensor among its inputs and outputs, the full tensor B of an all_reduce, all_gather or
    reduce_scatter."""

    class Sizes(TorchDispatchMode):
        kinds = ("reduce", "gather", "scatter", "broadcast", "all")  # not wait_tensor, _wrap_..

        def __init__(self):
            super().__init__()
            self.seen = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if any(t is DTensor for t in types):
                return NotImplemented  # DTensor first turns into local ops and collectives
            out = func(*args, **(kwargs or {}))
            namespace, name = func._schema.name.split("::")
            if "c10d" in namespace and any(w in name for w in self.kinds):
                tensors = [t for t in tree_leaves((args, kwargs, out))
                           if isinstance(t, torch.Tensor)]
                self.seen.append((name, max(t.numel() * t.element_size() for t in tensors)))
            return out

    return Sizes()


def count_text(mode):
    """CommDebugMode's counts as 'all_reduce x1, ...' (the op names without their namespace)."""
    counts = {str(k).split(".")[-1]: n for k, n in mode.get_comm_counts().items()}
    return ", ".join(f"{k} x{n}" for k, n in counts.items()) or "none"


def traced(fn):
    """fn() under CommDebugMode and collective_sizes(): (its result, counts, [(name, bytes)])."""
    sizes = collective_sizes()
    with CommDebugMode() as counts, sizes:
        out = fn()
    if len(sizes.seen) != counts.get_total_counts():
        raise RuntimeError(f"CommDebugMode counted {counts.get_comm_counts()}, the sizes mode saw "
                           f"{sizes.seen}")
    return out, count_text(counts), sizes.seen


def local(t):
    """A DTensor's shard on this rank; any other tensor itself."""
    return t.to_local() if isinstance(t, DTensor) else t


def saved_activations(fn, params):
    """fn() with autograd's saved tensors noted: (its result, {index: (local shape, bytes)}) for
    the distinct storages saved, the parameters' left out (SavedTensors: a DTensor counts as its
    local shard)."""
    with SavedTensors(exclude=params) as saved:
        out = fn()
    return out, {i: (s.shape, s.nbytes) for i, s in enumerate(saved.saved) if not s.excluded}


def traced_step(forward, params, x, dy):
    """One forward and backward of (forward(x) * dy).sum(), watched: the output, the collectives
    of each pass, their sizes, and the activations saved."""
    (y, saved), fwd, fwd_sizes = traced(lambda: saved_activations(lambda: forward(x), params))
    _, bwd, bwd_sizes = traced(lambda: (y * dy).sum().backward())
    return {"y": y.detach(), "fwd": fwd, "bwd": bwd, "sizes": fwd_sizes + bwd_sizes,
            "saved": sum(n for _, n in saved.values()), "saved_shapes": list(saved.values())}


def fastest_step(forward, params, x, dy, steps):
    """Seconds of the fastest of `steps` forward and backward passes after a warm-up one."""
    times = []
    for _ in range(steps + 1):
        for t in (x, *params):
            t.grad = None
        dist.barrier()
        start = time.perf_counter()
        (forward(x) * dy).sum().backward()
        times.append(time.perf_counter() - start)
    return min(times[1:])


def largest(tensors):
    """The largest absolute entry of any of the tensors: the scale of a max|diff|."""
    return max(t.abs().max().item() for t in tensors)


def max_diff(got, want):
    """The largest absolute difference between paired tensors."""
    return max((g - w).abs().max().item() for g, w in zip(got, want))


def full_grads(model):
    """{name: gradient} of a model's parameters, DTensor gradients gathered whole (a collective:
    every rank calls it, parameters in the same order)."""
    return {n: p.grad.full_tensor() if isinstance(p.grad, DTensor) else p.grad
            for n, p in model.named_parameters()}


def reference_step(model, forward, x, dy):
    """One process on the full model: forward(x) and {name: gradient}, x's as 'x'."""
    x = x.clone().requires_grad_()
    y = forward(x)
    (y * dy).sum().backward()
    return y.detach(), {"x": x.grad, **full_grads(model)}


def test_data(b, s, d):
    """The same input x and output gradient dy, both (b, s, d), on every rank."""
    g = torch.Generator().manual_seed(1)
    return torch.randn(b, s, d, generator=g), torch.randn(b, s, d, generator=g)


# ---------------------------------------------------------------- 2. tensor parallel


def megatron_mlp(d):
    """Linear d -> 4d, GELU, Linear 4d -> d, the same on every rank (seed 0)."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))


def megatron_ops():
    """Megatron's f (identity forward, all_reduce of the gradient backward) and g (all_reduce
    forward, identity backward), as autograd Functions."""

    class CopyToRanks(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.view_as(x)

        @staticmethod
        def backward(ctx, grad):
            grad = grad.clone()
            dist.all_reduce(grad)  # each rank's hidden units give part of dL/dx: sum them
            return grad

    class SumOverRanks(torch.autograd.Function):
        @staticmethod
        def forward(ctx, y):
            y = y.clone()
            dist.all_reduce(y)  # each rank's hidden units give part of y: sum them
            return y

        @staticmethod
        def backward(ctx, grad):
            return grad

    return CopyToRanks.apply, SumOverRanks.apply


def hand_slices(tensors, rank, world_size):
    """A rank's part of the MLP's {name: tensor}: rows r*h/N..(r+1)*h/N of W1 and b1, the same
    columns of W2, all of b2."""
    h = tensors["0.weight"].shape[0]
    rows = slice(rank * h // world_size, (rank + 1) * h // world_size)
    return {"0.weight": tensors["0.weight"][rows], "0.bias": tensors["0.bias"][rows],
            "2.weight": tensors["2.weight"][:, rows], "2.bias": tensors["2.bias"]}


def hand_forward(p, x, f, g):
    """The Megatron MLP on one rank: its hidden units' part of the output, summed over ranks."""
    x = f(x)                                                # (b, s, d); all_reduce of dx backward
    a = F.gelu(F.linear(x, p["0.weight"], p["0.bias"]))     # (b, s, h/N): this rank's hidden units
    y = g(F.linear(a, p["2.weight"]))                       # (b, s, d): partial sums, all_reduce
    return y + p["2.bias"]                                  # (b, s, d): b2 added once


def hand_tp(rank, world_size, full, x, dy, ref, steps):
    """Tensor parallel by hand: watched step, difference from one process, bytes, time."""
    weights = {n: p.detach() for n, p in full.named_parameters()}
    params = {n: t.clone().requires_grad_()
              for n, t in hand_slices(weights, rank, world_size).items()}
    f, g = megatron_ops()
    forward = lambda inp: hand_forward(params, inp, f, g)
    # x requires grad, as a block's input inside a network does: else no backward all_reduce
    x = x.clone().requires_grad_()
    out = traced_step(forward, params.values(), x, dy)
    want = hand_slices(ref[1], rank, world_size)
    out["diff"] = max_diff([out["y"], x.grad, *(params[n].grad for n in want)],
                           [ref[0], ref[1]["x"], *want.values()])
    out["params"] = storage_bytes(params.values())
    out["time"] = fastest_step(forward, list(params.values()), x, dy, steps)
    return out


def dtensor_tp(mesh, full, x, dy, ref, steps):
    """Tensor parallel with DTensor: ColwiseParallel on the first Linear (W1 and b1 sharded by
    rows), RowwiseParallel on the second (W2 by columns, b2 replicated)."""
    model = copy.deepcopy(full)
    model.zero_grad(set_to_none=True)
    parallelize_module(model, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    params = list(model.parameters())
    x = x.clone().requires_grad_()  # as by hand: the backward all_reduce needs it
    out = traced_step(model, params, x, dy)
    grads = full_grads(model)
    out["diff"] = max_diff([out["y"], x.grad, *grads.values()],
                           [ref[0], ref[1]["x"], *(ref[1][n] for n in grads)])
    out["params"] = storage_bytes(params)
    out["time"] = fastest_step(model, params, x, dy, steps)
    return out


def tp_worker(rank, world_size, b, s, d, steps):
    """In each rank: the Megatron MLP by hand and with DTensor, against one process."""
    torch.set_num_threads(1)
    full = megatron_mlp(d)
    x, dy = test_data(b, s, d)
    ref = reference_step(full, full, x, dy)
    mesh = init_device_mesh("cpu", (world_size,))
    return {"by hand": hand_tp(rank, world_size, full, x, dy, ref, steps),
            "DTensor": dtensor_tp(mesh, full, x, dy, ref, steps),
            "scale": largest([ref[0], *ref[1].values()])}


def ring_bytes(name, nbytes, world_size):
    """Bytes one rank sends in a ring collective on a full tensor of nbytes: 2(N-1)/N x B for an
    all_reduce, (N-1)/N x B for an all_gather or a reduce_scatter."""
    share = (world_size - 1) / world_size * nbytes
    return int(2 * share if "reduce" in name and "scatter" not in name else share)


def print_row(way, world_size, results):
    """One row of the tensor or sequence parallel tables from every rank's results."""
    r = results[0]
    sizes = ", ".join(format_bytes(n) for n in sorted({n for _, n in r["sizes"]})) or "-"
    sent = sum(ring_bytes(name, n, world_size) for name, n in r["sizes"])
    print(f"{way:<9}{world_size:>3}{max(x['diff'] for x in results):>10.1e}"
          f"{format_bytes(r['params']):>12}{format_bytes(r['saved']):>12}{sizes:>10}"
          f"{format_bytes(sent):>11}{1e3 * max(x['time'] for x in results):>9.1f}"
          f"   {r['fwd']} | {r['bwd']}")


def scale_note(scale):
    print(f"(max|diff|: the outputs and gradients of one process reach {scale:.1f} in size; "
          "float32 sums taken in another order)")


def table_header():
    print(f"{'way':<9}{'N':>3}{'max|diff|':>10}{'params':>12}{'saved':>12}{'B':>10}"
          f"{'sent':>11}{'ms/step':>9}   collectives: forward | backward")


def tensor_parallel(steps):
    print(f"\n## 2. tensor parallel: Megatron MLP {D} -> {4 * D} -> {D} (GELU), x ({BATCH}, {SEQ}, "
          f"{D}) float32 requiring grad, one thread per rank")
    print("per rank: params and saved activations (local shards); B: full tensor of each "
          "collective;\nsent: what a ring sends per step; max|diff|: output and every gradient "
          "against one process")
    table_header()
    for world_size in (1, 2, 4):
        results = run_workers(tp_worker, world_size=world_size, backend="gloo", timeout=150,
                              args=(BATCH, SEQ, D, steps))
        for way in ("by hand", "DTensor"):
            print_row(way, world_size, [r[way] for r in results])
    scale_note(results[0]["scale"])


# ---------------------------------------------------------------- 3. sequence parallel


def norm_mlp(d):
    """x + fc2(gelu(fc1(norm(x)))), the LayerNorm ones and zeros (as SequenceParallel assumes), the
    same on every rank (seed 0). One module called as a whole: CommDebugMode names modules it
    meets outside a parent by their class, and two Linears of one name leave a hook behind."""

    class NormMLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm, self.fc1, self.fc2 = (nn.LayerNorm(d), nn.Linear(d, 4 * d),
                                             nn.Linear(4 * d, d))

        def forward(self, x):
            # with sequence parallel, x and the result are this rank's (b, s/N, d) slice
            h = self.norm(x)            # (b, s, d); SP: DTensor Shard(1), local (b, s/N, d)
            a = F.gelu(self.fc1(h))     # (b, s, 4d/N): SP all_gathers h along s first
            return x + self.fc2(a)      # (b, s, d); SP: reduce_scatter along s, (b, s/N, d)

    torch.manual_seed(0)
    return NormMLP()


SP_WAYS = ("TP", "TP + SP")


def sp_plan(way):
    """parallelize_module's plan: TP alone (the LayerNorm replicated, on the whole sequence), or
    with the LayerNorm sequence parallel and the Linears' input and output sharded along s."""
    if way == "TP":
        return {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()}
    return {"norm": SequenceParallel(), "fc1": ColwiseParallel(input_layouts=Shard(1)),
            "fc2": RowwiseParallel(output_layouts=Shard(1))}


def sp_way(rank, world_size, mesh, way, full, x, dy, ref, steps):
    """One plan of SP_WAYS on a copy of the block: watched step, difference, bytes, time."""
    model = copy.deepcopy(full)
    model.zero_grad(set_to_none=True)
    parallelize_module(model, mesh, sp_plan(way))
    params = list(model.parameters())
    want_y, want_dx = ref[0], ref[1]["x"]
    if way == "TP + SP":
        # each rank feeds its own slice of the sequence as a plain tensor: SequenceParallel wraps
        # it with DTensor.from_local(x, mesh, [Shard(1)]); fc2's output comes back as the local
        # (b, s/N, d) slice, so the residual adds two local slices
        x, dy, want_y, want_dx = (t.chunk(world_size, dim=1)[rank]
                                  for t in (x, dy, want_y, want_dx))
    x = x.clone().requires_grad_()  # the block's input comes from earlier layers
    out = traced_step(model, params, x, dy)
    grads = full_grads(model)  # SP: the LayerNorm's gradients are Partial, summed here
    out["diff"] = max_diff([out["y"], x.grad, *grads.values()],
                           [want_y, want_dx, *(ref[1][n] for n in grads)])
    out["params"] = storage_bytes(params)
    out["time"] = fastest_step(model, params, x, dy, steps)
    out["partial"] = [n for n, p in model.named_parameters()
                      if isinstance(p.grad, DTensor) and p.grad.placements[0].is_partial()]
    return out


def sp_worker(rank, world_size, b, s, d, steps):
    """In each rank: the block with TP alone and with TP + SP, against one process."""
    torch.set_num_threads(1)
    full = norm_mlp(d)
    x, dy = test_data(b, s, d)
    ref = reference_step(full, full, x, dy)
    mesh = init_device_mesh("cpu", (world_size,))
    results = {way: sp_way(rank, world_size, mesh, way, full, x, dy, ref, steps)
               for way in SP_WAYS}
    return {**results, "scale": largest([ref[0], *ref[1].values()])}


def saved_note(way, world_size, r):
    """The saved tensors of one row, one by one, and the gradients left Partial."""
    shapes = ", ".join(f"{shape} {format_bytes(n)}" for shape, n in r["saved_shapes"])
    return (f"  {way}, N = {world_size}: {shapes}"
            + (f"; Partial gradients: {r['partial']}" if r["partial"] else ""))


def sequence_parallel(steps):
    print(f"\n## 3. sequence parallel: x + MLP(LayerNorm(x)), x ({BATCH}, {SEQ}, {D}) float32 "
          "requiring grad; TP alone (LayerNorm replicated) against TP + SequenceParallel")
    table_header()
    notes = []
    for world_size in (2, 4):
        results = run_workers(sp_worker, world_size=world_size, backend="gloo", timeout=150,
                              args=(BATCH, SEQ, D, steps))
        for way in SP_WAYS:
            print_row(way, world_size, [r[way] for r in results])
            notes.append(saved_note(way, world_size, results[0][way]))
    scale_note(results[0]["scale"])
    print("saved activations per rank (local shapes, distinct storages):")
    print("\n".join(notes))
    print("(Partial: each rank holds the part of the gradient that its slice of the sequence "
          "gives; their sum, an all_reduce\nof d numbers each, is still owed after backward and "
          "is not in the counts: full_tensor() or the optimizer does it)")


# ---------------------------------------------------------------- 4. pipeline schedules


PIPE_D, PIPE_ROWS = 64, 64           # features, examples per step (split into m micro-batches)
SCHEDULES = (("ScheduleGPipe", 1), ("Schedule1F1B", 1), ("ScheduleInterleaved1F1B", 2))


def pipe_layer(index):
    torch.manual_seed(index)
    return nn.Sequential(nn.Linear(PIPE_D, PIPE_D), nn.Tanh())


def pipe_loss(out, target):
    return ((out - target) ** 2).mean()


def schedules_worker(rank, world_size, micro_batches, tau, steps):
    """Every schedule, for each m, on v stages per rank of SlowStage(forward tau, backward 2 tau):
    per run, each step's actions of this rank and its start and end."""
    from torch.distributed import pipelining as pp
    torch.set_num_threads(1)
    torch.manual_seed(1000)
    x, y = torch.randn(PIPE_ROWS, PIPE_D), torch.randn(PIPE_ROWS, PIPE_D)
    runs = {}
    for name, v in SCHEDULES:
        for m in micro_batches:
            n_stages = v * world_size
            stages = [pp.PipelineStage(SlowStage(pipe_layer(i), tau / v, 2 * tau / v), i,
                                       n_stages, torch.device("cpu"))
                      for i in range(rank, n_stages, world_size)]   # rank r: r, r + p, ...
            schedule = getattr(pp, name)(stages if v > 1 else stages[0], n_microbatches=m,
                                         loss_fn=pipe_loss)
            actions, measured = record_actions(stages), []
            for step in range(steps + 1):        # step 0 infers the shapes: a warm-up
                actions.clear()
                dist.barrier()
                start = time.perf_counter()
                if rank == 0:
                    schedule.step(x)
                elif rank == world_size - 1:
                    schedule.step(target=y, losses=[])
                else:
                    schedule.step()
                end = time.perf_counter()
                if step:
                    measured.append({"actions": list(actions), "start": start, "end": end})
            runs[name, m] = measured
    return runs


def bubble_formula(p, m, v):
    """Idle share of a step on every rank: (p - 1) / (v m + p - 1) (Narayanan et al., 2021)."""
    return (p - 1) / (v * m + p - 1)


def pipeline_section(args):
    print("\n## 4. pipeline schedules (torch.distributed.pipelining): p ranks, m micro-batches "
          f"of a {PIPE_ROWS}-example step, each stage a Linear({PIPE_D}, {PIPE_D}) + tanh that "
          f"sleeps {args.tau * 1e3:.0f} ms forward and {2 * args.tau * 1e3:.0f} ms backward per "
          "micro-batch (split over its v stages when interleaved); idle = the share of the step "
          "(first rank's start to last rank's end) a rank ran nothing, fastest step of "
          f"{args.steps}, against the formula (p - 1) / (v m + p - 1), whose step (ideal) has no "
          "overheads; in flight = micro-batches a rank held at most (GPipe: m; 1F1B: "
          "min(m, p - rank); interleaved: counted per stage, a stage being 1/v of a rank's "
          "layers)")
    print(f"{'schedule':>24} {'p':>2} {'m':>2} {'v':>2} {'step':>7} {'ideal':>6} "
          f"{'idle per rank':>24} {'formula':>8} {'in flight per rank':>19} {'p2p/step':>10}")
    for p in (2, 4):
        micro = (4, 8)
        runs = run_workers(schedules_worker, p, timeout=300,
                           args=(micro, args.tau, args.steps))
        for name, v in SCHEDULES:
            for m in micro:
                steps = [[runs[r][name, m][k] for r in range(p)] for k in range(args.steps)]
                best = min(steps, key=lambda ranks: max(s["end"] for s in ranks)
                           - min(s["start"] for s in ranks))
                start, end = min(s["start"] for s in best), max(s["end"] for s in best)
                idle = [idle_fraction(s["actions"], start, end) for s in best]
                held = [max(a["in_flight"] for a in s["actions"]) for s in best]
                cuts = v * p - 1      # each sends the activations forward, their gradients back
                p2p = 2 * cuts * PIPE_ROWS * PIPE_D * 4
                ideal = (m + (p - 1) / v) * 3 * args.tau   # the formula's step: no overheads
                print(f"{name:>24} {p:>2} {m:>2} {v:>2} {(end - start) * 1e3:>5.0f}ms "
                      f"{ideal * 1e3:>4.0f}ms "
                      f"{' '.join(f'{i:.2f}' for i in idle):>24} {bubble_formula(p, m, v):>8.2f} "
                      f"{' '.join(map(str, held)):>19} {format_bytes(p2p):>10}")


# ---------------------------------------------------------------- 5. overlapped data parallel


def dp_model(width, layers):
    """`layers` Linear(width, width) with ReLU between, the same on every rank (seed 0)."""
    torch.manual_seed(0)
    mods = []
    for _ in range(layers):
        mods += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*mods[:-1])


def buckets_of(params, cap):
    """Parameters in buckets of at least `cap` bytes (the last may be smaller), filled greedily in
    reverse order, the order backward produces their gradients; cap 0: one per parameter."""
    buckets, current, size = [], [], 0
    for p in reversed(params):
        current.append(p)
        size += p.numel() * p.element_size()
        if size >= cap:
            buckets, current, size = buckets + [current], [], 0
    return buckets + ([current] if current else [])


def issue(flat, log):
    """An async all_reduce of flat; [issued, completed] (perf_counter) appended to log. Returns
    the future that completes once the completion time has been written."""
    entry = [time.perf_counter(), None]
    log.append(entry)
    work = dist.all_reduce(flat, async_op=True)
    return work.get_future().then(lambda _: entry.__setitem__(1, time.perf_counter()))


def reduce_bucket(bucket, state):
    """Flatten a bucket's gradients (a single one: in place) and all_reduce them async."""
    flat = (bucket[0].grad.view(-1) if len(bucket) == 1
            else torch.cat([p.grad.view(-1) for p in bucket]))
    state["pending"].append((issue(flat, state["log"]), bucket, flat))


def watch_bucket(bucket, state):
    """Hooks that reduce a bucket once all its parameters' gradients have been accumulated."""
    arrived = set()

    def on_grad(p):
        arrived.add(p)
        if len(arrived) == len(bucket):
            arrived.clear()
            reduce_bucket(bucket, state)

    return [p.register_post_accumulate_grad_hook(on_grad) for p in bucket]


def finish(state, world_size):
    """Wait for every bucket's all_reduce and write the averaged gradients back."""
    for done, bucket, flat in state["pending"]:
        done.wait()
        offset = 0
        for p in bucket:
            p.grad.copy_(flat[offset:offset + p.numel()].view_as(p)).div_(world_size)
            offset += p.numel()


def dp_step(model, X, Y, buckets, state, world_size, overlap):
    """One data-parallel step; the all_reduces start from the hooks (overlap) or after backward.
    Returns (perf_counter when backward() returned, when all gradients were averaged)."""
    state["pending"], state["log"] = [], []
    model.zero_grad(set_to_none=True)
    F.mse_loss(model(X), Y).backward()
    returned = time.perf_counter()
    if not overlap:
        for bucket in buckets:
            reduce_bucket(bucket, state)
    finish(state, world_size)
    return returned, time.perf_counter()


def overlap_share(log, returned):
    """(all_reduces issued before `returned`, the share of their issue-to-completion time spent
    before it)."""
    total = sum(done - start for start, done in log)
    before = sum(max(0.0, min(done, returned) - start) for start, done in log)
    return sum(start < returned for start, _ in log), before / total


def dp_way(rank, world_size, cap, overlap, data, ref, steps):
    """Train steps with one way of reducing: difference from one process, time, overlap."""
    model = dp_model(DP_WIDTH, DP_LAYERS)
    params = list(model.parameters())
    buckets = buckets_of(params, cap)
    state = {}
    hooks = [h for b in buckets for h in watch_bucket(b, state)] if overlap else []
    X, Y = (t.chunk(world_size)[rank] for t in data)
    times, shares = [], []
    for _ in range(steps + 1):
        dist.barrier()
        start = time.perf_counter()
        returned, end = dp_step(model, X, Y, buckets, state, world_size, overlap)
        times.append((end - start, returned - start, end - returned))
        shares.append(overlap_share(state["log"], returned))
    for h in hooks:
        h.remove()
    diff = max_diff([p.grad for p in params], ref)
    best = min(times[1:])
    issued = shares[-1][0]
    share = sum(s for _, s in shares[1:]) / steps
    return {"diff": diff, "time": best[0], "compute": best[1], "tail": best[2],
            "issued": issued, "share": share,
            "buckets": len(buckets), "reduces": len(state["log"])}


DP_WAYS = {"after backward": (0, False), "per parameter": (0, True),
           "buckets ~1 MiB": (1 << 20, True), "buckets ~4 MiB": (4 << 20, True)}


def dp_worker(rank, world_size, steps):
    """In each rank: every way of DP_WAYS, against the full batch's gradient in one process."""
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(1)
    data = (torch.randn(DP_BATCH, DP_WIDTH, generator=g),
            torch.randn(DP_BATCH, DP_WIDTH, generator=g))
    full = dp_model(DP_WIDTH, DP_LAYERS)
    F.mse_loss(full(data[0]), data[1]).backward()
    ref = [p.grad for p in full.parameters()]
    results = {way: dp_way(rank, world_size, cap, overlap, data, ref, steps)
               for way, (cap, overlap) in DP_WAYS.items()}
    return results, largest(ref)


def dp_header(world_size, steps):
    print(f"\n## 5. overlapped data parallel, N = {world_size}: {DP_LAYERS} x Linear({DP_WIDTH}, "
          f"{DP_WIDTH}) + ReLU, batch {DP_BATCH} split over the ranks, float32, one thread per "
          f"rank, fastest of {steps} steps")
    print("issued: all_reduces started before backward() returned (of all); overlap: share of "
          "their issue-to-completion\ntime before it returned (mean over the timed steps); wait: "
          "after it returned, until all gradients were averaged")
    print(f"{'way':<16}{'buckets':>8}{'max|diff|':>10}{'ms/step':>9}{'fwd+bwd ms':>11}"
          f"{'wait ms':>9}{'issued':>8}{'overlap':>9}")


def dp_notes(scale, world_size):
    print(f"(max|diff|: against the full batch's mean gradient in one process, whose largest "
          f"entry is {scale:.1e})")
    print(f"(on this machine the {world_size} ranks and gloo's threads share "
          f"{os.cpu_count()} cores: an all_reduce that runs during backward competes with it "
          "for them, so overlap\nhides waiting (latency, the slower rank) but not the cycles the "
          "reduction and its copies need; on GPUs the network and\ncopy engines move the data "
          "beside the compute. The first row's wait is all the communication, exposed; these\n"
          "times move with the machine's load)")


def overlapped_dp(steps, world_size=2):
    dp_header(world_size, steps)
    results = run_workers(dp_worker, world_size=world_size, backend="gloo", timeout=150,
                          args=(steps,))
    scale, results = results[0][1], [r[0] for r in results]
    for way in DP_WAYS:
        rs = [r[way] for r in results]
        r = max(rs, key=lambda x: x["time"])  # the slowest rank's
        print(f"{way:<16}{r['buckets']:>8}{max(x['diff'] for x in rs):>10.1e}"
              f"{1e3 * r['time']:>9.1f}{1e3 * r['compute']:>11.1f}{1e3 * r['tail']:>9.1f}"
              f"{str(r['issued']) + '/' + str(r['reduces']):>8}{r['share']:>9.0%}")
    dp_notes(scale, world_size)


# ---------------------------------------------------------------- 6. context parallel


def try_context_parallel(rank, world_size):
    """context_parallel around one causal scaled_dot_product_attention: what happened, as text."""
    torch.set_num_threads(1)
    mesh = init_device_mesh("cpu", (world_size,))
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 32, 8) for _ in range(3))   # (b, heads, s, d/heads)
    try:
        with context_parallel(mesh, buffers=[q, k, v], buffer_seq_dims=[2, 2, 2]):
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return f"ran: this rank's output {tuple(out.shape)}"
    except Exception as e:  # the lesson shows what the CPU does
        return f"{type(e).__name__}: {(str(e).splitlines() or [''])[0]}"


def context_parallel_on_cpu(world_size=2):
    print(f"\n## 6. context_parallel on the CPU, N = {world_size}, one scaled_dot_product_attention"
          " (q, k, v of (1, 2, 32, 8))")
    try:
        results = run_workers(try_context_parallel, world_size=world_size, backend="gloo",
                              timeout=60)
        for rank, text in enumerate(results):
            print(f"rank {rank}: {text}")
    except (WorkerError, TimeoutError) as e:
        print(f"{type(e).__name__}: {str(e).splitlines()[0]}")


# ---------------------------------------------------------------- 7. a 2-D mesh: data x tensor


def mesh_2d_worker(rank, world_size):
    """4 ranks as a (2, 2) mesh: tensor parallel over "tp" (the Megatron MLP), data parallel over
    "dp" (each row of the mesh its half of the batch, gradients all-reduced over "dp"): the largest
    difference from one process on the whole batch, and the collectives of a step by kind."""
    torch.set_num_threads(1)
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    torch.manual_seed(0)
    full, x = megatron_mlp(32), torch.randn(8, 16, 32)
    (full(x) ** 2).mean().backward()
    model = parallelize_module(copy.deepcopy(full), mesh["tp"],
                               {"0": ColwiseParallel(), "2": RowwiseParallel()})
    model.zero_grad(set_to_none=True)
    mine = x.chunk(2)[mesh.get_local_rank("dp")]        # this row's half of the batch
    with CommDebugMode() as comm:
        (model(mine) ** 2).mean().backward()
        for p in model.parameters():                     # data parallel over the "dp" dimension
            g = p.grad.to_local()
            dist.all_reduce(g, group=mesh.get_group("dp"))
            g /= 2
    diff = max((p.grad.full_tensor() - q.grad).abs().max().item()
               for p, q in zip(model.parameters(), full.parameters()))
    return diff, {str(k).split(".")[-1]: v for k, v in comm.get_comm_counts().items()}


def mesh_2d():
    print("\n## 7. a 2-D mesh, 4 ranks as (dp = 2) x (tp = 2): the Megatron MLP (32 -> 128 -> 32) "
          "tensor parallel over tp, its batch split and its gradients all-reduced over dp")
    try:
        for rank, (diff, counts) in enumerate(run_workers(mesh_2d_worker, world_size=4,
                                                          backend="gloo", timeout=120)):
            print(f"rank {rank}: max|diff| from one process {diff:.1e}; collectives {counts}")
    except (WorkerError, TimeoutError) as e:
        print(f"{type(e).__name__}: {str(e).splitlines()[0]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--steps", type=int, default=5,
                        help="timed steps per measurement (the fastest is kept)")
    parser.add_argument("--tau", type=float, default=0.01,
                        help="seconds a pipeline stage sleeps per micro-batch forward "
                             "(backward: twice that)")
    args = parser.parse_args()
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"torch {torch.__version__}, gloo")
    startup()
    tensor_parallel(args.steps)
    sequence_parallel(args.steps)
    pipeline_section(args)
    overlapped_dp(4 * args.steps)  # short, noisy steps: more of them
    context_parallel_on_cpu()
    mesh_2d()
    return 0


if __name__ == "__main__":
    sys.exit(main())
