"""Grade a whole folder of submissions without the gradebook: grades.csv and one feedback page each.

    python -m course_utils.gradefolder LESSON FOLDER --out graded/ --jobs 2     (bash course.sh grade ...)

FOLDER is nbgrader's layout (FOLDER/STUDENT/LESSON/LESSON.ipynb) or one FOLDER/STUDENT.ipynb per
learner. Submissions are graded in parallel (course_utils.hardened, one sandbox each) against one
reference run; grades.csv has a row per learner with the reasons and course_utils.review's flags
(for the instructor only); feedback/STUDENT/LESSON.html shows scores and messages, no test code.
"""

import argparse
import csv
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from course_utils import feedback
from course_utils.hardened import Reference, Result, failed, grade_answers
from course_utils.lessonfile import MAX_SUBMISSION_BYTES, Lesson, load_lesson, read_answers
from course_utils.review import review
from course_utils.isolation import isolation_warning
from course_utils.sandbox import Limits


def find_submissions(folder: Path, lesson: str) -> dict[str, Path]:
    """{student: notebook path} from nbgrader's layout (FOLDER/student/LESSON/LESSON.ipynb) or a
    flat folder of FOLDER/student.ipynb."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"no folder {folder}")
    found = {p.parent.parent.name: p for p in sorted(folder.glob(f"*/{lesson}/{lesson}.ipynb"))}
    found.update({p.stem: p for p in sorted(folder.glob("*.ipynb")) if p.stem not in found})
    return found


def grade_folder(source: Path, folder: Path, out: Path, jobs: int = 2, limits: Limits | None = None) -> list[Result]:
    """Grade every submission of the lesson whose instructor notebook is `source`; write
    out/grades.csv and out/feedback/STUDENT/LESSON.html. Returns the results, sorted by student."""
    limits = limits or Limits()
    lesson = load_lesson(source)
    submissions = find_submissions(folder, lesson.name)
    reference = Reference(lesson, limits)
    try:
        def one(item):
            slot, (student, path) = item
            notes = []
            try:
                with open(path, "rb") as f:  # never more than read_answers accepts
                    data = f.read(MAX_SUBMISSION_BYTES + 1)
            except OSError as e:
                data, notes = b"", [f"the submitted file could not be read ({e.strerror})"]
            try:
                answers, more = read_answers(data, lesson)
                result = grade_answers(lesson, reference, answers, notes + more, student, limits, slot=slot % 4000)
                result.review = review(lesson, answers)
            except Exception as e:  # noqa: BLE001 - one submission's trouble never costs the others their grades
                result = failed(lesson, student, notes, e)
            return result

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            results = list(pool.map(one, enumerate(sorted(submissions.items()))))
    finally:
        reference.close()
    write_reports(results, lesson, Path(out))
    return results


def write_reports(results: list[Result], lesson: Lesson, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tests = [t.gid for t in lesson.tests]
    with open(out / "grades.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["student", "lesson", "score", "max_score", *tests, "reasons", "review"])
        for r in results:
            reasons = [f"{gid}: {o.message}" for gid, o in r.outcomes.items() if o.message] + r.notes
            w.writerow([r.student, r.lesson, f"{r.score:g}", f"{r.points:g}",
                        *[f"{r.outcomes[g].score:g}" for g in tests], " | ".join(reasons), " | ".join(r.review)])
    for r in results:
        path = out / "feedback" / r.student / f"{r.lesson}.html"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(feedback.page(r))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course_utils.gradefolder",
        description="Grade a folder of submissions of one lesson in sandboxes; write grades.csv and feedback pages.")
    parser.add_argument("lesson", help="lesson name (solutions/LESSON/LESSON.ipynb) or the instructor notebook's path")
    parser.add_argument("folder", help="submissions: FOLDER/STUDENT/LESSON/LESSON.ipynb (nbgrader's submitted/) or FOLDER/STUDENT.ipynb")
    parser.add_argument("--out", default="graded", help="where grades.csv and feedback/ go (default: graded)")
    parser.add_argument("--jobs", type=int, default=2, help="submissions graded at once (default 2)")
    parser.add_argument("--cell-seconds", type=float, default=60, help="time limit for one cell (default 60)")
    parser.add_argument("--notebook-seconds", type=float, default=600, help="time limit for a whole submission (default 600)")
    args = parser.parse_args(argv)
    source = Path(args.lesson)
    if source.suffix != ".ipynb":
        source = Path("solutions") / args.lesson / f"{args.lesson}.ipynb"
    if not source.is_file():
        parser.error(f"no instructor notebook {source}")
    if warning := isolation_warning():
        print(f"warning: {warning}", file=sys.stderr)
    results = grade_folder(source, Path(args.folder), Path(args.out), args.jobs,
                           Limits(cell_seconds=args.cell_seconds, notebook_seconds=args.notebook_seconds))
    for r in results:
        print(f"{r.student}: {r.score:g} / {r.points:g}  ({r.seconds:.1f} s)" + ("  [review]" if r.review else ""))
    if any(r.review for r in results):
        print("[review]: an answer reaches outside its exercise (the review column of grades.csv says how); read it")
    print(f"wrote {Path(args.out) / 'grades.csv'} and {Path(args.out) / 'feedback'}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
