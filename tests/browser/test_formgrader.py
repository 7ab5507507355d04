"""Written answers graded by hand in nbgrader's Formgrader, in a real browser.

In a scratch course (course_utils.authoring.nbgrader_cli.scratch_course) one learner's solved
submission of a lesson, with a written answer in their own words, is autograded; JupyterLab with the
instructor's tools (the Formgrader's server extension, as
`COURSE_ROLE=instructor bash course.sh lab` enables it) serves that course; on the Formgrader's
manual grading page of the submission the written answer shows as the learner wrote it, a score is
typed into its score box, and that score reaches `nbgrader export`'s grades.csv and the LMS file of
`course_admin.grades lms`.

A second learner's written answer is an attack on the instructor (issue 24): an <img onerror>, a
<script>, an <svg onload> and a javascript: link, each of which would record that it ran in the
page. In the Formgrader's submission view (the instructor's own server) and in the feedback page of
`nbgrader generate_feedback`, both opened in Chromium, none runs and the answer reads as text, while
what nbgrader's templates put in a page for it without the course's configuration (nbconvert's
markdown2html) runs all four in the same browser.

Both pages draw the lesson's math with nothing fetched from outside the machine (there may be no
internet): MathML made with the page, no MathJax (course_utils.grader.mathml).
"""

import csv
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

import nbformat
import pytest

from browser_lab import start_lab, stop_lab
from course_utils.authoring import nbgrader_cli

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
NAME = "01-circuits"
# made by `bash course.sh setup`
INSTRUCTOR_CONFIG = Path(sys.prefix) / "etc" / "jupyter-instructor"
WORDS = "The add gate passes z on unchanged, so x never shows up."
RAN = ("(window.__pwned = window.__pwned || []).push('{0}'); document.title = 'pwned-{0}'; "
       "console.log('pwned-{0}')")
ATTACK = ("The add gate passes z on unchanged.\n\n"
          f"<img src=x onerror=\"{RAN.format('img')}\">\n\n"
          f"<script>{RAN.format('script')}</script>\n\n"
          f"<svg onload=\"{RAN.format('svg')}\"></svg>\n\n"
          f"<a href=\"javascript:{RAN.format('link')}\">the proof</a>\n")


def written_answer(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    return next(c for c in nb.cells
                if c.cell_type == "markdown" and c.metadata.get("nbgrader", {}).get("solution"))


def manual_score(course: Path, grade_id: str) -> float | None:
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return gb.find_grade(grade_id, NAME, NAME, "ada").manual_score


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """A scratch course where ada's solved submission (a written answer in her own words) and eve's
    (the same, her written answer the attack) are autograded: (course, ada's autograded score and
    max score, the written answer's grade id and points)."""
    assert (INSTRUCTOR_CONFIG / "jupyter_server_config.json").is_file(), (
        f"no {INSTRUCTOR_CONFIG} (the instructor's JupyterLab configuration): "
        f"run `bash course.sh setup`")
    course = nbgrader_cli.scratch_course(ROOT, tmp_path_factory.mktemp("course"), [NAME])
    nb = nbgrader_cli.solved(course, NAME)
    answer = written_answer(nb)
    gid, points = answer.metadata.nbgrader["grade_id"], float(answer.metadata.nbgrader["points"])
    nbgrader_cli.submit(course, "ada", NAME, nbgrader_cli.with_answer(nb, gid, WORDS))
    nbgrader_cli.submit(course, "eve", NAME, nbgrader_cli.with_answer(nb, gid, ATTACK))
    nbgrader_cli.autograde(course, NAME)
    autograded, max_autograded = nbgrader_cli.scores(course, NAME)["ada"]
    assert autograded == max_autograded > 0 and nbgrader_cli.written(course, NAME)["ada"][gid] == (
        0.0, points, True)
    return course, autograded, max_autograded, gid, points


@pytest.fixture(scope="module")
def formgrader(graded, tmp_path_factory):
    """JupyterLab with the instructor's tools serving the graded course (its nbgrader_config.py, as
    `COURSE_ROLE=instructor bash course.sh lab` serves the repository)."""
    lab = start_lab(graded[0], tmp_path_factory.mktemp("settings"),
                    {"JUPYTER_CONFIG_PATH": str(INSTRUCTOR_CONFIG)})
    yield lab
    stop_lab(lab)


def submission_id(course: Path, student: str) -> str:
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return gb.find_submission_notebook(NAME, NAME, student).id


def test_a_score_typed_in_formgrader_reaches_the_export(browser, formgrader, graded, tmp_path):
    course, autograded, max_autograded, gid, points = graded
    lab = formgrader
    page = browser.new_page()
    try:
        # logs in (the token sets the cookie the Formgrader's own requests need)
        page.goto(lab.url("/lab"))
        page.goto(lab.base + f"/formgrader/submissions/{submission_id(course, 'ada')}/")
        # marked for grading by hand
        box = page.locator(f"input.score.needs_manual_grade[id='{gid}']")
        box.wait_for(timeout=30_000)
        assert WORDS in page.content(), (
            "the Formgrader shows the written answer as the learner wrote it")
        box.fill("1.5")
        box.press("Tab")   # the score is saved when the box loses focus (a change event)
        deadline = time.monotonic() + 20
        while manual_score(course, gid) != 1.5 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert manual_score(course, gid) == 1.5, (f"the typed score did not reach the gradebook:\n"
                                                  f"{lab.log_tail()}")
    finally:
        page.close()

    nbgrader_cli.nbgrader("export", cwd=course)
    with open(course / "grades.csv", newline="") as f:
        row = next(r for r in csv.DictReader(f) if r["student_id"] == "ada")
    assert (float(row["score"]), float(row["max_score"])) == (autograded + 1.5,
                                                              max_autograded + points)

    roster = tmp_path / "roster.csv"
    roster.write_text("id,first_name,last_name,email\nada,Ada,Lovelace,ada@example.org\n"
                      "eve,Eve,Hacker,eve@example.org\n")
    lms = subprocess.run([sys.executable, "-m", "course_admin.grades", "lms", "--roster", roster,
                          "--out", tmp_path / "moodle.csv", course / "grades.csv"],
                         capture_output=True, text=True)
    assert lms.returncode == 0, lms.stderr
    with open(tmp_path / "moodle.csv", newline="") as f:
        header, *learners = list(csv.reader(f))
    ada = next(r for r in learners if r[0] == "ada")
    assert (ada[-1] == f"{autograded + 1.5:g}"
            and header[-1] == f"Total ({max_autograded + points:g} points)")


def what_ran(page, console: list[str]) -> list[str]:
    """What the attack recorded in page (after a moment for late handlers, and a click on its
    link)."""
    page.wait_for_timeout(1500)
    link = page.get_by_text("the proof", exact=True)
    if link.count():
        link.first.click(timeout=5_000)
        page.wait_for_timeout(500)
    ran = list(page.evaluate("() => window.__pwned || []"))
    ran += [f"title {page.title()!r}"] if "pwned" in page.title() else []
    return ran + [f"console {m!r}" for m in console if "pwned" in m]


def open_page(browser, url: str, wait_for: str | None = None, login: str | None = None,
              log=lambda: ""):
    """A new page at url (first at login, if given; once wait_for shows), and the console messages
    it logs."""
    page = browser.new_page()
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text))
    page.on("dialog", lambda d: (console.append(f"pwned dialog {d.message}"), d.dismiss()))
    if login:
        page.goto(login)
    response = page.goto(url, wait_until="domcontentloaded")
    if wait_for:
        try:
            page.locator(wait_for).first.wait_for(timeout=30_000)
        except Exception:
            body = page.inner_text("body")[:2000]
            page.close()
            raise AssertionError(f"no {wait_for} at {url} (HTTP {response and response.status}):\n"
                                 f"{body}\n{log()}") from None
    return page, console


def test_a_written_answer_runs_no_script_in_formgrader_or_feedback(browser, formgrader, graded,
                                                                    tmp_path):
    course, _, _, gid, _ = graded
    # the control: what nbgrader's formgrade and feedback templates put in the page for this answer
    # (`cell.source | markdown2html`) runs every part of the attack in this browser
    from nbconvert.exporters import HTMLExporter
    bare = tmp_path / "bare.html"
    bare.write_text(f"<!DOCTYPE html><html><body>{HTMLExporter().markdown2html({}, ATTACK)}"
                    f"</body></html>")
    page, console = open_page(browser, bare.as_uri())
    try:
        ran = what_ran(page, console)
        assert set(ran) >= {"img", "script", "svg", "link"}, (
            f"the control: every part of the attack runs, not only {ran}")
    finally:
        page.close()

    # the instructor's Formgrader, its submission view of eve's notebook
    page, console = open_page(browser, formgrader.base
                              + f"/formgrader/submissions/{submission_id(course, 'eve')}/",
                              wait_for=f"input.score[id='{gid}']", login=formgrader.url("/lab"),
                              log=formgrader.log_tail)
    try:
        ran = what_ran(page, console)
        assert ran == [], f"the attack ran in the Formgrader: {ran}"
        text = page.inner_text("body")
        assert "The add gate passes z on unchanged." in text and "<script>" in text, \
            "the Formgrader shows the written answer, its script as text"
    finally:
        page.close()

    # eve's feedback page, as `nbgrader generate_feedback` writes it
    pages = nbgrader_cli.feedback(course, NAME)
    assert "eve" in pages and "<script>(window.__pwned" not in pages["eve"]
    path = course / "feedback" / "eve" / NAME / f"{NAME}.html"
    page, console = open_page(browser, path.as_uri())
    try:
        ran = what_ran(page, console)
        assert ran == [], f"the attack ran in the feedback page: {ran}"
        text = page.inner_text("body")
        assert "The add gate passes z on unchanged." in text and "<script>" in text, \
            "the feedback shows the written answer, its script as text"
    finally:
        page.close()


def math_in_markdown(nb: nbformat.NotebookNode) -> int:
    from course_utils.grader.mathml import math_in
    return sum(len(math_in(c.source)) for c in nb.cells if c.cell_type == "markdown")


def test_the_lessons_math_is_drawn_with_nothing_fetched_in_formgrader_and_feedback(browser,
                                                                                   formgrader,
                                                                                   graded):
    course = graded[0]
    nbgrader_cli.feedback(course, NAME)
    want = math_in_markdown(nbformat.read(course / "autograded" / "ada" / NAME / f"{NAME}.ipynb",
                                          as_version=4))
    assert want >= 5, f"{NAME} has only {want} pieces of math: pick a lesson with math"
    for where, url, login in (
            ("the Formgrader",
             formgrader.base + f"/formgrader/submissions/{submission_id(course, 'ada')}/",
             formgrader.url("/lab")),
            ("the feedback page", (course / "feedback" / "ada" / NAME / f"{NAME}.html").as_uri(),
             None)):
        page = browser.new_page()
        try:
            if login:
                page.goto(login)
            fetched: list[str] = []
            page.on("request", lambda r: fetched.append(r.url))
            page.goto(url, wait_until="load")
            page.wait_for_timeout(500)
            drawn = page.evaluate("() => [...document.querySelectorAll('math')]"
                                  ".map(m => m.getBoundingClientRect())"
                                  ".map(r => [r.width, r.height])")
            assert len(drawn) >= want, (f"{where}: {len(drawn)} math elements for {want} pieces "
                                        f"of math in the markdown")
            assert all(w > 0 and h > 0 for w, h in drawn), f"{where}: math not drawn: {drawn[:5]}"
            assert "\\partial" not in page.inner_text("body"), f"{where}: raw TeX on the page"
            outside = [u for u in fetched if urlparse(u).scheme not in ("file", "data", "blob")
                       and urlparse(u).hostname not in ("127.0.0.1", "localhost")]
            assert not outside, f"{where} fetched from outside the machine: {outside}"
        finally:
            page.close()
