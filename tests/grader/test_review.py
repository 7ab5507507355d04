"""course_utils.grader.review: what it flags for the instructor, and that the lessons' own answers raise no flag."""

import json
from pathlib import Path

import pytest

from course_utils.grader import lessonfile
from course_utils.grader.review import flags, review

ROOT = Path(__file__).resolve().parents[2]
LESSONS = sorted(p.name for p in (ROOT / "solutions").iterdir() if p.name[:2].isdigit() and p.name != "00-start-here")
SHARED = {"torch", "nn", "check_floats", "grade"}


def _modules(package: str) -> list[str]:
    import importlib
    import pkgutil
    return [m.name for m in pkgutil.iter_modules(importlib.import_module(package).__path__, package + ".")]


@pytest.mark.parametrize("module", _modules("course_utils.grader") + _modules("course_utils.authoring"))
def test_every_module_of_the_grader_and_the_authoring_tools_is_in_reach(module):
    """review flags by package, never by a list: a module added to grader/ is named the day it lands."""
    package, _, name = module.rpartition(".")
    for source in (f"import {module}", f"from {module} import x", f"from {package} import {name}"):
        assert flags(source), f"review does not flag {source!r}"


def test_the_lessons_helpers_are_not_flagged():
    for name in ("devices", "models", "graph", "memory", "data", "circuits", "valuegraph", "parallel", "progress", "timing"):
        assert flags(f"from course_utils.{name} import x") == [] and flags(f"import course_utils.{name}") == []


@pytest.mark.parametrize("source, phrase", [
    ("import os\nos._exit(0)", "imports os"),
    ("torch._C._autograd._enable_record_function(False)", "uses torch's private API (torch._C)"),
    ("torch.autograd.profiler._disable_profiler()", "uses torch's private API (torch.autograd.profiler._disable_profiler)"),
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
    # hooks, which shadow the tests' own (lesson 03's "a graph was built" check, 05's and 06's saved bytes)
    ("with torch.autograd.graph.saved_tensors_hooks(pack, unpack):\n    loss = f(x)", "installs hooks (saved_tensors_hooks)"),
    ("from torch.autograd.graph import saved_tensors_hooks as quiet", "installs hooks (saved_tensors_hooks)"),
    ("with torch.autograd.graph.save_on_cpu():\n    pass", "installs hooks (save_on_cpu)"),
    ("x.register_hook(lambda g: g * 0)", "installs hooks (register_hook)"),
    ("model.register_forward_hook(f)", "installs hooks (register_forward_hook)"),
    ("model.register_full_backward_pre_hook(f)", "installs hooks (register_full_backward_pre_hook)"),
    ("torch.autograd.graph.register_multi_grad_hook(ts, f)", "installs hooks (register_multi_grad_hook)"),
    ("torch.nn.modules.module.register_module_forward_hook(f)", "installs hooks (register_module_forward_hook)"),
    ("out.grad_fn.register_prehook(f)", "installs hooks (register_prehook)"),
    ("model._forward_hooks[0] = f", "installs hooks (_forward_hooks)"),
    ("getattr(torch.autograd.graph, 'saved_tensors_hooks')(p, u)", "installs hooks (saved_tensors_hooks)"),
    # dispatch and function modes see and change every torch call the tests make
    ("class Spy(TorchDispatchMode):\n    pass", "uses a dispatch or function mode (TorchDispatchMode)"),
    ("from torch.overrides import TorchFunctionMode", "uses a dispatch or function mode (TorchFunctionMode)"),
    ("import torch.overrides", "uses a dispatch or function mode (torch.overrides)"),
    ("from torch.utils import _python_dispatch", "uses a dispatch or function mode (_python_dispatch)"),
    ("class T:\n    @classmethod\n    def __torch_function__(cls, f, types, args=(), kwargs=None):\n        pass",
     "uses a dispatch or function mode (__torch_function__)"),
    ("def __torch_dispatch__(cls, f, types, args=(), kwargs=None):\n    pass",
     "uses a dispatch or function mode (__torch_dispatch__)"),
    # grad mode switched on past the tests' no_grad (lesson 04's "without autograd")
    ("with torch.enable_grad():\n    g = torch.autograd.grad(loss, w)", "switches grad mode (enable_grad)"),
    ("torch.set_grad_enabled(True)", "switches grad mode (set_grad_enabled)"),
    ("torch._C._set_grad_enabled(True)", "switches grad mode (_set_grad_enabled)"),
    ("with torch.inference_mode(False):\n    pass", "switches grad mode (inference_mode(False))"),
    ("with torch.inference_mode(mode=flag):\n    pass", "switches grad mode (inference_mode(False))"),
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
    "class Value:\n    def __add__(self, other):\n        return self\n    def __repr__(self):\n        return 'V'",
    "class Mul(torch.autograd.Function):\n    pass",
    "with torch.no_grad():\n    w -= lr * w.grad",          # turning grad off is what the tests do too
    "with torch.inference_mode():\n    y = model(x)",
    "with torch.inference_mode(True):\n    y = model(x)",
    "g, = torch.autograd.grad(y, x, create_graph=True)",   # lesson 07's exercises use autograd
    "hooks = []\nx.requires_grad_()",
    "def broken(:\n",                        # a syntax error is the grader's to report, not a flag
])
def test_ordinary_answers_are_not_flagged(source):
    assert flags(source, SHARED) == []


def test_a_name_the_exercise_itself_defines_is_not_flagged():
    assert flags("def grade(x):\n    return x", SHARED, own_names={"grade"}) == []


def test_unreadable_sources_get_a_flag_not_an_error():
    assert flags(None) == ["the answer is not text"]
    assert flags("x = 1\0") == []  # a SyntaxError: the grader reports it when the cell runs
    assert flags("x = " + "-" * 100_000 + "1") == ["the answer could not be read by the review"]  # MemoryError
    assert flags("x = " + "+".join(["1"] * 90_000)) == ["the answer could not be read by the review"]  # RecursionError
    assert flags("x = 1\n" * 100_000) == ["the answer is over 200,000 characters long"]


@pytest.mark.parametrize("name", LESSONS)
def test_the_lessons_solutions_second_solutions_and_mutants_raise_no_flag(name):
    """Calibration: plausible answers, right or wrong, are never flagged, so a flag means something."""
    lesson = lessonfile.load_lesson(ROOT / "solutions" / name / f"{name}.ipynb")
    solution = {c.gid: c.source for c in lesson.answers}
    assert review(lesson, solution) == []
    for alt in json.loads((ROOT / "tests" / "alternates" / f"{name}.json").read_text()):
        assert review(lesson, {alt["cell"]: alt["source"]}) == [], alt["note"]
    for mutant in json.loads((ROOT / "tests" / "mutants" / f"{name}.json").read_text()):
        if "source" in mutant:  # a cheat, not a plausible mistake: it must be named for the instructor
            assert review(lesson, {mutant["cell"]: mutant["source"]}) != [], mutant["student"]
            continue
        source = solution[mutant["cell"]].replace(mutant["old"], mutant["new"])
        assert review(lesson, {mutant["cell"]: source}) == [], mutant["student"]


def test_review_names_the_cell():
    lesson = lessonfile.load_lesson(ROOT / "solutions" / "01-circuits" / "01-circuits.ipynb")
    gid = lesson.answers[0].gid
    lines = review(lesson, {gid: "import os\n" + lesson.answers[0].source})
    assert lines == [f"{gid}: imports os"]


PREDICT_SAVED_MEASURED = """
def predict_saved(n, d, h, o, dtype=torch.float32, x_requires_grad=False):
    # measures instead of predicting: the real graph, built inside hooks of its own, which shadow the test's
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
    leaves = sum(t.numel() * t.element_size() for t in distinct.values() if t.is_leaf and t.requires_grad)
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


@pytest.mark.parametrize("name, gid, source, phrase", [
    ("03-pytorch-autograd", "l03_predict_saved", PREDICT_SAVED_MEASURED, "installs hooks (saved_tensors_hooks)"),
    ("04-mlp-backprop", "l04_mlp_backward", MLP_BACKWARD_BY_AUTOGRAD, "switches grad mode (enable_grad)"),
    ("01-circuits", "l01_circuit_grads", "import course_utils.checks as c\nc.__dict__['check_floats'] = lambda *a, **k: None",
     "writes into c.__dict__"),
])
def test_the_red_teams_answers_are_named(name, gid, source, phrase):
    """Answers that scored full marks by shadowing the tests' hooks, switching grad mode back on, or
    rebinding a module's attributes through its __dict__: named for the instructor."""
    lesson = lessonfile.load_lesson(ROOT / "solutions" / name / f"{name}.ipynb")
    lines = review(lesson, {gid: source})
    assert len(lines) == 1 and lines[0].startswith(f"{gid}: ") and phrase in lines[0], lines
