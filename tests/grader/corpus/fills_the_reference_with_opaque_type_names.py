"""Fills the reference with opaque type names: a correct count_positive, but the cell replaces the
protocol's encode so that its probe's four results are sent as 100,000 opaque type names.

Must score 0 for fx_count_test: type names are not the ints the judge wants. Judging them must
not make the reference restart (test_no_submission_makes_the_reference_restart) nor run past the
notebook's budget.
"""

EXPECTED = {"fx_scale_test": 2.0, "fx_grad_test": 2.0, "fx_count_test": 0.0}
WORDS = ()
NEEDS_SANDBOX = False
REVIEW = "imports course_utils.grader.protocol"

ANSWERS = {
    "fx_count": """import course_utils.grader.protocol as protocol
encode = protocol.encode
protocol.encode = lambda v, *a, **k: ([{"$opaque": "T%d" % i} for i in range(100000)]
                                      if not a and type(v) is list and len(v) == 4
                                      else encode(v, *a, **k))

def count_positive(xs):
    return sum(1 for v in xs if v > 0)
""",
}
