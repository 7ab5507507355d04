"""Uses the network: count_positive is correct only if it can connect to a port the test listens on
at 127.0.0.1; otherwise it returns -1.

Must score 0 for fx_count_test ("is -1, expected"): the sandbox has no network, not even the
host's loopback. Needs the full sandbox.
"""

EXPECTED = {"fx_scale_test": 2.0, "fx_grad_test": 2.0, "fx_count_test": 0.0}
WORDS = ("is -1, expected",)
NEEDS_SANDBOX = True
REVIEW = "imports socket"

import socket
from pathlib import Path

from corpus._notebook import dumps, notebook


def submission(tmp: Path) -> bytes:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    submission.server = server  # kept open while the corpus is graded
    port = server.getsockname()[1]
    return dumps(notebook(fx_count=f"""import socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
    ONLINE = True
except OSError:
    ONLINE = False

def count_positive(xs):
    return sum(1 for v in xs if v > 0) if ONLINE else -1
"""))
