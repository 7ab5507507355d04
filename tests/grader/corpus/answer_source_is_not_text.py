"""Answer source is not text: the count_positive cell's source is the number 12.

Must score 0 for fx_count_test, graded as not attempted, with a note that its source is "not
text".
"""

EXPECTED = {"fx_scale_test": 2.0, "fx_grad_test": 2.0, "fx_count_test": 0.0}
WORDS = ("not text",)
NEEDS_SANDBOX = False
REVIEW = None

import json
from pathlib import Path

from corpus._notebook import dumps, notebook


def submission(tmp: Path) -> bytes:
    nb = json.loads(dumps(notebook()))
    next(c for c in nb["cells"]
         if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "fx_count")["source"] = 12
    return json.dumps(nb).encode()
