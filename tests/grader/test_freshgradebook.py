"""course_utils.grader.freshgradebook: Formgrader shows the gradebook as it is now.

The instructor's server as course.sh configures it (tests/grader/test_autograde_lesson.py's Server:
a real jupyter server on a scratch course with the instructor's server extensions), a grade changed
by another process between two of its requests. The hub's instructor and teaching assistant:
tests/hub/test_hub.py.
"""

import pytest

from corpus._notebook import fixture_course
from course_utils.authoring import nbgrader_cli
from test_autograde_lesson import LESSON, Server

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    course = fixture_course(tmp_path_factory.mktemp("course"))
    nbgrader_cli.submit(course, "solved", LESSON, nbgrader_cli.solved(course, LESSON))
    done = nbgrader_cli.autograde(course, LESSON)   # the submission's grades in the gradebook
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    made = Server(course, tmp_path_factory.mktemp("log") / "server.log")
    made.course = course
    yield made
    made.stop()


def test_formgrader_shows_a_grade_another_process_changed(server):
    """Formgrader keeps one database session per server; a hand score saved by another process
    (another grader's server, a terminal) shows at the next request
    (course_utils.grader.freshgradebook), not only after this server saves something."""
    from nbgrader.api import Gradebook
    status, notebooks = server.request("GET",
                                       f"/formgrader/api/submitted_notebooks/{LESSON}/{LESSON}")
    assert status == 200 and notebooks, (status, notebooks)
    submission = next(n["id"] for n in notebooks if n["student"] == "solved")
    status, grades = server.request("GET", f"/formgrader/api/grades?submission_id={submission}")
    assert status == 200 and grades, (status, grades)
    grade = grades[0]
    # another process's session
    with Gradebook(f"sqlite:///{server.course / 'gradebook.db'}") as gb:
        row = gb.find_grade_by_id(grade["id"])
        row.manual_score = (grade["manual_score"] or 0) + 0.25
        gb.db.commit()
        changed = row.manual_score
    status, again = server.request("GET", f"/formgrader/api/grades?submission_id={submission}")
    assert status == 200 and {g["id"]: g for g in again}[grade["id"]]["manual_score"] == changed, (
        grade, again)
