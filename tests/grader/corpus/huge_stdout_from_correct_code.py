"""Huge stdout from correct code: a correct scale whose answer cell prints 200 MB.

Must score full marks: output is the learner's business, not a reason to lose points or to hang the
grader.
"""

EXPECTED = {"fx_scale_test": 2.0, "fx_grad_test": 2.0, "fx_count_test": 1.0}
WORDS = ()
NEEDS_SANDBOX = False
REVIEW = None

ANSWERS = {
    "fx_scale": """def scale(x, k):
    return x * k
for _ in range(2000):
    print('x' * 100000)
""",
}
