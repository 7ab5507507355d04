"""Correct code writing to stderr: scale warns and writes progress to stderr, then returns x * k.

Must score full marks: warnings and stderr are not errors.
"""

EXPECTED = {"fx_scale_test": 2.0, "fx_grad_test": 2.0, "fx_count_test": 1.0}
WORDS = ()
NEEDS_SANDBOX = False
REVIEW = "imports sys"

ANSWERS = {
    "fx_scale": r"""import sys, warnings

def scale(x, k):
    warnings.warn('slow path')
    sys.stderr.write('progress 50%\n')
    return x * k
""",
}
