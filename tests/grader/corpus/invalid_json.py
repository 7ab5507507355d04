"""Invalid JSON: the file is the first bytes of a notebook's JSON.

Must score 0 in every exercise with the reason "invalid or truncated JSON", not a crash.
"""

EXPECTED = {"fx_scale_test": 0.0, "fx_grad_test": 0.0, "fx_count_test": 0.0}
WORDS = ("invalid or truncated JSON",)
NEEDS_SANDBOX = False
REVIEW = None

from pathlib import Path


def submission(tmp: Path) -> bytes:
    return b'{"cells": ['
