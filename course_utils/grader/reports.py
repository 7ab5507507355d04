"""What the folder grader writes, and how it never loses what was there: grades.csv and feedback
pages.

    check_out(out, lesson)      # BadInput unless out can take this lesson's grades
    write_reports(results, lesson,
                  out)          # merge into out/grades.csv, write out/feedback/STUDENT/LESSON.html

grades.csv has a row per learner: student, lesson, score, max_score, a column per test cell, the
reasons for every lost point and course_utils.grader.review's flags (for the instructor only), then
a column per written answer (written_column: "GID (N points, written: grade by hand)") holding the
learner's text: score and max_score count the autograded tests only, never the written answers. A
run merges into an existing grades.csv of the same lesson (rows of the learners graded now are
replaced, the others kept); a grades.csv of another lesson or other test cells is BadInput. Every
file is written to a temporary file and renamed into place once everything is prepared, so an
error while writing leaves what was there as it was (a failing rename leaves grades.csv as it
was). Learner-controlled text (file names, judges' messages quoting their values, notes) may
hold lone surrogates or control characters: clean() and clean_name() make it writable.

A learner's text is inert wherever it is written or shown:
- in every CSV file the course writes (grades.csv here, course_admin.grades' merge and LMS
  files), a cell that a spreadsheet would take for a formula (one that starts with = + - @, a tab or
  a carriage return, OWASP's rule, and is not a plain number such as -1.5) starts with a single
  quote:
  write_csv() and read_csv() are the course's only CSV writer and reader, csv_cell() and cell_text()
  their cells, so what is read back is what was given (a cell is never quoted twice, and a
  grades.csv written before the rule reads the same);
- in the HTML of nbgrader's Formgrader and feedback pages (nbgrader_config.py): SafeMarkdown, the
  markdown filter of nbconvert's HTMLExporter that both use, keeps only the tags, attributes and
  links that markdown makes (safe_html()), so a written answer's <script>, event handlers,
  javascript: links, styles and forms show as text or go; its math is MathML of MathML's own
  elements and plain attributes, put back into text only after cleaning
  (course_utils.grader.mathml).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import os
import re
import secrets
from pathlib import Path
from typing import TYPE_CHECKING

import jinja2
from traitlets.config import LoggingConfigurable

from course_utils.grader import feedback
from course_utils.grader.lessonfile import Lesson

if TYPE_CHECKING:
    from course_utils.grader.grade import Result


EXIT_BAD_INPUT = 2     # the commands' exit status for bad input: nothing graded, nothing written


class BadInput(Exception):
    """What the command was given cannot be graded: a one-line error, nothing written."""


# their values, notes) may hold lone surrogates or control characters.

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # C0 and C1 controls except tab and newline
_NAME_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def clean(text) -> str:
    """text as UTF-8 can always encode it: lone surrogates and control characters (tab and newline
    stay) become backslash escapes."""
    text = str(text).encode("utf-8", "backslashreplace").decode("utf-8")
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def clean_name(name: str) -> str:
    """A learner's name (from a file name, decoded with surrogateescape) as it is written: bytes
    that are not UTF-8 as \\xNN, control characters escaped; never '', '.' or '..'."""
    try:
        text = os.fsencode(name).decode("utf-8", "backslashreplace")
    except UnicodeError:
        text = str(name).encode("utf-8", "backslashreplace").decode("utf-8")
    text = _NAME_CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text).replace("/", "\\x2f")
    return text if text not in ("", ".", "..") else f"_{text}"


# ---------------------------------------------------------------------------------------------
# CSV files: no cell is a formula

# what makes a spreadsheet read a cell as a formula (OWASP)
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# -1.5, +2, 1e+06: numbers stay numbers
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?\Z")


def _quoted(cell: str) -> bool:
    """Whether cell, as read from a file, is one that csv_cell() quoted."""
    return cell[:1] == "'" and cell[1:2] in (*FORMULA_START, "'")


def csv_cell(text) -> str:
    """text as a cell of a CSV file the course writes: one a spreadsheet would run as a formula
    (it starts with = + - @, a tab or a carriage return and is not a plain number) gets a leading
    single quote, as OWASP's rule says. So does text that would read back as quoted (a quote, then
    one of those or a quote): cell_text() gives text back, for every text."""
    text = str(text)
    if (text[:1] in FORMULA_START and not _NUMBER.match(text)) or _quoted(text):
        return "'" + text
    return text


def cell_text(cell: str) -> str:
    """The text csv_cell() made cell of (a cell written before the rule is its own text)."""
    return cell[1:] if _quoted(cell) else cell


def write_csv(f, rows) -> None:
    """rows (lists of text) into the open file f as CSV, every cell through csv_cell()."""
    csv.writer(f).writerows([csv_cell(c) for c in r] for r in rows)


def read_csv(f) -> list[list[str]]:
    """The rows of the CSV file open as f, every cell through cell_text(): what write_csv() was
    given."""
    return [[cell_text(c) for c in r] for r in csv.reader(f)]


# ---------------------------------------------------------------------------------------------
# HTML of nbgrader's pages: no script

SAFE_TAGS = frozenset({
    "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "em", "strong", "b", "i", "u", "s", "del",
    "ins", "mark", "small", "sub", "sup", "code", "kbd", "samp", "var", "pre", "blockquote", "q",
    "cite", "abbr", "ul", "ol", "li", "dl", "dt", "dd", "a", "table", "caption", "thead", "tbody",
    "tfoot", "tr", "th", "td", "span", "div"})
SAFE_ATTRIBUTES = {"a": {"href", "title"}, "abbr": {"title"}, "ol": {"start"},
                   "th": {"align", "style"}, "td": {"align", "style"}, "span": {"style"}}
# a table column's alignment; lesson 01's <span style="color:..."> words
SAFE_CSS = ["text-align", "color"]
# classes markdown makes (pygments' tokens, "highlight", "anchor-link"), never the page's own
# ("score", "tabbable")
_SAFE_CLASS = re.compile(r"(?:[a-z]{1,2}\d?|highlight|hl-[\w-]+|language-[\w-]+|anchor-link)\Z")


def _safe_attribute(tag: str, name: str, value: str) -> bool:
    if name == "class":
        return (tag in ("span", "div", "pre", "code", "a")
                and all(_SAFE_CLASS.match(c) for c in value.split()))
    return name in SAFE_ATTRIBUTES.get(tag, ())


def safe_html(html: str) -> str:
    """html (markdown rendered by nbconvert) with only what markdown makes: SAFE_TAGS with
    SAFE_ATTRIBUTES, links to http(s), mailto or a relative address, styles of SAFE_CSS only.
    Anything else (a script, an event handler, a javascript: or data: address, a style, a form, an
    iframe, an svg) is shown as text or dropped; comments are dropped. So is an image: the page
    would fetch, with the instructor's cookies, an address the learner chose (the course's
    markdown has none)."""
    import bleach
    from bleach.css_sanitizer import CSSSanitizer

    return bleach.clean(str(html), tags=SAFE_TAGS, attributes=_safe_attribute,
                        protocols={"http", "https", "mailto"},
                        css_sanitizer=CSSSanitizer(allowed_css_properties=SAFE_CSS), strip=False,
                        strip_comments=True)


class SafeMarkdown(LoggingConfigurable):
    """The markdown2html filter of the nbconvert HTMLExporter that holds it (c.HTMLExporter.filters
    in nbgrader_config.py), its HTML through safe_html(). nbgrader's Formgrader (its submission
    view) and `nbgrader generate_feedback` render every markdown cell, written answers included,
    with their own templates, which call markdown2html without nbconvert's sanitizer even when
    HTMLExporter.sanitize_html is on; the filter is where both pass."""

    # Jinja gives the filter its context
    jinja_pass_arg = jinja2.pass_context(lambda: None).jinja_pass_arg

    def __call__(self, context, source) -> str:
        from course_utils.grader.mathml import markdown_html  # math as MathML, drawn with no script
        return markdown_html(self.parent, context, source, clean=safe_html)


def shown(path) -> str:
    """A path as an error message shows it: as given, and absolute when that says more."""
    given, full = Path(path), Path(os.path.abspath(path))
    return clean(given) if str(given) == str(full) else f"{clean(given)} ({clean(full)})"


MAX_WRITTEN = 20_000   # characters of a written answer copied into grades.csv and the feedback page
WRITTEN_COLUMN = re.compile(
    r"^(?P<gid>.+) \((?P<points>\d+(?:\.\d+)?) points, written: grade by hand\)$")


def written_column(cell) -> str:
    """The grades.csv column of a written answer (a lessonfile Cell of kind "written")."""
    return f"{cell.gid} ({cell.points:g} points, written: grade by hand)"


def written_note(lesson: Lesson) -> str:
    """The folder grader's one line about the written answers it does not score."""
    listed = ", ".join(f"{w.gid} ({w.points:g} points)" for w in lesson.written)
    return (f"written answers are not scored by this grader: {listed}. Grade them by hand (the "
            "learners' text is in grades.csv's 'written: grade by hand' columns and on the "
            "feedback pages); score and max_score count the autograded tests only")


def header(lesson: Lesson) -> list[str]:
    return ["student", "lesson", "score", "max_score", *[t.gid for t in lesson.tests], "reasons",
            "review", *[written_column(w) for w in lesson.written]]


def read_grades(out: Path, lesson: Lesson) -> list[list[str]]:
    """The rows of an existing out/grades.csv (none if there is none), or BadInput if it is not one
    of this lesson with the same test cells: a run never mixes lessons in one file."""
    path = Path(out) / "grades.csv"
    if not os.path.lexists(path):
        return []
    if not path.is_file():
        raise BadInput(f"{shown(path)} is not a file; give another --out")
    try:
        with open(path, encoding="utf-8-sig", errors="surrogateescape", newline="") as f:
            rows = read_csv(f)
    except (OSError, csv.Error) as e:
        raise BadInput(f"cannot read {shown(path)} ({clean(e)}); move it away "
                       "or give another --out") from None
    want = header(lesson)
    if not rows or rows[0] != want:
        found = ",".join(rows[0]) if rows else "an empty file"
        raise BadInput(f"{shown(path)} is not a grades.csv of {lesson.name} with these test cells "
                       f"(its header is {clean(found)[:200]}; {lesson.name}'s is "
                       f"{','.join(want)}): give another --out rather than mixing them")
    others = sorted({r[1] for r in rows[1:] if len(r) > 1 and r[1] != lesson.name})
    if others:
        raise BadInput(f"{shown(path)} holds grades of {clean(', '.join(others))[:200]}, not only "
                       f"{lesson.name}: give another --out rather than mixing them")
    return rows[1:]


def check_out(out: Path, lesson: Lesson) -> None:
    """BadInput unless out is (or can be made) a folder this run can write into, holding no
    grades.csv of another lesson."""
    out = Path(out)
    if os.path.lexists(out) and not out.is_dir():
        raise BadInput(f"--out {shown(out)} is not a folder")
    existing = Path(os.path.abspath(out))
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise BadInput(f"cannot write into {shown(existing)} (for --out {clean(out)})")
    if (out / "feedback").exists() and not (out / "feedback").is_dir():
        raise BadInput(f"{shown(out / 'feedback')} is not a folder; give another --out")
    read_grades(out, lesson)


def cleaned(result: Result) -> Result:
    """A copy of result whose every string can be written."""
    return dataclasses.replace(
        result, student=clean_name(result.student), lesson=clean(result.lesson),
        outcomes={gid: dataclasses.replace(o, message=clean(o.message))
                  for gid, o in result.outcomes.items()},
        notes=[clean(n) for n in result.notes], review=[clean(r) for r in result.review],
        written={gid: clean(text if len(text) <= MAX_WRITTEN
                            else text[:MAX_WRITTEN] + f" [... cut: {len(text)} characters]")
                 for gid, text in result.written.items()})


def row(result: Result, tests: list[str], written: list[str] = ()) -> list[str]:
    r = cleaned(result)
    reasons = [f"{gid}: {o.message}" for gid, o in r.outcomes.items() if o.message] + r.notes
    return [r.student, r.lesson, f"{r.score:g}", f"{r.points:g}",
            *[f"{r.outcomes[g].score:g}" if g in r.outcomes else "" for g in tests],
            " | ".join(reasons), " | ".join(r.review),
            *[r.written.get(g, "(no answer cell in the submission)") for g in written]]


def write_reports(results: list[Result], lesson: Lesson, out: Path) -> None:
    """Merge results into out/grades.csv (their learners' rows replaced, the others kept) and write
    each one's feedback page. Everything is prepared first, then written to temporary files that are
    renamed into place: an error while preparing or writing leaves what was there as it was. The
    renames come last, grades.csv's the very last, so a failing rename leaves grades.csv as it
    was."""
    out = Path(out)
    tests = [t.gid for t in lesson.tests]
    written = [w.gid for w in lesson.written]
    kept = read_grades(out, lesson)
    new = {}
    for r in results:
        line = row(r, tests, written)
        new[line[0]] = line
    rows = [r for r in kept if r and r[0] not in new] + list(new.values())
    rows.sort(key=lambda r: r[0])
    pages = {out / "feedback" / clean_name(r.student) / f"{clean_name(r.lesson)}.html":
             clean(feedback.page(cleaned(r)))
             for r in results}

    written: list[tuple[Path, Path]] = []   # (temporary file, its place)
    try:
        out.mkdir(parents=True, exist_ok=True)
        for path, text in pages.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            written.append((write_new(path, lambda f, text=text: f.write(text)), path))

        written.append((write_new(out / "grades.csv",
                                  lambda f: write_csv(f, [header(lesson), *rows])),
                        out / "grades.csv"))
        for tmp, path in written:
            os.replace(tmp, path)
    finally:
        for tmp, _ in written:
            if os.path.lexists(tmp):
                os.unlink(tmp)


def write_new(path: Path, write) -> Path:
    """A new temporary file beside path (mode as the umask says) holding what write(f) wrote, on
    disk."""
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


def one_line(error: BaseException, limit: int = 600) -> str:
    """An error as the commands say it: its type and its text, cleaned, on one line."""
    text = " ".join(clean(error).split())[:limit]
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


# ---------------------------------------------------------------------------------------------
# The commands' arguments

class OneLineParser(argparse.ArgumentParser):
    """argparse for the grading commands: bad arguments are one line and exit status 2."""

    def error(self, message):  # one line, like every other bad input
        self.exit(EXIT_BAD_INPUT, f"error: {message} (see {self.prog} --help)\n")


def at_least_one(text: str) -> int:
    """argparse type: a whole number, 1 or more (--jobs)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: must be 1 or more")
    return value
