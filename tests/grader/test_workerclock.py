"""course_utils.grader.workerclock: a worker's own time leaves out the time the machine kept it
waiting, and only that: not the time its own threads kept each other waiting."""

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from course_utils.grader.workerclock import Clock

pytestmark = pytest.mark.skipif(not os.path.exists(f"/proc/{os.getpid()}/schedstat")
                                or shutil.which("taskset") is None,
                                reason="needs Linux's /proc/PID/schedstat and util-linux taskset")

SPIN = "while :; do :; done"


def _spawn(*command):
    # A session each: with autogroup scheduling, processes of one session would share one CPU
    # weight.
    return subprocess.Popen(["taskset", "-c", "0", *command], start_new_session=True)


def test_sleeping_is_own_time_and_no_cpu():
    proc = _spawn(sys.executable, "-c", "import time; time.sleep(2)")
    try:
        clock = Clock(proc.pid)
        proc.wait(timeout=60)
        r = clock.read()
    finally:
        proc.kill()
    assert r.wall >= 1.5 and r.own >= 1.5, \
        f"a second and a half of sleep is the code's own time: {r}"
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
    assert r.own < r.wall / 2 and r.cpu < r.wall / 2, \
        f"the worker's own time and CPU time are its share: {r}"


def test_a_process_tree_counts_its_children():
    code = ("import os, time\nif os.fork() == 0:\n    t = time.process_time()\n"
            "    while time.process_time() - t < 1.5: pass\n"
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


def _worker(code: str) -> subprocess.Popen:
    """A worker-like Python process on CPU 0, in a session (and process group) of its own, started
    once it has printed its first line."""
    proc = subprocess.Popen(["taskset", "-c", "0", sys.executable, "-c", code],
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout.readline() == "ready\n"
    return proc


def _measure(proc, seconds: float):
    """The worker's clock over `seconds`, read every 0.1 s as course_utils.grader.worker reads
    it."""
    clock = Clock(proc.pid)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.1)
        r = clock.read()
    return r


def test_sleeping_beside_its_own_spinners_is_own_time():
    """The red team's answer: its main thread sleeps while it keeps more spinners busy than it has
    CPUs (three child processes on one CPU: each waits for the CPU two thirds of the time). That
    wait is the answer's own doing: its sleep is its own time. On one CPU, whatever else the machine
    runs, no more can be forgiven than the time its spinners did not have the CPU (wall - cpu), so
    own >= cpu, and own is about the wall clock on a quiet machine; the rule before forgave the
    largest spinner's wait: own was a third of cpu (quiet) or less."""
    spin = f"subprocess.Popen(['sh', '-c', {SPIN!r}])"
    proc = _worker(f"import subprocess, time\nspinners = [{spin} for _ in range(3)]\n"
                   "print('ready', flush=True)\n"
                   "time.sleep(60)")
    try:
        time.sleep(0.3)
        r = _measure(proc, 2.0)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert r.wall >= 1.9, r
    # (0.1 s: the process tree's CPU time is counted in ticks)
    assert r.own >= 0.9 * r.cpu - 0.1, \
        f"a sleep beside its own spinners is the answer's own time: {r}"


def test_a_busy_thread_beside_idle_ones_still_gets_its_wait_forgiven():
    """A single-threaded cell in a process with idle threads (a thread pool, as torch keeps), its
    CPU shared with three busy processes of other users: it waits about 3/4 of the time, and that
    wait is the machine's even though its idle threads never waited."""
    code = ("import threading\nstop = threading.Event()\n"
            "for _ in range(4):\n    threading.Thread(target=stop.wait, daemon=True).start()\n"
            "print('ready', flush=True)\nwhile True:\n    pass")
    hogs = [_spawn("sh", "-c", SPIN) for _ in range(3)]
    try:
        proc = _worker(code)
        hogs.append(proc)
        time.sleep(0.3)
        r = _measure(proc, 3.0)
    finally:
        for p in hogs:
            p.kill()
            p.wait()
    assert r.held > r.wall / 2, f"most of the wall clock was spent waiting for the CPU: {r}"
    assert r.own < r.wall / 2, f"the worker's own time is its share: {r}"
