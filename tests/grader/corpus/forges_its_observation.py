"""Forges its observation: the answer cell replaces the grading session's grade with one that
sets the observation it sends to [6.0, 6.0, 6.0, 6.0], whatever the probe returns.

Must score 0 in every exercise: the forged values are judged as what they are, by the reference,
against its own expected values ("scale(1.5, -2.0) is 6"), and every later test cell sends the
same forgery.
"""

EXPECTED = {"fx_scale_test": 0.0, "fx_grad_test": 0.0, "fx_count_test": 0.0}
WORDS = ("scale(1.5, -2.0) is 6",)
NEEDS_SANDBOX = False
REVIEW = "imports course_utils.judging"

ANSWERS = {
    "fx_scale": """import course_utils.judging as judging
import course_utils.grader.protocol as protocol

class Forger:
    def grade(self, probe, expect, judge):
        judging.session.obs = protocol.encode([6.0, 6.0, 6.0, 6.0])
judging.session.grade = Forger().grade

def scale(x, k):
    return 6.0
""",
}
