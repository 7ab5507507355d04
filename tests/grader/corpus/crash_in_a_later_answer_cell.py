"""Crash in a later answer cell: the count_positive cell ends the worker with os._exit(0).

Must score 0 for fx_count_test ("exited"); the earlier exercises keep their points.
"""

EXPECTED = {"fx_scale_test": 2.0, "fx_grad_test": 2.0, "fx_count_test": 0.0}
WORDS = ("exited",)
NEEDS_SANDBOX = False
REVIEW = "imports os"

ANSWERS = {
    "fx_count": """import os
os._exit(0)
""",
}
