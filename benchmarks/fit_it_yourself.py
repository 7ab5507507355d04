"""Lesson 10's transformer: the peak and time of one training step for each tool combination,
against the planner's prediction.

    python benchmarks/fit_it_yourself.py [--batch 64] [--repeat 3]

The model and data are lesson 10's (course_utils.planner.Plan's defaults: 4 blocks, d_model 64, 4
heads, sequences of 128, a vocabulary of 64; SGD with momentum; course_utils.data.sequences). For
each plan:

- predicted: what one step adds by course_utils.planner.predict (gradients, saved activations, one
  block's scores as temporaries), with one block's saved bytes measured (the lesson's exercise 1
  predicts them exactly);
- measured: the peak of the first step's CPU tensors (course_utils.stepcost.measured_step), with its
  FLOPs and aten calls against the plain step's (the capstone's bounds: 0.9x to 1.5x the FLOPs, at
  most 8x the calls);
- ms: the fastest of --repeat steps after one warm-up (course_utils.timing.fastest_seconds), without
  the counters: what a learner waits for.

Measured on a 2-core x86_64 CPU (AVX2, no bfloat16 matrix instructions), 2 torch threads, torch
2.13.0+cpu, 2026-11-27, `--repeat 2`:

    plan                            predicted   measured  pred/meas   FLOPs  calls      ms
    plain                            215.6MiB   206.5MiB       1.04   1.00x   1.0x     512
    accumulate 2                     108.2MiB   104.1MiB       1.04   1.00x   1.8x     436
    accumulate 4                      54.6MiB    52.5MiB       1.04   1.00x   3.4x     417
    checkpoint each block             79.2MiB    70.1MiB       1.13   1.25x   1.5x     740
    checkpoint + accumulate 2         40.0MiB    35.9MiB       1.11   1.25x   2.7x     617
    fused attention                  136.0MiB   139.1MiB       0.98   1.04x   0.8x     341
    fused + accumulate 2              68.4MiB    70.4MiB       0.97   1.04x   1.4x     314
    autocast bfloat16                119.0MiB   114.0MiB       1.04   1.00x   1.1x    3722
    autocast + accumulate 2           60.1MiB    58.1MiB       1.04   1.00x   2.0x    3536

The prediction is within 4% except for checkpointing (11-13% over: the recomputed block frees as its
backward goes). Autocast is about 7x slower than float32 on this CPU, which has no bfloat16 matrix
instructions. (the table above is this script's output on that machine; rerun it to see yours.)
"""

import argparse
import os
import platform
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from course_utils.planner import Plan, predict, training_step
from course_utils.lessonchecks.l10 import measured_block_bytes
from course_utils.stepcost import measured_step
from course_utils.timing import fastest_seconds

PLANS = {
    "plain": {},
    "accumulate 2": {"micro_batches": 2},
    "accumulate 4": {"micro_batches": 4},
    "checkpoint each block": {"checkpoint": True},
    "checkpoint + accumulate 2": {"checkpoint": True, "micro_batches": 2},
    "fused attention": {"fused": True},
    "fused + accumulate 2": {"fused": True, "micro_batches": 2},
    "autocast bfloat16": {"bf16": True},
    "autocast + accumulate 2": {"bf16": True, "micro_batches": 2},
}


def main() -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"# {platform.machine()}, {os.cpu_count()} cores, {torch.get_num_threads()} torch "
          f"threads, torch {torch.__version__}, batch {args.batch}")
    print(f"{'plan':<30}{'predicted':>11}{'measured':>11}{'pred/meas':>11}{'FLOPs':>8}"
          f"{'calls':>7}{'ms':>8}")
    plain = None
    for name, tools in PLANS.items():
        plan = Plan(batch=args.batch, **tools)
        # the float32 block measured at the micro-batch
        parts = predict(plan, measured_block_bytes)
        predicted = parts["gradients"] + parts["activations"] + parts["temporaries"]
        seen = measured_step(training_step(plan))
        plain = plain or seen
        ms = 1e3 * fastest_seconds(training_step(plan), repeat=args.repeat, warmup=1)
        print(f"{name:<30}{predicted / 2 ** 20:>8.1f}MiB{seen['peak'] / 2 ** 20:>8.1f}MiB"
              f"{predicted / seen['peak']:>11.2f}{seen['flops'] / plain['flops']:>7.2f}x"
              f"{seen['calls'] / plain['calls']:>6.1f}x{ms:>8.0f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
