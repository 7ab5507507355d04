"""A grade id that is not text: the square_grad cell's grade id is a list, ["fx_grad"].

Must score 0 for fx_grad_test ("missing from the submission"): a grade id that is not a string
matches nothing, and the reason says fx_grad was not found.
"""

EXPECTED = {"fx_scale_test": 2.0, "fx_grad_test": 0.0, "fx_count_test": 1.0}
WORDS = ("missing from the submission",)
NEEDS_SANDBOX = False
REVIEW = None

import json
from pathlib import Path

from corpus._notebook import dumps, notebook


def submission(tmp: Path) -> bytes:
    nb = json.loads(dumps(notebook()))
    next(c for c in nb["cells"]
         if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "fx_grad"
         )["metadata"]["nbgrader"]["grade_id"] = ["fx_grad"]
    return json.dumps(nb).encode()
