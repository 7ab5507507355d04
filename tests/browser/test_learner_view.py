"""What JupyterLab offers a learner who opens the course with `bash course.sh lab` (their own copies
of the lessons, in a workspace), what it offers an instructor (`COURSE_ROLE=instructor bash
course.sh lab`), and nbgrader's Validate button.

- Learners: no Create Assignment, Formgrader, course list or Nbgrader menu (nbgrader's instructor
  tools), no prompt about Jupyter news; the Validate button in every notebook's toolbar.
- Instructors: all of nbgrader's tools, the Formgrader's server side included.
- Validate on a solved notebook reports success; on the untouched student notebook it fails and
  the failing cells it lists call every exercise by name. By default this runs for the first
  lesson with exercises (the grading of every lesson is tested through nbgrader's CLI in
  tests/grader/test_preprocessors.py); `--browser-all` presses Validate in every lesson.
"""

import json
import re
from pathlib import Path

import nbformat
import pytest

from course_utils.authoring import nbgrader_cli
from course_utils.authoring.once import Once

from browser_lab import Lane, start_lab, stop_lab

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
LESSONS = nbgrader_cli.lessons(ROOT)
INSTRUCTOR_COMMANDS = ["nbgrader:open-create-assignment", "nbgrader:open-formgrader",
                       "nbgrader:open-course-list"]
INSTRUCTOR_PLUGINS = ["@jupyter/nbgrader:create-assignment", "@jupyter/nbgrader:formgrader",
                      "@jupyter/nbgrader:course-list", "@jupyter/nbgrader:menu"]
NEWS_PLUGIN = "@jupyterlab/apputils-extension:announcements"
VALIDATE_TIMEOUT_S = 240


def exercises(name: str) -> dict[str, list[str]]:
    """{grade_id: names of the functions and classes the exercise's solution cell defines}."""
    nb = nbformat.read(nbgrader_cli.notebook_path(ROOT, "solutions", name), as_version=4)
    return {c.metadata.nbgrader["grade_id"]: re.findall(r"^(?:def|class)\s+(\w+)", c.source,
                                                        flags=re.M)
            for c in nb.cells
            if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")}


WITH_EXERCISES = [n for n in LESSONS if exercises(n)]


def pytest_generate_tests(metafunc):
    if "validated_lesson" in metafunc.fixturenames:
        every = metafunc.config.getoption("--browser-all")
        metafunc.parametrize("validated_lesson", WITH_EXERCISES if every else WITH_EXERCISES[:1])


def what_jupyterlab_offers(lane: Lane) -> dict:
    page = lane.page
    page.wait_for_timeout(3000)  # JupyterLab asks about news a moment after it starts
    return {
        "menus": page.locator(".lm-MenuBar-itemLabel").all_inner_texts(),
        "commands": page.evaluate("() => window.jupyterapp.commands.listCommands()"),
        "plugins": page.evaluate("ids => ids.filter(id => window.jupyterapp.hasPlugin(id))",
                                 INSTRUCTOR_PLUGINS + [NEWS_PLUGIN]),
        "toasts": page.locator(".Toastify__toast, .jp-toast-message").all_inner_texts(),
    }


@pytest.fixture(scope="module")
def course_sh_lab(browser, tmp_path_factory):
    """course_sh_lab(role) -> (Lab, Lane): JupyterLab started by `bash course.sh lab` with
    COURSE_ROLE=role, and a page on it. Nothing is opened, so nothing in the repository is written.
    One that failed to start is not started again (course_utils.authoring.once)."""

    def start(role):
        settings = tmp_path_factory.mktemp(f"{role}-settings")
        # not the repository's workspace/
        env = {"COURSE_ROLE": role, "COURSE_WORKSPACE": str(settings / "workspace")}
        lab = start_lab(ROOT, settings, env, course_sh=True)
        return lab, Lane(browser, lab, role)

    started = Once("starting JupyterLab as", start)
    yield started
    for lab, lane in started.done.values():
        lane.page.close()
        stop_lab(lab)


def test_learners_see_no_instructor_tools_and_no_news_prompt(course_sh_lab):
    lab, lane = course_sh_lab("learner")
    seen = what_jupyterlab_offers(lane)
    assert "Nbgrader" not in seen["menus"], f"learners see nbgrader's menu: {seen['menus']}"
    shown = [c for c in INSTRUCTOR_COMMANDS if c in seen["commands"]]
    assert not shown and not seen["plugins"], \
        (f"learners get instructor tools {shown or seen['plugins']}: run `bash course.sh setup` "
         "(it disables them in .venv)")
    assert not [t for t in seen["toasts"] if "news" in t.lower()], (
        f"JupyterLab asks learners about news: {seen['toasts']}")
    assert lab.get("/formgrader/api/status")[0] == 404, (
        "the Formgrader's server extension is on for learners")
    status, listing = lab.get("/api/contents")
    served = {item["name"] for item in json.loads(listing)["content"]}
    assert status == 200 and set(LESSONS) <= served and "solutions" not in served, \
        ("`course.sh lab` should open the learner's copies of the student notebooks, it serves "
         f"{sorted(served)}")
    workspace = lab.log.parent / "workspace"   # COURSE_WORKSPACE, in the fixture's settings folder
    assert (workspace / LESSONS[0] / f"{LESSONS[0]}.ipynb").read_bytes() == \
        nbgrader_cli.notebook_path(ROOT, "notebooks", LESSONS[0]).read_bytes(), \
        ("`course.sh lab` should serve copies in COURSE_WORKSPACE (not notebooks/, which "
         "nbgrader rewrites)")
    assert opens_on(lab) == "/lab/tree/00-start-here/00-start-here.ipynb", \
        f"`course.sh lab` should open on the start-here page, not on {opens_on(lab)}"


def opens_on(lab) -> str:
    """The page the browser that `jupyter lab` opens lands on: where / redirects to."""
    import urllib.parse
    import urllib.request
    with urllib.request.urlopen(lab.url("/"), timeout=30) as r:
        return urllib.parse.urlparse(r.geturl()).path


def test_instructors_get_nbgrader_tools_with_one_switch(course_sh_lab):
    lab, lane = course_sh_lab("instructor")
    seen = what_jupyterlab_offers(lane)
    assert "Nbgrader" in seen["menus"], f"no Nbgrader menu for instructors: {seen['menus']}"
    missing = [c for c in INSTRUCTOR_COMMANDS if c not in seen["commands"]]
    assert not missing, f"COURSE_ROLE=instructor does not bring back {missing}"
    assert opens_on(lab) == "/lab/tree/notebooks/00-start-here/00-start-here.ipynb", \
        f"COURSE_ROLE=instructor should open on the start-here page, not on {opens_on(lab)}"
    assert sorted(seen["plugins"]) == sorted(INSTRUCTOR_PLUGINS), seen["plugins"]
    status, body = lab.get("/formgrader/api/status")
    assert status == 200 and "true" in body, ("the Formgrader's server extension is off for "
                                              f"instructors ({status})")
    status, listing = lab.get("/api/contents")
    served = {item["name"] for item in json.loads(listing)["content"]}
    assert {"solutions", "notebooks", "nbgrader_config.py"} <= served, \
        f"instructors should see the repository (solutions/ and notebooks/), not {sorted(served)}"


SCREEN_PX = 300  # a third of a laptop screen (768 px) per exercise at most


def press_validate(lane: Lane, path: str, shot: str) -> tuple[str, str, float]:
    """Open path, press the notebook toolbar's Validate button, wait for nbgrader's answer;
    return the result's CSS class (validation-success, validation-failed...), its text and its
    height in pixels as rendered (all of it, scrolled or not)."""
    lane.open(path)
    try:
        button = lane.panel().locator('.jp-Toolbar-item:has-text("Validate")').first
        button.wait_for(timeout=30_000)
        button.locator("jp-button, button").first.click()
        message = lane.page.locator("#validation-message")
        message.wait_for(timeout=VALIDATE_TIMEOUT_S * 1000)
        result = (message.get_attribute("class") or "", message.inner_text(),
                  message.evaluate("e => e.scrollHeight"))
        lane.screenshot(shot)
        lane.page.locator(".jp-Dialog .jp-mod-accept").click()
        return result
    finally:
        lane.close_all()


def test_validate_is_in_the_notebook_toolbar(lanes):
    lane, name = lanes[1], LESSONS[-1]
    lane.open(f"notebooks/{name}/{name}.ipynb")
    try:
        assert lane.panel().locator('.jp-Toolbar-item:has-text("Validate")').count() == 1
    finally:
        lane.close_all()


def test_validate_a_solved_notebook_reports_success(lanes, lab, validated_lesson):
    name = validated_lesson
    # the student notebook with every exercise filled in as a learner who solved it would
    path = lab.root / "solved" / name / f"{name}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nbgrader_cli.solved(lab.root, name), path)
    kind, text, _ = press_validate(lanes[0], f"solved/{name}/{name}.ipynb",
                                   f"{name}-validate-solved.png")
    assert "validation-success" in kind, (f"Validate on a solved {name} did not report success:\n"
                                          f"{text[:3000]}")
    assert "Success! Your notebook passes all the tests." in text


def test_validate_an_untouched_notebook_names_the_failing_exercises(lanes, validated_lesson):
    name = validated_lesson
    kind, text, height = press_validate(lanes[0], f"notebooks/{name}/{name}.ipynb",
                                        f"{name}-validate-unsolved.png")
    assert "validation-failed" in kind, (f"Validate on the untouched {name} did not fail:\n"
                                         f"{text[:3000]}")
    assert "Exercise not attempted yet" in text
    # a written answer that still holds the stub is flagged (its words are judged by hand, not here)
    assert "You did not provide a response" in text, (
        f"Validate did not flag the unanswered written answer:\n{text[:3000]}")
    unnamed = {gid: names for gid, names in exercises(name).items()
               if not any(n in text for n in names)}
    assert not unnamed, (f"Validate's report on the untouched {name} does not name the exercises "
                         f"{unnamed}:\n{text[:2000]}")
    # readable at a glance: each failing exercise takes less than a laptop screen (it took about 750
    # px when test cells held their checkers' code and tracebacks ran through course_utils)
    per_exercise = height / len(exercises(name))
    assert per_exercise <= SCREEN_PX, \
        (f"Validate's report on the untouched {name} takes {per_exercise:.0f} px per exercise "
         f"(over {SCREEN_PX}):\n{text[:2000]}")
