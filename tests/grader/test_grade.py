"""The hardened grader against a corpus of adversarial and broken submissions.

Every submission is a version of the fixture lesson (tests/fixtures/99-fixture: exercises scale
2 points, square_grad 2 points, count_positive 1 point) and states what it must score, exercise by
exercise, and words the reason must contain. The corpus is tests/grader/corpus/, one file per case
(see load_case for what a case file holds; adding a case is adding a file). Cheats, crashes, floods
and broken files are graded by course_utils.grader.grade with one reference run; the last tests
drive the same grader through `nbgrader autograde` and through `python -m
course_utils.grader.gradefolder` on a folder.
"""

import ast
import copy
import csv
import dataclasses
import importlib.util
import re
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import NamedTuple

import nbformat
import pytest
from corpus._notebook import FIXTURE, FULL, OK, SCALE_OK, cell_of, dumps, fixture_course, notebook

from course_utils.authoring import nbgrader_cli
from course_utils.grader import grade, lessonfile
from course_utils.grader.capabilities import can_isolate, isolation_warning
from course_utils.grader.review import review
from course_utils.grader.worker import Limits, Worker

# Where this machine gives no sandbox, the tests grade with limits only (as an instructor may choose
# to).
LIMITS = Limits(cell_seconds=10, notebook_seconds=60, memory_bytes=2 * 2 ** 30, processes=64,
                # the corpus: two at a time
                sandbox="required" if can_isolate() else "optional").shared_by(2)

pytestmark = pytest.mark.slow


# --- the corpus -----------------------------------------------------------------------------------

CORPUS_DIR = Path(__file__).resolve().parent / "corpus"
HEADER = ("EXPECTED", "WORDS", "NEEDS_SANDBOX", "REVIEW")


class CorpusError(ValueError):
    """A case file that does not say what it must: the message starts with the file's path."""


class Case(NamedTuple):
    """One file of the corpus: its submission (the bytes, or a function of the test's tmp path
    returning them), what it must score, words its reasons must contain, whether it needs the full
    sandbox, and what course_utils.grader.review must flag (None: nothing)."""
    submission: bytes | Callable[[Path], bytes]
    expected: dict[str, float]
    words: tuple[str, ...]
    needs_sandbox: bool
    review: str | None
    module: ModuleType

    def data(self, tmp: Path) -> bytes:
        return self.submission(tmp) if callable(self.submission) else self.submission


def load_case(path: Path) -> Case:
    """One case file of tests/grader/corpus. It holds, in this order:

    - a docstring: what the submission does and what it must score ("Must score ...") and why;
    - the header: EXPECTED (the score of each test cell: fx_scale_test, fx_grad_test,
      fx_count_test), WORDS (phrases the reasons must contain), NEEDS_SANDBOX (True where grading
      it without the full sandbox would harm the machine: skipped there), REVIEW (a phrase
      course_utils.grader.review must say of its answers, or None where it must flag nothing);
      imports may stand among them, other code may not;
    - the submission: ANSWERS, the source of some answer cells (the others are correct; None keeps
      the stub), or `def submission(tmp: Path) -> bytes` for a file that changes more than answers;
    - optionally `def check(tmp)` (more assertions after grading) and `def cleanup()` (after
      grading).

    A file that breaks these rules raises CorpusError naming it."""
    def bad(why: str) -> CorpusError:
        return CorpusError(f"{path}: {why}")

    if not path.stem.isidentifier() or path.stem.startswith("test_") or path.stem.endswith("_test"):
        raise bad("a case's name must be a Python identifier that pytest does not take for a test "
                  "file (not test_*.py or *_test.py)")
    try:
        tree = ast.parse(path.read_text(), str(path))
    except (SyntaxError, ValueError, UnicodeDecodeError) as e:
        raise bad(f"not readable Python: {e}") from e
    doc = ast.get_docstring(tree)
    if not doc or "must score" not in doc.lower():
        raise bad('it must start with a docstring that says what the submission does and what it '
                  'must score ("Must score ...") and why')
    header = set()
    for stmt in tree.body[1:]:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            continue
        names = [t.id for t in getattr(stmt, "targets", []) if isinstance(t, ast.Name)]
        if not (isinstance(stmt, ast.Assign) and len(names) == 1 and names[0] in HEADER
                and names[0] not in header):
            break
        header.add(names[0])
    if header != set(HEADER):
        missing = [name for name in HEADER if name not in header]
        raise bad(f"the header lacks {', '.join(missing)}: after the docstring come "
                  f"{', '.join(HEADER)}, each once, before any other code")
    spec = importlib.util.spec_from_file_location(f"corpus.{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        raise bad(f"it failed to load: {type(e).__name__}: {e}") from e

    expected, words, needs_sandbox, reviewed = (getattr(module, name) for name in HEADER)
    if not isinstance(expected, dict) or set(expected) != set(FULL):
        raise bad(f"EXPECTED must give the score of each of {', '.join(FULL)}, got {expected!r}")
    for gid, score in expected.items():
        if type(score) not in (int, float) or not 0 <= score <= FULL[gid]:
            raise bad(f"EXPECTED[{gid!r}] must be a number from 0 to {FULL[gid]:g}, got {score!r}")
    if not isinstance(words, (tuple, list)) or not all(isinstance(w, str) and w for w in words):
        raise bad(f"WORDS must be a tuple of phrases (strings), got {words!r}")
    if not isinstance(needs_sandbox, bool):
        raise bad(f"NEEDS_SANDBOX must be True or False, got {needs_sandbox!r}")
    if reviewed is not None and not (isinstance(reviewed, str) and reviewed):
        raise bad(f"REVIEW must be a phrase or None, got {reviewed!r}")
    answers, make = getattr(module, "ANSWERS", None), getattr(module, "submission", None)
    if (answers is None) == (make is None):
        raise bad("it must give its submission one way: ANSWERS or def submission(tmp: Path) -> "
                  "bytes")
    for name in ("submission", "check", "cleanup"):
        if hasattr(module, name) and not callable(getattr(module, name)):
            raise bad(f"{name} must be a function")
    if answers is not None:
        if not isinstance(answers, dict) or not set(answers) <= set(OK) \
                or not all(src is None or isinstance(src, str) for src in answers.values()):
            raise bad(f"ANSWERS must map answer cells ({', '.join(OK)}) to their source (or None), "
                      f"got {answers!r}")
        make = dumps(notebook(**answers))
    return Case(make, expected, tuple(words), needs_sandbox, reviewed, module)


def load_corpus(folder: Path = CORPUS_DIR) -> dict[str, Case]:
    """Every case of a folder by name (its file's name), in name order; files named _*.py are
    helpers."""
    cases = {path.stem: load_case(path) for path in sorted(folder.glob("*.py"))
             if not path.name.startswith("_")}
    if not cases:
        raise CorpusError(f"{folder}: no case files")
    return cases


CORPUS = load_corpus()
# Cases that the nbgrader and folder tests below submit as well.
PATCH_CHECKS = CORPUS["patches_checks_torch_and_assertionerror"].module.ANSWERS["fx_scale"]
_forged_grade_cell = CORPUS["forged_grade_cell_and_points"].module.edit
_hidden_markers_in_answer = CORPUS["hidden_test_markers_inside_an_answer"].module.edit


def test_every_case_file_has_its_header():
    """Each file of tests/grader/corpus is a case the tests grade, and says first what it must
    score."""
    files = sorted(p for p in CORPUS_DIR.glob("*.py") if not p.name.startswith("_"))
    assert [p.stem for p in files] == list(CORPUS)
    for path in files:
        tree = ast.parse(path.read_text())
        assert "must score" in (ast.get_docstring(tree) or "").lower(), \
            f"{path}: no docstring saying what it must score"
        assigned = [t.id for s in tree.body if isinstance(s, ast.Assign) for t in s.targets
                    if isinstance(t, ast.Name)]
        assert all(name in assigned for name in HEADER), f"{path}: the header lacks one of {HEADER}"
        case = CORPUS[path.stem]
        assert case.expected.keys() == FULL.keys() and isinstance(case.needs_sandbox, bool)
        assert isinstance(case.submission, bytes) or callable(case.submission)


GOOD = '''"""A case.

Must score full marks.
"""

EXPECTED = {"fx_scale_test": 2.0, "fx_grad_test": 2.0, "fx_count_test": 1.0}
WORDS = ()
NEEDS_SANDBOX = False
REVIEW = None

ANSWERS = {}
'''
MALFORMED = {
    "no_docstring": GOOD.split('"""\n', 1)[1],
    "docstring_without_what_it_must_score": GOOD.replace("Must score full marks.", "Solved."),
    "no_expected": GOOD.replace('EXPECTED = {"fx_scale_test": 2.0, "fx_grad_test": 2.0, '
                                '"fx_count_test": 1.0}\n', ""),
    "no_review": GOOD.replace("REVIEW = None\n", ""),
    "header_after_the_code": GOOD.replace("WORDS = ()\n", "") + "WORDS = ()\n",
    "header_after_a_function": GOOD.replace("EXPECTED", "def f():\n    pass\n\n\nEXPECTED", 1),
    "expected_misses_an_exercise": GOOD.replace(', "fx_count_test": 1.0', ""),
    "expected_over_the_points": GOOD.replace('"fx_count_test": 1.0', '"fx_count_test": 5.0'),
    "expected_not_a_number": GOOD.replace('"fx_count_test": 1.0', '"fx_count_test": "1"'),
    "words_a_string": GOOD.replace("WORDS = ()", 'WORDS = "x + k"'),
    "needs_sandbox_not_a_bool": GOOD.replace("NEEDS_SANDBOX = False", 'NEEDS_SANDBOX = "no"'),
    "review_empty": GOOD.replace("REVIEW = None", 'REVIEW = ""'),
    "no_submission": GOOD.replace("ANSWERS = {}\n", ""),
    "two_submissions": GOOD + "\n\ndef submission(tmp):\n    return b''\n",
    "answers_for_a_cell_the_lesson_lacks": GOOD.replace("ANSWERS = {}",
                                                        'ANSWERS = {"fx_scal": "pass"}'),
    "answer_not_text": GOOD.replace("ANSWERS = {}", 'ANSWERS = {"fx_scale": 12}'),
    "not_python": GOOD + "\ndef submission(tmp:\n",
    "fails_to_load": GOOD + "\nANSWERS = {1 / 0: None}\n",
    "test_named_like_a_test_file": GOOD,
}


def test_a_case_file_loads_from_anywhere(tmp_path):
    (tmp_path / "good.py").write_text(GOOD)
    (tmp_path / "_helper.py").write_text("raise RuntimeError('helpers are not cases')\n")
    cases = load_corpus(tmp_path)
    assert list(cases) == ["good"] and cases["good"].data(tmp_path) == dumps(notebook())
    assert cases["good"].expected == FULL and cases["good"].review is None


@pytest.mark.parametrize("name", list(MALFORMED))
def test_a_malformed_case_file_fails_loudly_naming_the_file(name, tmp_path):
    path = tmp_path / f"{name}.py"
    path.write_text(MALFORMED[name])
    with pytest.raises(CorpusError, match="^" + re.escape(str(path)) + ": "):
        load_case(path)
    with pytest.raises(CorpusError, match=re.escape(str(path))):
        load_corpus(tmp_path)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Grade the whole corpus once, two submissions at a time, against one reference run."""
    tmp = tmp_path_factory.mktemp("corpus")
    lesson = lessonfile.load_lesson(FIXTURE)
    reference = grade.Reference(lesson, LIMITS)
    reference_pid = reference.worker.proc.pid
    try:
        def one(item):
            slot, (name, case) = item
            answers, notes = lessonfile.read_answers(case.data(tmp), lesson)
            return name, grade.grade_answers(lesson, reference, answers, notes, name, LIMITS,
                                             slot=slot)

        # Without the full sandbox, submissions that attack the machine are not run at all.
        todo = [(n, case) for n, case in CORPUS.items() if can_isolate() or not case.needs_sandbox]
        with ThreadPoolExecutor(max_workers=2) as pool:
            results = dict(pool.map(one, enumerate(todo)))
        results["reference restarted"] = reference.worker.proc.pid != reference_pid
    finally:
        reference.close()
        for case in CORPUS.values():
            if hasattr(case.module, "cleanup"):
                case.module.cleanup()
    return results, tmp


def test_the_corpus_is_large_enough():
    assert len(CORPUS) >= 30


@pytest.mark.parametrize("name", list(CORPUS))
def test_submission_scores_what_it_earned(graded, name):
    case = CORPUS[name]
    expected, words = case.expected, case.words
    if case.needs_sandbox and not can_isolate():
        pytest.skip("needs the sandbox (grading as root, or as a user with user namespaces): "
                    f"{isolation_warning()}")
    results, tmp = graded
    result = results[name]
    got = {gid: o.score for gid, o in result.outcomes.items()}
    reasons = " | ".join([o.message for o in result.outcomes.values()] + result.notes)
    assert got == expected, f"{name}: scored {got}, expected {expected}; reasons: {reasons}"
    for w in words:
        assert w in reasons, f"{name}: the reasons do not say {w!r}: {reasons}"
    assert result.points == 5.0, \
        "the points come from the instructor's notebook, whatever the submission claims"
    for o in result.outcomes.values():
        assert (o.score == o.points) == (o.message == ""), \
            f"{name}: every lost point has a reason, and only those: {o}"
        for secret in ("def expect", "BEGIN EXPECTED", "want.append", "CASES =",
                       "list(range(-5, 6))"):
            assert secret not in o.message, \
                f"{name}: the feedback quotes the hidden tests: {o.message}"
        assert not re.search(r"\d{30}|frame #\d|\.so\b|Traceback", o.message), \
            (f"{name}: no long digit strings (a channel for text) and no backtraces in feedback: "
             f"{o.message}")
    # e.g. reads_solutions_writes_the_gradebook: the gradebook is as it was
    if hasattr(case.module, "check"):
        case.module.check(tmp)


# What course_utils.grader.review says of each corpus entry's answers (each case's REVIEW): the
# cheats are named for the instructor (scores never depend on it); honest code stays unflagged
# unless it imports sys or os.
@pytest.mark.parametrize("name", list(CORPUS))
def test_review_names_the_answers_that_reach_outside_their_exercise(name, tmp_path):
    lesson = lessonfile.load_lesson(FIXTURE)
    case = CORPUS[name]
    try:
        answers, _ = lessonfile.read_answers(case.data(tmp_path), lesson)
    finally:
        if hasattr(case.module, "cleanup"):
            case.module.cleanup()
    flagged = " | ".join(review(lesson, answers))
    if case.review is not None:
        assert case.review in flagged, f"{name}: review says {flagged!r}"
    else:
        assert flagged == "", f"{name}: honest or harmless answers are not flagged, got {flagged!r}"


def test_no_submission_makes_the_reference_restart(graded):
    """Whatever a learner's process sends, judging it never kills the reference, which judges
    everyone."""
    results, _ = graded
    assert results["reference restarted"] is False


def test_nothing_is_left_on_the_machine(graded):
    """A submission's shared memory, files and processes go with its sandbox."""
    if not can_isolate():
        pytest.skip("needs the sandbox: grading as root, or as a normal user with user namespaces")
    ipcs = subprocess.run(["ipcs", "-m"], capture_output=True, text=True).stdout
    assert "0x07ed7ea3" not in ipcs, "a System V shared memory segment outlived its sandbox"
    left = [p for d in ("/run/lock", "/var/lock", "/var/tmp", "/dev/shm")
            for p in Path(d).glob(".left-behind-*")]
    assert left == [], f"files outlived their sandbox: {left}"


def test_a_grader_error_on_one_submission_is_a_row_of_zeros_not_a_lost_class(tmp_path, monkeypatch):
    """If grading one submission fails in the grader itself, that learner gets 0 with the reason and
    everyone else is graded and reported."""
    from course_utils.grader import gradefolder, submission
    folder = tmp_path / "submissions"
    folder.mkdir()
    for student in ("ada", "bob"):
        (folder / f"{student}.ipynb").write_bytes(dumps(notebook()))
    real = submission.grade_answers

    def flaky(lesson, reference, answers, notes, student, *args, **kwargs):
        if student == "bob":
            raise RecursionError("the grader's own trouble")
        return real(lesson, reference, answers, notes, student, *args, **kwargs)

    monkeypatch.setattr(submission, "grade_answers", flaky)
    results = {r.student: r for r in gradefolder.grade_folder(FIXTURE, folder, tmp_path / "out",
                                                              jobs=2, limits=LIMITS)}
    assert results["ada"].score == 5.0 and results["bob"].score == 0.0
    assert all("the grader failed on this submission (RecursionError)" in o.message
               for o in results["bob"].outcomes.values())
    rows = {r["student"]: r for r in csv.DictReader(open(tmp_path / "out" / "grades.csv"))}
    assert rows["ada"]["score"] == "5" and rows["bob"]["score"] == "0"


def test_grading_always_finishes_within_the_budget(graded):
    results, _ = graded
    slow = {n: r.seconds for n, r in results.items()
            if n in CORPUS and r.seconds > LIMITS.notebook_seconds}
    assert not slow, f"submissions that took longer than the notebook budget: {slow}"


def test_learner_version_of_a_test_cell_has_no_expected_values():
    lesson = lessonfile.load_lesson(FIXTURE)
    for test in lesson.tests:
        sent = lessonfile.learner_version(test.source)
        assert ("def expect" not in sent and "def judge" not in sent
                and "expect = judge = None" in sent)
    with pytest.raises(ValueError, match="END EXPECTED"):
        lessonfile.learner_version("### BEGIN EXPECTED\nx = 1\n")


def test_a_reference_that_fails_its_own_judge_stops_grading(tmp_path):
    nb = nbformat.read(FIXTURE, as_version=4)
    answer = cell_of(nb, "fx_scale")
    answer.source = answer.source.replace("return x * k",
                                          "return x * k if abs(x) == 2.0 else x - k")
    bad = tmp_path / "99-fixture.ipynb"
    nbformat.write(nb, bad)
    with pytest.raises(RuntimeError, match="fails its judge"):
        grade.Reference(lessonfile.load_lesson(bad), LIMITS)


def test_nbgrader_autograde_is_protected(tmp_path):
    """`nbgrader autograde` with the course's config: cheats and crashes score what they earned,
    the rest of the class is graded, and the feedback does not show the hidden tests."""
    course = fixture_course(tmp_path)
    released = nbformat.read(course / "notebooks" / "99-fixture" / "99-fixture.ipynb", as_version=4)

    def answered(**answers):
        nb = copy.deepcopy(released)
        for cell in nb.cells:
            gid = cell.metadata.get("nbgrader", {}).get("grade_id")
            if gid in answers:
                cell.source = answers[gid]
        return nb

    nbgrader_cli.submit(course, "solved", "99-fixture", answered(**OK))
    nbgrader_cli.submit(course, "cheater", "99-fixture",
                        answered(**{**OK, "fx_scale": PATCH_CHECKS}))
    crashing = answered(**{**OK, "fx_grad": "import os\nos._exit(1)\n"})
    _forged_grade_cell(crashing)
    nbgrader_cli.submit(course, "crasher", "99-fixture", crashing)
    marked = answered(**OK)
    _hidden_markers_in_answer(marked)
    nbgrader_cli.submit(course, "marker", "99-fixture", marked)
    broken = course / "submitted" / "broken" / "99-fixture" / "99-fixture.ipynb"
    broken.parent.mkdir(parents=True)
    broken.write_text('{"cells": [')
    empty = course / "submitted" / "empty" / "99-fixture" / "99-fixture.ipynb"
    empty.parent.mkdir(parents=True)
    empty.write_bytes(b"")
    log = nbgrader_cli.autograde(course, "99-fixture").stderr
    assert ("cheater: read this answer (course_utils.grader.review): fx_scale: assigns to "
            "torch.Tensor.__eq__" in log)
    assert "solved: read this answer" not in log
    # nothing else for the instructor to wade through: no checksum "changes" (the test cells are
    # rebuilt as the gradebook has them), no SQLAlchemy noise, no relative-root warning
    for noise in ("has changed!", "SAWarning", "is not absolute"):
        assert noise not in log, f"the autograde log says {noise!r}:\n{log}"
    got = nbgrader_cli.scores(course, "99-fixture")
    assert got["solved"] == (5.0, 5.0)
    assert got["cheater"] == (3.0, 5.0)
    assert got["crasher"] == (3.0, 5.0)
    assert got["marker"] == (5.0, 5.0), "nbgrader's markers inside an answer change nothing"
    # every lost point has its reason where the instructor looks: the log and the gradebook's
    # comments
    assert "cheater: fx_scale_test 0/2: scale(1.5, -2.0) is 0, expected -3" in log
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        comment = (gb.find_comment("fx_scale", "99-fixture", "99-fixture", "cheater").auto_comment
                   or "")
        crashed = (gb.find_comment("fx_grad", "99-fixture", "99-fixture", "crasher").auto_comment
                   or "")
        solved = gb.find_comment("fx_scale", "99-fixture", "99-fixture", "solved").auto_comment
    assert "fx_scale_test (0/2): scale(1.5, -2.0) is 0, expected -3" in comment, comment
    assert "exit code 1" in crashed, crashed
    assert solved is None, "full marks: no comment"
    # a file that is not a notebook scores 0 with the reason, not a bare 0 after a failed run
    for student in ("broken", "empty"):
        assert got[student] == (0.0, 5.0)
        assert (f"{student}: the submitted file could not be read as a notebook (empty, truncated "
                "or not a notebook)" in log)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        assert "could not be read as a notebook" in gb.find_comment(
            "fx_scale", "99-fixture", "99-fixture", "broken").auto_comment
    log = nbgrader_cli.nbgrader("generate_feedback", "99-fixture", "--force", cwd=course).stderr
    assert "WARNING" not in log, log
    feedback = nbgrader_cli.feedback_pages(course, "99-fixture")
    assert "is 0, expected" in feedback["cheater"]
    assert "marker" in feedback, \
        "the feedback of an answer holding nbgrader's markers is written too"
    for student, page in feedback.items():
        assert "def expect" not in page and "def judge" not in page and "CASES" not in page
        # the lesson's math is MathML made with the page: nothing fetched, no script
        # (course_utils.grader.mathml)
        assert "<math" in page and "\\partial" not in page, f"{student}: the math is not MathML"
        assert "MathJax" not in page and "cdnjs" not in page, \
            f"{student}: the page loads MathJax from a CDN"
        if student != "marker":  # that learner's own answer holds the words
            assert "BEGIN HIDDEN" not in page


def test_folder_command_writes_grades_and_feedback(tmp_path):
    folder = tmp_path / "submissions"
    folder.mkdir()
    (folder / "ada.ipynb").write_bytes(dumps(notebook()))
    (folder / "bob.ipynb").write_bytes(dumps(notebook(fx_grad="def square_grad(x):\n"
                                                              "    return x\n")))
    (folder / "eve.ipynb").write_bytes(b"not json")
    (folder / "mallory.ipynb").write_bytes(dumps(notebook(fx_scale=PATCH_CHECKS)))
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "course_utils.grader.gradefolder", str(FIXTURE),
                           str(folder), "--out", str(out), "--jobs", "2", "--cell-seconds", "20"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = {r["student"]: r for r in csv.DictReader(open(out / "grades.csv"))}
    assert (rows["ada"]["score"], rows["bob"]["score"], rows["eve"]["score"],
            rows["mallory"]["score"]) == ("5", "3", "0", "3")
    assert rows["ada"]["review"] == rows["bob"]["review"] == rows["eve"]["review"] == ""
    assert rows["mallory"]["review"].startswith("fx_scale: assigns to torch.Tensor.__eq__, assigns "
                                                "to torch.allclose")
    assert "mallory: 3 / 5" in proc.stdout and "[review]" in proc.stdout
    assert "review" not in (out / "feedback" / "mallory" / "99-fixture.html").read_text(), \
        "flags are for the instructor"
    assert "x instead of 2x" in rows["bob"]["reasons"]
    assert "invalid or truncated JSON" in rows["eve"]["reasons"]
    page = (out / "feedback" / "bob" / "99-fixture.html").read_text()
    assert "x instead of 2x" in page and "3 / 5" in page and "def expect" not in page


def test_a_test_cell_without_grade_stops_grading(tmp_path):
    """A test cell the grader cannot judge outside the sandbox is an instructor's error, not a
    pass."""
    nb = nbformat.read(FIXTURE, as_version=4)
    test = cell_of(nb, "fx_count_test")
    test.source = test.source.split("### BEGIN HIDDEN TESTS")[0]
    bad = tmp_path / "99-fixture.ipynb"
    nbformat.write(nb, bad)
    with pytest.raises(RuntimeError, match="never called grade"):
        grade.Reference(lessonfile.load_lesson(bad), LIMITS)


def test_a_limit_hit_in_the_lessons_own_cells_is_never_the_learners_zero(monkeypatch):
    """The lesson's import cell running past the limit (as on a machine too busy to start Python)
    is graded again, then reported as not graded for the machine's sake, never as a score: by its
    status, whatever the message says (reworded here)."""
    monkeypatch.setattr(grade, "OVERLOADED", _reworded(grade.OVERLOADED))
    lesson = lessonfile.load_lesson(FIXTURE)
    reference = grade.Reference(lesson, LIMITS)
    try:
        # the lesson's first cell cannot meet it
        tight = Limits(**{**vars(LIMITS), "cell_seconds": 0.01})
        answers, notes = lessonfile.read_answers(dumps(notebook()), lesson)
        result = grade.grade_answers(lesson, reference, answers, notes, "ada", tight)
    finally:
        reference.close()
    assert result.overloaded, result.outcomes
    assert {o.status for o in result.outcomes.values()} == {grade.Status.OVERLOADED}
    for o in result.outcomes.values():
        assert (o.score == 0 and o.message.startswith(grade.OVERLOADED)
                and "before any answer ran" in o.message), o.message


def test_a_restarted_reference_judges_against_the_first_runs_peaks(monkeypatch):
    """The reference's memory peaks are measured once, in a known state: one started again later
    (after a learner's answer killed it, perhaps while a neighbour evicts the page cache) keeps
    them."""
    lesson = lessonfile.load_lesson(FIXTURE)
    reference = grade.Reference(lesson, LIMITS)
    try:
        first = {gid: 10 ** 9 + i for i, gid in enumerate(reference.peaks)}   # as if measured then
        reference.peaks.update(first)
        # killed: judge() starts it again
        reference.worker.kill()
        sent = []
        send = Worker.send
        monkeypatch.setattr(Worker, "send", lambda self, command, timeout: sent.append(command)
                            or send(self, command, timeout))
        ok, message = reference.judge("fx_count_test", [0, 0, 3, 5])
        assert ok, message
        assert reference.peaks == first, "the restart measured new peaks and kept them"
        assert sent[-1]["reference_peak"] == first["fx_count_test"]
    finally:
        reference.close()


def test_the_judge_compares_with_the_reference_peak_it_is_given(monkeypatch):
    from course_utils import judging
    from course_utils.grader import cellrunner
    session = cellrunner.Session("reference")
    # as cellrunner.main sets it in the reference worker
    monkeypatch.setattr(judging, "session", session)
    seen = []
    session.registry["g"] = (None, lambda got, want: seen.append(judging.memory_peaks()), 111)
    assert cellrunner.judge(session, "g", 1, peak=500, reference_peak=222)["ok"]
    assert cellrunner.judge(session, "g", 1, peak=500)["ok"]
    assert seen == [(500, 222), (500, 111)], \
        "the grader's kept peak wins; the worker's own is the fallback"


def test_a_shared_reference_ends_once_no_grading_has_used_it_for_a_while(monkeypatch):
    """Gradings in one process share the reference while they run and for REFERENCE_IDLE_SECONDS
    after the last one; then it ends (its worker): JupyterLab's server, where Formgrader autogrades
    one learner per click, keeps no reference worker after grading."""
    monkeypatch.setattr(grade, "REFERENCE_IDLE_SECONDS", 1.0)
    with grade.reference_for(FIXTURE, LIMITS) as first:
        # another grading meanwhile: the same one
        with grade.reference_for(FIXTURE, LIMITS) as second:
            assert second is first
        proc = first.worker.proc   # the worker's process (kill() forgets it)
        time.sleep(2)
        assert proc.poll() is None, "in use: not ended, however long"
    # back within the idle time: the same one
    with grade.reference_for(FIXTURE, LIMITS) as again:
        assert again is first
    # the worker's process dies first, then kill() cleans up and forgets it
    deadline = time.monotonic() + 30
    while (proc.poll() is None or first.worker.proc is not None) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert proc.poll() is not None and first.worker.proc is None, \
        "idle for REFERENCE_IDLE_SECONDS: its worker ends"
    with grade.reference_for(FIXTURE, LIMITS) as fresh:
        assert fresh is not first and fresh.worker.proc.poll() is None


# --- decisions on data, not on words --------------------------------------------------------------
# Every grading decision is taken on Outcome.status (and exception types), never on a message's
# words: with every message of course_utils.grader.grade reworded, the cases that take each decision
# grade to the same scores and statuses. Cases: not attempted (an untouched notebook, a missing
# answer cell), a worker that died (its answer stubbed, the lesson run again), a crash in a later
# cell, a wrong and a right answer, and a submission that runs past its whole-notebook limit (every
# test not graded).
REWORDED_CASES = ["untouched", "answer_cell_renamed", "os_exit_in_an_answer_cell",
                  "crash_in_a_later_answer_cell", "wrong_answer", "solved"]
# past a notebook limit of 12 s, own time
SLEEPS = notebook(fx_scale="import time\ntime.sleep(60)\n" + SCALE_OK)


def _reworded(text: str) -> str:
    return "REWORDED " + " ".join(reversed(text.split(" ")))


def test_grading_decides_on_statuses_not_on_message_words(graded, tmp_path):
    results, _ = graded
    lesson = lessonfile.load_lesson(FIXTURE)
    short = Limits(**{**vars(LIMITS), "notebook_seconds": 12})

    @dataclasses.dataclass
    # every message the grader writes, reworded as it is made
    class RewordedOutcome(grade.Outcome):
        def __post_init__(self):
            self.message = _reworded(self.message) if self.message else ""

    def one(item):
        slot, (name, data, limits) = item
        answers, notes = lessonfile.read_answers(data, lesson)
        return name, grade.grade_answers(lesson, reference, answers, notes, name, limits, slot=slot)

    todo = [(name, CORPUS[name].data(tmp_path), LIMITS) for name in REWORDED_CASES]
    todo.append(("past the notebook limit", dumps(SLEEPS), short))
    with pytest.MonkeyPatch.context() as mp:
        for name in ("OVERLOADED", "NOT_ATTEMPTED", "NOTEBOOK_TIME", "GRADER_FAILED",
                     "OWN_PROCESS"):
            mp.setattr(grade, name, _reworded(getattr(grade, name)))
        mp.setattr(grade, "Outcome", RewordedOutcome)
        reference = grade.Reference(lesson, LIMITS)
        try:
            with ThreadPoolExecutor(max_workers=2) as pool:
                reworded = dict(pool.map(one, enumerate(todo)))
        finally:
            reference.close()
        failed = grade.failed(lesson, "ada", [], RecursionError())
    # the same scores and statuses as the corpus graded with the plain words
    for name in REWORDED_CASES:
        got, want = reworded[name], results[name]
        assert all(o.message.startswith("REWORDED") for o in got.outcomes.values()
                   if o.message), name
        assert {g: (o.score, o.status) for g, o in got.outcomes.items()} == \
               {g: (o.score, o.status) for g, o in want.outcomes.items()}, name
    statuses = {name: [o.status for o in r.outcomes.values()] for name, r in reworded.items()}
    assert set(statuses["untouched"]) == {grade.Status.NOT_ATTEMPTED}
    assert grade.Status.NOT_ATTEMPTED in statuses["answer_cell_renamed"]
    late = reworded["past the notebook limit"]
    assert (late.score == 0
            and statuses["past the notebook limit"][1:] == [grade.Status.NOT_GRADED] * 2), \
        late.outcomes
    assert ({o.status for o in failed.outcomes.values()} == {grade.Status.NOT_GRADED}
            and not failed.overloaded)
