"""Hidden test text as the digits of a huge int: for the empty list, count_positive returns the
hidden test's CASES line, read out of linecache, packed into an int of about 400 digits.

Must score 0 for fx_count_test ("int too large"): the digits never reach the feedback.
"""

EXPECTED = {"fx_scale_test": 2.0, "fx_grad_test": 2.0, "fx_count_test": 0.0}
WORDS = ("int too large",)
NEEDS_SANDBOX = False
REVIEW = "imports linecache"

ANSWERS = {
    "fx_count": """import linecache

def count_positive(xs):
    if xs == []:
        src = ["".join(v[2]) for v in list(linecache.cache.values())
               if isinstance(v, tuple) and len(v) > 2]
        text = next(s for s in reversed(src) if "CASES" in s and "def" not in s).strip()
        return int.from_bytes(text.encode()[:165], "big")
    return sum(1 for v in xs if v > 0)
""",
}
