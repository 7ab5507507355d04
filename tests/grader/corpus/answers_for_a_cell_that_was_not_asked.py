"""Answers for a cell that was not asked: a correct scale, then the answer cell writes a reply for
cell 999 straight onto the worker's answer pipe.

Must score 0 for fx_scale_test ("answer for another cell"): the grader takes a reply out of turn as
the worker failing while that answer ran, and grades the other exercises again with it stubbed.
"""

EXPECTED = {"fx_scale_test": 0.0, "fx_grad_test": 2.0, "fx_count_test": 1.0}
WORDS = ("answer for another cell",)
NEEDS_SANDBOX = False
REVIEW = "imports os"

ANSWERS = {
    "fx_scale": r"""def scale(x, k):
    return x * k
import os, sys
os.write(int(sys.argv[-1]), b'{"id": 999, "obs": null}\n')
""",
}
