"""The hardened grader against a corpus of adversarial and broken submissions.

Every submission is a version of the fixture lesson (tests/fixtures/99-fixture: exercises scale
2 points, square_grad 2 points, count_positive 1 point) and states what it must score, exercise by
exercise, and words the reason must contain. Cheats, crashes, floods and broken files are graded by
course_utils.grader.grade with one reference run; the last tests drive the same grader through
`nbgrader autograde` and through `python -m course_utils.grader.gradefolder` on a folder.
"""

import copy
import csv
import json
import os
import re
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest

from course_utils.authoring import nbgrader_cli
from course_utils.grader import grade, lessonfile
from course_utils.grader.review import review
from course_utils.grader.capabilities import can_isolate, isolation_warning
from course_utils.grader.worker import Limits

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "99-fixture" / "99-fixture.ipynb"
# Where this machine gives no sandbox, the tests grade with limits only (as an instructor may choose to).
LIMITS = Limits(cell_seconds=10, notebook_seconds=60, memory_bytes=2 * 2 ** 30, processes=64,
                sandbox="required" if can_isolate() else "optional")
FULL = {"fx_scale_test": 2.0, "fx_grad_test": 2.0, "fx_count_test": 1.0}

SCALE_OK = "def scale(x, k):\n    return x * k\n"
GRAD_OK = "def square_grad(x):\n    return 2 * x\n"
COUNT_OK = "def count_positive(xs):\n    return sum(1 for v in xs if v > 0)\n"
OK = {"fx_scale": SCALE_OK, "fx_grad": GRAD_OK, "fx_count": COUNT_OK}

pytestmark = pytest.mark.slow


def release() -> nbformat.NotebookNode:
    """The fixture as a learner receives it: answers are stubs, hidden tests are gone."""
    nb = nbformat.read(FIXTURE, as_version=4)
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution"):
            cell.source = cell.source.split("### BEGIN SOLUTION")[0] + "    " + lessonfile.STUB
        elif meta.get("grade"):
            cell.source = cell.source.split("### BEGIN HIDDEN TESTS")[0]
    return nb


def notebook(**answers) -> nbformat.NotebookNode:
    """The release with answer cells filled in: OK answers unless given (None keeps the stub)."""
    nb = release()
    chosen = {**OK, **answers}
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid in chosen and chosen[gid] is not None:
            cell.source = chosen[gid]
    return nb


def dumps(nb) -> bytes:
    return nbformat.writes(nb).encode()


def cell_of(nb, gid):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == gid)


def edited(edit, **answers) -> bytes:
    nb = notebook(**answers)
    edit(nb)
    return dumps(nb)


def scores(**changes) -> dict:
    return {**FULL, **changes}


# --- the corpus -----------------------------------------------------------------------------------
# name -> (submission bytes or a function of the test's tmp path returning them, expected scores,
#          words the reasons must contain, needs the full sandbox)

def _no_ids() -> bytes:
    nb = json.loads(dumps(notebook()))
    nb["nbformat_minor"] = 4
    for c in nb["cells"]:
        c.pop("id", None)
    return json.dumps(nb).encode()


def _other_editor() -> bytes:
    nb = json.loads(dumps(notebook()))
    nb["metadata"] = {"vscode": {"interpreter": {"hash": "abc"}}, "language_info": {"name": "python"}}
    for c in nb["cells"]:
        c["source"] = "".join(c["source"])  # one string, as some editors save it (Jupyter writes a list of lines)
        c["metadata"]["vscode"] = {"languageId": "python"}
        if c["cell_type"] == "code":
            c["outputs"], c["execution_count"] = [{"output_type": "stream", "name": "stdout", "text": ["hi\n"]}], 3
    return json.dumps(nb, indent=4).encode()


def _forged_grade_cell(nb):
    forged = nbformat.v4.new_code_cell("pass", metadata={"nbgrader": {
        "grade": True, "solution": False, "locked": True, "grade_id": "fx_bonus", "points": 100, "schema_version": 3}})
    nb.cells.append(forged)
    cell_of(nb, "fx_count_test").metadata["nbgrader"]["points"] = 100


def _duplicated_and_deleted_tests(nb):
    nb.cells.insert(5, copy.deepcopy(cell_of(nb, "fx_scale_test")))
    nb.cells.remove(cell_of(nb, "fx_grad_test"))


def _renamed_answer(nb):
    cell_of(nb, "fx_scale").metadata["nbgrader"]["grade_id"] = "my_scale"


def _duplicated_answer(nb):
    first = copy.deepcopy(cell_of(nb, "fx_scale"))
    first.source = "def scale(x, k):\n    return x + k\n"
    nb.cells.insert(nb.cells.index(cell_of(nb, "fx_scale")), first)


def _edited_lesson_cell(nb):
    lesson = next(c for c in nb.cells if c.source.startswith("doubled = scale"))
    lesson.source = "import os\nos._exit(1)"


def _source_not_text() -> bytes:
    nb = json.loads(dumps(notebook()))
    next(c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "fx_count")["source"] = 12
    return json.dumps(nb).encode()


TRANSFORMER_EMPTIES_CELLS = SCALE_OK + """
get_ipython().input_transformers_cleanup.append(lambda lines: [] if any("grade(" in l or "check_" in l for l in lines) else lines)
"""
AST_TRANSFORMER = """import ast

class NoTests(ast.NodeTransformer):
    def visit_Assert(self, node):
        return None
    def visit_Expr(self, node):
        return None

get_ipython().ast_transformers.append(NoTests())

def scale(x, k):
    return 0.0
"""
PATCH_CHECKS = """import course_utils.checks as checks
import torch
for name in ("check_float", "check_floats", "check_tensor", "check_raises"):
    setattr(checks, name, lambda *a, **k: None)
globals()["check_float"] = globals()["check_tensor"] = lambda *a, **k: None
torch.allclose = lambda *a, **k: True
torch.Tensor.__eq__ = lambda self, other: torch.ones_like(self, dtype=torch.bool)

def scale(x, k):
    return 0.0
"""
EQ_OBJECTS = """class Anything(float):
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    __hash__ = float.__hash__

def scale(x, k):
    return Anything(0.0)
"""
TENSOR_SUBCLASS = """import torch

class Agreeable(torch.Tensor):
    def __eq__(self, other):
        return torch.ones_like(other, dtype=torch.bool)

def square_grad(x):
    return torch.zeros_like(x).as_subclass(Agreeable)
"""
GRADE_REPLACED = SCALE_OK.replace("x * k", "x + k") + """
grade = lambda *args, **kwargs: None
import course_utils.judging as judging
judging.grade = grade
"""
FORGED_OBSERVATION = """import course_utils.judging as judging
import course_utils.grader.protocol as protocol

class Forger:
    def grade(self, probe, expect, judge):
        judging.session.obs = protocol.encode([6.0, 6.0, 6.0, 6.0])
judging.session.grade = Forger().grade

def scale(x, k):
    return 6.0
"""
REPLY_FLOOD = SCALE_OK + """import os, sys
os.write(int(sys.argv[-1]), b'{"id": 999, "obs": null}\\n')
"""
RAW_FLOOD = COUNT_OK + """import os, sys
os.write(int(sys.argv[-1]), b"x" * (40 * 2 ** 20))
"""
EXFILTRATE = """import linecache

def square_grad(x):
    text = "".join("".join(v[2]) for v in linecache.cache.values() if isinstance(v, tuple) and len(v) > 2)
    raise ValueError(text[-3000:])
"""
STRING_EXFILTRATE = """import linecache

def count_positive(xs):
    return "".join("".join(v[2]) for v in linecache.cache.values() if isinstance(v, tuple) and len(v) > 2)[-500:]
"""


# From a red-team read of the grader (each was a hole before its fix; the entry scores what the
# answer earns now).
DEEP_REPLY = SCALE_OK + """import os, sys
os.write(int(sys.argv[-1]), b'{"id": 0, "obs": ' + b"[" * 100000 + b"]" * 100000 + b"}\\n")
"""
UNDECODABLE = """import course_utils.grader.protocol as protocol
protocol.encode = lambda value, *a, **k: {"$tensor": {"dtype": "float32", "shape": [1], "data": [10 ** 400]}}

def scale(x, k):
    return x * k
"""
UNPACKABLE_SHAPE = """import course_utils.grader.protocol as protocol
protocol.encode = lambda value, *a, **k: {"$tensor": {"dtype": "float32", "shape": [0, 10 ** 30], "data": []}}

def square_grad(x):
    return 2 * x
"""
BIGINT_LEAK = """import linecache

def count_positive(xs):
    if xs == []:
        src = ["".join(v[2]) for v in list(linecache.cache.values()) if isinstance(v, tuple) and len(v) > 2]
        text = next(s for s in reversed(src) if "CASES" in s and "def" not in s).strip()
        return int.from_bytes(text.encode()[:165], "big")
    return sum(1 for v in xs if v > 0)
"""
STRINGS_IN_A_REPR = """import linecache

def count_positive(xs):
    text = "".join("".join(v[2]) for v in list(linecache.cache.values()) if isinstance(v, tuple) and len(v) > 2)
    return [text[i:i + 30] for i in range(0, 600, 30)]
"""
SYSV_LEAK = SCALE_OK + """import ctypes
libc = ctypes.CDLL(None)
libc.shmget.restype, libc.shmat.restype = ctypes.c_int, ctypes.c_void_p
seg = libc.shmget(0x7ED7EA3, 64 << 20, 0o1000 | 0o666)
addr = libc.shmat(seg, None, 0)
if addr not in (None, 2 ** 64 - 1):
    ctypes.memset(addr, 1, 64 << 20)
"""
RUN_LOCK = SCALE_OK + """import os
for d in ("/run/lock", "/var/lock", "/dev/mqueue", "/dev/shm", "/var/tmp"):
    try:
        with open(f"{d}/.left-behind-{os.getuid()}", "wb") as f:
            f.write(b"\\0" * (1 << 20))
    except OSError:
        pass
"""
HUGE_SHAPE = """import course_utils.grader.protocol as protocol
protocol.encode = lambda value, *a, **k: {"$tensor": {"dtype": "float32", "shape": [10 ** 4298] * 3000, "data": []}}

def square_grad(x):
    return 2 * x
"""
OPAQUE_BLOAT = """import course_utils.grader.protocol as protocol
encode = protocol.encode
protocol.encode = lambda v, *a, **k: [{"$opaque": "T%d" % i} for i in range(100000)] if not a and type(v) is list and len(v) == 4 else encode(v, *a, **k)

def count_positive(xs):
    return sum(1 for v in xs if v > 0)
"""
OTHER_CHECKOUT = Path("/srv" if os.geteuid() == 0 else Path.home()) / f"course-corpus-checkout-{os.getpid()}"


def _other_checkout(tmp: Path) -> bytes:
    """A copy of the instructor's notebook outside the course folder, /tmp and the home directory."""
    OTHER_CHECKOUT.mkdir(parents=True, exist_ok=True)
    __import__("shutil").copy(FIXTURE, OTHER_CHECKOUT / "99-fixture.ipynb")
    runs = f"""import json
try:
    for c in json.load(open({str(OTHER_CHECKOUT / '99-fixture.ipynb')!r}))["cells"]:
        if c["metadata"].get("nbgrader", {{}}).get("solution"):
            exec("".join(c["source"]), globals())
except OSError:
    pass
"""
    return dumps(notebook(fx_scale=runs, fx_grad="pass", fx_count="pass"))


def _hidden_markers_in_answer(nb):
    cell_of(nb, "fx_grad").source = ("### BEGIN HIDDEN TESTS\n" + GRAD_OK.replace("2 * x", "2 * x  # END HIDDEN TESTS")
                                     + 'NOTE = "### BEGIN SOLUTION ### BEGIN HIDDEN TESTS"\n### BEGIN EXPECTED\n')


def _grade_id_not_text() -> bytes:
    nb = json.loads(dumps(notebook()))
    next(c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "fx_grad"
         )["metadata"]["nbgrader"]["grade_id"] = ["fx_grad"]
    return json.dumps(nb).encode()


def _reads_solutions_and_writes_gradebook(tmp: Path) -> bytes:
    canary = tmp / "gradebook.db"
    canary.write_text("scores")
    reads = f"""import os
try:
    SOURCE = open({str(FIXTURE)!r}).read()
except OSError:
    SOURCE = ""

def scale(x, k):
    return x * k if "BEGIN SOLUTION" in SOURCE else 0.0
"""
    writes = f"""import os
try:
    with open({str(canary)!r}, "w") as f:
        f.write("everyone gets 100")
    WROTE = True
except OSError:
    WROTE = False

def square_grad(x):
    return 2 * x if WROTE else 0 * x
"""
    return dumps(notebook(fx_scale=reads, fx_grad=writes))


def _network(tmp: Path) -> bytes:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    _network.server = server  # kept open while the corpus is graded
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


def _kills_the_grader(tmp: Path) -> bytes:
    return dumps(notebook(fx_scale=SCALE_OK + f"""import os, signal
for pid in ({os.getpid()}, {os.getppid()}):
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
"""))


CORPUS = {
    # name: (submission, expected scores, reason words, needs the full sandbox)
    "solved": (dumps(notebook()), FULL, [], False),
    "untouched": (dumps(release()), scores(fx_scale_test=0, fx_grad_test=0, fx_count_test=0), ["not attempted"], False),
    "wrong answer": (dumps(notebook(fx_scale="def scale(x, k):\n    return x + k\n")), scores(fx_scale_test=0),
                     ["x + k instead of x * k"], False),
    "patches checks, torch and AssertionError": (dumps(notebook(fx_scale=PATCH_CHECKS)), scores(fx_scale_test=0),
                                                 ["is 0, expected"], False),
    "float subclass equal to everything": (dumps(notebook(fx_scale=EQ_OBJECTS)), scores(fx_scale_test=0),
                                           ["got Anything"], False),
    "tensor subclass equal to everything": (dumps(notebook(fx_grad=TENSOR_SUBCLASS)), scores(fx_grad_test=0),
                                            ["should be a torch.Tensor, got Agreeable"], False),
    "input transformer empties the tests": (dumps(notebook(fx_scale=TRANSFORMER_EMPTIES_CELLS)),
                                            scores(fx_scale_test=0, fx_grad_test=0, fx_count_test=0),
                                            ["hidden tests did not run"], False),
    "AST transformer drops asserts and calls": (dumps(notebook(fx_scale=AST_TRANSFORMER)),
                                                scores(fx_scale_test=0, fx_grad_test=0, fx_count_test=0), [], False),
    "replaces grade() with a no-op": (dumps(notebook(fx_scale=GRADE_REPLACED)),
                                      scores(fx_scale_test=0, fx_grad_test=0, fx_count_test=0),
                                      ["hidden tests did not run"], False),
    "forges its observation": (dumps(notebook(fx_scale=FORGED_OBSERVATION)), scores(fx_scale_test=0, fx_grad_test=0, fx_count_test=0),
                               ["scale(1.5, -2.0) is 6"], False),
    "answers for a cell that was not asked": (dumps(notebook(fx_scale=REPLY_FLOOD)), scores(fx_scale_test=0),
                                              ["answer for another cell"], False),
    "floods the answer pipe": (dumps(notebook(fx_count=RAW_FLOOD)), scores(fx_count_test=0), ["MB to the grader"], False),
    "raises the hidden tests' text": (dumps(notebook(fx_grad=EXFILTRATE)), scores(fx_grad_test=0), ["raised ValueError"], False),
    "returns the hidden tests' text": (dumps(notebook(fx_count=STRING_EXFILTRATE)), scores(fx_count_test=0),
                                       ["should return an int, got str"], False),
    "reads solutions, writes the gradebook": (_reads_solutions_and_writes_gradebook,
                                              scores(fx_scale_test=0, fx_grad_test=0), ["is 0, expected"], True),
    "uses the network": (_network, scores(fx_count_test=0), ["is -1, expected"], True),
    "kills the grader": (_kills_the_grader, FULL, [], True),
    "os._exit in an answer cell": (dumps(notebook(fx_scale=SCALE_OK + "import os\nos._exit(3)\n")), scores(fx_scale_test=0),
                                   ["exited", "exit code 3"], False),
    "segfault inside the function": (dumps(notebook(fx_grad="import ctypes\n\ndef square_grad(x):\n    ctypes.string_at(0)\n")),
                                     scores(fx_grad_test=0), ["segmentation fault"], False),
    "loop that ignores SIGINT": (dumps(notebook(fx_count="import signal\n\ndef count_positive(xs):\n"
                                                         "    signal.signal(signal.SIGINT, signal.SIG_IGN)\n    while True:\n        pass\n")),
                                 scores(fx_count_test=0), ["time limit"], False),
    "memory bomb": (dumps(notebook(fx_grad="def square_grad(x):\n    return bytearray(100 * 2 ** 30)\n")),
                    scores(fx_grad_test=0), ["raised MemoryError"], False),
    "memory bomb that touches its memory": (dumps(notebook(fx_grad="held = []\n\ndef square_grad(x):\n    while True:\n"
                                                                    "        held.append(bytearray(2 ** 26))\n")),
                                            scores(fx_grad_test=0), ["MemoryError"], False),
    "fork flood": (dumps(notebook(fx_count="import os\n\ndef count_positive(xs):\n    while True:\n        try:\n"
                                           "            os.fork()\n        except OSError:\n            pass\n")),
                   scores(fx_count_test=0), ["time limit"], True),
    "huge stdout from correct code": (dumps(notebook(fx_scale=SCALE_OK + "for _ in range(2000):\n    print('x' * 100000)\n")),
                                      FULL, [], False),
    "huge result": (dumps(notebook(fx_grad="import torch\n\ndef square_grad(x):\n    return torch.zeros(3_000_000)\n")),
                    scores(fx_grad_test=0), ["too large"], False),
    "correct code writing to stderr": (dumps(notebook(fx_scale="import sys, warnings\n\ndef scale(x, k):\n"
                                                               "    warnings.warn('slow path')\n    sys.stderr.write('progress 50%\\n')\n"
                                                               "    return x * k\n")), FULL, [], False),
    "slow correct code within the budget": (dumps(notebook(fx_scale="import time\n\ndef scale(x, k):\n    time.sleep(0.4)\n"
                                                                    "    return x * k\n")), FULL, [], False),
    "crash in a later lesson cell": (dumps(notebook(fx_scale="import os\n\ndef scale(x, k):\n    if x == 21.0:\n"
                                                             "        os._exit(1)\n    return x * k\n")), FULL, [], False),
    "crash in a later answer cell": (dumps(notebook(fx_count="import os\nos._exit(0)\n")), scores(fx_count_test=0), ["exited"], False),
    "sys.exit in an answer cell": (dumps(notebook(fx_grad="import sys\nsys.exit(0)\n")), scores(fx_grad_test=0), [], False),
    "invalid JSON": (b'{"cells": [', scores(fx_scale_test=0, fx_grad_test=0, fx_count_test=0), ["invalid or truncated JSON"], False),
    "empty file": (b"", scores(fx_scale_test=0, fx_grad_test=0, fx_count_test=0), ["empty"], False),
    "truncated file": (dumps(notebook())[:900], scores(fx_scale_test=0, fx_grad_test=0, fx_count_test=0),
                       ["invalid or truncated JSON"], False),
    "not a notebook": (b'{"hello": "world"}', scores(fx_scale_test=0, fx_grad_test=0, fx_count_test=0), ["not a notebook"], False),
    "nbformat 4.4 without cell ids": (_no_ids(), FULL, [], False),
    "saved by another editor": (_other_editor(), FULL, [], False),
    "forged grade cell and points": (edited(_forged_grade_cell), FULL, [], False),
    "test cells duplicated and deleted": (edited(_duplicated_and_deleted_tests), FULL, [], False),
    "answer cell renamed": (edited(_renamed_answer), scores(fx_scale_test=0), ["missing from the submission"], False),
    "answer cell duplicated": (edited(_duplicated_answer), scores(fx_scale_test=0), ["more than once", "x + k"], False),
    "lesson cell edited to crash": (edited(_edited_lesson_cell), FULL, [], False),
    "answer source is not text": (_source_not_text(), scores(fx_count_test=0), ["not text"], False),
    "deeply nested JSON on the answer pipe": (dumps(notebook(fx_scale=DEEP_REPLY)), scores(fx_scale_test=0),
                                              ["not an answer"], False),
    "deeply nested JSON file": (b"[" * 100000 + b"]" * 100000, scores(fx_scale_test=0, fx_grad_test=0, fx_count_test=0),
                                ["nested too deeply"], False),
    # The grader refuses the 401-digit literal before anything decodes it: the answer that patched
    # encode loses its points, and the others, run again without it, are judged as they are.
    "observation that overflows the judge's decoding": (dumps(notebook(fx_scale=UNDECODABLE)),
                                                        scores(fx_scale_test=0), ["not an answer"], False),
    "tensor shape torch cannot unpack": (dumps(notebook(fx_grad=UNPACKABLE_SHAPE)), scores(fx_grad_test=0),
                                         ["not an answer"], False),   # refused by the grader, as the entry above
    "hidden test text as the digits of a huge int": (dumps(notebook(fx_count=BIGINT_LEAK)), scores(fx_count_test=0),
                                                     ["int too large"], False),
    "hidden test text in strings the judge quotes": (dumps(notebook(fx_count=STRINGS_IN_A_REPR)), scores(fx_count_test=0),
                                                     ["should return an int"], False),
    "fills the reference with opaque type names": (dumps(notebook(fx_count=OPAQUE_BLOAT)), scores(fx_count_test=0), [], False),
    "hidden-test markers inside an answer": (edited(_hidden_markers_in_answer), FULL, [], False),
    "a grade id that is not text": (_grade_id_not_text(), scores(fx_grad_test=0), ["missing from the submission"], False),
    "nbformat 3 worksheets without a list of cells": (b'{"worksheets": [{"cells": 5}], "nbformat": 3}',
                                                      scores(fx_scale_test=0, fx_grad_test=0, fx_count_test=0),
                                                      ["missing from the submission"], False),
    "tensor shape of thousands of 4,299-digit integers": (dumps(notebook(fx_grad=HUGE_SHAPE)), scores(fx_grad_test=0),
                                                          ["not an answer"], False),
    "leaves a System V shared memory segment": (dumps(notebook(fx_scale=SYSV_LEAK)), FULL, [], True),
    "writes into world-writable host folders": (dumps(notebook(fx_scale=RUN_LOCK)), FULL, [], True),
    "runs the solutions of a checkout outside the course": (_other_checkout,
                                                            scores(fx_scale_test=0, fx_grad_test=0, fx_count_test=0), [], True),
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Grade the whole corpus once, two submissions at a time, against one reference run."""
    tmp = tmp_path_factory.mktemp("corpus")
    lesson = lessonfile.load_lesson(FIXTURE)
    reference = grade.Reference(lesson, LIMITS)
    reference_pid = reference.worker.proc.pid
    try:
        def one(item):
            slot, (name, (submission, *_)) = item
            data = submission(tmp) if callable(submission) else submission
            answers, notes = lessonfile.read_answers(data, lesson)
            return name, grade.grade_answers(lesson, reference, answers, notes, name, LIMITS, slot=slot)

        # Without the full sandbox, submissions that attack the machine are not run at all.
        todo = [(n, v) for n, v in CORPUS.items() if can_isolate() or not v[3]]
        with ThreadPoolExecutor(max_workers=2) as pool:
            results = dict(pool.map(one, enumerate(todo)))
        results["reference restarted"] = reference.worker.proc.pid != reference_pid
    finally:
        reference.close()
        __import__("shutil").rmtree(OTHER_CHECKOUT, ignore_errors=True)
    return results, tmp


def test_the_corpus_is_large_enough():
    assert len(CORPUS) >= 30


@pytest.mark.parametrize("name", list(CORPUS))
def test_submission_scores_what_it_earned(graded, name):
    submission, expected, words, needs_sandbox = CORPUS[name]
    if needs_sandbox and not can_isolate():
        pytest.skip(f"needs the sandbox (grading as root, or as a user with user namespaces): {isolation_warning()}")
    results, tmp = graded
    result = results[name]
    got = {gid: o.score for gid, o in result.outcomes.items()}
    reasons = " | ".join([o.message for o in result.outcomes.values()] + result.notes)
    assert got == expected, f"{name}: scored {got}, expected {expected}; reasons: {reasons}"
    for w in words:
        assert w in reasons, f"{name}: the reasons do not say {w!r}: {reasons}"
    assert result.points == 5.0, "the points come from the instructor's notebook, whatever the submission claims"
    for o in result.outcomes.values():
        assert (o.score == o.points) == (o.message == ""), f"{name}: every lost point has a reason, and only those: {o}"
        for secret in ("def expect", "BEGIN EXPECTED", "want.append", "CASES =", "list(range(-5, 6))"):
            assert secret not in o.message, f"{name}: the feedback quotes the hidden tests: {o.message}"
        assert not re.search(r"\d{30}|frame #\d|\.so\b|Traceback", o.message), \
            f"{name}: no long digit strings (a channel for text) and no backtraces in feedback: {o.message}"
    if name == "reads solutions, writes the gradebook":
        assert (tmp / "gradebook.db").read_text() == "scores", "the sandbox wrote the instructor's file"


# What course_utils.grader.review says of each corpus entry's answers: the cheats are named for the
# instructor (scores never depend on it); honest code stays unflagged unless it imports sys or os.
REVIEWED = {
    "patches checks, torch and AssertionError": "imports course_utils.checks",
    "float subclass equal to everything": "subclasses float",
    "tensor subclass equal to everything": "subclasses Tensor",
    "input transformer empties the tests": "calls get_ipython",
    "AST transformer drops asserts and calls": "calls get_ipython",
    "replaces grade() with a no-op": "redefines grade",
    "forges its observation": "imports course_utils.judging",
    "answers for a cell that was not asked": "imports os",
    "floods the answer pipe": "imports os",
    "raises the hidden tests' text": "imports linecache",
    "returns the hidden tests' text": "imports linecache",
    "reads solutions, writes the gradebook": "calls open",
    "uses the network": "imports socket",
    "kills the grader": "imports signal",
    "os._exit in an answer cell": "imports os",
    "segfault inside the function": "imports ctypes",
    "loop that ignores SIGINT": "imports signal",
    "fork flood": "imports os",
    "correct code writing to stderr": "imports sys",
    "crash in a later lesson cell": "imports os",
    "crash in a later answer cell": "imports os",
    "sys.exit in an answer cell": "imports sys",
    "deeply nested JSON on the answer pipe": "imports os",
    "observation that overflows the judge's decoding": "imports course_utils.judging",
    "tensor shape torch cannot unpack": "imports course_utils.judging",
    "hidden test text as the digits of a huge int": "imports linecache",
    "hidden test text in strings the judge quotes": "imports linecache",
    "fills the reference with opaque type names": "imports course_utils.judging",
    "tensor shape of thousands of 4,299-digit integers": "imports course_utils.judging",
    "leaves a System V shared memory segment": "imports ctypes",
    "writes into world-writable host folders": "imports os",
    "runs the solutions of a checkout outside the course": "calls exec",
}


@pytest.mark.parametrize("name", list(CORPUS))
def test_review_names_the_answers_that_reach_outside_their_exercise(name, tmp_path):
    lesson = lessonfile.load_lesson(FIXTURE)
    submission = CORPUS[name][0]
    answers, _ = lessonfile.read_answers(submission(tmp_path) if callable(submission) else submission, lesson)
    flagged = " | ".join(review(lesson, answers))
    if name in REVIEWED:
        assert REVIEWED[name] in flagged, f"{name}: review says {flagged!r}"
    else:
        assert flagged == "", f"{name}: honest or harmless answers are not flagged, got {flagged!r}"


def test_no_submission_makes_the_reference_restart(graded):
    """Whatever a learner's process sends, judging it never kills the reference, which judges everyone."""
    results, _ = graded
    assert results["reference restarted"] is False


def test_nothing_is_left_on_the_machine(graded):
    """A submission's shared memory, files and processes go with its sandbox."""
    if not can_isolate():
        pytest.skip("needs the sandbox: grading as root, or as a normal user with user namespaces")
    ipcs = subprocess.run(["ipcs", "-m"], capture_output=True, text=True).stdout
    assert "0x07ed7ea3" not in ipcs, "a System V shared memory segment outlived its sandbox"
    left = [p for d in ("/run/lock", "/var/lock", "/var/tmp", "/dev/shm") for p in Path(d).glob(".left-behind-*")]
    assert left == [], f"files outlived their sandbox: {left}"


def test_a_grader_error_on_one_submission_is_a_row_of_zeros_not_a_lost_class(tmp_path, monkeypatch):
    """If grading one submission fails in the grader itself, that learner gets 0 with the reason and
    everyone else is graded and reported."""
    from course_utils.grader import gradefolder
    folder = tmp_path / "submissions"
    folder.mkdir()
    for student in ("ada", "bob"):
        (folder / f"{student}.ipynb").write_bytes(dumps(notebook()))
    real = gradefolder.grade_answers

    def flaky(lesson, reference, answers, notes, student, *args, **kwargs):
        if student == "bob":
            raise RecursionError("the grader's own trouble")
        return real(lesson, reference, answers, notes, student, *args, **kwargs)

    monkeypatch.setattr(gradefolder, "grade_answers", flaky)
    results = {r.student: r for r in gradefolder.grade_folder(FIXTURE, folder, tmp_path / "out", jobs=2, limits=LIMITS)}
    assert results["ada"].score == 5.0 and results["bob"].score == 0.0
    assert all("the grader failed on this submission (RecursionError)" in o.message for o in results["bob"].outcomes.values())
    rows = {r["student"]: r for r in csv.DictReader(open(tmp_path / "out" / "grades.csv"))}
    assert rows["ada"]["score"] == "5" and rows["bob"]["score"] == "0"


def test_grading_always_finishes_within_the_budget(graded):
    results, _ = graded
    slow = {n: r.seconds for n, r in results.items() if n in CORPUS and r.seconds > LIMITS.notebook_seconds}
    assert not slow, f"submissions that took longer than the notebook budget: {slow}"


def test_learner_version_of_a_test_cell_has_no_expected_values():
    lesson = lessonfile.load_lesson(FIXTURE)
    for test in lesson.tests:
        sent = lessonfile.learner_version(test.source)
        assert "def expect" not in sent and "def judge" not in sent and "expect = judge = None" in sent
    with pytest.raises(ValueError, match="END EXPECTED"):
        lessonfile.learner_version("### BEGIN EXPECTED\nx = 1\n")


def test_a_reference_that_fails_its_own_judge_stops_grading(tmp_path):
    nb = nbformat.read(FIXTURE, as_version=4)
    answer = cell_of(nb, "fx_scale")
    answer.source = answer.source.replace("return x * k", "return x * k if abs(x) == 2.0 else x - k")
    bad = tmp_path / "99-fixture.ipynb"
    nbformat.write(nb, bad)
    with pytest.raises(RuntimeError, match="fails its judge"):
        grade.Reference(lessonfile.load_lesson(bad), LIMITS)


def _fixture_course(dest: Path) -> Path:
    shutil_copy = __import__("shutil").copy
    (dest / "solutions" / "99-fixture").mkdir(parents=True)
    shutil_copy(ROOT / "nbgrader_config.py", dest)
    shutil_copy(FIXTURE, dest / "solutions" / "99-fixture")
    nbgrader_cli.nbgrader("generate_assignment", "99-fixture", "--force", cwd=dest)
    return dest


def test_nbgrader_autograde_is_protected(tmp_path):
    """`nbgrader autograde` with the course's config: cheats and crashes score what they earned,
    the rest of the class is graded, and the feedback does not show the hidden tests."""
    course = _fixture_course(tmp_path)
    released = nbformat.read(course / "notebooks" / "99-fixture" / "99-fixture.ipynb", as_version=4)

    def answered(**answers):
        nb = copy.deepcopy(released)
        for cell in nb.cells:
            gid = cell.metadata.get("nbgrader", {}).get("grade_id")
            if gid in answers:
                cell.source = answers[gid]
        return nb

    nbgrader_cli.submit(course, "solved", "99-fixture", answered(**OK))
    nbgrader_cli.submit(course, "cheater", "99-fixture", answered(**{**OK, "fx_scale": PATCH_CHECKS}))
    crashing = answered(**{**OK, "fx_grad": "import os\nos._exit(1)\n"})
    _forged_grade_cell(crashing)
    nbgrader_cli.submit(course, "crasher", "99-fixture", crashing)
    marked = answered(**OK)
    _hidden_markers_in_answer(marked)
    nbgrader_cli.submit(course, "marker", "99-fixture", marked)
    broken = course / "submitted" / "broken" / "99-fixture" / "99-fixture.ipynb"
    broken.parent.mkdir(parents=True)
    broken.write_text('{"cells": [')
    empty = course / "submitted" / "empty" / "99-fixture" / "99-fixture.ipynb"
    empty.parent.mkdir(parents=True)
    empty.write_bytes(b"")
    log = nbgrader_cli.autograde(course, "99-fixture").stderr
    assert "cheater: read this answer (course_utils.grader.review): fx_scale: assigns to torch.Tensor.__eq__" in log
    assert "solved: read this answer" not in log
    # nothing else for the instructor to wade through: no checksum "changes" (the test cells are
    # rebuilt as the gradebook has them), no SQLAlchemy noise, no relative-root warning
    for noise in ("has changed!", "SAWarning", "is not absolute"):
        assert noise not in log, f"the autograde log says {noise!r}:\n{log}"
    got = nbgrader_cli.scores(course, "99-fixture")
    assert got["solved"] == (5.0, 5.0)
    assert got["cheater"] == (3.0, 5.0)
    assert got["crasher"] == (3.0, 5.0)
    assert got["marker"] == (5.0, 5.0), "nbgrader's markers inside an answer change nothing"
    # every lost point has its reason where the instructor looks: the log and the gradebook's comments
    assert "cheater: fx_scale_test 0/2: scale(1.5, -2.0) is 0, expected -3" in log
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        comment = gb.find_comment("fx_scale", "99-fixture", "99-fixture", "cheater").auto_comment or ""
        crashed = gb.find_comment("fx_grad", "99-fixture", "99-fixture", "crasher").auto_comment or ""
        solved = gb.find_comment("fx_scale", "99-fixture", "99-fixture", "solved").auto_comment
    assert "fx_scale_test (0/2): scale(1.5, -2.0) is 0, expected -3" in comment, comment
    assert "exit code 1" in crashed, crashed
    assert solved is None, "full marks: no comment"
    # a file that is not a notebook scores 0 with the reason, not a bare 0 after a failed run
    for student in ("broken", "empty"):
        assert got[student] == (0.0, 5.0)
        assert f"{student}: the submitted file could not be read as a notebook (empty, truncated or not a notebook)" in log
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        assert "could not be read as a notebook" in gb.find_comment("fx_scale", "99-fixture", "99-fixture", "broken").auto_comment
    log = nbgrader_cli.nbgrader("generate_feedback", "99-fixture", "--force", cwd=course).stderr
    assert "WARNING" not in log, log
    feedback = nbgrader_cli.feedback(course, "99-fixture")
    assert "is 0, expected" in feedback["cheater"]
    assert "marker" in feedback, "the feedback of an answer holding nbgrader's markers is written too"
    for student, page in feedback.items():
        assert "def expect" not in page and "def judge" not in page and "CASES" not in page
        if student != "marker":  # that learner's own answer holds the words
            assert "BEGIN HIDDEN" not in page


def test_folder_command_writes_grades_and_feedback(tmp_path):
    folder = tmp_path / "submissions"
    folder.mkdir()
    (folder / "ada.ipynb").write_bytes(dumps(notebook()))
    (folder / "bob.ipynb").write_bytes(dumps(notebook(fx_grad="def square_grad(x):\n    return x\n")))
    (folder / "eve.ipynb").write_bytes(b"not json")
    (folder / "mallory.ipynb").write_bytes(dumps(notebook(fx_scale=PATCH_CHECKS)))
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "course_utils.grader.gradefolder", str(FIXTURE), str(folder), "--out", str(out),
                           "--jobs", "2", "--cell-seconds", "20"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = {r["student"]: r for r in csv.DictReader(open(out / "grades.csv"))}
    assert (rows["ada"]["score"], rows["bob"]["score"], rows["eve"]["score"], rows["mallory"]["score"]) == ("5", "3", "0", "3")
    assert rows["ada"]["review"] == rows["bob"]["review"] == rows["eve"]["review"] == ""
    assert rows["mallory"]["review"].startswith("fx_scale: assigns to torch.Tensor.__eq__, assigns to torch.allclose")
    assert "mallory: 3 / 5" in proc.stdout and "[review]" in proc.stdout
    assert "review" not in (out / "feedback" / "mallory" / "99-fixture.html").read_text(), "flags are for the instructor"
    assert "x instead of 2x" in rows["bob"]["reasons"]
    assert "invalid or truncated JSON" in rows["eve"]["reasons"]
    page = (out / "feedback" / "bob" / "99-fixture.html").read_text()
    assert "x instead of 2x" in page and "3 / 5" in page and "def expect" not in page


def test_a_test_cell_without_grade_stops_grading(tmp_path):
    """A test cell the grader cannot judge outside the sandbox is an instructor's error, not a pass."""
    nb = nbformat.read(FIXTURE, as_version=4)
    test = cell_of(nb, "fx_count_test")
    test.source = test.source.split("### BEGIN HIDDEN TESTS")[0]
    bad = tmp_path / "99-fixture.ipynb"
    nbformat.write(nb, bad)
    with pytest.raises(RuntimeError, match="never called grade"):
        grade.Reference(lessonfile.load_lesson(bad), LIMITS)


def test_a_limit_hit_in_the_lessons_own_cells_is_never_the_learners_zero():
    """The lesson's import cell running past the limit (as on a machine too busy to start Python)
    is graded again, then reported as not graded for the machine's sake, never as a score."""
    lesson = lessonfile.load_lesson(FIXTURE)
    reference = grade.Reference(lesson, LIMITS)
    try:
        tight = Limits(**{**vars(LIMITS), "cell_seconds": 0.01})   # the lesson's first cell cannot meet it
        answers, notes = lessonfile.read_answers(dumps(notebook()), lesson)
        result = grade.grade_answers(lesson, reference, answers, notes, "ada", tight)
    finally:
        reference.close()
    assert result.overloaded, result.outcomes
    for o in result.outcomes.values():
        assert o.score == 0 and o.message.startswith(grade.OVERLOADED) and "before any answer ran" in o.message, o.message


def test_a_restarted_reference_judges_against_the_first_runs_peaks(monkeypatch):
    """The reference's memory peaks are measured once, in a known state: one started again later
    (after a learner's answer killed it, perhaps while a neighbour evicts the page cache) keeps them."""
    lesson = lessonfile.load_lesson(FIXTURE)
    reference = grade.Reference(lesson, LIMITS)
    try:
        first = {gid: 10 ** 9 + i for i, gid in enumerate(reference.peaks)}   # as if measured then
        reference.peaks.update(first)
        reference.worker.kill()                                               # killed: judge() starts it again
        sent = []
        send = grade.Worker.send
        monkeypatch.setattr(grade.Worker, "send", lambda self, command, timeout: sent.append(command) or send(self, command, timeout))
        ok, message = reference.judge("fx_count_test", [0, 0, 3, 5])
        assert ok, message
        assert reference.peaks == first, "the restart measured new peaks and kept them"
        assert sent[-1]["reference_peak"] == first["fx_count_test"]
    finally:
        reference.close()


def test_the_judge_compares_with_the_reference_peak_it_is_given():
    from course_utils import judging
    from course_utils.grader import cellrunner
    session = cellrunner.Session("reference")
    seen = []
    session.registry["g"] = (None, lambda got, want: seen.append(judging.memory_peaks()), 111)
    assert cellrunner.judge(session, "g", 1, peak=500, reference_peak=222)["ok"]
    assert cellrunner.judge(session, "g", 1, peak=500)["ok"]
    assert seen == [(500, 222), (500, 111)], "the grader's kept peak wins; the worker's own is the fallback"


def test_the_references_peaks_do_not_depend_on_a_cold_page_cache():
    """A reference started just after the page cache was emptied (by a neighbour, by the machine)
    would count the files it reads in its peaks and judge leniently; it runs again, warm."""
    from course_utils.grader.capabilities import measures_memory
    if not measures_memory():
        pytest.skip("needs the kernel's memory measurement: root, a memory cgroup")
    lesson = lessonfile.load_lesson(FIXTURE)
    warm = grade.Reference(lesson, LIMITS)
    warm.close()
    subprocess.run(["sync"], check=True)
    Path("/proc/sys/vm/drop_caches").write_text("3")
    cold = grade.Reference(lesson, LIMITS)
    cold.close()
    for gid, peak in warm.peaks.items():
        assert abs(cold.peaks[gid] - peak) < 8 * 2 ** 20, \
            f"{gid}: {cold.peaks[gid] / 2 ** 20:.0f} MB after the cache was emptied, {peak / 2 ** 20:.0f} MB warm"
