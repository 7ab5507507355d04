"""Shared pytest set-up: tests marked `cuda` skip, with a reason, where no GPU is present; the browser
tests' command-line options (tests/browser)."""

import pytest
import torch


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU; torch.cuda.is_available() is False here")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


def pytest_addoption(parser):
    # Options of the browser tests (tests/browser); declared here, where pytest looks for options.
    group = parser.getgroup("browser", "the course in JupyterLab in a real browser (tests/browser)")
    group.addoption("--refresh-docs-screenshots", action="store_true",
                    help="after the browser tests, copy the README's screenshots to docs/screenshots/")
    group.addoption("--browser-all", action="store_true",
                    help="press Validate in every lesson, not only the first (slower)")
