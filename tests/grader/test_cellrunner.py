"""course_utils.grader.cellrunner: a learner's grade() sends only encoded observations; the
reference keeps expect() and a frozen judge and checks itself; judging a learner's observation never
raises; the process speaks one JSON line per command on its reply descriptor."""

import json
import os
import subprocess
import sys

import pytest

from course_utils import judging
from course_utils.grader import cellrunner, protocol


@pytest.fixture
def session(monkeypatch):
    def make(mode):
        s = cellrunner.Session(mode)
        monkeypatch.setattr(judging, "session", s)
        s.gid = "t"
        return s
    return make


def test_a_learners_grade_sends_the_probe_and_nothing_else(session):
    s = session("learner")
    judging.grade(lambda: [1.5, 2], None, None)
    assert s.obs == protocol.encode([1.5, 2]) and s.registry == {}
    judging.grade(lambda: 99, None, None)
    assert s.obs == protocol.encode([1.5, 2]), "one grade() per test cell"


def test_an_observation_too_large_to_send_is_a_problem_not_a_crash(session):
    s = session("learner")
    judging.grade(lambda: "x" * (protocol.MAX_STR + 1), None, None)
    assert s.obs is None and s.problem == "too large"


def test_the_reference_checks_itself_and_keeps_its_judge(session):
    s = session("reference")

    def judge(got, want):
        assert got == want, "wrong"

    judging.grade(lambda: 2, lambda: 2, judge)
    assert s.registry["t"][0] == 2 and s.obs == protocol.encode(2)
    s.gid, s.obs = "u", None
    with pytest.raises(judging.GradingSetupError, match="fails its judge"):
        judging.grade(lambda: 1, lambda: 2, judge)
    s.gid, s.obs = "v", None
    with pytest.raises(judging.GradingSetupError, match="needs expect and judge"):
        judging.grade(lambda: 1, None, None)


def test_judging_a_learner_never_raises(session):
    s = session("reference")
    judging.grade(lambda: [1.0, 2.0], lambda: [1.0, 2.0],
                  lambda got, want: (None if got == want
                                     else (_ for _ in ()).throw(AssertionError(f"got {got}"))))
    assert cellrunner.judge(s, "t", protocol.encode([1.0, 2.0])) == {"ok": True, "message": ""}
    wrong = cellrunner.judge(s, "t", protocol.encode([1.0, 3.0]))
    assert wrong["ok"] is False and "got" in wrong["message"]
    assert "could not read" in cellrunner.judge(s, "t", {"$tensor": 1})["message"]
    assert "no hidden test was recorded" in cellrunner.judge(s, "nope", 1)["message"]
    assert s.judged_peaks is None, "the peaks a judge may read are gone once it returned"


def test_a_judge_that_breaks_on_a_strange_value_names_only_a_builtin_error(session):
    s = session("reference")
    judging.grade(lambda: 1, lambda: 1, lambda got, want: got + 1 and None)
    message = cellrunner.judge(s, "t", protocol.encode("text"))["message"]
    assert message.endswith("(TypeError)") and "text" not in message


def test_test_cells_run_statement_by_statement():
    source = "@dec\ndef f():\n    pass\nx = 1\nassert x == 2"
    assert cellrunner.statements(source) == ["@dec\ndef f():\n    pass", "x = 1", "assert x == 2"]
    assert cellrunner.statements("def (") == ["def ("]


def test_the_worker_process_answers_one_line_per_command():
    read, write = os.pipe()
    limits = {"address_space": 6 * 2 ** 30, "file_bytes": 2 ** 26, "open_files": 512,
              "cpu_seconds": 600, "processes": None}
    proc = subprocess.Popen([sys.executable, "-m", "course_utils.grader.cellrunner",
                             "learner", str(write)],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, pass_fds=(write,), text=True,
                            env={**os.environ, "COURSE_LIMITS": json.dumps(limits)})
    os.close(write)
    replies = os.fdopen(read)
    try:
        assert json.loads(replies.readline()) == cellrunner.READY, (
            "first, before any command: it has started")
        commands = [{"op": "cell", "id": 1, "gid": None, "source": "x = 41"},
                    {"op": "cell", "id": 2, "gid": "t",
                     "source": "from course_utils.judging import grade\n"
                               "grade(lambda: x + 1, None, None)"},
                    {"op": "cell", "id": 3, "gid": None,
                     "source": "class Mine(Exception): pass\nraise Mine('secret')"},
                    {"op": "collect"}, {"op": "teleport"}]
        got = []
        for command in commands:
            proc.stdin.write(json.dumps(command) + "\n")
            proc.stdin.flush()
            got.append(json.loads(replies.readline()))
        assert got[0] == {"id": 1, "error": None, "obs": None, "problem": None}
        assert got[1]["obs"] == 42
        assert got[2]["error"] == judging.raised_name(()), (
            "a class of the learner's own is never named")
        assert got[3] == {"collected": True} and "unknown op" in got[4]["error"]
        proc.stdin.write(json.dumps({"op": "exit"}) + "\n")
        proc.stdin.flush()
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
        replies.close()


def test_a_judge_is_frozen_with_the_globals_it_had():
    """Later cells that rebind a name (CASES) must not change what an earlier test's judge sees."""
    notebook_globals = {}
    exec("CASES = [1]\ndef helper():\n    return CASES\ndef judge(got, want):\n"
         "    assert helper() == [1]", notebook_globals)
    frozen = cellrunner._frozen(notebook_globals["judge"])
    notebook_globals["CASES"] = [2]
    frozen(None, None)
    with pytest.raises(AssertionError):
        notebook_globals["judge"](None, None)


def test_a_checks_verdict_is_named_as_the_assertion_it_is():
    from course_utils.checks import CheckFailed
    assert cellrunner._error_name(CheckFailed("x")) == "AssertionError"
    assert (cellrunner._error_name(type("CheckFailed", (AssertionError,), {})("x"))
            == "AssertionError")


def test_a_learners_exception_class_is_named_by_its_built_in_base_never_by_its_own_name():
    assert cellrunner._error_name(type("ShapeError", (ValueError,), {})("x")) == "ValueError"
    assert (cellrunner._error_name(type("KeyError", (Exception,), {})("x"))
            == judging.raised_name(()))
    assert cellrunner._error_name(type("Oops", (Exception,), {})("x")) == judging.raised_name(())
    assert cellrunner._error_name(StopIteration()) == "StopIteration"



def test_limits_arrive_by_name_and_a_malformed_set_stops_the_runner_before_any_code(monkeypatch):
    """COURSE_LIMITS (course_utils.grader.worker) is a JSON object by name: each applied as soft =
    hard; a key missing or a value that is not a positive int (null only for cpu_seconds and
    processes) stops the runner."""
    import resource
    applied = {}
    monkeypatch.setattr(resource, "setrlimit", lambda which, pair: applied.__setitem__(which, pair))
    good = {"address_space": 3 * 2 ** 30, "file_bytes": 2 ** 20, "open_files": 64,
            "cpu_seconds": 100, "processes": None}
    monkeypatch.setenv("COURSE_LIMITS", json.dumps(good))
    cellrunner._limit_self()
    assert applied == {resource.RLIMIT_AS: (3 * 2 ** 30,) * 2,
                       resource.RLIMIT_FSIZE: (2 ** 20,) * 2,
                       resource.RLIMIT_NOFILE: (64, 64), resource.RLIMIT_CORE: (0, 0),
                       resource.RLIMIT_CPU: (100, 100)}
    for bad in ({k: v for k, v in good.items() if k != "open_files"},
                {**good, "address_space": None},
                {**good, "cpu_seconds": 0.5}, {**good, "extra": 1}, [1, 2]):
        applied.clear()
        monkeypatch.setenv("COURSE_LIMITS", json.dumps(bad))
        with pytest.raises(SystemExit, match="COURSE_LIMITS must name"):
            cellrunner._limit_self()
        assert applied == {}, bad


def test_a_runner_started_without_limits_runs_nothing():
    """Fails closed: without COURSE_LIMITS (started other than by Worker) the runner exits before
    it reads a command, saying how to start it; it never runs a cell unlimited."""
    env = {k: v for k, v in os.environ.items() if k != "COURSE_LIMITS"}
    read, write = os.pipe()
    done = subprocess.run([sys.executable, "-m", "course_utils.grader.cellrunner", "learner",
                           str(write)], input='{"op": "cell", "id": 1, "gid": null, "source": '
                          '"open(\'/tmp/ran\', \'w\')"}\n', pass_fds=(write,), env=env,
                          capture_output=True, text=True, timeout=120)
    os.close(write)
    with os.fdopen(read) as replies:
        assert replies.read() == "", "no reply: not even ready"
    assert done.returncode != 0 and "COURSE_LIMITS is not set" in done.stderr, done.stderr
