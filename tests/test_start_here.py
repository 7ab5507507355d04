"""The start-here page (solutions/00-start-here, released to notebooks/ like a lesson): the first
notebook a learner opens. It has no exercises; it runs the set-up checks of course_utils.doctor,
shows how exercises and Validate work, lists the lessons and links to lesson 01."""

import re
from pathlib import Path

import nbformat
import pytest

from course_utils.authoring import nbgrader_cli

ROOT = Path(__file__).resolve().parent.parent
NAME = "00-start-here"
pytestmark = pytest.mark.skipif(not (ROOT / "solutions" / NAME).is_dir(),
                                reason=f"no solutions/{NAME}")


def load(folder="solutions"):
    return nbformat.read(nbgrader_cli.notebook_path(ROOT, folder, NAME), as_version=4)


def test_it_checks_the_set_up_and_has_no_exercises():
    nb = load()
    assert nb.cells[0].source.startswith("# Start here")
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "doctor.report()" in code, "the start-here page runs the set-up checks"
    assert not [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")
                or c.metadata.get("nbgrader", {}).get("grade")]
    assert len(nb.cells) <= 15, "keep the start-here page short"


def test_it_explains_validate_and_links_to_every_lesson():
    text = "\n".join(c.source for c in load().cells if c.cell_type == "markdown")
    assert "Validate" in text and "Exercise not attempted yet" in text
    for name in nbgrader_cli.lessons(ROOT):
        if name != NAME:
            assert f"../{name}/{name}.ipynb" in text, f"the start-here page does not link to {name}"
    assert re.search(r"\*\*Next:\*\* \[Lesson 01[^\]]*\]\(\.\./01-circuits/01-circuits\.ipynb\)",
                     load().cells[-1].source)


def test_it_is_released_for_learners():
    assert nbgrader_cli.notebook_path(ROOT, "notebooks", NAME).exists(), (
        f"run `bash course.sh release {NAME}`")
    released = load("notebooks")
    assert [c.source for c in released.cells] == [c.source for c in load().cells]


def test_its_saved_run_found_everything():
    # solutions/ is committed with its outputs: the maintainer's run of the checks passed
    out = "".join(o.get("text", "") for c in load().cells for o in c.get("outputs", []))
    assert "All set" in out and "Traceback" not in out
