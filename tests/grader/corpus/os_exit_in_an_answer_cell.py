"""os._exit in an answer cell: a correct scale, then the answer cell ends the worker with
os._exit(3).

Must score 0 for fx_scale_test with the reason ("exited", "exit code 3"); the lesson runs again with
that answer stubbed, so the other exercises are graded and keep their points.
"""

EXPECTED = {"fx_scale_test": 0.0, "fx_grad_test": 2.0, "fx_count_test": 1.0}
WORDS = ("exited", "exit code 3")
NEEDS_SANDBOX = False
REVIEW = "imports os"

ANSWERS = {
    "fx_scale": """def scale(x, k):
    return x * k
import os
os._exit(3)
""",
}
