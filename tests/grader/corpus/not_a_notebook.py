"""Not a notebook: valid JSON with no cells.

Must score 0 in every exercise with the reason "not a notebook".
"""

EXPECTED = {"fx_scale_test": 0.0, "fx_grad_test": 0.0, "fx_count_test": 0.0}
WORDS = ("not a notebook",)
NEEDS_SANDBOX = False
REVIEW = None

from pathlib import Path


def submission(tmp: Path) -> bytes:
    return b'{"hello": "world"}'
