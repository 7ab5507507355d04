"""Forged grade cell and points: a solved notebook with an extra test cell worth 100 points
(fx_bonus) and fx_count_test's points raised to 100.

Must score full marks and no more, 5 points in all: the tests and their points come from the
instructor's notebook, whatever the submission's cells say.
"""

EXPECTED = {"fx_scale_test": 2.0, "fx_grad_test": 2.0, "fx_count_test": 1.0}
WORDS = ()
NEEDS_SANDBOX = False
REVIEW = None

from pathlib import Path

import nbformat
from corpus._notebook import cell_of, edited


def edit(nb) -> None:
    forged = nbformat.v4.new_code_cell("pass", metadata={"nbgrader": {
        "grade": True, "solution": False, "locked": True, "grade_id": "fx_bonus", "points": 100,
        "schema_version": 3}})
    nb.cells.append(forged)
    cell_of(nb, "fx_count_test").metadata["nbgrader"]["points"] = 100


def submission(tmp: Path) -> bytes:
    return edited(edit)
