"""Deeply nested JSON on the answer pipe: a correct scale, then the answer cell writes a reply
nested 100,000 lists deep onto the worker's answer pipe.

Must score 0 for fx_scale_test ("not an answer"): the grader refuses the reply without recursing
into it, and the other exercises are graded again without it.
"""

EXPECTED = {"fx_scale_test": 0.0, "fx_grad_test": 2.0, "fx_count_test": 1.0}
WORDS = ("not an answer",)
NEEDS_SANDBOX = False
REVIEW = "imports os"

ANSWERS = {
    "fx_scale": r"""def scale(x, k):
    return x * k
import os, sys
os.write(int(sys.argv[-1]), b'{"id": 0, "obs": ' + b"[" * 100000 + b"]" * 100000 + b"}\n")
""",
}
