"""Slow correct code within the budget: scale sleeps 0.4 s per call, then returns x * k.

Must score full marks: slow is not wrong while each cell and the notebook stay within their time
limits.
"""

EXPECTED = {"fx_scale_test": 2.0, "fx_grad_test": 2.0, "fx_count_test": 1.0}
WORDS = ()
NEEDS_SANDBOX = False
REVIEW = None

ANSWERS = {
    "fx_scale": """import time

def scale(x, k):
    time.sleep(0.4)
    return x * k
""",
}
