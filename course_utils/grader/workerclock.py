"""How long a grading worker has run on its own account: the clock its time limits are read from.

On a shared machine the wall clock is not the learner's: with other work running, a cell that needs
one second of CPU can take a minute. course_utils.grader.worker reads a worker's time per command (one
cell, one judgement) from this clock instead:

    clock = Clock(pid, cgroup)       # the worker's outermost process, and its cgroup (or None)
    clock.start()                    # before the command
    r = clock.read()                 # r.wall, r.cpu, r.own, in seconds since start()

- cpu: CPU time used by the worker's processes: its cgroup's usage where it has one (every process,
  exited ones too), else the sum over its process tree (/proc/PID/stat, waited-for children included);
- held: how long it was kept from running by the machine: the largest run-queue delay of any of its
  threads (/proc/TID/schedstat, the time a runnable thread waited for a CPU);
- own = wall - held: sleeping, waiting on its own children or on I/O count, waiting for a CPU does not.

The sandbox stops a command whose own time or CPU time passes the limit (the learner's doing), and
one whose wall time passes BACKSTOP times the limit without that (the machine's: it is graded again).
Where /proc has no schedstat, held is 0 and own is the wall clock.
"""

import os
import time
from dataclasses import dataclass
from pathlib import Path

BACKSTOP = 20   # wall-clock seconds per second of the limit before a command counts as held up by the machine
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass
class Reading:
    wall: float
    cpu: float
    held: float

    @property
    def own(self) -> float:
        return max(0.0, self.wall - self.held)


class Clock:
    """A worker's CPU time and run-queue waits, read from outside it (see the module's docstring)."""

    def __init__(self, pid: int, cgroup=None):
        self.pid, self.cgroup = pid, cgroup
        self.start()

    def start(self) -> None:
        self._t0 = time.monotonic()
        self._cpu0 = self._cpu()
        self._delay0 = self._delays()
        self._held = 0.0

    def read(self) -> Reading:
        delays = self._delays()
        # A thread born since start() waited all of its run-queue delay within this command.
        held = max((d - self._delay0.get(tid, 0) for tid, d in delays.items()), default=0) / 1e9
        self._held = max(self._held, held)   # threads that exit take their delay with them: keep the largest seen
        return Reading(time.monotonic() - self._t0, max(0.0, self._cpu() - self._cpu0), self._held)

    # -- where the numbers come from -----------------------------------------------------------

    def _cpu(self) -> float:
        used = self.cgroup.cpu_seconds() if self.cgroup is not None else None
        if used is not None:
            return used
        total = 0
        for pid in _tree(self.pid):
            fields = _stat(pid)
            if fields:
                total += sum(int(v) for v in fields[11:15])   # utime stime cutime cstime
        return total / _TICK

    def _threads(self) -> list[int]:
        tids = self.cgroup.threads() if self.cgroup is not None else None
        if tids:
            return tids
        return [int(t.name) for pid in _tree(self.pid) for t in _listdir(Path(f"/proc/{pid}/task"))]

    def _delays(self) -> dict[int, int]:
        delays = {}
        for tid in self._threads():
            try:
                delays[tid] = int(Path(f"/proc/{tid}/schedstat").read_text().split()[1])
            except (OSError, ValueError, IndexError):
                pass
        return delays


def _stat(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command name (the name may hold spaces and parentheses)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _listdir(path: Path) -> list[Path]:
    try:
        return [p for p in path.iterdir() if p.name.isdigit()]
    except OSError:
        return []


def _tree(root: int) -> list[int]:
    """root and every process descending from it now."""
    children: dict[int, list[int]] = {}
    for p in _listdir(Path("/proc")):
        fields = _stat(int(p.name))
        if fields:
            children.setdefault(int(fields[1]), []).append(int(p.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found
