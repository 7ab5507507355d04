"""course_utils.grader.worker: limits are checked, a hung or dying worker is stopped and its death
is named, and every process it started goes with it."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from course_utils.grader.capabilities import isolation
from course_utils.grader.sandbox import FIRST_UID
from course_utils.grader.worker import Limits, Overloaded, Worker, WorkerDied
from course_utils.grader.workerclock import Reading

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


def test_torchs_threads_are_the_limits_and_gradings_side_by_side_share_the_cores(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert Limits().threads == 3                 # what the grading process was given
    for said in ("", "0", "4,2", "many", "\u00b2"):
        monkeypatch.setenv("OMP_NUM_THREADS", said)
        assert Limits().threads == 2, said       # unset or not one positive number: torch's 2
    with pytest.raises(ValueError, match="threads"):
        Limits(threads=1.5)
    with pytest.raises(ValueError, match="below Limits.processes"):
        Limits(threads=8, processes=8)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(4)))
    assert [Limits(threads=t).shared_by(n).threads
            for t, n in ((2, 1), (2, 2), (2, 3), (2, 8), (8, 2))] == [2, 2, 1, 1, 2]
    assert Limits(threads=2, cpus=1.5).shared_by(2).cpus == 1.5   # only the threads change
    # the worker takes its limits' threads, not this process's
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    for threads in (1, 2):
        with Worker("learner", Limits(threads=threads), slot=19) as w:
            check = (f"import torch\nassert torch.get_num_threads() == {threads}, "
                     "torch.get_num_threads()")
            assert w.send(cell(check), 60)["error"] is None, threads


def test_a_worker_runs_cells_and_reports_builtin_errors():
    with Worker("learner", Limits(), slot=11) as w:
        assert w.send(cell("x = 41"), 60) == {"id": 0, "error": None, "obs": None, "problem": None}
        assert w.send(cell("x + undefined", 1), 60)["error"] == "NameError"
        assert w.send(cell("class Mine(Exception): pass\nraise Mine('secret text')", 2),
                      60)["error"] == "an exception of the code's own type"


def test_a_hung_worker_is_killed_with_everything_it_started():
    source = ("import os, signal, subprocess\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
              "subprocess.Popen(['sleep', '300'], start_new_session=True)\nwhile True:\n    pass")
    # uid 64012: a slot no grader uses (they take slot % 4000)
    w = Worker("learner", Limits(), slot=4012)
    w.start()
    pid = w.proc.pid
    start = time.monotonic()
    with pytest.raises(WorkerDied, match="time limit of 3 s"):
        w.send(cell(source), timeout=3)
    assert time.monotonic() - start < 15
    assert w.proc is None
    # the PID namespace ends with its first process: the escaped sleep is gone too
    if isolation() == "root":
        # the kernel kills the namespace's processes at once, reaps them soon after
        deadline = time.monotonic() + 10
        while left := subprocess.run(["pgrep", "-u", str(FIRST_UID + 4012)], capture_output=True,
                                     text=True).stdout.split():
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
        pytest.skip("looks for the sandbox's own uid: needs grading as root with util-linux "
                    "unshare and setpriv")
    code = ("from course_utils.grader.worker import Worker, Limits\n"
            # a slot no grader uses: its uid is this test's alone
            "w = Worker('learner', Limits(), slot=4042); w.start()\n"
            "w.proc.stdin.write(b'{\"op\": \"cell\", \"id\": 0, \"gid\": null, "
            "\"source\": \"while True: pass\"}\\n')\n"
            "w.proc.stdin.flush(); print('started', flush=True)\nimport time; time.sleep(120)\n")
    grader = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert grader.stdout.readline().strip() == "started"
    deadline = time.monotonic() + 30  # the worker starts as its own user once its sandbox is set up
    while subprocess.run(["pgrep", "-u", str(FIRST_UID + 4042)],
                         capture_output=True).returncode != 0:
        assert time.monotonic() < deadline, "the learner's code never started"
        time.sleep(0.2)
    time.sleep(1)  # and is now in its loop
    grader.kill()
    grader.wait()
    deadline = time.monotonic() + 10
    while subprocess.run(["pgrep", "-u", str(FIRST_UID + 4042)],
                         capture_output=True).returncode == 0:
        assert time.monotonic() < deadline, "the learner's code outlived the grader"
        time.sleep(0.2)


# What the learner's code sees from inside its sandbox, sent back as plain data.
def test_time_limits_count_the_workers_own_time():
    """A cell that sleeps is charged its sleep; one that waits for the CPU is not charged the
    wait."""
    with Worker("learner", Limits(), slot=18) as w:
        w.send(cell("import time"), 60)
        before = w.own_seconds
        w.send(cell("time.sleep(1.5)", 1), 60)
        # all of the sleep but what another thread of the worker waited for a CPU meanwhile, with
        # none of its threads running (workerclock's rule: milliseconds on a busy machine, as beside
        # another test worker)
        assert w.own_seconds - before >= 1.4
        with pytest.raises(WorkerDied, match="time limit of 1 s"):
            w.send(cell("time.sleep(30)", 2), 1)


def test_a_command_held_up_past_the_overload_factor_is_the_machines(monkeypatch):
    """Wall time past Limits.overload_factor times the limit, all of it waiting for a CPU (a reading
    as a busy machine gives it: ten times the real wall time), is Overloaded (graded again), not the
    learner's time limit; under the factor the same command simply finishes."""
    for factor, held_up in ((100, False), (3, True)):
        with Worker("learner", Limits(overload_factor=factor), slot=18) as w:
            w.send(cell("import time"), 60)
            real = w.clock.read
            monkeypatch.setattr(w.clock, "read", lambda: Reading(wall=10 * real().wall, cpu=0.0,
                                                                 held=10 * real().wall))
            if held_up:
                with pytest.raises(Overloaded, match="too busy"):
                    w.send(cell("time.sleep(1.2)", 1), 0.5)
            else:
                w.send(cell("time.sleep(1.2)", 1), 0.5)


# A cell that tries a child process (os.fork, as multiprocessing's fork context does), a thread and
# a subprocess, and sends back what each did ("ok" or the exception's name).
ATTEMPTS = """import os, subprocess, threading
from course_utils.judging import grade

def attempt(f):
    try:
        f()
        return "ok"
    except Exception as e:
        return type(e).__name__

def fork():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)

def thread():
    t = threading.Thread(target=lambda: None)
    t.start()
    t.join()

grade(lambda: [attempt(fork), attempt(thread), attempt(lambda: subprocess.run(["true"]))],
      None, None)
"""
REFUSED = ["BlockingIOError", "RuntimeError", "BlockingIOError"]


def test_no_process_or_thread_can_be_started_while_forbidden():
    """forbid_processes: the kernel refuses the worker every new process and thread (a rule checked
    in the learner's own process cannot fall to a child); as root it is lifted again after the cell,
    and the cgroup counted the refusals. A normal user cannot lift it: that worker stays without
    them."""
    with Worker("learner", Limits(), slot=14) as w:
        assert w.send(cell(ATTEMPTS), 60)["obs"] == ["ok", "ok", "ok"]
        counts = _counts_refusals(w)
        assert w.allow_processes() is None, "nothing was forbidden"
        w.forbid_processes()
        assert w.send(cell(ATTEMPTS, 1), 60)["obs"] == REFUSED
        refused = w.allow_processes()
        after = w.send(cell(ATTEMPTS, 2), 60)["obs"]
        w.forbid_processes()
        assert w.send(cell("x = 1", 3), 60)["error"] is None
        quiet = w.allow_processes()
    if counts:   # a pids cgroup: grading as root
        assert refused is True and quiet is False, "the kernel's count says who tried"
        assert after == ["ok", "ok", "ok"], "allowed again after the cell"
    else:
        assert refused is None and after == REFUSED, "a normal user cannot raise the limit again"


def test_processes_left_by_earlier_cells_are_gone_before_a_forbidden_cell():
    """A helper started earlier and fed through a pipe would do the forbidden work: forbid_processes
    kills every process of the worker but its own, orphans in their own session included."""
    started = ("import multiprocessing, os, subprocess, time\n"
               "helper = multiprocessing.get_context('fork').Process(target=time.sleep, "
               "args=(300,))\n"
               "helper.start()\n"
               "orphan = subprocess.Popen(['sh', '-c', 'setsid sleep 300 & echo $!'], "
               "stdout=subprocess.PIPE,\n"
               "                          text=True)\n"
               "orphan = int(orphan.stdout.readline())\n"
               "def alive(pid):\n"
               "    try:\n"
               "        os.kill(pid, 0)\n"
               "        return open(f'/proc/{pid}/stat').read().split()[2] != 'Z'\n"
               "    except ProcessLookupError:\n"
               "        return False\n")
    with Worker("learner", Limits(), slot=15) as w:
        assert w.send(cell(started), 60)["error"] is None
        assert len(w._processes()[1]) >= 2
        w.forbid_processes()
        assert w._processes()[1] == []
        look = ("from course_utils.judging import grade\n"
                "grade(lambda: [helper.is_alive(), alive(orphan)], None, None)")
        assert w.send(cell(look, 1), 60)["obs"] == [False, False]
        w.allow_processes()


def test_forbidding_says_whether_a_thread_from_an_earlier_cell_still_runs():
    """A thread cannot be killed alone: forbid_processes says whether the learner's code left one
    running (a thread that ended, and the cellrunner's own threads, torch's pool and profiler's, do
    not count)."""
    with Worker("learner", Limits(), slot=17) as w:
        assert w.send(cell("import threading, torch\nx = torch.ones(1 << 20).sum()"),
                      60)["error"] is None
        assert w.forbid_processes() is False, "the cellrunner's own threads are not the learner's"
        w.allow_processes()
        ended = "t = threading.Thread(target=lambda: None)\nt.start()\nt.join()"
        assert w.send(cell(ended, 1), 60)["error"] is None
        assert w.forbid_processes() is False, "a thread that ended is gone"
        w.allow_processes()
        waiting = ("stop = threading.Event()\nt = threading.Thread(target=stop.wait, daemon=True)\n"
                   "t.start()")
        assert w.send(cell(waiting, 2), 60)["error"] is None
        assert w.forbid_processes() is True
        w.allow_processes()
        assert w.send(cell("stop.set()\nt.join()", 3), 60)["error"] is None
        assert w.forbid_processes() is False, "ended before the next test"
        w.allow_processes()


def test_a_thread_from_the_very_first_cell_is_the_learners():
    """The runner's own threads are those it had before any cell: a thread its first cell starts
    counts."""
    with Worker("learner", Limits(), slot=18) as w:
        waiting = ("import threading\nstop = threading.Event()\n"
                   "threading.Thread(target=stop.wait, daemon=True).start()")
        assert w.send(cell(waiting), 60)["error"] is None
        assert w.forbid_processes() is True
        w.allow_processes()


def test_a_worker_killed_while_forbidden_still_reports_the_refusals():
    """A cell that dies after a refused fork (libgomp, say, ends the process when it cannot start
    its threads) is still known to have tried: the grader names the cause, not only the crash."""
    with Worker("learner", Limits(), slot=16) as w:
        w.send(cell("import os"), 60)
        counts = _counts_refusals(w)
        w.forbid_processes()
        with pytest.raises(WorkerDied, match="exit code 3"):
            w.send(cell("try:\n    os.fork()\nexcept OSError:\n    os._exit(3)", 1), 60)
        assert w.proc is None
        assert w.allow_processes() is (True if counts else None)


def _counts_refusals(w: Worker) -> bool:
    """Whether the worker has a pids cgroup whose refusals the grader reads (grading as root)."""
    return w._cgroup is not None and w._cgroup.processes_refused() is not None


def test_a_normal_users_worker_cannot_start_processes_once_forbidden():
    """Grading as a normal user (the "userns" sandbox, no cgroup): the cellrunner's RLIMIT_NPROC,
    set from outside, refuses them, and stays (a normal user cannot raise a hard limit again)."""
    if os.geteuid() != 0:
        if isolation() != "userns":
            pytest.skip("this machine gives a normal user no user namespaces (isolation() is "
                        f"{isolation()!r})")
        test_no_process_or_thread_can_be_started_while_forbidden()
        return
    # pytest's tmp_path is not open to other users
    home = Path(tempfile.mkdtemp(prefix="nobody-home-"))
    os.chown(home, 65534, 65534)
    code = ("import json, sys; sys.path.insert(0, %r); import test_worker as t; "
            "from course_utils.grader.capabilities import isolation; kind = isolation(); "
            "kind == 'userns' and t.test_no_process_or_thread_can_be_started_while_forbidden(); "
            "print(json.dumps(kind))") % str(ROOT / "tests" / "grader")
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--",
                 sys.executable]
    try:
        check = subprocess.run([*as_nobody, "-c",
                                "import sys, torch, course_utils, pytest; print(sys.prefix)"],
                               capture_output=True, text=True, cwd=home,
                               env={**os.environ, "HOME": str(home)})
        if check.returncode != 0 or check.stdout.split() != [sys.prefix]:
            pytest.skip(f"the user nobody cannot run this environment's Python ({sys.executable})")
        proc = subprocess.run([*as_nobody, "-c", code], capture_output=True, text=True, cwd=home,
                              timeout=300, env={**os.environ, "HOME": str(home)})
    finally:
        shutil.rmtree(home, ignore_errors=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    kind = json.loads(proc.stdout.strip().splitlines()[-1])
    if kind != "userns":
        pytest.skip(f"the user nobody gets no user namespaces here (isolation() is {kind!r})")


def test_a_process_whose_main_thread_exited_still_counts_as_running():
    """A helper whose main thread called pthread_exit shows "Z" in /proc/PID/stat while its other
    threads run on: forbid_processes must still see it (and kill it). A fresh interpreter, not a
    fork of this one: a fork of a process with threads can block in pthread_exit on a lock it
    inherited."""
    from course_utils.grader.worker import _alive
    leader = ("import ctypes, threading, time\n"
              "threading.Thread(target=time.sleep, args=(300,)).start()\n"
              "ctypes.CDLL(None).pthread_exit(None)\n")
    proc = subprocess.Popen([sys.executable, "-c", leader])
    try:
        deadline = time.monotonic() + 60
        while Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
            assert time.monotonic() < deadline, "the main thread did not exit"
            time.sleep(0.05)
        assert _alive(proc.pid, "Z")
    finally:
        proc.kill()
        proc.wait()
    assert not _alive(proc.pid, "Z")


def test_a_start_that_fails_leaves_no_cgroup_folder_or_pipe(monkeypatch):
    """Anything that fails between the worker's folder and its process (here: its network) is
    undone."""
    import course_utils.grader.worker as worker_module

    def no_network(command):
        raise RuntimeError("making a network namespace took over 300 s")

    made = []
    real_cgroup = worker_module.Cgroup
    monkeypatch.setattr(worker_module, "Cgroup",
                        lambda *a, **k: made.append(real_cgroup(*a, **k)) or made[-1])
    monkeypatch.setattr(worker_module, "private_network", no_network)
    folders = set(Path(tempfile.gettempdir()).glob("course-worker-*"))
    fds = set(os.listdir("/proc/self/fd"))
    w = Worker("reference", Limits())
    with pytest.raises(RuntimeError, match="network namespace"):
        w.start()
    assert set(Path(tempfile.gettempdir()).glob("course-worker-*")) == folders
    assert set(os.listdir("/proc/self/fd")) == fds
    assert all(not Path(d).exists() for c in made for d in c.dirs), "its cgroup was removed"
    assert w._cgroup is None and w.proc is None
