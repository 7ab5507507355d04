"""Patches checks, torch and AssertionError: the answer cell replaces course_utils.checks' check
functions, torch.allclose and torch.Tensor.__eq__ with ones that always agree, then returns 0.0.

Must score 0 for fx_scale_test ("is 0, expected"): the hidden tests are judged in the reference
worker, which the learner's patches never reach, against the values scale really returned. The
other answers are correct and keep their points.
"""

EXPECTED = {"fx_scale_test": 0.0, "fx_grad_test": 2.0, "fx_count_test": 1.0}
WORDS = ("is 0, expected",)
NEEDS_SANDBOX = False
REVIEW = "imports course_utils.checks"

ANSWERS = {
    "fx_scale": """import course_utils.checks as checks
import torch
for name in ("check_float", "check_floats", "check_tensor", "check_raises"):
    setattr(checks, name, lambda *a, **k: None)
globals()["check_float"] = globals()["check_tensor"] = lambda *a, **k: None
torch.allclose = lambda *a, **k: True
torch.Tensor.__eq__ = lambda self, other: torch.ones_like(self, dtype=torch.bool)

def scale(x, k):
    return 0.0
""",
}
