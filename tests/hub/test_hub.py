"""A class on JupyterHub, end to end: `bash course.sh hub` with one instructor and three
learners.

One hub for the module, started the way an instructor starts it (course.sh hub, as root, a roster
of three learners with unique account names, a free port of 127.0.0.1, a state folder of its own);
then the class, as its members do it:
- the instructor (their Unix account, their course directory, nbgrader's command line):
  generate_assignment and release_assignment of LESSON; later collect, autograde (the course's
  hardened grader, in its "userns" sandbox), generate_feedback, release_feedback;
- each learner, through their own single-user server started with JupyterHub's REST API and their
  own token: fetch (nbgrader's /assignments/fetch, what JupyterLab's Assignments panel calls),
  save the notebook (Jupyter's contents API), submit (/assignments/submit), fetch the feedback.
  Learner 1 submits the solved notebook, learner 2 the untouched one, learner 3 one wrong answer.
The instructor's server has Formgrader, on their course; a learner's has none. A teaching assistant
(course.sh hub --tas) grades the same course in its hub service, and reaches nothing else.
The browser test logs in as learner 1 through the hub's login form: the lesson in the file browser,
nbgrader's Assignment List (and no instructor tool) in its menu, Validate in the notebook's toolbar,
pressed: the learner's own server validates their saved notebook and reports success.
Teardown stops the hub (and with it every single-user server) and removes the accounts
(userdel -r).
"""

import contextlib
import json
import pwd
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course_utils.authoring.nbgrader_cli import replace_solution, solved, with_answer

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "hub"))
sys.path.insert(0, str(ROOT / "tests" / "browser"))
from browser_lab import CHROMIUM_FLAGS, SHOTS, VIEWPORT, find_chromium
from hubdriver import LEARNER_MB, LESSON, classroom, class_hub, why_not

pytestmark = [pytest.mark.slow, pytest.mark.hub]


@pytest.fixture(scope="module")
def hub():
    """`bash course.sh hub` with an instructor, three learners and a teaching assistant
    (tests/hub/hubdriver.py: class_hub)."""
    reason = why_not()
    if reason:
        pytest.skip(reason)
    with class_hub(learners=3, tas=1) as made:
        yield made


def mutant() -> dict:
    """A wrong answer a learner could write (the first of tests/mutants/LESSON.json)."""
    return json.loads((ROOT / "tests" / "mutants" / f"{LESSON}.json").read_text())[0]


def home(name: str, *parts: str) -> Path:
    """A path in the home folder of the Unix user `name`."""
    return Path(pwd.getpwnam(name).pw_dir, *parts)


def reads(name: str, paths: list[Path]) -> dict[str, str]:
    """What the Unix user `name` gets trying to read each path (a folder: list it): "ok" or the
    error's name."""
    code = ("import json, os, sys\nout = {}\nfor p in sys.argv[1:]:\n"
            "    try:\n        os.listdir(p) if os.path.isdir(p) else open(p, 'rb').read(1)\n"
            "        out[p] = 'ok'\n"
            "    except OSError as e:\n        out[p] = type(e).__name__\nprint(json.dumps(out))")
    done = subprocess.run(["runuser", "-u", name, "--", sys.executable, "-c", code,
                           *map(str, paths)],
                          cwd="/", capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def lesson_files(names: list[str]) -> dict[str, dict[str, bytes]]:
    """{learner: {path of each file in their LESSON folder, from their home: its bytes}}."""
    return {name: {str(p.relative_to(home(name))): p.read_bytes()
                   for p in home(name, LESSON).rglob("*") if p.is_file()}
            for name in names}


@pytest.fixture(scope="module")
def semester(hub):
    """The class, start to end. Returns what the tests check: "scores" ({learner: autograded
    points}), "autograded" ({grade cell: max points}, from the gradebook: the lesson's written
    answers graded by hand are not among them), "work" and "after" ({learner: {file in their LESSON
    folder: bytes}} before and after the instructor's `generate_assignment --force`), the course and
    who did what."""
    solved_by, untouched_by, wrong_by = hub.accounts.learners
    course = classroom.course_dir(hub.accounts.instructor)
    # the instructor works in their JupyterLab's terminal
    hub.start_server(hub.accounts.instructor)
    hub.wait_for_server(hub.accounts.instructor)
    hub.instructor("generate_assignment", LESSON, "--force")
    hub.instructor("release_assignment", LESSON, "--force")
    for name in hub.accounts.learners:
        hub.start_server(name)
    for name in hub.accounts.learners:
        hub.wait_for_server(name)
        listed = hub.assignments(name, "fetch")["value"]   # what the Assignments panel then shows
        assert any(a["assignment_id"] == LESSON and a["status"] == "fetched"
                   for a in listed), listed
    # learners 1 and 3 answer in their fetched notebook and save it (JupyterLab's contents API)
    contents = f"/user/{{}}/api/contents/{LESSON}/{LESSON}.ipynb"
    status, model = hub.request(solved_by, "GET", contents.format(solved_by))
    assert status == 200, model
    fetched = nbformat.from_dict(model["content"])
    answers = solved(course, LESSON)
    for cell in answers.cells:
        if cell.metadata.get("nbgrader", {}).get("solution"):
            fetched = with_answer(fetched, cell.metadata.nbgrader.grade_id, cell.source)
    wrong = mutant()
    for name, nb in ((solved_by, fetched),
                     (wrong_by, replace_solution(fetched, wrong["cell"], wrong["old"],
                                                 wrong["new"]))):
        status, saved = hub.request(name, "PUT", contents.format(name),
                                    {"type": "notebook", "format": "json", "content": nb})
        assert status in (200, 201), saved
    for name in hub.accounts.learners:
        hub.assignments(name, "submit")
    hub.instructor("collect", LESSON)
    hub.instructor("autograde", LESSON, "--force")
    hub.instructor("generate_feedback", LESSON, "--force")
    hub.instructor("release_feedback", LESSON)
    for name in hub.accounts.learners:
        hub.assignments(name, "fetch_feedback")

    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        notebook = gb.find_notebook(LESSON, LESSON)
        answer_cells = {c.name for c in notebook.solution_cells}
        autograded = {c.name: c.max_score for c in notebook.grade_cells
                      if c.name not in answer_cells}
        scores = {s.student.id: sum(g.score for nb in s.notebooks for g in nb.grades
                                    if g.name in autograded)
                  for s in gb.find_assignment(LESSON).submissions}
    work = lesson_files(hub.accounts.learners)
    hub.instructor("generate_assignment", LESSON, "--force")
    after = lesson_files(hub.accounts.learners)
    return {"scores": scores, "autograded": autograded, "work": work, "after": after,
            "course": course,
            "solved_by": solved_by, "untouched_by": untouched_by, "wrong_by": wrong_by}


def test_the_solved_notebook_gets_every_autograded_point_the_untouched_none_a_wrong_answer_less(
        semester):
    scores, full = semester["scores"], sum(semester["autograded"].values())
    assert full > 0, semester["autograded"]
    assert scores[semester["solved_by"]] == pytest.approx(full), scores
    assert scores[semester["untouched_by"]] == 0, scores
    assert 0 < scores[semester["wrong_by"]] < full, scores


def test_each_learner_gets_their_feedback_in_their_home(semester, hub):
    for name in hub.accounts.learners:
        files = [f for f in semester["after"][name]
                 if f.startswith(f"{LESSON}/feedback/") and f.endswith(f"/{LESSON}.html")]
        assert len(files) == 1, (name, sorted(semester["after"][name]))
        path = home(name, files[0])
        assert path.stat().st_uid == pwd.getpwnam(name).pw_uid


def test_regenerating_the_release_with_force_leaves_the_learners_work_alone(semester, hub):
    for name in hub.accounts.learners:
        assert f"{LESSON}/{LESSON}.ipynb" in semester["work"][name]
        assert semester["after"][name] == semester["work"][name], name


def test_a_hand_score_in_formgrader_reaches_the_lms_file_made_in_the_instructors_terminal(
        semester, hub):
    """docs/hub.md's last steps on the hub: a written answer scored by hand in Formgrader (its API,
    as its Submit button calls it), then `nbgrader export` and the LMS file in the instructor's
    terminal, from the roster that course.sh hub keeps in the course: the solved learner has every
    autograded point plus the hand score."""
    import csv
    instructor, solved_by = hub.accounts.instructor, semester["solved_by"]
    fg = f"/user/{instructor}/formgrader/api"
    status, notebooks = hub.request(instructor, "GET",
                                    f"{fg}/submitted_notebooks/{LESSON}/{LESSON}")
    assert status == 200, (status, notebooks)
    submission = next(n["id"] for n in notebooks if n["student"] == solved_by)
    status, grades = hub.request(instructor, "GET", f"{fg}/grades?submission_id={submission}")
    written = [g for g in grades if g["needs_manual_grade"]]
    assert status == 200 and written, (status, grades)
    status, graded = hub.request(instructor, "PUT", f"{fg}/grade/{written[0]['id']}",
                                 {"manual_score": 1.5})
    assert status == 200 and graded["manual_score"] == 1.5, (status, graded)
    hub.instructor("export")
    code, shown = hub.terminal(instructor, "python -m course_admin.grades lms --roster roster.csv "
                                           "--out moodle.csv grades.csv")
    assert code == 0, shown[-3000:]
    with open(semester["course"] / "moodle.csv", newline="") as f:
        rows = {r["ID number"]: r for r in csv.DictReader(f)}
    assert set(rows) == set(hub.accounts.learners), rows
    full = sum(semester["autograded"].values())
    column = next(c for c in rows[solved_by] if c.startswith(f"{LESSON} ("))   # "LESSON (N points)"
    assert float(rows[solved_by][column]) == pytest.approx(full + 1.5), rows[solved_by]
    assert float(rows[semester["untouched_by"]][column]) == 0, rows


def test_a_learner_reads_neither_another_learners_work_nor_the_instructors_sources(semester, hub):
    solved_by, snoop = semester["solved_by"], semester["untouched_by"]
    course = semester["course"]
    inbound = hub.state / "exchange" / classroom.course_id() / "inbound"
    submission, = inbound.glob(f"{solved_by}+{LESSON}+*/{LESSON}.ipynb")
    closed = [
        inbound,                                                  # every submission's name
        submission,                                               # one, by its exact name
        # the instructor's collected copy
        course / "submitted" / solved_by / LESSON / f"{LESSON}.ipynb",
        home(solved_by, LESSON, f"{LESSON}.ipynb"),               # another learner's home
        course / "solutions" / LESSON / f"{LESSON}.ipynb",        # the instructor's course
        course / "gradebook.db",
        ROOT / "solutions" / LESSON / f"{LESSON}.ipynb",          # the repository's sources
        ROOT / "tests" / "mutants" / f"{LESSON}.json",
    ]
    open_to_all = [ROOT / "course_utils" / "__init__.py", Path(sys.executable),
                   home(snoop, LESSON, f"{LESSON}.ipynb")]      # their own work
    got = reads(snoop, closed + open_to_all)
    assert {str(p): got[str(p)] for p in closed} == {str(p): "PermissionError" for p in closed}
    assert {str(p): got[str(p)] for p in open_to_all} == {str(p): "ok" for p in open_to_all}


def test_a_terminal_on_the_hub_has_the_course_and_the_sandbox_tools_and_starts_in_the_server_folder(
        semester, hub):
    """docs/hub.md's commands work as typed in a JupyterLab terminal: nbgrader and python are the
    course's, util-linux's pivot_root (Debian: /usr/sbin) is found, and the instructor starts in
    their course."""
    # typed: no "cwd="
    said = ("printf '%s=%s %s=%s %s=%s %s=%s\\n' cwd \"$PWD\" nbgrader \"$(command -v nbgrader)\" "
            "python \"$(command -v python)\" pivot_root \"$(command -v pivot_root)\"")
    for name, folder in ((hub.accounts.instructor, classroom.course_dir(hub.accounts.instructor)),
                         (semester["solved_by"], home(semester["solved_by"]))):
        code, shown = hub.terminal(name, said)
        found = re.search(r"cwd=(\S+) nbgrader=(\S+) python=(\S+) pivot_root=(\S+)", shown)
        assert code == 0 and found, shown[-3000:]
        bin_ = Path(sys.prefix) / "bin"
        assert found.groups()[:3] == (str(folder), str(bin_ / "nbgrader"),
                                      str(bin_ / "python")), (name, shown[-3000:])
        assert Path(found.group(4)).name == "pivot_root", shown[-3000:]


def test_a_learner_over_the_memory_limit_loses_only_their_own_process(semester, hub):
    """Each learner's server runs in a memory cgroup of its own (hub/limits.py), and so do its
    terminals and kernels: a process of theirs that takes more than LEARNER_MB is ended by the
    kernel, their JupyterLab goes on, and another learner's works on. The instructor, who grades,
    has no such limit."""
    learner, other = semester["wrong_by"], semester["untouched_by"]
    code, shown = hub.terminal(learner, f"grep -cE 'memory:/course-hub-[0-9]+-{learner}-"
                                        f"|::/course-hub-[0-9]+-{learner}-' "
                                        "/proc/self/cgroup")
    assert code == 0, f"{learner}'s terminal is in no memory cgroup of theirs:\n{shown[-2000:]}"
    code, shown = hub.terminal(learner,
                               f"python -c 'data = b\"x\" * ({LEARNER_MB + 512} * 2 ** 20)'")
    assert code == 137, (f"a process taking {LEARNER_MB + 512} MB was not ended by the kernel "
                         f"(exit {code}):\n{shown[-2000:]}")
    for name in (learner, other):
        status, answer = hub.request(name, "GET", f"/user/{name}/api/status")
        assert status == 200, (name, status, answer)
        code, shown = hub.terminal(name, "echo still here")
        assert code == 0 and "still here" in shown, shown[-2000:]
    code, shown = hub.terminal(hub.accounts.instructor, "grep -c course-hub- /proc/self/cgroup")
    assert code == 1, f"the instructor's server has a learner's limit:\n{shown[-2000:]}"


def test_the_instructor_has_formgrader_on_their_course_and_learners_have_none(semester, hub):
    instructor, learner = hub.accounts.instructor, semester["untouched_by"]
    hub.start_server(instructor)
    hub.wait_for_server(instructor)
    status, assignments = hub.request(instructor, "GET",
                                      f"/user/{instructor}/formgrader/api/assignments")
    assert status == 200 and LESSON in [a["name"] for a in assignments], (status, assignments)
    status, answer = hub.request(learner, "GET", f"/user/{learner}/formgrader/api/assignments")
    assert status == 404, (status, answer)
    # Nbgrader > Autograde a lesson
    status, page = hub.request(instructor, "GET", f"/user/{instructor}/course/autograde")
    assert status == 200 and LESSON in page, (status, str(page)[:500])
    status, answer = hub.request(learner, "GET", f"/user/{learner}/course/autograde")
    assert status == 404, (status, str(answer)[:500])


def grades_of(hub, name: str, server: str, learner: str) -> list[dict]:
    """The grades of `learner`'s LESSON submission in the Formgrader of the JupyterLab at `server`,
    asked as `name`."""
    fg = f"{server}formgrader/api"
    status, notebooks = hub.request(name, "GET", f"{fg}/submitted_notebooks/{LESSON}/{LESSON}")
    assert status == 200, (name, server, status, notebooks)
    submission = next(n["id"] for n in notebooks if n["student"] == learner)
    status, grades = hub.request(name, "GET", f"{fg}/grades?submission_id={submission}")
    assert status == 200, (name, server, status, grades)
    return grades


def test_a_teaching_assistant_grades_the_instructors_course_in_its_service_and_nothing_more(
        semester, hub):
    """nbgrader's "one class, multiple graders" (course.sh hub --tas): the course is the hub's
    service COURSE, jupyterhub-singleuser run as the instructor's account in their course, holding
    no role of its own. The instructor and the TA reach its Formgrader, a learner does not; the TA's
    hand score there is the one the instructor's own Formgrader shows (one gradebook); the TA's
    terminal in it is the course's, with the grading sudo rule. Beyond it the TA is a user like a
    learner: no hub admin, no instructor's server, no sudo, no instructor's files from their own
    account."""
    instructor, ta, learner, solved_by = (hub.accounts.instructor, hub.accounts.tas[0],
                                          semester["untouched_by"], semester["solved_by"])
    course, service = classroom.course_id(), classroom.service_prefix()
    status, info = hub.request(instructor, "GET", f"/hub/api/services/{course}")
    assert status == 200 and info.get("pid") and info["roles"] == [], (status, info)
    command = Path(f"/proc/{info['pid']}/cmdline").read_bytes().split(b"\0")
    # the script, or python running it
    assert any(word.endswith(b"/jupyterhub-singleuser") for word in command[:2]), command
    assert Path(f"/proc/{info['pid']}").stat().st_uid == pwd.getpwnam(instructor).pw_uid, (
        "as the instructor")
    for name, expected in ((instructor, 200), (ta, 200), (learner, 403)):
        status, answer = hub.request(name, "GET", f"{service}formgrader/api/assignments")
        assert status == expected, (name, status, str(answer)[:500])
        assert expected != 200 or LESSON in [a["name"] for a in answer], answer
    # the TA scores a written answer by hand in the service; the instructor's own Formgrader, which
    # has read it before (its database session keeps what it read:
    # course_utils.grader.freshgradebook), shows the new score
    own = f"/user/{instructor}/"
    written = next(g for g in grades_of(hub, instructor, own, solved_by)
                   if g["auto_score"] is None)   # graded by hand
    fg = f"{service}formgrader/api"
    try:
        status, graded = hub.request(ta, "PUT", f"{fg}/grade/{written['id']}",
                                     {"manual_score": 0.25})
        assert status == 200 and graded["manual_score"] == 0.25, (status, graded)
        mine = {g["id"]: g for g in grades_of(hub, instructor, own, solved_by)}
        assert mine[written["id"]]["manual_score"] == 0.25, mine[written["id"]]
    finally:   # the score as it was, for the tests after this one
        hub.request(ta, "PUT", f"{fg}/grade/{written['id']}",
                    {"manual_score": written["manual_score"]})
    # the TA's terminal in the service: the instructor's account, in the course, nbgrader's, the
    # grading rule
    code, shown = hub.terminal(ta, 'echo "who=$(id -un) at=$PWD nbgrader=$(command -v nbgrader)"; '
                                   'sudo -n -l "$COURSE_ROOT_WORKER"', server=service)
    found = re.search(r"who=(\S+) at=(\S+) nbgrader=(\S+)", shown)
    assert code == 0 and found, shown[-3000:]
    assert found.groups() == (instructor, str(classroom.course_dir(instructor)),
                              str(Path(sys.prefix) / "bin" / "nbgrader"))
    # beyond the service, nothing of the instructor's
    status, me = hub.request(ta, "GET", "/hub/api/user")
    assert status == 200 and me["admin"] is False and me["name"] == ta, me
    for method, path in (("GET", "/hub/api/users"), ("POST", f"/hub/api/users/{learner}/server"),
                         ("GET", f"/user/{instructor}/api/contents"),
                         ("GET", f"/user/{learner}/api/contents")):
        status, answer = hub.request(ta, method, path)
        assert status in (403, 404), (method, path, status, str(answer)[:300])
    inbound = hub.state / "exchange" / course / "inbound"
    closed = [home(instructor), semester["course"] / "gradebook.db", inbound,
              next(inbound.glob(f"{solved_by}+*")),
              home(solved_by, LESSON, f"{LESSON}.ipynb")]
    assert reads(ta, closed) == {str(p): "PermissionError" for p in closed}
    hub.start_server(ta)   # the TA's own JupyterLab: no grading rule, no path to it
    hub.wait_for_server(ta)
    code, shown = hub.terminal(ta, f'echo "worker=[$COURSE_ROOT_WORKER]"; '
                                   f'sudo -n -l {classroom.root_worker(hub.state)}')
    assert code != 0 and "worker=[]" in shown, shown[-3000:]


def test_the_hub_runs_jupyterhubs_idle_culler_as_its_service(hub):
    """Learners' idle servers are stopped by jupyterhub-idle-culler, which the hub starts (as
    nobody) and watches (course.sh hub --idle-minutes; its role reaches the group of learners and
    TAs only)."""
    status, service = hub.request(hub.accounts.instructor, "GET", "/hub/api/services/idle-culler")
    assert status == 200 and service.get("pid"), (status, service)
    command = Path(f"/proc/{service['pid']}/cmdline").read_bytes().split(b"\0")
    assert b"jupyterhub_idle_culler" in command and b"--timeout=3600" in command, command
    assert Path(f"/proc/{service['pid']}").stat().st_uid == pwd.getpwnam("nobody").pw_uid, (
        "run as nobody, not root")
    assert "idle-culler" in service["roles"], service
    # it has looked at the users once at its start, allowed to (its scopes: the group of learners
    # and TAs only)
    asked = [line for line in hub.log.read_text(errors="replace").splitlines()
             if "(idle-culler@" in line]
    assert any(re.search(r"\b200 GET /hub/api/users", line) for line in asked), hub.log_tail()
    assert not any(re.search(r"\b40[13] ", line) for line in asked), asked


def test_the_instructor_grades_in_the_full_sandbox_without_being_root(hub):
    """The instructor's grader (nbgrader autograde in their terminal or JupyterLab) gets the root
    sandbox through the hub's one sudo rule (course_utils.grader.rootworker), and no other root."""
    name = hub.accounts.instructor
    env = classroom.user_environment(hub.state, hub.accounts, name)
    code = ("from course_utils.grader.rootworker import check_sandbox, learner_worker\n"
            "from course_utils.grader.worker import Limits\n"
            "w = learner_worker(Limits())\nprint(type(w).__name__)\nprint(check_sandbox(Limits()))")
    done = classroom.as_user(name, [sys.executable, "-c", code], classroom.course_dir(name), env,
                             timeout=600)
    kind, warning = (done.stdout.strip().splitlines() + ["", ""])[:2]
    assert kind == "SudoWorker", done.stderr[-2000:]
    # nothing to warn about: learners' and reference's peaks are measured
    assert warning == "None", warning
    others = classroom.as_user(name, ["sudo", "-n", "-l", "/bin/sh"], classroom.course_dir(name),
                               env, timeout=60)
    assert others.returncode != 0


@contextlib.contextmanager
def browser_page(hub, name: str, shot: str):
    """A headless Chromium page logged in as `name` through the hub's login form, at their
    JupyterLab; on a failure its screenshot is SHOTS/SHOT-failed.png."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("the browser test needs the Python package playwright "
                    "(pinned in requirements.txt)")
    exe = find_chromium()
    if exe is None:
        pytest.skip("no Chromium found: `sudo apt-get install chromium`")
    passwords = dict(line.split(",", 1) for line in
                     (hub.state / "passwords.csv").read_text().splitlines()[1:])
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, headless=True, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport=VIEWPORT)
        try:
            page.goto(f"{hub.url}/hub/login")
            page.fill("#username_input", name)
            page.fill("#password_input", passwords[name])
            page.click("#login_submit")
            page.wait_for_url(f"**/user/{name}/lab**", timeout=120_000)
            yield page
        except Exception:
            SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=SHOTS / f"{shot}-failed.png")
            print(f"at {page.url}; screenshot: {SHOTS / f'{shot}-failed.png'}")
            raise
        finally:
            browser.close()


def menu_items(page, menu: str) -> list[str]:
    page.locator(f'.lm-MenuBar-itemLabel:text-is("{menu}")').click()
    page.locator(".lm-Menu-itemLabel").first.wait_for(timeout=30_000)
    return page.locator(".lm-Menu-itemLabel").all_inner_texts()


@pytest.mark.browser
def test_a_learner_logs_in_sees_the_lesson_and_validates_it(semester, hub):
    name = semester["solved_by"]
    with browser_page(hub, name, "hub-learner") as page:
        page.locator(".jp-DirListing-content").get_by_text(
            LESSON, exact=True).first.wait_for(timeout=120_000)
        # nbgrader's menu holds the Assignment List, and none of the instructor's tools
        items = menu_items(page, "Nbgrader")
        assert ("Assignment List" in items
                and not {"Formgrader", "Create Assignment"} & set(items)), items
        page.locator('.lm-Menu-itemLabel:text-is("Assignment List")').click()
        page.locator("#nbgrader-assignment-list").get_by_text(LESSON).first.wait_for(timeout=60_000)
        page.goto(f"{hub.url}/user/{name}/lab/tree/{LESSON}/{LESSON}.ipynb")
        validate = page.locator('.jp-NotebookPanel .jp-Toolbar-item:has-text("Validate")').first
        validate.wait_for(timeout=120_000)
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=SHOTS / "hub-learner.png")
        # Validate, pressed: nbgrader runs the learner's saved (solved) notebook on their own server
        validate.locator("jp-button, button").first.click()
        message = page.locator("#validation-message")
        message.wait_for(timeout=300_000)
        kind, text = message.get_attribute("class") or "", message.inner_text()
        page.screenshot(path=SHOTS / "hub-learner-validate.png")
        assert ("validation-success" in kind
                and "Success! Your notebook passes all the tests." in text), text[:3000]


@pytest.mark.browser
def test_the_instructor_opens_formgrader_from_the_menu_and_its_links_reach_their_jupyterlab(
        semester, hub):
    """Nbgrader > Formgrader opens Formgrader in a browser tab of its own (framed in JupyterLab, the
    hub's frame-ancestors 'none' would leave it blank), listing the lesson; the lesson's link there
    (nbgrader makes it /tree/..., without the user's prefix) opens its folder in the instructor's
    JupyterLab."""
    name = hub.accounts.instructor
    with browser_page(hub, name, "hub-instructor") as page:
        items = menu_items(page, "Nbgrader")
        assert {"Formgrader", "Assignment List", "Autograde a lesson"} <= set(items), items
        with page.context.expect_page() as opened:
            page.locator('.lm-Menu-itemLabel:text-is("Formgrader")').click()
        grader = opened.value
        # Manage Assignments: the lesson, linked to its folder
        link = grader.locator(f'a:text-is("{LESSON}")').first
        link.wait_for(timeout=120_000)
        assert f"/user/{name}/formgrader" in grader.url, grader.url
        SHOTS.mkdir(parents=True, exist_ok=True)
        grader.screenshot(path=SHOTS / "hub-formgrader.png")
        with grader.context.expect_page() as opened:
            link.click()
        lab = opened.value
        lab.wait_for_url(f"**/user/{name}/lab/tree/**{LESSON}", timeout=120_000)
        lab.locator(".jp-DirListing-content").get_by_text(
            f"{LESSON}.ipynb", exact=True).first.wait_for(timeout=120_000)


@pytest.mark.browser
def test_a_teaching_assistant_opens_the_course_from_the_hubs_home_and_formgrader_links_stay_in_it(
        semester, hub):
    """A TA logs in (their own JupyterLab), finds the course under Services on the hub's home page,
    opens it without a confirmation page (the service's JupyterLab, in the course), and its
    Nbgrader > Formgrader in a tab of its own; the lesson's link there (nbgrader's /tree/..., no
    prefix) opens the folder in the course's JupyterLab, not in the TA's own
    (hub/templates/404.html: the link's referrer is the service's page)."""
    name, service = hub.accounts.tas[0], classroom.service_prefix()
    with browser_page(hub, name, "hub-ta") as page:
        page.goto(f"{hub.url}/hub/home")
        page.get_by_text("Services", exact=True).click()
        link = page.locator(f'a[href$="{service}"]')
        link.wait_for(timeout=30_000)
        link.click()
        page.wait_for_url(f"**{service}lab**", timeout=120_000)
        page.locator(".jp-DirListing-content").get_by_text(
            "gradebook.db", exact=True).first.wait_for(timeout=120_000)
        items = menu_items(page, "Nbgrader")
        assert {"Formgrader", "Autograde a lesson"} <= set(items), items
        with page.context.expect_page() as opened:
            page.locator('.lm-Menu-itemLabel:text-is("Formgrader")').click()
        grader = opened.value
        lesson = grader.locator(f'a:text-is("{LESSON}")').first
        lesson.wait_for(timeout=120_000)
        assert f"{service}formgrader" in grader.url, grader.url
        with grader.context.expect_page() as opened:
            lesson.click()
        lab = opened.value
        lab.wait_for_url(f"**{service}lab/tree/**{LESSON}", timeout=120_000)
        lab.locator(".jp-DirListing-content").get_by_text(
            f"{LESSON}.ipynb", exact=True).first.wait_for(timeout=120_000)


@pytest.mark.browser
def test_the_instructor_autogrades_a_whole_lesson_from_the_menu(semester, hub):
    """Nbgrader > Autograde a lesson opens its page in a tab of its own; one press runs nbgrader
    autograde on the lesson through the browser's own login (cookie and XSRF token, not a token),
    and the page follows it to its end (the submissions were autograded before: nbgrader says so and
    ends well)."""
    name = hub.accounts.instructor
    with browser_page(hub, name, "hub-autograde") as page:
        menu_items(page, "Nbgrader")
        with page.context.expect_page() as opened:
            page.locator('.lm-Menu-itemLabel:text-is("Autograde a lesson")').click()
        grader = opened.value
        button = grader.locator(f'button[data-lesson="{LESSON}"]')
        button.wait_for(timeout=120_000)
        button.click()
        status = grader.locator("#status")
        status.get_by_text("done, every submission autograded").wait_for(timeout=600_000)
        assert LESSON in grader.locator("#log").inner_text(), grader.locator("#log").inner_text()
        assert button.is_enabled(), "the lesson's button is usable again once its run ended"


# What the hub's log said, run after run, that no instructor or learner can act on (nbgrader's
# course list looking for a Formgrader service this hub has not; Formgrader's debug view of a
# configuration made of classes).
NOISE = ("Formgrader not available at URL", "Formgrader config is not serializable",
         "allow_errors not recognized")


def test_the_hubs_log_has_no_formgrader_noise(semester, hub):
    """The course list's server side is off on the hub (its lab plugin too: nothing asks it), and
    Formgrader's pages render without their debug dump; the log of the whole run says none of
    NOISE."""
    instructor, learner = hub.accounts.instructor, semester["untouched_by"]
    for name in (instructor, learner):
        hub.start_server(name)
        hub.wait_for_server(name)
        status, answer = hub.request(name, "GET", f"/user/{name}/formgraders")
        assert status == 404, (name, status, str(answer)[:500])
    status, page = hub.request(instructor, "GET",
                               f"/user/{instructor}/formgrader/manage_assignments")
    assert status == 200 and "Manage Assignments" in str(page), (status, str(page)[:500])
    said = [line for line in hub.log.read_text(errors="replace").splitlines()
            if any(n in line for n in NOISE)]
    assert not said, "\n".join(said[:10])



def test_a_class_runs_the_benchmarks_path(semester, hub):
    """benchmarks/hub_class.py's path for this hub's three learners (its figures for a class of 40:
    docs/hub.md's section): their servers asked for at once through the REST API and waited for, the
    lesson opened in a kernel and its first two cells run through the kernel's websocket, each
    learner's memory read from their cgroup and /proc, one learner's kernel over their limit ended
    by the kernel's OOM killer in their cgroup alone while the others' kernels still answer. Counts,
    not times."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import hub_class
    learners = hub.accounts.learners
    figures = hub_class.run_class(hub, learners, cells=2, oom=True, learner_mb=LEARNER_MB)
    assert figures["start"]["ready"] == len(learners) and not figures["start"]["failed"], (
        figures["start"])
    assert figures["cells"]["ok"] == 2 * len(learners), figures["cells"]
    for name, m in figures["memory"].items():
        assert (m["kernels"] == 1 and m["used"] > 0 and m["anon"] > 0 and m["server_pss"] > 0
                and m["kernel_pss"] > 0), (name, m)
        assert m["peak"] >= m["used"], (name, m)
    assert figures["hub"]["hub_pss"] > 0 and figures["hub"]["proxy_pss"] > 0, figures["hub"]
    oom = figures["oom"]
    assert "skipped" not in oom, oom
    assert oom["victim_kernel"] != ["ok"] and oom["kills"][oom["victim"]] >= 1, oom
    assert all(kills == 0 for name, kills in oom["kills"].items() if name != oom["victim"]), oom
    assert all(answer == ["ok"] for answer in oom["others_answer"].values()), oom
    machine = figures["machine"]
    assert machine["peak"] >= max(machine["before"], machine["after"]) > 0, machine


def test_the_hub_starts_again_with_its_users_exchange_and_gradebook(semester, hub):
    """What a reboot or `systemctl restart backprop-course-hub` does (docs/hub.md): the same command
    on the same state folder. Run last (the learners' servers stop with the hub). The users' tokens
    (the hub's database) still work, a learner's server starts again, nbgrader lists their
    submission with its feedback in the exchange and in their home, and the instructor's gradebook
    holds the same scores."""
    from nbgrader.api import Gradebook

    def scores() -> dict:
        with Gradebook(f"sqlite:///{semester['course'] / 'gradebook.db'}") as gb:
            return {s.student.id: s.score for s in gb.find_assignment(LESSON).submissions}

    before = scores()
    hub.restart()
    name = semester["wrong_by"]
    hub.start_server(name)
    hub.wait_for_server(name)
    status, listed = hub.request(name, "GET",
                                 f"/user/{name}/assignments?course_id={classroom.course_id()}")
    assert status == 200 and listed.get("success"), (status, str(listed)[:2000])
    # nbgrader's assignment list: each submission, with its feedback
    submissions = [s for a in listed["value"]
                   if a["assignment_id"] == LESSON and a["status"] == "submitted"
                   for s in a["submissions"]]
    assert submissions and all(s["has_exchange_feedback"] and s["has_local_feedback"]
                               for s in submissions), submissions
    assert scores() == before and len(before) == len(hub.accounts.learners), (before, scores())


def test_a_teaching_assistant_taken_off_the_class_loses_the_course(semester, hub):
    """The hub started again without --tas (after the restart test: the learners' servers stop with
    the hub): the TA can no longer log in (only the accounts of this start may), their token, still
    in the hub's database, no longer opens the course's service (JupyterHub makes the graders' role
    exactly the accounts of this start), and the instructor's still does."""
    ta, service = hub.accounts.tas[0], classroom.service_prefix()
    assert hub.logs_in(ta), "the TA logs in while on the class (the check itself works)"
    hub.restart(("--tas", ""))
    assert not hub.logs_in(ta), "a TA taken off the class logs in"
    status, answer = hub.request(ta, "GET", f"{service}formgrader/api/assignments")
    assert status == 403, (status, str(answer)[:500])
    status, answer = hub.request(hub.accounts.instructor, "GET",
                                 f"{service}formgrader/api/assignments")
    assert status == 200, (status, str(answer)[:500])
