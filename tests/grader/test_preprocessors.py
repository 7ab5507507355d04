"""The grading pipeline, end to end, through nbgrader's real CLI and gradebook.

In a scratch course directory (a copy of solutions/ and nbgrader_config.py): the release made
from solutions/ equals the committed notebooks/; a solved submission scores full marks with no
stderr in graded cells; the untouched student notebook scores 0; the written answers (markdown cells
graded by hand) reach the gradebook as the learner wrote them, "needs manual grade" once answered
and 0 while they hold the stub, with the release's points whatever the submission's metadata says;
the wrong answers of tests/mutants/LESSON.json that the grader must grade itself (its cheats, the
ones only its measured memory catches, and each exercise's first:
course_utils.authoring.wronganswers) lose points in their own test cell, and only there, with
feedback that names the mistake (wrong answers to different exercises share a submission, and the
second correct answers of tests/alternates/LESSON.json ride along in them where an exercise is left
free). Every other wrong answer is judged in one kernel per lesson
(tests/authoring/test_wronganswers.py): a submission costs about 20 s, whatever its answers.
"""

import html
import json
import os
import re
import subprocess
import sys
from xml.etree import ElementTree
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import nbformat
import pytest

from course_utils.authoring import nbgrader_cli, wronganswers
from course_utils.authoring.once import Once
from course_utils.grader.capabilities import measures_memory
from course_utils.grader.worker import Limits

ROOT = Path(__file__).resolve().parents[2]
LESSONS = nbgrader_cli.lessons(ROOT)
GRADED = nbgrader_cli.lessons(ROOT, graded=True)  # 00-start-here is released but has no exercises


# every wrong answer
MUTANTS = {name: wronganswers.load(ROOT, "mutants", name) for name in GRADED}
# those graded here
GRADED_MUTANTS = {name: wronganswers.through_grader(MUTANTS[name]) for name in GRADED}
ALTERNATES = {name: wronganswers.load(ROOT, "alternates", name) for name in GRADED}


def alternate_rounds(alts: list[dict]) -> list[list[dict]]:
    """Second correct answers grouped into submissions: round k holds each exercise's k-th one, so
    an exercise with two (a docstring that allows two readings) has both graded."""
    rounds: list[list[dict]] = []
    for a in alts:
        k = next((i for i, group in enumerate(rounds)
                  if all(b["cell"] != a["cell"] for b in group)), len(rounds))
        if k == len(rounds):
            rounds.append([])
        rounds[k].append(a)
    return rounds

def exercise_functions(name: str) -> dict[str, set[str]]:
    """{solution cell's grade id: the functions it defines} of a lesson."""
    found = {}
    for c in nbformat.read(nbgrader_cli.notebook_path(ROOT, "solutions", name), 4).cells:
        meta = c.metadata.get("nbgrader", {})
        if c.cell_type == "code" and meta.get("solution"):
            found[meta["grade_id"]] = set(re.findall(r"^def (\w+)", c.source, re.M))
    return found


def placed_alternates(rounds: list[list[dict]], alts: list[dict],
                      functions: dict[str, set[str]]) -> \
        tuple[list[list[dict]], list[list[dict]]]:
    """Second correct answers placed in the mutant rounds, so that they cost no submission of their
    own: each goes to the first round that changes neither its exercise nor any exercise whose
    function it names (`functions`: grade id -> the functions it defines; a second answer may build
    on the learner's earlier exercise, called or passed by name), by a wrong answer or another
    second answer; its full marks there also show the round's mistakes cost only their own points.
    Returns (the alternates of each round, the rounds of those that found no place:
    alternate_rounds)."""
    placed: list[list[dict]] = [[] for _ in rounds]
    rest = []
    for a in alts:
        needs = {a["cell"]} | {gid for gid, names in functions.items()
                               if any(re.search(rf"\b{fn}\b", a["source"]) for fn in names)}
        k = next((i for i, group in enumerate(rounds)
                  if not needs & {x["cell"] for x in group + placed[i]}), None)
        (rest if k is None else placed[k]).append(a)
    return placed, alternate_rounds(rest)


pytestmark = pytest.mark.slow

TEXT_STUB = "YOUR ANSWER HERE"   # nbgrader_config.py's ClearSolutions.text_stub


def written_ids(name: str) -> list[str]:
    """The written answers of a lesson: nbgrader's manually graded answers (markdown grade
    cells)."""
    return [c.metadata.nbgrader.grade_id
            for c in nbformat.read(nbgrader_cli.notebook_path(ROOT, "solutions", name), 4).cells
            if c.cell_type == "markdown" and c.metadata.get("nbgrader", {}).get("solution")]


def own_words(grade_id: str) -> str:
    return f"In my own words, for {grade_id}: the gradient is *what it is*.\n\nA second paragraph."


def forge_written(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A learner's written answers in their own words, in cells whose metadata they forged (100
    points, not graded, locked), and one more forged written cell worth 50 points."""
    nb = nbformat.from_dict(nb)
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "markdown" and meta.get("solution"):
            cell.source = own_words(meta["grade_id"])
            meta.update(points=100, grade=False, locked=True, checksum="forged")
    nb.cells.append(nbformat.v4.new_markdown_cell("a bonus answer", metadata={"nbgrader": {
        "grade": True, "solution": True, "locked": False, "points": 50, "grade_id": "forged_bonus",
        "schema_version": 3}}))
    return nb


def selected(request, fixture: str) -> list[str]:
    """The lessons that this module's selected tests using `fixture` ask for (so
    `pytest -k 02-local` releases and grades lesson 02 only)."""
    return sorted({item.callspec.params["name"] for item in request.session.items
                   if getattr(item, "module", None) is request.module and hasattr(item, "callspec")
                   and "name" in item.callspec.params and fixture in item.fixturenames})


AT_ONCE = max(1, min(2, os.cpu_count() or 1))     # lessons released or graded side by side
# torch's threads in each grading's workers: its share of the cores. Workers that each fill both
# cores of a 2-core machine grade two lessons side by side no faster than one after the other; with
# a thread each, a third faster (benchmarks/grading_threads.py; this module's grading fixture:
# 636 s -> 541 s, the whole module 729 s -> 615 s)
THREADS = Limits().shared_by(AT_ONCE).threads


def two_at_a_time(work, names: list[str]) -> list:
    """work(name) for each name, AT_ONCE at a time (nbgrader runs in subprocesses; the machine has 2
    cores)."""
    with ThreadPoolExecutor(max_workers=AT_ONCE) as pool:
        return list(pool.map(work, names))


def submissions(name: str) -> int:
    """How many submissions grade_lesson makes for a lesson: its share of the grading work."""
    rounds = nbgrader_cli.mutant_rounds(GRADED_MUTANTS[name])
    return 2 + len(rounds) + len(
        placed_alternates(rounds, ALTERNATES[name], exercise_functions(name))[1])


@pytest.fixture(scope="module")
def releases(request, tmp_path_factory):
    """Once: name -> a scratch course directory in which lesson `name` alone is released. Every
    lesson the selected tests need is released up front, two at a time."""
    # here: tmp_path_factory is not for threads
    folders = {n: tmp_path_factory.mktemp(n) for n in LESSONS}
    once = Once("releasing", lambda name: nbgrader_cli.scratch_course(ROOT, folders[name], [name]))
    once.ensure(selected(request, "releases"), run_many=two_at_a_time)
    return once


def lesson_of(request) -> str | None:
    """The lesson a test is parametrized with (its "name"), or None."""
    return getattr(getattr(request.node, "callspec", None), "params", {}).get("name")


@pytest.fixture
def course(request, releases):
    """course(name) -> the lesson's scratch course; this test's own lesson is released at its
    set-up, so a release that failed is this test's error (see Once)."""
    if (name := lesson_of(request)) is not None:
        releases(name)
    return releases


class Graded(NamedTuple):
    """What grade_lesson returns, each keyed by student (nbgrader_cli.scores, cell_scores, feedback,
    written), with the mutant rounds (student mutantsR holds rounds[R]) and where each second
    correct answer was graded (student -> its alternates)."""
    scores: dict
    cells: dict
    feedback: dict
    rounds: list
    written: dict
    alternates: dict


FORGED = "mutants0"   # the submission whose written answers are forged (forge_written)


def grade_lesson(where, name) -> Graded:
    """Submit the solved and untouched notebooks and the rounds of the wrong answers graded here
    (with the second correct answers placed in them, or in rounds of their own: placed_alternates),
    autograde them, generate feedback. The first mutant round also forges its written answers."""
    solved = nbgrader_cli.solved(where, name)
    nbgrader_cli.submit(where, "solved", name, solved)
    nbgrader_cli.submit(where, "untouched", name, nbgrader_cli.untouched(where, name))
    rounds = nbgrader_cli.mutant_rounds(GRADED_MUTANTS[name])
    placed, own = placed_alternates(rounds, ALTERNATES[name], exercise_functions(name))
    alternates = {}
    for student, group, alts in [*((f"mutants{r}", g, placed[r]) for r, g in enumerate(rounds)),
                                 *((f"alternate{k}", [], g) for k, g in enumerate(own))]:
        nb = solved
        for m in group:
            nb = (nbgrader_cli.with_answer(nb, m["cell"], m["source"]) if "source" in m
                  else nbgrader_cli.replace_solution(nb, m["cell"], m["old"], m["new"]))
        for a in alts:
            nb = nbgrader_cli.with_answer(nb, a["cell"], a["source"])
        nbgrader_cli.submit(where, student, name, forge_written(nb) if student == FORGED else nb)
        if alts:
            alternates[student] = alts
    nbgrader_cli.autograde(where, name, threads=THREADS)
    return Graded(nbgrader_cli.scores(where, name), nbgrader_cli.cell_scores(where, name),
                  nbgrader_cli.feedback(where, name), rounds,
                  nbgrader_cli.written(where, name), alternates)


@pytest.fixture(scope="module")
def grading(request, releases):
    """Once: name -> what grade_lesson returns. The first call grades every lesson that the selected
    tests need, two at a time, the ones with the most submissions first (so that no long lesson is
    left to run alone at the end)."""
    once = Once("grading", lambda n: grade_lesson(releases(n), n))

    def grade(name):
        todo = sorted({*selected(request, "graded"), name}, key=submissions, reverse=True)
        releases.ensure(todo, run_many=two_at_a_time)   # released before the grading threads start
        releases(name)          # this lesson's release error, if any, is this test's
        # another's error: its own tests
        once.ensure([n for n in todo if n in releases.done], run_many=two_at_a_time)
        return once(name)

    return grade


@pytest.fixture
def graded(request, grading):
    """graded(name) -> what grade_lesson returns; this test's own lesson is graded at its set-up, so
    a grading that failed (or hung) is this test's error, once in full, then named (see Once)."""
    if (name := lesson_of(request)) is not None:
        grading(name)
    return grading


@pytest.mark.parametrize("name", LESSONS)
def test_committed_release_matches_solutions(course, name):
    made = json.loads(nbgrader_cli.notebook_path(course(name), "notebooks", name).read_text())
    committed_path = nbgrader_cli.notebook_path(ROOT, "notebooks", name)
    assert committed_path.exists(), (f"{committed_path} is missing: run "
                                     f"`bash course.sh release {name}`")
    committed = json.loads(committed_path.read_text())
    assert made == committed, (f"notebooks/{name} is out of date with solutions/{name}: run "
                               f"`bash course.sh release {name}`")


def autograded_cell(course, student, name, grade_id):
    nb = nbformat.read(course / "autograded" / student / name / f"{name}.ipynb", as_version=4)
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


@pytest.mark.parametrize("name", GRADED)
def test_solution_scores_full_marks(graded, course, name):
    """Full autograded points; its written answers (the model answers) wait for the instructor."""
    got = graded(name)
    score, total = got.scores["solved"]
    assert total > 0
    assert score == total, f"the solved notebook of {name} scored {score}/{total} autograded points"
    assert written_ids(name), f"{name} has no written answer (a markdown cell graded by hand)"
    assert got.written["solved"] == {gid: (0.0, 2.0, True) for gid in written_ids(name)}, \
        "each written answer of the solution needs a manual grade (its 2 points not given yet)"
    model = {c.metadata.nbgrader.grade_id: c.source
             for c in nbgrader_cli.solved(course(name), name).cells if "nbgrader" in c.metadata}
    for gid in written_ids(name):
        assert autograded_cell(course(name), "solved", name, gid).source == model[gid] != TEXT_STUB


@pytest.mark.parametrize("name", GRADED)
def test_written_answers_reach_the_gradebook_as_written(graded, course, name):
    """A learner's own words reach the autograded notebook (what Formgrader shows) and the feedback;
    forged metadata changes neither the points nor what needs grading, and a forged cell is not
    graded."""
    got = graded(name)
    assert got.written[FORGED] == {gid: (0.0, 2.0, True) for gid in written_ids(name)}
    for gid in written_ids(name):
        cell = autograded_cell(course(name), FORGED, name, gid)
        assert cell.source == own_words(gid)
        assert cell.metadata.nbgrader["points"] == 2 and cell.metadata.nbgrader["grade"] is True
    assert ("In my own words, for" in got.feedback[FORGED]
            and "a bonus answer" not in got.feedback[FORGED])


@pytest.mark.parametrize("name", GRADED)
def test_graded_cells_of_the_solution_write_nothing_to_stderr(graded, course, name):
    graded(name)
    nb = nbformat.read(course(name) / "autograded" / "solved" / name / f"{name}.ipynb",
                       as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade"):
            for out in cell.get("outputs", []):
                assert not (out.output_type == "stream" and out.name == "stderr"), \
                    (f"graded cell {cell.metadata.nbgrader.grade_id} wrote to stderr: "
                     f"{out.text[:300]}")
                assert out.output_type != "error", (
                    f"graded cell {cell.metadata.nbgrader.grade_id} raised {out.ename}")


@pytest.mark.parametrize("name", GRADED)
def test_untouched_student_notebook_scores_zero(graded, course, name):
    got = graded(name)
    assert got.scores["untouched"][0] == 0
    assert "Exercise not attempted yet" in got.feedback["untouched"]
    assert got.written["untouched"] == {gid: (0.0, 2.0, False) for gid in written_ids(name)}, \
        "an unanswered written answer scores 0 and needs no manual grade"
    for gid in written_ids(name):
        assert autograded_cell(course(name), "untouched", name, gid).source == TEXT_STUB


def exercises(name: str) -> set[str]:
    return {c.metadata.nbgrader.grade_id
            for c in nbformat.read(nbgrader_cli.notebook_path(ROOT, "solutions", name), 4).cells
            if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")}


@pytest.mark.parametrize("name", GRADED)
def test_every_exercise_has_two_mutants(name):
    count = {e: sum(m["cell"] == e for m in MUTANTS[name]) for e in exercises(name)}
    few = {e: n for e, n in count.items() if n < 2}
    assert not few, (f"exercises of {name} with fewer than two wrong answers in "
                     f"tests/mutants/{name}.json: {few}")


@pytest.mark.parametrize("name", GRADED)
def test_every_exercise_has_a_second_correct_solution(name):
    missing = exercises(name) - {a["cell"] for a in ALTERNATES[name]}
    assert not missing, (f"exercises of {name} with no second correct answer in "
                         f"tests/alternates/{name}.json: {sorted(missing)}")


@pytest.mark.parametrize("name", GRADED)
def test_second_correct_solution_scores_full_marks(graded, name):
    """Each second correct answer keeps its exercise's points where it was graded; a submission of
    second answers alone keeps every point (in a mutant round the other exercises are the mutant
    test's)."""
    if not ALTERNATES[name]:
        pytest.fail(f"no tests/alternates/{name}.json")
    got = graded(name)
    assert sorted(a["note"] for alts in got.alternates.values() for a in alts) == \
        sorted(a["note"] for a in ALTERNATES[name]), (
            f"{name}: not every second correct answer was submitted")
    missing = sorted(set(got.alternates) - set(got.cells))
    assert not missing, f"{name}: submissions nbgrader did not grade: {missing}"
    wrong = {}
    for student, alts in got.alternates.items():
        ids = (list(got.cells[student]) if student.startswith("alternate")
               else [a["cell"] + "_test" for a in alts])
        wrong.update({(student, c): got.cells[student][c] for c in ids
                      if got.cells[student][c][0] < got.cells[student][c][1]})
    assert not wrong, f"the second correct answers of {name} lost points: {wrong}"


@pytest.mark.parametrize("name, mutant", [(n, m) for n in GRADED for m in GRADED_MUTANTS[n]],
                         ids=[f"{n}-{m['student']}" for n in GRADED for m in GRADED_MUTANTS[n]])
def test_wrong_answer_loses_points_and_feedback_names_the_mistake(graded, course, name, mutant):
    if mutant.get("needs") == "memory" and not measures_memory():
        pytest.skip("only the kernel-measured peak memory catches this cheat: grade as root with a "
                    "memory cgroup")
    got = graded(name)
    cells, feedback, rounds = got.cells, got.feedback, got.rounds
    r = next(i for i, group in enumerate(rounds) if mutant in group)
    student, grade_id, words = f"mutants{r}", mutant["cell"], mutant["feedback"]
    score, total = cells[student][grade_id + "_test"]
    assert score < total, (f"{mutant['student']}: a wrong {grade_id} still scored {score}/{total} "
                           "in its test cell")
    # The words must be in the test cell's outcome (the visible test code also shows in the
    # feedback).
    nb = nbformat.read(course(name) / "autograded" / student / name / f"{name}.ipynb", as_version=4)
    test_cell = next(c for c in nb.cells
                     if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id + "_test")
    outcome = " ".join(o.get("evalue", "") for o in test_cell.outputs if o.output_type == "error")
    assert words in outcome, (f"{mutant['student']}: the outcome of {grade_id}_test does not say "
                              f"{words!r}: {outcome}")
    assert (html.escape(words, quote=False) in feedback[student]
            or words in html.unescape(feedback[student]))
    # Every other exercise keeps its points (the solution's answer or a second correct one), even
    # one that builds on the mutated one (its probe uses a reference copy of the earlier exercise).
    touched = {m["cell"] for m in rounds[r]}
    others = {c: v for c, v in cells[student].items() if c[:-len("_test")] not in touched}
    assert others, "every round must leave an exercise right (nbgrader_cli.mutant_rounds)"
    alternates = sorted(a["cell"] for a in got.alternates.get(student, []))
    assert all(s == t for s, t in others.values()), \
        (f"{mutant['student']}: exercises with no mistake in this submission lost "
         f"points: {others}") + \
        (f" (second correct answers in it: {alternates})" if alternates else "")


# The harness against a hang, tried on the fixtures above in a pytest of their own: nbgrader wrapped
# so that autograde sleeps (the other commands run), the notebook limit made 1 s so the limit comes
# soon.
SLOW_PLUGIN = """import sys
from course_utils.authoring import nbgrader_cli

def pytest_configure(config):
    nbgrader_cli.COMMAND = [sys.executable, {wrapper!r}]
    nbgrader_cli.notebook_seconds = lambda course: 1.0
"""
SLOW_WRAPPER = """import os, sys, time
with open({log!r}, "a") as log:
    log.write(sys.argv[1] + "\\n")
if sys.argv[1] == "autograde":
    time.sleep(600)
os.execv(sys.executable, [sys.executable, "-m", "nbgrader", *sys.argv[1:]])
"""


def test_a_hung_autograde_fails_its_tests_once_naming_what_hung(tmp_path):
    """Three tests need lesson 01 graded; autograde hangs. It is run once, stopped at (submissions +
    1) x the notebook limit, and its tests are errors: the first with the whole message (what hung,
    and the work its limit was scaled to), the others naming that failure in one line."""
    log = tmp_path / "calls.log"
    (tmp_path / "wrapper.py").write_text(SLOW_WRAPPER.format(log=str(log)))
    (tmp_path / "slow_autograde.py").write_text(
        SLOW_PLUGIN.format(wrapper=str(tmp_path / "wrapper.py")))
    chosen = "01-circuits and (test_solution_scores or untouched or write_nothing)"
    report = tmp_path / "report.xml"
    done = subprocess.run([sys.executable, "-m", "pytest", str(Path(__file__)), "-k", chosen,
                           "-p", "slow_autograde", "-p", "no:cacheprovider", "-q",
                           f"--junitxml={report}"], cwd=ROOT, capture_output=True, text=True,
                          timeout=900, env={**os.environ, "PYTHONPATH": str(tmp_path)})
    out = done.stdout + done.stderr
    assert done.returncode == 1 and "3 errors" in out, out[-4000:]
    assert log.read_text().splitlines().count("autograde") == 1, log.read_text()
    # one per test, at its set-up
    errors = [e.get("message", "") for e in ElementTree.parse(report).iter("error")]
    count = submissions("01-circuits")
    whole = (f"Hung: nbgrader autograde 01-circuits --force hung: no end after {count + 1} s "
             f"({count} submissions and the reference, each stopped by the grader at 1 s "
             "of its own time)")
    named = ("FailedEarlier: grading 01-circuits failed once, reported in full at the first test "
             "that needed it: Hung")
    assert len(errors) == 3 and sum(whole in e and named not in e for e in errors) == 1, errors
    assert sum(named in e for e in errors) == 2, errors


def test_validate_stops_a_cell_at_the_configured_grading_limit():
    """Validate's Execute.timeout is the grader's cell limit: nbgrader_config.py's
    c.HardenedExecute.cell_seconds where it is set before validate_like_grading(c), else Limits()'s
    default."""
    from traitlets.config import Config
    from course_utils.grader.preprocessors import validate_like_grading
    c = Config()
    validate_like_grading(c)
    assert (c.Execute.timeout == int(Limits().cell_seconds)
            and c.Execute.interrupt_on_timeout is True)
    c = Config()
    c.HardenedExecute.cell_seconds = 90.5
    validate_like_grading(c)
    assert c.Execute.timeout == 91


def test_the_cell_limit_set_in_nbgrader_config_is_validates_too(tmp_path):
    """As an instructor sets it: the commented line of nbgrader_config.py uncommented, the file
    loaded as nbgrader loads it."""
    from traitlets.config.loader import PyFileConfigLoader
    root = Path(__file__).resolve().parents[2]
    text = (root / "nbgrader_config.py").read_text()
    assert text.count("# c.HardenedExecute.cell_seconds = 60\n") == 1
    (tmp_path / "nbgrader_config.py").write_text(
        text.replace("# c.HardenedExecute.cell_seconds = 60\n",
                     "c.HardenedExecute.cell_seconds = 75\n"))
    c = PyFileConfigLoader("nbgrader_config.py", path=str(tmp_path)).load_config()
    assert c.HardenedExecute.cell_seconds == 75 and c.Execute.timeout == 75
