"""Every lesson follows the course's rules (see ../shared/course-design.md, "Exercises and
grading").

One notebook per lesson at solutions/NN-topic/NN-topic.ipynb; 15-40 cells opening with learning
objectives and closing with a recap that links to the next lesson; the course set-up called;
2-5 exercises, each a solution cell `lNN_name` followed by its test cell `lNN_name_test` with
points and hidden tests; at least one written answer (a markdown cell graded by hand, 1 or 2 points,
right after the question that asks it, with a model answer and a mark scheme); the intro's points
add up; cells whose output nbval compares; no progress bars in graded cells.
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


def is_written(cell):
    """nbgrader's manually graded answer: a markdown cell with grade and solution set."""
    return (cell.cell_type == "markdown" and bool(meta(cell).get("solution"))
            and bool(meta(cell).get("grade")))


def is_written_question(cell):
    return cell.cell_type == "markdown" and cell.source.startswith("### Written answer (")


@pytest.mark.parametrize("name", LESSONS)
def test_shape_of_a_lesson(name):
    nb = load(name)
    cells = [c for c in nb.cells if not is_written(c) and not is_written_question(c)]
    assert 15 <= len(cells) <= 40, (f"{name} has {len(cells)} cells besides its written answers; "
                                    "a lesson has 15-40")
    first, last = nb.cells[0].source, nb.cells[-1].source
    assert first.startswith("# Lesson " + name[:2]), "the first cell is the lesson's title"
    assert "By the end of this lesson you can" in first, (
        "the first cell states the learning objectives")
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
    solutions = [i for i, c in enumerate(cells)
                 if meta(c).get("solution") and c.cell_type == "code"]
    assert 2 <= len(solutions) <= 5, f"{name} has {len(solutions)} exercises; a lesson has 2-5"
    for i in solutions:
        gid = meta(cells[i])["grade_id"]
        assert re.fullmatch(prefix + r"[a-z0-9_]+", gid), (
            f"grade_id {gid!r} is not readable ({prefix}name)")
        assert "### BEGIN SOLUTION" in cells[i].source and "### END SOLUTION" in cells[i].source
        assert '"""' in cells[i].source, (f"{gid}: the exercise function needs a docstring stating "
                                          "types and shapes")
        test = cells[i + 1] if i + 1 < len(cells) else None
        assert (test is not None and meta(test).get("grade")
                and meta(test)["grade_id"] == gid + "_test"), \
            f"{gid} must be followed by its test cell {gid}_test"
        assert meta(test).get("points", 0) > 0 and meta(test).get("locked")
        assert "### BEGIN HIDDEN TESTS" in test.source and "### END HIDDEN TESTS" in test.source, \
            f"{gid}_test has no hidden tests"
        visible = test.source.split("### BEGIN HIDDEN TESTS")[0]
        assert re.search(r"\bcheck_\w+\(|\bassert\b|\.visible\(", visible), (
            f"{gid}_test has no visible check for Validate")
    for c in cells:
        if meta(c).get("grade") or meta(c).get("solution"):
            assert "tqdm" not in c.source, (f"{meta(c)['grade_id']}: no progress bars in graded "
                                            "cells (stderr)")


@pytest.mark.parametrize("name", LESSONS)
def test_written_answers_follow_the_rules(name):
    """Each lesson asks at least one question to answer in words, graded by hand in Formgrader: a
    question cell "### Written answer (N points, graded by hand): ..." and right after it the answer
    cell (markdown, grade and solution, not locked, N = 1 or 2 points, grade id lNN_why_...) holding
    a model answer and the mark scheme, which the release replaces with nbgrader's text stub."""
    nb = load(name)
    written = [i for i, c in enumerate(nb.cells) if is_written(c)]
    assert written, f"{name} has no written answer (nbgrader's manually graded answer)"
    for i in written:
        cell, question = nb.cells[i], nb.cells[i - 1]
        gid, points = meta(cell)["grade_id"], meta(cell).get("points", 0)
        assert re.fullmatch(rf"l{name[:2]}_why_[a-z0-9_]+", gid), (
            f"grade_id {gid!r} is not l{name[:2]}_why_name")
        assert points in (1, 2) and not meta(cell).get("locked"), (
            f"{gid}: 1 or 2 points, not locked")
        assert question.source.startswith(f"### Written answer ({points} points, "
                                          "graded by hand): "), \
            f"{gid} must follow its question, which says its points"
        assert (cell.source.startswith("**Model answer.** ")
                and f"**Mark scheme ({points} points).** " in cell.source), \
            f"{gid}: a model answer, then the mark scheme for the grader"
        assert "### BEGIN SOLUTION" not in cell.source, (
            f"{gid}: the whole cell is the answer (the release shows the stub)")
    released = nbformat.read(nbgrader_cli.notebook_path(ROOT, "notebooks", name), as_version=4)
    stubs = {meta(c)["grade_id"]: c.source for c in released.cells if is_written(c)}
    assert stubs == {meta(nb.cells[i])["grade_id"]: "YOUR ANSWER HERE" for i in written}, \
        (f"notebooks/{name} must show nbgrader's text stub in each written answer: run "
         f"`bash course.sh release {name}`")


@pytest.mark.parametrize("name", LESSONS)
def test_the_intro_states_the_points(name):
    """The first cell says how many exercises and written answers there are, and their points."""
    nb = load(name)
    tests = [c for c in nb.cells if meta(c).get("grade") and c.cell_type == "code"]
    written = [c for c in nb.cells if is_written(c)]
    n_written, p_written = len(written), sum(meta(c)["points"] for c in written)
    want = (f"There are **{len(tests)} graded exercises** "
            f"({sum(meta(c)['points'] for c in tests):g} points) and **{n_written} written "
            f"answer{'s' if n_written > 1 else ''}** ({p_written:g} points, graded by hand).")
    assert want in nb.cells[0].source, f"{name}: the intro should say: {want}"


@pytest.mark.parametrize("name", LESSONS)
def test_some_outputs_are_compared_by_nbval(name):
    nb = load(name)
    tagged = [c for c in nb.cells if "nbval-check-output" in c.metadata.get("tags", [])]
    assert tagged, f"{name}: tag the cells with deterministic output nbval-check-output"
    for c in tagged:
        assert c.get("outputs"), (f"{name}: cell {c.id} is tagged for nbval but has no saved "
                                  "output; run course.sh release")


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
        vis_lines = [line for line in visible.strip().splitlines() if line.strip()]
        assert len(vis_lines) <= 8, (f"{test.gid}: the visible part has {len(vis_lines)} lines; "
                                     "at most 8 that call the check")
        calls = [CHECK_CALL.match(line) for line in test.source.splitlines()]
        calls = [(m.group(1), m.group(2), m.group(3)) for m in calls if m]
        kinds = [k for _, k, _ in calls]
        assert kinds == ["visible", "hidden"], (f"{test.gid}: one CHECK.visible(...) then one "
                                                f"CHECK.hidden(...), got {kinds}")
        assert calls[0][0] == calls[1][0] and calls[0][2] == calls[1][2], \
            (f"{test.gid}: the visible test and the hidden test must run the same check on "
             "the same answer")
        assert hidden.rstrip().splitlines()[-1].startswith(f"{calls[1][0]}.hidden("), \
            f"{test.gid}: the hidden tests end with {calls[1][0]}.hidden(...)"
        assert hidden.count("### BEGIN EXPECTED") == 1 and hidden.count("### END EXPECTED") == 1, \
            f"{test.gid}: the hidden tests need one ### BEGIN EXPECTED ... ### END EXPECTED block"
        for pattern, what in ((r"\bassert\b", "an assert"), (r"\bcheck_\w+\(", "a check_* call"),
                              (r"\bdef judge\(", "a judge of its own"),
                              (r"\bdef probe\(", "a probe of its own"),
                              (r"\bAssertionError\b", "an AssertionError")):
            assert not re.search(pattern, test.source), \
                (f"{test.gid}: the cell writes {what}; "
                 "comparisons belong in course_utils.lessonchecks")
        sent = lessonfile.learner_version(test.source)
        assert "def expect(" not in sent, f"{test.gid}: expect() must be inside the EXPECTED block"
        module = importlib.import_module(f"course_utils.lessonchecks.l{name[:2]}")
        assert isinstance(getattr(module, calls[0][0], None), judging.Check), \
            f"{test.gid}: {calls[0][0]} is not a Check of course_utils.lessonchecks.l{name[:2]}"


@pytest.mark.parametrize("name", LESSONS)
def test_hidden_tests_are_judged_outside_the_learners_process(name):
    """Every test cell's hidden part keeps expected values in one ### BEGIN EXPECTED ... ### END
    EXPECTED block and ends in a call that grades (grade(probe, expect, judge), or
    CHECK.hidden(...), which calls it), so course_utils.grader.grade can decide it outside the
    sandbox."""
    from course_utils.grader import lessonfile

    lesson = lessonfile.load_lesson(nbgrader_cli.notebook_path(ROOT, "solutions", name))
    for test in lesson.tests:
        hidden = "\n".join(test.hidden)
        assert hidden.count("### BEGIN EXPECTED") == 1 and hidden.count("### END EXPECTED") == 1, \
            f"{test.gid}: the hidden tests need one ### BEGIN EXPECTED ... ### END EXPECTED block"
        last = hidden.rstrip().splitlines()[-1]
        assert (last == "grade(probe, expect, judge)"
                or re.match(r"[A-Z][A-Z0-9_]*\.hidden\(\w+, \w+, expect\)$", last)), \
            (f"{test.gid}: the hidden tests end with grade(probe, expect, judge) or "
             "CHECK.hidden(answer, cases, expect)")
        sent = lessonfile.learner_version(test.source)
        assert "def expect(" not in sent and "def judge(" not in sent, \
            f"{test.gid}: expect() and judge() must be inside the EXPECTED block"
