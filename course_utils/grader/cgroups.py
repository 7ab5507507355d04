"""A memory, process and CPU cgroup for one grading worker, where the machine lets the grader make
one (root).

    cgroup = Cgroup("course-sandbox-...", memory_bytes, processes,
                    cpus)                # cgroup.dirs == [] where it could not be made
    ...                                  # processes join by writing their pid to DIR/cgroup.procs
    cgroup.cpu_seconds();
    cgroup.threads()                     # what the worker's processes used, and their threads
    cgroup.limit_processes(0);
    cgroup.processes_refused()           # no new process or thread; refusals so far
    cgroup.kill(); cgroup.remove()

cgroup v2 (one directory) or v1 (one directory per controller: memory, pids, cpu, cpuacct). Every
worker's cgroup has the same CPU weight (shares) and a quota of `cpus` cores, so a submission that
starts many busy processes gets no more CPU than one that starts none, and its neighbours keep their
share. A machine without a CPU controller still gets the memory and process cgroup (cpu is then
False, and course_utils.grader.sandbox's warning says so). Names start with
"course-" and hold the grading process's pid, and get a random suffix, so a reused pid never meets a
directory left behind; the first Cgroup of a process removes the empty ones of graders that are gone
(killed before they could clean up). On v1 the memory controller also counts
socket buffers (memory.kmem.tcp.*), capped at TCP_BYTES: otherwise data parked in loopback sockets
would be memory the kernel's peak does not see (course_utils.grader.peakmemory).
"""

import os
import re
import signal
import time
import uuid
from pathlib import Path

TCP_BYTES = 64 * 2 ** 20   # socket buffers of one worker (lesson 08's gloo needs a few MB)


_swept = False


def _sweep(parents: list[Path]) -> None:
    """Remove the empty "course-...-PID-..." cgroups whose grading process PID no longer runs."""
    for parent in parents:
        for d in parent.glob("course-*"):
            match = re.match(r"course-\D*?(\d+)-", d.name)
            if match is None:
                continue
            try:
                os.kill(int(match.group(1)), 0)
            except ProcessLookupError:
                try:
                    d.rmdir()  # refused while any process is in it
                except OSError:
                    pass
            except (PermissionError, OverflowError):
                pass


BASE = Path("/sys/fs/cgroup")
PERIOD_US = 100_000        # the CPU quota's period


def _v2() -> bool:
    return (BASE / "cgroup.controllers").exists()


def _v1_parents() -> list[Path]:
    """v1 controller folders, each once (cpu and cpuacct are often one folder, mounted as
    cpu,cpuacct)."""
    seen, parents = set(), []
    for ctrl in ("memory", "pids", "cpu", "cpuacct"):
        p = BASE / ctrl
        if p.is_dir() and p.resolve() not in seen:
            seen.add(p.resolve())
            parents.append(p)
    return parents


class Cgroup:
    """A memory + pids (+ cpu) cgroup (v2, or v1 controllers), where the machine lets us make
    one."""

    def __init__(self, name: str, memory_bytes: int, processes: int, cpus: float | None = None):
        self.dirs: list[Path] = []
        self.cpu = False               # a CPU share and quota of its own
        self._usage: Path | None = None     # cpuacct.usage (ns) or cpu.stat (usage_usec)
        self._threads: Path | None = None   # the file listing every thread in it
        self._pids: Path | None = None      # the folder with pids.max and pids.events
        name = f"{name}-{uuid.uuid4().hex[:8]}"
        global _swept
        if not _swept:
            _swept = True
            _sweep([BASE] if _v2() else _v1_parents())
        try:
            if _v2():
                try:  # the cpu controller for the folders below the root (often on already)
                    (BASE / "cgroup.subtree_control").write_text("+cpu")
                except OSError:
                    pass
                d = BASE / name
                d.mkdir()
                self.dirs.append(d)
                for k, v in (("memory.max", memory_bytes), ("pids.max", processes)):
                    (d / k).write_text(str(v))
                self._usage, self._threads, self._pids = d / "cpu.stat", d / "cgroup.threads", d
                if cpus is not None:
                    self.cpu = _write_all(d, {"cpu.weight": "100",
                                              "cpu.max": f"{int(cpus * PERIOD_US)} {PERIOD_US}"})
            else:
                for ctrl, k, v in (("memory", "memory.limit_in_bytes", memory_bytes),
                                   ("pids", "pids.max", processes)):
                    d = BASE / ctrl / name
                    d.mkdir()
                    self.dirs.append(d)
                    (d / k).write_text(str(v))
                    if ctrl == "pids":
                        self._pids = d
                # v1 counts socket buffers only once they are limited; without it peakmemory
                # measures nothing
                try:
                    (self.dirs[0] / "memory.kmem.tcp.limit_in_bytes").write_text(str(TCP_BYTES))
                except OSError:
                    pass
                self._threads = self.dirs[0] / "tasks"
                if cpus is not None:
                    self._v1_cpu(name, cpus)
        except OSError:
            self.remove()

    def _v1_cpu(self, name: str, cpus: float) -> None:
        """The cpu controller (shares, quota) and cpuacct (usage), one folder or two; without them
        the worker is still measured by its threads (course_utils.grader.workerclock), only not
        given a share."""
        cpu, acct = BASE / "cpu", BASE / "cpuacct"
        try:
            made = []
            for d in dict.fromkeys(p.resolve() for p in (cpu, acct) if p.is_dir()):
                (d / name).mkdir()
                made.append(d / name)
                self.dirs.append(d / name)
            for d in made:
                if (d / "cpuacct.usage").exists():
                    self._usage = d / "cpuacct.usage"
                if (d / "cpu.shares").exists():
                    self.cpu = _write_all(d, {"cpu.shares": "1024",
                                              "cpu.cfs_period_us": str(PERIOD_US),
                                              "cpu.cfs_quota_us": str(int(cpus * PERIOD_US))})
        except OSError:
            pass

    def cpu_seconds(self) -> float | None:
        """CPU time used by every process that ever ran in it (exited ones too), or None where
        unknown."""
        try:
            if self._usage is None:
                return None
            text = self._usage.read_text()
            if self._usage.name == "cpu.stat":
                return next(int(v) for k, v in (line.split() for line in text.splitlines())
                            if k == "usage_usec") / 1e6
            return int(text) / 1e9
        except (OSError, ValueError, StopIteration):
            return None

    def file_bytes(self) -> int | None:
        """Page cache of files (not tmpfs) charged to it: what its processes read that nobody had
        cached."""
        for d in self.dirs:
            try:
                stat = dict(line.split() for line in (d / "memory.stat").read_text().splitlines())
            except (OSError, ValueError):
                continue
            cache = stat.get("cache", stat.get("file"))
            return int(cache) - int(stat.get("shmem", 0)) if cache is not None else None
        return None

    def threads(self) -> list[int] | None:
        """The thread ids of every process in it now, or None where unknown."""
        try:
            return ([int(t) for t in self._threads.read_text().split()]
                    if self._threads is not None else None)
        except (OSError, ValueError):
            return None

    def limit_processes(self, n: int) -> bool:
        """Let its processes hold at most n tasks (processes and threads) from now on: pids.max,
        which the kernel checks at every fork, clone and new thread (it may lie below what they hold
        now: 0 refuses every new one, and those running go on). False where it has no pids
        controller."""
        try:
            if self._pids is None:
                return False
            (self._pids / "pids.max").write_text(str(n))
            return True
        except OSError:
            return False

    def processes_refused(self) -> int | None:
        """How many new processes or threads the kernel has refused it for its process limit
        (pids.events' "max"), or None where unknown."""
        try:
            if self._pids is None:
                return None
            events = dict(line.split()
                          for line in (self._pids / "pids.events").read_text().splitlines())
            return int(events["max"])
        except (OSError, ValueError, KeyError):
            return None

    def kill(self) -> None:
        for d in self.dirs:
            if (d / "cgroup.kill").exists():
                try:
                    (d / "cgroup.kill").write_text("1")
                except OSError:
                    pass
            try:
                for pid in (d / "cgroup.procs").read_text().split():
                    os.kill(int(pid), signal.SIGKILL)
            except (OSError, ValueError):
                pass

    def remove(self) -> None:
        """Remove the cgroups once their killed processes are gone (rmdir fails while any is
        left)."""
        deadline = time.monotonic() + 10
        for d in self.dirs:
            while True:
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        break
                    self.kill()
                    time.sleep(0.05)
        self.dirs = []
        self._usage = self._threads = self._pids = None


def _write_all(d: Path, values: dict) -> bool:
    try:
        for k, v in values.items():
            (d / k).write_text(v)
        return True
    except OSError:
        return False
