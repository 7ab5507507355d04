"""A memory, process and CPU limit on each learner's JupyterLab, so a class of 40 shares one
machine.

LimitedSpawner is JupyterHub's LocalProcessSpawner, except that a learner's server (and every
kernel, terminal and process it starts) runs in a cgroup of its own, made by the grader's
course_utils.grader.cgroups.Cgroup (v2, or the v1 memory, pids, cpu and cpuacct controllers):

- memory_bytes: the most memory the learner's processes hold together; past it the kernel's OOM
  killer ends the largest of them (a kernel that allocates too much), never another learner's,
  never the hub.
- cpus: a quota of that many cores and the same CPU weight as every other learner, so a busy kernel
  slows no one else down more than any other learner's.
- processes: processes and threads together (torch starts a thread per core).

The server joins its cgroup before it runs anything (in the child, between fork and exec, as root);
swap counts in the memory limit, and torch's thread pools are sized to the quota (OMP_NUM_THREADS).
The instructor's server has no limit: it grades, and the grader gives each learner's code a cgroup
of its own. Where no cgroup can be made (not root, no cgroup file system), the learner's server
does not start, and the hub's page says why (fails closed); `course.sh hub --learner-memory-mb 0`
runs learners without limits. A cgroup ends with its server (stopped, or found ended by
JupyterHub's poll), and the grader's sweep removes the empty ones of a hub that is gone (their
names hold the hub's pid).
"""

import asyncio
import os
from pathlib import Path

from jupyterhub.spawner import LocalProcessSpawner
from traitlets import Float, Integer, Set

from course_utils.grader.cgroups import Cgroup


class NoCgroup(RuntimeError):
    """The machine would not give a learner's server its cgroup."""


class LimitedSpawner(LocalProcessSpawner):
    memory_bytes = Integer(0, help="memory of one learner's processes together (0: no limit)").tag(
        config=True)
    cpus = Float(1.0, help="cores one learner's processes may use together").tag(config=True)
    processes = Integer(1024, help="processes and threads of one learner").tag(config=True)
    unlimited = Set(help="users whose servers get no limit (the instructor)").tag(config=True)

    _cgroup = None

    def limited(self) -> bool:
        return self.memory_bytes > 0 and self.user.name not in self.unlimited

    def get_env(self):
        env = super().get_env()
        # torch would start a thread per core of the machine, each throttled by the quota
        if self.limited():
            for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
                env[name] = str(max(1, int(self.cpus)))
        return env

    def make_preexec_fn(self, name):
        become = super().make_preexec_fn(name)
        joins = [os.fsencode(d / "cgroup.procs") for d in self._cgroup.dirs] if self._cgroup else []

        def preexec():
            # as root, before the server becomes the user and runs anything ("0": this process)
            for path in joins:
                fd = os.open(path, os.O_WRONLY)
                try:
                    os.write(fd, b"0")
                finally:
                    os.close(fd)
            become()
        return preexec

    async def start(self):
        await self._end_cgroup()
        if self.limited():
            cgroup = Cgroup(f"course-hub-{os.getpid()}-{self.user.name}", self.memory_bytes,
                            self.processes, self.cpus)
            self._cgroup = cgroup
            why = ("its memory cgroup could not be made" if not cgroup.dirs else
                   "its CPU quota could not be set (no cpu controller)" if not cgroup.cpu else
                   None if _no_swap(cgroup, self.memory_bytes) else
                   "swap could not be kept out of its memory limit")
            if why:
                await self._end_cgroup()
                raise NoCgroup(
                    f"{self.user.name}'s server was not started: {why} (the hub must run as root "
                    "on a machine with "
                    "a cgroup file system at /sys/fs/cgroup and its memory, pids and cpu "
                    "controllers). Fix that and "
                    "start the server again; to run learners without memory and CPU limits, "
                    "start the hub with "
                    "--learner-memory-mb 0.")
        try:
            return await super().start()
        except BaseException:
            await self._end_cgroup()
            raise

    async def poll(self):
        status = await super().poll()
        # ended by itself (File > Shut Down, a crash): JupyterHub will not call stop()
        if status is not None:
            await self._end_cgroup()
        return status

    async def stop(self, now=False):
        try:
            await super().stop(now=now)
        finally:
            await self._end_cgroup()

    async def _end_cgroup(self):
        cgroup, self._cgroup = self._cgroup, None
        if cgroup is not None:
            await asyncio.to_thread(cgroup.remove)   # kills what is left in it, then removes it


def _no_swap(cgroup: Cgroup, memory_bytes: int) -> bool:
    """Swap counted in the memory limit, so a process past it is ended rather than swapped out:
    cgroup v2's memory.swap.max 0, v1's memory.memsw.limit_in_bytes (there with swap accounting on).
    True where done, or where the machine has no swap to use."""
    for d in cgroup.dirs:
        for name, value in (("memory.swap.max", "0"),
                            ("memory.memsw.limit_in_bytes", str(memory_bytes))):
            if (d / name).exists():
                try:
                    (d / name).write_text(value)
                    return True
                except OSError:
                    return False
    return _swap_bytes() == 0


def _swap_bytes() -> int:
    try:
        fields = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines()
                      if ":" in line)
        return int(fields["SwapTotal"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return 1   # unknown: as if there were swap
