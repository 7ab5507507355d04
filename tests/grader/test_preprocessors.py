"""The grading pipeline, end to end, through nbgrader's real CLI and gradebook.

In a scratch course directory (a copy of solutions/ and nbgrader_config.py): the release made
from solutions/ equals the committed notebooks/; a solved submission scores full marks with no
stderr in graded cells; the untouched student notebook scores 0; each wrong answer in tests/mutants/
loses points in its own test cell, and only there, with feedback that names the mistake
(tests/mutants/LESSON.json; wrong answers to different exercises share a submission).
"""

import html
import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest

from course_utils.authoring import nbgrader_cli
from course_utils.grader.capabilities import measures_memory

ROOT = Path(__file__).resolve().parents[2]
LESSONS = nbgrader_cli.lessons(ROOT)
GRADED = nbgrader_cli.lessons(ROOT, graded=True)  # 00-start-here is released but has no exercises


def mutants(name: str) -> list[dict]:
    """Wrong answers a learner could plausibly write, from tests/mutants/NAME.json: each names the
    submission (student), the solution cell, a text in its solution, the replacement, words the
    feedback must contain.
    A cheat gives its whole answer ("source") instead of old/new; "needs": "memory" marks one that
    only the grader's kernel-measured peak memory catches (grading as root with a memory cgroup)."""
    path = ROOT / "tests" / "mutants" / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else []


MUTANTS = {name: mutants(name) for name in GRADED}


def alternates(name: str) -> list[dict]:
    """Second, differently written correct answers, from tests/alternates/NAME.json: each names the
    solution cell ("cell"), its whole new source ("source") and how it differs ("note")."""
    path = ROOT / "tests" / "alternates" / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else []


ALTERNATES = {name: alternates(name) for name in GRADED}


def alternate_rounds(alts: list[dict]) -> list[list[dict]]:
    """Second correct answers grouped into submissions: round k holds each exercise's k-th one, so an
    exercise with two (a docstring that allows two readings) has both graded."""
    rounds: list[list[dict]] = []
    for a in alts:
        k = next((i for i, group in enumerate(rounds) if all(b["cell"] != a["cell"] for b in group)), len(rounds))
        if k == len(rounds):
            rounds.append([])
        rounds[k].append(a)
    return rounds

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """course(name) -> a scratch course directory in which lesson `name` alone is released, made
    once when a test first asks for it (so `pytest -k 02-local` releases and grades lesson 02 only)."""
    made = {}

    def make(name):
        if name not in made:
            made[name] = nbgrader_cli.scratch_course(ROOT, tmp_path_factory.mktemp(name), [name])
        return made[name]

    return make


def grade_lesson(where, name):
    """Submit the solved and untouched notebooks and the mutant rounds of one lesson, autograde
    them, generate feedback. Returns (scores, cell scores, feedback, rounds), keyed by student."""
    solved = nbgrader_cli.solved(where, name)
    nbgrader_cli.submit(where, "solved", name, solved)
    nbgrader_cli.submit(where, "untouched", name, nbgrader_cli.untouched(where, name))
    rounds = nbgrader_cli.mutant_rounds(MUTANTS[name])
    for r, group in enumerate(rounds):
        nb = solved
        for m in group:
            nb = (nbgrader_cli.with_answer(nb, m["cell"], m["source"]) if "source" in m
                  else nbgrader_cli.replace_solution(nb, m["cell"], m["old"], m["new"]))
        nbgrader_cli.submit(where, f"mutants{r}", name, nb)
    for k, group in enumerate(alternate_rounds(ALTERNATES[name])):
        nb = solved
        for a in group:
            nb = nbgrader_cli.with_answer(nb, a["cell"], a["source"])
        nbgrader_cli.submit(where, f"alternate{k}", name, nb)
    nbgrader_cli.autograde(where, name)
    return (nbgrader_cli.scores(where, name), nbgrader_cli.cell_scores(where, name), nbgrader_cli.feedback(where, name), rounds)


@pytest.fixture(scope="module")
def graded(request, course):
    """graded(name) -> what grade_lesson returns. The first call grades every lesson that the
    selected tests need, two lessons at a time (nbgrader runs in subprocesses), so
    `pytest -k 02-local` grades lesson 02 only."""
    wanted = sorted({item.callspec.params["name"] for item in request.session.items
                     if getattr(item, "module", None) is request.module and hasattr(item, "callspec") and "name" in item.callspec.params
                     and "graded" in item.fixturenames})
    done = {}

    def grade(name):
        if name not in done:
            todo = [n for n in wanted if n not in done] or [name]
            for n in todo:
                course(n)  # make the scratch courses before the threads start
            with ThreadPoolExecutor(max_workers=max(1, min(2, os.cpu_count() or 1))) as pool:
                done.update(zip(todo, pool.map(lambda n: grade_lesson(course(n), n), todo)))
        return done[name]

    return grade


@pytest.mark.parametrize("name", LESSONS)
def test_committed_release_matches_solutions(course, name):
    made = json.loads(nbgrader_cli.notebook_path(course(name), "notebooks", name).read_text())
    committed_path = nbgrader_cli.notebook_path(ROOT, "notebooks", name)
    assert committed_path.exists(), f"{committed_path} is missing: run `bash course.sh release {name}`"
    committed = json.loads(committed_path.read_text())
    assert made == committed, f"notebooks/{name} is out of date with solutions/{name}: run `bash course.sh release {name}`"


@pytest.mark.parametrize("name", GRADED)
def test_solution_scores_full_marks(graded, name):
    scores, *_ = graded(name)
    score, total = scores["solved"]
    assert total > 0
    assert score == total, f"the solved notebook of {name} scored {score}/{total}"


@pytest.mark.parametrize("name", GRADED)
def test_graded_cells_of_the_solution_write_nothing_to_stderr(graded, course, name):
    graded(name)
    nb = nbformat.read(course(name) / "autograded" / "solved" / name / f"{name}.ipynb", as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade"):
            for out in cell.get("outputs", []):
                assert not (out.output_type == "stream" and out.name == "stderr"), \
                    f"graded cell {cell.metadata.nbgrader.grade_id} wrote to stderr: {out.text[:300]}"
                assert out.output_type != "error", f"graded cell {cell.metadata.nbgrader.grade_id} raised {out.ename}"


@pytest.mark.parametrize("name", GRADED)
def test_untouched_student_notebook_scores_zero(graded, name):
    scores, _, feedback, _ = graded(name)
    assert scores["untouched"][0] == 0
    assert "Exercise not attempted yet" in feedback["untouched"]


def exercises(name: str) -> set[str]:
    return {c.metadata.nbgrader.grade_id for c in nbformat.read(nbgrader_cli.notebook_path(ROOT, "solutions", name), 4).cells
            if c.metadata.get("nbgrader", {}).get("solution")}


@pytest.mark.parametrize("name", GRADED)
def test_every_exercise_has_two_mutants(name):
    count = {e: sum(m["cell"] == e for m in MUTANTS[name]) for e in exercises(name)}
    few = {e: n for e, n in count.items() if n < 2}
    assert not few, f"exercises of {name} with fewer than two wrong answers in tests/mutants/{name}.json: {few}"


@pytest.mark.parametrize("name", GRADED)
def test_every_exercise_has_a_second_correct_solution(name):
    missing = exercises(name) - {a["cell"] for a in ALTERNATES[name]}
    assert not missing, f"exercises of {name} with no second correct answer in tests/alternates/{name}.json: {sorted(missing)}"


@pytest.mark.parametrize("name", GRADED)
def test_second_correct_solution_scores_full_marks(graded, name):
    if not ALTERNATES[name]:
        pytest.fail(f"no tests/alternates/{name}.json")
    scores, cells, *_ = graded(name)
    rounds = [student for student in cells if student.startswith("alternate")]
    assert len(rounds) == len(alternate_rounds(ALTERNATES[name])), f"{name}: not every round of alternates was graded"
    wrong = {(r, c): v for r in rounds for c, v in cells[r].items() if v[0] < v[1]}
    assert not wrong, f"the second correct answers of {name} lost points: {wrong}"


@pytest.mark.parametrize("name, mutant", [(n, m) for n in GRADED for m in MUTANTS[n]],
                         ids=[f"{n}-{m['student']}" for n in GRADED for m in MUTANTS[n]])
def test_wrong_answer_loses_points_and_feedback_names_the_mistake(graded, course, name, mutant):
    if mutant.get("needs") == "memory" and not measures_memory():
        pytest.skip("only the kernel-measured peak memory catches this cheat: grade as root with a memory cgroup")
    scores, cells, feedback, rounds = graded(name)
    r = next(i for i, group in enumerate(rounds) if mutant in group)
    student, grade_id, words = f"mutants{r}", mutant["cell"], mutant["feedback"]
    score, total = cells[student][grade_id + "_test"]
    assert score < total, f"{mutant['student']}: a wrong {grade_id} still scored {score}/{total} in its test cell"
    # The words must be in the test cell's outcome (the visible test code also shows in the feedback).
    nb = nbformat.read(course(name) / "autograded" / student / name / f"{name}.ipynb", as_version=4)
    test_cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id + "_test")
    outcome = " ".join(o.get("evalue", "") for o in test_cell.outputs if o.output_type == "error")
    assert words in outcome, f"{mutant['student']}: the outcome of {grade_id}_test does not say {words!r}: {outcome}"
    assert html.escape(words, quote=False) in feedback[student] or words in html.unescape(feedback[student])
    # Every other exercise keeps its points, even one that builds on the mutated one (its probe uses
    # a reference copy of the earlier exercise).
    touched = {m["cell"] for m in rounds[r]}
    others = {c: v for c, v in cells[student].items() if c[:-len("_test")] not in touched}
    assert others, "every round must leave an exercise right (nbgrader_cli.mutant_rounds)"
    assert all(s == t for s, t in others.values()), \
        f"{mutant['student']}: exercises with no mistake in this submission lost points: {others}"
