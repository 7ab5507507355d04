"""course_utils.authoring.assignment: releases tag every test cell raises-exception (Run All goes on
past a failing test); solutions stay untagged, so nbval still fails on an exception there."""

from pathlib import Path

import nbformat
import pytest

from course_utils.authoring import nbgrader_cli
from course_utils.authoring.assignment import TAG, RunAllPastTests

ROOT = Path(__file__).resolve().parents[2]


def graded(nb):
    return [c for c in nb.cells
            if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade")
            and not c.metadata.get("nbgrader", {}).get("solution")]


def test_only_test_cells_are_tagged_once():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1"),
                nbformat.v4.new_code_cell(
                    "def f(): pass", metadata={"nbgrader": {"solution": True, "grade": False}}),
                nbformat.v4.new_code_cell("assert f() is None",
                                          metadata={"nbgrader": {"grade": True, "solution": False},
                                                    "tags": ["keep", TAG]}),
                nbformat.v4.new_code_cell(
                    "assert True", metadata={"nbgrader": {"grade": True, "solution": False}})]
    out, _ = RunAllPastTests().preprocess(nb, {})
    assert [c.metadata.get("tags") for c in out.cells] == [None, None, ["keep", TAG], [TAG]]


@pytest.mark.parametrize("name", nbgrader_cli.lessons(ROOT, graded=True))
def test_released_test_cells_are_tagged_and_solutions_are_not(name):
    released = nbformat.read(nbgrader_cli.notebook_path(ROOT, "notebooks", name), as_version=4)
    source = nbformat.read(nbgrader_cli.notebook_path(ROOT, "solutions", name), as_version=4)
    assert graded(released) and all(TAG in c.metadata.get("tags", []) for c in graded(released)), \
        f"run `bash course.sh release {name}`"
    assert not any(TAG in c.metadata.get("tags", []) for c in source.cells), (
        "nbval must see a solution's exceptions")


def test_nbgrader_config_adds_it_after_nbgrader_s_own_steps():
    """nbgrader logs a config file that raises and goes on with its defaults (no hardened grader,
    no tags): the file must load, and its lists must hold what the course adds."""
    from nbgrader.converters import GenerateAssignment
    from traitlets.config import Config
    config = Config()
    namespace = {"get_config": lambda: config, "__file__": str(ROOT / "nbgrader_config.py")}
    exec(compile((ROOT / "nbgrader_config.py").read_text(), "nbgrader_config.py", "exec"),
         namespace)
    steps = config.GenerateAssignment.preprocessors
    assert (steps[:-1] == GenerateAssignment.class_traits()["preprocessors"].default()
            and steps[-1] is RunAllPastTests)
