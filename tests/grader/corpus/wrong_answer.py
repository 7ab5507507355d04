"""Wrong answer: scale adds where it should multiply.

Must score 0 for fx_scale_test, and the reason must name the mistake the test cell's judge knows
("x + k instead of x * k"); the other exercises are correct and keep their points.
"""

EXPECTED = {"fx_scale_test": 0.0, "fx_grad_test": 2.0, "fx_count_test": 1.0}
WORDS = ("x + k instead of x * k",)
NEEDS_SANDBOX = False
REVIEW = None

ANSWERS = {
    "fx_scale": """def scale(x, k):
    return x + k
""",
}
