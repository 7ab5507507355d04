"""Every lesson follows the course's rules (see ../shared/course-design.md, "Exercises and grading").

One notebook per lesson at solutions/NN-topic/NN-topic.ipynb; 15-40 cells opening with learning
objectives and closing with a recap that links to the next lesson; the course set-up called;
2-5 exercises, each a solution cell `lNN_name` followed by its test cell `lNN_name_test` with
points and hidden tests; cells whose output nbval compares; no progress bars in graded cells.
"""

import re
from pathlib import Path

import nbformat
import pytest

from course_utils.authoring import nbgrader_cli

ROOT = Path(__file__).resolve().parent.parent
LESSONS = nbgrader_cli.lessons(ROOT, graded=True)  # 00-start-here: tests/test_start_here.py


def load(name):
    return nbformat.read(nbgrader_cli.notebook_path(ROOT, "solutions", name), as_version=4)


def meta(cell):
    return cell.metadata.get("nbgrader", {})


@pytest.mark.parametrize("name", LESSONS)
def test_shape_of_a_lesson(name):
    nb = load(name)
    assert 15 <= len(nb.cells) <= 40, f"{name} has {len(nb.cells)} cells; a lesson has 15-40"
    first, last = nb.cells[0].source, nb.cells[-1].source
    assert first.startswith("# Lesson " + name[:2]), "the first cell is the lesson's title"
    assert "By the end of this lesson you can" in first, "the first cell states the learning objectives"
    assert "## Recap" in last, "the last cell is the recap"
    num = int(name[:2])
    if num < 8:
        assert re.search(rf"\.\./{num + 1:02d}-[a-z0-9-]+/{num + 1:02d}-[a-z0-9-]+\.ipynb", last), \
            "the recap links to the next lesson"
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "course_utils.setup(seed=" in code, "the lesson calls course_utils.setup(seed=...)"


@pytest.mark.parametrize("name", LESSONS)
def test_exercises_follow_the_rules(name):
    nb = load(name)
    prefix = f"l{name[:2]}_"
    cells = nb.cells
    solutions = [i for i, c in enumerate(cells) if meta(c).get("solution")]
    assert 2 <= len(solutions) <= 5, f"{name} has {len(solutions)} exercises; a lesson has 2-5"
    for i in solutions:
        gid = meta(cells[i])["grade_id"]
        assert re.fullmatch(prefix + r"[a-z0-9_]+", gid), f"grade_id {gid!r} is not readable ({prefix}name)"
        assert "### BEGIN SOLUTION" in cells[i].source and "### END SOLUTION" in cells[i].source
        assert '"""' in cells[i].source, f"{gid}: the exercise function needs a docstring stating types and shapes"
        test = cells[i + 1] if i + 1 < len(cells) else None
        assert test is not None and meta(test).get("grade") and meta(test)["grade_id"] == gid + "_test", \
            f"{gid} must be followed by its test cell {gid}_test"
        assert meta(test).get("points", 0) > 0 and meta(test).get("locked")
        assert "### BEGIN HIDDEN TESTS" in test.source and "### END HIDDEN TESTS" in test.source, \
            f"{gid}_test has no hidden tests"
        visible = test.source.split("### BEGIN HIDDEN TESTS")[0]
        assert re.search(r"\bcheck_\w+\(|\bassert\b", visible), f"{gid}_test has no visible check for Validate"
    for c in cells:
        if meta(c).get("grade") or meta(c).get("solution"):
            assert "tqdm" not in c.source, f"{meta(c)['grade_id']}: no progress bars in graded cells (stderr)"


@pytest.mark.parametrize("name", LESSONS)
def test_some_outputs_are_compared_by_nbval(name):
    nb = load(name)
    tagged = [c for c in nb.cells if "nbval-check-output" in c.metadata.get("tags", [])]
    assert tagged, f"{name}: tag the cells with deterministic output nbval-check-output"
    for c in tagged:
        assert c.get("outputs"), f"{name}: cell {c.id} is tagged for nbval but has no saved output; run course.sh release"


@pytest.mark.parametrize("name", LESSONS)
def test_hidden_tests_are_judged_outside_the_learners_process(name):
    """Every test cell's hidden part is probe / ### BEGIN EXPECTED (expect, judge) ### END EXPECTED /
    grade(probe, expect, judge), so course_utils.grader.grade can decide it outside the sandbox."""
    from course_utils.grader import lessonfile
    
    lesson = lessonfile.load_lesson(nbgrader_cli.notebook_path(ROOT, "solutions", name))
    for test in lesson.tests:
        hidden = "\n".join(test.hidden)
        assert "def probe(" in hidden, f"{test.gid}: the hidden tests define no probe()"
        assert hidden.count("### BEGIN EXPECTED") == 1 and hidden.count("### END EXPECTED") == 1, \
            f"{test.gid}: the hidden tests need one ### BEGIN EXPECTED ... ### END EXPECTED block"
        assert hidden.rstrip().endswith("grade(probe, expect, judge)"), \
            f"{test.gid}: the hidden tests end with grade(probe, expect, judge)"
        sent = lessonfile.learner_version(test.source)
        assert "def expect(" not in sent and "def judge(" not in sent, \
            f"{test.gid}: expect() and judge() must be inside the EXPECTED block"
