"""course_utils.grader.autograde_lesson: a whole lesson autograded in one action from the
instructor's server.

A real jupyter server on a scratch course (the fixture lesson released, a solved and an untouched
submission), with the instructor's server extensions (Formgrader and this one, as course.sh writes
them); requests with its token. The page's button in a browser, on the hub: tests/hub/test_hub.py.
"""

import json
import os
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from corpus._notebook import fixture_course
from course_utils.authoring import nbgrader_cli

pytestmark = pytest.mark.slow

# made by `bash course.sh setup`
INSTRUCTOR_CONFIG = Path(sys.prefix) / "etc" / "jupyter-instructor"
# the page runs nbgrader's autograde on whatever lesson: the fixture grades in seconds
LESSON = "99-fixture"


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, course: Path, log: Path):
        self.port, self.token = free_port(), secrets.token_hex(16)
        env = {**os.environ, "PATH": str(Path(sys.executable).parent) + os.pathsep
               + os.environ.get("PATH", "")}
        env.pop("NBGRADER_EXECUTION", None)
        # the instructor's server extensions, from course.sh
        env["JUPYTER_CONFIG_PATH"] = str(INSTRUCTOR_CONFIG)
        cmd = [sys.executable, "-m", "jupyter_server", "--no-browser", "--ServerApp.ip=127.0.0.1",
               f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0",
               f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={course}"]
        if os.geteuid() == 0:
            cmd.append("--allow-root")
        self.log = log
        self.proc = subprocess.Popen(cmd, cwd=course, env=env, stdout=log.open("w"),
                                     stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while self.request("GET", "/api/status")[0] != 200:
            assert self.proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)

    def request(self, method: str, path: str):
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method=method,
                                     data=b"" if method == "POST" else None,
                                     headers={"Authorization": f"token {self.token}"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                status, text = r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            status, text = e.code, e.read().decode(errors="replace")
        except OSError:
            return 0, ""
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text

    def children(self) -> list[str]:
        """The command lines of the server's descendant processes."""
        found, parents = [], {self.proc.pid}
        for _ in range(5):
            for status in Path("/proc").glob("[0-9]*/status"):
                try:
                    fields = dict(line.split(":\t", 1) for line in status.read_text().splitlines()
                                  if ":\t" in line)
                    pid, ppid = int(status.parent.name), int(fields["PPid"])
                    if ppid in parents and pid not in parents:
                        parents.add(pid)
                        found.append(
                            (status.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode())
                except (OSError, KeyError, ValueError):
                    continue
        return found

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    course = fixture_course(tmp_path_factory.mktemp("course"))
    nbgrader_cli.submit(course, "solved", LESSON, nbgrader_cli.solved(course, LESSON))
    nbgrader_cli.submit(course, "untouched", LESSON, nbgrader_cli.untouched(course, LESSON))
    made = Server(course, tmp_path_factory.mktemp("log") / "server.log")
    made.course = course
    yield made
    made.stop()


def test_one_press_autogrades_every_submission_and_leaves_nothing_running(server):
    status, page = server.request("GET", "/course/autograde")
    assert status == 200 and LESSON in page and "Autograde every submission" in page, (
        status, str(page)[:2000])
    status, started = server.request("POST", f"/course/autograde/{LESSON}")
    assert status == 200 and started["running"], (status, started)
    status, again = server.request("POST", f"/course/autograde/{LESSON}")
    assert status == 409 and f"{LESSON} is being autograded" in again["error"], (status, again)
    # against a hang only: the grader bounds each submission by its own time
    deadline = time.monotonic() + 600
    while (state := server.request("GET", f"/course/autograde/{LESSON}")[1])["running"]:
        assert time.monotonic() < deadline, state
        time.sleep(1)
    assert state["returncode"] == 0, state["log"]
    scores = nbgrader_cli.scores(server.course, LESSON)
    assert set(scores) == {"solved", "untouched"}, scores
    assert scores["solved"][0] == scores["solved"][1] > 0 and scores["untouched"][0] == 0, scores
    left = [c for c in server.children() if "cellrunner" in c or "nbgrader" in c]
    assert not left, left


def test_only_a_lesson_of_the_course_is_graded_and_errors_come_as_json(server):
    for name in ("no-such-lesson", "..", "01-circuits;rm"):
        for method in ("POST", "GET"):
            status, answer = server.request(
                method, f"/course/autograde/{urllib.request.quote(name, safe='')}")
            assert status == 404 and "in the course" in answer["error"], (name, method,
                                                                          status, answer)


def test_two_servers_on_one_course_autograde_one_at_a_time(server, tmp_path):
    """The hub's course service and the instructor's own server share a course: while one server's
    run holds the course's lock (a file in the course, held by the run's process), the other's press
    is refused (409), and accepted again once that run ended."""
    other = Server(server.course, tmp_path / "other.log")
    try:
        status, started = server.request("POST", f"/course/autograde/{LESSON}")
        assert status == 200 and started["running"], (status, started)
        status, refused = other.request("POST", f"/course/autograde/{LESSON}")
        assert (status == 409 and "another grader's server is autograding this course"
                in refused["error"]), (status, refused)
        deadline = time.monotonic() + 600
        while (state := server.request("GET", f"/course/autograde/{LESSON}")[1])["running"]:
            assert time.monotonic() < deadline, state
            time.sleep(1)
        assert state["returncode"] == 0, state["log"]
        status, started = other.request("POST", f"/course/autograde/{LESSON}")
        assert status == 200 and started["running"], (status, started)
        while other.request("GET", f"/course/autograde/{LESSON}")[1]["running"]:
            assert time.monotonic() < deadline
            time.sleep(1)
    finally:
        other.stop()

