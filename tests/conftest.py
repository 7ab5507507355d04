"""Shared pytest set-up: tests marked `cuda` skip, with a reason, where no GPU is present; the groups
that `bash course.sh test` runs side by side (pytest-xdist); the browser tests' command-line options
(tests/browser); `notebook_function`, functions defined as a notebook cell defines them (for
course_utils.parallel, whose workers get such functions by their source).

`bash course.sh test` runs the suite in two pytest-xdist workers (`-n 2`): each test file is a group
that one worker runs from start to end (its module fixtures made once), except the files of a lane
(LANES), which one worker runs one after another (Lanes, the scheduler). Most files keep one core busy while
they wait on a server, a kernel or nbgrader's start (the "busy cores" beside each file's time in a
run with `-n 0`), so two at a time use the machine's two cores.
"""

import linecache
import os
from collections import defaultdict

import pytest
import torch


# Files that never run beside one another, each lane in one worker, in this order:
LANES = {
    # they make Unix accounts and sudo rules, run code as other users, and `course.sh hub` takes other
    # users' permissions off the repository's tests/ and solutions/ while it runs (hub/classroom.py: SOURCES)
    "other-users": ("tests/hub/", "tests/grader/test_rootworker.py", "tests/grader/test_worker.py",
                    "tests/grader/test_sandbox.py", "tests/grader/test_capabilities.py"),
    "browser": ("tests/browser/",),   # one JupyterLab and one Chromium for all of them (tests/browser/conftest.py)
}
# The groups handed out first, the longest first (seconds in CI's log), so that no long one starts
# last and leaves the other worker idle; each worker takes two at its start. The rest follow in the
# order pytest collects them. A stale order costs minutes, never a result.
FIRST = ("tests/grader/test_preprocessors.py", "other-users", "tests/grader/test_grade.py", "browser")


def group_of(nodeid: str) -> str:
    """The group of a test that one xdist worker runs whole: its lane, else its file."""
    path = nodeid.split("::")[0]
    return next((lane for lane, paths in LANES.items() if any(path.startswith(p) for p in paths)), path)


def pytest_collection_modifyitems(config, items):
    if not torch.cuda.is_available():
        skip = pytest.mark.skip(reason="needs a CUDA GPU; torch.cuda.is_available() is False here")
        for item in items:
            if "cuda" in item.keywords:
                item.add_marker(skip)
    if hasattr(config, "workerinput"):   # an xdist worker: its collection is the order the groups are handed out in
        rank = {g: i for i, g in enumerate(FIRST)}   # whole groups moved, each in its own order
        items.sort(key=lambda item: rank.get(group_of(item.nodeid), len(FIRST)))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """xdist's scheduler by scope (loadscope), with group_of as the scope: a group goes to one worker whole.
    (xdist's own `--dist loadgroup` marks do not reach its scheduler under pytest 9: it rewrites
    item._nodeid, which pytest 9 no longer reads.)"""
    from xdist.scheduler import LoadScopeScheduling

    class Lanes(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    config.option.loadscopereorder = False   # the groups in the order of the workers' collection (FIRST)
    return Lanes(config, log)


def _busy_seconds() -> float | None:
    """CPU seconds the whole machine has spent busy since boot (every process: servers and kernels too),
    from /proc/stat; None where there is none."""
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)   # idle, iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


_busy = defaultdict(float)   # test file -> machine CPU seconds while its tests ran


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    before = _busy_seconds()
    yield
    after = _busy_seconds()
    if before is not None and after is not None:
        _busy[item.nodeid.split("::")[0]] += after - before


def pytest_terminal_summary(terminalreporter):
    """Each test file's share of the run (set-up, call and tear-down of its tests), the largest first,
    with the cores the machine kept busy meanwhile (its CPU seconds over the wall seconds: a file far below
    the machine's cores mostly waits): where the suite's 30-minute budget goes, in CI's log beside --durations."""
    seconds = defaultdict(float)
    for reports in terminalreporter.stats.values():
        for report in reports:
            if hasattr(report, "duration") and hasattr(report, "nodeid"):
                seconds[report.nodeid.split("::")[0]] += report.duration
    if not seconds:
        return
    # in xdist's workers, beside another file, the machine's busy time is not one file's: shown with -n 0 only
    cores = f"; busy cores of {os.cpu_count()}" if _busy else ""
    terminalreporter.write_sep("=", f"time per test file (of {sum(seconds.values()):.0f} s{cores})")
    for path, total in sorted(seconds.items(), key=lambda kv: -kv[1])[:25]:
        busy = (f"{_busy[path] / total:6.2f}" if total > 0 and path in _busy else "     -") if _busy else ""
        terminalreporter.write_line(f"{total:8.1f}s {busy}  {path}")


def pytest_addoption(parser):
    # Options of the browser tests (tests/browser); declared here, where pytest looks for options.
    group = parser.getgroup("browser", "the course in JupyterLab in a real browser (tests/browser)")
    group.addoption("--refresh-docs-screenshots", action="store_true",
                    help="after the browser tests, copy the README's screenshots to docs/screenshots/")
    group.addoption("--browser-all", action="store_true",
                    help="press Validate in every lesson, not only the first (slower)")


def _notebook_function(src, **names):
    """Define the functions in src as a notebook cell would: in __main__, with their source in linecache."""
    filename = f"<test cell {abs(hash(src))}>"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    ns = {"__name__": "__main__", **names}
    exec(compile(src, filename, "exec"), ns)
    return ns


@pytest.fixture
def notebook_function():
    """notebook_function(src, **names) -> the namespace a notebook cell with source src leaves (names: its globals)."""
    return _notebook_function

