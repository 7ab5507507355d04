"""Driving a class on JupyterHub from outside, as tests/hub/test_hub.py and benchmarks/hub_class.py
do: `class_hub` starts `bash course.sh hub` as an instructor does (as root, a roster of learners
with unique account names, a free port of 127.0.0.1, a state folder of its own) and, at its end,
stops it and removes the accounts (userdel -r); `Hub` makes requests as a user with their token,
starts their servers, types into their JupyterLab terminals. No pytest here: the benchmark uses it
too.
"""

import asyncio
import contextlib
import json
import os
import pwd
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "hub"))
sys.path.insert(0, str(ROOT / "tests" / "browser"))
import classroom
from browser_lab import free_port

LESSON = "01-circuits"
# each learner's memory limit in the tests (course.sh hub --learner-memory-mb): a lab and a
# kernel fit
LEARNER_MB = 1024
START_S = 300   # course.sh hub: the set-up (already done: seconds), accounts, npm, the hub's start


def why_not(who: str = "the hub test",
            tools: tuple = ("npm", "useradd", "userdel", "runuser")) -> str | None:
    """Why `who` (a test that makes Unix accounts, the hub's or the exchange's) cannot run here (one
    line), or None."""
    if os.geteuid() != 0:
        return f"{who} needs root: it creates Unix accounts (bash course.sh hub runs as root)"
    for tool in tools:
        if shutil.which(tool) is None:
            return (f"{who} needs {tool} (Debian: apt-get install "
                    f"{'nodejs npm' if tool == 'npm' else 'passwd util-linux'})")
    probe = subprocess.run(["runuser", "-u", "nobody", "--", sys.executable, "-c",
                            "import course_utils"],
                           cwd="/", capture_output=True, text=True)
    if probe.returncode != 0:
        return (f"other users cannot run this environment's Python "
                f"({os.path.realpath(sys.executable)}), so "
                f"bash course.sh hub refuses to start: make .venv with PYTHON=/usr/bin/python3")
    return None


@dataclass
class Hub:
    """The running hub: its URL, state folder, accounts and log; requests as a user, with their
    token."""

    url: str
    state: Path
    accounts: classroom.Accounts
    log: Path
    tokens: dict = field(default_factory=dict)
    proc: subprocess.Popen | None = None
    # restart(): the hub stopped and started again on the same state folder (class_hub)
    restart: object = None
    lesson: str = LESSON      # the lesson the class works on (assignments())

    def token(self, name: str) -> str:
        """An API token of `name`, made as an administrator makes one (`jupyterhub token NAME`)."""
        if name not in self.tokens:
            made = subprocess.run([str(Path(sys.prefix) / "bin" / "jupyterhub"), "token", name,
                                   "-f", str(ROOT / "hub" / "jupyterhub_config.py")],
                                  cwd=self.state, env={**os.environ, "HUB_STATE": str(self.state)},
                                  capture_output=True, text=True, timeout=120)
            assert made.returncode == 0, made.stderr[-2000:]
            self.tokens[name] = made.stdout.strip().splitlines()[-1]
        return self.tokens[name]

    def request(self, name: str, method: str, path: str, data: dict | None = None,
                form: bool = False, timeout: float = 300) -> tuple[int, object]:
        """`method` url+path as user `name` (their token): (status, the JSON answer or the text)."""
        body, headers = None, {"Authorization": f"token {self.token(name)}"}
        if data is not None and form:
            body, headers["Content-Type"] = (urllib.parse.urlencode(data).encode(),
                                             "application/x-www-form-urlencoded")
        elif data is not None:
            body, headers["Content-Type"] = json.dumps(data).encode(), "application/json"
        req = urllib.request.Request(self.url + path, data=body, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                status, text = r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            status, text = e.code, e.read().decode(errors="replace")
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text

    def start_server(self, name: str) -> None:
        status, answer = self.request(name, "POST", f"/hub/api/users/{name}/server")
        assert status in (201, 202, 400), (status, answer)   # 400: already running

    def wait_for_server(self, name: str, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status, user = self.request(name, "GET", f"/hub/api/users/{name}")
            if status == 200 and (user.get("servers", {}).get("") or {}).get("ready"):
                return
            time.sleep(1)
        raise AssertionError(f"{name}'s server did not start in {timeout} s:\n{self.log_tail()}")

    def assignments(self, name: str, action: str) -> dict:
        """POST /user/NAME/assignments/ACTION (fetch, submit, fetch_feedback) of the lesson, as the
        Assignments panel does."""
        status, answer = self.request(name, "POST", f"/user/{name}/assignments/{action}",
                                      {"course_id": classroom.course_id(),
                                       "assignment_id": self.lesson}, form=True)
        assert status == 200 and isinstance(answer, dict) and answer.get("success"), (
            action, status, answer)
        return answer

    def terminal(self, name: str, command: str, timeout: float = 600,
                 server: str | None = None) -> tuple[int, str]:
        """`command` typed into a new JupyterLab terminal of `name`'s server (or of the JupyterLab
        at the path `server`, the course's service say), as its Terminal tab does (the terminals
        API, then the terminal's websocket): (its exit status, what the terminal showed)."""
        server = server or f"/user/{name}/"
        # the file browser's root
        status, model = self.request(name, "POST", f"{server}api/terminals", {"cwd": ""})
        assert status == 200, (status, model)
        # typed split in two, so only the shell's answer holds it whole
        mark = secrets.token_hex(6)
        url = f"ws{self.url[4:]}{server}terminals/websocket/{model['name']}"

        async def talk() -> tuple[int, str]:
            from tornado.httpclient import HTTPRequest
            from tornado.websocket import websocket_connect
            ws = await websocket_connect(HTTPRequest(
                url, headers={"Authorization": f"token {self.token(name)}"}))
            try:
                await ws.write_message(json.dumps(
                    ["stdin", f'{command}; echo "{mark[:6]}""{mark[6:]} $?"\r']))
                shown = ""
                while not (found := re.search(mark + r" (\d+)", shown)):
                    message = await asyncio.wait_for(ws.read_message(), timeout)
                    assert message is not None, f"the terminal closed:\n{shown[-3000:]}"
                    kind, *rest = json.loads(message)
                    shown += rest[0] if kind == "stdout" else ""
                return int(found.group(1)), shown
            finally:
                ws.close()
        try:
            return asyncio.run(talk())
        finally:
            self.request(name, "DELETE", f"{server}api/terminals/{model['name']}")

    def instructor(self, *args: str) -> str:
        """`nbgrader ARGS` as the instructor types it in a JupyterLab terminal of their server
        (docs/hub.md's path)."""
        code, shown = self.terminal(self.accounts.instructor, shlex.join(["nbgrader", *args]))
        assert code == 0, (f"nbgrader {' '.join(args)} in {self.accounts.instructor}'s terminal "
                           f"exited {code}:\n{shown[-6000:]}")
        return shown

    def logs_in(self, name: str) -> bool:
        """Whether `name` logs in through the hub's login form with their password
        (STATE/passwords.csv), as a browser does (the form's XSRF token and cookie): True when the
        hub gives them its login cookie."""
        import http.cookiejar
        passwords = dict(line.split(",", 1) for line in
                         (self.state / "passwords.csv").read_text().splitlines()[1:])
        # a login's redirect is not followed (no server started)
        class Stay(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args, **kwargs):
                return None
        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar), Stay())
        with opener.open(self.url + "/hub/login", timeout=60) as r:
            xsrf = re.search(r'name="_xsrf" value="([^"]+)"', r.read().decode()).group(1)
        form = urllib.parse.urlencode({"username": name, "password": passwords[name],
                                       "_xsrf": xsrf}).encode()
        try:
            opener.open(urllib.request.Request(self.url + "/hub/login", data=form, method="POST"),
                        timeout=120).read()
        except urllib.error.HTTPError:
            pass   # refused (403), or the redirect that follows a login (302, its cookie kept)
        return any(cookie.name == "jupyterhub-hub-login" for cookie in jar)

    def log_tail(self, n: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])


def stop(proc: subprocess.Popen) -> None:
    """Stop the hub as Ctrl-C does (it stops the proxy and every single-user server), then whatever
    is left of its group."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def remove_account(name: str) -> None:
    """End the processes the test made run as `name` (by id), then userdel -r."""
    try:
        uid = pwd.getpwnam(name).pw_uid
    except KeyError:
        return
    left = subprocess.run(["pgrep", "-u", str(uid)], capture_output=True, text=True).stdout.split()
    for pid in left:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass
    time.sleep(0.5 if left else 0)
    subprocess.run(["userdel", "-r", name], capture_output=True)


def start(command: list[str], env: dict, made: "Hub") -> subprocess.Popen:
    """Run `bash course.sh hub ...` (the set-up, then the hub) and wait until the hub answers."""
    with open(made.log, "a") as out:
        proc = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    deadline = time.monotonic() + START_S
    try:
        while True:
            assert proc.poll() is None, (f"course.sh hub exited ({proc.returncode}):\n"
                                         f"{made.log_tail()}")
            assert time.monotonic() < deadline, (f"the hub did not answer in {START_S} s:\n"
                                                 f"{made.log_tail()}")
            try:
                with urllib.request.urlopen(made.url + "/hub/api/", timeout=5) as r:
                    if r.status == 200:
                        return proc
            except OSError:
                time.sleep(1)
    except BaseException:   # a hub that did not come up is stopped here: the caller never got it
        stop(proc)
        raise


def learner_names(prefix: str, count: int) -> list[str]:
    """Account names of `count` learners: PREFIXa ... PREFIXh, or PREFIXs00, PREFIXs01, ... for more
    than 8 (PREFIXi is the instructor)."""
    return [f"{prefix}{chr(97 + i)}" if count <= 8 else f"{prefix}s{i:02d}" for i in range(count)]


@contextlib.contextmanager
def class_hub(learners: int = 3, learner_mb: int = LEARNER_MB, options: tuple = (), tas: int = 0):
    """with class_hub(...) as hub: `bash course.sh hub` for an instructor, `learners` learners and
    `tas` teaching assistants (PREFIXt0, ...), made up for it (unique names), with `options` added
    to its command line; always stopped, and the accounts, the sudo rule and the state folder
    removed, the repository's permissions put back. hub.restart(options) starts it again with other
    options (the same by default)."""
    prefix = "bbt" + secrets.token_hex(3)
    accounts = classroom.Accounts(f"{prefix}i", learner_names(prefix, learners),
                                  [f"{prefix}t{i}" for i in range(tas)])
    tmp = Path(tempfile.mkdtemp(prefix="bbt-hub-"))
    tmp.chmod(0o711)   # learners reach the exchange in tmp/state; nothing here is listable
    roster = tmp / "roster.csv"
    roster.write_text("id,first_name,last_name,email\n" +
                      "".join(f"{n},Learner,{n[len(prefix):].upper()},{n}@example.org\n"
                              for n in accounts.learners))
    # course.sh hub closes the repository's sources to other users; the checkout is left as it was
    modes = {ROOT / n: (ROOT / n).stat().st_mode for n in classroom.SOURCES if (ROOT / n).exists()}
    port = free_port()
    command = ["bash", str(ROOT / "course.sh"), "hub", "--roster", str(roster),
               "--instructor", accounts.instructor,
               "--port", str(port), "--ip", "127.0.0.1", "--learner-memory-mb", str(learner_mb),
               "--tas", ",".join(accounts.tas)]
    env = {**os.environ, "HUB_STATE": str(tmp / "state")}
    made = Hub(f"http://127.0.0.1:{port}", tmp / "state", accounts, tmp / "hub.log")
    try:
        made.proc = start(command + list(options), env, made)

        def restart(again: tuple = options):
            """Stop the hub as its service's restart (or a reboot) does, then start the command
            again (with the options `again`: the same by default)."""
            stop(made.proc)
            made.proc = start(command + list(again), env, made)
        made.restart = restart
        yield made
    finally:
        if made.proc is not None:
            stop(made.proc)
        for name in [accounts.instructor, *accounts.learners, *accounts.tas]:
            remove_account(name)
        classroom.sudoers_file(tmp / "state").unlink(missing_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
        for path, mode in modes.items():
            path.chmod(mode)
