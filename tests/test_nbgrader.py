"""The grading pipeline, end to end, through nbgrader's real CLI and gradebook.

In a scratch course directory (a copy of solutions/ and nbgrader_config.py): the release made
from solutions/ equals the committed notebooks/; a solved submission scores full marks with no
stderr in graded cells; the untouched student notebook scores 0; each wrong answer in tests/mutants/
loses points and its feedback names the mistake (tests/mutants/LESSON.json).
"""

import html
import json
from pathlib import Path

import nbformat
import pytest

from course_utils import grading

ROOT = Path(__file__).resolve().parent.parent
LESSONS = grading.lessons(ROOT)


def mutants(name: str) -> list[dict]:
    """Wrong answers a learner could plausibly write, from tests/mutants/NAME.json: each names the
    submission (student), the solution cell, a text in its solution, the replacement, and words
    the feedback must contain."""
    path = ROOT / "tests" / "mutants" / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else []


MUTANTS = {name: mutants(name) for name in LESSONS}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """course(name) -> a scratch course directory in which lesson `name` alone is released, made
    once when a test first asks for it (so `pytest -k 02-local` releases and grades lesson 02 only)."""
    made = {}

    def make(name):
        if name not in made:
            made[name] = grading.scratch_course(ROOT, tmp_path_factory.mktemp(name), [name])
        return made[name]

    return make


@pytest.fixture(scope="module")
def graded(course):
    """graded(name) -> (scores, feedback): submit the solved, untouched and mutant notebooks of
    lesson `name`, autograde them and generate feedback, once."""
    done = {}

    def grade(name):
        if name not in done:
            where = course(name)
            solved = grading.solved(where, name)
            grading.submit(where, "solved", name, solved)
            grading.submit(where, "untouched", name, grading.untouched(where, name))
            for m in MUTANTS[name]:
                grading.submit(where, m["student"], name, grading.replace_solution(solved, m["cell"], m["old"], m["new"]))
            grading.autograde(where, name)
            done[name] = (grading.scores(where, name), grading.feedback(where, name))
        return done[name]

    return grade


@pytest.mark.parametrize("name", LESSONS)
def test_committed_release_matches_solutions(course, name):
    made = json.loads(grading.notebook_path(course(name), "notebooks", name).read_text())
    committed_path = grading.notebook_path(ROOT, "notebooks", name)
    assert committed_path.exists(), f"{committed_path} is missing: run `bash course.sh release {name}`"
    committed = json.loads(committed_path.read_text())
    assert made == committed, f"notebooks/{name} is out of date with solutions/{name}: run `bash course.sh release {name}`"


@pytest.mark.parametrize("name", LESSONS)
def test_solution_scores_full_marks(graded, name):
    scores, _ = graded(name)
    score, total = scores["solved"]
    assert total > 0
    assert score == total, f"the solved notebook of {name} scored {score}/{total}"


@pytest.mark.parametrize("name", LESSONS)
def test_graded_cells_of_the_solution_write_nothing_to_stderr(graded, course, name):
    graded(name)
    nb = nbformat.read(course(name) / "autograded" / "solved" / name / f"{name}.ipynb", as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade"):
            for out in cell.get("outputs", []):
                assert not (out.output_type == "stream" and out.name == "stderr"), \
                    f"graded cell {cell.metadata.nbgrader.grade_id} wrote to stderr: {out.text[:300]}"
                assert out.output_type != "error", f"graded cell {cell.metadata.nbgrader.grade_id} raised {out.ename}"


@pytest.mark.parametrize("name", LESSONS)
def test_untouched_student_notebook_scores_zero(graded, name):
    scores, feedback = graded(name)
    assert scores["untouched"][0] == 0
    assert "Exercise not attempted yet" in feedback["untouched"]


@pytest.mark.parametrize("name", LESSONS)
def test_every_lesson_has_mutants(name):
    found = MUTANTS[name]
    assert len(found) >= 2, f"add wrong-answer mutants for {name} to tests/mutants/{name}.json"
    exercises = {c.metadata.nbgrader.grade_id for c in nbformat.read(grading.notebook_path(ROOT, "solutions", name), 4).cells
                 if c.metadata.get("nbgrader", {}).get("solution")}
    untested = exercises - {m["cell"] for m in found}
    assert not untested, f"exercises of {name} with no mutant in tests/mutants/{name}.json: {sorted(untested)}"


@pytest.mark.parametrize("name, mutant", [(n, m) for n in LESSONS for m in MUTANTS[n]],
                         ids=[f"{n}-{m['student']}" for n in LESSONS for m in MUTANTS[n]])
def test_wrong_answer_loses_points_and_feedback_names_the_mistake(graded, name, mutant):
    student, grade_id, words = mutant["student"], mutant["cell"], mutant["feedback"]
    scores, feedback = graded(name)
    score, total = scores[student]
    assert score < total, f"{student}: a wrong {grade_id} still scored {score}/{total}"
    assert score > 0, f"{student}: one wrong exercise should not zero the other exercises ({score}/{total})"
    assert words in html.unescape(feedback[student]), f"{student}: the feedback does not say {words!r}"
