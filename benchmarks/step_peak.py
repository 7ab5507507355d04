"""The peak of a whole training step for each memory-saving tool of lesson 09, against what the
forward holds.

    python benchmarks/step_peak.py [--batches 256 4096] [--repeat 5] [--quick]

Lesson 09's model: SIZES = [64, 512, 512, 512, 10], an nn.Sequential of Linear and GELU (GELU after
each hidden Linear), float32, Adam(lr=1e-3), on course_utils.data.blobs(n=batch, num_inputs=64,
num_classes=10, seed=0). A step is lesson 09's step_ms: optimizer.zero_grad(set_to_none=False),
forward + cross-entropy and backward over the batch (in k micro-batches for accumulation, each loss
divided by k), Adam's step. A warm-up step has created the gradients and Adam's state, so what a
step adds is measured on top of parameters, gradients and Adam's state (2.2 + 2.2 + 4.3 MiB, which
no tool here changes). For each tool:

- held after fwd: bytes of the tensors the forward + loss of one (micro-)batch created that are
  still alive right after it, the way lesson 09's held_after_forward measures them
  (TensorAllocations);
- peak of step: the most bytes of tensors created during the whole step and alive at once (the
  figure of course_utils.memory.cpu_peak_bytes(step): TensorAllocations' peak_bytes, read here with
  its timeline to tell in which phase, and after which aten operation, it happens);
- on CUDA, also the caching allocator's peak (course_utils.memory.cuda_peak_bytes);
- ms: the fastest step: course_utils.timing.fastest_seconds(step, repeat=1, warmup=1) for each tool
  in turn, --repeat rounds (5), the smallest kept: a busy moment of a shared machine hits no tool
  alone;
- grad err: max |g - g32| / max |g32| over all parameters' gradients after one step from the same
  weights, g32 the float32 whole-batch gradient: what the tool costs in precision.

The tools: accumulation (k = 2, 4); torch.autocast(device, bfloat16) around forward + loss;
torch.autograd.graph.save_on_cpu (on a CPU nothing moves: its pack hook keeps a CPU tensor as it is,
so it measures as float32); torch.utils.checkpoint (use_reentrant=False) on each (Linear, GELU)
block (lesson 09's checkpoint_blocks); selective checkpointing with lesson 09's save_matmuls policy
(save addmm and mm outputs, recompute the rest) on the whole model as one segment (lesson 09's
selective) and on each block; and two combinations. Then a cross-check of two peaks with
torch.profiler's memory timeline (profile_memory=True, record_shapes=True, with_stack=True, then
prof.export_memory_timeline(path, device="cpu"): a path ending .json writes [times, sizes] with
sizes[i] = bytes per category (index 0 unused, then PARAMETER, OPTIMIZER_STATE, INPUT, TEMPORARY,
ACTIVATION, GRADIENT, AUTOGRAD_DETAIL, unknown) after each microsecond with events; .json.gz the
same gzipped; .raw.json.gz the events (time ns, action, +-bytes, category) in order; .html a PNG
plot, titled with CUDA's peaks, 0 here; it returns None and warns that it is deprecated). The peak
above the step's start is max(sum(sizes[i])) - sum(sizes[0]), sizes[0] being the tensors that
existed before (parameters, gradients, Adam's state, the batch). Last, the batch at which
autocast starts saving memory: the bytes it adds whatever the batch (16-bit copies of the weights)
over the bytes it saves per example, both from the two batch sizes.

Measured on a 2-core AMD EPYC CPU (avx512_bf16), 2 torch threads, torch 2.13.0+cpu, 2026-11-27
(MiB; bytes are exact and the same on every CPU, times move with the machine's load):

    # x86_64, 2 cores, 2 torch threads, torch 2.13.0+cpu, no GPU

    ## cpu, batch 256 (MiB above parameters, gradients and Adam's state; fastest of 5 steps,
    taken in turns)
    tool                               held after fwd peak of step      ms  grad err
      peak reached in
    float32, whole batch                         3.01         4.00     7.4   0.0e+00
      backward: sum.dim_IntList
    accumulate 2 micro-batches                   1.50         2.50     8.1   3.2e-07
      backward 1/2: sum.dim_IntList
    accumulate 4 micro-batches                   0.75         2.00     9.2   3.2e-07
      optimizer.step: div.Tensor
    autocast bfloat16                            2.55         3.03     4.6   4.1e-03
      backward: sum.dim_IntList
    save_on_cpu                                  3.01         4.00     7.1   0.0e+00
      backward: sum.dim_IntList
    checkpoint each block                        1.51         3.00    10.0   0.0e+00
      backward: sum.dim_IntList
    selective, one segment                       1.52         4.01     8.6   0.0e+00
      backward: mm.default
    selective, each block                        3.02         4.00     8.9   0.0e+00
      backward: sum.dim_IntList
    checkpoint each block + bf16                 0.76         2.07     7.2   4.1e-03
      forward: gelu.default
    accumulate 2 + checkpoint blocks             0.75         2.00    12.5   3.2e-07
      backward 1/2: sum.dim_IntList

    cross-check with torch.profiler's memory timeline (bytes above the step's start)
    tool                               TensorAllocations timeline .json raw events
    float32, whole batch                         4196360        4196360    4196360
    checkpoint each block                        3147784        3162952    3162952

    ## cpu, batch 4096 (MiB above parameters, gradients and Adam's state; fastest of 5 steps,
    taken in turns)
    tool                               held after fwd peak of step      ms  grad err
      peak reached in
    float32, whole batch                        48.16        56.18    96.3   0.0e+00
      backward: sum.dim_IntList
    accumulate 2 micro-batches                  24.08        28.10    96.3   1.5e-06
      backward 1/2: sum.dim_IntList
    accumulate 4 micro-batches                  12.04        14.06   100.9   1.5e-06
      backward 1/4: sum.dim_IntList
    autocast bfloat16                           25.67        29.60    46.1   3.5e-03
      backward: sum.dim_IntList
    save_on_cpu                                 48.16        56.18   105.7   0.0e+00
      backward: sum.dim_IntList
    checkpoint each block                       24.16        40.00   129.6   0.0e+00
      backward: gelu_backward.default
    selective, one segment                      24.31        56.33   126.5   0.0e+00
      backward: mm.default
    selective, each block                       48.31        56.33   114.7   0.0e+00
      backward: sum.dim_IntList
    checkpoint each block + bf16                12.16        20.50    67.3   3.5e-03
      backward: gelu_backward.default
    accumulate 2 + checkpoint blocks            12.08        20.00   119.0   1.5e-06
      backward 1/2: gelu_backward.default

    cross-check with torch.profiler's memory timeline (bytes above the step's start)
    tool                               TensorAllocations timeline .json raw events
    float32, whole batch                        58904624       58904624   58904624
    checkpoint each block                       41943048       41958216   41958216

    autocast bfloat16 against float32, from batches 256 and 4096 (bytes)
                      f32 @256  bf16 @256  f32 @4096 bf16 @4096 saved/example fixed added break-even
    held after fwd     3155976    2674696   50495496   26912776        6016.0     1058816      176.0
    peak of step       4196360    3179528   58904624   31035420        6992.8      773326      110.6

What it shows. The peak of a step is not what the forward holds: the backward adds the gradient of
one activation at a time (8 MiB at batch 4096) while most activations are still held, and Adam's
step on a CPU adds 2 MiB (exp_avg_sq.sqrt() / bias_correction of the largest weight, 512 x 512; on
CUDA the foreach Adam's _foreach_sqrt of all 2.15 MiB of parameters). So:
- checkpoint each block halves what the forward holds (24.2 MiB) but the step's peak falls only from
  56.2 to 40.0 MiB: in the backward of block 3 the inputs of blocks 2 and 3, the recomputed Linear
  output and two gradients (8 MiB each) are alive at once;
- selective checkpointing as one segment holds 24.3 MiB after the forward and peaks at 56.3 MiB, as
  much as no checkpointing: the backward recomputes all the GELUs at once. Per block it saves
  nothing at all (48.3 MiB held): each block's output is the next block's saved input anyway;
- accumulation scales the whole step (28.1 and 14.1 MiB) until Adam's 2 MiB is the peak (batch 256,
  4 micro-batches), at no cost in precision (1.5e-6) and little in time;
- autocast bfloat16 halves both, is the fastest here (avx512_bf16), and costs 3.5e-3 of the
  gradient;
- save_on_cpu on a CPU moves nothing and measures as float32 (on CUDA it holds 0 bytes on the GPU
  after the forward and peaks at 26.0 MiB at batch 4096).
Where the peak is: in the backward for every tool (after the aten op named), except accumulation of
4 at batch 256 (Adam's step) and checkpoint + bfloat16 at batch 256 (the forward, while autocast's
cache holds bfloat16 copies of all the weights). The profiler agrees to the byte for float32; for
checkpointing it sees 15168 bytes more: the RNG states, 5056 bytes a segment, 3 of them alive at the
peak, that torch.utils.checkpoint keeps outside aten operations.
Autocast's break-even batch: 1058816 bytes of bfloat16 weight copies (the two 512 x 512 and the 512
x 10 weights, held by the graph; the 64 x 512 copy is not saved) over 6016 bytes saved per example =
176 examples for what the forward holds, as lesson 09 computes it (SavedTensors, the parameters and
the batch excluded: counting the float32 batch among the saved tensors gave 6272 bytes and 169
examples); 110.6 for the peak of the step. An autocast around the model alone (the loss outside it,
the log-softmax in bfloat16) holds 2669572 and 26830852 bytes (2.5 and 25.6 MiB), 20 bytes per
example fewer than here; its peaks are 4 bytes lower.
On an H100 (torch 2.11, 2026-11-27) the tensors' figures are the same but for save_on_cpu,
autocast's held bytes (20 bytes per example more: 25.74 MiB at 4096) and the foreach Adam (2.15 MiB,
the peak of accumulating 4 at batch 256); the caching allocator's peak equals them at batch 256 and
is higher at batch 4096 (65.0 MiB against 56.2 for float32, 42.0 against 29.6 for autocast): inside
the bias gradient's sum over the batch (aten sum.dim_IntList) the allocator's peak rises 16 MiB
above what is live before and after it, scratch memory that no tensor shows.
"""

import argparse
import contextlib
import functools
import gzip
import json
import math
import os
import platform
import sys
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.graph import save_on_cpu
from torch.utils.checkpoint import (CheckpointPolicy, checkpoint,
                                    create_selective_checkpoint_contexts)

# benchmarks/ is this script's folder: the profiler's lines silenced
from checkpoint_memory import quiet_stderr
from course_utils.data import blobs
from course_utils.memory import TensorAllocations, cuda_peak_bytes
from course_utils.timing import fastest_seconds

SIZES = [64, 512, 512, 512, 10]  # inputs, three hidden layers, classes
MiB = 2 ** 20


def make_mlp() -> nn.Sequential:
    """Lesson 09's MLP: Linear and GELU layers in an nn.Sequential, float32, seeded."""
    torch.manual_seed(0)
    layers = []
    for i, (fan_in, fan_out) in enumerate(zip(SIZES[:-1], SIZES[1:])):
        layers.append(nn.Linear(fan_in, fan_out))
        if i < len(SIZES) - 2:
            layers.append(nn.GELU())
    return nn.Sequential(*layers)


# The forwards: (model, Xb of shape (b, 64)) -> logits of shape (b, 10).

def plain(model, Xb):
    return model(Xb)


def save_matmuls(ctx, op, *args, **kwargs):
    """Lesson 09's policy: keep the matmuls' outputs, recompute the rest (the GELUs)."""
    return (CheckpointPolicy.MUST_SAVE
            if op in (torch.ops.aten.addmm.default, torch.ops.aten.mm.default)
            else CheckpointPolicy.PREFER_RECOMPUTE)


SELECTIVE = functools.partial(create_selective_checkpoint_contexts, save_matmuls)


def checkpoint_blocks(model, Xb):
    for i in range(0, len(model), 2):  # (Linear, GELU), (Linear, GELU), (Linear, GELU), (Linear,)
        Xb = checkpoint(model[i:i + 2], Xb, use_reentrant=False)
    return Xb


def selective_one_segment(model, Xb):
    return checkpoint(model, Xb, use_reentrant=False, context_fn=SELECTIVE)


def selective_blocks(model, Xb):
    for i in range(0, len(model), 2):
        Xb = checkpoint(model[i:i + 2], Xb, use_reentrant=False, context_fn=SELECTIVE)
    return Xb


@dataclass(frozen=True)
class Tool:
    name: str
    forward: Callable = plain
    micro_batches: int = 1
    bf16: bool = False      # torch.autocast(device, bfloat16) around forward + loss
    offload: bool = False   # save_on_cpu around forward + loss


TOOLS = [
    Tool("float32, whole batch"),
    Tool("accumulate 2 micro-batches", micro_batches=2),
    Tool("accumulate 4 micro-batches", micro_batches=4),
    Tool("autocast bfloat16", bf16=True),
    Tool("save_on_cpu", offload=True),
    Tool("checkpoint each block", forward=checkpoint_blocks),
    Tool("selective, one segment", forward=selective_one_segment),
    Tool("selective, each block", forward=selective_blocks),
    Tool("checkpoint each block + bf16", forward=checkpoint_blocks, bf16=True),
    Tool("accumulate 2 + checkpoint blocks", forward=checkpoint_blocks, micro_batches=2),
]


def loss_of(tool: Tool, model, Xb, yb):
    device = Xb.device
    offload = (save_on_cpu(pin_memory=device.type == "cuda") if tool.offload
               else contextlib.nullcontext())
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=tool.bf16), offload:
        return F.cross_entropy(tool.forward(model, Xb), yb)


def train_step(tool: Tool, model, optimizer, X, y, mark=lambda phase: None) -> None:
    """One whole training step; mark(phase) is called as each phase begins."""
    k = tool.micro_batches
    mark("zero_grad")
    optimizer.zero_grad(set_to_none=False)
    for i, (Xb, yb) in enumerate(zip(X.chunk(k), y.chunk(k))):
        suffix = f" {i + 1}/{k}" if k > 1 else ""
        mark("forward" + suffix)
        loss = loss_of(tool, model, Xb, yb) / k
        mark("backward" + suffix)
        loss.backward()
    mark("optimizer.step")
    optimizer.step()


def held_after_forward(tool: Tool, model, X, y) -> int:
    """Bytes the forward + loss of one (micro-)batch created that are alive after it (lesson 09's
    way)."""
    b = len(X) // tool.micro_batches
    with TensorAllocations(X.device) as mem:
        loss = loss_of(tool, model, X[:b], y[:b])
    held = mem.live_bytes
    loss.backward()
    return held


def step_peak(step, device) -> tuple[int, str]:
    """(peak bytes of the tensors a step creates, 'phase: operation' where it is first reached)."""
    marks = []  # (index in the timeline where a phase begins, phase)
    with TensorAllocations(device) as mem:
        step(mark=lambda phase: marks.append((len(mem.timeline), phase)))
    at = max(range(len(mem.timeline)), key=lambda i: mem.timeline[i][1])
    phase = [name for start, name in marks if start <= at][-1]
    return mem.peak_bytes, f"{phase}: {mem.timeline[at][0]}"


def profiler_peaks(step) -> tuple[int, int]:
    """Peak above the step's start from torch.profiler's memory timeline on the CPU:
    (from the .json plot points, from the .raw.json.gz events summed in order)."""
    from torch.profiler import ProfilerActivity, profile

    with quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True,
                                 record_shapes=True, with_stack=True) as prof:
        step()
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # export_memory_timeline is deprecated
        prof.export_memory_timeline(f"{tmp}/step.json", device="cpu")
        prof.export_memory_timeline(f"{tmp}/step.raw.json.gz", device="cpu")
        with open(f"{tmp}/step.json") as f:
            times, sizes = json.load(f)  # sizes[i]: bytes per category after the events of times[i]
        with gzip.open(f"{tmp}/step.raw.json.gz", "rt") as f:
            # (time ns or -1 for pre-existing, action, +-bytes, category)
            events = json.load(f)
    totals = [sum(row) for row in sizes]
    before = sum(nbytes for t, _, nbytes, _ in events if t == -1)
    live = peak = before
    for t, _, nbytes, _ in events:
        if t != -1:
            live += nbytes
            peak = max(peak, live)
    return max(totals) - totals[0], peak - before


def report(device: torch.device, batch: int, repeat: int, cross_check: bool) -> dict:
    """Print the table for one batch size; return {tool name: (held, peak)} in bytes."""
    X, y = (t.to(device) for t in blobs(n=batch, num_inputs=SIZES[0], num_classes=SIZES[-1], seed=0,
                                        dtype=torch.float32))
    model = make_mlp().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    # warm-up: the gradients and Adam's state exist from now on
    train_step(TOOLS[0], model, optimizer, X, y)
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    cuda = device.type == "cuda"

    print(f"\n## {device}, batch {batch} (MiB above parameters, gradients and Adam's state; "
          f"fastest of {repeat} steps, taken in turns)")
    rows, steps, reference = {}, {}, None
    for tool in TOOLS:
        step = steps[tool.name] = functools.partial(train_step, tool, model, optimizer, X, y)
        model.load_state_dict(weights)  # the same weights for every tool's gradient
        step()                          # ... which is also this tool's warm-up step
        grad = torch.cat([p.grad.flatten() for p in model.parameters()]).float()  # (P,)
        reference = grad if reference is None else reference
        error = ((grad - reference).abs().max() / reference.abs().max()).item()
        held = held_after_forward(tool, model, X, y)
        peak, where = step_peak(step, device)
        allocator = cuda_peak_bytes(step, device) if cuda else None
        rows[tool.name] = (held, peak, allocator, error, where)
    times = dict.fromkeys(steps, math.inf)
    # round robin: a busy moment of a shared machine does not hit one tool only
    for _ in range(repeat):
        for name, step in steps.items():
            times[name] = min(times[name], fastest_seconds(step, repeat=1, warmup=1, device=device))

    print(f"{'tool':34}{'held after fwd':>15}{'peak of step':>13}"
          + (f"{'allocator':>10}" if cuda else "")
          + f"{'ms':>8}{'grad err':>10}  peak reached in")
    for name, (held, peak, allocator, error, where) in rows.items():
        print(f"{name:34}{held / MiB:>15.2f}{peak / MiB:>13.2f}"
              + (f"{allocator / MiB:>10.2f}" if cuda else "")
              + f"{1e3 * times[name]:>8.1f}{error:>10.1e}  {where}")

    if cross_check:
        print("\ncross-check with torch.profiler's memory timeline (bytes above the step's start)")
        print(f"{'tool':34}{'TensorAllocations':>18}{'timeline .json':>15}{'raw events':>11}")
        for tool in (TOOLS[0], TOOLS[5]):  # float32, checkpoint each block
            step = functools.partial(train_step, tool, model, optimizer, X, y)
            plot, raw = profiler_peaks(step)
            print(f"{tool.name:34}{rows[tool.name][1]:>18}{plot:>15}{raw:>11}")
    return {name: row[:2] for name, row in rows.items()}


def break_even(batches: list[int], results: list[dict]) -> None:
    """Autocast adds fixed bytes (bfloat16 copies of the weights) and saves bytes per example."""
    (b0, b1), (r0, r1) = batches, results
    print(f"\nautocast bfloat16 against float32, from batches {b0} and {b1} (bytes)")
    print(f"{'':16}{f'f32 @{b0}':>11}{f'bf16 @{b0}':>11}{f'f32 @{b1}':>11}{f'bf16 @{b1}':>11}"
          f"{'saved/example':>14}{'fixed added':>12}{'break-even':>11}")
    for i, name in enumerate(["held after fwd", "peak of step"]):
        f0, h0 = r0["float32, whole batch"][i], r0["autocast bfloat16"][i]
        f1, h1 = r1["float32, whole batch"][i], r1["autocast bfloat16"][i]
        per_example = ((f1 - h1) - (f0 - h0)) / (b1 - b0)  # f - h = per_example * b - fixed
        fixed = per_example * b0 - (f0 - h0)
        print(f"{name:16}{f0:>11}{h0:>11}{f1:>11}{h1:>11}{per_example:>14.1f}{fixed:>12.0f}"
              f"{fixed / per_example:>11.1f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--batches", type=int, nargs="+", default=[256, 4096])
    parser.add_argument("--repeat", type=int, default=5,
                        help="timed steps per tool (the fastest is shown)")
    parser.add_argument("--quick", action="store_true",
                        help="2 timed steps, no profiler cross-check")
    args = parser.parse_args()
    repeat = 2 if args.quick else args.repeat
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"{torch.get_num_threads()} torch threads, torch {torch.__version__}, {gpu}")
    devices = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
    for device in devices:
        results = [report(device, b, repeat, cross_check=device.type == "cpu" and not args.quick)
                   for b in args.batches]
        if len(args.batches) >= 2:
            break_even(args.batches[:2], results[:2])
    return 0


if __name__ == "__main__":
    sys.exit(main())
