"""Tensor shape of thousands of 4,299-digit integers: the square_grad cell replaces the protocol's
encode so that every observation is a tensor whose shape is 3,000 integers of 4,299 digits.

Must score 0 for fx_grad_test ("not an answer"): the grader refuses it before converting any of
those integers.
"""

EXPECTED = {"fx_scale_test": 2.0, "fx_grad_test": 0.0, "fx_count_test": 1.0}
WORDS = ("not an answer",)
NEEDS_SANDBOX = False
REVIEW = "imports course_utils.grader.protocol"

ANSWERS = {
    "fx_grad": """import course_utils.grader.protocol as protocol
protocol.encode = lambda value, *a, **k: {"$tensor": {"dtype": "float32",
                                                      "shape": [10 ** 4298] * 3000, "data": []}}

def square_grad(x):
    return 2 * x
""",
}
