"""Gradings side by side: how many of torch's threads each grading's workers should have.

    python benchmarks/grading_threads.py [LESSON LESSON] [--submissions 3]

Two lessons (default 05-gradient-accumulation and 09-bigger-batch), each with N solved submissions
in a scratch course, graded by `nbgrader autograde` (the course's HardenedExecute): one after the
other with OMP_NUM_THREADS=2, side by side with 2 threads each, and side by side with cores / 2
threads each. The test harness grades two lessons at a time (tests/grader/test_preprocessors.py:
AT_ONCE, THREADS) and picks the threads from this. Wall-clock seconds of this machine; run it on a
quiet one.

Measured (2-core CPU machine, 2026-11-27, 3 submissions each; once by hand, once by an earlier
version of this script that warmed one lesson only): in turn 69 and 80 s; side by side with 2
threads each 75 and 61 s; side by side with 1 thread each 57 and 40 s. In the test harness (nine
lessons, 121 submissions, two lessons at a time) the grading went from 636 s to 541 s.
"""

import argparse
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from course_utils.authoring import nbgrader_cli
from course_utils.grader.worker import Limits


def course_with(name: str, where: Path, submissions: int) -> Path:
    course = nbgrader_cli.scratch_course(ROOT, where, [name])
    solved = nbgrader_cli.solved(course, name)
    for i in range(submissions):
        nbgrader_cli.submit(course, f"s{i}", name, solved)
    return course


def timed(course: Path, name: str, threads: int) -> float:
    start = time.perf_counter()
    nbgrader_cli.autograde(course, name, threads=threads)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("lessons", nargs="*",
                        default=["05-gradient-accumulation", "09-bigger-batch"])
    parser.add_argument("--submissions", type=int, default=3)
    args = parser.parse_args()
    if len(args.lessons) != 2:
        parser.error("name two lessons")
    # what the folder grader and the test harness give each of two
    share = Limits().shared_by(2).threads
    with tempfile.TemporaryDirectory() as tmp:
        courses = [course_with(n, Path(tmp) / n, args.submissions) for n in args.lessons]
        pairs = list(zip(courses, args.lessons))
        for course, name in pairs:   # warm the page cache: every row below reads the same files
            timed(course, name, 2)
        print(f"{len(os.sched_getaffinity(0))} cores, {args.submissions} solved submissions per "
              "lesson: wall-clock seconds")
        print(f"  in turn, 2 threads each:        {sum(timed(c, n, 2) for c, n in pairs):6.1f}")
        for threads in dict.fromkeys((2, share)):
            start = time.perf_counter()
            with ThreadPoolExecutor(2) as pool:
                each = list(pool.map(lambda p: timed(*p, threads), pairs))
            print(f"  side by side, {threads} thread{'s' if threads > 1 else ' '} each:  "
                  f"{time.perf_counter() - start:6.1f}  "
                  f"({', '.join(f'{n} {t:.1f}' for n, t in zip(args.lessons, each))})")


if __name__ == "__main__":
    main()
