"""Shared pytest set-up: tests marked `cuda` skip, with a reason, where no GPU is present; the browser
tests' command-line options (tests/browser); `notebook_function`, functions defined as a notebook cell
defines them (for course_utils.parallel, whose workers get such functions by their source)."""

import linecache
import os
from collections import defaultdict

import pytest
import torch


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU; torch.cuda.is_available() is False here")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


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
    terminalreporter.write_sep("=", f"time per test file (of {sum(seconds.values()):.0f} s; busy cores of {os.cpu_count()})")
    for path, total in sorted(seconds.items(), key=lambda kv: -kv[1])[:25]:
        cores = f"{_busy[path] / total:6.2f}" if total > 0 and path in _busy else "     -"
        terminalreporter.write_line(f"{total:8.1f}s {cores}  {path}")


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
