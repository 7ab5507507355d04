"""course_utils.grader.review: what it flags for the instructor, and that the lessons' own answers
raise no flag."""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from course_utils.grader import lessonfile
from course_utils.grader.review import TOO_COSTLY, _Reader, flags, review

ROOT = Path(__file__).resolve().parents[2]
LESSONS = sorted(p.name for p in (ROOT / "solutions").iterdir()
                 if p.name[:2].isdigit() and p.name != "00-start-here")
SHARED = {"torch", "nn", "check_floats", "grade"}


def _modules(package: str) -> list[str]:
    import importlib
    import pkgutil
    return [m.name for m in pkgutil.iter_modules(importlib.import_module(package).__path__,
                                                 package + ".")]


@pytest.mark.parametrize("module",
                         _modules("course_utils.grader") + _modules("course_utils.authoring"))
def test_every_module_of_the_grader_and_the_authoring_tools_is_in_reach(module):
    """review flags by package, never by a list: a module added to grader/ is named the day it
    lands."""
    package, _, name = module.rpartition(".")
    for source in (f"import {module}", f"from {module} import x", f"from {package} import {name}"):
        assert flags(source), f"review does not flag {source!r}"


def test_the_lessons_helpers_are_not_flagged():
    for name in ("devices", "models", "graph", "memory", "data", "circuits", "valuegraph",
                 "parallel", "progress", "timing"):
        assert (flags(f"from course_utils.{name} import x") == []
                and flags(f"import course_utils.{name}") == [])


@pytest.mark.parametrize("source, phrase", [
    ("import os\nos._exit(0)", "imports os"),
    ("torch._C._autograd._enable_record_function(False)", "uses torch's private API (torch._C)"),
    ("torch.autograd.profiler._disable_profiler()",
     "uses torch's private API (torch.autograd.profiler._disable_profiler)"),
    ("from torch._C import _set_grad_enabled", "uses torch's private API (torch._C)"),
    ("import torch._dynamo", "uses torch's private API (torch._dynamo)"),
    ("import subprocess as sp", "imports subprocess"),
    ("from IPython import get_ipython", "imports IPython"),
    ("from course_utils import checks", "imports course_utils.checks"),
    ("import course_utils.judging as j", "imports course_utils.judging"),
    ("from course_utils import grader", "imports course_utils.grader"),
    ("import course_utils\ncourse_utils.grader.worker.Limits", "uses course_utils.grader"),
    ("def f(x):\n    return eval(x)", "calls eval"),
    ("exec('1')", "calls exec"),
    ("get_ipython().ast_transformers.append(t)", "calls get_ipython"),
    ("data = open('/etc/passwd').read()", "calls open"),
    ("setattr(torch, 'allclose', f)", "calls setattr"),
    ("x = ().__class__.__base__.__subclasses__()", "uses __subclasses__"),
    ("g = f.__globals__", "uses __globals__"),
    ("class A:\n    def __eq__(self, other):\n        return True", "defines __eq__"),
    ("class F(float):\n    pass", "subclasses float"),
    ("class T(torch.Tensor):\n    pass", "subclasses Tensor"),
    ("torch.allclose = lambda *a, **k: True", "assigns to torch.allclose"),
    ("torch.Tensor.__eq__ = f", "assigns to torch.Tensor.__eq__"),
    ("a, torch.x = 1, 2", "assigns to torch.x"),
    ("import math\nmath.isclose = lambda *a: True", "assigns to math.isclose"),
    ("x = __builtins__", "uses __builtins__"),
    ("def check_floats(*a, **k):\n    pass", "redefines check_floats"),
    ("grade = print", "redefines grade"),
    ("from math import isclose as check_floats", "redefines check_floats"),
    ("import numpy as torch", "redefines torch"),
    ("def f():\n    global grade\n    grade = print", "declares global grade"),
    # hooks, which shadow the tests' own (lesson 03's "a graph was built" check, 05's and 06's saved
    # bytes)
    ("with torch.autograd.graph.saved_tensors_hooks(pack, unpack):\n    loss = f(x)",
     "installs hooks (saved_tensors_hooks)"),
    ("from torch.autograd.graph import saved_tensors_hooks as quiet",
     "installs hooks (saved_tensors_hooks)"),
    ("with torch.autograd.graph.save_on_cpu():\n    pass", "installs hooks (save_on_cpu)"),
    ("x.register_hook(lambda g: g * 0)", "installs hooks (register_hook)"),
    ("model.register_forward_hook(f)", "installs hooks (register_forward_hook)"),
    ("model.register_full_backward_pre_hook(f)",
     "installs hooks (register_full_backward_pre_hook)"),
    ("torch.autograd.graph.register_multi_grad_hook(ts, f)",
     "installs hooks (register_multi_grad_hook)"),
    ("torch.nn.modules.module.register_module_forward_hook(f)",
     "installs hooks (register_module_forward_hook)"),
    ("out.grad_fn.register_prehook(f)", "installs hooks (register_prehook)"),
    ("model._forward_hooks[0] = f", "installs hooks (_forward_hooks)"),
    ("getattr(torch.autograd.graph, 'saved_tensors_hooks')(p, u)",
     "installs hooks (saved_tensors_hooks)"),
    # dispatch and function modes see and change every torch call the tests make
    ("class Spy(TorchDispatchMode):\n    pass",
     "uses a dispatch or function mode (TorchDispatchMode)"),
    ("from torch.overrides import TorchFunctionMode",
     "uses a dispatch or function mode (TorchFunctionMode)"),
    ("import torch.overrides", "uses a dispatch or function mode (torch.overrides)"),
    ("from torch.utils import _python_dispatch",
     "uses a dispatch or function mode (_python_dispatch)"),
    ("class T:\n    @classmethod\n"
     "    def __torch_function__(cls, f, types, args=(), kwargs=None):\n        pass",
     "uses a dispatch or function mode (__torch_function__)"),
    ("def __torch_dispatch__(cls, f, types, args=(), kwargs=None):\n    pass",
     "uses a dispatch or function mode (__torch_dispatch__)"),
    # grad mode switched on past the tests' no_grad (lesson 04's "without autograd")
    ("with torch.enable_grad():\n    g = torch.autograd.grad(loss, w)",
     "switches grad mode (enable_grad)"),
    ("torch.set_grad_enabled(True)", "switches grad mode (set_grad_enabled)"),
    ("torch._C._set_grad_enabled(True)", "switches grad mode (_set_grad_enabled)"),
    ("with torch.inference_mode(False):\n    pass", "switches grad mode (inference_mode(False))"),
    ("with torch.inference_mode(mode=flag):\n    pass",
     "switches grad mode (inference_mode(False))"),
    ("from torch.autograd import grad_mode", "switches grad mode (grad_mode)"),
    ("getattr(torch, 'enable_grad')()", "switches grad mode (enable_grad)"),
    # a module's or object's attributes rebound behind its back
    ("module.__dict__['x'] = 1", "writes into module.__dict__"),
    ("torch.__dict__['allclose'] = lambda *a, **k: True", "writes into torch.__dict__"),
    ("vars(torch)['allclose'] = f", "writes into vars(torch)"),
    ("checks.__dict__.update(check_floats=f)", "writes into checks.__dict__"),
    ("del torch.__dict__['allclose']", "writes into torch.__dict__"),
    ("obj.__dict__ = {}", "writes into obj.__dict__"),
    ("original = torch.__dict__['allclose']", "uses __dict__"),
])
def test_each_kind_of_reach_is_named(source, phrase):
    assert phrase in flags(source, SHARED)


@pytest.mark.parametrize("source", [
    "def f(x):\n    return torch.relu(x @ x.T).sum()",
    "import torch\nimport torch.nn as nn\nimport math",
    "from course_utils.models import MLPScratch",
    "G[torch.arange(n), y] -= 1",            # an index, not an assignment to torch
    "model.weight = nn.Parameter(w)",        # a variable of the answer's own
    "x = 3\nloss = x * 2",                   # names the lesson may use for its own variables
    "class Value:\n    def __add__(self, other):\n        return self\n    def __repr__(self):\n"
    "        return 'V'",
    "class Mul(torch.autograd.Function):\n    pass",
    # turning grad off is what the tests do too
    "with torch.no_grad():\n    w -= lr * w.grad",
    "with torch.inference_mode():\n    y = model(x)",
    "with torch.inference_mode(True):\n    y = model(x)",
    "g, = torch.autograd.grad(y, x, create_graph=True)",   # lesson 07's exercises use autograd
    "hooks = []\nx.requires_grad_()",
    "import platform\nname = platform.system()",           # system, but not os's
    "with torch.random.fork_rng():\n    x = torch.randn(3)",
    "def square_fork(x):\n    return x ** 2",              # lesson 02's forks of a graph
    "x = y % 3  # a remainder, no magic?",
    "ls = [1, 2]",                           # a magic's name, assigned: Python, not a magic
    "time.sleep(0)",
    "pwd = 3; print(pwd)",
    "await asyncio.sleep(0)",                # IPython runs top-level await
])
def test_ordinary_answers_are_not_flagged(source):
    assert flags(source, SHARED) == []


def test_a_name_the_exercise_itself_defines_is_not_flagged():
    assert flags("def grade(x):\n    return x", SHARED, own_names={"grade"}) == []


def test_unreadable_sources_get_a_flag_not_an_error():
    """What review cannot read is flagged, never passed as clean: it cannot say what the cell
    does."""
    assert flags(None) == ["the answer is not text"]
    assert flags("def broken(:\n") == ["cannot be read: invalid syntax (line 1)"]
    assert flags("%pwd\nimport os\ndef broken(:\n") == ["cannot be read: invalid syntax (line 3)"]
    # IPython cannot either
    assert flags("x = 1 \\\n!ls") == ["cannot be read: invalid syntax (line 2)"]
    # a null byte: Python refuses the cell (it does not run), so review flags it unread; in a
    # magic's own cell it is that magic's business, and the magic is named
    assert flags("x = 1\0") == ["cannot be read: it holds a null byte"]
    assert flags("import os\0\nos.fork()") == ["cannot be read: it holds a null byte"]
    assert flags("%%capture\nimport os\0") == ["runs the %%capture cell magic"]
    assert flags("!echo a\0b") == ["runs a shell command (!...)"]
    deep = ["cannot be read: too deeply nested for Python's parser"]
    assert flags("x = " + "-" * 100_000 + "1") == deep  # MemoryError
    assert flags("x = " + "+".join(["1"] * 90_000)) == deep  # RecursionError
    assert flags("x = 1\n" * 100_000) == ["the answer is over 200,000 characters long"]
    assert (flags("%%capture\n" * 20 + "import os")
            == ["cannot be read: magics inside magics over 16 deep"])
    assert flags("!x\n" * 600) == [f"cannot be read: {TOO_COSTLY}"]


def test_ipython_syntax_costs_review_a_bounded_time():
    """IPython re-tokenizes the whole cell for each escape: 499 of them before 195,000 characters of
    code take it minutes. Review stops at its budget and flags the answer unread."""
    source = "!x\n" * 499 + "y = 1\n" * 32_500
    start = time.monotonic()
    assert flags(source) == [f"cannot be read: {TOO_COSTLY}"]
    assert time.monotonic() - start < 30
    start = time.monotonic()
    # long attribute chains cost their length, not its square
    assert flags(("x" + ".a" * 200 + "\n") * 100) == []
    assert time.monotonic() - start < 30


CHEAT = "torch.allclose = lambda *a, **k: True"


@pytest.mark.parametrize("source, phrases", [
    # one added line of IPython syntax once switched review off: the cheat after it is still named
    ("%pwd\n" + CHEAT, ["runs the %pwd line magic"]),
    ("!true\n" + CHEAT, ["runs a shell command (!...)"]),
    ("!!true\n" + CHEAT, ["runs a shell command (!...)"]),
    ("x = !ls\n" + CHEAT, ["runs a shell command (!...)"]),
    ("x = %pwd\n" + CHEAT, ["runs the %pwd line magic"]),
    ("?\n" + CHEAT, ["uses IPython's help (?)"]),
    ("torch?\n" + CHEAT, ["runs the %pinfo line magic"]),
    ("torch??\n" + CHEAT, ["runs the %pinfo2 line magic"]),
    ("%time f()\n" + CHEAT, ["runs the %time line magic"]),
    ("if True:\n    %pwd\n    !true\n" + CHEAT,
     ["runs the %pwd line magic", "runs a shell command (!...)"]),
    # an indented cell: IPython dedents it
    ("  %pwd\n  " + CHEAT, ["runs the %pwd line magic"]),
    # a pasted prompt: IPython strips it
    (">>> " + CHEAT, []),
    ("In [1]: %pwd\n" + CHEAT, ["runs the %pwd line magic"]),
    # autocall escapes: plain calls
    ("/print 1\n" + CHEAT, []),
    # the code a magic runs is read as a cell of its own
    ("%%capture\n" + CHEAT, ["runs the %%capture cell magic"]),
    ("%%time\n%pwd\n" + CHEAT, ["runs the %%time cell magic", "runs the %pwd line magic"]),
    ("%%capture\n%%capture\n" + CHEAT, ["runs the %%capture cell magic"]),
    ("%time " + CHEAT, ["runs the %time line magic"]),
    ("%timeit -n 1 -r 1 " + CHEAT, ["runs the %timeit line magic"]),      # options before the code
    ("%%script python\n" + CHEAT, ["runs the %%script cell magic"]),
    ("%%bash\necho hi\n", ["runs the %%bash cell magic"]),
    # a one-line cell is also read as IPython's shell does: a magic's name first runs it (automagic)
    ("time " + CHEAT, ["runs the %time line magic"]),
    ("ls -la", ["runs the %ls line magic"]),
    ("sx (ls)", ["runs the %sx line magic"]),
    ("exit", ["calls exit"]),
    # spelled out by hand, the same calls are named the same way
    ("get_ipython().system('ls')", ["runs a shell command (!...)"]),
    ("get_ipython().run_line_magic('pwd', '')", ["runs the %pwd line magic"]),
])
def test_ipython_syntax_is_read_as_ipython_runs_it(source, phrases):
    found = flags(source, SHARED)
    cheat = CHEAT in source
    for phrase in phrases + (["assigns to torch.allclose"] if cheat else []):
        assert phrase in found, (source, found)
    assert "calls get_ipython" not in found, ("what IPython writes for its own syntax is named by "
                                              "what it runs")
    assert not any(f.startswith("cannot be read") for f in found), found


def test_review_transforms_cells_as_a_fresh_ipython_shell_does():
    """The review's reading of IPython syntax is InteractiveShell.transform_cell's: compared cell by
    cell with a real shell (its own IPYTHONDIR, in a child process: the shell is a singleton)."""
    cells = ["%pwd\nimport os", "!true\nx = 1", "%%capture\nimport os", "x = !ls\ny = 2",
             "?\nz = 1", "os?\n", "%time f()", "time f()", "ls -la", "pwd", "rm -rf", "run(3)",
             "time(3)", "time.sleep(1)", "cd /tmp", "ls", "x = 1; ls",
             "time import os; os.system('x')", "exit", "quit()", "quit 3", "exit;", "who",
             "pwd = 3", "ls, x = 1, 2", "ls -la\n", "  %pwd\nx = 1", "sx (ls)", "system ls",
             "print(1)", "", "   ", "\n\n", "x", "def f(): pass", "time.time()", "ll",
             "if True: ls", "ls.x", "ls[0]", "ls == 3", "ls += 1", "ls (1)", "  time f()",
             "timeit -n1 pass", "%%time\nls", ">>> ls", "In [1]: time 1", "help", "print ls",
             "await x", "x = %pwd", "!!ls", "/f a", ",f a b", ";f a b", "env X=1", "load x.py",
             "matplotlib inline", "x = 1 \\\n!ls", "/" * 20 + "x"]
    shell = ("import json, sys\n"
             "from IPython.core.interactiveshell import InteractiveShell\n"
             "shell = InteractiveShell.instance()\n"
             "print(json.dumps([shell.transform_cell(c) for c in json.loads(sys.stdin.read())]))\n")
    with tempfile.TemporaryDirectory() as ipythondir:
        out = subprocess.run([sys.executable, "-c", shell], input=json.dumps(cells),
                             capture_output=True, text=True,
                             env={**os.environ, "IPYTHONDIR": ipythondir}, timeout=120, check=True)
    ipython = json.loads(out.stdout.strip().splitlines()[-1])
    for cell, want in zip(cells, ipython, strict=True):
        assert _Reader().code(cell) == want, cell


PROCESS = "creates a process"


@pytest.mark.parametrize("source, phrase", [
    ("import os\nif os.fork() == 0:\n    pass", "os.fork"),
    ("os.forkpty()", "os.forkpty"),
    ("os.posix_spawn('/bin/sh', ['sh'], {})", "os.posix_spawn"),
    ("os.posix_spawnp('sh', ['sh'], {})", "os.posix_spawnp"),
    ("os.spawnv(os.P_WAIT, '/bin/true', ['true'])", "os.spawnv"),
    ("os.system('true')", "os.system"),
    ("os.popen('ls').read()", "os.popen"),
    ("os.execv('/bin/true', ['true'])", "os.execv"),
    ("from os import fork\nfork()", "os.fork"),
    ("from os import system as run\nrun('true')", "os.system"),
    ("import os as o\no.system('true')", "os.system"),
    ("import posix\nposix.fork()", "posix.fork"),
    ("getattr(os, 'fork')()", "os.fork"),
    ("getattr(os, 'system')('true')", "os.system"),
    ("__import__('os').fork()", "os.fork"),
    ("importlib.import_module('os').fork()", "os.fork"),
    # an object review cannot resolve
    ("libc = ctypes.CDLL(None)\nlibc.fork()", "os.fork"),
    ("import subprocess", "subprocess"),
    ("from subprocess import run\nrun(['true'])", "subprocess"),
    ("importlib.import_module('subprocess').run(['true'])", "subprocess"),
    ("sys.modules['subprocess'].run(['true'])", "subprocess"),
    ("p = Popen(['true'])", "subprocess"),
    ("import multiprocessing as m\nm.Process(target=f).start()", "multiprocessing"),
    ("from multiprocessing import Pipe, Process", "multiprocessing"),
    ("import torch.multiprocessing as mp\nctx = mp.get_context('fork')", "torch.multiprocessing"),
    ("from torch import multiprocessing\nmultiprocessing.Process(target=f)",
     "torch.multiprocessing"),
    ("from torch import multiprocessing as mp", "torch.multiprocessing"),
    ("ctx = torch.multiprocessing.get_context('fork')", "torch.multiprocessing"),
    ("ctx = torch.multiprocessing.get_context('fork')", "os.fork"),    # the start method named too
    ("getattr(torch, 'multiprocessing').spawn(f)", "torch.multiprocessing"),
    ("importlib.import_module('torch.multiprocessing')", "torch.multiprocessing"),
    ("from concurrent.futures import ProcessPoolExecutor",
     "concurrent.futures.ProcessPoolExecutor"),
    ("import concurrent.futures\nconcurrent.futures.ProcessPoolExecutor(2)",
     "concurrent.futures.ProcessPoolExecutor"),
    ("from concurrent import futures\nfutures.ProcessPoolExecutor(2)",
     "concurrent.futures.ProcessPoolExecutor"),
    ("import pty\npty.spawn('sh')", "pty"),
    ("from pty import fork", "pty"),
    ("await asyncio.create_subprocess_exec('true')", "asyncio.create_subprocess_exec"),
    ("from torch.utils.cpp_extension import load_inline", "torch.utils.cpp_extension"),
    ("%%capture\nimport os\nos.fork()", "os.fork"),                   # behind a magic too
])
def test_each_spelling_of_process_creation_is_named(source, phrase):
    """A child process is outside every check the tests make in the learner's process (lesson 04's
    "without autograd", 03's "predict, don't measure"): each spelling is named."""
    assert f"{PROCESS} ({phrase})" in flags(source, SHARED)


@pytest.mark.parametrize("source", [
    "import ctypes",
    # ctypes reached through numpy
    "import numpy as np\nlib = np.ctypeslib.ctypes.CDLL(None)",
    "gomp = numpy.ctypeslib.ctypes.CDLL('libgomp.so.1')\ngomp.GOMP_parallel(fn, None, 2, 0)",
    "address = X.numpy().ctypes.data",
    "callback = getattr(np.ctypeslib, 'ctypes').CFUNCTYPE(None)",
])
def test_native_code_is_named_however_ctypes_is_reached(source):
    """A function called through ctypes can run on a thread the runner already has (OpenMP's pool),
    out of sight of a rule watched in the probe's thread (lesson 03's predict_saved): named for
    review."""
    assert "calls native code (ctypes)" in flags(source, SHARED)


@pytest.mark.parametrize("name", LESSONS)
def test_the_lessons_solutions_second_solutions_and_mutants_raise_no_flag(name):
    """Calibration: plausible answers, right or wrong, are never flagged, so a flag means
    something."""
    lesson = lessonfile.load_lesson(ROOT / "solutions" / name / f"{name}.ipynb")
    solution = {c.gid: c.source for c in lesson.answers}
    assert review(lesson, solution) == []
    for alt in json.loads((ROOT / "tests" / "alternates" / f"{name}.json").read_text()):
        assert review(lesson, {alt["cell"]: alt["source"]}) == [], alt["note"]
    for mutant in json.loads((ROOT / "tests" / "mutants" / f"{name}.json").read_text()):
        # a cheat, not a plausible mistake: it must be named for the instructor
        if "source" in mutant:
            assert review(lesson, {mutant["cell"]: mutant["source"]}) != [], mutant["student"]
            continue
        source = solution[mutant["cell"]].replace(mutant["old"], mutant["new"])
        assert review(lesson, {mutant["cell"]: source}) == [], mutant["student"]


@pytest.mark.parametrize("name", LESSONS)
def test_the_lessons_cheats_are_named_as_well_behind_an_ipython_line(name):
    """The red team's bypass: one `%pwd` (or `!true`, `%%capture`) line above a flagged cheat once
    took every flag away. Each cheat of tests/mutants keeps its flags behind one, and the line is
    named too."""
    lesson = lessonfile.load_lesson(ROOT / "solutions" / name / f"{name}.ipynb")
    cheats = [m for m in json.loads((ROOT / "tests" / "mutants" / f"{name}.json").read_text())
              if "source" in m]
    def phrases(lines):
        assert len(lines) == 1 and lines[0].startswith(f"{mutant['cell']}: "), lines
        return set(lines[0].split(": ", 1)[1].split(", "))

    for mutant in cheats:
        plain = phrases(review(lesson, {mutant["cell"]: mutant["source"]}))
        for line, phrase in (("%pwd\n", "runs the %pwd line magic"),
                             ("!true\n", "runs a shell command (!...)"),
                             ("%%capture\n", "runs the %%capture cell magic")):
            hidden = phrases(review(lesson, {mutant["cell"]: line + mutant["source"]}))
            assert hidden == plain | {phrase}, (mutant["student"], line, hidden)


def test_review_names_the_cell():
    lesson = lessonfile.load_lesson(ROOT / "solutions" / "01-circuits" / "01-circuits.ipynb")
    gid = lesson.answers[0].gid
    lines = review(lesson, {gid: "import os\n" + lesson.answers[0].source})
    assert lines == [f"{gid}: imports os"]


def test_what_an_exercises_own_solution_does_is_not_flagged_in_its_answers_only():
    """Lesson 11's overlapped_allreduce asks for post-accumulate-grad hooks: an answer that
    registers them is not flagged, one that adds another hook or an import is (named alone); the
    same hook in another exercise's answer is flagged."""
    lesson = lessonfile.load_lesson(ROOT / "solutions" / "11-splitting-layers"
                                    / "11-splitting-layers.ipynb")
    answer = {c.gid: c.source for c in lesson.answers}["l11_overlapped_allreduce"]
    assert "register_post_accumulate_grad_hook" in answer
    assert review(lesson, {"l11_overlapped_allreduce": answer}) == []
    extra = "import os\n" + answer.replace("    return finish", "    model.register_forward_hook("
                                            "lambda *a: None)\n    return finish")
    assert review(lesson, {"l11_overlapped_allreduce": extra}) == [
        "l11_overlapped_allreduce: imports os, installs hooks (register_forward_hook)"]
    hooked = "x = torch.ones(1, requires_grad=True)\nx.register_post_accumulate_grad_hook(print)\n"
    assert review(lesson, {"l11_tp_mlp": hooked}) == [
        "l11_tp_mlp: installs hooks (register_post_accumulate_grad_hook)"]


PREDICT_SAVED_MEASURED = """
def predict_saved(n, d, h, o, dtype=torch.float32, x_requires_grad=False):
    # measures instead of predicting: the real graph, built inside hooks of its own, which shadow
    # the test's
    saved = []
    def pack(t):
        saved.append(t)
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        net = nn.Sequential(nn.Linear(d, h), nn.Tanh(), nn.Linear(h, o)).to(dtype)
        X = torch.randn(n, d, dtype=dtype, requires_grad=x_requires_grad)
        (net(X) - torch.randn(n, o, dtype=dtype)).pow(2).mean()
    distinct = {t.untyped_storage().data_ptr(): t for t in saved}
    total = sum(t.numel() * t.element_size() for t in distinct.values())
    leaves = sum(t.numel() * t.element_size() for t in distinct.values()
                 if t.is_leaf and t.requires_grad)
    return (len(saved), total, total - leaves)
"""

MLP_BACKWARD_BY_AUTOGRAD = """
def mlp_backward(model, X, y, lam):
    # "without autograd", but autograd switched back on past the test's torch.no_grad()
    n = X.shape[0]
    with torch.enable_grad():
        Ws = [W.detach().requires_grad_() for W in model.weights]
        bs = [b.detach().requires_grad_() for b in model.biases]
        H = X.reshape(n, -1)
        for i, (W, b) in enumerate(zip(Ws, bs)):
            H = H @ W + b
            if i < len(Ws) - 1:
                H = torch.relu(H)
        J = F.cross_entropy(H, y) + lam / 2 * sum((W ** 2).sum() for W in Ws)
        grads = torch.autograd.grad(J, Ws + bs)
    return list(grads[:len(Ws)]), list(grads[len(Ws):])
"""


MLP_BACKWARD_IN_A_FORKED_CHILD = """
def mlp_backward(model, X, y, lam):
    # torch.func.grad in a child made with torch.multiprocessing's fork context: the test's profiler
    # and node count watch the learner's process only; the gradients come back through a pipe
    import torch.multiprocessing as mp
    ctx = mp.get_context("fork")
    here, there = ctx.Pipe()
    def J(params):
        Ws, bs = params
        H = X.reshape(X.shape[0], -1)
        for i, (W, b) in enumerate(zip(Ws, bs)):
            H = H @ W + b
            if i < len(Ws) - 1:
                H = torch.relu(H)
        return F.cross_entropy(H, y) + lam / 2 * sum((W ** 2).sum() for W in Ws)
    def child():
        there.send(torch.func.grad(J)(([W.detach() for W in model.weights],
                                       [b.detach() for b in model.biases])))
    p = ctx.Process(target=child)
    p.start()
    gW, gb = here.recv()
    p.join()
    return list(gW), list(gb)
"""

PREDICT_SAVED_MEASURED_IN_A_CHILD = """
def predict_saved(n, d, h, o, dtype=torch.float32, x_requires_grad=False):
    # measures in a forked child, where the test's own saved-tensor hooks are not installed
    r, w = os.pipe()
    if os.fork() == 0:
        saved = []
        with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
            net = nn.Sequential(nn.Linear(d, h), nn.Tanh(), nn.Linear(h, o)).to(dtype)
            (net(torch.randn(n, d, dtype=dtype, requires_grad=x_requires_grad)) ** 2).mean()
        os.write(w, repr(len(saved)).encode())
        os._exit(0)
    return (int(os.read(r, 100)), 0, 0)
"""


@pytest.mark.parametrize("name, gid, source, phrase", [
    ("03-pytorch-autograd", "l03_predict_saved", PREDICT_SAVED_MEASURED,
     "installs hooks (saved_tensors_hooks)"),
    ("03-pytorch-autograd", "l03_predict_saved", PREDICT_SAVED_MEASURED_IN_A_CHILD,
     "creates a process (os.fork)"),
    ("04-mlp-backprop", "l04_mlp_backward", MLP_BACKWARD_IN_A_FORKED_CHILD,
     "creates a process (torch.multiprocessing)"),
    ("04-mlp-backprop", "l04_mlp_backward", "%pwd\n" + MLP_BACKWARD_BY_AUTOGRAD,
     "switches grad mode (enable_grad)"),
    ("04-mlp-backprop", "l04_mlp_backward", "%pwd\n" + MLP_BACKWARD_BY_AUTOGRAD,
     "runs the %pwd line magic"),
    ("03-pytorch-autograd", "l03_predict_saved", "%%capture\n" + PREDICT_SAVED_MEASURED,
     "installs hooks (saved_tensors_hooks)"),
    ("04-mlp-backprop", "l04_mlp_backward", MLP_BACKWARD_BY_AUTOGRAD,
     "switches grad mode (enable_grad)"),
    ("01-circuits", "l01_circuit_grads",
     "import course_utils.checks as c\nc.__dict__['check_floats'] = lambda *a, **k: None",
     "writes into c.__dict__"),
])
def test_the_red_teams_answers_are_named(name, gid, source, phrase):
    """Answers that scored full marks by shadowing the tests' hooks, switching grad mode back on,
    rebinding a module's attributes through its __dict__, or working in a child process, and the
    same behind one line of IPython syntax: named for the instructor."""
    lesson = lessonfile.load_lesson(ROOT / "solutions" / name / f"{name}.ipynb")
    lines = review(lesson, {gid: source})
    assert len(lines) == 1 and lines[0].startswith(f"{gid}: ") and phrase in lines[0], lines
