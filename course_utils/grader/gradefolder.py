"""Grade a whole folder of submissions without the gradebook: grades.csv and one feedback page each.

    python -m course_utils.grader.gradefolder LESSON FOLDER --out graded/ --jobs 2
        (bash course.sh grade ...)

FOLDER is nbgrader's layout (FOLDER/STUDENT/LESSON/LESSON.ipynb) or one FOLDER/STUDENT.ipynb per
learner. Submissions are graded in parallel (course_utils.grader.grade, one sandbox each) against
one reference run; grades.csv has a row per learner with the reasons and
course_utils.grader.review's flags (for the instructor only); feedback/STUDENT/LESSON.html shows
scores and messages, no test code. Written answers (nbgrader's manually graded answers) are not
scored here: score and max_score count the autograded tests only, and each written answer's text is
copied, as the learner wrote it, into a column of grades.csv that says to grade it by hand (and into
the feedback page).

Results are never lost: bad input (a lesson that does not exist, no submissions in FOLDER, a FOLDER
one level too deep, an OUT/grades.csv of another lesson, bad limits) is a one-line error, exit
status 2, before anything is written. A run merges into an existing OUT/grades.csv (rows of the
learners graded now are replaced, the others kept), and every file is written to a temporary file
and renamed into place, only after the whole run graded. Exit status 3: some submissions were not
graded because the machine was overloaded (their rows say so); grade them again.
"""

from __future__ import annotations

import argparse
import math
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from course_utils.grader.lessonfile import Lesson, load_lesson
from course_utils.grader.reports import (EXIT_BAD_INPUT, BadInput, OneLineParser, at_least_one,
                                         check_out, clean, clean_name, one_line, shown,
                                         write_reports, written_note)
from course_utils.grader.submission import grade_one, read_submission, reference_failed
from course_utils.grader.capabilities import SandboxUnavailable
from course_utils.grader.grade import ReferenceOverloaded
from course_utils.grader.rootworker import check_sandbox
from course_utils.grader.worker import Limits

DEFAULTS = Limits()

if TYPE_CHECKING:
    from course_utils.grader.grade import Result

EXIT_OVERLOADED = 3    # written, but some submissions were not graded: grade them again


# ---------------------------------------------------------------------------------------------
# Checking what was given, before anything runs

def find_submissions(folder: Path, lesson: str) -> dict[str, Path]:
    """{student: notebook path} from nbgrader's layout (FOLDER/student/LESSON/LESSON.ipynb) or a
    flat folder of FOLDER/student.ipynb."""
    folder = Path(folder)
    if not folder.is_dir():
        raise BadInput(f"no folder {shown(folder)}" if not folder.exists()
                       else f"{shown(folder)} is not a folder")
    found = {p.parent.parent.name: p for p in sorted(folder.glob(f"*/{lesson}/{lesson}.ipynb"))}
    found.update({p.stem: p for p in sorted(folder.glob("*.ipynb")) if p.stem not in found})
    return found


def check_folder(folder: Path, lesson: str) -> dict[str, Path]:
    """The submissions in folder, or BadInput: a missing folder, one learner's folder (one level too
    deep) or a folder with no submission of the lesson."""
    folder = Path(folder)
    submissions = find_submissions(folder, lesson)
    layout = (f"FOLDER/STUDENT/{lesson}/{lesson}.ipynb (nbgrader's submitted/) "
              "or FOLDER/STUDENT.ipynb")
    if (folder / f"{lesson}.ipynb").is_file():
        instead = folder.parent.parent if folder.name == lesson else folder.parent
        raise BadInput(f"{shown(folder)} holds {lesson}.ipynb itself: it is one learner's "
                       "submission, not a folder of them; give the folder that holds every "
                       f"learner's, {shown(instead)}? ({layout})")
    if (folder / lesson / f"{lesson}.ipynb").is_file():
        raise BadInput(f"{shown(folder)} holds {lesson}/{lesson}.ipynb: it is one learner's "
                       "folder, not a folder of them; give the folder that holds every learner's, "
                       f"{shown(folder.parent)}? ({layout})")
    if not submissions:
        raise BadInput(f"no submissions of {lesson} in {shown(folder)}: expected {layout}")
    return submissions


def lesson_source(lesson: str, course: Path) -> Path:
    """The instructor notebook: a path ending in .ipynb (the caller's), or a lesson's name, which is
    course/solutions/NAME/NAME.ipynb."""
    if lesson.endswith(".ipynb"):
        source = Path(lesson)
        if not source.is_file():
            raise BadInput(f"no instructor notebook {shown(source)}")
        return source
    source = Path(course) / "solutions" / lesson / f"{lesson}.ipynb"
    if "/" in lesson or lesson in ("", ".", "..") or not source.is_file():
        names = sorted(p.parent.name for p in Path(course).glob("solutions/*/*.ipynb")
                       if p.stem == p.parent.name)
        raise BadInput(f"no lesson {clean(lesson)!r} (no {shown(source)})"
                       + (f"; the lessons are {', '.join(names)}" if names
                          else f"; is {shown(course)} the course's folder?"))
    return source


def read_lesson(source: Path) -> Lesson:
    try:
        lesson = load_lesson(source)
    except Exception as e:  # not a notebook, not an nbgrader source: bad input, said in one line
        raise BadInput(f"cannot read the lesson {shown(source)}: {one_line(e)}") from None
    if not lesson.tests:
        raise BadInput(f"{shown(source)} has no test cells (nbgrader's autograder tests): "
                       "nothing to grade")
    return lesson


# ---------------------------------------------------------------------------------------------
# Grading and writing

def grade_folder(source: Path, folder: Path, out: Path, jobs: int = 2,
                 limits: Limits | None = None, cluster: str | None = None,
                 course: Path | None = None) -> list[Result]:
    """Grade every submission of the lesson whose instructor notebook is `source`; merge the rows
    into out/grades.csv and write out/feedback/STUDENT/LESSON.html. Returns the results, sorted by
    student. BadInput (nothing written) for what cannot be graded; nothing is written either when
    grading raises. With cluster (a Dask scheduler's address), the submissions are graded by the
    grading workers there (course_utils.grader.cluster; `course` is this checkout, whose version
    the workers must have) and jobs is theirs, not this machine's."""
    if jobs < 1:
        raise BadInput(f"--jobs must be 1 or more, not {jobs}")
    limits = limits or Limits()
    lesson = read_lesson(Path(source))
    submissions = check_folder(Path(folder), lesson.name)
    check_out(Path(out), lesson)
    if cluster:
        from course_utils.grader.cluster import grade_on_cluster   # imports this module
        results = grade_on_cluster(cluster, lesson, Path(source), Path(course or "."),
                                   submissions, limits)
    else:
        results = grade_submissions(lesson, submissions, jobs, limits)
    write_reports(results, lesson, Path(out))
    return results


def grade_submissions(lesson: Lesson, submissions: dict[str, Path], jobs: int,
                      limits: Limits) -> list[Result]:
    from course_utils.grader.grade import Reference
    # the reference too: its peaks compare with the learners'
    limits = limits.shared_by(min(jobs, len(submissions)))
    try:
        # fails closed: no learner's code without the sandbox unless asked
        if warning := check_sandbox(limits):
            print(f"warning: {warning}", file=sys.stderr)
    except SandboxUnavailable as e:
        raise BadInput(f"nothing graded: {e}") from None
    try:
        reference = Reference(lesson, limits)
    except ReferenceOverloaded as e:   # the machine's doing: nothing graded, grade again (exit 3)
        raise ReferenceOverloaded(one_line(e)) from None
    except RuntimeError as e:
        raise BadInput(reference_failed(lesson.name, e)) from None
    try:
        def one(item):
            slot, (student, path) = item
            data, notes = read_submission(path)
            return grade_one(lesson, reference, student, data, notes, limits, slot % 4000)

        with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(submissions)))) as pool:
            return list(pool.map(one, enumerate(sorted(submissions.items()))))
    finally:
        reference.close()


# ---------------------------------------------------------------------------------------------
# The command

def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"{text!r} seconds: must be a positive number")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(
        prog="python -m course_utils.grader.gradefolder",
        description="Grade a folder of submissions of one lesson in sandboxes; merge the rows into "
                    "grades.csv and write feedback pages. Exit status 0; 2: bad input, nothing "
                    "written; 3: some submissions were not graded because the machine was "
                    "overloaded (grade them again).")
    parser.add_argument("lesson", help="lesson name (COURSE/solutions/LESSON/LESSON.ipynb) or the "
                        "instructor notebook's path")
    parser.add_argument("folder", help="submissions: FOLDER/STUDENT/LESSON/LESSON.ipynb "
                        "(nbgrader's submitted/) or FOLDER/STUDENT.ipynb")
    parser.add_argument("--out", default="graded", help="where grades.csv and feedback/ go "
                        "(default: graded); an existing grades.csv of the lesson is merged into")
    parser.add_argument("--jobs", type=at_least_one, default=None,
                        help="submissions graded at once here (default 2; with --cluster each "
                             "grading worker's own `grade-worker --jobs` decides)")
    parser.add_argument("--cell-seconds", type=_seconds, default=DEFAULTS.cell_seconds,
                        help="time limit for one cell, in the submission's own time "
                             f"(default {DEFAULTS.cell_seconds:g})")
    parser.add_argument("--notebook-seconds", type=_seconds, default=DEFAULTS.notebook_seconds,
                        help="time limit for a whole submission "
                             f"(default {DEFAULTS.notebook_seconds:g})")
    parser.add_argument("--sandbox", choices=("required", "optional"), default=DEFAULTS.sandbox,
                        help="required (default): stop where the learner's code would run without "
                             "the sandbox; optional: grade there with resource limits only")
    parser.add_argument("--cluster", metavar="tcp://HOST:PORT", default=None,
                        help="grade on the grading workers of this Dask scheduler (bash course.sh "
                             "grade-worker on each grading machine) instead of here")
    parser.add_argument("--course", default=".",
                        help="the course's folder, where lesson names are looked up (default: the "
                             "current folder; bash course.sh grade passes its own)")
    args = parser.parse_args(argv)
    if args.cluster and args.jobs is not None:
        parser.error("--jobs is for grading here: with --cluster, each grading machine's "
                     "`bash course.sh grade-worker --jobs N` decides how many it grades at once")
    out = Path(args.out)
    try:
        source = lesson_source(args.lesson, Path(args.course))
        # bad input is reported before anything is written; the summary's written answers
        lesson = read_lesson(source)
        results = grade_folder(source, Path(args.folder), out, args.jobs or 2,
                               Limits(cell_seconds=args.cell_seconds,
                                      notebook_seconds=args.notebook_seconds,
                                      sandbox=args.sandbox),
                               cluster=args.cluster, course=Path(args.course))
    except BadInput as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ReferenceOverloaded as e:
        print(f"error: nothing graded, nothing written: {e}", file=sys.stderr)
        return EXIT_OVERLOADED
    by_hand = sum(w.points for w in lesson.written)
    for r in results:
        print(f"{clean_name(r.student)}: {r.score:g} / {r.points:g}  ({r.seconds:.1f} s)"
              + (f"  + {by_hand:g} points of written answers to grade by hand" if by_hand else "")
              + ("  [review]" if r.review else "")
              + ("  [not graded: grade again]" if r.overloaded else ""))
    if any(r.review for r in results):
        print("[review]: an answer reaches outside its exercise (the review column of grades.csv "
              "says how); read it")
    if lesson.written:
        print(written_note(lesson))
    print(f"wrote {clean(out / 'grades.csv')} and {clean(out / 'feedback')}/")
    if overloaded := [clean_name(r.student) for r in results if r.overloaded]:
        print(f"{len(overloaded)} of {len(results)} submissions were not graded "
              + ("(their rows say why" if args.cluster
                 else "because the grading machine was overloaded (")
              + f": {', '.join(overloaded)}): grade them again"
              + (" when the cluster has grading workers of this course" if args.cluster
                 else ", on a quieter machine or with fewer --jobs")
              + " (a run merges into grades.csv)", file=sys.stderr)
        return EXIT_OVERLOADED
    return 0


if __name__ == "__main__":
    sys.exit(main())
