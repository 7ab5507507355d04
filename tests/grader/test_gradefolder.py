"""The folder grader (`bash course.sh grade`, course_utils.grader.gradefolder) never loses results.

Bad input is a one-line error, exit status 2, nothing written; relative paths are the caller's; a
run merges into an existing grades.csv; an error while grading or writing leaves what was there;
any text (surrogates, control characters) can be written; overloaded submissions make exit status 3.
Only the tests marked slow grade in sandboxes; the others stop before grading or grade with a stub.
"""

import csv
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course_utils.grader import gradefolder, grade, lessonfile, reports
from course_utils.grader import submission as one_submission
from course_utils.grader.grade import OVERLOADED, Outcome, Result, Status

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "99-fixture" / "99-fixture.ipynb"
LESSON = lessonfile.load_lesson(FIXTURE)
HEADER = reports.header(LESSON)
OK = {"fx_scale": "def scale(x, k):\n    return x * k\n",
      "fx_grad": "def square_grad(x):\n    return 2 * x\n",
      "fx_count": "def count_positive(xs):\n    return sum(1 for v in xs if v > 0)\n"}


def submission(**answers) -> bytes:
    """The fixture as a learner hands it in: OK answers unless given, hidden tests gone."""
    nb = nbformat.read(FIXTURE, as_version=4)
    chosen = {**OK, **answers}
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade_id") in chosen:
            cell.source = chosen[meta["grade_id"]]
        elif meta.get("grade"):
            cell.source = cell.source.split("### BEGIN HIDDEN TESTS")[0]
    return nbformat.writes(nb).encode()


# an earlier run's grades of three learners; quoting, newlines and a non-UTF-8 byte included
CLASS_ROWS = [
    ["ada", "99-fixture", "5", "5", "2", "2", "1", "", ""],
    ["bob", "99-fixture", "3", "5", "2", "0", "1",
     "fx_grad_test: x instead of 2x, see\nline two", ""],
    ["cy\udce9", "99-fixture", "0", "5", "0", "0", "0",
     "fx_scale_test: \"quoted\" | fx_grad_test: …", "fx_scale: imports os"],
]


def write_class(out: Path, header=HEADER, rows=CLASS_ROWS) -> bytes:
    out.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO(newline="")
    w = csv.writer(buf)
    w.writerow(header)
    w.writerows(rows)
    data = buf.getvalue().encode("utf-8", "surrogateescape")
    (out / "grades.csv").write_bytes(data)
    page = out / "feedback" / "ada" / "99-fixture.html"
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text("<p>ada's earlier page</p>")
    return data


def snapshot(folder: Path) -> dict:
    if not folder.exists():
        return {}
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None)
            for p in sorted(folder.rglob("*"))}


def read_rows(path: Path) -> dict[str, dict]:
    with open(path, encoding="utf-8", errors="surrogateescape", newline="") as f:
        reader = csv.reader(f)
        assert next(reader) == HEADER
        return {r[0]: dict(zip(HEADER, r)) for r in reader}


def assert_one_line_error(proc):
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    return lines[0]


def gradefolder_cmd(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "course_utils.grader.gradefolder",
                           *map(str, args)],
                          capture_output=True, text=True, timeout=120, cwd=cwd)


@pytest.fixture
def setting(tmp_path):
    """tmp_path with class/ (one good submission), out/ (an earlier class's grades.csv and a page)
    and a few wrong folders."""
    (tmp_path / "class").mkdir()
    (tmp_path / "class" / "zed.ipynb").write_bytes(submission())
    write_class(tmp_path / "out")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "readme.txt").write_text("no notebooks here")
    (tmp_path / "a-file").write_text("not a folder")
    (tmp_path / "broken.ipynb").write_text("not a notebook")
    learner = tmp_path / "submitted" / "ada" / "99-fixture"
    learner.mkdir(parents=True)
    (learner / "99-fixture.ipynb").write_bytes(submission())
    return tmp_path


# name -> (arguments after LESSON FOLDER given relative to tmp_path, words the error must say)
BAD = {
    "no such lesson": (["no-such-lesson", "class", "--course", ROOT],
                       ["no lesson 'no-such-lesson'", "01-circuits"]),
    "no such notebook": (["missing.ipynb", "class"], ["no instructor notebook missing.ipynb"]),
    "lesson that is no notebook": (["broken.ipynb", "class"], ["cannot read the lesson"]),
    "missing folder": ([FIXTURE, "nowhere"], ["no folder nowhere"]),
    "folder that is a file": ([FIXTURE, "a-file"], ["a-file", "is not a folder"]),
    "no submissions": ([FIXTURE, "notes"], ["no submissions of 99-fixture in notes"]),
    "one learner's folder": ([FIXTURE, "submitted/ada"],
                             ["one learner's folder", "holds 99-fixture/99-fixture.ipynb",
                              "submitted ("]),
    "one learner's submission": ([FIXTURE, "submitted/ada/99-fixture"],
                                 ["holds 99-fixture.ipynb itself", "submitted ("]),
    "jobs 0": ([FIXTURE, "class", "--jobs", "0"], ["--jobs", "must be 1 or more"]),
    "jobs -3": ([FIXTURE, "class", "--jobs", "-3"], ["--jobs", "must be 1 or more"]),
    "jobs two": ([FIXTURE, "class", "--jobs", "two"], ["--jobs", "not a whole number"]),
    "cell seconds 0": ([FIXTURE, "class", "--cell-seconds", "0"], ["--cell-seconds", "positive"]),
    "cell seconds -5": ([FIXTURE, "class", "--cell-seconds=-5"], ["--cell-seconds", "positive"]),
    "cell seconds abc": ([FIXTURE, "class", "--cell-seconds", "abc"],
                         ["--cell-seconds", "not a number"]),
    "notebook seconds 0": ([FIXTURE, "class", "--notebook-seconds", "0"],
                           ["--notebook-seconds", "positive"]),
    "notebook seconds nan": ([FIXTURE, "class", "--notebook-seconds", "nan"],
                             ["--notebook-seconds", "positive"]),
    "out that is a file": ([FIXTURE, "class", "--out", "a-file"],
                           ["--out a-file", "is not a folder"]),
}


@pytest.mark.parametrize("case", BAD)
def test_bad_input_is_one_line_and_writes_nothing(setting, case):
    args, words = BAD[case]
    args = [*args, *(["--out", "out"] if "--out" not in args else [])]
    before = snapshot(setting)
    line = assert_one_line_error(gradefolder_cmd(*args, cwd=setting))
    assert all(w in line for w in words), line
    assert snapshot(setting) == before


def test_bad_input_creates_no_out_folder(setting):
    assert_one_line_error(gradefolder_cmd(FIXTURE, "notes", "--out", "new/graded", cwd=setting))
    assert not (setting / "new").exists()


@pytest.mark.parametrize("header, rows, words", [
    (["student", "lesson", "score", "max_score", "c1_test", "reasons", "review"],
     [["ada", "01-circuits", "1", "1", "1", "", ""]],
     ["not a grades.csv of 99-fixture", "c1_test"]),
    (HEADER, [["ada", "01-circuits", "5", "5", "2", "2", "1", "", ""]],
     ["holds grades of 01-circuits"]),
    ([], [], ["an empty file"]),
])
def test_a_grades_csv_of_another_lesson_is_never_mixed_into(tmp_path, header, rows, words):
    (tmp_path / "class").mkdir()
    (tmp_path / "class" / "zed.ipynb").write_bytes(submission())
    if header:
        write_class(tmp_path / "out", header, rows)
    else:
        (tmp_path / "out").mkdir()
        (tmp_path / "out" / "grades.csv").write_bytes(b"")
    before = snapshot(tmp_path)
    line = assert_one_line_error(gradefolder_cmd(FIXTURE, tmp_path / "class", "--out",
                                                 tmp_path / "out"))
    assert all(w in line for w in words), line
    assert snapshot(tmp_path) == before


def test_course_sh_resolves_relative_paths_where_it_was_run(setting):
    """From another folder, ./notes is the caller's (not the course's), and a lesson named by its
    name is still the course's solutions/LESSON/LESSON.ipynb."""
    before = snapshot(setting)
    proc = subprocess.run(["bash", str(ROOT / "course.sh"), "grade", "01-circuits", "./notes",
                           "--out", "out"],
                          capture_output=True, text=True, timeout=300, cwd=setting)
    line = assert_one_line_error(proc)
    assert line.startswith("error: no submissions of 01-circuits in notes "
                           f"({setting / 'notes'})"), line
    proc = subprocess.run(["bash", str(ROOT / "course.sh"), "grade", "no-such-lesson", "./class",
                           "--out", "out"],
                          capture_output=True, text=True, timeout=300, cwd=setting)
    line = assert_one_line_error(proc)
    assert str(ROOT / "solutions" / "no-such-lesson") in line, line
    assert snapshot(setting) == before


# --- writing, with a stand-in for the sandbox (fast) ----------------------------------------------

class StubReference:
    def __init__(self, lesson, limits):
        pass

    def close(self):
        pass


def stub_grading(monkeypatch, change=None):
    """Grade without sandboxes: every submission full marks unless change(student, result) changes
    it."""
    calls = []

    def grade_answers(lesson, reference, answers, notes=None, student="", limits=None, slot=0):
        calls.append(student)
        result = Result(student, lesson.name, {t.gid: Outcome(t.points, t.points, "")
                                               for t in lesson.tests}, list(notes or []))
        return change(student, result) if change else result

    monkeypatch.setattr(grade, "Reference", StubReference)
    monkeypatch.setattr(one_submission, "grade_answers", grade_answers)
    monkeypatch.setattr(gradefolder, "check_sandbox", lambda limits: None)
    return calls


def test_grading_that_raises_changes_nothing(tmp_path, monkeypatch):
    (tmp_path / "class").mkdir()
    for student in ("dan", "eve"):
        (tmp_path / "class" / f"{student}.ipynb").write_bytes(submission())
    write_class(tmp_path / "out")

    class GraderBug(BaseException):
        """Not an Exception: gets past the grader's per-submission net, as a bug in the run
        would."""

    def boom(student, result):
        if student == "eve":
            raise GraderBug
        return result
    stub_grading(monkeypatch, boom)
    before = snapshot(tmp_path)
    with pytest.raises(GraderBug):
        gradefolder.grade_folder(FIXTURE, tmp_path / "class", tmp_path / "out", jobs=2)
    assert snapshot(tmp_path) == before


def test_an_error_while_writing_changes_nothing(tmp_path, monkeypatch):
    (tmp_path / "class").mkdir()
    for student in ("ada", "dan", "eve"):
        (tmp_path / "class" / f"{student}.ipynb").write_bytes(submission())
    write_class(tmp_path / "out")
    stub_grading(monkeypatch)
    real = reports.feedback.page
    monkeypatch.setattr(reports.feedback, "page",
                        lambda r: real(r) if r.student != "eve" else 1 / 0)
    before = snapshot(tmp_path)
    with pytest.raises(ZeroDivisionError):
        gradefolder.grade_folder(FIXTURE, tmp_path / "class", tmp_path / "out", jobs=1)
    assert snapshot(tmp_path) == before, "no page, no grades.csv and no temporary file changed"


def test_a_grades_csv_of_another_lesson_stops_before_grading(tmp_path, monkeypatch):
    (tmp_path / "class").mkdir()
    (tmp_path / "class" / "zed.ipynb").write_bytes(submission())
    write_class(tmp_path / "out", [*HEADER[:4], "other_test", *HEADER[-2:]], [])
    calls = stub_grading(monkeypatch)
    with pytest.raises(gradefolder.BadInput, match="not a grades.csv of 99-fixture"):
        gradefolder.grade_folder(FIXTURE, tmp_path / "class", tmp_path / "out")
    with pytest.raises(gradefolder.BadInput, match="--jobs must be 1 or more"):
        gradefolder.grade_folder(FIXTURE, tmp_path / "class", tmp_path / "other", jobs=0)
    assert calls == [] and not (tmp_path / "other").exists()


def test_any_text_can_be_written(tmp_path, monkeypatch, capsys):
    """Lone surrogates and control characters in a learner's (file) name, a judge's message and a
    note end as escapes in grades.csv, the feedback page and the command's output."""
    (tmp_path / "class").mkdir()
    # a file name that is not UTF-8, with a terminal escape
    name = os.fsdecode(b"al\xffce\x1b[31m")
    (tmp_path / "class" / f"{name}.ipynb").write_bytes(submission())
    (tmp_path / "class" / "bob.ipynb").write_bytes(submission())

    def dirty(student, result):
        result.outcomes["fx_grad_test"] = Outcome(0.0, 2.0,
                                                  "got '\udcff\ud800' \x00\x07\r instead of 2x")
        result.notes.append("odd cell \udcff\x1b]0;title\x07")
        return result
    stub_grading(monkeypatch, dirty)
    write_class(tmp_path / "out")
    assert gradefolder.main([str(FIXTURE), str(tmp_path / "class"), "--out",
                             str(tmp_path / "out")]) == 0
    raw = (tmp_path / "out" / "grades.csv").read_bytes()
    assert b"cy\xe9," in raw, "the kept row of a name that is not UTF-8 is byte for byte as it was"
    raw.replace(b"cy\xe9,", b"").decode("utf-8")      # everything else is UTF-8
    rows = read_rows(tmp_path / "out" / "grades.csv")
    assert sorted(rows) == ["ada", "al\\xffce\\x1b[31m", "bob", "cy\udce9"]
    alice = rows["al\\xffce\\x1b[31m"]
    assert alice["score"] == "3"
    assert "got '\\udcff\\ud800' \\x00\\x07\\x0d instead of 2x" in alice["reasons"]
    assert "odd cell \\udcff\\x1b]0;title\\x07" in alice["reasons"]
    page = (tmp_path / "out" / "feedback" / "al\\xffce\\x1b[31m" / "99-fixture.html").read_text(
        encoding="utf-8")
    assert "instead of 2x" in page and "odd cell" in page and "\x1b" not in page
    out = capsys.readouterr().out
    assert "al\\xffce\\x1b[31m: 3 / 5" in out and "\x1b" not in out
    assert not [p for p in (tmp_path / "out").rglob("*.tmp")]


def test_overloaded_submissions_are_written_and_exit_3(tmp_path, monkeypatch, capsys):
    (tmp_path / "class").mkdir()
    for student in ("dan", "eve"):
        (tmp_path / "class" / f"{student}.ipynb").write_bytes(submission())

    def overloaded(student, result):
        if student == "eve":
            for gid, o in result.outcomes.items():
                result.outcomes[gid] = Outcome(
                    0.0, o.points, f"{OVERLOADED} (cell 1 ran past its limit)", Status.OVERLOADED)
        return result
    stub_grading(monkeypatch, overloaded)
    write_class(tmp_path / "out")
    assert gradefolder.main([str(FIXTURE), str(tmp_path / "class"), "--out",
                             str(tmp_path / "out")]) == 3
    rows = read_rows(tmp_path / "out" / "grades.csv")
    assert sorted(rows) == ["ada", "bob", "cy\udce9", "dan", "eve"]
    assert rows["dan"]["score"] == "5" and rows["eve"]["score"] == "0"
    assert "grade again" in rows["eve"]["reasons"]
    err = capsys.readouterr().err
    assert ("1 of 2 submissions were not graded" in err and "eve" in err
            and "grade them again" in err)


# --- grading for real (slow) ----------------------------------------------------------------------

@pytest.mark.slow
def test_regrading_late_learners_through_course_sh_keeps_the_class(setting):
    """bash course.sh grade with relative paths from another folder: two late learners (one whose
    file name is not UTF-8) graded into an out/ holding three others: five rows, the three as they
    were."""
    (setting / "lessons").mkdir()
    shutil.copy(FIXTURE, setting / "lessons")
    late = setting / "late"
    late.mkdir()
    (late / "zoe.ipynb").write_bytes(submission(fx_grad="def square_grad(x):\n    return x\n"))
    (late / os.fsdecode(b"al\xffce.ipynb")).write_bytes(submission())
    write_class(setting / "out", rows=[
        *CLASS_ROWS, ["zoe", "99-fixture", "0", "5", "0", "0", "0", "an old row", ""]])
    old = read_rows(setting / "out" / "grades.csv")
    proc = subprocess.run(["bash", str(ROOT / "course.sh"), "grade", "lessons/99-fixture.ipynb",
                           "./late", "--out", "out",
                           "--jobs", "2", "--cell-seconds", "20", "--notebook-seconds", "120"],
                          capture_output=True, text=True, timeout=600, cwd=setting)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    rows = read_rows(setting / "out" / "grades.csv")
    assert sorted(rows) == ["ada", "al\\xffce", "bob", "cy\udce9", "zoe"]
    assert all(rows[s] == old[s] for s in ("ada", "bob", "cy\udce9")), (
        "the others' rows are kept as they were")
    assert rows["al\\xffce"]["score"] == "5" and rows["zoe"]["score"] == "3"
    assert "x instead of 2x" in rows["zoe"]["reasons"]
    assert ((setting / "out" / "feedback" / "ada" / "99-fixture.html").read_text()
            == "<p>ada's earlier page</p>")
    assert "3 / 5" in (setting / "out" / "feedback" / "zoe" / "99-fixture.html").read_text()
    assert (setting / "out" / "feedback" / "al\\xffce" / "99-fixture.html").is_file()
    assert not [p for p in (setting / "out").rglob("*.tmp")]


def test_written_answers_are_copied_for_grading_by_hand_not_scored(tmp_path, monkeypatch, capsys):
    """A lesson with a written answer (nbgrader's manually graded answer): grades.csv and the
    summary say it is not scored and must be graded by hand; its column holds each learner's text as
    written; score and max_score are the autograded points; the feedback page shows the answer."""
    nb = nbformat.read(FIXTURE, as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell("Because k scales x.", metadata={"nbgrader": {
        "grade": True, "solution": True, "locked": False, "points": 2, "grade_id": "fx_why",
        "schema_version": 3}}))
    source = tmp_path / "lessons" / "99-fixture.ipynb"
    source.parent.mkdir()
    nbformat.write(nb, source)
    (tmp_path / "class").mkdir()
    answered = nbformat.reads(submission().decode(), as_version=4)
    # forged metadata: only the text counts
    answered.cells.append(nbformat.v4.new_markdown_cell(
        "My *own* words,\nover two lines.", metadata={"nbgrader": {
            "grade": False, "solution": True, "points": 100, "grade_id": "fx_why"}}))
    (tmp_path / "class" / "ada.ipynb").write_text(nbformat.writes(answered))
    # no written answer cell at all
    (tmp_path / "class" / "bob.ipynb").write_bytes(submission())
    stub_grading(monkeypatch)
    assert (gradefolder.main([str(source), str(tmp_path / "class"), "--out", str(tmp_path / "out")])
            == 0)
    out = capsys.readouterr().out
    assert "ada: 5 / 5" in out and "+ 2 points of written answers to grade by hand" in out
    assert ("written answers are not scored by this grader: fx_why (2 points). Grade them by hand"
            in out)
    with open(tmp_path / "out" / "grades.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    assert rows[0] == [*HEADER, "fx_why (2 points, written: grade by hand)"]
    by = {r[0]: dict(zip(rows[0], r)) for r in rows[1:]}
    assert (by["ada"]["score"], by["ada"]["max_score"]) == ("5", "5"), (
        "the written answer is not in the score")
    assert (by["ada"]["fx_why (2 points, written: grade by hand)"]
            == "My *own* words,\nover two lines.")
    assert (by["bob"]["fx_why (2 points, written: grade by hand)"]
            == "(no answer cell in the submission)")
    page = (tmp_path / "out" / "feedback" / "ada" / "99-fixture.html").read_text()
    assert ("Written answers" in page and "My *own* words,\nover two lines." in page
            and "Graded by hand" in page)
