"""Activation checkpointing measured (lesson 06): peak memory against depth and against segments,
and time.

    python benchmarks/checkpoint_memory.py [--batch 512] [--width 64] [--reps 5] [--threads 1]

The model is lesson 06's chain of n blocks Linear(d, d) -> Tanh on a batch of B rows; one activation
is B * d float32 values. Each step is `run(x).sum().backward()` with the parameters' .grad allocated
by a step before (so a step adds into it in place); run is the plain chain or
torch.utils.checkpoint.checkpoint_sequential with s segments (use_reentrant=False). Peaks are in
activations, above what existed before the step.

On the CPU the peak is course_utils.memory.cpu_peak_bytes (every tensor an operation makes, followed
until it is freed), and, as a cross-check, the peak of the CPU allocator's own allocation events
recorded by torch.profiler (profile_memory=True), which also sees non-tensor allocations such as the
RNG state each checkpointed segment saves. On CUDA (when there is a GPU) the peak is
course_utils.memory.cuda_peak_bytes (the caching allocator: rounding to 512-byte blocks included),
and a table shows that rounding. Times are the fastest of --reps runs.
"""

import argparse
import contextlib
import math
import os
import platform
import sys

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint_sequential

from course_utils.memory import cpu_peak_bytes, cuda_peak_bytes
from course_utils.timing import fastest_seconds


@contextlib.contextmanager
def quiet_stderr():
    """Send file descriptor 2 to /dev/null: the profiler's C++ start/stop lines are not results."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(os.devnull, "w") as devnull:
        os.dup2(devnull.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def profiler_peak_bytes(step) -> int:
    """Peak of the CPU allocator's allocations made during step(), from torch.profiler's memory
    events."""
    from torch._C._profiler import _EventType  # the event tree is torch.profiler's experimental API
    from torch.profiler import ProfilerActivity, profile

    with quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    sizes, stack = [], list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        event = stack.pop()
        if event.tag == _EventType.Allocation and event.extra_fields.device.type == "cpu":
            sizes.append((event.start_time_ns, event.extra_fields.alloc_size))
        stack.extend(event.children)
    live = peak = 0
    for _, size in sorted(sizes):
        live += size
        peak = max(peak, live)
    return peak


def make_chain(n: int, d: int, device: torch.device) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(*[nn.Sequential(nn.Linear(d, d), nn.Tanh()) for _ in range(n)]).to(device)


def make_step(model: nn.Sequential, x: torch.Tensor, segments: int):
    """One training step; segments = 1 is the plain chain."""
    run = model if segments == 1 else (lambda h: checkpoint_sequential(model, segments, h,
                                                                       use_reentrant=False))

    def step():
        run(x).sum().backward()
    return step


def peaks(step, device: torch.device) -> tuple[int, int | None]:
    """(peak bytes, the profiler's peak bytes or None): tensors on the CPU, the allocator on
    CUDA."""
    if device.type == "cuda":
        return cuda_peak_bytes(step, device), None
    return cpu_peak_bytes(step), profiler_peak_bytes(step)


def report(device: torch.device, B: int, d: int, reps: int) -> None:
    act = B * d * 4
    x = torch.randn(B, d, device=device)
    cross = device.type == "cpu"
    print(f"\n## {device}: B = {B}, d = {d}, one activation = {act} bytes; peaks in activations")

    print("\npeak against depth n (sqrt(n) segments: checkpoint_sequential with s = sqrt(n))")
    print(f"{'n':>4} {'plain':>8} {'n + 1':>6} {'sqrt(n) seg':>12} {'2 sqrt(n)':>10}"
          + (f" {'profiler plain':>15} {'profiler sqrt':>14}" if cross else ""))
    for n in [4, 9, 16, 25, 36, 49, 64, 81, 100]:
        model = make_chain(n, d, device)
        make_step(model, x, 1)()  # .grad (and on CUDA the cuBLAS workspace) allocated once
        plain, plain_prof = peaks(make_step(model, x, 1), device)
        ckpt, ckpt_prof = peaks(make_step(model, x, math.isqrt(n)), device)
        line = f"{n:>4} {plain / act:>8.3f} {n + 1:>6} {ckpt / act:>12.3f} {2 * math.isqrt(n):>10}"
        if cross:
            line += f" {plain_prof / act:>15.3f} {ckpt_prof / act:>14.3f}"
        print(line)

    n = 64
    model = make_chain(n, d, device)
    make_step(model, x, 1)()
    forwards = [0]
    for blk in model:
        blk.register_forward_pre_hook(lambda module, args: forwards.__setitem__(0, forwards[0] + 1))
    t_forward = fastest_seconds(lambda: model(x), repeat=reps, device=device)
    print(f"\nn = {n}: peak and time against segments (forward alone: {t_forward * 1e3:.2f} ms)")
    print(f"{'segments':>8} {'peak':>8} {'s + n/s':>8}" + (f" {'profiler':>9}" if cross else "")
          + f" {'block fwd':>10} {'time (ms)':>10} {'vs plain':>9}")
    counts = [1, 2, 4, 8, 16, 32, 64]
    steps = [make_step(model, x, s) for s in counts]
    rows = []
    for s, step in zip(counts, steps):
        peak, prof = peaks(step, device)
        forwards[0] = 0
        step()
        rows.append((peak, prof, forwards[0]))
    times = [math.inf] * len(steps)
    for _ in range(reps):  # round robin: a busy moment of the machine does not hit one count only
        for k, step in enumerate(steps):
            times[k] = min(times[k], fastest_seconds(step, repeat=1, device=device))
    t_plain = times[0]
    for s, (peak, prof, counted), t in zip(counts, rows, times):
        model_peak = n + 1 if s == 1 else s + n // s
        print(f"{s:>8} {peak / act:>8.3f} {model_peak:>8}"
              + (f" {prof / act:>9.3f}" if cross else "")
              + f" {counted:>10} {t * 1e3:>10.2f} {(t / t_plain - 1) * 100:>+8.0f}%")
    print(f"backward / forward of a plain step: {(t_plain - t_forward) / t_forward:.2f}")

    if device.type == "cuda":
        print("\nCUDA caching allocator: bytes allocated for one float32 tensor")
        print(f"{'floats':>8} {'computed':>9} {'allocated':>10} {'512*ceil(b/512)':>16}")
        for numel in [1, 100, 1000, 1024, 25_000]:
            torch.cuda.synchronize(device)
            before = torch.cuda.memory_allocated(device)
            t = torch.empty(numel, device=device)
            got = torch.cuda.memory_allocated(device) - before
            del t
            print(f"{numel:>8} {numel * 4:>9} {got:>10} {512 * math.ceil(numel * 4 / 512):>16}")


def main() -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1,
                        help="CPU threads for torch (lesson 06 uses 1)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"{args.threads} torch thread(s), torch {torch.__version__}, {gpu}")
    devices = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
    for device in devices:
        report(device, args.batch, args.width, args.reps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
