"""Truncated file: a solved notebook cut off after 900 bytes.

Must score 0 in every exercise with the reason "invalid or truncated JSON".
"""

EXPECTED = {"fx_scale_test": 0.0, "fx_grad_test": 0.0, "fx_count_test": 0.0}
WORDS = ("invalid or truncated JSON",)
NEEDS_SANDBOX = False
REVIEW = None

from pathlib import Path

from corpus._notebook import dumps, notebook


def submission(tmp: Path) -> bytes:
    return dumps(notebook())[:900]
