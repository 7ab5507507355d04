"""Peak memory measured by the kernel, for the grader: what no code inside the worker can fake.

A grading worker that runs in a memory cgroup (course_utils.grader.cgroups.Cgroup, when grading as
root) is charged by the kernel for every page its processes use: the learner's process, any process
it starts, files it writes to the sandbox's tmpfs. The cgroup's high-water mark is kept by the
kernel and lives in the cgroup file system, which the sandbox does not contain, so the learner's
code can neither read nor reset it. The grader resets it before a test cell and reads it after:

    peak = PeakMemory(cgroup.dirs)   # None from .read() where the machine offers no resettable peak
    peak.reset()
    ...                              # the worker runs the test cell
    peak.read()                      # -> bytes in use at the highest point since reset()

The number is the whole cgroup's memory in use (Python, torch, everything resident), not an
increase: an answer that first grows its process and then reuses that memory pays for it. Judges
compare it with the reference solution's peak on the same probe (memory_peaks below). For the two
to compare, both workers collect garbage first and run with glibc's mmap threshold fixed
(course_utils.grader.worker), so that freed tensors leave the heap instead of lingering in it.

cgroup v1: memory.memsw.max_usage_in_bytes (memory + swap) or memory.max_usage_in_bytes, plus the
socket buffers (memory.kmem.tcp.max_usage_in_bytes, which v1 counts apart;
course_utils.grader.cgroups turns that accounting on), each reset by writing 0. cgroup v2:
memory.peak (sockets included), reset by writing to it (Linux 6.12+; the reset holds for the open
file it was written through). Elsewhere nothing is measured. Huge pages are charged to no memory
cgroup, so measures_memory() also asks that the machine reserves none.
"""

import os
from pathlib import Path

V1_FILES = ("memory.memsw.max_usage_in_bytes", "memory.max_usage_in_bytes")
V1_TCP = "memory.kmem.tcp.max_usage_in_bytes"


class PeakMemory:
    """The high-water mark of one memory cgroup, given the cgroup's directories (v1: one per
    controller)."""

    def __init__(self, dirs):
        self._fd = None
        self._v1: list[Path] = []
        files = peak_files(dirs)
        if files and files[0].name == "memory.peak":
            try:
                self._fd = os.open(files[0], os.O_RDWR)
            except OSError:  # older kernels: read-only, so it cannot be reset
                self._fd = None
        else:
            self._v1 = files

    @property
    def available(self) -> bool:
        return bool(self._v1) or self._fd is not None

    def reset(self) -> bool:
        """Start a new measurement; False when it could not be reset (read() then says None)."""
        try:
            if self._v1:
                for f in self._v1:
                    f.write_text("0")
                return True
            if self._fd is not None:
                os.pwrite(self._fd, b"reset\n", 0)
                return True
        except OSError:
            self.close()
        return False

    def read(self) -> int | None:
        """Bytes in use at the highest point since reset(), or None where nothing is measured.
        (v1: the memory peak plus the socket-buffer peak, an upper bound of their sum's peak.)"""
        try:
            if self._v1:
                return sum(int(f.read_text()) for f in self._v1)
            if self._fd is not None:
                return int(os.pread(self._fd, 64, 0))
        except (OSError, ValueError):
            self.close()
        return None

    def close(self) -> None:
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
        self._fd, self._v1 = None, []


def peak_files(dirs) -> list[Path]:
    """The files PeakMemory(dirs) resets and reads: v2 [memory.peak]; v1 the memory peak and the
    socket-buffer peak, or [] where socket buffers are not counted (a limit was not set); []
    elsewhere. The grader gives these, and nothing else of the cgroup, to a reference run that
    measures itself as another user (course_utils.grader.worker, run_as)."""
    for d in map(Path, dirs):
        memory = next((d / n for n in V1_FILES if (d / n).exists()), None)
        if memory is not None:
            tcp_on = (d / V1_TCP).exists() and _tcp_limited(d)
            return [memory, d / V1_TCP] if tcp_on else []
        if (d / "memory.peak").exists():
            return [d / "memory.peak"]
    return []


def _tcp_limited(d: Path) -> bool:
    try:
        return int((d / "memory.kmem.tcp.limit_in_bytes").read_text()) < 2 ** 60
    except (OSError, ValueError):
        return False


def from_environment() -> PeakMemory | None:
    """The reference worker's own cgroup (COURSE_CGROUPS: directories separated by ':', joined by
    the shell that started it), or None when the grader gave it none. Only the trusted reference
    uses this."""
    dirs = [d for d in os.environ.pop("COURSE_CGROUPS", "").split(":") if d]
    peak = PeakMemory(dirs) if dirs else None
    return peak if peak is not None and peak.available else None
