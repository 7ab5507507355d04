"""course_utils.review: what it flags for the instructor, and that the lessons' own answers raise no flag."""

import json
from pathlib import Path

import pytest

from course_utils import lessonfile
from course_utils.review import flags, review

ROOT = Path(__file__).resolve().parent.parent
LESSONS = sorted(p.name for p in (ROOT / "solutions").iterdir() if p.name[:2].isdigit() and p.name != "00-start-here")
SHARED = {"torch", "nn", "check_floats", "grade"}


@pytest.mark.parametrize("source, phrase", [
    ("import os\nos._exit(0)", "imports os"),
    ("import subprocess as sp", "imports subprocess"),
    ("from IPython import get_ipython", "imports IPython"),
    ("from course_utils import checks", "imports course_utils.checks"),
    ("import course_utils.judging as j", "imports course_utils.judging"),
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
