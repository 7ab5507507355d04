"""Autograde every submission of a lesson in one action, from the instructor's JupyterLab.

nbgrader's Formgrader autogrades one learner per click, and says to use the command line for a whole
lesson. This Jupyter server extension, on in the instructor's server only (beside Formgrader, whose
course it grades), is that command behind a button: Nbgrader > Autograde a lesson opens

    GET  BASE/course/autograde            a page: each lesson of the gradebook, its submissions,
                                          a button
    POST BASE/course/autograde/LESSON     starts `nbgrader autograde LESSON` in the course folder
    GET  BASE/course/autograde/LESSON     {"running", "returncode", "log"}: how it goes (the page
                                          polls it)

The command runs as its own process, as when typed in a terminal: the course's nbgrader_config.py
and hardened grader, one reference run shared by the lesson's submissions, and nothing of it (no
reference, no worker) left in the instructor's server once it ends. One lesson at a time per course:
a second press while one runs, here or in another server on the same course (the hub's course
service for teaching assistants: a lock file in the course, held by the run), is refused (409),
since two gradings would share the machine's cores and the gradebook (the pages' own runs: a
terminal's `nbgrader autograde` is not counted). Only a lesson of the course (its
source/ folder, as Formgrader lists them) is accepted (404 otherwise); errors come back as JSON, and
the page runs no learner's text. A run the server outlives is reaped by a thread of its own; one
still running when the server exits (cleanly: atexit) is stopped with it, its whole process group.
"""

from __future__ import annotations

import atexit
import fcntl
import html
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from jupyter_server.utils import url_path_join
from nbgrader.server_extensions.formgrader.base import BaseHandler
from tornado import web

LOG_LINES = 40   # the end of the command's log shown on the page


@dataclass
class Job:
    lesson: str
    process: subprocess.Popen
    log: Path

    def state(self) -> dict:
        code = self.process.poll()
        with open(self.log, "rb") as f:   # the end of the log only
            f.seek(max(0, f.seek(0, 2) - 200 * LOG_LINES))
            lines = f.read().decode(errors="replace").splitlines()
        return {"lesson": self.lesson, "running": code is None, "returncode": code,
                "log": "\n".join(lines[-LOG_LINES:])}


_jobs: dict[str, Job] = {}
_lock = threading.Lock()
# this server's logs, one per lesson; gone at exit
_logs = tempfile.TemporaryDirectory(prefix="course-autograde-")


def running() -> Job | None:
    return next((j for j in _jobs.values() if j.process.poll() is None), None)


# in the course folder: held by the run (its inherited descriptor) until it ends
LOCK = ".autograde.lock"


def start(lesson: str, course: Path) -> Job:
    """`nbgrader autograde LESSON` in course, its output in a log file of its own; RuntimeError
    while another runs, from this server or from another one on the same course (LOCK)."""
    with _lock:
        if (busy := running()) is not None:
            raise RuntimeError(f"{busy.lesson} is being autograded; wait until it ends")
        held = os.open(course / LOCK, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            try:
                fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise RuntimeError("another grader's server is autograding this course "
                                   "(Autograde a lesson); wait until it ends") from None
            log = Path(_logs.name) / f"{lesson}.log"
            with open(log, "wb") as out:
                process = subprocess.Popen(
                    [sys.executable, "-m", "nbgrader", "autograde", lesson], cwd=course,
                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                    pass_fds=(held,),   # the run holds the course's lock while it lives
                    start_new_session=True)   # its group: stopped whole (_stop_running)
        finally:
            os.close(held)
        # reaped when it ends, watched or not
        threading.Thread(target=process.wait, daemon=True).start()
        _jobs[lesson] = Job(lesson, process, log)
        return _jobs[lesson]


@atexit.register
def _stop_running() -> None:
    """A run the server does not outlive is stopped with it (its workers end with it)."""
    if (job := running()) is not None:
        try:
            os.killpg(job.process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


class _Handler(BaseHandler):
    def lessons(self) -> dict[str, int]:
        """{lesson: its submissions}, as Formgrader lists them (the course's source/ folders)."""
        return {a["name"]: a["num_submissions"] for a in self.api.get_assignments()}


def _script_json(value) -> str:
    # inside a script element: no closing tag can end it
    return json.dumps(value).replace("<", "\\u003c")


class PageHandler(_Handler):
    @web.authenticated
    def get(self):
        rows = "".join(
            f'<tr><td>{html.escape(name)}</td><td>{count}</td>'
            f'<td><button data-lesson="{html.escape(name)}"'
            f'{" disabled" if not count else ""}>Autograde every submission</button></td></tr>'
            for name, count in sorted(self.lessons().items()))
        token = self.xsrf_token
        job = running()
        self.write(PAGE.format(
            rows=rows or '<tr><td colspan="3">No lesson in the course yet.</td></tr>',
            api=_script_json(url_path_join(self.base_url, "course/autograde")),
            formgrader=html.escape(url_path_join(self.base_url, "formgrader")),
            xsrf=_script_json(token.decode() if isinstance(token, bytes) else token),
            current=_script_json(job.lesson if job else None)))


class LessonHandler(_Handler):
    def write_error(self, status_code, **kwargs):
        """Errors as JSON, which the page shows (never an HTML error page its script cannot
        read)."""
        error = kwargs.get("exc_info", (None, None))[1]
        self.finish({"error": getattr(error, "log_message", None) or self._reason})

    def known(self, lesson: str) -> None:
        if lesson not in _jobs and lesson not in self.lessons():
            raise web.HTTPError(404, f"no lesson {lesson!r} in the course")

    @web.authenticated
    def get(self, lesson):
        self.known(lesson)
        job = _jobs.get(lesson)
        self.finish(job.state() if job else {"lesson": lesson, "running": False, "returncode": None,
                                             "log": ""})

    @web.authenticated
    def post(self, lesson):
        self.known(lesson)
        try:
            job = start(lesson, Path(self.coursedir.root))
        except RuntimeError as e:
            self.set_status(409)
            self.finish({"error": str(e)})
            return
        self.finish(job.state())


PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>Autograde a lesson</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:60em}}
td,th{{padding:.3em 1em;text-align:left}}
pre{{background:#f4f4f4;padding:1em;white-space:pre-wrap;max-height:30em;overflow:auto}}
</style></head>
<body><h1>Autograde a lesson</h1>
<p>Each button runs <code>nbgrader autograde LESSON</code> in the course folder, as in a terminal:
every submission collected for that lesson, with the course's grader. The scores then show in
<a href="{formgrader}">Formgrader</a>.</p>
<table><tr><th>Lesson</th><th>Submissions</th><th></th></tr>{rows}</table>
<p id="status" role="status"></p><pre id="log" hidden></pre>
<script>
const api = {api}, xsrf = {xsrf}, current = {current};
const status = document.getElementById("status"), log = document.getElementById("log");
const buttons = [...document.querySelectorAll("button[data-lesson]")];
const usable = new Map(buttons.map(b => [b, !b.disabled]));
const ask = (lesson, method) => fetch(api + "/" + encodeURIComponent(lesson),
                                      {{method, headers: {{"X-XSRFToken": xsrf}}}});
async function answer(response) {{
  try {{ return await response.json(); }}
  catch (e) {{ return {{error: "the server answered " + response.status}}; }}
}}
function idle(text) {{
  status.textContent = text; buttons.forEach(b => b.disabled = !usable.get(b));
}}
async function watch(lesson) {{
  buttons.forEach(b => b.disabled = true);
  let state;
  try {{ state = await answer(await ask(lesson, "GET")); }}
  catch (e) {{ state = {{error: String(e)}}; }}
  if (state.error) {{ idle(lesson + ": " + state.error); return; }}
  log.hidden = false; log.textContent = state.log;
  if (state.running) {{
    status.textContent = lesson + ": autograding..."; setTimeout(() => watch(lesson), 2000); return;
  }}
  idle(lesson + (state.returncode === 0 ? ": done, every submission autograded"
                 : ": nbgrader autograde ended with status " + state.returncode +
                   " (its log below)"));
}}
buttons.forEach(button => button.onclick = async () => {{
  const lesson = button.dataset.lesson;
  let state;
  try {{
    const response = await ask(lesson, "POST"); state = response.ok ? {{}} : await answer(response);
  }}
  catch (e) {{ state = {{error: String(e)}}; }}
  if (state.error) {{ idle(lesson + ": " + state.error); return; }}
  watch(lesson);
}});
if (current) watch(current);
</script></body></html>
"""


def _jupyter_server_extension_points():
    return [{"module": "course_utils.grader.autograde_lesson"}]


def _load_jupyter_server_extension(serverapp):
    web_app = serverapp.web_app
    base = web_app.settings["base_url"]
    web_app.add_handlers(".*$", [(url_path_join(base, "course/autograde"), PageHandler),
                                 (url_path_join(base, r"course/autograde/([^/]+)"), LessonHandler)])
