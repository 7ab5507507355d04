"""Memory bomb that touches its memory: square_grad allocates 64 MB blocks and keeps them until
memory runs out.

Must score 0 for fx_grad_test ("MemoryError"), and the machine stays up: the memory limit stops it.
"""

EXPECTED = {"fx_scale_test": 2.0, "fx_grad_test": 0.0, "fx_count_test": 1.0}
WORDS = ("MemoryError",)
NEEDS_SANDBOX = False
REVIEW = None

ANSWERS = {
    "fx_grad": """held = []

def square_grad(x):
    while True:
        held.append(bytearray(2 ** 26))
""",
}
