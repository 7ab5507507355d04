"""Driving JupyterLab from the browser tests: start a server, open pages, run notebooks, take
screenshots.

Used by conftest.py (the session's server, browser and pages) and the test modules of tests/browser.
The page side is lab.js, installed in every page as window.course.
"""

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "build" / "screenshots"
DOCS_SHOTS = ROOT / "docs" / "screenshots"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--no-first-run", "--disable-dev-shm-usage"]
VIEWPORT = {"width": 1280, "height": 800}
# a common laptop screen: every slider must still be draggable
SMALL_SCREEN = {"width": 1366, "height": 768}
RUN_TIMEOUT_S = 300  # one notebook, Run All to the end; each lesson takes well under a minute
# The few screenshots shown in README.md: docs/screenshots/NAME <- build/screenshots/NAME, made by
# the tests (test_lessons_in_browser.py); refreshed by
# `pytest -m browser --refresh-docs-screenshots`.
DOCS = {  # README file: (screenshot the tests made, width in pixels)
    "overview.png": ("overview.png", 1280),
    "circuit.png": ("01-circuits-widget.png", 900),
    "memory-curve.png": ("04-mlp-backprop-plot-1.png", 800),
}


def find_chromium() -> str | None:
    """The system's Chromium: $CHROMIUM, else chromium, chromium-browser or google-chrome on
    PATH."""
    if os.environ.get("CHROMIUM"):
        return shutil.which(os.environ["CHROMIUM"])
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Lab:
    """A running JupyterLab: its URL and token, the course copy it serves, its log."""

    base: str
    token: str
    root: Path
    log: Path
    proc: subprocess.Popen = field(repr=False)

    def url(self, path: str) -> str:
        sep = "&" if "?" in path else "?"
        return f"{self.base}{path}{sep}token={self.token}"

    def get(self, path: str) -> tuple[int, str]:
        """GET path from the server (with the token): (status, body)."""
        try:
            with urllib.request.urlopen(self.url(path), timeout=30) as r:
                return r.status, r.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode("utf-8", "replace")

    def log_tail(self, n: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])


def start_lab(root: Path, settings: Path, extra_env: dict | None = None, course_sh: bool = False,
              timeout: float = 120) -> Lab:
    """Start `jupyter lab` on a free port; return when it answers.

    By default it serves root (also its working directory) with this Python's JupyterLab. With
    course_sh, it is started by the README's command, `bash course.sh lab`, which picks the folder
    it serves (notebooks/, or the repository for COURSE_ROLE=instructor in extra_env); root is then
    only where its URLs point.
    """
    port, token = free_port(), secrets.token_hex(16)
    env = dict(os.environ, **(extra_env or {}))
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    # not the tester's own settings
    env["JUPYTERLAB_SETTINGS_DIR"] = str(settings / "user-settings")
    env["JUPYTERLAB_WORKSPACES_DIR"] = str(settings / "workspaces")
    # The one setting the tests add: record each cell's run time in its metadata (for the
    # long-cells test). Nothing a learner sees depends on it.
    tracker = (settings / "user-settings" / "@jupyterlab" / "notebook-extension"
               / "tracker.jupyterlab-settings")
    tracker.parent.mkdir(parents=True, exist_ok=True)
    tracker.write_text(json.dumps({"recordTiming": True}))
    env.pop("NBGRADER_EXECUTION", None)
    args = ["--no-browser", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
            "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
            "--LabApp.expose_app_in_browser=True"]
    if course_sh:
        cmd = ["bash", str(ROOT / "course.sh"), "lab", *args]
    else:
        cmd = [sys.executable, "-m", "jupyterlab", *args, f"--ServerApp.root_dir={root}"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            # as `course.sh lab` does: containers and CI often run as root
            cmd.append("--allow-root")
    log = settings / "server.log"
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    lab = Lab(f"http://127.0.0.1:{port}", token, root, log, proc)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"jupyter lab exited with {proc.returncode}:\n{lab.log_tail()}")
        try:
            if lab.get("/api/status")[0] == 200:
                return lab
        except OSError:
            pass
        time.sleep(0.5)
    stop_lab(lab)
    raise RuntimeError(f"jupyter lab did not answer within {timeout} s:\n{lab.log_tail()}")


def stop_lab(lab: Lab) -> None:
    lab.proc.terminate()
    try:
        lab.proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        lab.proc.kill()
        lab.proc.wait()


def copy_course(dest: Path) -> Path:
    ignore = shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__")
    for folder in ("notebooks", "solutions"):
        shutil.copytree(ROOT / folder, dest / folder, ignore=ignore)
    shutil.copy(ROOT / "nbgrader_config.py", dest)
    return dest



@dataclass
class LessonRun:
    """What the learner saw in a lesson: both notebooks run to the end, the circuit widget
    dragged."""

    name: str
    solution: dict
    student: dict
    widget: dict | None = None  # the first slider dragged: SVG text and readout before and after
    # the last widget's sliders at SMALL_SCREEN: track width, readouts
    sliders: list = field(default_factory=list)
    load: float = 1.0  # the machine's load per core (1-minute average) when the run ended
    shots: dict = field(default_factory=dict)


class Lane:
    """One browser page with JupyterLab open in a workspace of its own, and window.course
    installed."""

    def __init__(self, browser, lab: Lab, name: str):
        self.lab = lab
        self.page = browser.new_page(viewport=VIEWPORT)
        self.errors: list[str] = []  # uncaught JavaScript errors of the page
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.load(f"/lab/workspaces/{name}?reset")

    def load(self, path: str) -> None:
        self.page.goto(self.lab.url(path))
        self.page.wait_for_function("() => window.jupyterapp && window.jupyterapp.started",
                                    timeout=90_000)
        self.page.evaluate("() => window.jupyterapp.restored")
        self.page.evaluate((Path(__file__).parent / "lab.js").read_text())

    def start(self, path: str) -> None:
        """Run > Run All Cells in the notebook at path, once (window.course.start); result() waits
        for it."""
        self.page.evaluate("p => window.course.start(p)", path)

    def result(self, path: str, timeout_s: float = RUN_TIMEOUT_S) -> dict:
        self.page.wait_for_function("p => window.course.runs()[p] && window.course.runs()[p].done",
                                    arg=path, timeout=timeout_s * 1000, polling=500)
        run = self.page.evaluate("p => window.course.runs()[p]", path)
        if "error" in run:
            raise RuntimeError(f"running {path} in JupyterLab failed: {run['error']}")
        return run["result"]

    def open(self, path: str) -> None:
        self.page.evaluate("p => window.course.open(p).then(() => null)", path)

    def scroll_to(self, path: str, index: int) -> None:
        """Bring cell `index` of the notebook at path to the top of the screen (-1: the last
        cell)."""
        self.page.evaluate("([p, i]) => window.course.scrollTo(p, i < 0 ? "
                           "window.course.panels[p].content.widgets.length + i : i)",
                           [path, index])
        self.page.wait_for_timeout(300)

    def close(self, path: str) -> None:
        self.page.evaluate("p => window.course.close(p)", path)

    def close_all(self) -> None:
        self.page.evaluate("() => window.course.closeAll()")

    def cell(self, index: int):
        """The cell at index of the notebook on screen (marked by window.course.scrollTo)."""
        return self.panel().locator(f'[data-course-cell="{index}"]')

    def panel(self):
        """The notebook panel on screen."""
        return self.page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")

    def screenshot(self, name: str, locator=None) -> Path:
        SHOTS.mkdir(parents=True, exist_ok=True)
        path = SHOTS / name
        (locator or self.page).screenshot(path=str(path))
        return path


def first_cell(result: dict, pred) -> int | None:
    return next((c["index"] for c in result["cells"] if pred(c)), None)


def drag_first_slider(lane: Lane) -> dict | None:
    """Drag the first widget slider of the notebook on screen 30 px to the right, as a learner does
    with the mouse; return the text of the figure's SVG (a circuit, a planner) and the slider's
    readout before and after."""
    panel = lane.panel()
    handles = panel.locator(".widget-slider .noUi-handle")
    if handles.count() == 0:
        return None
    widget = panel.locator(".jp-OutputArea-output .jupyter-widgets.widget-vbox, "
                           ".jp-OutputArea-output .jupyter-widgets.widget-interact").first
    handle = handles.first
    handle.scroll_into_view_if_needed()
    lane.page.wait_for_timeout(300)
    svg = panel.locator(".widget-html svg").first
    readout = panel.locator(".widget-slider .widget-readout").first

    def state():
        return {"svg": svg.inner_html() if svg.count() else "",
                "readout": readout.inner_text() if readout.count() else ""}

    before = state()
    box = handle.bounding_box()
    y = box["y"] + box["height"] / 2
    lane.page.mouse.move(box["x"] + box["width"] / 2, y)
    lane.page.mouse.down()
    lane.page.mouse.move(box["x"] + box["width"] / 2 + 30, y, steps=10)
    lane.page.mouse.up()
    # the kernel recomputes and sends the new figure: wait for it (at most 10 s)
    for _ in range(50):
        lane.page.wait_for_timeout(200)
        after = state()
        if after["svg"] != before["svg"]:
            break
    return {"before": before, "after": after, "widget": widget}


def drag_each_slider_on_a_small_screen(lane: Lane, path: str, index: int, shot: str) -> list[dict]:
    """At SMALL_SCREEN, each slider of the widget in cell `index` of the notebook at path: the width
    of its track in pixels and its readout before and after its handle is dragged 30 px to the
    right. A screenshot of the cell afterwards goes to `shot`."""
    lane.page.set_viewport_size(SMALL_SCREEN)
    try:
        lane.scroll_to(path, index)
        sliders = lane.cell(index).locator(".widget-slider")
        found = []
        for k in range(sliders.count()):
            slider = sliders.nth(k)
            slider.scroll_into_view_if_needed()
            track, handle = (slider.locator(".noUi-target").first,
                             slider.locator(".noUi-handle").first)
            readout = slider.locator(".widget-readout").first
            before, box = readout.inner_text(), handle.bounding_box()
            x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
            lane.page.mouse.move(x, y)
            lane.page.mouse.down()
            lane.page.mouse.move(x + 30, y, steps=10)
            lane.page.mouse.up()
            after = before
            for _ in range(20):
                lane.page.wait_for_timeout(100)
                after = readout.inner_text()
                if after != before:
                    break
            found.append({"width": track.bounding_box()["width"], "before": before, "after": after})
        lane.screenshot(shot, lane.cell(index))
        return found
    finally:
        lane.page.set_viewport_size(VIEWPORT)


def optimise_png(src: Path, dest: Path, width: int) -> None:
    """dest: src scaled down to at most `width` pixels wide, as a 256-colour palette PNG."""
    from PIL import Image

    with Image.open(src) as im:
        im = im.convert("RGB")
        if im.width > width:
            im = im.resize((width, round(im.height * width / im.width)), Image.Resampling.LANCZOS)
        im.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(
            dest, optimize=True)
