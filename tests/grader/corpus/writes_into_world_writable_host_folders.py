"""Writes into world-writable host folders: a correct scale, then the answer cell writes 1 MB
files into /run/lock, /var/lock, /dev/mqueue, /dev/shm and /var/tmp.

Must score full marks (the answer is correct), and test_nothing_is_left_on_the_machine checks the
files went with the sandbox. Needs the full sandbox.
"""

EXPECTED = {"fx_scale_test": 2.0, "fx_grad_test": 2.0, "fx_count_test": 1.0}
WORDS = ()
NEEDS_SANDBOX = True
REVIEW = "imports os"

ANSWERS = {
    "fx_scale": r"""def scale(x, k):
    return x * k
import os
for d in ("/run/lock", "/var/lock", "/dev/mqueue", "/dev/shm", "/var/tmp"):
    try:
        with open(f"{d}/.left-behind-{os.getuid()}", "wb") as f:
            f.write(b"\0" * (1 << 20))
    except OSError:
        pass
""",
}
