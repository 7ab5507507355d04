"""course_utils.grader.worker: limits are checked, a hung or dying worker is stopped and its death is
named, and every process it started goes with it."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from course_utils.grader import capabilities, sandbox, worker
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
LOOK_AROUND = """
import os, socket, subprocess
import course_utils
from course_utils.grader.protocol import encode
import course_utils.judging as j
seen = {"uid": os.getuid(), "course": sorted(os.listdir(%(root)r)), "tmp": sorted(os.listdir("/tmp")),
        "top": sorted(os.listdir("/"))}

try:
    socket.create_connection(("1.1.1.1", 53), timeout=1)
    seen["net"] = True
except OSError:
    seen["net"] = False
seen["pids"] = len([p for p in os.listdir("/proc") if p.isdigit()])
seen["caps"] = [l.split()[1] for l in open("/proc/self/status") if l.startswith("CapEff")][0]
try:
    open(os.path.join(os.path.dirname(course_utils.__file__), "planted.py"), "w").close()
    seen["wrote_course_utils"] = True
except OSError:
    seen["wrote_course_utils"] = False
kept = os.path.dirname(course_utils.__file__)  # a real mount point in the sandbox (read-only, over the course folder)
seen["unmounted"] = subprocess.run(["umount", "-l", kept], capture_output=True).returncode == 0
seen["nested_unmount"] = subprocess.run(["unshare", "--user", "--mount", "umount", "-l", kept],
                                        capture_output=True).returncode == 0
seen["remounted"] = subprocess.run(["mount", "-o", "remount,bind,rw", kept], capture_output=True).returncode == 0
seen["still_mounted"] = os.path.ismount(kept)
writable = []
for path in ("/etc/planted", "/usr/planted", "/dev/planted", "/sys/fs/cgroup/planted", "/proc/sys/kernel/core_pattern",
             "/var/planted", "/planted"):
    try:
        with open(path, "a"):
            writable.append(path)
    except OSError:
        pass
seen["writable"] = writable
forked = []
for _ in range(%(forks)d):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        import time
        time.sleep(2)
        os._exit(0)
    forked.append(pid)
for pid in forked:
    os.waitpid(pid, 0)
seen["forks"] = len(forked)
j.session.obs = encode(seen)
"""


def look_around(forks=0, slot=77):
    with Worker("learner", Limits(processes=32), slot=slot) as w:
        answer = w.send({"op": "cell", "id": 0, "gid": None,
                         "source": LOOK_AROUND % {"root": str(ROOT), "forks": forks}}, timeout=60)
    assert answer["error"] is None, answer
    return answer["obs"]["$dict"]


@pytest.mark.parametrize("kind", ["root", "userns"])
def test_the_sandbox_hides_the_course_and_the_network(kind, monkeypatch):
    """Both sandboxes: no course folder (solutions, gradebook, tests), no network, no other
    processes, course_utils read-only, no capabilities to undo the mounts. "userns" is what a normal
    user gets; here it runs as root with the same namespaces and set-up script (the mechanics, not a
    normal user's rights: root maps to itself)."""
    if isolation() != "root":
        pytest.skip("runs both kinds of sandbox as root: needs grading as root with util-linux unshare and setpriv")
    monkeypatch.setattr(worker, "isolation", lambda: kind)
    seen = look_around()
    assert seen["uid"] == (60077 if kind == "root" else 0), "root: a uid of its own; userns: root of its namespace only"
    assert "solutions" not in seen["course"] and "tests" not in seen["course"] and ".git" not in seen["course"]
    # A private /tmp: its work folder, and the read-only folders of a course checked out under /tmp.
    kept_in_tmp = {Path(k).parts[2] for k in sandbox._kept_paths() if Path(k).parts[1:2] == ("tmp",)}
    assert seen["tmp"] == sorted({"work"} | kept_in_tmp), "a private /tmp"
    assert seen["net"] is False
    assert seen["pids"] <= 3, "the sandbox sees only its own processes"
    assert int(seen["caps"], 16) == 0, "no capabilities left"
    assert seen["wrote_course_utils"] is False, "course_utils is mounted back read-only"
    assert seen["unmounted"] is False and seen["nested_unmount"] is False and seen["remounted"] is False
    assert seen["still_mounted"] is True, "the learner's code cannot undo its file system"
    assert not (ROOT / "course_utils" / "planted.py").exists()
    allowed = {*sandbox.SYSTEM_DIRS, "dev", "proc", "sys", "tmp", "var",
               *(Path(k).parts[1] for k in sandbox._kept_paths())}
    assert set(seen["top"]) <= allowed, f"its file system is the allowlist only: {seen['top']}"
    assert "home" not in seen["top"] and "srv" not in seen["top"] and "run" not in seen["top"]
    assert seen["writable"] == [], f"nothing but /tmp and /dev/shm is writable: {seen['writable']}"


@pytest.mark.parametrize("kind", ["root", "userns"])
def test_both_sandboxes_build_here_and_run_this_python(kind):
    """isolation() builds a sandbox once (sandbox_works) before choosing it; a probe that failed for
    reasons of its own would leave instructors with limits only. As root, "userns" maps root to
    itself: the mechanics a normal user gets, not their rights."""
    if os.geteuid() != 0 and kind == "root":
        pytest.skip("the root sandbox needs root")
    if subprocess.run(["unshare", "--user", "--map-root-user", "true"], capture_output=True).returncode != 0:
        pytest.skip("user namespaces are not available on this machine")
    assert capabilities.sandbox_works(kind), capabilities._why_none


def test_only_the_environment_and_course_utils_are_carried_beside_the_system_folders():
    kept = [Path(k) for k in sandbox._kept_paths()]
    system = [Path("/", d).resolve() for d in sandbox.SYSTEM_DIRS]
    prefix = Path(sys.prefix).resolve()
    assert ROOT / "course_utils" in kept
    assert prefix in kept or any(prefix.is_relative_to(d) for d in system), "the environment is carried"
    assert ROOT not in kept and not any(ROOT.is_relative_to(k) for k in kept), "never the course folder itself"
    assert not any(k.is_relative_to(d) for k in kept for d in system), "system folders are carried whole"


def test_a_normal_user_gets_the_userns_sandbox():
    """A real non-root grader: isolation() says "userns", and the sandbox holds, with a process
    limit of its own (RLIMIT_NPROC is counted per user namespace, Linux 5.14+)."""
    if os.geteuid() != 0:
        me = isolation()
        if me != "userns":
            pytest.skip(f"this machine gives a normal user no user namespaces (isolation() is {me!r})")
        seen = look_around(forks=100)
    else:
        home = Path(tempfile.mkdtemp(prefix="nobody-home-"))  # pytest's tmp_path is not open to other users
        os.chown(home, 65534, 65534)
        code = ("import json, sys; sys.path.insert(0, %r); import test_worker as t; from course_utils.grader.capabilities import isolation; "
                "print(json.dumps({'kind': isolation(), 'seen': t.look_around(forks=100)}))") % str(ROOT / "tests" / "grader")
        as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", sys.executable]
        check = subprocess.run([*as_nobody, "-c", "import sys, torch, course_utils; print(sys.prefix, sys.base_prefix)"],
                               capture_output=True, text=True, cwd=home, env={**os.environ, "HOME": str(home)})
        if check.returncode != 0 or check.stdout.split() != [sys.prefix, sys.base_prefix]:
            shutil.rmtree(home, ignore_errors=True)
            pytest.skip(f"the user nobody cannot run this environment's Python ({sys.executable}); "
                        f"the userns sandbox is tested as root above")
        try:
            proc = subprocess.run([*as_nobody, "-c", code], capture_output=True, text=True, cwd=home, timeout=120,
                                  env={**os.environ, "HOME": str(home)})
        finally:
            shutil.rmtree(home, ignore_errors=True)
        assert proc.returncode == 0, proc.stderr[-2000:]
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        assert out["kind"] == "userns"
        seen = out["seen"]
    assert "solutions" not in seen["course"] and seen["net"] is False and seen["pids"] <= 3
    assert seen["wrote_course_utils"] is False and seen["unmounted"] is False and seen["writable"] == []
    assert seen["forks"] < 32, f"the process limit holds inside the user namespace: {seen['forks']} forks"


# --- the sandbox fails closed ------------------------------------------------------------------

@pytest.fixture
def fresh_isolation():
    """isolation() asked anew (it is cached per process), and asked anew again after the test."""
    capabilities.isolation.cache_clear()
    yield
    capabilities.isolation.cache_clear()


@pytest.mark.skipif(any(shutil.which(t) is None for t in ("unshare", "setpriv", "pivot_root")),
                    reason="needs util-linux's unshare, setpriv and pivot_root")
def test_a_sandbox_set_up_that_never_finishes_stops_grading(monkeypatch, fresh_isolation):
    """A busy machine that cannot build the probe sandbox in time never lowers the protection."""
    monkeypatch.setattr(capabilities, "PROBE_SECONDS", (0.01, 0.01))
    with pytest.raises(capabilities.SandboxUnavailable, match="did not finish in .* over 2 tries"):
        isolation()


def test_a_failing_sandbox_set_up_grades_nothing_unless_the_instructor_accepts_it(monkeypatch, fresh_isolation):
    monkeypatch.setattr(capabilities, "setup_command", lambda *args: ["sh", "-c", "echo 'mount: permission denied' >&2; exit 32"])
    assert isolation() == "none"
    with pytest.raises(capabilities.SandboxUnavailable, match="permission denied.*--sandbox optional"):
        worker.check_sandbox(Limits())
    with pytest.raises(capabilities.SandboxUnavailable):
        Worker("learner", Limits(), slot=17).start()
    assert "no sandbox here" in worker.check_sandbox(Limits(sandbox="optional"))
    with Worker("learner", Limits(sandbox="optional"), slot=17) as w:  # asked for: limits only
        assert w.send(cell("x = 1"), 60)["error"] is None
    with pytest.raises(ValueError, match="sandbox"):
        Limits(sandbox="none")


def test_time_limits_count_the_workers_own_time():
    """A cell that sleeps is charged its sleep; one that waits for the CPU is not charged the wait."""
    with Worker("learner", Limits(), slot=18) as w:
        w.send(cell("import time"), 60)
        before = w.own_seconds
        w.send(cell("time.sleep(1.5)", 1), 60)
        assert w.own_seconds - before >= 1.5
        with pytest.raises(WorkerDied, match="time limit of 1 s"):
            w.send(cell("time.sleep(30)", 2), 1)


def test_the_folder_command_grades_nothing_without_the_sandbox_unless_asked(monkeypatch, fresh_isolation, tmp_path):
    from course_utils.grader import gradefolder
    monkeypatch.setattr(capabilities, "setup_command", lambda *args: ["sh", "-c", "exit 32"])
    folder, out = tmp_path / "class", tmp_path / "out"
    folder.mkdir()
    fixture = ROOT / "tests" / "fixtures" / "99-fixture" / "99-fixture.ipynb"
    shutil.copy(fixture, folder / "ada.ipynb")
    assert gradefolder.main([str(fixture), str(folder), "--out", str(out)]) == 2
    assert not out.exists(), "nothing is written when grading cannot be protected"
