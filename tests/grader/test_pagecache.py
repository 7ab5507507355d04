"""course_utils.grader.pagecache: a neighbour that drops the shared files from the page cache cannot
raise an honest learner's measured peak while the grader pins them (issue 13)."""

import ctypes
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from course_utils.grader import pagecache
from course_utils.grader.capabilities import measures_memory
from course_utils.grader.worker import Limits, Worker

MB = 2 ** 20
BUILD = Path(__file__).resolve().parents[2] / "build"
needs_cgroup = pytest.mark.skipif(not measures_memory(),
                                  reason="needs grading as root with a memory cgroup (a container "
                                         "or VM; CI has one)")


def test_nothing_is_pinned_where_no_peak_is_measured(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    pin = pagecache.pin_environment(os.getpid())
    assert not pin.active and pin.files == 0 and pin.bytes == 0
    assert (pin.summary() == "no page cache pinned: not root (no memory cgroup measures peaks, so "
                             "there is nothing to protect)")
    pin.close()
    monkeypatch.setattr(sys, "platform", "darwin")
    assert "not Linux" in pagecache.pin_environment().summary()


def test_the_pinned_folders_are_what_every_sandbox_reads():
    env, system = pagecache.folders()
    for path in (Path(sys.prefix), Path(pagecache.__file__).parent, Path(os.__file__).parent):
        assert any(path.resolve().is_relative_to(d) for d in env), path
    assert any(Path("/usr/lib").resolve().is_relative_to(d) for d in env + system)
    assert not any(s.is_relative_to(e) for e in env for s in system)


def test_a_system_folder_holding_the_environment_is_walked_once(tmp_path):
    """A venv of the system's Python: its standard library (an environment folder) lies in /usr (a
    system folder). Every file is a candidate once, the environment's first."""
    std, other = tmp_path / "usr" / "lib" / "python3.11", tmp_path / "usr" / "bin"
    for folder, names in ((std, ["os.py", "_ssl.so"]), (other, ["dot"])):
        folder.mkdir(parents=True)
        for name in names:
            (folder / name).write_text(name)
    got = list(pagecache._candidates(None, [str(std)], [str(tmp_path / "usr")]))
    assert got == [str(std / "_ssl.so"), str(std / "os.py"), str(other / "dot")]


def cached_pages(path: str) -> tuple[int, int]:
    """(pages of the file in the page cache, pages of the file), by mincore (root sees any
    file's)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    size, page = os.path.getsize(path), os.sysconf("SC_PAGE_SIZE")
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
    finally:
        os.close(fd)
    vec = ctypes.create_string_buffer((size + page - 1) // page)
    assert libc.mincore(addr, size, vec) == 0
    libc.munmap(addr, size)
    return sum(b & 1 for b in vec.raw), len(vec.raw)


def evict(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)


@needs_cgroup
@pytest.mark.slow
def test_pinned_pages_stay_cached_until_the_pin_is_closed(monkeypatch):
    # A folder of this test's own stands for the environment: a grading that runs beside this test
    # (another pytest worker) pins the environment's files itself, and a page it pins is never
    # dropped. On the repository's file system (build/), not /tmp, which may be a tmpfs that holds
    # no page cache to drop.
    BUILD.mkdir(exist_ok=True)
    folder = Path(tempfile.mkdtemp(dir=BUILD, prefix="pagecache-"))
    try:
        source = str(folder / "module.py")
        with open(source, "wb") as f:
            f.write(os.urandom(MB))
            f.flush()
            os.fsync(f.fileno())   # written back: a dirty page is not dropped
        Path(source).read_bytes()   # in the cache
        monkeypatch.setattr(pagecache, "folders", lambda: ([folder], []))
        pinned_then_dropped(source)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def pinned_then_dropped(source: str) -> None:
    with pagecache.pin_environment() as pin:
        assert pin.active and pin.files > 0 and pin.bytes > 0, pin.summary()
        assert pin.summary().startswith("pinned ")
        evict(source)
        cached, pages = cached_pages(source)
        assert cached == pages, "posix_fadvise(DONTNEED) dropped a pinned page"
    assert not pin.active and pin.summary() == "no page cache pinned: closed"
    evict(source)
    assert cached_pages(source)[0] < pages, ("once the pin is closed the pages can go (so the pin "
                                             "is what kept them)")


# A modest torch cell that runs code the worker has not run yet (libraries, Python modules).
WORKLOAD = """
import torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0)
m = nn.Sequential(nn.Conv2d(3, 16, 3), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                  nn.Linear(16 * 15 * 15, 10))
F.cross_entropy(m(torch.randn(8, 3, 32, 32)), torch.randint(0, 10, (8,))).backward()
torch.optim.Adam(m.parameters()).step()
out, _ = nn.LSTM(10, 20, 2)(torch.randn(5, 3, 10)); out.sum().backward()
nn.TransformerEncoderLayer(32, 4, 64)(torch.randn(6, 2, 32)).sum().backward()
torch.fft.fft(torch.randn(64)); torch.linalg.svd(torch.randn(10, 10))
torch.linalg.qr(torch.randn(8, 8))
"""

# The neighbour: drops every file it can see from the page cache (the same files, the same cache).
EVICT = """
import os, sys
paths = [os.path.join(d, f) for r in {"/usr", "/etc", sys.prefix, sys.base_prefix}
         for d, _, fs in os.walk(r) for f in fs]
for p in paths:
    try:
        fd = os.open(p, os.O_RDONLY)
    except OSError:
        continue
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    except OSError:
        pass
    os.close(fd)
"""


def run(worker: Worker, source: str) -> None:
    answer = worker.send({"op": "cell", "id": 0, "gid": None, "source": source}, timeout=300)
    assert answer["error"] is None, answer


def honest_peak(neighbour: Worker | None) -> int:
    """The peak the grader measures over WORKLOAD in a fresh learner's worker; the neighbour, if
    any, empties the cache before the worker starts and again before the measured cell."""
    if neighbour is not None:
        run(neighbour, EVICT)
    with Worker("learner", Limits(), slot=1) as w:
        run(w, "import torch")
        if neighbour is not None:
            run(neighbour, EVICT)
        w.send({"op": "collect"}, timeout=60)
        w.reset_peak()
        run(w, WORKLOAD)
        return w.peak_bytes()


@needs_cgroup
@pytest.mark.slow
def test_a_neighbour_evicting_the_page_cache_does_not_raise_an_honest_peak():
    """Unpinned, the evictions add about 30 MB to this peak (the files read again are charged to the
    honest worker; 90-160 MB in lessons 05 and 06); pinned, the two peaks are within about 1 MB."""
    with Worker("reference", Limits()) as reference:
        run(reference, "import torch")
        run(reference, WORKLOAD)   # the reference ran the lesson: what it read is in the cache
        with (pagecache.pin_environment(reference.proc.pid) as pin,
              Worker("learner", Limits(), slot=2) as neighbour):
            assert pin.active, pin.summary()
            pinned = pin.summary()
            quiet = honest_peak(None)
            attacked = honest_peak(neighbour)
    assert attacked - quiet < 8 * MB, ("the neighbour's evictions raised the honest peak by "
                                       f"{(attacked - quiet) / MB:.0f} MB ({quiet / MB:.0f} MB "
                                       f"quiet; {pinned})")
