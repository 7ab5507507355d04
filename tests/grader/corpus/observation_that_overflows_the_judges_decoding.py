"""Observation that overflows the judge's decoding: the answer cell replaces the protocol's
encode so that every observation is a float32 tensor holding the 401-digit integer 10 ** 400.

Must score 0 for fx_scale_test ("not an answer"): the grader refuses the 401-digit literal before
anything decodes it, so the answer that patched encode loses its points, and the others, run again
without it, are judged as they are.
"""

EXPECTED = {"fx_scale_test": 0.0, "fx_grad_test": 2.0, "fx_count_test": 1.0}
WORDS = ("not an answer",)
NEEDS_SANDBOX = False
REVIEW = "imports course_utils.grader.protocol"

ANSWERS = {
    "fx_scale": """import course_utils.grader.protocol as protocol
protocol.encode = lambda value, *a, **k: {"$tensor": {"dtype": "float32", "shape": [1],
                                                      "data": [10 ** 400]}}

def scale(x, k):
    return x * k
""",
}
