"""Untouched: the release as the learner received it, every answer still the stub.

Must score 0 in every exercise with the reason "not attempted".
"""

EXPECTED = {"fx_scale_test": 0.0, "fx_grad_test": 0.0, "fx_count_test": 0.0}
WORDS = ("not attempted",)
NEEDS_SANDBOX = False
REVIEW = None

from pathlib import Path

from corpus._notebook import dumps, release


def submission(tmp: Path) -> bytes:
    return dumps(release())
