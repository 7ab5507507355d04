"""Floods the answer pipe: a correct count_positive, then the answer cell writes 40 MB of
garbage onto the worker's answer pipe.

Must score 0 for fx_count_test, with a reason that says how many MB it sent ("MB to the grader");
the grader neither hangs nor runs out of memory reading it, and the other exercises keep their
points.
"""

EXPECTED = {"fx_scale_test": 2.0, "fx_grad_test": 2.0, "fx_count_test": 0.0}
WORDS = ("MB to the grader",)
NEEDS_SANDBOX = False
REVIEW = "imports os"

ANSWERS = {
    "fx_count": """def count_positive(xs):
    return sum(1 for v in xs if v > 0)
import os, sys
os.write(int(sys.argv[-1]), b"x" * (40 * 2 ** 20))
""",
}
