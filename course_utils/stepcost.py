"""What one training step costs, counted rather than timed: the peak of the CPU tensors it creates,
its floating-point operations and its aten calls (lesson 10's capstone and memory planner).

    seen = measured_step(step)
        # {"value" or "raised", "peak": bytes, "flops": int, "calls": int}

The FLOPs follow torch.utils.flop_counter's formulas (matrix products, convolutions, attention),
counted in a dispatch mode of our own: FlopCounterMode itself tracks modules in a way that keeps
alive the tensors torch.utils.checkpoint means to free (177 MiB at the peak instead of 70 on lesson
10's model). The CPU's fused attention is counted with the formulas torch gives its GPU kernels.
Calls are a proxy for time that does not depend on the machine: a step in many small micro-batches
repeats every call.
"""

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry

from course_utils.judging import outcome
from course_utils.memory import TensorAllocations

_ATEN = torch.ops.aten
# torch's formulas, and the CPU's fused attention counted as the GPU's kernels are
FLOPS = {**flop_registry,
         _ATEN._scaled_dot_product_flash_attention_for_cpu:
             flop_registry[_ATEN._scaled_dot_product_flash_attention],
         _ATEN._scaled_dot_product_flash_attention_for_cpu_backward:
             flop_registry[_ATEN._scaled_dot_product_flash_attention_backward]}


class Work(TorchDispatchMode):
    """Counts the aten operations dispatched while it is on (.calls) and their floating-point
    operations (.flops, by torch.utils.flop_counter's formulas)."""

    def __init__(self):
        super().__init__()
        self.calls = self.flops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        self.calls += 1
        count = FLOPS.get(func._overloadpacket) or FLOPS.get(func)
        if count is not None:
            self.flops += count(*args, **kwargs, out_val=out)
        return out


def measured_step(step) -> dict:
    """Run step() once under the course's measurements: the peak of CPU tensors it created
    (TensorAllocations), its floating-point operations and aten calls (Work), and what it
    returned."""
    with TensorAllocations("cpu") as mem, Work() as work:
        result = outcome(step)
    return {**result, "peak": mem.peak_bytes, "flops": work.flops, "calls": work.calls}
