"""Crash in a later lesson cell: scale is correct on the hidden tests but ends the worker when the
lesson's own cell after fx_scale_test calls scale(21.0, 2.0).

Must score full marks: fx_scale_test was judged before the crash, and the lesson runs again with
scale stubbed for the exercises after it.
"""

EXPECTED = {"fx_scale_test": 2.0, "fx_grad_test": 2.0, "fx_count_test": 1.0}
WORDS = ()
NEEDS_SANDBOX = False
REVIEW = "imports os"

ANSWERS = {
    "fx_scale": """import os

def scale(x, k):
    if x == 21.0:
        os._exit(1)
    return x * k
""",
}
