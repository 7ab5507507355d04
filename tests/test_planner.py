"""course_utils.planner: a block's bytes exact, the step's peak predicted near the measured one, the
widget redraws."""

import pytest
import torch

from course_utils.lessonchecks.l10 import measured_block_bytes
from course_utils.memory import SavedTensors
from course_utils.models import Block
from course_utils.planner import Plan, measure, planner, predict, saved_by_block, svg


def block_bytes(batch, seq, d_model, heads, fused=False):
    """What one float32 Block saves (lesson 10's exercise 1, the oracle here), checked against
    SavedTensors below."""
    return (4 * batch * seq * (16 * d_model + 4 + heads * (1 if fused else seq))
            + (0 if fused else seq * seq))


def _saved_under_autocast(b, s, d, h, fused):
    with torch.random.fork_rng():
        torch.manual_seed(0)
        block = Block(d, h, fused)
        x = torch.randn(b, s, d, requires_grad=True) * 1.0
    with (torch.autocast("cpu", dtype=torch.bfloat16),
          SavedTensors(exclude=block.parameters()) as saved):
        block(x)
    return saved.activation_bytes


@pytest.mark.parametrize("b, s, d, h", [(3, 16, 32, 4), (5, 8, 64, 2), (4, 5, 8, 1)])
@pytest.mark.parametrize("fused", [False, True])
def test_a_blocks_bytes_in_float32_and_scaled_under_autocast_are_exact(b, s, d, h, fused):
    """float32: the caller's formula (here the oracle, checked); autocast: measured on one and two
    sequences, scaled, equal to the measurement at b sequences."""
    plan = Plan(seq=s, d_model=d, heads=h, batch=b, fused=fused)
    assert saved_by_block(plan, b, block_bytes) == measured_block_bytes(b, s, d, h, fused)
    assert saved_by_block(Plan(seq=s, d_model=d, heads=h, batch=b, fused=fused, bf16=True),
                          b, None) == _saved_under_autocast(b, s, d, h, fused)


@pytest.mark.parametrize("plan", [
    Plan(batch=16, micro_batches=4), Plan(batch=16, checkpoint=True), Plan(batch=16, fused=True),
    Plan(batch=8, bf16=True), Plan(batch=32, layers=2, d_model=128, heads=8, seq=32),
    Plan(batch=8, checkpoint=True, fused=True, micro_batches=2)], ids=str)
def test_the_predicted_step_is_near_the_measured_one(plan):
    predicted, measured = predict(plan, block_bytes), measure(plan, block_bytes)
    step = predicted["gradients"] + predicted["activations"] + predicted["temporaries"]
    assert measured is not None and 0.85 < step / measured["step"] < 1.3
    assert measured["parameters"] == 4 * plan.num_params == 4 * sum(
        p.numel() for p in __import__("course_utils.models", fromlist=["Transformer"]).Transformer(
            plan.vocab, plan.d_model, plan.heads, plan.layers, plan.seq).parameters())


def test_zero_divides_the_state_and_each_process_takes_its_share_of_the_batch():
    one, four = (predict(Plan(batch=64), block_bytes),
                 predict(Plan(batch=64, processes=4, zero_stage=3), block_bytes))
    for part in ("parameters", "momentum", "gradients"):
        assert four[part] == -(-one[part] // 4)
    assert four["activations"] < one["activations"] / 3.9
    stage1 = predict(Plan(batch=64, processes=4, zero_stage=1), block_bytes)
    assert stage1["momentum"] == four["momentum"] and stage1["gradients"] == one["gradients"]
    # what is sharded is whole where it is used: stage 3 gathers one block's parameters while it
    # runs, stages 2 and 3 hold one block's gradients until they are reduce-scattered (FSDP, each
    # block its own unit)
    stage2 = predict(Plan(batch=64, processes=4, zero_stage=2), block_bytes)
    block = 4 * sum(p.numel() for p in Block(64, 4).parameters())
    # one process's own batch alone
    quarter = predict(Plan(batch=16), block_bytes)["temporaries"]
    assert (stage1["temporaries"], stage2["temporaries"], four["temporaries"]) == (
        quarter, quarter + block, quarter + 2 * block)
    # one process
    assert predict(Plan(batch=64, zero_stage=3), block_bytes)["temporaries"] == one["temporaries"]
    # several processes: not measured here
    assert measure(Plan(batch=64, processes=4), block_bytes) is None
    # too big to run at once
    assert measure(Plan(batch=256, seq=1024), block_bytes) is None


def test_bad_plans_are_refused():
    with pytest.raises(ValueError, match=r"d_model \(60\) must be a multiple of heads \(8\)"):
        Plan(d_model=60, heads=8)
    with pytest.raises(ValueError,
                       match=r"the batch \(10\) must split evenly into processes x micro_batches"):
        Plan(batch=10, micro_batches=4)
    with pytest.raises(ValueError, match="zero_stage must be 0, 1, 2 or 3, got 4"):
        Plan(zero_stage=4)


def test_the_figure_and_the_widget_redraw():
    picture = svg(predict(Plan(batch=4), block_bytes), measure(Plan(batch=4), block_bytes))
    assert picture.startswith("<svg") and "predicted" in picture and "measured" in picture
    box = planner(Plan(batch=4), block_bytes)
    figure = box.children[-1]
    before = figure.value
    box.children[0].value = 2                                     # layers: 4 -> 2
    assert figure.value != before and "<svg" in figure.value
    box.children[3].value = 256                                   # a batch too big to measure live
    assert "not run" in figure.value
