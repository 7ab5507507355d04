"""course_utils.grader.sandbox: what a learner's code sees from inside its sandbox (no course
folder, no network, no other processes, a read-only file system of its own, no capabilities), for
both kinds of sandbox, and as a real normal user; and private_network, the reference worker's
network of its own."""

import json
import os
import shutil
import socket
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
seen = {"uid": os.getuid(), "course": sorted(os.listdir(%(root)r)),
        "tmp": sorted(os.listdir("/tmp")), "top": sorted(os.listdir("/"))}

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
# a real mount point in the sandbox (read-only, over the course folder)
kept = os.path.dirname(course_utils.__file__)
seen["unmounted"] = subprocess.run(["umount", "-l", kept], capture_output=True).returncode == 0
seen["nested_unmount"] = subprocess.run(["unshare", "--user", "--mount", "umount", "-l", kept],
                                        capture_output=True).returncode == 0
seen["remounted"] = subprocess.run(["mount", "-o", "remount,bind,rw", kept],
                                   capture_output=True).returncode == 0
seen["still_mounted"] = os.path.ismount(kept)
writable = []
for path in ("/etc/planted", "/usr/planted", "/dev/planted", "/sys/fs/cgroup/planted",
             "/proc/sys/kernel/core_pattern", "/var/planted", "/planted"):
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
        pytest.skip("runs both kinds of sandbox as root: needs grading as root with util-linux "
                    "unshare and setpriv")
    monkeypatch.setattr(worker, "isolation", lambda: kind)
    seen = look_around()
    assert seen["uid"] == (60077 if kind == "root" else 0), (
        "root: a uid of its own; userns: root of its namespace only")
    assert ("solutions" not in seen["course"] and "tests" not in seen["course"]
            and ".git" not in seen["course"])
    # A private /tmp: its work folder, and the read-only folders of a course checked out under /tmp.
    kept_in_tmp = {Path(k).parts[2] for k in sandbox._kept_paths()
                   if Path(k).parts[1:2] == ("tmp",)}
    assert seen["tmp"] == sorted({"work"} | kept_in_tmp), "a private /tmp"
    assert seen["net"] is False
    assert seen["pids"] <= 3, "the sandbox sees only its own processes"
    assert int(seen["caps"], 16) == 0, "no capabilities left"
    assert seen["wrote_course_utils"] is False, "course_utils is mounted back read-only"
    assert (seen["unmounted"] is False and seen["nested_unmount"] is False
            and seen["remounted"] is False)
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
    if subprocess.run(["unshare", "--user", "--map-root-user", "true"],
                      capture_output=True).returncode != 0:
        pytest.skip("user namespaces are not available on this machine")
    assert capabilities.sandbox_works(kind), capabilities._why_none


def test_only_the_environment_and_course_utils_are_carried_beside_the_system_folders():
    kept = [Path(k) for k in sandbox._kept_paths()]
    system = [Path("/", d).resolve() for d in sandbox.SYSTEM_DIRS]
    prefix = Path(sys.prefix).resolve()
    assert ROOT / "course_utils" in kept
    assert prefix in kept or any(prefix.is_relative_to(d) for d in system), (
        "the environment is carried")
    assert ROOT not in kept and not any(ROOT.is_relative_to(k) for k in kept), (
        "never the course folder itself")
    assert not any(k.is_relative_to(d) for k in kept for d in system), (
        "system folders are carried whole")


def test_a_normal_user_gets_the_userns_sandbox():
    """A real non-root grader: isolation() says "userns", and the sandbox holds, with a process
    limit of its own (RLIMIT_NPROC is counted per user namespace, Linux 5.14+)."""
    if os.geteuid() != 0:
        me = isolation()
        if me != "userns":
            pytest.skip("this machine gives a normal user no user namespaces "
                        f"(isolation() is {me!r})")
        seen = look_around(forks=100)
    else:
        # pytest's tmp_path is not open to other users
        home = Path(tempfile.mkdtemp(prefix="nobody-home-"))
        os.chown(home, 65534, 65534)
        code = ("import json, sys; sys.path.insert(0, %r); import test_sandbox as t; "
                "from course_utils.grader.capabilities import isolation; "
                "print(json.dumps({'kind': isolation(), 'seen': t.look_around(forks=100)}))"
                % str(ROOT / "tests" / "grader"))
        as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--",
                     sys.executable]
        check = subprocess.run([*as_nobody, "-c", "import sys, torch, course_utils; "
                                                  "print(sys.prefix, sys.base_prefix)"],
                               capture_output=True, text=True, cwd=home,
                               env={**os.environ, "HOME": str(home)})
        if check.returncode != 0 or check.stdout.split() != [sys.prefix, sys.base_prefix]:
            shutil.rmtree(home, ignore_errors=True)
            pytest.skip(f"the user nobody cannot run this environment's Python ({sys.executable}); "
                        f"the userns sandbox is tested as root above")
        try:
            proc = subprocess.run([*as_nobody, "-c", code], capture_output=True, text=True,
                                  cwd=home, timeout=120, env={**os.environ, "HOME": str(home)})
        finally:
            shutil.rmtree(home, ignore_errors=True)
        assert proc.returncode == 0, proc.stderr[-2000:]
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        assert out["kind"] == "userns"
        seen = out["seen"]
    assert "solutions" not in seen["course"] and seen["net"] is False and seen["pids"] <= 3
    assert (seen["wrote_course_utils"] is False and seen["unmounted"] is False
            and seen["writable"] == [])
    assert seen["forks"] < 32, ("the process limit holds inside the user namespace: "
                                f"{seen['forks']} forks")


# -- private_network: the reference worker's network of its own ------------------------------------

INSIDE = r"""
import json, os, socket, sys
port, folder = int(sys.argv[1]), sys.argv[2]
seen = {"pid": os.getpid(), "uid": os.getuid(), "gid": os.getgid(),
        "ns": {n: os.readlink(f"/proc/self/ns/{n}") for n in ("net", "mnt", "pid")},
        "interfaces": sorted(name for _, name in socket.if_nameindex()),
        "caps": [l.split()[1] for l in open("/proc/self/status") if l.startswith("CapEff")][0]}
try:
    socket.create_connection(("127.0.0.1", port), timeout=2).close()
    seen["host_listener"] = "reached"
except OSError as e:
    seen["host_listener"] = type(e).__name__
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen()
client = socket.create_connection(server.getsockname(), timeout=5)
client.sendall(b"hi")
seen["own_loopback"] = server.accept()[0].recv(2).decode()
seen["read"] = open(os.path.join(folder, "from_host")).read()
open(os.path.join(folder, "from_inside"), "w").write("written inside")
print(json.dumps(seen))
"""

# Run as the user under test: wraps INSIDE with private_network there and becomes it (same pid).
DRIVER = r"""
import os, sys
from course_utils.grader import sandbox
if sandbox.private_network_problem():
    print(sandbox.private_network_problem(), file=sys.stderr)
    sys.exit(77)
command = sandbox.private_network([sys.executable, "-I", "-c", sys.argv[1], *sys.argv[2:]])
os.execv(command[0], command)
"""

AS_NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
# root in a container, say
NO_SYS_ADMIN = ["setpriv", "--bounding-set=-sys_admin", "--inh-caps=-all", "--"]


def _with_course_utils() -> dict:
    """This environment, with this checkout's course_utils importable from any folder."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}


def _runs_this_python(prefix, cwd) -> bool:
    check = subprocess.run([*prefix, sys.executable, "-c", "import course_utils.grader.sandbox"],
                           cwd=cwd, capture_output=True, env=_with_course_utils())
    return check.returncode == 0


@pytest.mark.parametrize("who", ["this user", "a normal user", "root without CAP_SYS_ADMIN"])
def test_private_network_hides_the_hosts_network_and_changes_nothing_else(who):
    """The reference worker's wrapper: a process in it cannot reach a listener on the host's
    127.0.0.1, has a loopback of its own that works, and keeps its uid, gid, pid, file system and
    PID namespace. As root: a network namespace; as a normal user (here: nobody) a user namespace
    mapping the user to itself around it; as root without CAP_SYS_ADMIN the same user namespace,
    root mapped to itself."""
    prefix = {"this user": [], "a normal user": AS_NOBODY,
              "root without CAP_SYS_ADMIN": NO_SYS_ADMIN}[who]
    if prefix and os.geteuid() != 0:
        pytest.skip("needs root to become another user or to drop capabilities")
    uid = 65534 if who == "a normal user" else os.geteuid()
    # pytest's tmp_path is not open to other users
    folder = Path(tempfile.mkdtemp(prefix="private-network-"))
    host = socket.socket()
    try:
        os.chown(folder, uid, uid)
        (folder / "from_host").write_text("written outside")
        if not _runs_this_python(prefix, folder):
            pytest.skip(f"{who} cannot run this environment's Python ({sys.executable})")
        host.bind(("127.0.0.1", 0))
        host.listen()
        host.setblocking(False)
        proc = subprocess.Popen([*prefix, sys.executable, "-c", DRIVER, INSIDE,
                                 str(host.getsockname()[1]), str(folder)],
                                cwd=folder, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=_with_course_utils())
        out, err = proc.communicate(timeout=120)
        if proc.returncode == 77:
            pytest.skip(f"no network namespace for {who} here: {err.strip()}")
        assert proc.returncode == 0, err[-2000:]
        seen = json.loads(out)
        with pytest.raises(BlockingIOError):
            host.accept()   # nothing ever connected to the host's listener
        written = (folder / "from_inside").stat()
    finally:
        host.close()
        shutil.rmtree(folder, ignore_errors=True)
    assert seen["host_listener"] == "ConnectionRefusedError", (
        "the host's 127.0.0.1 is not its 127.0.0.1")
    assert seen["own_loopback"] == "hi" and seen["interfaces"] == ["lo"], (
        "its own loopback, up, and nothing else")
    assert seen["ns"]["net"] != os.readlink("/proc/self/ns/net")
    assert (seen["ns"]["mnt"] == os.readlink("/proc/self/ns/mnt")
            and seen["ns"]["pid"] == os.readlink("/proc/self/ns/pid"))
    assert (seen["uid"], seen["gid"]) == (uid, uid if uid == 65534 else os.getegid()), (
        "the same uid and gid")
    assert seen["read"] == "written outside" and written.st_uid == uid, (
        "the same files, written as the same user")
    assert seen["pid"] == proc.pid, ("one process: the wrapper becomes the command (the grader's "
                                     "pid, its kill and clock)")
    if uid != 0:
        assert int(seen["caps"], 16) == 0, ("a normal user keeps no capabilities from its "
                                            "user namespace")


GLOO_SCRIPT = r'''
import json, os, torch, torch.distributed as dist
from course_utils.parallel import run_workers

def where(rank, world_size):
    x = torch.tensor([rank + 1.0])
    dist.all_reduce(x)
    sockets = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            sockets.add(link[len("socket:["):-1])
    listens = [line.split()[1] for table in ("tcp", "tcp6")
               for line in open(f"/proc/self/net/{table}").readlines()[1:]
               if line.split()[3] == "0A" and line.split()[9] in sockets]
    return {"sum": x.item(), "net": os.readlink("/proc/self/ns/net"), "listens": listens}

if __name__ == "__main__":
    print(json.dumps({"net": os.readlink("/proc/self/ns/net"),
                      "ranks": run_workers(where, world_size=2, backend="gloo")}))
'''


def test_gloo_ranks_started_inside_the_private_network_meet_there(tmp_path):
    """Lesson 09's reference run: run_workers' gloo ranks, started by a process in the private
    network, all-reduce there; the sockets gloo listens on are in that namespace, not on the host's
    loopback."""
    if sandbox.private_network_problem():
        pytest.skip(f"no network namespace here: {sandbox.private_network_problem()}")
    script = tmp_path / "gloo_inside.py"
    script.write_text(GLOO_SCRIPT)
    proc = subprocess.run(sandbox.private_network([sys.executable, str(script)]),
                          capture_output=True, text=True,
                          timeout=180, cwd=tmp_path, env=_with_course_utils())
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    host_net = os.readlink("/proc/self/ns/net")
    assert [r["sum"] for r in out["ranks"]] == [3.0, 3.0]
    assert out["net"] != host_net and {r["net"] for r in out["ranks"]} == {out["net"]}, (
        "every rank in its network")
    assert all(r["listens"] for r in out["ranks"]), "gloo listens (in the private namespace)"


FALLBACK = r"""
import json, subprocess, sys
from course_utils.grader import sandbox
wrapped = subprocess.run(sandbox._private_network_prefix() + ["true"], capture_output=True,
                         text=True)
print(json.dumps({"problem": sandbox.private_network_problem(),
                  "command": sandbox.private_network(["true"]),
                  "wrapped": [wrapped.returncode, wrapped.stderr]}))
"""


def test_where_no_network_namespace_can_be_made_the_reference_runs_as_before_and_says_why():
    """No root and no unprivileged user namespaces (made here: a user namespace that allows no more
    of them and a process without capabilities): private_network gives the command back unchanged
    and logs a warning naming the cause; its wrapper alone fails closed (it never runs the command
    on the host's network unasked)."""
    no_more = ("echo 0 > /proc/sys/user/max_user_namespaces && "
               'exec setpriv --bounding-set=-all --inh-caps=-all -- "$@"')
    proc = subprocess.run(["unshare", "--user", "--map-root-user", "--", "/bin/sh", "-c", no_more,
                           "no-userns", sys.executable, "-c", FALLBACK], capture_output=True,
                          text=True, timeout=120, env=_with_course_utils())
    if proc.returncode != 0 and not proc.stdout:
        pytest.skip(f"cannot take user namespaces away here: {proc.stderr.strip()[-300:]}")
    out = json.loads(proc.stdout)
    assert out["command"] == ["true"], "the reference runs as before"
    assert ("no network namespace can be made here" in out["problem"]
            and "user namespace" in out["problem"])
    assert "runs without a network of its own" in proc.stderr and out["problem"] in proc.stderr, (
        "a warning, with why")
    assert out["wrapped"][0] != 0 and "no network namespace" in out["wrapped"][1], (
        "the wrapper alone fails closed")


def test_the_fallback_warning_is_logged_once(monkeypatch, caplog):
    monkeypatch.setattr(sandbox, "private_network_problem", lambda: "no user namespaces (test)")
    sandbox._warn_once.cache_clear()
    try:
        with caplog.at_level("WARNING", logger=sandbox.__name__):
            assert sandbox.private_network(["python", "-m", "x"]) == ["python", "-m", "x"]
            assert sandbox.private_network(["true"]) == ["true"]
    finally:
        sandbox._warn_once.cache_clear()
    warnings = [r.getMessage() for r in caplog.records if r.name == sandbox.__name__]
    assert (len(warnings) == 1 and "no user namespaces (test)" in warnings[0]
            and "gloo" in warnings[0])
