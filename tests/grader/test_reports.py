"""course_utils.grader.reports: any text can be written, a run merges into grades.csv, and a write that
fails leaves every file as it was. (The folder command end to end: test_gradefolder.py.)"""

import csv
import os
from pathlib import Path

import pytest

from course_utils.grader import lessonfile, reports
from course_utils.grader.grade import Outcome, Result

ROOT = Path(__file__).resolve().parents[2]
LESSON = lessonfile.load_lesson(ROOT / "tests" / "fixtures" / "99-fixture" / "99-fixture.ipynb")


def result(student, scores=(2, 2, 1), message="", notes=()):
    outcomes = {t.gid: Outcome(s, t.points, message if s < t.points else "") for t, s in zip(LESSON.tests, scores)}
    return Result(student, LESSON.name, outcomes, list(notes))


def rows(out: Path) -> list[list[str]]:
    with open(out / "grades.csv", encoding="utf-8", errors="surrogateescape", newline="") as f:
        return list(csv.reader(f))


@pytest.mark.parametrize("text, written", [
    ("plain", "plain"), ("tab\tand\nnewline", "tab\tand\nnewline"), ("bell\x07", "bell\\x07"),
    ("lone \udcff surrogate", "lone \\udcff surrogate"), ("c1 \x85", "c1 \\x85")])
def test_clean_makes_any_text_writable(text, written):
    assert reports.clean(text) == written
    reports.clean(text).encode("utf-8")


@pytest.mark.parametrize("name, written", [("ada", "ada"), ("", "_"), ("..", "_.."), ("a/b", "a\\x2fb"),
                                           ("tab\tname", "tab\\x09name"), (os.fsdecode(b"caf\xe9"), "caf\\xe9")])
def test_a_learners_name_is_written_safely(name, written):
    assert reports.clean_name(name) == written


def test_a_run_merges_into_grades_csv_and_replaces_only_its_learners(tmp_path):
    reports.write_reports([result("ada"), result("bob", (2, 0, 1), "x instead of 2x")], LESSON, tmp_path)
    reports.write_reports([result("bob"), result("cy", (0, 0, 0), "missing")], LESSON, tmp_path)
    got = rows(tmp_path)
    assert got[0] == reports.header(LESSON)
    assert [(r[0], r[2]) for r in got[1:]] == [("ada", "5"), ("bob", "5"), ("cy", "0")]
    assert "fx_scale_test: missing" in got[3][-2]
    assert (tmp_path / "feedback" / "cy" / f"{LESSON.name}.html").is_file()


def test_a_failed_write_leaves_grades_csv_as_it_was(tmp_path, monkeypatch):
    reports.write_reports([result("ada")], LESSON, tmp_path)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    real = os.replace
    calls = []

    def failing_replace(src, dst):
        calls.append(dst)
        if Path(dst).name == "grades.csv":
            raise OSError("disk full")
        return real(src, dst)

    monkeypatch.setattr(reports, "write_new", lambda path, write: (_ for _ in ()).throw(OSError("disk full")))
    with pytest.raises(OSError):
        reports.write_reports([result("ada", (0, 0, 0), "wrong")], LESSON, tmp_path)
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before, "a failed write changes nothing"
    monkeypatch.undo()
    monkeypatch.setattr(reports.os, "replace", failing_replace)
    with pytest.raises(OSError):
        reports.write_reports([result("ada", (0, 0, 0), "wrong")], LESSON, tmp_path)
    assert rows(tmp_path)[1][2] == "5"
    assert not [p for p in tmp_path.rglob("*.tmp")], "no temporary file is left behind"
    assert set(before) == {p for p in tmp_path.rglob("*") if p.is_file()}


def test_grades_of_another_lesson_are_never_mixed_in(tmp_path):
    (tmp_path / "grades.csv").write_text("student,lesson,score\nada,01-circuits,10\n")
    with pytest.raises(reports.BadInput, match="is not a grades.csv of 99-fixture"):
        reports.check_out(tmp_path, LESSON)
    (tmp_path / "grades.csv").unlink()
    (tmp_path / "feedback").write_text("not a folder")
    with pytest.raises(reports.BadInput, match="is not a folder"):
        reports.check_out(tmp_path, LESSON)
