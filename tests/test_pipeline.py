"""course_utils.pipeline: a stage that takes a set time and keeps values and gradients, the record
of what a schedule ran (and how many micro-batches a rank held) in real 2-rank pipelines of
torch.distributed.pipelining, and the idle share of a step. No assertion reads a speed: times are
only checked from below (a sleep lasts at least its length) or made up."""

import time

import pytest
import torch
import torch.distributed as dist
from torch import nn

from course_utils.parallel import run_workers, worker_device
from course_utils.pipeline import SlowStage, idle_fraction, record_actions

D, M = 6, 4          # features, micro-batches


def one_layer(index):
    torch.manual_seed(index)
    return nn.Sequential(nn.Linear(D, D), nn.Tanh())


def data():
    torch.manual_seed(100)
    return torch.randn(2 * M, D), torch.randn(2 * M, D)


def loss_fn(out, target):
    return ((out - target) ** 2).mean()


# A module-level worker: it travels to the ranks by reference.
def two_schedules(rank, world_size):
    """Each schedule on a fresh copy of rank's layer: what ran, in order, and the layer's grads
    (on the worker's device: the CPU with gloo, a GPU with NCCL)."""
    from torch.distributed import pipelining as pp
    dev = worker_device()
    x, y = (t.to(dev) for t in data())
    runs = {}
    for name in ("ScheduleGPipe", "Schedule1F1B"):
        layer = one_layer(rank).to(dev)
        stage = pp.PipelineStage(SlowStage(layer, 0.001, 0.002), rank, world_size, dev)
        schedule = getattr(pp, name)(stage, n_microbatches=M, loss_fn=loss_fn)
        actions = record_actions(stage)
        start = time.perf_counter()
        if rank == 0:
            schedule.step(x)
        else:
            schedule.step(target=y, losses=[])
        end = time.perf_counter()
        dist.barrier()
        runs[name] = {"actions": actions, "start": start, "end": end,
                      "grads": [p.grad.clone() for p in layer.parameters()]}
    return runs


@pytest.fixture(scope="module")
def ranks():
    return run_workers(two_schedules, world_size=2, timeout=60)


def test_the_schedules_run_what_they_promise_and_hold_what_they_promise(ranks):
    """GPipe: every forward, then every backward, so a stage holds all M micro-batches; 1F1B:
    stage s holds at most min(M, p - s) (2 on the first stage, 1 on the last)."""
    for rank, held in ((0, {"ScheduleGPipe": M, "Schedule1F1B": 2}),
                       (1, {"ScheduleGPipe": M, "Schedule1F1B": 1})):
        for name, most in held.items():
            actions = ranks[rank][name]["actions"]
            assert sorted((a["kind"], a["micro_batch"]) for a in actions) == \
                sorted((k, j) for k in "FB" for j in range(M)), (rank, name)
            assert max(a["in_flight"] for a in actions) == most, (rank, name)
            assert all(a["stage"] == rank for a in actions)
            assert all(a["end"] >= a["start"] for a in actions)
    gpipe = [a["kind"] + str(a["micro_batch"]) for a in ranks[0]["ScheduleGPipe"]["actions"]]
    assert gpipe == ["F0", "F1", "F2", "F3", "B0", "B1", "B2", "B3"]


def test_pipelined_gradients_are_one_process_gradients(ranks):
    """SlowStage changes no value: the stages' gradients are those of the whole batch (the mean
    loss: the schedules divide by the number of micro-batches) on one process."""
    model = nn.Sequential(one_layer(0), one_layer(1))
    x, y = data()
    loss_fn(model(x), y).backward()
    want = [[p.grad for p in model[r].parameters()] for r in range(2)]
    for name in ("ScheduleGPipe", "Schedule1F1B"):
        for rank in range(2):
            for got, right in zip(ranks[rank][name]["grads"], want[rank]):
                torch.testing.assert_close(got, right, rtol=1e-5, atol=1e-6)


def test_slow_stage_keeps_values_and_gradients_and_takes_at_least_its_time():
    layer = one_layer(3)
    x = torch.randn(5, D, requires_grad=True)
    slow = SlowStage(layer, forward_s=0.05, backward_s=0.08)
    start = time.perf_counter()
    out = slow(x)
    forward = time.perf_counter() - start
    torch.testing.assert_close(out, layer(x), rtol=0, atol=0)
    start = time.perf_counter()
    got, = torch.autograd.grad(out.sum(), x)
    backward = time.perf_counter() - start
    want, = torch.autograd.grad(layer(x).sum(), x)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert forward >= 0.05 and backward >= 0.08


@pytest.mark.parametrize("bad", [-0.1, "1", None, float("nan")])
def test_slow_stage_refuses_a_time_that_is_not_a_number_of_seconds(bad):
    with pytest.raises(ValueError, match="seconds"):
        SlowStage(nn.Identity(), bad, 0.0)


def test_idle_fraction_counts_overlapping_and_overhanging_actions_once():
    acts = [{"start": 1.0, "end": 3.0}, {"start": 2.0, "end": 4.0},   # 1 to 4, overlapping
            {"start": 6.0, "end": 12.0}]                                # clipped at 10
    assert idle_fraction(acts, 0.0, 10.0) == pytest.approx(1 - 7 / 10)
    assert idle_fraction([], 0.0, 2.0) == 1.0
    assert idle_fraction([{"start": 0.0, "end": 2.0}], 0.0, 2.0) == 0.0
    with pytest.raises(ValueError, match="after"):
        idle_fraction(acts, 3.0, 3.0)


@pytest.mark.cuda
@pytest.mark.skipif(torch.cuda.device_count() < 2,
                    reason="NCCL across ranks needs at least 2 CUDA GPUs")
def test_the_same_schedules_run_on_two_gpus_with_nccl():
    """Lesson 11's pipelines on GPUs: the same worker with NCCL, the same actions and the gradients
    of gloo on the CPU (to float32 rounding)."""
    ranks = run_workers(two_schedules, world_size=2, backend="gloo", timeout=120)
    on_gpus = run_workers(two_schedules, world_size=2, backend="nccl", timeout=120)
    for rank in range(2):
        for name in ("ScheduleGPipe", "Schedule1F1B"):
            kinds = [(a["kind"], a["micro_batch"]) for a in on_gpus[rank][name]["actions"]]
            assert kinds == [(a["kind"], a["micro_batch"]) for a in ranks[rank][name]["actions"]]
            for got, cpu in zip(on_gpus[rank][name]["grads"], ranks[rank][name]["grads"]):
                torch.testing.assert_close(got, cpu, rtol=1e-4, atol=1e-5)
