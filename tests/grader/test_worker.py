"""course_utils.grader.worker: limits are checked, a hung or dying worker is stopped and its death is
named, and every process it started goes with it."""

import subprocess
import sys
import time
from pathlib import Path

import pytest

from course_utils.grader.capabilities import isolation
from course_utils.grader.worker import Limits, Worker, WorkerDied

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def cell(source, i=0):
    return {"op": "cell", "id": i, "gid": None, "source": source}


def test_limits_and_modes_are_checked():
    with pytest.raises(ValueError, match="cell_seconds"):
        Limits(cell_seconds=0)
    with pytest.raises(ValueError, match="mode"):
        Worker("student")
    with pytest.raises(ValueError, match="slot"):
        Worker("learner", slot=-1)


def test_a_worker_runs_cells_and_reports_builtin_errors():
    with Worker("learner", Limits(), slot=11) as w:
        assert w.send(cell("x = 41"), 60) == {"id": 0, "error": None, "obs": None, "problem": None}
        assert w.send(cell("x + undefined", 1), 60)["error"] == "NameError"
        assert w.send(cell("class Mine(Exception): pass\nraise Mine('secret text')", 2), 60)["error"] == \
            "an exception of the code's own type"


def test_a_hung_worker_is_killed_with_everything_it_started():
    source = ("import os, signal, subprocess\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
              "subprocess.Popen(['sleep', '300'], start_new_session=True)\nwhile True:\n    pass")
    w = Worker("learner", Limits(), slot=12)
    w.start()
    pid = w.proc.pid
    start = time.monotonic()
    with pytest.raises(WorkerDied, match="time limit of 3 s"):
        w.send(cell(source), timeout=3)
    assert time.monotonic() - start < 15
    assert w.proc is None
    if isolation() == "root":  # the PID namespace ends with its first process: the escaped sleep is gone too
        deadline = time.monotonic() + 10  # the kernel kills the namespace's processes at once, reaps them soon after
        while left := subprocess.run(["pgrep", "-u", "60012"], capture_output=True, text=True).stdout.split():
            assert time.monotonic() < deadline, f"processes outlived the sandbox: {left}"
            time.sleep(0.2)
    with pytest.raises(ProcessLookupError):
        import os
        os.kill(pid, 0)


@pytest.mark.parametrize("source, words", [
    ("import os\nos._exit(7)", "exit code 7"),
    ("import ctypes\nctypes.string_at(0)", "segmentation fault"),
])
def test_a_dying_worker_is_named(source, words):
    with Worker("learner", Limits(), slot=13) as w:
        with pytest.raises(WorkerDied, match=words):
            w.send(cell(source), 60)


def test_the_sandbox_dies_with_the_grader():
    """A grader killed mid-run (Ctrl-C twice, OOM killer) leaves no learner code running."""
    if isolation() != "root":
        pytest.skip("looks for the sandbox's own uid: needs grading as root with util-linux unshare and setpriv")
    code = ("from course_utils.grader.worker import Worker, Limits\n"
            "w = Worker('learner', Limits(), slot=42); w.start()\n"
            "w.proc.stdin.write(b'{\"op\": \"cell\", \"id\": 0, \"gid\": null, \"source\": \"while True: pass\"}\\n')\n"
            "w.proc.stdin.flush(); print('started', flush=True)\nimport time; time.sleep(120)\n")
    grader = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert grader.stdout.readline().strip() == "started"
    deadline = time.monotonic() + 30  # the worker starts as its own user once its sandbox is set up
    while subprocess.run(["pgrep", "-u", "60042"], capture_output=True).returncode != 0:
        assert time.monotonic() < deadline, "the learner's code never started"
        time.sleep(0.2)
    time.sleep(1)  # and is now in its loop
    grader.kill()
    grader.wait()
    deadline = time.monotonic() + 10
    while subprocess.run(["pgrep", "-u", "60042"], capture_output=True).returncode == 0:
        assert time.monotonic() < deadline, "the learner's code outlived the grader"
        time.sleep(0.2)


# What the learner's code sees from inside its sandbox, sent back as plain data.
def test_time_limits_count_the_workers_own_time():
    """A cell that sleeps is charged its sleep; one that waits for the CPU is not charged the wait."""
    with Worker("learner", Limits(), slot=18) as w:
        w.send(cell("import time"), 60)
        before = w.own_seconds
        w.send(cell("time.sleep(1.5)", 1), 60)
        assert w.own_seconds - before >= 1.5
        with pytest.raises(WorkerDied, match="time limit of 1 s"):
            w.send(cell("time.sleep(30)", 2), 1)
