"""Fork flood: count_positive forks forever.

Must score 0 for fx_count_test ("time limit"): the sandbox's process limit keeps the flood off the
machine and the cell's time limit ends it. Needs the full sandbox: without it the flood would
reach the machine.
"""

EXPECTED = {"fx_scale_test": 2.0, "fx_grad_test": 2.0, "fx_count_test": 0.0}
WORDS = ("time limit",)
NEEDS_SANDBOX = True
REVIEW = "imports os"

ANSWERS = {
    "fx_count": """import os

def count_positive(xs):
    while True:
        try:
            os.fork()
        except OSError:
            pass
""",
}
