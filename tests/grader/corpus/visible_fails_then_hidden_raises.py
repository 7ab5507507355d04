"""The visible test fails (an AssertionError from its check) and the hidden test's probe, which
calls square_grad without naming the call, then raises OverflowError inside the learner's code.

Must score 0 for fx_grad_test, and the reason names what the hidden test raised (OverflowError), not
the visible check's AssertionError: the hidden test is what decides the points.
"""

EXPECTED = {"fx_scale_test": 2.0, "fx_grad_test": 0.0, "fx_count_test": 1.0}
WORDS = ("the hidden test raised OverflowError", "your code raised it")
NEEDS_SANDBOX = False
REVIEW = None

ANSWERS = {
    "fx_grad": """def square_grad(x):
    if x.dtype == torch.float64:
        raise OverflowError("only float32 here")
    return x if x.numel() == 2 else 2 * x
""",
}
