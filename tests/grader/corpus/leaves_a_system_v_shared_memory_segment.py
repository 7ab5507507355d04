"""Leaves a System V shared memory segment: a correct scale, then the answer cell creates a 64 MB
System V segment (key 0x07ed7ea3) and fills it.

Must score full marks (the answer is correct), and test_nothing_is_left_on_the_machine checks the
segment went with the sandbox. Needs the full sandbox (its IPC namespace).
"""

EXPECTED = {"fx_scale_test": 2.0, "fx_grad_test": 2.0, "fx_count_test": 1.0}
WORDS = ()
NEEDS_SANDBOX = True
REVIEW = "imports ctypes"

ANSWERS = {
    "fx_scale": """def scale(x, k):
    return x * k
import ctypes
libc = ctypes.CDLL(None)
libc.shmget.restype, libc.shmat.restype = ctypes.c_int, ctypes.c_void_p
seg = libc.shmget(0x7ED7EA3, 64 << 20, 0o1000 | 0o666)
addr = libc.shmat(seg, None, 0)
if addr not in (None, 2 ** 64 - 1):
    ctypes.memset(addr, 1, 64 << 20)
""",
}
