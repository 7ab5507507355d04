"""course_utils.grader.workerclock: a worker's own time leaves out the time the machine kept it waiting."""

import os
import shutil
import subprocess
import sys
import time

import pytest

from course_utils.grader.workerclock import Clock

pytestmark = pytest.mark.skipif(not os.path.exists(f"/proc/{os.getpid()}/schedstat") or shutil.which("taskset") is None,
                                reason="needs Linux's /proc/PID/schedstat and util-linux taskset")

SPIN = "while :; do :; done"


def _spawn(*command):
    # A session each: with autogroup scheduling, processes of one session would share one CPU weight.
    return subprocess.Popen(["taskset", "-c", "0", *command], start_new_session=True)


def test_sleeping_is_own_time_and_no_cpu():
    proc = _spawn(sys.executable, "-c", "import time; time.sleep(2)")
    try:
        clock = Clock(proc.pid)
        proc.wait(timeout=60)
        r = clock.read()
    finally:
        proc.kill()
    assert r.wall >= 1.5 and r.own >= 1.5, f"a second and a half of sleep is the code's own time: {r}"
    assert r.cpu < 1.0, f"sleeping uses no CPU: {r}"


def test_waiting_for_a_cpu_is_not_own_time():
    """A busy process sharing one CPU with three others: it waits about 3/4 of the time."""
    hogs = [_spawn("sh", "-c", SPIN) for _ in range(3)]
    worker = _spawn("sh", "-c", SPIN)
    try:
        time.sleep(0.5)
        clock = Clock(worker.pid)
        time.sleep(3)
        r = clock.read()
    finally:
        for p in hogs + [worker]:
            p.kill()
            p.wait()
    assert r.held > r.wall / 2, f"most of the wall clock was spent waiting for the CPU: {r}"
    assert r.own < r.wall / 2 and r.cpu < r.wall / 2, f"the worker's own time and CPU time are its share: {r}"


def test_a_process_tree_counts_its_children():
    code = ("import os, time\nif os.fork() == 0:\n    t = time.process_time()\n    while time.process_time() - t < 1.5: pass\n"
            "    os._exit(0)\nos.wait()\nprint('done', flush=True)\ntime.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        clock = Clock(proc.pid)
        assert proc.stdout.readline() == "done\n"
        r = clock.read()
    finally:
        proc.kill()
        proc.wait()
    assert r.cpu >= 1.0, f"a child's CPU time (waited for) counts: {r}"
