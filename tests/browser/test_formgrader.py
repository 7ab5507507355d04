"""Written answers graded by hand in nbgrader's Formgrader, in a real browser.

In a scratch course (course_utils.authoring.nbgrader_cli.scratch_course) one learner's solved
submission of a lesson, with a written answer in their own words, is autograded; JupyterLab with the
instructor's tools (the Formgrader's server extension, as `COURSE_ROLE=instructor bash course.sh lab`
enables it) serves that course; on the Formgrader's manual grading page of the submission the
written answer shows as the learner wrote it, a score is typed into its score box, and that score
reaches `nbgrader export`'s grades.csv and the LMS file of `course_utils.grader.classgrades lms`.
"""

import csv
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from browser_lab import start_lab, stop_lab
from course_utils.authoring import nbgrader_cli

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
NAME = "01-circuits"
INSTRUCTOR_CONFIG = Path(sys.prefix) / "etc" / "jupyter-instructor"   # made by `bash course.sh setup`
WORDS = "The add gate passes z on unchanged, so x never shows up."


def written_answer(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    return next(c for c in nb.cells if c.cell_type == "markdown" and c.metadata.get("nbgrader", {}).get("solution"))


def manual_score(course: Path, grade_id: str) -> float | None:
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return gb.find_grade(grade_id, NAME, NAME, "ada").manual_score


def test_a_score_typed_in_formgrader_reaches_the_export(browser, tmp_path):
    assert (INSTRUCTOR_CONFIG / "jupyter_server_config.json").is_file(), \
        f"no {INSTRUCTOR_CONFIG} (the instructor's JupyterLab configuration): run `bash course.sh setup`"
    course = nbgrader_cli.scratch_course(ROOT, tmp_path / "course", [NAME])
    nb = nbgrader_cli.solved(course, NAME)
    answer = written_answer(nb)
    gid, points = answer.metadata.nbgrader["grade_id"], float(answer.metadata.nbgrader["points"])
    answer.source = WORDS
    nbgrader_cli.submit(course, "ada", NAME, nb)
    nbgrader_cli.autograde(course, NAME)
    autograded, max_autograded = nbgrader_cli.scores(course, NAME)["ada"]
    assert autograded == max_autograded > 0 and nbgrader_cli.written(course, NAME)["ada"][gid] == (0.0, points, True)
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        submission_id = gb.find_submission_notebook(NAME, NAME, "ada").id

    lab = start_lab(course, tmp_path / "settings", {"JUPYTER_CONFIG_PATH": str(INSTRUCTOR_CONFIG)})
    page = browser.new_page()
    try:
        page.goto(lab.url("/lab"))   # logs in (the token sets the cookie the Formgrader's own requests need)
        page.goto(lab.base + f"/formgrader/submissions/{submission_id}/")
        box = page.locator(f"input.score.needs_manual_grade[id='{gid}']")   # marked for grading by hand
        box.wait_for(timeout=30_000)
        assert WORDS in page.content(), "the Formgrader shows the written answer as the learner wrote it"
        box.fill("1.5")
        box.press("Tab")   # the score is saved when the box loses focus (a change event)
        deadline = time.monotonic() + 20
        while manual_score(course, gid) != 1.5 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert manual_score(course, gid) == 1.5, f"the typed score did not reach the gradebook:\n{lab.log_tail()}"
    finally:
        page.close()
        stop_lab(lab)

    nbgrader_cli.nbgrader("export", cwd=course)
    with open(course / "grades.csv", newline="") as f:
        row = next(r for r in csv.DictReader(f) if r["student_id"] == "ada")
    assert (float(row["score"]), float(row["max_score"])) == (autograded + 1.5, max_autograded + points)

    roster = tmp_path / "roster.csv"
    roster.write_text("id,first_name,last_name,email\nada,Ada,Lovelace,ada@example.org\n")
    lms = subprocess.run([sys.executable, "-m", "course_utils.grader.classgrades", "lms", "--roster", roster,
                          "--out", tmp_path / "moodle.csv", course / "grades.csv"], capture_output=True, text=True)
    assert lms.returncode == 0, lms.stderr
    with open(tmp_path / "moodle.csv", newline="") as f:
        header, ada = list(csv.reader(f))
    assert ada[-1] == f"{autograded + 1.5:g}" and header[-1] == f"Total ({max_autograded + points:g} points)"
