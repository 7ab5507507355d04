"""Solved: the correct answer in every exercise.

Must score full marks with no reason and no review flag: the baseline every other case differs from.
"""

EXPECTED = {"fx_scale_test": 2.0, "fx_grad_test": 2.0, "fx_count_test": 1.0}
WORDS = ()
NEEDS_SANDBOX = False
REVIEW = None

ANSWERS = {}
