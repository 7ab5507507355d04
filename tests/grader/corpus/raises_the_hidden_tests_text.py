"""Raises the hidden tests' text: square_grad reads the hidden test cell's source out of
linecache and raises it as a ValueError's message.

Must score 0 for fx_grad_test, and the feedback names only the exception ("raised ValueError"),
never its message: the hidden tests' text must not reach the learner.
"""

EXPECTED = {"fx_scale_test": 2.0, "fx_grad_test": 0.0, "fx_count_test": 1.0}
WORDS = ("raised ValueError",)
NEEDS_SANDBOX = False
REVIEW = "imports linecache"

ANSWERS = {
    "fx_grad": """import linecache

def square_grad(x):
    text = "".join("".join(v[2]) for v in linecache.cache.values()
                   if isinstance(v, tuple) and len(v) > 2)
    raise ValueError(text[-3000:])
""",
}
