"""What this machine gives the grader: a sandbox (isolation), a memory peak the kernel measures
(measures_memory), a CPU share per worker (cpu_shares). Each is found out once per grading process
by trying it for real, and isolation_warning() says in one line what is missing.

isolation() says which sandbox (course_utils.grader.sandbox builds it):
- "root": grading as root (CI, a container): namespaces, its own file system, its own uid per
  worker, and memory, process and CPU cgroups where the machine offers them;
- "userns": a normal user where the kernel allows unprivileged user namespaces: the namespaces and
  file system, but the instructor's uid outside them and no cgroups;
- "none": no util-linux, or user namespaces disabled: limits only. A learner's worker runs there
  only when the instructor accepts it (Limits.sandbox = "optional"); otherwise grading stops with
  SandboxUnavailable (course_utils.grader.worker.check_sandbox). It fails closed.

Asking builds a real sandbox (sandbox_works). A set-up that does not finish in time on a busy
machine is tried again with more time (PROBE_SECONDS); if it never finishes, isolation() raises
SandboxUnavailable rather than say "none": a slow machine never lowers the protection.
"""

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

from course_utils.grader.cgroups import Cgroup
from course_utils.grader.peakmemory import PeakMemory
from course_utils.grader.sandbox import (FIRST_UID, SYSTEM_PATH, TOOLS, environment, setup_command,
                                         python_path, tool_path)

PROBE_SECONDS = (120, 300, 600)   # wall-clock time for each try at building the probe sandbox


class SandboxUnavailable(Exception):
    """Grading cannot go on with the protection it needs here; str(e) tells the instructor why and
    what to do."""


@functools.lru_cache(maxsize=1)
def isolation() -> str:
    """The sandbox this machine gives a learner's worker: "root", "userns" or "none" (see above).
    Asked once per grading process, by building one (sandbox_works)."""
    missing = [tool for tool in TOOLS if shutil.which(tool, path=tool_path()) is None]
    if missing:
        _why_none.append(f"util-linux's {' and '.join(missing)} "
                         f"{'is' if len(missing) == 1 else 'are'} on neither PATH nor "
                         f"{SYSTEM_PATH}: install util-linux (Debian: apt-get install util-linux), "
                         "or add the folder that holds them to PATH")
        return "none"
    kind = "root" if os.geteuid() == 0 else "userns"
    return kind if sandbox_works(kind) else "none"


_why_none: list[str] = []


def sandbox_works(kind: str) -> bool:
    """Whether a sandbox of `kind` can be built here and run this Python with course_utils: the real
    set-up script, as a worker would start it. (As root, "userns" maps root to itself: that checks
    the mechanics only; grading as root always uses "root".) A failure's last line is kept for
    isolation_warning()."""
    command = [sys.executable, "-c", "import course_utils.grader.cellrunner"]
    for seconds in PROBE_SECONDS:
        try:
            probe = subprocess.run(setup_command(kind, FIRST_UID, [], command),
                                   env={"PATH": tool_path(), "PYTHONPATH": python_path(),
                                        **environment()},
                                   stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                   timeout=seconds)
            break
        except OSError as e:
            _why_none.append(f"{kind}: {type(e).__name__}")
            return False
        except subprocess.TimeoutExpired:
            continue
    else:
        raise SandboxUnavailable(f"the sandbox's set-up did not finish in {sum(PROBE_SECONDS)} s "
                                 f"over {len(PROBE_SECONDS)} tries: the machine is too busy to "
                                 "grade safely now; try again later")
    if probe.returncode != 0:
        lines = [line for line in probe.stderr.splitlines()
                 if line.strip() and not line[0].isspace()]
        _why_none.append(f"{kind}: {lines[-1][:200] if lines else f'exit code {probe.returncode}'}")
    return probe.returncode == 0


def can_isolate() -> bool:
    """True where a learner's worker gets the namespaces (its own file system, no network)."""
    return isolation() != "none"


_UNMEASURED = ("; lessons 05 and 06 then check memory inside the learner's process, "
               "where a cheat can fake it")


def isolation_warning() -> str | None:
    """What an instructor should know about the sandbox here, or None when it is the full one."""
    kind = isolation()
    if kind == "root":
        notes = ([] if measures_memory() else
                 ["no memory cgroup could be made here" + _UNMEASURED]) + \
                ([] if cpu_shares() else ["no CPU cgroup could be made here: submissions graded at "
                                          "once share the CPU unevenly (a submission that starts "
                                          "many busy processes slows its neighbours down; their "
                                          "time limits still count only their own time)"])
        return "; ".join(notes) or None
    if kind == "userns":
        return ("not root: the learner's code runs in user namespaces (no network; a file system "
                "of its own: the system's files and the Python environment, read-only, and a "
                "private /tmp) but as your own uid outside them, with no memory cgroup"
                + _UNMEASURED + "; for the full sandbox grade as root in a container")
    why = "; ".join(_why_none) or "unknown"
    return (f"no sandbox here ({why}): the learner's code runs with resource limits only and could "
            "read or write your files; grade untrusted work as root in a container")


@functools.lru_cache(maxsize=1)
def measures_memory() -> bool:
    """Whether grading here measures peak memory from outside the learner's process: root, the full
    sandbox, a memory cgroup whose peak can be reset, and no huge pages reserved (they escape
    it)."""
    if os.geteuid() != 0 or isolation() != "root" or not _no_huge_pages():
        return False
    cgroup = Cgroup(f"course-probe-{os.getpid()}", 2 ** 30, 16)
    try:
        peak = PeakMemory(cgroup.dirs)
        ok = peak.reset() and peak.read() is not None
        peak.close()
        return ok
    finally:
        cgroup.remove()


def _no_huge_pages() -> bool:
    try:
        return all(int(Path("/proc/sys/vm", f).read_text()) == 0
                   for f in ("nr_hugepages", "nr_overcommit_hugepages"))
    except (OSError, ValueError):
        return True  # no such settings: no huge pages to reserve


@functools.lru_cache(maxsize=1)
def cpu_shares() -> bool:
    """Whether workers' cgroups get a CPU share and quota of their own here (asked once)."""
    cgroup = Cgroup(f"course-probe-{os.getpid()}", 2 ** 30, 16, cpus=1)
    try:
        return cgroup.cpu
    finally:
        cgroup.remove()
