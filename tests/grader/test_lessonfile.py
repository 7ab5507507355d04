"""course_utils.grader.lessonfile: the instructor's notebook read into lesson, answer and test
cells; a submission's answers read without ever raising; the EXPECTED block cut from what learners
run."""

import json
from pathlib import Path

import nbformat
import pytest

from course_utils.grader.lessonfile import (MAX_SUBMISSION_BYTES, learner_version, load_lesson,
                                            read_answers, read_written)

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "99-fixture" / "99-fixture.ipynb"


def code(source, **nbgrader):
    cell = nbformat.v4.new_code_cell(source)
    if nbgrader:
        cell.metadata["nbgrader"] = nbgrader
    return cell


def notebook(*cells) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = list(cells)
    return nb


def test_the_fixture_lesson_has_its_answers_and_tests_in_order():
    lesson = load_lesson(FIXTURE)
    assert lesson.name == "99-fixture"
    assert [c.gid for c in lesson.answers] == ["fx_scale", "fx_grad", "fx_count"]
    assert [(t.gid, t.points, t.exercise) for t in lesson.tests] == [
        ("fx_scale_test", 2.0, "fx_scale"), ("fx_grad_test", 2.0, "fx_grad"),
        ("fx_count_test", 1.0, "fx_count")]
    assert all("### BEGIN SOLUTION" not in c.source and "### END SOLUTION" not in c.source
               for c in lesson.answers)
    assert all(t.hidden for t in lesson.tests), "every test cell of the fixture has hidden lines"


def test_the_fixture_is_what_make_fixture_writes():
    """tests/fixtures/99-fixture is made by tests/fixtures/make_fixture.py: the committed notebook
    is its build(), cell by cell (ids aside), so a change to the script is a change to the
    fixture."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "make_fixture", ROOT / "tests" / "fixtures" / "make_fixture.py")
    make_fixture = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_fixture)
    built, committed = make_fixture.build(), nbformat.read(FIXTURE, as_version=4)
    strip = lambda nb: [{k: v for k, v in c.items() if k != "id"} for c in nb.cells]
    assert strip(built) == strip(committed), "run python tests/fixtures/make_fixture.py"
    assert built.metadata == committed.metadata


def test_a_malformed_instructor_notebook_is_refused(tmp_path):
    both = notebook(code("x = 1", solution=True, grade=True, grade_id="a", points=1))
    first = notebook(code("assert True", grade=True, grade_id="t", points=1),
                     code("x = 1", solution=True, grade_id="a"))
    for nb, words in ((both, "both an answer and a test"), (first, "comes before any answer")):
        path = tmp_path / "bad.ipynb"
        nbformat.write(nb, path)
        with pytest.raises(ValueError, match=words):
            load_lesson(path)


def test_learners_never_get_the_expected_block():
    source = ("def probe():\n    return 1\n    ### BEGIN EXPECTED\n    want = 42\n"
              "    ### END EXPECTED\ngrade(probe, expect, judge)")
    cut = learner_version(source)
    assert ("42" not in cut and "expect = judge = None" in cut
            and "grade(probe, expect, judge)" in cut)
    assert learner_version("x = 1") == "x = 1"
    with pytest.raises(ValueError, match="without ### END EXPECTED"):
        learner_version("### BEGIN EXPECTED\nwant = 1")


def test_answers_are_read_by_grade_id_and_oddities_are_noted():
    nb = notebook(code("a = 1", grade_id="a", solution=True),
                  code("a = 2", grade_id="a", solution=True),
                  code("c = 3", grade_id="other", solution=True),
                  code(["b ", "= 2"], grade_id="b", solution=True))
    data = json.loads(nbformat.writes(nb))
    data["cells"][3]["source"] = ["b ", "= 2"]
    answers, notes = read_answers(json.dumps(data), {"a", "b", "d"})
    assert answers == {"a": "a = 1", "b": "b = 2"}, (
        "first copy wins; unknown ids ignored; list sources joined")
    assert any("a appears more than once" in n for n in notes)
    assert any("d is missing" in n for n in notes)


@pytest.mark.parametrize("data, words", [
    (b"", "empty"),
    (b"{\"cells\": [", "truncated JSON"),
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    (b"{\"cells\": 3}", "no list of cells"),
    (b"\xff\xfe", "not a readable notebook"),
    (b" " * (MAX_SUBMISSION_BYTES + 1), "over 50 MB"),
])
def test_a_bad_file_gives_no_answers_and_says_why(data, words):
    answers, notes = read_answers(data, {"a"})
    assert answers == {} and len(notes) == 1 and words in notes[0], notes


def test_a_source_that_is_not_text_is_not_attempted():
    data = {"cells": [{"cell_type": "code", "source": {"x": 1},
                       "metadata": {"nbgrader": {"grade_id": "a"}}}]}
    answers, notes = read_answers(data, {"a"})
    assert answers == {} and any("not text" in n for n in notes)


def markdown(source, **nbgrader):
    cell = nbformat.v4.new_markdown_cell(source)
    if nbgrader:
        cell.metadata["nbgrader"] = nbgrader
    return cell


def test_written_answers_are_read_apart_from_the_code_by_grade_id_and_type(tmp_path):
    """A written answer (markdown, grade and solution) is no code cell of the lesson: the grader
    never runs it; its text is read from a markdown cell of its grade id only, and a code answer's
    text only from a code cell."""
    source = tmp_path / "lesson.ipynb"
    nbformat.write(notebook(code("x = 1", grade_id="a", solution=True),
                            code("assert x", grade_id="a_test", grade=True, points=1),
                            markdown("Because.", grade_id="why", grade=True, solution=True,
                                     points=2)), source)
    lesson = load_lesson(source)
    assert [c.kind for c in lesson.cells] == ["answer", "test"]
    assert [(w.gid, w.points, w.source) for w in lesson.written] == [("why", 2.0, "Because.")]
    submitted = nbformat.writes(notebook(markdown("x = 2", grade_id="a", solution=True),
                                         code("x = 3", grade_id="a", solution=True),
                                         code("print('run me')", grade_id="why", solution=True),
                                         markdown("My words.", grade_id="why")))
    assert read_answers(submitted, lesson)[0] == {"a": "x = 3"}
    assert read_written(submitted, lesson) == ({"why": "My words."}, [])
    answers, notes = read_written(nbformat.writes(notebook(code("x = 3", grade_id="a"))), lesson)
    assert answers == {} and notes == [
        "answer cell why is missing from the submission; graded as not attempted"]
