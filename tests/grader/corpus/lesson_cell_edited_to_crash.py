"""Lesson cell edited to crash: the lesson's own cell after exercise 1 is replaced by os._exit(1).

Must score full marks: the lesson's cells come from the instructor's notebook; only answer cells
are taken from the submission.
"""

EXPECTED = {"fx_scale_test": 2.0, "fx_grad_test": 2.0, "fx_count_test": 1.0}
WORDS = ()
NEEDS_SANDBOX = False
REVIEW = None

from pathlib import Path

from corpus._notebook import edited


def edit(nb) -> None:
    lesson = next(c for c in nb.cells if c.source.startswith("doubled = scale"))
    lesson.source = "import os\nos._exit(1)"


def submission(tmp: Path) -> bytes:
    return edited(edit)
