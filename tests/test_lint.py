"""The test command lints the course's Python (pyflakes, pycodestyle, lines of 100: pyproject.toml's
[tool.ruff]); notebooks are checked by tests/test_lessons.py."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format",
                           "concise", str(ROOT)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
