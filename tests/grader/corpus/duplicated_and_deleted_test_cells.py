"""Test cells duplicated and deleted: a solved notebook with fx_scale_test copied once more and
fx_grad_test removed.

Must score full marks: the test cells come from the instructor's notebook, once each.
"""

EXPECTED = {"fx_scale_test": 2.0, "fx_grad_test": 2.0, "fx_count_test": 1.0}
WORDS = ()
NEEDS_SANDBOX = False
REVIEW = None

import copy
from pathlib import Path

from corpus._notebook import cell_of, edited


def edit(nb) -> None:
    nb.cells.insert(5, copy.deepcopy(cell_of(nb, "fx_scale_test")))
    nb.cells.remove(cell_of(nb, "fx_grad_test"))


def submission(tmp: Path) -> bytes:
    return edited(edit)
