"""Answer cell duplicated: a wrong scale (x + k) in a copy of the fx_scale cell placed before the
correct one.

Must score 0 for fx_scale_test: the first answer cell with a grade id is graded ("x + k"), and the
notes say it appeared "more than once".
"""

EXPECTED = {"fx_scale_test": 0.0, "fx_grad_test": 2.0, "fx_count_test": 1.0}
WORDS = ("more than once", "x + k")
NEEDS_SANDBOX = False
REVIEW = None

import copy
from pathlib import Path

from corpus._notebook import cell_of, edited


def edit(nb) -> None:
    first = copy.deepcopy(cell_of(nb, "fx_scale"))
    first.source = "def scale(x, k):\n    return x + k\n"
    nb.cells.insert(nb.cells.index(cell_of(nb, "fx_scale")), first)


def submission(tmp: Path) -> bytes:
    return edited(edit)
