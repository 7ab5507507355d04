"""Reads solutions, writes the gradebook: scale reads the instructor's notebook (with its
solutions) and returns x * k only if it could; square_grad overwrites the instructor's gradebook.db
and returns 2 * x only if it could.

Must score 0 for fx_scale_test and fx_grad_test ("is 0, expected"): the sandbox sees neither file.
check() then makes sure the gradebook still holds what it held. Needs the full sandbox.
"""

EXPECTED = {"fx_scale_test": 0.0, "fx_grad_test": 0.0, "fx_count_test": 1.0}
WORDS = ("is 0, expected",)
NEEDS_SANDBOX = True
REVIEW = "calls open"

from pathlib import Path

from corpus._notebook import FIXTURE, dumps, notebook


def submission(tmp: Path) -> bytes:
    canary = tmp / "gradebook.db"
    canary.write_text("scores")
    reads = f"""import os
try:
    SOURCE = open({str(FIXTURE)!r}).read()
except OSError:
    SOURCE = ""

def scale(x, k):
    return x * k if "BEGIN SOLUTION" in SOURCE else 0.0
"""
    writes = f"""import os
try:
    with open({str(canary)!r}, "w") as f:
        f.write("everyone gets 100")
    WROTE = True
except OSError:
    WROTE = False

def square_grad(x):
    return 2 * x if WROTE else 0 * x
"""
    return dumps(notebook(fx_scale=reads, fx_grad=writes))


def check(tmp: Path) -> None:
    assert (tmp / "gradebook.db").read_text() == "scores", "the sandbox wrote the instructor's file"
