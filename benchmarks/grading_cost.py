"""What the hardened grader costs: per lesson, against a plain run of the notebook, and for a class.

    python benchmarks/grading_cost.py [LESSON ...] [--class-lesson 01-circuits --students 20 --jobs 2]

For each lesson: the plain run (the solution notebook top to bottom in a fresh Jupyter kernel with
NBGRADER_EXECUTION=autograde, as nbgrader's own Execute runs a submission), the reference run (once per lesson and grading
session: the instructor's notebook in the trusted worker) and the grading of one solved submission
(sandboxed worker + judging), with the ratio grading / plain run (goal: under 1.5). Then a folder of
N submissions of one lesson graded with `jobs` parallel sandboxes (course_utils.gradefolder.grade_folder).
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from notebook_times import run_time  # noqa: E402

from course_utils import grading, gradefolder, hardened, lessonfile  # noqa: E402
from course_utils.isolation import isolation  # noqa: E402
from course_utils.sandbox import Limits  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def lesson_costs(name: str) -> tuple[float, float, float, float]:
    source = grading.notebook_path(ROOT, "solutions", name)
    tmp = Path(tempfile.mkdtemp(prefix="course-bench-"))
    try:
        shutil.copy(source, tmp)
        # As nbgrader's own autograde runs it: NBGRADER_EXECUTION set, so both runs skip the
        # lessons' expensive demonstrations alike.
        os.environ["NBGRADER_EXECUTION"] = "autograde"
        try:
            plain = run_time(tmp / source.name)
        finally:
            os.environ.pop("NBGRADER_EXECUTION", None)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    lesson = lessonfile.load_lesson(source)
    start = time.perf_counter()
    reference = hardened.Reference(lesson, Limits())
    ref_seconds = time.perf_counter() - start
    try:
        answers = {c.gid: c.source for c in lesson.answers}
        start = time.perf_counter()
        result = hardened.grade_answers(lesson, reference, answers, student="bench")
        one = time.perf_counter() - start
    finally:
        reference.close()
    if result.score != result.points:
        raise RuntimeError(f"{name}: the solution scored {result.score}/{result.points}: {result.outcomes}")
    return plain, ref_seconds, one, one / plain


def class_cost(name: str, students: int, jobs: int) -> tuple[float, float]:
    source = grading.notebook_path(ROOT, "solutions", name)
    lesson = lessonfile.load_lesson(source)
    tmp = Path(tempfile.mkdtemp(prefix="course-bench-class-"))
    try:
        nb = nbformat.read(source, as_version=4)
        for i in range(students):
            nbformat.write(nb, tmp / f"student{i:02d}.ipynb")
        start = time.perf_counter()
        results = gradefolder.grade_folder(source, tmp, tmp / "out", jobs=jobs)
        total = time.perf_counter() - start
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    bad = [r.student for r in results if r.score != r.points]
    if bad or len(results) != students:
        raise RuntimeError(f"{name}: {len(results)} graded, not full marks: {bad}")
    del lesson
    return total, total / students


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lessons", nargs="*", help="lesson ids (default: every graded lesson)")
    parser.add_argument("--class-lesson", default="01-circuits")
    parser.add_argument("--students", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()
    names = args.lessons or grading.lessons(ROOT, graded=True)
    print(f"# {platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
          f"sandbox: {isolation()}")
    print(f"{'lesson':<28}{'plain run (s)':>14}{'reference (s)':>15}{'grade one (s)':>15}{'ratio':>8}")
    sums = [0.0, 0.0, 0.0]
    for name in names:
        plain, ref_seconds, one, ratio = lesson_costs(name)
        sums = [sums[0] + plain, sums[1] + ref_seconds, sums[2] + one]
        print(f"{name:<28}{plain:>14.1f}{ref_seconds:>15.1f}{one:>15.1f}{ratio:>8.2f}", flush=True)
    print(f"{'whole course':<28}{sums[0]:>14.1f}{sums[1]:>15.1f}{sums[2]:>15.1f}{sums[2] / sums[0]:>8.2f}")
    total, each = class_cost(args.class_lesson, args.students, args.jobs)
    print(f"# {args.students} submissions of {args.class_lesson}, {args.jobs} at a time: {total:.1f} s in all "
          f"(reference run included), {each:.1f} s per submission")
    return 0


if __name__ == "__main__":
    sys.exit(main())
