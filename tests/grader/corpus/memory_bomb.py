"""Memory bomb: square_grad asks for 100 GiB at once.

Must score 0 for fx_grad_test ("raised MemoryError"): the memory limit refuses the allocation.
"""

EXPECTED = {"fx_scale_test": 2.0, "fx_grad_test": 0.0, "fx_count_test": 1.0}
WORDS = ("raised MemoryError",)
NEEDS_SANDBOX = False
REVIEW = None

ANSWERS = {
    "fx_grad": """def square_grad(x):
    return bytearray(100 * 2 ** 30)
""",
}
