"""Every lesson follows the course's rules (see ../shared/course-design.md, "Exercises and grading").

One notebook per lesson at solutions/NN-topic/NN-topic.ipynb; 15-40 cells opening with learning
objectives and closing with a recap that links to the next lesson; the course set-up called;
2-5 exercises, each a solution cell `lNN_name` followed by its test cell `lNN_name_test` with
points and hidden tests; cells whose output nbval compares; no progress bars in graded cells.
"""

import importlib
import re
from pathlib import Path

import nbformat
import pytest

from course_utils import judging
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
        assert re.search(r"\bcheck_\w+\(|\bassert\b|\.visible\(", visible), f"{gid}_test has no visible check for Validate"
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


CHECK_CALL = re.compile(r"^([A-Z][A-Z0-9_]*)\.(visible|hidden)\((\w+)\b")


@pytest.mark.parametrize("name", LESSONS)
def test_each_check_is_written_once(name):
    """A test cell only names its cases: its visible part is at most 8 lines ending in
    CHECK.visible(answer, cases, want); its hidden part gives cases, an EXPECTED block with expect()
    alone, and ends in CHECK.hidden(answer, cases, expect) with the same CHECK (a
    course_utils.lessonchecks Check). No comparison is written in the cell: no assert, no check_*
    call, no judge() of its own, so Validate and the grader cannot apply different rules."""
    from course_utils.grader import lessonfile

    lesson = lessonfile.load_lesson(nbgrader_cli.notebook_path(ROOT, "solutions", name))
    for test in lesson.tests:
        visible, hidden = test.source.split("### BEGIN HIDDEN TESTS")
        hidden = hidden.split("### END HIDDEN TESTS")[0]
        vis_lines = [l for l in visible.strip().splitlines() if l.strip()]
        assert len(vis_lines) <= 8, f"{test.gid}: the visible part has {len(vis_lines)} lines; at most 8 that call the check"
        calls = [CHECK_CALL.match(l) for l in test.source.splitlines()]
        calls = [(m.group(1), m.group(2), m.group(3)) for m in calls if m]
        kinds = [k for _, k, _ in calls]
        assert kinds == ["visible", "hidden"], f"{test.gid}: one CHECK.visible(...) then one CHECK.hidden(...), got {kinds}"
        assert calls[0][0] == calls[1][0] and calls[0][2] == calls[1][2], \
            f"{test.gid}: the visible test and the hidden test must run the same check on the same answer"
        assert hidden.rstrip().splitlines()[-1].startswith(f"{calls[1][0]}.hidden("), \
            f"{test.gid}: the hidden tests end with {calls[1][0]}.hidden(...)"
        assert hidden.count("### BEGIN EXPECTED") == 1 and hidden.count("### END EXPECTED") == 1, \
            f"{test.gid}: the hidden tests need one ### BEGIN EXPECTED ... ### END EXPECTED block"
        for pattern, what in ((r"\bassert\b", "an assert"), (r"\bcheck_\w+\(", "a check_* call"),
                              (r"\bdef judge\(", "a judge of its own"), (r"\bdef probe\(", "a probe of its own"),
                              (r"\bAssertionError\b", "an AssertionError")):
            assert not re.search(pattern, test.source), \
                f"{test.gid}: the cell writes {what}; comparisons belong in course_utils.lessonchecks"
        sent = lessonfile.learner_version(test.source)
        assert "def expect(" not in sent, f"{test.gid}: expect() must be inside the EXPECTED block"
        module = importlib.import_module(f"course_utils.lessonchecks.l{name[:2]}")
        assert isinstance(getattr(module, calls[0][0], None), judging.Check), \
            f"{test.gid}: {calls[0][0]} is not a Check of course_utils.lessonchecks.l{name[:2]}"


@pytest.mark.parametrize("name", LESSONS)
def test_hidden_tests_are_judged_outside_the_learners_process(name):
    """Every test cell's hidden part keeps expected values in one ### BEGIN EXPECTED ... ### END
    EXPECTED block and ends in a call that grades (grade(probe, expect, judge), or CHECK.hidden(...),
    which calls it), so course_utils.grader.grade can decide it outside the sandbox."""
    from course_utils.grader import lessonfile

    lesson = lessonfile.load_lesson(nbgrader_cli.notebook_path(ROOT, "solutions", name))
    for test in lesson.tests:
        hidden = "\n".join(test.hidden)
        assert hidden.count("### BEGIN EXPECTED") == 1 and hidden.count("### END EXPECTED") == 1, \
            f"{test.gid}: the hidden tests need one ### BEGIN EXPECTED ... ### END EXPECTED block"
        last = hidden.rstrip().splitlines()[-1]
        assert last == "grade(probe, expect, judge)" or re.match(r"[A-Z][A-Z0-9_]*\.hidden\(\w+, \w+, expect\)$", last), \
            f"{test.gid}: the hidden tests end with grade(probe, expect, judge) or CHECK.hidden(answer, cases, expect)"
        sent = lessonfile.learner_version(test.source)
        assert "def expect(" not in sent and "def judge(" not in sent, \
            f"{test.gid}: expect() and judge() must be inside the EXPECTED block"
