"""A class's grades across files: merge the folder grader's CSVs from several machines; export for
an LMS.

    python -m course_admin.grades merge --out graded/grades.csv m1/grades.csv m2/grades.csv
    python -m course_admin.grades lms --roster roster.csv --out moodle.csv GRADES.csv ...
    (bash course.sh grades merge ... | bash course.sh grades lms ...)

merge: one lesson's grades.csv files written by `bash course.sh grade` on several machines, each
with its own learners, become one grades.csv of the same form. A learner in two files must have the
same row in both; different rows are an error, since a machine graded a learner it should not have.

lms: one CSV to import into Moodle's gradebook (Grades > Import > CSV file; map "Email address" to
the user's email, each lesson column to a grade item). One row per learner of the roster, in the
roster's order: "ID number", "First name", "Last name", "Email address", one column per lesson with
its points, and "Total". The roster is nbgrader's student list, a CSV with the columns id,
first_name, last_name and email (what `nbgrader db student import` reads). Grades come from the
folder grader's grades.csv files, or from `nbgrader export`'s grades.csv (its score: the raw score
less nbgrader's late penalty), any mix, one lesson or many; a learner of the roster with no grade
for a lesson gets 0 for it, as in nbgrader's export. A learner graded but missing from the roster
cannot be placed: the file is written without them and the command names them and exits with
status 3. The folder grader does not score written answers (its grades.csv has them in "written:
grade by hand" columns, outside score and max_score): lms says so for each such lesson, whose points
then leave them out; nbgrader's export counts them, with the scores given in Formgrader.

Both write CSV as the folder grader does (course_utils.grader.reports.write_csv): a cell that a
spreadsheet would take for a formula (= + - @, a tab or a carriage return first, not a number)
starts with a single quote, which reading a file takes off again, so merging merged files changes
nothing. `nbgrader export` writes its CSV with neither quoting nor that rule (a name with a comma
breaks its row, one starting with = is a formula): lms reads it and writes every cell by the rule.

Exit status: 0; 2: bad input (a file that is not one of these CSVs, conflicting rows, an unusable
roster or --out), a one-line error and nothing written; 3 (lms): written, but graded learners are
missing from the roster. Files are written to a temporary file and renamed into place.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
from pathlib import Path

from course_utils.grader import reports
from course_utils.grader.reports import WRITTEN_COLUMN, BadInput, clean, shown, write_new

EXIT_BAD_INPUT = 2
EXIT_NOT_IN_ROSTER = 3
# then a column per test cell, reasons, review
FOLDER_GRADER = ["student", "lesson", "score", "max_score"]
NBGRADER_EXPORT = ["assignment", "duedate", "timestamp", "student_id", "last_name", "first_name",
                   "email", "raw_score", "late_submission_penalty", "score", "max_score"]
ROSTER = ["id", "first_name", "last_name", "email"]


def read_csv(path: Path) -> list[list[str]]:
    """The rows of a CSV file (header first), or BadInput naming the file. Cells are read as
    reports.read_csv reads them: a cell the course quoted so that no spreadsheet takes it for a
    formula is read as the text it was made of (and written quoted again, never twice)."""
    try:
        with open(path, encoding="utf-8-sig", errors="surrogateescape", newline="") as f:
            rows = [r for r in reports.read_csv(f) if r]
    except (OSError, csv.Error) as e:
        raise BadInput(f"cannot read {shown(path)} ({clean(e)})") from None
    if not rows:
        raise BadInput(f"{shown(path)} is empty")
    return rows


def _number(text: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise BadInput(f"{where}: {clean(text)[:40]!r} is not a number") from None
    if not value == value or value in (float("inf"), float("-inf")):
        raise BadInput(f"{where}: {clean(text)[:40]!r} is not a finite number")
    return value


def merge_rows(files: list[Path]) -> tuple[list[str], list[list[str]]]:
    """(header, rows by learner) of folder-grader grades.csv files of one lesson with the same test
    cells."""
    header, merged, source = None, {}, {}
    for path in files:
        rows = read_csv(path)
        if rows[0][:4] != FOLDER_GRADER:
            raise BadInput(f"{shown(path)} is not a grades.csv of `bash course.sh grade` (its "
                           f"header starts {clean(','.join(rows[0][:4]))[:80]})")
        if header is None:
            header = rows[0]
        elif rows[0] != header:
            raise BadInput(f"{shown(path)} has other columns than {shown(files[0])} (another "
                           "lesson, or other test cells): merge one lesson's files at a time")
        for row in rows[1:]:
            if len(row) != len(header):
                raise BadInput(f"{shown(path)}: the row of {clean(row[0])[:40]!r} has {len(row)} "
                               f"fields, not {len(header)}")
            if row[0] in merged and merged[row[0]] != row:
                raise BadInput(f"{clean(row[0])!r} was graded differently in "
                               f"{shown(source[row[0]])} and {shown(path)}: each learner belongs "
                               "to one machine; remove the row that should not be there")
            merged[row[0]], source[row[0]] = row, path
    lessons = {r[1] for r in merged.values()}
    if len(lessons) > 1:
        raise BadInput("the files hold grades of several lessons "
                       f"({clean(', '.join(sorted(lessons)))[:200]})")
    return header, [merged[s] for s in sorted(merged)]


def read_grades(files: list[Path]) -> dict[str, tuple[float, dict[str, float]]]:
    """{lesson: (max score, {learner: score})} from folder-grader and `nbgrader export` CSVs."""
    folder, exported = [], []
    for path in files:
        head = read_csv(path)[0]
        if head[:4] == FOLDER_GRADER:
            folder.append(path)
        elif head == NBGRADER_EXPORT:
            exported.append(path)
        else:
            raise BadInput(f"{shown(path)} is neither a grades.csv of `bash course.sh grade` nor "
                           "one of `nbgrader export` (its header starts "
                           f"{clean(','.join(head[:4]))[:80]})")
    grades: dict[str, tuple[float, dict[str, float]]] = {}

    def add(lesson, student, score, max_score, where):
        top, scores = grades.setdefault(lesson, (max_score, {}))
        if top != max_score:
            raise BadInput(f"{where}: {clean(lesson)} is out of {max_score:g} points here, {top:g} "
                           "elsewhere")
        if student in scores and scores[student] != score:
            raise BadInput(f"{where}: {clean(student)!r} has two different scores for "
                           f"{clean(lesson)}")
        scores[student] = score

    by_lesson: dict[str, list[Path]] = {}
    for path in folder:
        rows = read_csv(path)
        by_lesson.setdefault(rows[1][1] if len(rows) > 1 else "", []).append(path)
    for lesson, paths in by_lesson.items():
        _, rows = merge_rows(paths)
        for row in rows:
            where = f"{shown(paths[0])}, {clean(row[0])[:40]!r}"
            add(row[1], row[0], _number(row[2], where), _number(row[3], where), where)
    for path in exported:
        for row in read_csv(path)[1:]:
            if len(row) != len(NBGRADER_EXPORT):
                raise BadInput(f"{shown(path)}: a row has {len(row)} fields, not "
                               f"{len(NBGRADER_EXPORT)}")
            r = dict(zip(NBGRADER_EXPORT, row))
            where = f"{shown(path)}, {clean(r['student_id'])[:40]!r}"
            add(r["assignment"], r["student_id"], _number(r["score"], where),
                _number(r["max_score"], where), where)
    return grades


def unscored_written(files: list[Path]) -> dict[str, float]:
    """{lesson: points of its written answers} for the folder grader's grades.csv files among files,
    which leave those points out (they are graded by hand)."""
    found: dict[str, float] = {}
    for path in files:
        rows = read_csv(path)
        points = [float(m["points"]) for m in map(WRITTEN_COLUMN.match, rows[0]) if m]
        if rows[0][:4] == FOLDER_GRADER and points and len(rows) > 1:
            found[rows[1][1]] = sum(points)
    return found


def read_roster(path: Path) -> list[dict[str, str]]:
    rows = read_csv(path)
    missing = [c for c in ROSTER if c not in rows[0]]
    if missing:
        raise BadInput(f"the roster {shown(path)} has no column {', '.join(missing)} (nbgrader's "
                       f"student list: {','.join(ROSTER)})")
    learners = [dict(zip(rows[0], r + [""] * (len(rows[0]) - len(r)))) for r in rows[1:]]
    ids = [s["id"] for s in learners]
    if "" in ids or len(set(ids)) != len(ids):
        raise BadInput(f"the roster {shown(path)} has an empty or repeated id")
    return learners


def lms_rows(roster: list[dict[str, str]],
             grades: dict[str, tuple[float, dict[str, float]]]) -> list[list[str]]:
    """Moodle's import CSV: a header, then one row per learner of the roster (0 where no grade)."""
    lessons = sorted(grades)
    header = ["ID number", "First name", "Last name", "Email address",
              *[f"{lesson} ({grades[lesson][0]:g} points)" for lesson in lessons],
              f"Total ({sum(grades[lesson][0] for lesson in lessons):g} points)"]
    rows = [header]
    for s in roster:
        scores = [grades[lesson][1].get(s["id"], 0.0) for lesson in lessons]
        rows.append([s["id"], s["first_name"], s["last_name"], s["email"],
                     *[f"{x:g}" for x in scores], f"{sum(scores):g}"])
    return rows


def write_csv(out: Path, rows: list[list[str]]) -> None:
    out = Path(out)
    if out.is_dir() or not out.parent.is_dir() or not os.access(out.parent, os.W_OK):
        raise BadInput(f"cannot write the file {shown(out)}")
    tmp = write_new(out, lambda f: reports.write_csv(f, rows))
    try:
        os.replace(tmp, out)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, like every other bad input
        self.exit(EXIT_BAD_INPUT, f"error: {message} (see {self.prog} --help)\n")


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(prog="python -m course_admin.grades",
                     description="Merge one lesson's grades.csv from several machines, or write a "
                                 "Moodle import CSV.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    merge = sub.add_parser("merge",
                           help="one lesson's grades.csv files of `bash course.sh grade` -> one "
                                "grades.csv")
    merge.add_argument("files", nargs="+", type=Path,
                       help="grades.csv files, each from one machine")
    merge.add_argument("--out", type=Path, required=True,
                       help="the merged grades.csv (replaced if it exists)")
    lms = sub.add_parser("lms",
                         help="a roster and grades.csv files -> one CSV for Moodle's grade import")
    lms.add_argument("files", nargs="+", type=Path,
                     help="grades.csv of `bash course.sh grade` or of `nbgrader export`")
    lms.add_argument("--roster", type=Path, required=True,
                     help="CSV with the columns id,first_name,last_name,email")
    lms.add_argument("--out", type=Path, required=True,
                     help="the CSV to import (replaced if it exists)")
    args = parser.parse_args(argv)
    try:
        if args.command == "merge":
            header, rows = merge_rows(args.files)
            write_csv(args.out, [header, *rows])
            print(f"wrote {clean(args.out)}: {len(rows)} learners of "
                  f"{clean(rows[0][1]) if rows else 'no lesson'}")
            return 0
        roster = read_roster(args.roster)
        grades = read_grades(args.files)
        write_csv(args.out, lms_rows(roster, grades))
    except BadInput as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"wrote {clean(args.out)}: {len(roster)} learners, {len(grades)} lessons")
    for lesson, points in sorted(unscored_written(args.files).items()):
        print(f"note: {clean(lesson)}'s written answers ({points:g} points) are not in these "
              "scores: the folder grader does not score them; grade them by hand (nbgrader's "
              "Formgrader and export count them)", file=sys.stderr)
    known = {s["id"] for s in roster}
    if outside := sorted({s for _, scores in grades.values() for s in scores} - known):
        print(f"graded but not in the roster, so not in {clean(args.out)}: "
              f"{clean(', '.join(outside))[:400]}: add them to the roster and run this again",
              file=sys.stderr)
        return EXIT_NOT_IN_ROSTER
    return 0


if __name__ == "__main__":
    sys.exit(main())
