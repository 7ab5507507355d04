"""course_utils.grader.sandbox: what a learner's code sees from inside its sandbox (no course folder,
no network, no other processes, a read-only file system of its own, no capabilities), for both kinds
of sandbox, and as a real normal user."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from course_utils.grader import capabilities, sandbox, worker
from course_utils.grader.capabilities import isolation
from course_utils.grader.worker import Limits, Worker

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def cell(source, i=0):
    return {"op": "cell", "id": i, "gid": None, "source": source}


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
        code = ("import json, sys; sys.path.insert(0, %r); import test_sandbox as t; from course_utils.grader.capabilities import isolation; "
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
