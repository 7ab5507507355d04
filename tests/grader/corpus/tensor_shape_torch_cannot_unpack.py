"""Tensor shape torch cannot unpack: the square_grad cell replaces the protocol's encode so that
every observation is an empty float32 tensor of shape [0, 10 ** 30].

Must score 0 for fx_grad_test ("not an answer"): refused by the grader, as in
observation_that_overflows_the_judges_decoding; the others are graded again without it.
"""

EXPECTED = {"fx_scale_test": 2.0, "fx_grad_test": 0.0, "fx_count_test": 1.0}
WORDS = ("not an answer",)
NEEDS_SANDBOX = False
REVIEW = "imports course_utils.grader.protocol"

ANSWERS = {
    "fx_grad": """import course_utils.grader.protocol as protocol
protocol.encode = lambda value, *a, **k: {"$tensor": {"dtype": "float32", "shape": [0, 10 ** 30],
                                                      "data": []}}

def square_grad(x):
    return 2 * x
""",
}
