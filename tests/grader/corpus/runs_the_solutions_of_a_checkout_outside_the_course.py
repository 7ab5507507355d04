"""Runs the solutions of a checkout outside the course: a copy of the instructor's notebook lies
outside the course folder, /tmp and the home directory (in /srv when the tests run as root); the
scale cell runs every solution cell in it, and the other two answer cells are pass.

Must score 0 in every exercise: the sandbox cannot read that copy, so no solution is defined.
cleanup() removes the copy after grading. Needs the full sandbox.
"""

EXPECTED = {"fx_scale_test": 0.0, "fx_grad_test": 0.0, "fx_count_test": 0.0}
WORDS = ()
NEEDS_SANDBOX = True
REVIEW = "calls exec"

import os
import shutil
from pathlib import Path

from corpus._notebook import FIXTURE, dumps, notebook

OTHER_CHECKOUT = Path("/srv" if os.geteuid() == 0
                      else Path.home()) / f"course-corpus-checkout-{os.getpid()}"


def submission(tmp: Path) -> bytes:
    OTHER_CHECKOUT.mkdir(parents=True, exist_ok=True)
    shutil.copy(FIXTURE, OTHER_CHECKOUT / "99-fixture.ipynb")
    runs = f"""import json
try:
    for c in json.load(open({str(OTHER_CHECKOUT / '99-fixture.ipynb')!r}))["cells"]:
        if c["metadata"].get("nbgrader", {{}}).get("solution"):
            exec("".join(c["source"]), globals())
except OSError:
    pass
"""
    return dumps(notebook(fx_scale=runs, fx_grad="pass", fx_count="pass"))


def cleanup() -> None:
    shutil.rmtree(OTHER_CHECKOUT, ignore_errors=True)
