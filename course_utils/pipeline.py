"""Pipeline schedules measured: stages that take a set time, and what each stage did when.

    stage = PipelineStage(SlowStage(layer, forward_s=0.01, backward_s=0.02), rank, world_size,
                          device)                              # torch.distributed.pipelining
    schedule = Schedule1F1B(stage, n_microbatches=4, loss_fn=loss_fn)
    actions = record_actions(stage)      # a list that fills as the schedule runs
    start = time.perf_counter(); schedule.step(...); end = time.perf_counter()
    idle_fraction(actions, start, end)   # this rank's bubble: the share of the step it waited

SlowStage makes a stage's forward and backward take at least a set time whatever the machine: it
sleeps, so four ranks on two cores still behave like four devices, each busy for as long as its
work takes. record_actions times every forward and backward of a rank's stages and counts the
micro-batches the rank holds after each (forwarded, not yet backwarded: their activations are
alive). Both run in the worker processes of course_utils.parallel.run_workers, which is why they
live in a module (a notebook's classes cannot travel to a worker).
"""

import time

import torch
from torch import nn

__all__ = ["SlowStage", "record_actions", "idle_fraction"]


class _WaitInBackward(torch.autograd.Function):
    """The identity, whose backward sleeps `seconds` before it passes the gradient on."""

    @staticmethod
    def forward(ctx, x, seconds):
        ctx.seconds = seconds
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        time.sleep(ctx.seconds)
        return grad, None


class SlowStage(nn.Module):
    """module, whose forward takes at least forward_s seconds more and its backward backward_s more.

    Inputs: module: an nn.Module (its parameters are this stage's); forward_s, backward_s: seconds,
            numbers >= 0 (a pipeline's backward usually takes about twice its forward).
    The output is module's output, with the same values and gradients.
    """

    def __init__(self, module: nn.Module, forward_s: float, backward_s: float):
        super().__init__()
        for name, s in (("forward_s", forward_s), ("backward_s", backward_s)):
            if type(s) not in (int, float) or not s >= 0:
                raise ValueError(f"{name} must be a number of seconds >= 0, got {s!r}")
        self.module, self.forward_s, self.backward_s = module, forward_s, backward_s

    def forward(self, *args):
        time.sleep(self.forward_s)
        return _WaitInBackward.apply(self.module(*args), self.backward_s)


def record_actions(stages) -> list[dict]:
    """Time every forward and backward a schedule runs on this rank's stages, from now on.

    Inputs: stages: a torch.distributed.pipelining PipelineStage, or the list of those one rank
            holds (interleaved schedules give a rank several).
    Returns: a list that fills as the schedule runs, one dict per action in the order they ran:
             {"kind": "F" or "B", "stage": the stage's index, "micro_batch": int,
              "start": s, "end": s (time.perf_counter()),
              "in_flight": micro-batches this rank holds after the action, over its stages (the
              forward outputs a stage keeps until their backward)}.
    """
    stages = stages if isinstance(stages, (list, tuple)) else [stages]
    actions = []

    def timed(stage, kind, run):
        def action(chunk, *args, **kwargs):
            start = time.perf_counter()
            out = run(chunk, *args, **kwargs)
            actions.append({"kind": kind, "stage": stage.stage_index, "micro_batch": chunk,
                            "start": start, "end": time.perf_counter(),
                            "in_flight": sum(len(s.fwd_cache) for s in stages)})
            return out
        return action

    for stage in stages:
        stage.forward_one_chunk = timed(stage, "F", stage.forward_one_chunk)
        stage.backward_one_chunk = timed(stage, "B", stage.backward_one_chunk)
    return actions


def idle_fraction(actions: list[dict], start: float, end: float) -> float:
    """The share of [start, end] during which none of `actions` ran: a rank's bubble in a step.

    Inputs: actions: dicts with "start" and "end" (record_actions'), inside [start, end];
            start < end, seconds.
    Returns: 1 - (time covered by the actions) / (end - start), a float in [0, 1].
    """
    if not end > start:
        raise ValueError(f"end ({end}) must be after start ({start})")
    busy, reached = 0.0, start
    for a in sorted(actions, key=lambda a: a["start"]):
        lo, hi = max(a["start"], reached), min(a["end"], end)
        if hi > lo:
            busy, reached = busy + hi - lo, hi
    return 1.0 - busy / (end - start)
