"""Loop that ignores SIGINT: count_positive ignores Ctrl-C and loops forever.

Must score 0 for fx_count_test ("time limit"): the cell's time limit ends the worker whatever
signals it ignores.
"""

EXPECTED = {"fx_scale_test": 2.0, "fx_grad_test": 2.0, "fx_count_test": 0.0}
WORDS = ("time limit",)
NEEDS_SANDBOX = False
REVIEW = "imports signal"

ANSWERS = {
    "fx_count": """import signal

def count_positive(xs):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        pass
""",
}
