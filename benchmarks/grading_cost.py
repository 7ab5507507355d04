"""What the hardened grader costs: per lesson, against a plain run of the notebook, and for a class.

    python benchmarks/grading_cost.py [LESSON ...]
                                      [--class-lesson 01-circuits --students 40 --jobs 2]
    python benchmarks/grading_cost.py --class-only --oversubscribe 24
        # the class, quiet and under load
    python benchmarks/grading_cost.py --class-only --cluster 2
        # the class here, then on a Dask cluster of 2 grading workers on this machine

For each lesson: the plain run (the solution notebook top to bottom in a fresh Jupyter kernel with
NBGRADER_EXECUTION=autograde, as nbgrader's own Execute runs a submission), the reference run (once
per lesson and grading session: the instructor's notebook in the trusted worker) and the grading of
one solved submission (sandboxed worker + judging), with the ratio grading / plain run (goal: under
1.5). Then a folder of N submissions of one lesson graded with `jobs` parallel sandboxes
(course_utils.grader.gradefolder.grade_folder), on a quiet machine and, with --oversubscribe K,
again while K busy processes per core (each in a session of its own, as other users' work is)
compete for the CPU: the time per submission grows, the scores must not change (the grader counts
each submission's own time, course_utils.grader.workerclock). With --cluster W, the class is graded
again through `--cluster` on a Dask scheduler and W grading workers started here (loopback, each
with jobs/W jobs): the same cores, so the difference is the cluster's overhead (connecting, sending
the submissions, a reference run per worker), not a speed-up.
"""

import argparse
import contextlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from notebook_times import run_time

from course_utils.authoring import nbgrader_cli
from course_utils.grader import gradefolder, grade, lessonfile
from course_utils.grader.capabilities import isolation
from course_utils.grader.worker import Limits

ROOT = Path(__file__).resolve().parent.parent


def lesson_costs(name: str) -> tuple[float, float, float, float]:
    source = nbgrader_cli.notebook_path(ROOT, "solutions", name)
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
    reference = grade.Reference(lesson, Limits())
    ref_seconds = time.perf_counter() - start
    try:
        answers = {c.gid: c.source for c in lesson.answers}
        start = time.perf_counter()
        result = grade.grade_answers(lesson, reference, answers, student="bench")
        one = time.perf_counter() - start
    finally:
        reference.close()
    if result.score != result.points:
        raise RuntimeError(f"{name}: the solution scored {result.score}/{result.points}: "
                           f"{result.outcomes}")
    return plain, ref_seconds, one, one / plain


@contextlib.contextmanager
def local_cluster(workers: int, jobs: int):
    """A Dask scheduler and `workers` grading workers of this checkout (as `bash course.sh
    grade-worker` starts them), on loopback; yields the scheduler's address."""
    from distributed import Client
    tmp = Path(tempfile.mkdtemp(prefix="course-bench-cluster-"))
    file = tmp / "scheduler.json"
    procs = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host",
                               "127.0.0.1", "--port", "0", "--no-dashboard", "--scheduler-file",
                               str(file)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)]
    try:
        while not file.exists():
            time.sleep(0.2)
        address = json.loads(file.read_text())["address"]
        procs += [subprocess.Popen([sys.executable, "-m", "course_utils.grader.cluster",
                                    "--scheduler", address, "--jobs", str(jobs)], cwd=ROOT,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   start_new_session=True) for _ in range(workers)]
        with Client(address, set_as_default=False) as client:
            client.wait_for_workers(workers, timeout=120)
        yield address
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def class_cost(name: str, students: int, jobs: int,
               cluster: str | None = None) -> tuple[float, float, dict, float]:
    """Grade `students` copies of the solution, here or on the cluster at that address: (seconds
    in all, per submission, {score: count}, load average)."""
    source = nbgrader_cli.notebook_path(ROOT, "solutions", name)
    tmp = Path(tempfile.mkdtemp(prefix="course-bench-class-"))
    try:
        nb = nbformat.read(source, as_version=4)
        for i in range(students):
            nbformat.write(nb, tmp / f"student{i:02d}.ipynb")
        start = time.perf_counter()
        results = gradefolder.grade_folder(source, tmp, tmp / "out", jobs=jobs, cluster=cluster,
                                           course=ROOT)
        total = time.perf_counter() - start
        load = os.getloadavg()[0]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if len(results) != students:
        raise RuntimeError(f"{name}: {len(results)} of {students} graded")
    scores: dict[str, int] = {}
    for r in results:
        key = "not graded" if r.overloaded else f"{r.score:g}/{r.points:g}"
        scores[key] = scores.get(key, 0) + 1
    return total, total / students, scores, load


def main() -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("lessons", nargs="*", help="lesson ids (default: every graded lesson)")
    parser.add_argument("--class-lesson", default="01-circuits")
    parser.add_argument("--students", type=int, default=40)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--class-only", action="store_true", help="skip the per-lesson costs")
    parser.add_argument("--oversubscribe", type=int, default=0, metavar="K",
                        help="grade the class again with K busy processes per core running "
                             "beside it")
    parser.add_argument("--cluster", type=int, default=0, metavar="W",
                        help="grade the class again on a Dask cluster of W grading workers here")
    args = parser.parse_args()
    print(f"# {platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
          f"sandbox: {isolation()}")
    if not args.class_only:
        names = args.lessons or nbgrader_cli.lessons(ROOT, graded=True)
        print(f"{'lesson':<28}{'plain run (s)':>14}{'reference (s)':>15}{'grade one (s)':>15}"
              f"{'ratio':>8}")
        sums = [0.0, 0.0, 0.0]
        for name in names:
            plain, ref_seconds, one, ratio = lesson_costs(name)
            sums = [sums[0] + plain, sums[1] + ref_seconds, sums[2] + one]
            print(f"{name:<28}{plain:>14.1f}{ref_seconds:>15.1f}{one:>15.1f}{ratio:>8.2f}",
                  flush=True)
        print(f"{'whole course':<28}{sums[0]:>14.1f}{sums[1]:>15.1f}{sums[2]:>15.1f}"
              f"{sums[2] / sums[0]:>8.2f}")
    runs = [("quiet", 0)] + ([(f"{args.oversubscribe}x oversubscribed", args.oversubscribe)]
                             if args.oversubscribe else [])
    for label, per_core in runs:
        with nbgrader_cli.oversubscribed(per_core):
            total, each, scores, load = class_cost(args.class_lesson, args.students, args.jobs)
        print(f"# {args.students} submissions of {args.class_lesson}, {args.jobs} at a time, "
              f"{label} (load average {load:.0f} at the end): {total:.1f} s in all (reference run "
              f"included), {each:.1f} s per submission; scores {scores}", flush=True)
    if args.cluster:
        with local_cluster(args.cluster, max(1, args.jobs // args.cluster)) as address:
            total, each, scores, load = class_cost(args.class_lesson, args.students, args.jobs,
                                                   cluster=address)
        print(f"# {args.students} submissions of {args.class_lesson} on a Dask cluster of "
              f"{args.cluster} grading workers here, {max(1, args.jobs // args.cluster)} jobs each "
              f"(load average {load:.0f} at the end): {total:.1f} s in all (a reference run per "
              f"worker included), {each:.1f} s per submission; scores {scores}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
