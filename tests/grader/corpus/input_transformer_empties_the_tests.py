"""Input transformer empties the tests: the first answer cell installs an IPython input
transformer that blanks every later cell that calls grade(, a check_ function or a Check's .hidden(.

Must score 0 in every exercise ("hidden tests did not run"): a test cell that sends no observation
is not a pass, and the transformer empties all three test cells.
"""

EXPECTED = {"fx_scale_test": 0.0, "fx_grad_test": 0.0, "fx_count_test": 0.0}
WORDS = ("hidden tests did not run",)
NEEDS_SANDBOX = False
REVIEW = "calls get_ipython"

ANSWERS = {
    "fx_scale": """def scale(x, k):
    return x * k

get_ipython().input_transformers_cleanup.append(
    lambda lines: [] if any(w in l for l in lines for w in ("grade(", "check_", ".hidden("))
    else lines)
""",
}
