"""course_utils.grader.cgroups: a worker's memory and process cgroup (grading as root)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from course_utils.grader import cgroups
from course_utils.grader.cgroups import Cgroup

def _can_make() -> bool:
    if os.geteuid() != 0:
        return False
    c = Cgroup(f"course-test-{os.getpid()}", 2 ** 30, 8)
    made = bool(c.dirs)
    c.remove()
    return made


pytestmark = pytest.mark.skipif(not _can_make(), reason="needs root and a cgroup file system it "
                                                        "can write (a container or VM; CI has one)")


def _parents() -> list[Path]:
    base = Path("/sys/fs/cgroup")
    return [base] if (base / "cgroup.controllers").exists() else [base / "memory", base / "pids"]


def test_names_are_unique_and_removed():
    a, b = (Cgroup(f"course-test-{os.getpid()}", 2 ** 30, 8),
            Cgroup(f"course-test-{os.getpid()}", 2 ** 30, 8))
    made = a.dirs + b.dirs
    try:
        assert a.dirs and b.dirs and a.dirs[0] != b.dirs[0], (
            "a reused name (a reused pid) must not collide")
        assert all(d.is_dir() for d in made)
    finally:
        a.remove()
        b.remove()
    assert not any(d.exists() for d in made)


def test_limits_are_written():
    c = Cgroup(f"course-test-{os.getpid()}", 2 ** 30, 8)
    try:
        memory = c.dirs[0]
        limit = memory / ("memory.max" if (memory / "memory.max").exists()
                          else "memory.limit_in_bytes")
        assert int(limit.read_text()) == 2 ** 30
        if (memory / "memory.kmem.tcp.limit_in_bytes").exists():
            assert int((memory / "memory.kmem.tcp.limit_in_bytes").read_text()) == cgroups.TCP_BYTES
    finally:
        c.remove()


def test_the_empty_cgroups_of_a_killed_grader_are_swept():
    gone = subprocess.Popen(["true"])
    gone.wait()  # its pid now names a grader that is gone
    left = [p / f"course-sandbox-{gone.pid}-42-0-deadbeef" for p in _parents()]
    mine = [p / f"course-sandbox-{os.getpid()}-42-0-cafef00d" for p in _parents()]
    for d in left + mine:
        d.mkdir()
    try:
        cgroups._sweep(_parents())
        assert not any(d.exists() for d in left), "a gone grader's empty cgroups are removed"
        assert all(d.exists() for d in mine), "a running grader's are kept"
    finally:
        for d in left + mine:
            if d.exists():
                d.rmdir()


def test_a_worker_cgroup_has_a_cpu_share_and_quota_and_counts_cpu_time():
    c = Cgroup(f"course-test-{os.getpid()}", 2 ** 30, 8, cpus=1.5)
    if not c.cpu:
        c.remove()
        pytest.skip("this machine gives no cpu controller: the grader's warning says so")
    busy = subprocess.Popen(["sh", "-c", 'for d in "$@"; do echo $$ > "$d/cgroup.procs"; done; '
                                         'end=$(($(date +%s) + 2)); '
                                         'while [ $(date +%s) -lt $end ]; do :; done', "sh",
                             *map(str, c.dirs)])
    try:
        busy.wait(timeout=120)
        used = c.cpu_seconds()
        assert used is not None and used > 0.5, ("the cgroup counts the CPU time of processes "
                                                 f"that ran in it: {used}")
        quota = next((d / "cpu.cfs_quota_us" for d in c.dirs if (d / "cpu.cfs_quota_us").exists()),
                     None)
        if quota is not None:
            assert int(quota.read_text()) == 150_000
        else:
            assert (c.dirs[0] / "cpu.max").read_text().split() == ["150000", "100000"]
    finally:
        busy.kill()
        c.remove()


def test_process_creation_can_be_refused_and_the_refusals_are_counted():
    """limit_processes(0) refuses every new process and thread of the cgroup's processes, those
    running go on; pids.events counts each refusal (course_utils.grader.worker.forbid_processes
    reads it)."""
    c = Cgroup(f"course-test-{os.getpid()}", 2 ** 30, 8)
    code = ("import os, sys, threading\n"
            "for d in sys.argv[1:]:\n"
            "    open(os.path.join(d, 'cgroup.procs'), 'w').write(str(os.getpid()))\n"
            "print('in', flush=True); sys.stdin.readline()\n"
            "def attempt(f):\n    try:\n        f()\n        return 'ok'\n"
            "    except Exception as e:\n        return type(e).__name__\n"
            "def fork():\n    pid = os.fork()\n    if pid == 0:\n        os._exit(0)\n"
            "    os.waitpid(pid, 0)\n"
            "def thread():\n    t = threading.Thread(target=lambda: None)\n    t.start()\n"
            "    t.join()\n"
            "print(attempt(fork), attempt(thread), flush=True); sys.stdin.readline()\n"
            "print(attempt(fork), attempt(thread), flush=True)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, *map(str, c.dirs)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "in"
        before = c.processes_refused()
        assert before == 0 and c.limit_processes(0)
        proc.stdin.write("\n")
        proc.stdin.flush()
        assert proc.stdout.readline().split() == ["BlockingIOError", "RuntimeError"], (
            "neither a process nor a thread")
        assert c.processes_refused() >= 2
        assert c.limit_processes(8)
        proc.stdin.write("\n")
        proc.stdin.flush()
        assert proc.stdout.readline().split() == ["ok", "ok"], "lifted again"
    finally:
        proc.kill()
        proc.wait()
        c.remove()
    assert c.limit_processes(0) is False and c.processes_refused() is None, (
        "a removed cgroup limits nothing")
