"""Deeply nested JSON file: 100,000 nested lists.

Must score 0 in every exercise with the reason that the JSON is "nested too deeply", not a
RecursionError in the grader.
"""

EXPECTED = {"fx_scale_test": 0.0, "fx_grad_test": 0.0, "fx_count_test": 0.0}
WORDS = ("nested too deeply",)
NEEDS_SANDBOX = False
REVIEW = None

from pathlib import Path


def submission(tmp: Path) -> bytes:
    return b"[" * 100000 + b"]" * 100000
