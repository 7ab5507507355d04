"""course_utils.lessonchecks: each lesson's checks are its test cells' checks, one for one.

Every test cell of lesson NN runs a Check of course_utils.lessonchecks.lNN (tests/test_lessons.py:
the cell's shape), and every Check of that module is run by exactly one test cell: no check is
written for nothing or shared by two exercises. Whether the checks grade right is tested by grading
the lesson's solution, untouched notebook, mutants and alternates (tests/grader/test_preprocessors.py).
"""

import importlib
import re
from pathlib import Path

import pytest

from course_utils import judging
from course_utils.authoring import nbgrader_cli
from course_utils.grader import lessonfile

ROOT = Path(__file__).resolve().parent.parent
LESSONS = nbgrader_cli.lessons(ROOT, graded=True)


def checks_of(name: str) -> dict[str, judging.Check]:
    try:
        module = importlib.import_module(f"course_utils.lessonchecks.l{name[:2]}")
    except ModuleNotFoundError:
        return {}
    return {k: v for k, v in vars(module).items() if isinstance(v, judging.Check)}


@pytest.mark.parametrize("name", LESSONS)
def test_each_check_of_a_lesson_is_run_by_one_of_its_test_cells(name):
    checks = checks_of(name)
    if not checks:
        pytest.skip(f"{name} has no module in course_utils.lessonchecks yet")
    lesson = lessonfile.load_lesson(nbgrader_cli.notebook_path(ROOT, "solutions", name))
    used = [m.group(1) for t in lesson.tests for m in re.finditer(r"^([A-Z][A-Z0-9_]*)\.hidden\(", t.source, re.M)]
    assert sorted(used) == sorted(set(used)), f"{name}: a Check is run by two test cells: {used}"
    assert set(used) == set(checks), (f"{name}: Checks no test cell runs: {sorted(set(checks) - set(used))}; "
                                      f"test cells whose Check is not in the module: {sorted(set(used) - set(checks))}")
    for key, check in checks.items():
        assert callable(check.probe) and callable(check.judge) and check.name, f"{name}: {key} is incomplete"
