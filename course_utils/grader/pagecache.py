"""The page cache of the files every sandbox shares, kept out of a neighbouring sandbox's reach.

All sandboxes read the same Python environment and system folders (read-only mounts of the same
files: the same page cache), and a memory cgroup is charged for the file pages its processes bring
into the cache. So a learner's code that keeps dropping those files from the cache (posix_fadvise
DONTNEED on torch's .so, .py and .pyc files, on the fonts and libraries graphviz loads) makes the
honest learner graded beside it read them again, and the kernel charges them to that learner's
measured peak (course_utils.grader.peakmemory): lesson 05 lost 5 points to "103 MB more than the
reference".

The kernel does not drop a cached page that a process has mapped (posix_fadvise, drop_caches and
MADV_PAGEOUT all skip mapped pages). So once the reference worker has run the lesson, the grader
maps every page of those files that is then in the cache, and keeps it mapped while it grades: no
neighbour can evict it, and learners find it cached, charged to no learner.

    pin = pin_environment(reference.worker.pid,
                          measured)   # after the reference ran the instructor's notebook
    pin.summary()      # "pinned 4,035 files, 483 MB of page cache", or why nothing is pinned
    ...                # grade
    pin.close()

Which files: those the reference process has mapped (/proc/PID/maps), then every file under the
Python environment (sys.prefix, the standard library, course_utils), then under the system folders
the sandbox mounts (course_utils.grader.sandbox.SYSTEM_DIRS). A helper process holds the mappings
(`python -m course_utils.grader.pagecache`), one per file with cached pages, up to vm.max_map_count,
so the grader's own address space is untouched; it reads nothing that was not cached and exits when
the pin is closed or the grader dies. Pages are mapped, not locked: memory pressure can still
reclaim them (keep the workers' memory limits within the machine's memory). Mapping needs no
privilege, but seeing which pages are cached does: Linux tells a user that every page of a file it
may not write is cached (mincore; cachestat refuses), so a grader that is not root would read whole
files from disk to "pin" them. The hub's instructor, whose workers' peaks the hub's root worker
measures, pins through that root worker (course_utils.grader.rootworker.pin_environment), which
holds the mappings as root. Where no memory cgroup measures peaks (not Linux, no cgroup, a grader
that is neither root nor given measured workers) nothing is pinned and the reason says why.
"""

import json
import os
import select
import stat
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

FIRST = (".so", ".pyc", ".py")   # pinned before other files of a folder group (.so.N counts as .so)
MAPS_LEFT = 2048                 # mappings the helper leaves free under vm.max_map_count for itself
START_SECONDS = 300              # how long the helper may take to walk and map (a loaded machine,
                                 # a slow disk)


class Pin:
    """Cached pages held by a helper process; close() lets them go. files, bytes: what it holds."""

    def __init__(self, reason: str | None = None, proc: subprocess.Popen | None = None,
                 stats: dict | None = None):
        self.reason, self._proc, stats = reason, proc, stats or {}
        self.files: int = stats.get("files", 0)
        self.bytes: int = stats.get("bytes", 0)
        # files with cached pages left out: over the mapping budget
        self.skipped: int = stats.get("skipped", 0)
        self.seconds: float = stats.get("seconds", 0.0)

    @property
    def active(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def summary(self) -> str:
        if self._proc is None:
            return f"no page cache pinned: {self.reason}"
        if not self.active:
            return "no page cache pinned: its helper process ended"
        more = f"; {self.skipped:,} more files left out (vm.max_map_count)" if self.skipped else ""
        return f"pinned {self.files:,} files, {self.bytes / 2 ** 20:.0f} MB of page cache{more}"

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            proc.stdin.close()   # the helper exits at the end of its input
            proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            try:
                # a pin held by root (the hub's root worker) cannot be signalled: it ends at EOF
                proc.kill()
                proc.wait()
            except OSError:
                pass
        proc.stdout.close()
        self.reason = "closed"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def pin_environment(pid: int | None = None, measured: bool | None = None) -> Pin:
    """Pin the cached pages of the files every sandbox shares, those process `pid` (the trusted
    reference worker, once it ran the lesson) has mapped first. measured: whether the workers' peaks
    are measured by a memory cgroup (the reference's were); None: as this process would measure them
    (root, and a memory cgroup). Always returns a Pin; where nothing is pinned, its reason says why.
    Takes a few seconds (a walk of the environment and /usr)."""
    reason = _why_not(measured)
    if reason is not None:
        return Pin(reason)
    env, system = folders()
    request = {"pid": pid, "env": [str(d) for d in env], "system": [str(d) for d in system]}
    try:
        proc = subprocess.Popen([sys.executable, "-m", "course_utils.grader.pagecache"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, start_new_session=True,
                                env={**os.environ,
                                     "PYTHONPATH": str(Path(__file__).resolve().parent.parent)})
    except OSError as e:
        return Pin(f"its helper process could not start ({type(e).__name__})")
    try:
        proc.stdin.write((json.dumps(request) + "\n").encode())
        proc.stdin.flush()
        stats = json.loads(_read_line(proc, START_SECONDS))
        if not isinstance(stats, dict) or "files" not in stats:
            raise ValueError("not a summary")
    except (OSError, ValueError, TimeoutError) as e:
        proc.kill()
        proc.wait()
        proc.stdout.close()
        return Pin(f"its helper process failed ({type(e).__name__}: {str(e)[:200]})")
    return Pin(None, proc, stats)


def hold(pid: int | None) -> dict:
    """In this process: map the cached pages of folders()' files, those `pid` has mapped first, and
    keep them mapped for this process's life (the hub's root worker pins this way). Returns the
    counts."""
    env, system = folders()
    stats = _hold({"pid": pid, "env": [str(d) for d in env], "system": [str(d) for d in system]})
    _give_back_memory()
    return stats


def _give_back_memory() -> None:
    """The walk's lists are garbage once the pages are mapped: give their memory back to the
    system."""
    import ctypes
    import gc
    gc.collect()
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except AttributeError:
        pass


def _why_not(measured: bool | None) -> str | None:
    if not sys.platform.startswith("linux"):
        return "not Linux (no memory cgroup measures peaks, so there is nothing to protect)"
    if measured is None:
        if os.geteuid() != 0:
            return "not root (no memory cgroup measures peaks, so there is nothing to protect)"
        from course_utils.grader.capabilities import measures_memory
        measured = measures_memory()
    if not measured:
        return "no memory cgroup measures peaks here, so there is nothing to protect"
    return None


def folders() -> tuple[list[Path], list[Path]]:
    """(the Python environment's folders, the system folders) that every sandbox mounts read-only,
    resolved, nested ones dropped: course_utils.grader.sandbox's list, plus the standard library and
    site-packages wherever they are. An environment folder may lie in a system folder (a venv of the
    system's Python: /usr/lib/python3.11 in /usr); _candidates walks it once, with the
    environment."""
    from course_utils.grader.sandbox import SYSTEM_DIRS, _kept_paths
    paths = sysconfig.get_paths()
    env = {Path(p).resolve() for p in (sys.prefix, sys.exec_prefix, paths.get("stdlib"),
                                       paths.get("platstdlib"), paths.get("purelib"),
                                       paths.get("platlib"), Path(__file__).parent,
                                       *_kept_paths()) if p}
    system = {Path("/", d).resolve() for d in SYSTEM_DIRS}
    env = _outermost(p for p in env if p.is_dir() and p != Path("/"))
    system = _outermost(d for d in system if d.is_dir() and d != Path("/")
                        and not any(d.is_relative_to(e) for e in env))
    return env, system


def _outermost(paths) -> list[Path]:
    paths = set(paths)
    return sorted(p for p in paths if not any(q != p and p.is_relative_to(q) for q in paths))


def mapped_files(pid: int, under: list[str]) -> list[str]:
    """The files process `pid` has mapped (its libraries), from /proc/PID/maps, that lie under one
    of the folders `under` (not its /tmp or /dev/shm files); [] if it is gone."""
    try:
        lines = Path(f"/proc/{pid}/maps").read_text().splitlines()
    except OSError:
        return []
    prefixes = tuple(d.rstrip("/") + "/" for d in under)
    files = []
    for line in lines:
        parts = line.split(None, 5)
        if (len(parts) == 6 and parts[5].startswith(prefixes)
                and not parts[5].endswith(" (deleted)")):
            files.append(parts[5])
    return list(dict.fromkeys(files))


def _read_line(proc: subprocess.Popen, seconds: float) -> str:
    deadline, data = time.monotonic() + seconds, b""
    while not data.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([proc.stdout], [], [], left)[0]:
            raise TimeoutError(f"no answer in {seconds:.0f} s")
        chunk = os.read(proc.stdout.fileno(), 65536)
        if not chunk:
            raise ValueError(f"it exited with code {proc.wait()}")
        data += chunk
    return data.decode()


# ---------------------------------------------------------------------------------------------
# The helper process: maps the cached pages, answers with what it holds, waits for end of input.

def _candidates(pid: int | None, env: list[str], system: list[str]):
    """The reference's mapped files, then the environment's, then the system folders' (in each
    group, libraries and bytecode first), one group's list in memory at a time."""
    first = mapped_files(pid, env + system) if pid else []
    yield from first
    first = set(first)
    # a system folder may hold the environment (/usr holds a system Python's /usr/lib/python3.11)
    walked = set(env)
    for group in (env, system):
        ranked: list[list[str]] = [[] for _ in range(len(FIRST) + 1)]
        stack = list(group)
        while stack:
            try:
                entries = list(os.scandir(stack.pop()))
            except OSError:
                continue
            for e in entries:
                try:
                    if e.is_dir(follow_symlinks=False):
                        if group is env or e.path not in walked:
                            stack.append(e.path)
                    elif e.is_file(follow_symlinks=False) and e.path not in first:
                        rank = next((i for i, s in enumerate(FIRST)
                                     if e.name.endswith(s) or s + "." in e.name), len(FIRST))
                        ranked[rank].append(e.path)
                except OSError:
                    continue
        for paths in ranked:
            yield from paths


def _hold(request: dict) -> dict:
    """Map the cached pages of every candidate file and keep them mapped (for as long as this
    process lives). Returns {"files", "bytes", "skipped", "seconds"}."""
    import ctypes
    import errno
    import re

    class Range(ctypes.Structure):
        _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]

    class CacheStat(ctypes.Structure):
        _fields_ = [(n, ctypes.c_uint64)
                    for n in ("cache", "dirty", "writeback", "evicted", "recently_evicted")]

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    libc.syscall.restype = ctypes.c_long
    PROT_READ, MAP_SHARED, MADV_POPULATE_READ = 1, 1, 22
    # cachestat(2), Linux 6.5+ (one number on every architecture): skips uncached files unmapped
    CACHESTAT = 451
    mmap_failed = ctypes.c_void_p(-1).value
    page = os.sysconf("SC_PAGE_SIZE")
    cached_run = re.compile(rb"\x01+")   # mincore: 1 where the page is in the cache
    try:
        budget = int(Path("/proc/sys/vm/max_map_count").read_text()) - MAPS_LEFT
    except (OSError, ValueError):
        budget = 65530 - MAPS_LEFT
    whole, cache = Range(0, 0), CacheStat()
    use_cachestat = populate = True
    start = time.monotonic()
    seen = set()
    files = total = skipped = 0
    for path in _candidates(request.get("pid"), request.get("env", []), request.get("system", [])):
        try:
            # O_NOATIME: root, or the owner, writes no access times; never through a link, never
            # waiting on a FIFO (a mapped file's path comes from the caller's process)
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOATIME | os.O_NOFOLLOW
                         | os.O_NONBLOCK)
        except OSError as e:
            if e.errno != errno.EPERM:   # EPERM: O_NOATIME on another's file; read it without
                continue
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
            except OSError:
                continue
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size == 0:
                continue
            if use_cachestat:
                if libc.syscall(CACHESTAT, fd, ctypes.byref(whole), ctypes.byref(cache), 0) == 0:
                    if cache.cache == 0:
                        continue
                elif ctypes.get_errno() == errno.ENOSYS:
                    use_cachestat = False
            if (st.st_dev, st.st_ino) in seen:   # a file met twice (a hard link, nested folders)
                continue
            seen.add((st.st_dev, st.st_ino))
            size = st.st_size
            addr = libc.mmap(None, size, PROT_READ, MAP_SHARED, fd, 0)
            if addr is None or addr == mmap_failed:
                continue
        finally:
            os.close(fd)
        vec = ctypes.create_string_buffer((size + page - 1) // page)
        runs = ([m.span() for m in cached_run.finditer(vec.raw)]
                if libc.mincore(addr, size, vec) == 0 else [])
        if not runs or files >= budget:
            libc.munmap(addr, size)
            skipped += bool(runs)
            continue
        for a, b in runs:   # map the cached pages (they are not read again: they are in the cache)
            offset, length = a * page, min(b * page, size) - a * page
            if populate and libc.madvise(addr + offset, length, MADV_POPULATE_READ) != 0:
                if ctypes.get_errno() != errno.EINVAL:
                    continue   # the file shrank meanwhile: what could be mapped is
                populate = False   # before Linux 5.14: touch the pages one by one
            if not populate:
                for p in range(offset, offset + length, page):
                    ctypes.c_char.from_address(addr + p).value
            total += length
        files += 1
    return {"files": files, "bytes": total, "skipped": skipped,
            "seconds": round(time.monotonic() - start, 2)}


def main() -> None:
    request = json.loads(sys.stdin.buffer.readline() or b"{}")
    stats = _hold(request)
    _give_back_memory()
    sys.stdout.write(json.dumps(stats) + "\n")
    sys.stdout.flush()
    while sys.stdin.buffer.read(65536):   # until the grader closes the pin, or dies
        pass


if __name__ == "__main__":
    main()
