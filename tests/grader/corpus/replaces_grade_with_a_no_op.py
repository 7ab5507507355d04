"""Replaces grade() with a no-op: the answer cell (scale wrong, x + k) rebinds grade in the
notebook and in course_utils.judging to a function that does nothing.

Must score 0 in every exercise ("hidden tests did not run"): every later test cell calls the
no-op, sends no observation, and a test that did not run is not a pass.
"""

EXPECTED = {"fx_scale_test": 0.0, "fx_grad_test": 0.0, "fx_count_test": 0.0}
WORDS = ("hidden tests did not run",)
NEEDS_SANDBOX = False
REVIEW = "redefines grade"

ANSWERS = {
    "fx_scale": """def scale(x, k):
    return x + k

grade = lambda *args, **kwargs: None
import course_utils.judging as judging
judging.grade = grade
""",
}
