"""Segfault inside the function: square_grad reads address 0 through ctypes.

Must score 0 for fx_grad_test ("segmentation fault"): the worker's death is blamed on the exercise
whose code was running, and the others are graded in a fresh worker.
"""

EXPECTED = {"fx_scale_test": 2.0, "fx_grad_test": 0.0, "fx_count_test": 1.0}
WORDS = ("segmentation fault",)
NEEDS_SANDBOX = False
REVIEW = "imports ctypes"

ANSWERS = {
    "fx_grad": """import ctypes

def square_grad(x):
    ctypes.string_at(0)
""",
}
