"""How the whole suite runs (tests/ and, through nbval, solutions/): two test files at a time, and
where its 30 minutes go. Here, at the root, so that it holds whatever paths pytest is given (`bash
course.sh test solutions/01-circuits` too: tests/conftest.py is read only for paths under tests/).

`bash course.sh test` runs pytest in two pytest-xdist workers (`-n 2`). One worker runs a whole
group: a test file (its module fixtures made once; a notebook's cells in one kernel, in order), or
the files of a lane (LANES), one after another. Most files keep one core busy while they wait on a
server, a kernel or nbgrader's start (the "busy cores" beside each file's time in a run with
`-n 0`), so two at a time use the two cores of CI's machine. Lanes keep their own files apart; any
other file may run beside them. A test marked `alone` (CPU hogs that would slow the other worker's
tests) runs last, and with no test of the other worker running meanwhile (ALONE_LOCK).

Each worker, and every kernel, grader and server it starts, gets its share of the cores for torch's
threads (OMP_NUM_THREADS, unless it is set already): two kernels that each spin two OpenMP threads
on two busy cores ran lessons 09 and 10 side by side in 130 s each, with one thread each in 83 s and
27 s.
"""

import fcntl
import os
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import pytest

# Files one worker runs one after another, never beside one another:
LANES = {
    # they make Unix accounts and sudo rules, run code as other users, and `course.sh hub` takes
    # other users' permissions off the repository's tests/, solutions/, .git and build/ while it
    # runs (hub/classroom.py: SOURCES)
    "other-users": ("tests/hub/", "tests/grader/test_rootworker.py", "tests/grader/test_worker.py",
                    "tests/grader/test_sandbox.py", "tests/grader/test_capabilities.py",
                    "tests/grader/test_cluster.py"),
    # each module starts a JupyterLab and a Chromium of its own (tests/browser/conftest.py):
    # one at a time
    "browser": ("tests/browser/",),
}
# The groups handed out first, the longest first (seconds in CI's log), so that no long one starts
# last and leaves the other worker idle; a worker gets its next group once its current one is nearly
# done. The rest follow in the order pytest collects them, the groups with an `alone` test last.
# A stale order costs minutes, never a result.
FIRST = ("tests/grader/test_preprocessors.py", "other-users", "tests/grader/test_grade.py",
         "browser", "tests/authoring/test_wronganswers.py")


def pytest_configure(config):
    if hasattr(config, "workerinput"):
        cores = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                 else (os.cpu_count() or 1))
        os.environ.setdefault("OMP_NUM_THREADS",
                              str(max(1, cores // int(config.workerinput.get("workercount", 1)))))
        said = os.environ["OMP_NUM_THREADS"]
        # imported by a plugin: read already
        if "torch" in sys.modules and said.isdigit() and int(said) > 0:
            sys.modules["torch"].set_num_threads(int(said))


def group_of(nodeid: str) -> str:
    """The group of a test that one xdist worker runs whole: its lane, else its file."""
    path = nodeid.split("::")[0]
    return next((lane for lane, paths in LANES.items() if any(path.startswith(p) for p in paths)),
                path)


def pytest_collection_modifyitems(config, items):
    # an xdist worker: its collection is the order the groups are handed out in
    if hasattr(config, "workerinput"):
        rank = {g: i for i, g in enumerate(FIRST)}
        last = {group_of(item.nodeid) for item in items if item.get_closest_marker("alone")}
        # whole groups moved, each in its own order
        items.sort(key=lambda item: (group_of(item.nodeid) in last,
                                     rank.get(group_of(item.nodeid), len(FIRST))))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """xdist's scheduler by scope (loadscope), with group_of as the scope: a group goes to one
    worker whole. (xdist's own `--dist loadgroup` marks do not reach its scheduler under pytest 9:
    it rewrites item._nodeid, which pytest 9 no longer reads.)"""
    from xdist.scheduler import LoadScopeScheduling

    class Lanes(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    config.option.loadscopereorder = False   # the groups in the order of the workers' collection
    return Lanes(config, log)


def _alone_lock(config):
    """This run's lock file, shared by its workers (None outside xdist): every test holds it shared
    while it runs, an `alone` test exclusively."""
    if not hasattr(config, "workerinput"):
        return None
    # in the run's own temporary folder (each worker's is inside it)
    if not hasattr(config, "_course_alone_lock"):
        base = config.option.basetemp   # set by xdist for each worker: BASETEMP/popen-gwN
        path = (Path(base).parent / "alone.lock" if base else
                Path(tempfile.gettempdir())
                / f"course-tests-{config.workerinput['testrunuid']}.lock")
        config._course_alone_lock = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    return config._course_alone_lock


def _busy_seconds() -> float | None:
    """CPU seconds the whole machine has spent busy since boot (every process: servers and kernels
    too), from /proc/stat; None where there is none."""
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
    lock = _alone_lock(item.config)
    if lock is not None:
        fcntl.flock(lock, fcntl.LOCK_EX if item.get_closest_marker("alone") else fcntl.LOCK_SH)
    before = _busy_seconds()
    try:
        yield
    finally:
        after = _busy_seconds()
        if lock is not None:
            fcntl.flock(lock, fcntl.LOCK_UN)
    if before is not None and after is not None:
        _busy[item.nodeid.split("::")[0]] += after - before


def pytest_terminal_summary(terminalreporter):
    """Each test file's share of the run (set-up, call and tear-down of its tests), the largest
    first, with the cores the machine kept busy meanwhile in a run of one process (its CPU seconds
    over the wall seconds: a file far below the machine's cores mostly waits): where the suite's
    30-minute budget goes, in CI's log beside --durations."""
    seconds = defaultdict(float)
    for reports in terminalreporter.stats.values():
        for report in reports:
            if hasattr(report, "duration") and hasattr(report, "nodeid"):
                seconds[report.nodeid.split("::")[0]] += report.duration
    if not seconds:
        return
    # xdist's workers keep theirs (and beside another file the machine's busy time is not one
    # file's)
    cores = f"; busy cores of {os.cpu_count()}" if _busy else ""
    terminalreporter.write_sep("=", f"time per test file (of {sum(seconds.values()):.0f} s{cores})")
    for path, total in sorted(seconds.items(), key=lambda kv: -kv[1])[:25]:
        busy = ((f"{_busy[path] / total:6.2f}" if total > 0 and path in _busy else "     -")
                if _busy else "")
        terminalreporter.write_line(f"{total:8.1f}s {busy}  {path}")
