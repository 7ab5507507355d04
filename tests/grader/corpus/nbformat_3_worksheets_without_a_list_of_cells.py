"""nbformat 3 worksheets without a list of cells: an old-format notebook whose worksheet's cells
is the number 5.

Must score 0 in every exercise ("missing from the submission"), not a crash.
"""

EXPECTED = {"fx_scale_test": 0.0, "fx_grad_test": 0.0, "fx_count_test": 0.0}
WORDS = ("missing from the submission",)
NEEDS_SANDBOX = False
REVIEW = None

from pathlib import Path


def submission(tmp: Path) -> bytes:
    return b'{"worksheets": [{"cells": 5}], "nbformat": 3}'
