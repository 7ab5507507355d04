"""Saved by another editor: a solved notebook as VS Code saves it, with its own metadata, each
source one string, and outputs and execution counts.

Must score full marks: only the answer cells' source matters.
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
    nb["metadata"] = {"vscode": {"interpreter": {"hash": "abc"}},
                      "language_info": {"name": "python"}}
    for c in nb["cells"]:
        # one string, as some editors save it (Jupyter writes a list of lines)
        c["source"] = "".join(c["source"])
        c["metadata"]["vscode"] = {"languageId": "python"}
        if c["cell_type"] == "code":
            c["outputs"], c["execution_count"] = [
                {"output_type": "stream", "name": "stdout", "text": ["hi\n"]}], 3
    return json.dumps(nb, indent=4).encode()
