"""Shared pytest set-up of tests/: tests marked `cuda` skip, with a reason, where no GPU is present;
the browser tests' command-line options (tests/browser); `notebook_function`, functions defined as a
notebook cell defines them (for course_utils.parallel, whose workers get such functions by their
source). How the whole suite runs (two files at a time, the time per file): ../conftest.py.
"""

import linecache

import pytest
import torch


def pytest_collection_modifyitems(config, items):
    if not torch.cuda.is_available():
        skip = pytest.mark.skip(reason="needs a CUDA GPU; torch.cuda.is_available() is False here")
        for item in items:
            if "cuda" in item.keywords:
                item.add_marker(skip)


def pytest_addoption(parser):
    # Options of the browser tests (tests/browser); declared here, where pytest looks for options.
    group = parser.getgroup("browser", "the course in JupyterLab in a real browser (tests/browser)")
    group.addoption("--refresh-docs-screenshots", action="store_true",
                    help="after the browser tests, copy the README's screenshots to "
                         "docs/screenshots/")
    group.addoption("--browser-all", action="store_true",
                    help="press Validate in every lesson, not only the first (slower)")


def _notebook_function(src, **names):
    """Define the functions in src as a notebook cell would: in __main__, with their source in
    linecache."""
    filename = f"<test cell {abs(hash(src))}>"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    ns = {"__name__": "__main__", **names}
    exec(compile(src, filename, "exec"), ns)
    return ns


@pytest.fixture
def notebook_function():
    """notebook_function(src, **names) -> the namespace a notebook cell with source src leaves
    (names: its globals)."""
    return _notebook_function

