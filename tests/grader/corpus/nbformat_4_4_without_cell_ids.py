"""nbformat 4.4 without cell ids: a solved notebook saved in the older format, whose cells have no
ids.

Must score full marks: answers are found by grade id, and old notebooks are notebooks.
"""

EXPECTED = {"fx_scale_test": 2.0, "fx_grad_test": 2.0, "fx_count_test": 1.0}
WORDS = ()
NEEDS_SANDBOX = False
REVIEW = None

import json
from pathlib import Path

from corpus._notebook import dumps, notebook


def submission(tmp: Path) -> bytes:
    nb = json.loads(dumps(notebook()))
    nb["nbformat_minor"] = 4
    for c in nb["cells"]:
        c.pop("id", None)
    return json.dumps(nb).encode()
