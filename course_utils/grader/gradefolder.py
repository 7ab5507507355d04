"""Grade a whole folder of submissions without the gradebook: grades.csv and one feedback page each.

    python -m course_utils.grader.gradefolder LESSON FOLDER --out graded/ --jobs 2     (bash course.sh grade ...)

FOLDER is nbgrader's layout (FOLDER/STUDENT/LESSON/LESSON.ipynb) or one FOLDER/STUDENT.ipynb per
learner. Submissions are graded in parallel (course_utils.grader.grade, one sandbox each) against one
reference run; grades.csv has a row per learner with the reasons and course_utils.grader.review's flags
(for the instructor only); feedback/STUDENT/LESSON.html shows scores and messages, no test code.

Results are never lost: bad input (a lesson that does not exist, no submissions in FOLDER, a FOLDER
one level too deep, an OUT/grades.csv of another lesson, bad limits) is a one-line error, exit
status 2, before anything is written. A run merges into an existing OUT/grades.csv (rows of the
learners graded now are replaced, the others kept), and every file is written to a temporary file
and renamed into place, only after the whole run graded. Exit status 3: some submissions were not
graded because the machine was overloaded (their rows say so); grade them again.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import math
import os
import re
import secrets
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from course_utils.grader import feedback
from course_utils.grader.lessonfile import MAX_SUBMISSION_BYTES, Lesson, load_lesson, read_answers
from course_utils.grader.review import review
from course_utils.grader.capabilities import SandboxUnavailable
from course_utils.grader.worker import Limits, check_sandbox

DEFAULTS = Limits()

if TYPE_CHECKING:
    from course_utils.grader.grade import Result

EXIT_BAD_INPUT = 2     # nothing graded, nothing written
EXIT_OVERLOADED = 3    # written, but some submissions were not graded: grade them again


class BadInput(Exception):
    """What the command was given cannot be graded: a one-line error, nothing written."""


class ReferenceOverloaded(Exception):
    """The machine kept the lesson's reference run from finishing: nothing graded, grade again."""


# ---------------------------------------------------------------------------------------------
# Text that is safe to write: learner-controlled strings (file names, judges' messages quoting
# their values, notes) may hold lone surrogates or control characters.

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")   # C0 and C1 controls except tab and newline
_NAME_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def clean(text) -> str:
    """text as UTF-8 can always encode it: lone surrogates and control characters (tab and newline
    stay) become backslash escapes."""
    text = str(text).encode("utf-8", "backslashreplace").decode("utf-8")
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def clean_name(name: str) -> str:
    """A learner's name (from a file name, decoded with surrogateescape) as it is written: bytes that
    are not UTF-8 as \\xNN, control characters escaped; never '', '.' or '..'."""
    try:
        text = os.fsencode(name).decode("utf-8", "backslashreplace")
    except UnicodeError:
        text = str(name).encode("utf-8", "backslashreplace").decode("utf-8")
    text = _NAME_CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text).replace("/", "\\x2f")
    return text if text not in ("", ".", "..") else f"_{text}"


def _shown(path) -> str:
    """A path as an error message shows it: as given, and absolute when that says more."""
    given, full = Path(path), Path(os.path.abspath(path))
    return clean(given) if str(given) == str(full) else f"{clean(given)} ({clean(full)})"


# ---------------------------------------------------------------------------------------------
# Checking what was given, before anything runs

def find_submissions(folder: Path, lesson: str) -> dict[str, Path]:
    """{student: notebook path} from nbgrader's layout (FOLDER/student/LESSON/LESSON.ipynb) or a
    flat folder of FOLDER/student.ipynb."""
    folder = Path(folder)
    if not folder.is_dir():
        raise BadInput(f"no folder {_shown(folder)}" if not folder.exists() else f"{_shown(folder)} is not a folder")
    found = {p.parent.parent.name: p for p in sorted(folder.glob(f"*/{lesson}/{lesson}.ipynb"))}
    found.update({p.stem: p for p in sorted(folder.glob("*.ipynb")) if p.stem not in found})
    return found


def check_folder(folder: Path, lesson: str) -> dict[str, Path]:
    """The submissions in folder, or BadInput: a missing folder, one learner's folder (one level too
    deep) or a folder with no submission of the lesson."""
    folder = Path(folder)
    submissions = find_submissions(folder, lesson)
    layout = f"FOLDER/STUDENT/{lesson}/{lesson}.ipynb (nbgrader's submitted/) or FOLDER/STUDENT.ipynb"
    if (folder / f"{lesson}.ipynb").is_file():
        instead = folder.parent.parent if folder.name == lesson else folder.parent
        raise BadInput(f"{_shown(folder)} holds {lesson}.ipynb itself: it is one learner's submission, not a folder of "
                       f"them; give the folder that holds every learner's, {_shown(instead)}? ({layout})")
    if (folder / lesson / f"{lesson}.ipynb").is_file():
        raise BadInput(f"{_shown(folder)} holds {lesson}/{lesson}.ipynb: it is one learner's folder, not a folder of "
                       f"them; give the folder that holds every learner's, {_shown(folder.parent)}? ({layout})")
    if not submissions:
        raise BadInput(f"no submissions of {lesson} in {_shown(folder)}: expected {layout}")
    return submissions


def header(lesson: Lesson) -> list[str]:
    return ["student", "lesson", "score", "max_score", *[t.gid for t in lesson.tests], "reasons", "review"]


def read_grades(out: Path, lesson: Lesson) -> list[list[str]]:
    """The rows of an existing out/grades.csv (none if there is none), or BadInput if it is not one
    of this lesson with the same test cells: a run never mixes lessons in one file."""
    path = Path(out) / "grades.csv"
    if not os.path.lexists(path):
        return []
    if not path.is_file():
        raise BadInput(f"{_shown(path)} is not a file; give another --out")
    try:
        with open(path, encoding="utf-8-sig", errors="surrogateescape", newline="") as f:
            rows = list(csv.reader(f))
    except (OSError, csv.Error) as e:
        raise BadInput(f"cannot read {_shown(path)} ({clean(e)}); move it away or give another --out") from None
    want = header(lesson)
    if not rows or rows[0] != want:
        found = ",".join(rows[0]) if rows else "an empty file"
        raise BadInput(f"{_shown(path)} is not a grades.csv of {lesson.name} with these test cells (its header is "
                       f"{clean(found)[:200]}; {lesson.name}'s is {','.join(want)}): give another --out "
                       f"rather than mixing them")
    others = sorted({r[1] for r in rows[1:] if len(r) > 1 and r[1] != lesson.name})
    if others:
        raise BadInput(f"{_shown(path)} holds grades of {clean(', '.join(others))[:200]}, not only {lesson.name}: "
                       f"give another --out rather than mixing them")
    return rows[1:]


def check_out(out: Path, lesson: Lesson) -> None:
    """BadInput unless out is (or can be made) a folder this run can write into, holding no
    grades.csv of another lesson."""
    out = Path(out)
    if os.path.lexists(out) and not out.is_dir():
        raise BadInput(f"--out {_shown(out)} is not a folder")
    existing = Path(os.path.abspath(out))
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise BadInput(f"cannot write into {_shown(existing)} (for --out {clean(out)})")
    if (out / "feedback").exists() and not (out / "feedback").is_dir():
        raise BadInput(f"{_shown(out / 'feedback')} is not a folder; give another --out")
    read_grades(out, lesson)


def lesson_source(lesson: str, course: Path) -> Path:
    """The instructor notebook: a path ending in .ipynb (the caller's), or a lesson's name, which is
    course/solutions/NAME/NAME.ipynb."""
    if lesson.endswith(".ipynb"):
        source = Path(lesson)
        if not source.is_file():
            raise BadInput(f"no instructor notebook {_shown(source)}")
        return source
    source = Path(course) / "solutions" / lesson / f"{lesson}.ipynb"
    if "/" in lesson or lesson in ("", ".", "..") or not source.is_file():
        names = sorted(p.parent.name for p in Path(course).glob("solutions/*/*.ipynb") if p.stem == p.parent.name)
        raise BadInput(f"no lesson {clean(lesson)!r} (no {_shown(source)})"
                       + (f"; the lessons are {', '.join(names)}" if names else f"; is {_shown(course)} the course's folder?"))
    return source


def read_lesson(source: Path) -> Lesson:
    try:
        lesson = load_lesson(source)
    except Exception as e:  # noqa: BLE001 - not a notebook, not an nbgrader source: bad input, said in one line
        raise BadInput(f"cannot read the lesson {_shown(source)}: {_one_line(e)}") from None
    if not lesson.tests:
        raise BadInput(f"{_shown(source)} has no test cells (nbgrader's autograder tests): nothing to grade")
    return lesson


def _one_line(error: BaseException) -> str:
    text = " ".join(clean(error).split())
    return f"{type(error).__name__}: {text[:600]}" if text else type(error).__name__


# ---------------------------------------------------------------------------------------------
# Grading and writing

def grade_folder(source: Path, folder: Path, out: Path, jobs: int = 2, limits: Limits | None = None) -> list[Result]:
    """Grade every submission of the lesson whose instructor notebook is `source`; merge the rows
    into out/grades.csv and write out/feedback/STUDENT/LESSON.html. Returns the results, sorted by
    student. BadInput (nothing written) for what cannot be graded; nothing is written either when
    grading raises."""
    if jobs < 1:
        raise BadInput(f"--jobs must be 1 or more, not {jobs}")
    limits = limits or Limits()
    lesson = read_lesson(Path(source))
    submissions = check_folder(Path(folder), lesson.name)
    check_out(Path(out), lesson)
    results = grade_submissions(lesson, submissions, jobs, limits)
    write_reports(results, lesson, Path(out))
    return results


def grade_answers(*args, **kwargs) -> Result:
    """course_utils.grader.grade.grade_answers, imported when first needed: it imports torch, and bad
    input is reported before that."""
    from course_utils.grader.grade import grade_answers
    return grade_answers(*args, **kwargs)


def grade_submissions(lesson: Lesson, submissions: dict[str, Path], jobs: int, limits: Limits) -> list[Result]:
    from course_utils.grader.grade import OVERLOADED, Reference, failed
    try:
        if warning := check_sandbox(limits):   # fails closed: no learner's code without the sandbox unless asked
            print(f"warning: {warning}", file=sys.stderr)
    except SandboxUnavailable as e:
        raise BadInput(f"nothing graded: {e}") from None
    try:
        reference = Reference(lesson, limits)
    except RuntimeError as e:
        if OVERLOADED in str(e):
            raise ReferenceOverloaded(_one_line(e)) from None
        raise BadInput(f"the reference run of {lesson.name} failed, nothing graded: {' '.join(clean(e).split())}") from None
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

        with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(submissions)))) as pool:
            return list(pool.map(one, enumerate(sorted(submissions.items()))))
    finally:
        reference.close()


def cleaned(result: Result) -> Result:
    """A copy of result whose every string can be written."""
    return dataclasses.replace(
        result, student=clean_name(result.student), lesson=clean(result.lesson),
        outcomes={gid: dataclasses.replace(o, message=clean(o.message)) for gid, o in result.outcomes.items()},
        notes=[clean(n) for n in result.notes], review=[clean(r) for r in result.review])


def row(result: Result, tests: list[str]) -> list[str]:
    r = cleaned(result)
    reasons = [f"{gid}: {o.message}" for gid, o in r.outcomes.items() if o.message] + r.notes
    return [r.student, r.lesson, f"{r.score:g}", f"{r.points:g}",
            *[f"{r.outcomes[g].score:g}" if g in r.outcomes else "" for g in tests],
            " | ".join(reasons), " | ".join(r.review)]


def write_reports(results: list[Result], lesson: Lesson, out: Path) -> None:
    """Merge results into out/grades.csv (their learners' rows replaced, the others kept) and write
    each one's feedback page. Everything is prepared first, then written to temporary files that are
    renamed into place: an error on the way leaves what was there as it was."""
    out = Path(out)
    tests = [t.gid for t in lesson.tests]
    kept = read_grades(out, lesson)
    new = {}
    for r in results:
        line = row(r, tests)
        new[line[0]] = line
    rows = [r for r in kept if r and r[0] not in new] + list(new.values())
    rows.sort(key=lambda r: r[0])
    pages = {out / "feedback" / clean_name(r.student) / f"{clean_name(r.lesson)}.html": clean(feedback.page(cleaned(r)))
             for r in results}

    written: list[tuple[Path, Path]] = []   # (temporary file, its place)
    try:
        out.mkdir(parents=True, exist_ok=True)
        for path, text in pages.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            written.append((_write_new(path, lambda f, text=text: f.write(text)), path))

        def write_csv(f):
            w = csv.writer(f)
            w.writerow(header(lesson))
            w.writerows(rows)
        written.append((_write_new(out / "grades.csv", write_csv), out / "grades.csv"))
        for tmp, path in written:
            os.replace(tmp, path)
    finally:
        for tmp, _ in written:
            if os.path.lexists(tmp):
                os.unlink(tmp)


def _write_new(path: Path, write) -> Path:
    """A new temporary file beside path (mode as the umask says) holding what write(f) wrote, on disk."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        # surrogateescape: kept rows of grades.csv go back byte for byte; new text is clean already
        with open(tmp, "x", encoding="utf-8", errors="surrogateescape", newline="") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise
    return tmp


# ---------------------------------------------------------------------------------------------
# The command

class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, like every other bad input
        self.exit(EXIT_BAD_INPUT, f"error: {message} (see {self.prog} --help)\n")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"{text!r} seconds: must be a positive number")
    return value


def _jobs(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: must be 1 or more")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(
        prog="python -m course_utils.grader.gradefolder",
        description="Grade a folder of submissions of one lesson in sandboxes; merge the rows into grades.csv and "
                    "write feedback pages. Exit status 0; 2: bad input, nothing written; 3: some submissions "
                    "were not graded because the machine was overloaded (grade them again).")
    parser.add_argument("lesson", help="lesson name (COURSE/solutions/LESSON/LESSON.ipynb) or the instructor notebook's path")
    parser.add_argument("folder", help="submissions: FOLDER/STUDENT/LESSON/LESSON.ipynb (nbgrader's submitted/) or FOLDER/STUDENT.ipynb")
    parser.add_argument("--out", default="graded", help="where grades.csv and feedback/ go (default: graded); "
                        "an existing grades.csv of the lesson is merged into")
    parser.add_argument("--jobs", type=_jobs, default=2, help="submissions graded at once (default 2)")
    parser.add_argument("--cell-seconds", type=_seconds, default=DEFAULTS.cell_seconds,
                        help=f"time limit for one cell, in the submission's own time (default {DEFAULTS.cell_seconds:g})")
    parser.add_argument("--notebook-seconds", type=_seconds, default=DEFAULTS.notebook_seconds,
                        help=f"time limit for a whole submission (default {DEFAULTS.notebook_seconds:g})")
    parser.add_argument("--sandbox", choices=("required", "optional"), default=DEFAULTS.sandbox,
                        help="required (default): stop where the learner's code would run without the sandbox; "
                             "optional: grade there with resource limits only")
    parser.add_argument("--course", default=".", help="the course's folder, where lesson names are looked up "
                        "(default: the current folder; bash course.sh grade passes its own)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    try:
        lesson = read_lesson(lesson_source(args.lesson, Path(args.course)))
        submissions = check_folder(Path(args.folder), lesson.name)
        check_out(out, lesson)
        results = grade_submissions(lesson, submissions, args.jobs,
                                    Limits(cell_seconds=args.cell_seconds, notebook_seconds=args.notebook_seconds,
                                           sandbox=args.sandbox))
        write_reports(results, lesson, out)
    except BadInput as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ReferenceOverloaded as e:
        print(f"error: nothing graded, nothing written: {e}", file=sys.stderr)
        return EXIT_OVERLOADED
    for r in results:
        print(f"{clean_name(r.student)}: {r.score:g} / {r.points:g}  ({r.seconds:.1f} s)"
              + ("  [review]" if r.review else "") + ("  [not graded: grade again]" if r.overloaded else ""))
    if any(r.review for r in results):
        print("[review]: an answer reaches outside its exercise (the review column of grades.csv says how); read it")
    print(f"wrote {clean(out / 'grades.csv')} and {clean(out / 'feedback')}/")
    if overloaded := [clean_name(r.student) for r in results if r.overloaded]:
        print(f"{len(overloaded)} of {len(results)} submissions were not graded because the grading machine was "
              f"overloaded ({', '.join(overloaded)}): grade them again, on a quieter machine or with fewer --jobs "
              f"(a run merges into grades.csv)", file=sys.stderr)
        return EXIT_OVERLOADED
    return 0


if __name__ == "__main__":
    sys.exit(main())
