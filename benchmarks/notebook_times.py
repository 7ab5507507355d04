"""Wall time of every solution notebook in a fresh kernel, and of autograding one submission.

    bash course.sh bench            (or: python benchmarks/notebook_times.py [LESSON ...])

Prints one line per notebook (run time, then the time `nbgrader autograde` takes for one solved
submission of it, kernel start included), then the totals. The notebooks are run from copies, so
solutions/ is not touched. Goal: each lesson well under a minute on a 2-core CPU.
"""

import argparse
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import torch
from nbclient import NotebookClient

from course_utils.authoring import nbgrader_cli

ROOT = Path(__file__).resolve().parent.parent


def run_time(path: Path) -> float:
    """Seconds to run the notebook at path top to bottom in a fresh kernel (kernel start
    included)."""
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    return time.perf_counter() - start


def autograde_time(course: Path, name: str) -> float:
    """Seconds `nbgrader autograde` takes for one solved submission of lesson `name`."""
    nbgrader_cli.submit(course, "bench", name, nbgrader_cli.solved(course, name))
    start = time.perf_counter()
    nbgrader_cli.autograde(course, name)
    seconds = time.perf_counter() - start
    score, total = nbgrader_cli.scores(course, name)["bench"]
    if score != total:
        raise RuntimeError(f"{name}: the solved submission scored {score}/{total}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("lessons", nargs="*", help="lesson ids (default: all)")
    names = parser.parse_args().lessons or nbgrader_cli.lessons(ROOT)
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"torch {torch.__version__}, {gpu}")
    print(f"{'lesson':<28}{'notebook (s)':>14}{'autograde (s)':>15}")
    tmp = Path(tempfile.mkdtemp(prefix="course-bench-"))
    try:
        course = nbgrader_cli.scratch_course(ROOT, tmp / "course", names)
        totals = [0.0, 0.0]
        for name in names:
            run = run_time(nbgrader_cli.notebook_path(course, "solutions", name))
            grade = autograde_time(course, name)
            totals[0] += run
            totals[1] += grade
            print(f"{name:<28}{run:>14.1f}{grade:>15.1f}", flush=True)
        print(f"{'total':<28}{totals[0]:>14.1f}{totals[1]:>15.1f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
