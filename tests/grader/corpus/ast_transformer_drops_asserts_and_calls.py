"""AST transformer drops asserts and calls: the first answer cell installs an IPython AST
transformer that deletes every assert and every expression statement (so grade(probe, expect,
judge) never runs), and scale returns 0.0.

Must score 0 in every exercise: no test cell sends an observation, and a test that did not run is
not a pass.
"""

EXPECTED = {"fx_scale_test": 0.0, "fx_grad_test": 0.0, "fx_count_test": 0.0}
WORDS = ()
NEEDS_SANDBOX = False
REVIEW = "calls get_ipython"

ANSWERS = {
    "fx_scale": """import ast

class NoTests(ast.NodeTransformer):
    def visit_Assert(self, node):
        return None
    def visit_Expr(self, node):
        return None

get_ipython().ast_transformers.append(NoTests())

def scale(x, k):
    return 0.0
""",
}
