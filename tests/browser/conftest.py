"""The course in JupyterLab 4 in a real browser (headless Chromium driven by Playwright for Python).

One JupyterLab server (and one Playwright and Chromium) per test module, on a free port of 127.0.0.1
with a random token, serving a temporary copy of notebooks/, solutions/ and nbgrader_config.py (its
working directory, so nbgrader's Validate reads the course's config). Nothing in the repository is
written, except screenshots in build/screenshots/ (and docs/screenshots/ with
--refresh-docs-screenshots). The server is started from this Python's environment as `course.sh lab`
starts it, so it shows what a learner sees: the .venv's JupyterLab configuration (instructor tools
and the news prompt off) is used as is; only JupyterLab's user settings and workspaces go to
temporary folders.

One browser (the system's Chromium: Playwright never downloads one here) with two pages ("lanes"),
each a JupyterLab of its own workspace, so that a lesson's solution and student notebooks run at
the same time on the two cores. The tests skip, saying why, when playwright or Chromium is missing.
"""

import os

import pytest

from browser_lab import (CHROMIUM_FLAGS, DOCS, DOCS_SHOTS, ROOT, SHOTS, Lane, LessonRun,
                         copy_course, drag_each_slider_on_a_small_screen, drag_first_slider,
                         find_chromium, first_cell, optimise_png, start_lab, stop_lab)
from course_utils.authoring import nbgrader_cli
from course_utils.authoring.once import Once

LESSONS = nbgrader_cli.lessons(ROOT)


@pytest.fixture(scope="module")
def playwright_api():
    """Playwright's sync API and the Chromium to drive; skip (with the reason) when either is
    missing. Per test module: a sync Playwright left running holds an asyncio loop, and a later test
    that starts its own (tests/hub) could not."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("the browser tests need the Python package playwright (pinned in "
                    "requirements.txt): run `bash course.sh setup` or "
                    "`pip install -r requirements.txt`")
    exe = find_chromium()
    if exe is None:
        pytest.skip("no Chromium found (looked for $CHROMIUM, chromium, chromium-browser, "
                    "google-chrome): `sudo apt-get install chromium` (`bash course.sh test` does "
                    "it when run as root on Debian)")
    with sync_playwright() as p:
        yield p, exe


@pytest.fixture(scope="module")
def browser(playwright_api):
    p, exe = playwright_api
    b = p.chromium.launch(executable_path=exe, headless=True, args=CHROMIUM_FLAGS)
    yield b
    b.close()


@pytest.fixture(scope="module")
def lab(tmp_path_factory, playwright_api):
    """The JupyterLab server, started once per test module (after the browser checks, so a skip
    costs nothing) and stopped after it, with its pages: an open JupyterLab keeps Chromium busy, and
    the rest of the suite (grading) should not share the machine with it."""
    root = copy_course(tmp_path_factory.mktemp("course"))
    server = start_lab(root, tmp_path_factory.mktemp("lab-settings"))
    yield server
    stop_lab(server)


@pytest.fixture(scope="module")
def lanes(browser, lab):
    made = [Lane(browser, lab, f"lane-{i}") for i in range(2)]
    yield made
    for lane in made:
        lane.page.close()


@pytest.fixture(scope="module")
def lesson_runs(lanes, lab):
    """lesson_runs(name) -> LessonRun, made once per lesson when a test first asks for it: the
    solution notebook (lane 0) and the student notebook (lane 1) run at the same time, screenshots
    taken, the first slider dragged, then both kernels shut down. A run that failed is not run again
    (course_utils.authoring.once)."""
    solution_lane, student_lane = lanes

    def get(name: str) -> LessonRun:
        sol, stu = f"solutions/{name}/{name}.ipynb", f"notebooks/{name}/{name}.ipynb"
        solution_lane.start(sol)
        student_lane.start(stu)
        try:
            run = LessonRun(name, solution_lane.result(sol), student_lane.result(stu))
            run.load = (os.getloadavg()[0] / (os.cpu_count() or 1) if hasattr(os, "getloadavg")
                        else 1.0)
            shots = run.shots
            # the top of each notebook, after Run All
            solution_lane.scroll_to(sol, 0)
            shots["solution"] = solution_lane.screenshot(f"{name}-solution.png")
            # the student notebook at its first test cell ("Exercise not attempted yet"), or its top
            first_test = first_cell(run.student,
                                    lambda c: (c["type"] == "code"
                                               and (c.get("nbgrader") or {}).get("grade")))
            student_lane.scroll_to(stu, first_test or 0)
            if first_test is not None:
                student_lane.cell(first_test).locator(".jp-OutputArea-output").last.evaluate(
                    "e => e.scrollIntoView({block: 'end'})")
            shots["student"] = student_lane.screenshot(f"{name}-student.png")
            # every figure: the autograd graphs (SVG) and the plots (PNG), one file each
            for kind in ("svg", "png"):
                for k, cell in enumerate(c for c in run.solution["cells"] if c.get(kind)):
                    solution_lane.scroll_to(sol, cell["index"])
                    selector = ".jp-RenderedSVG" if kind == "svg" else ".jp-RenderedImage"
                    out = solution_lane.cell(cell["index"]).locator(selector).first
                    label = "graph" if kind == "svg" else "plot"
                    shots[f"{label}-{k + 1}"] = solution_lane.screenshot(
                        f"{name}-{label}-{k + 1}.png", out)
            # an interactive figure: drag its first slider
            widget_cell = first_cell(run.solution, lambda c: c.get("widgets"))
            if widget_cell is not None:
                solution_lane.scroll_to(sol, widget_cell)
                dragged = drag_first_slider(solution_lane)
                if dragged is not None:
                    shots["widget"] = solution_lane.screenshot(f"{name}-widget.png",
                                                               dragged.pop("widget"))
                    run.widget = dragged
                # the last interactive figure (lesson 01's second circuit has five sliders) on a
                # laptop screen
                last = [c["index"] for c in run.solution["cells"] if c.get("widgets")][-1]
                run.sliders = drag_each_slider_on_a_small_screen(solution_lane, sol, last,
                                                                 f"{name}-sliders-1366.png")
            if name == LESSONS[0]:
                # the course as a learner first sees it: the lessons in the file browser, the first
                # one open
                student_lane.page.evaluate(
                    "() => window.jupyterapp.commands.execute('filebrowser:go-to-path', {path: "
                    "'notebooks/'})")
                student_lane.scroll_to(stu, 0)
                student_lane.page.wait_for_timeout(500)
                shots["overview"] = student_lane.screenshot("overview.png")
        finally:  # kernels shut down, tabs closed, even when a run failed
            solution_lane.close(sol)
            student_lane.close(stu)
        return run

    return Once("running", get)


_RAN = []   # a browser test ran in this process


@pytest.fixture(autouse=True)
def _ran_here():
    _RAN.append(True)


def pytest_sessionfinish(session, exitstatus):
    """With --refresh-docs-screenshots, copy the README's screenshots from build/ to docs/,
    optimised."""
    if not session.config.getoption("--refresh-docs-screenshots", default=False) or not _RAN:
        return   # (under xdist: only in the worker that ran the browser tests)
    DOCS_SHOTS.mkdir(parents=True, exist_ok=True)
    missing = []
    for name, (made, width) in DOCS.items():
        if (SHOTS / made).exists():
            optimise_png(SHOTS / made, DOCS_SHOTS / name, width)
        else:
            missing.append(made)
    if missing:
        print(f"\nnot refreshed (no {', '.join(missing)} in {SHOTS}: run the browser tests "
              "that make them)")
