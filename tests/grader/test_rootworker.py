"""course_utils.grader.rootworker: a grader that is not root grades in the root sandbox through the
class hub's one sudo rule (hub/classroom.py, allow_full_sandbox), made here as `bash course.sh hub`
makes it, for the user nobody.

Needs root (to make the rule) and sudo; elsewhere skipped with the reason.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from course_utils.grader import rootworker
from course_utils.grader.capabilities import SandboxUnavailable, isolation
from course_utils.grader.sandbox import FIRST_UID

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "hub"))
import classroom

pytestmark = pytest.mark.slow
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]

# Run as nobody: a learner's worker from learner_worker(), what it sees and what the grader
# measures.
AS_INSTRUCTOR = r"""
import json, os
from course_utils.grader.rootworker import check_sandbox, learner_worker, reference_worker
from course_utils.grader.worker import Limits, WorkerDied
out = {"warning": check_sandbox(Limits())}
# the instructor's notebook: as them, its peaks measured
with reference_worker(Limits(cell_seconds=60)) as r:
    out["ref_kind"] = type(r).__name__
    src = "import os\nuid = (os.getuid(), os.geteuid())\nassert uid == (65534, 65534), uid"
    out["ref_uid"] = r.send({"op": "cell", "id": 0, "gid": None, "source": src},
                            timeout=60)["error"]
    src = ("import torch\nfrom course_utils.judging import grade\n"
           "grade(lambda: float(torch.ones(2 ** 24).sum()), lambda: 2.0 ** 24, "
           "lambda got, want: None)")
    answer = r.send({"op": "cell", "id": 1, "gid": "x_test", "source": src}, timeout=60)
    out["ref_peak"], out["ref_error"] = answer.get("peak"), answer.get("setup_error")
    out["ref_pid_readable"] = (os.path.exists(f"/proc/{r.pid}/maps")
                               and bool(open(f"/proc/{r.pid}/maps").read()))
with learner_worker(Limits(cell_seconds=60, processes=32), slot=7) as w:
    out["kind"] = type(w).__name__
    src = "import os\nuid = os.getuid()\nassert uid == 60007, uid"
    out["uid"] = w.send({"op": "cell", "id": 0, "gid": None, "source": src}, timeout=60)["error"]
    w.reset_peak()
    w.send({"op": "cell", "id": 1, "gid": None, "source": "import torch\nx = torch.ones(2 ** 24)"},
           timeout=60)
    out["peak"] = w.peak_bytes()
    w.forbid_processes()
    out["fork"] = w.send({"op": "cell", "id": 2, "gid": None,
                          "source": "import os\nos.fork() or os._exit(0)"}, timeout=60)["error"]
    out["refused"] = w.allow_processes()
    try:
        w.send({"op": "cell", "id": 3, "gid": None, "source": "import os\nos._exit(3)"}, timeout=60)
    except WorkerDied as e:
        out["died"] = str(e)
print(json.dumps(out))
"""


def why_not() -> str | None:
    if os.geteuid() != 0:
        return "making the hub's sudo rule needs root"
    if shutil.which("sudo") is None or shutil.which("visudo") is None:
        return ("no sudo here (Debian: apt-get install sudo; bash course.sh test installs it as "
                "root)")
    if isolation() != "root":
        return f"no root sandbox here (isolation() is {isolation()!r})"
    check = subprocess.run([*NOBODY, sys.executable, "-c", "import course_utils, torch"], cwd="/",
                           capture_output=True)
    if check.returncode != 0:
        return f"the user nobody cannot run this environment's Python ({sys.executable})"
    return None


@pytest.fixture(scope="module")
def rule():
    """The hub's rule for nobody, in a state folder of its own: (state, the script, the sudoers
    file)."""
    if reason := why_not():
        pytest.skip(reason)
    state = Path(tempfile.mkdtemp(prefix="bbt-rootworker-"))
    state.chmod(0o711)
    made = classroom.allow_full_sandbox(state, "nobody")
    try:
        yield state, classroom.root_worker(state), made
    finally:
        made.unlink(missing_ok=True)
        shutil.rmtree(state, ignore_errors=True)


def as_nobody(args: list[str], env: dict, **kw) -> subprocess.CompletedProcess:
    home = Path(tempfile.mkdtemp(prefix="nobody-home-"))
    os.chown(home, 65534, 65534)
    try:
        return subprocess.run([*NOBODY, *args], cwd=home, capture_output=True, text=True,
                              timeout=600,
                              env={"PATH": os.environ["PATH"], "HOME": str(home), **env}, **kw)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_a_grader_that_is_not_root_gets_the_root_sandbox_through_the_rule(rule):
    state, script, _ = rule
    done = as_nobody([sys.executable, "-c", AS_INSTRUCTOR], {"COURSE_ROOT_WORKER": str(script)})
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["kind"] == "SudoWorker"
    # the learner's code ran as the sandbox's own uid (60000 + slot)
    assert out["uid"] is None, out
    # the kernel's memory peak, measured by the root side (64 MiB of ones)
    assert out["peak"] >= 2 ** 26, out
    # counted by the pids cgroup
    assert out["fork"] == "BlockingIOError" and out["refused"] is True, out
    assert "exit code 3" in out["died"], out
    assert out["warning"] is None, out       # no user-namespace warning: the full sandbox
    # the reference: the caller's own process (nobody's), never root, with its probe's peak measured
    # in a cgroup
    assert (out["ref_kind"] == "SudoWorker" and out["ref_uid"] is None
            and out["ref_error"] is None), out
    assert out["ref_peak"] >= 2 ** 26, out
    # the grader pins the files it mapped (course_utils.grader.pagecache)
    assert out["ref_pid_readable"], out


def test_the_sandbox_uids_are_nobodys(rule):
    """The root side refuses a slot whose uid (60000 + slot) belongs to an account of the
    machine."""
    _, script, _ = rule
    if shutil.which("useradd") is None:
        pytest.skip("no useradd here (Debian: apt-get install passwd)")
    name = "bbtslot" + str(os.getpid() % 10000)
    subprocess.run(["useradd", "--no-create-home", "--uid", str(FIRST_UID + 4321), name],
                   check=True, capture_output=True)
    try:
        done = as_nobody(["sudo", "-n", str(script)], {},
                         input=json.dumps({"op": "start", "limits": {}, "slot": 4321}) + "\n")
    finally:
        subprocess.run(["userdel", name], capture_output=True)
    assert "is an account of this machine" in json.loads(done.stdout.splitlines()[0])["error"]


def test_the_rule_allows_that_one_command_and_nothing_else(rule):
    state, script, made = rule
    assert made.stat().st_mode & 0o777 == 0o440 and script.stat().st_uid == 0
    for args in (["sudo", "-n", "-l", str(script)], ["sudo", "-n", "-l", str(script), "--extra"],
                 ["sudo", "-n", "-l", "/bin/sh"], ["sudo", "-n", "-l", sys.executable, "-I", "-m",
                                                   "course_utils.grader.rootworker"]):
        allowed = as_nobody(args, {}).returncode == 0
        assert allowed is (args == ["sudo", "-n", "-l", str(script)]), args


def test_the_root_side_takes_only_well_formed_requests(rule):
    _, script, _ = rule
    requests = ["not json", "[1, 2]", '{"op": "send", "command": {}, "timeout": 1}',
                '{"op": "start", "limits": {"sandbox": "optional"}, "slot": 1}',
                '{"op": "start", "limits": {"memory_bytes": -1}, "slot": 1}',
                '{"op": "start", "limits": {"shell": "rm -rf /"}, "slot": 1}',
                '{"op": "start", "limits": {}, "slot": 99999}',
                '{"op": "start", "mode": "root", "limits": {}}']
    done = as_nobody(["sudo", "-n", str(script)], {}, input="\n".join(requests) + "\n")
    replies = [json.loads(line) for line in done.stdout.splitlines()]
    assert (len(replies) == len(requests)
            and all("error" in r and "ok" not in r for r in replies)), replies


def test_a_reference_runs_as_the_user_who_ran_sudo_and_never_as_root(rule):
    """Run by root itself (no SUDO_UID, or SUDO_UID 0), the root side refuses to start a reference:
    it would run the instructor's notebook as root."""
    _, script, _ = rule
    request = json.dumps({"op": "start", "mode": "reference", "limits": {}}) + "\n"
    for env in ({}, {"SUDO_UID": "0"}, {"SUDO_UID": "nobody"}):
        done = subprocess.run([str(script)], input=request, capture_output=True, text=True,
                              timeout=300, env={"PATH": os.environ["PATH"], **env})
        assert ("run through sudo by a user other than root"
                in json.loads(done.stdout.splitlines()[0])["error"]), env


def test_a_rule_that_does_not_work_fails_closed_naming_the_fix(rule):
    done = as_nobody([sys.executable, "-c",
                      "from course_utils.grader.rootworker import check_sandbox\n"
                      "from course_utils.grader.worker import Limits\ncheck_sandbox(Limits())"],
                     {"COURSE_ROOT_WORKER": "/nonexistent/rootworker"})
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert (last.startswith("course_utils.grader.capabilities.SandboxUnavailable")
            and "sudo bash course.sh hub" in last)


def test_root_grades_with_its_own_worker_whatever_the_environment_says(monkeypatch):
    monkeypatch.setenv("COURSE_ROOT_WORKER", "/nonexistent/rootworker")
    if os.geteuid() == 0:
        assert type(rootworker.learner_worker(rootworker.Limits())).__name__ == "Worker"
    else:
        with pytest.raises(SandboxUnavailable):
            rootworker.check_sandbox(rootworker.Limits())


def test_the_rule_is_refused_where_others_could_change_what_root_runs(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("making the hub's sudo rule needs root")
    open_folder = tmp_path / "open"
    open_folder.mkdir()
    open_folder.chmod(0o777)
    (open_folder / "rootworker").write_text("#!/bin/sh\n")
    with pytest.raises(classroom.BadInput, match="can be changed by a user other than root"):
        classroom.check_root_only(open_folder / "rootworker")


# Run as nobody: lesson 05 graded as the hub's instructor grades it, through the rule.
HUB_GRADER = r"""
import json, sys
from course_utils.grader import grade
from course_utils.grader.worker import Limits
lesson_path, cheat = sys.argv[1], json.loads(sys.argv[2])
with grade.reference_for(lesson_path, Limits()) as reference:
    lesson = reference.lesson
    solved = {c.gid: c.source for c in lesson.answers}
    out = {"reference": type(reference.worker).__name__, "peaks": reference.peaks,
           "pin": reference.pin.summary()}
    for name, answers in (("solved", solved),
                          ("cheat", {**solved, cheat["cell"]: cheat["source"]})):
        result = grade.grade_answers(lesson, reference, answers, student=name)
        out[name] = {"score": result.score, "points": result.points, "notes": result.notes,
                     "messages": {gid: o.message for gid, o in result.outcomes.items()
                                  if o.message}}
print(json.dumps(out))
"""


def test_the_hub_grader_judges_lesson_05s_memory_by_the_kernel(rule):
    """The instructor's grader, through the rule: the reference runs as them with its probes' peaks
    measured, and a learner's answer that fakes the in-process count of saved bytes loses its points
    to the kernel's peak, as when grading as root."""
    _, script, _ = rule
    cheat, = [m for m in json.loads((ROOT / "tests" / "mutants"
                                     / "05-gradient-accumulation.json").read_text())
              if m["student"] == "cheat_summed_graph_fakes_saved_bytes"]
    lesson = ROOT / "solutions" / "05-gradient-accumulation" / "05-gradient-accumulation.ipynb"
    done = as_nobody([sys.executable, "-c", HUB_GRADER, str(lesson), json.dumps(cheat)],
                     {"COURSE_ROOT_WORKER": str(script)})
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert (out["reference"] == "SudoWorker"
            and all(type(p) is int for p in out["peaks"].values())), out
    # root pins for the grader, who cannot see what is cached
    assert out["pin"].startswith("pinned"), out["pin"]
    assert out["solved"]["score"] == out["solved"]["points"] and not out["solved"]["notes"], \
        out["solved"]
    lost = out["cheat"]["messages"]
    assert out["cheat"]["score"] < out["cheat"]["points"], out["cheat"]
    assert any(cheat["feedback"] in message for message in lost.values()), lost


# Run as nobody: a page-cache pin, as the hub's grader makes one after its reference run.
PIN_AS_INSTRUCTOR = r"""
import json, os
from course_utils.grader import rootworker
pin = rootworker.pin_environment(os.getpid(), True)   # as the grader pins after its reference run
print(json.dumps({"summary": pin.summary(), "active": pin.active}))
pin.close()
"""


def cached_bytes(path: Path) -> int:
    done = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", str(path)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return int(done.stdout.strip())


def test_the_hub_graders_pin_is_made_by_root_and_reads_no_file_that_was_not_cached(rule):
    """Linux tells a user that every page of a file it may not write is cached, so a pin made as the
    instructor read whole files of the environment from disk (about 2.5 GB, 100 s). Through the rule
    root pins: a file of the environment that is not in the cache stays out of it."""
    _, script, _ = rule
    if shutil.which("fincore") is None:
        pytest.skip("no fincore here (Debian: apt-get install util-linux)")
    import course_utils
    # a .pyc of the environment (among the first files walked; no module), readable by all as the
    # environment is
    probe = Path(course_utils.__file__).parent / f"_pin_probe_{os.getpid()}.pyc"
    try:
        with open(probe, "wb") as f:
            f.write(b"#" * (8 << 20))
            f.flush()
            os.fsync(f.fileno())
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        probe.chmod(0o644)
        if cached_bytes(probe):
            pytest.skip("this file system keeps a file's pages cached after POSIX_FADV_DONTNEED "
                        "(tmpfs?)")
        done = as_nobody([sys.executable, "-c", PIN_AS_INSTRUCTOR],
                         {"COURSE_ROOT_WORKER": str(script)})
        assert done.returncode == 0, done.stderr[-3000:]
        out = json.loads(done.stdout.strip().splitlines()[-1])
        assert out["active"] and out["summary"].startswith("pinned"), out
        assert cached_bytes(probe) == 0, "the pin read a file that was not in the cache"
    finally:
        probe.unlink(missing_ok=True)
