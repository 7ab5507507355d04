"""Autograde every submission of a lesson in one action, from the instructor's JupyterLab.

nbgrader's Formgrader autogrades one learner per click, and says to use the command line for a whole
lesson. This Jupyter server extension, on in the instructor's server only (beside Formgrader, whose
course it grades), is that command behind a button: Nbgrader > Autograde a lesson opens

    GET  BASE/course/autograde            a page: each lesson of the gradebook, its submissions, a button
    POST BASE/course/autograde/LESSON     starts `nbgrader autograde LESSON` in the course folder
    GET  BASE/course/autograde/LESSON     {"running", "returncode", "log"}: how it goes (the page polls it)

The command runs as its own process, as when typed in a terminal: the course's nbgrader_config.py
and hardened grader, one reference run shared by the lesson's submissions, and nothing of it (no
reference, no worker) left in the instructor's server once it ends. One lesson at a time: a second
press while one runs is refused (409), since two gradings would share the machine's cores. Only a
lesson of the gradebook is accepted (404 otherwise); the page runs no learner's text.
"""

from __future__ import annotations

import html
import json
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
        lines = self.log.read_text(errors="replace").splitlines() if self.log.exists() else []
        return {"lesson": self.lesson, "running": self.process.poll() is None,
                "returncode": self.process.poll(), "log": "\n".join(lines[-LOG_LINES:])}


_jobs: dict[str, Job] = {}
_lock = threading.Lock()


def running() -> Job | None:
    return next((j for j in _jobs.values() if j.process.poll() is None), None)


def start(lesson: str, course: Path) -> Job:
    """`nbgrader autograde LESSON` in course, its output in a log file of its own; RuntimeError while another runs."""
    with _lock:
        if (busy := running()) is not None:
            raise RuntimeError(f"{busy.lesson} is being autograded; wait until it ends")
        log = Path(tempfile.mkdtemp(prefix="course-autograde-")) / f"{lesson}.log"
        with open(log, "wb") as out:
            process = subprocess.Popen([sys.executable, "-m", "nbgrader", "autograde", lesson], cwd=course,
                                       stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        _jobs[lesson] = Job(lesson, process, log)
        return _jobs[lesson]


class _Handler(BaseHandler):
    def lessons(self) -> dict[str, int]:
        """{lesson: its submissions} from the gradebook, as Formgrader lists them."""
        return {a["name"]: a["num_submissions"] for a in self.api.get_assignments()}


class PageHandler(_Handler):
    @web.authenticated
    def get(self):
        rows = "".join(
            f'<tr><td>{html.escape(name)}</td><td>{count}</td><td><button data-lesson="{html.escape(name)}"'
            f'{" disabled" if not count else ""}>Autograde every submission</button></td></tr>'
            for name, count in sorted(self.lessons().items()))
        base = self.base_url
        self.write(PAGE.format(rows=rows or '<tr><td colspan="3">No lesson in the gradebook yet.</td></tr>',
                               api=json.dumps(url_path_join(base, "course/autograde")),
                               formgrader=html.escape(url_path_join(base, "formgrader")),
                               xsrf=json.dumps(self.xsrf_token.decode() if isinstance(self.xsrf_token, bytes)
                                               else self.xsrf_token)))


class LessonHandler(_Handler):
    def known(self, lesson: str) -> None:
        if lesson not in self.lessons():
            raise web.HTTPError(404, f"no lesson {lesson!r} in the gradebook")

    @web.authenticated
    def get(self, lesson):
        self.known(lesson)
        job = _jobs.get(lesson)
        self.finish(job.state() if job else {"lesson": lesson, "running": False, "returncode": None, "log": ""})

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
<style>body{{font-family:sans-serif;margin:2em;max-width:60em}}td,th{{padding:.3em 1em;text-align:left}}
pre{{background:#f4f4f4;padding:1em;white-space:pre-wrap;max-height:30em;overflow:auto}}</style></head>
<body><h1>Autograde a lesson</h1>
<p>Each button runs <code>nbgrader autograde LESSON</code> in the course folder, as in a terminal: every
submission collected for that lesson, with the course's grader. The scores then show in
<a href="{formgrader}">Formgrader</a>.</p>
<table><tr><th>Lesson</th><th>Submissions</th><th></th></tr>{rows}</table>
<p id="status" role="status"></p><pre id="log" hidden></pre>
<script>
const api = {api}, xsrf = {xsrf};
const status = document.getElementById("status"), log = document.getElementById("log");
async function watch(lesson) {{
  const state = await (await fetch(api + "/" + encodeURIComponent(lesson))).json();
  log.hidden = false; log.textContent = state.log;
  if (state.running) {{ status.textContent = lesson + ": autograding..."; setTimeout(() => watch(lesson), 2000); return; }}
  status.textContent = lesson + (state.returncode === 0 ? ": done, every submission autograded"
                                 : ": nbgrader autograde ended with status " + state.returncode + " (its log below)");
  document.querySelectorAll("button[data-lesson]").forEach(b => b.disabled = false);
}}
document.querySelectorAll("button[data-lesson]").forEach(button => button.onclick = async () => {{
  const lesson = button.dataset.lesson;
  const answer = await fetch(api + "/" + encodeURIComponent(lesson), {{method: "POST", headers: {{"X-XSRFToken": xsrf}}}});
  if (!answer.ok) {{ status.textContent = (await answer.json()).error || ("refused: " + answer.status); return; }}
  document.querySelectorAll("button[data-lesson]").forEach(b => b.disabled = true);
  watch(lesson);
}});
</script></body></html>
"""


def _jupyter_server_extension_points():
    return [{"module": "course_utils.grader.autograde_lesson"}]


def _load_jupyter_server_extension(serverapp):
    web_app = serverapp.web_app
    base = web_app.settings["base_url"]
    web_app.add_handlers(".*$", [(url_path_join(base, "course/autograde"), PageHandler),
                                 (url_path_join(base, r"course/autograde/([^/]+)"), LessonHandler)])
