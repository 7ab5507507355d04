"""Huge result: square_grad returns a tensor of 3 million zeros.

Must score 0 for fx_grad_test ("too large"): results over 2 million numbers are not sent to the
grader, and the reason says so.
"""

EXPECTED = {"fx_scale_test": 2.0, "fx_grad_test": 0.0, "fx_count_test": 1.0}
WORDS = ("too large",)
NEEDS_SANDBOX = False
REVIEW = None

ANSWERS = {
    "fx_grad": """import torch

def square_grad(x):
    return torch.zeros(3_000_000)
""",
}
