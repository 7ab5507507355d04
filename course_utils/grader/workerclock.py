"""How long a grading worker has run on its own account: the clock its time limits are read from.

On a shared machine the wall clock is not the learner's: with other work running, a cell that needs
one second of CPU can take a minute. course_utils.grader.worker reads a worker's time per command
(one cell, one judgement) from this clock instead:

    clock = Clock(pid, cgroup)       # the worker's outermost process, and its cgroup (or None)
    clock.start()                    # before the command
    r = clock.read()                 # r.wall, r.cpu, r.own, in seconds since start()

- cpu: CPU time used by the worker's processes: its cgroup's usage where it has one (every process,
  exited ones too), else the sum over its process tree (/proc/PID/stat, waited-for children
  included);
- held: how long the machine kept the worker as a whole from running, at least: since start(), for
  each of the worker's threads T, T's run-queue delay (the time it was runnable but waited for a
  CPU, /proc/TID/schedstat) less the CPU time all the worker's other threads got (the worker's CPU
  time less T's own); the largest of these over its threads, and over the readings so far;
- own = wall - held: running, sleeping, waiting on I/O and waiting on its own threads and children
  count; only waiting for a CPU that none of the worker's own threads was using does not.

Why this rule. While T waited for a CPU, the worker made no progress only at the moments when none
of its other threads ran either, and those ran at most their CPU time: so T's delay less the others'
CPU time is at most the time that no thread of the worker ran while one of them could have, time
the machine (other users' work, or the worker's CPU quota) took from the worker as a whole. A
single-threaded cell on a busy machine gets all its wait forgiven: its other threads (idle thread
pools, the sandbox's processes) take no CPU. A cell whose own threads compete for the CPUs gets
nothing for it: every second one of its spinners waits, another one runs. Making threads cannot
raise held: a new thread adds its CPU time to what is taken from every other thread's delay, a
sleeping thread waits for no CPU, and the main thread's sleep counts unless the machine kept every
other thread of the worker from running meanwhile. That is why held is not the largest delay of any
one thread (the rule before): an answer that slept while its own spinners waited for each other had
its sleep forgiven and held a grading slot 855 s, past the 600 s notebook limit. Each reading's
value is a bound for the time up to it, so the largest over readings is one for now (and keeps the
delay of a thread that has exited since); the worker's CPU time is read before the start's counters
and after each reading's, so that it covers all the CPU time they show, and a thread's CPU time
stays in it when the thread exits (the cgroup's usage, or its process's). A thread born since
start() is counted from 0, as is one whose counters went back (an id used again). A cell computing
on several threads on a busy machine is charged the time any of its threads ran, somewhat more than
on a quiet machine. Without a cgroup (grading as a normal user) the worker is its process tree: a
process that leaves the tree (possible only outside the sandbox's PID namespace, whose init adopts
orphans) counts as the machine's.

The sandbox stops a command whose own time or CPU time passes the limit (the learner's doing), and
one whose wall time passes Limits.overload_factor (course_utils.grader.worker) times the limit
without that (the machine's: it is graded again).
Where /proc has no schedstat, held is 0 and own is the wall clock.
"""

import os
import time
from dataclasses import dataclass
from pathlib import Path

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
    """A worker's CPU time and run-queue waits, read from outside it (see the module's
    docstring)."""

    def __init__(self, pid: int, cgroup=None):
        self.pid, self.cgroup = pid, cgroup
        self.start()

    def start(self) -> None:
        self._t0 = time.monotonic()
        self._cpu0 = self._cpu()
        self._counters0 = self._counters()
        self._held = 0.0

    def read(self) -> Reading:
        counters = self._counters()
        cpu = self._cpu() - self._cpu0   # read after the threads' counters: it covers all they show
        self._held = max(self._held, _held(self._counters0, counters, cpu))
        return Reading(time.monotonic() - self._t0, max(0.0, cpu), self._held)

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

    def _counters(self) -> dict[int, tuple[int, int]]:
        """{tid: (CPU ns, run-queue delay ns)} of the worker's threads now."""
        counters = {}
        for tid in self._threads():
            try:
                fields = Path(f"/proc/{tid}/schedstat").read_text().split()
                counters[tid] = (int(fields[0]), int(fields[1]))
            except (OSError, ValueError, IndexError):
                pass
        return counters


def _held(start: dict[int, tuple[int, int]], now: dict[int, tuple[int, int]], cpu: float) -> float:
    """Seconds since `start` for which no thread of the worker ran while one of them waited for a
    CPU, at least: the largest delay of one thread less the CPU time of all the others (`cpu`: the
    worker's CPU seconds since `start`, exited threads included). See the module's docstring."""
    deltas = []
    for tid, (ran, waited) in now.items():
        ran0, waited0 = start.get(tid, (0, 0))   # a thread born since: all its delay is within
        # an id used again by a new thread: all of it is new
        if ran < ran0 or waited < waited0:
            ran0 = waited0 = 0
        deltas.append((ran - ran0, waited - waited0))
    cpu_ns = max(cpu * 1e9, sum(ran for ran, _ in deltas))
    return max(0.0, max((waited - (cpu_ns - ran) for ran, waited in deltas), default=0) / 1e9)


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
