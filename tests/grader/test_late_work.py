"""Late work, as nbgrader_config.py's example sets it up: a due date in the gradebook, nbgrader's
own late-penalty plugin, and the penalty carried into `nbgrader export` and the LMS file."""

import csv
import subprocess
import sys

import pytest

from corpus._notebook import fixture_course
from course_utils.authoring import nbgrader_cli

# late work is nbgrader's and the config's: the fixture lesson grades in a second
LESSON = "99-fixture"
EXAMPLE = '# c.LateSubmissionPlugin.penalty_method = "zero"'

pytestmark = pytest.mark.slow


def test_the_configs_late_penalty_example_zeroes_a_late_submission(tmp_path):
    course = fixture_course(tmp_path / "course")
    config = course / "nbgrader_config.py"
    assert config.read_text().count(EXAMPLE) == 1, \
        "nbgrader_config.py's late-penalty example changed: update this test"
    config.write_text(config.read_text().replace(EXAMPLE, EXAMPLE.removeprefix("# ")))
    nbgrader_cli.nbgrader("db", "assignment", "add", LESSON, "--duedate=2026-12-07 23:59:00 UTC",
                          cwd=course)
    for student, stamp in (("early", "2026-12-07 23:58:00 UTC"),
                           ("late", "2026-12-08 00:01:00 UTC")):
        where = nbgrader_cli.submit(course, student, LESSON, nbgrader_cli.solved(course, LESSON))
        (where.parent / "timestamp.txt").write_text(stamp)
    nbgrader_cli.autograde(course, LESSON)
    nbgrader_cli.nbgrader("export", cwd=course)
    with open(course / "grades.csv", newline="") as f:
        rows = {r["student_id"]: r for r in csv.DictReader(f)}
    # the autograded points (written answers wait for a grader)
    full = float(rows["early"]["raw_score"])
    assert (full > 0 and float(rows["early"]["score"]) == full
            and float(rows["early"]["late_submission_penalty"]) == 0)
    assert float(rows["late"]["raw_score"]) == full, "the late submission is solved as well"
    assert (float(rows["late"]["late_submission_penalty"]) == full
            and float(rows["late"]["score"]) == 0)

    roster = tmp_path / "roster.csv"
    roster.write_text("id,first_name,last_name,email\nearly,E,A,e@x.org\nlate,L,A,l@x.org\n")
    done = subprocess.run([sys.executable, "-m", "course_admin.grades", "lms",
                           str(course / "grades.csv"), "--roster", str(roster), "--out",
                           str(tmp_path / "lms.csv")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    with open(tmp_path / "lms.csv", newline="") as f:
        lms = {r[0]: r[-1] for r in csv.reader(f)}
    assert float(lms["early"]) == full and float(lms["late"]) == 0, lms
