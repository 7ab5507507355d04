"""A memory and process cgroup for one grading worker, where the machine lets the grader make one (root).

    cgroup = Cgroup("course-sandbox-...", memory_bytes, processes)   # cgroup.dirs == [] where it could not be made
    ...                                                             # processes join by writing their pid to DIR/cgroup.procs
    cgroup.kill(); cgroup.remove()

cgroup v2 (one directory) or v1 (one directory per controller: memory, pids). Names start with
"course-" and hold the grading process's pid, and get a random suffix, so a reused pid never meets a
directory left behind; the first Cgroup of a process removes the empty ones of graders that are gone
(killed before they could clean up). On v1 the memory controller also counts
socket buffers (memory.kmem.tcp.*), capped at TCP_BYTES: otherwise data parked in loopback sockets
would be memory the kernel's peak does not see (course_utils.peakmemory).
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


class Cgroup:
    """A memory + pids cgroup (v2, or v1 controllers), where the machine lets us make one."""

    def __init__(self, name: str, memory_bytes: int, processes: int):
        self.dirs: list[Path] = []
        name = f"{name}-{uuid.uuid4().hex[:8]}"
        base = Path("/sys/fs/cgroup")
        wants = ({"memory.max": memory_bytes, "pids.max": processes}
                 if (base / "cgroup.controllers").exists() else None)
        global _swept
        if not _swept:
            _swept = True
            _sweep([base] if wants is not None else [base / "memory", base / "pids"])
        try:
            if wants is not None:
                d = base / name
                d.mkdir()
                self.dirs.append(d)
                for k, v in wants.items():
                    (d / k).write_text(str(v))
            else:
                for ctrl, k, v in (("memory", "memory.limit_in_bytes", memory_bytes),
                                   ("pids", "pids.max", processes)):
                    d = base / ctrl / name
                    d.mkdir()
                    self.dirs.append(d)
                    (d / k).write_text(str(v))
                try:  # v1 counts socket buffers only once they are limited; without it peakmemory measures nothing
                    (self.dirs[0] / "memory.kmem.tcp.limit_in_bytes").write_text(str(TCP_BYTES))
                except OSError:
                    pass
        except OSError:
            self.remove()

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
        """Remove the cgroups once their killed processes are gone (rmdir fails while any is left)."""
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
