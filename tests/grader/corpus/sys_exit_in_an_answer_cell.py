"""sys.exit in an answer cell: the square_grad cell calls sys.exit(0) instead of defining it.

Must score 0 for fx_grad_test: square_grad is never defined. The other exercises keep their
points.
"""

EXPECTED = {"fx_scale_test": 2.0, "fx_grad_test": 0.0, "fx_count_test": 1.0}
WORDS = ()
NEEDS_SANDBOX = False
REVIEW = "imports sys"

ANSWERS = {
    "fx_grad": """import sys
sys.exit(0)
""",
}
