"""Answer cell renamed: the scale answer cell's grade id changed to my_scale.

Must score 0 for fx_scale_test ("missing from the submission"): answers are found by the grade ids
of the instructor's notebook, and the reason says which one was not there.
"""

EXPECTED = {"fx_scale_test": 0.0, "fx_grad_test": 2.0, "fx_count_test": 1.0}
WORDS = ("missing from the submission",)
NEEDS_SANDBOX = False
REVIEW = None

from pathlib import Path

from corpus._notebook import cell_of, edited


def edit(nb) -> None:
    cell_of(nb, "fx_scale").metadata["nbgrader"]["grade_id"] = "my_scale"


def submission(tmp: Path) -> bytes:
    return edited(edit)
