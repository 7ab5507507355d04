"""course_utils.stepcost: the peak, FLOPs and calls of a step, counted, and checkpointing left
intact."""

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint

from course_utils.memory import cpu_peak_bytes
from course_utils.stepcost import measured_step


def test_a_matrix_product_is_counted_as_torch_counts_it():
    x, w = torch.randn(8, 16), torch.randn(16, 4)
    seen = measured_step(lambda: x @ w)
    assert torch.equal(seen["value"], x @ w)
    assert seen["flops"] == 2 * 8 * 16 * 4 and seen["calls"] == 1 and seen["peak"] == 8 * 4 * 4


def test_what_the_step_raised_is_the_outcome():
    def step():
        raise ValueError("no")
    seen = measured_step(step)
    assert seen["raised"][0] == "ValueError" and seen["flops"] == 0 and seen["calls"] == 0


def test_checkpointing_still_frees_what_it_means_to_free():
    """FlopCounterMode keeps the tensors checkpoint drops; the course's own counter must not."""
    torch.manual_seed(0)
    blocks = nn.Sequential(
        *(nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64)) for _ in range(6)))
    x = torch.randn(512, 64)

    def step():
        h = x
        for block in blocks:
            h = checkpoint(block, h, use_reentrant=False)
        h.sum().backward()
    step()   # the gradients exist: the peak is the activations'
    assert measured_step(step)["peak"] == cpu_peak_bytes(step)
    plain = measured_step(lambda: blocks(x).sum().backward())
    assert measured_step(step)["peak"] < plain["peak"] / 2


def test_fused_attention_on_the_cpu_is_counted():
    q, k, v = (torch.randn(2, 4, 32, 8, requires_grad=True) for _ in range(3))
    written = measured_step(lambda: ((q @ k.transpose(-2, -1)).softmax(-1) @ v).sum().backward())
    fused = measured_step(lambda: F.scaled_dot_product_attention(q, k, v).sum().backward())
    # two batched products of (32 x 8) and (8 x 32) per head
    forward = 2 * (2 * 2 * 4 * 32 * 32 * 8)
    assert written["flops"] >= 3 * forward and fused["flops"] >= 3 * forward
