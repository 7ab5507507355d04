"""Empty file: zero bytes.

Must score 0 in every exercise with the reason that the file is empty.
"""

EXPECTED = {"fx_scale_test": 0.0, "fx_grad_test": 0.0, "fx_count_test": 0.0}
WORDS = ("empty",)
NEEDS_SANDBOX = False
REVIEW = None

from pathlib import Path


def submission(tmp: Path) -> bytes:
    return b""
