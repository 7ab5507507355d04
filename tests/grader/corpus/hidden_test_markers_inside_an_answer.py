"""Hidden-test markers inside an answer: a correct square_grad whose cell holds nbgrader's
BEGIN/END HIDDEN TESTS, BEGIN SOLUTION and BEGIN EXPECTED markers, in comments and a string.

Must score full marks: markers in a learner's answer are text, not instructions to the grader.
"""

EXPECTED = {"fx_scale_test": 2.0, "fx_grad_test": 2.0, "fx_count_test": 1.0}
WORDS = ()
NEEDS_SANDBOX = False
REVIEW = None

from pathlib import Path

from corpus._notebook import GRAD_OK, cell_of, edited


def edit(nb) -> None:
    cell_of(nb, "fx_grad").source = ("### BEGIN HIDDEN TESTS\n"
                                     + GRAD_OK.replace("2 * x", "2 * x  # END HIDDEN TESTS")
                                     + 'NOTE = "### BEGIN SOLUTION ### BEGIN HIDDEN TESTS"\n'
                                       '### BEGIN EXPECTED\n')


def submission(tmp: Path) -> bytes:
    return edited(edit)
