"""Kills the grader: a correct scale, then the answer cell sends SIGKILL to the test's process and
its parent, by pid.

Must score full marks: inside the sandbox those pids are not the grader's, the kill fails, and the
answers are correct. Needs the full sandbox (its own pid namespace).
"""

EXPECTED = {"fx_scale_test": 2.0, "fx_grad_test": 2.0, "fx_count_test": 1.0}
WORDS = ()
NEEDS_SANDBOX = True
REVIEW = "imports signal"

import os
from pathlib import Path

from corpus._notebook import dumps, notebook


def submission(tmp: Path) -> bytes:
    return dumps(notebook(fx_scale=f"""def scale(x, k):
    return x * k
import os, signal
for pid in ({os.getpid()}, {os.getppid()}):
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
"""))
