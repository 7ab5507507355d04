"""Returns the hidden tests' text: count_positive returns the hidden test cell's source, read out
of linecache, as a string.

Must score 0 for fx_count_test with a reason that names the type only ("should return an int, got
str"): the string is never quoted back.
"""

EXPECTED = {"fx_scale_test": 2.0, "fx_grad_test": 2.0, "fx_count_test": 0.0}
WORDS = ("should return an int, got str",)
NEEDS_SANDBOX = False
REVIEW = "imports linecache"

ANSWERS = {
    "fx_count": """import linecache

def count_positive(xs):
    return "".join("".join(v[2]) for v in linecache.cache.values()
                   if isinstance(v, tuple) and len(v) > 2)[-500:]
""",
}
