"""A class on JupyterHub: `bash course.sh hub` runs this as root to set the class up, then start the
hub.

    bash course.sh hub [--roster students.csv] [--instructor NAME] [--port 8000] [--ip ADDRESS]
                       [--ssl-cert CERT.pem --ssl-key KEY.pem] [--idle-minutes 60]
                       [--learner-memory-mb 2048] [--learner-cpus 1] [--tas ta1,ta2] [--service]

What it does, each step idempotent (run it again after editing the roster):
- Unix accounts: the instructor (a JupyterHub admin) and one learner per roster row (nbgrader's
  student list, id,first_name,last_name,email: the roster `bash course.sh grades lms` reads). A new
  account gets a generated password, printed once and kept in STATE/passwords.csv (root only);
  an existing account keeps its password. Every home is mode 700: learners work there (nbgrader
  fetches into it), apart from the instructor's files, and cannot read each other's.
  (hub/accounts.py)
  Teaching assistants (--tas) get accounts too, with a server like a learner's.
- The course as a hub service for every grader (nbgrader's "one class, multiple graders"): the
  instructor's course served by jupyterhub-singleuser at /services/COURSE/ as the instructor's
  account, which the instructor and the teaching assistants open (hub/jupyterhub_config.py); its
  Nbgrader menu (write_grader_menu) links to its own Formgrader.
- The instructor's course: ~INSTRUCTOR/course (mode 700), a copy of the repository's solutions/ and
  nbgrader_config.py, the roster imported into its gradebook (`nbgrader db student import`);
  ~INSTRUCTOR/.jupyter/nbgrader_config.py loads that configuration, so the instructor's nbgrader
  and Formgrader work on the course from any folder.
- nbgrader's exchange: STATE/exchange, named in STATE/jupyter/nbgrader_config.py, the config folder
  every single-user server gets in JUPYTER_CONFIG_PATH (user_environment). A submission there is
  readable by its learner and the instructor only (course_admin.exchange; the instructor joins
  each learner's own group); collect takes a learner's own folders only, following no link
  (course_admin.exchange.SafeCollect); inbound is sticky: no learner can rename or delete another's
  folder.
- Grading with the full sandbox: one sudo rule (/etc/sudoers.d/backprop-course-*) lets the
  instructor run STATE/rootworker as root, nothing else (allow_full_sandbox;
  course_utils.grader.rootworker).
- The instructor's sources in the repository (SOURCES) lose their permissions for other users.
- configurable-http-proxy (CHP_VERSION) from npm, into STATE/proxy.
Then `jupyterhub -f hub/jupyterhub_config.py` replaces this process (Ctrl-C stops the hub and every
single-user server). STATE is $HUB_STATE, else hub/state in the repository. With --service, it only
writes the systemd unit /etc/systemd/system/backprop-course-hub.service that runs this command with
the same options (each spelled out) at boot and after a failure, enables and starts it.
"""

import argparse
import functools
import hashlib
import json
import os
import pwd
import re
import secrets
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

from accounts import (Accounts, BadInput, as_user, join_groups, make_accounts, read_learners,
                      read_tas, write_private)

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_STATE = ROOT / "hub" / "state"
DEFAULT_ROSTER = ROOT / "hub" / "roster.example.csv"
DEFAULT_INSTRUCTOR = "instructor"
DEFAULT_PORT = 8000
# each learner's processes together (hub/limits.py); lesson 01 open: about 500 MB
DEFAULT_LEARNER_MEMORY_MB = 2048
DEFAULT_LEARNER_CPUS = 1.0         # cores each learner's processes may use together
# jupyterhub-idle-culler stops a server unused for this long (hub/jupyterhub_config.py)
DEFAULT_IDLE_MINUTES = 60
# The hub hears of a learner's activity every 5 minutes (JupyterHub.last_activity_interval, and the
# single-user server's own report), plus a 30 s ping: jupyterhub-idle-culler's README asks for a
# longer timeout than that sum, or it stops servers in use.
MIN_IDLE_MINUTES = 6
CHP_VERSION = "5.3.0"   # configurable-http-proxy, from npm
SUDOERS_DIR = Path("/etc/sudoers.d")
# `bash course.sh hub --service`: the systemd unit that starts the hub at boot
SERVICE = "backprop-course-hub"
UNIT_DIR = Path("/etc/systemd/system")
# exists where systemd is the init (sd_booted's test)
SYSTEMD_RUNNING = Path("/run/systemd/system")
# A path a sudoers rule can name as it is: no space, nothing sudoers would need escaped
# (, : = \ # " and the like).
SUDOERS_PATH = re.compile(r"[A-Za-z0-9_.+/-]+")
# What `COURSE_ROLE=instructor bash course.sh lab` puts first in JUPYTER_CONFIG_PATH: nbgrader's
# instructor tools, which the environment disables for everyone else (course.sh,
# ensure_learner_view).
INSTRUCTOR_CONFIG = Path(sys.prefix) / "etc" / "jupyter-instructor"
# The instructor's sources in the repository (the lessons' solutions, the tests' wrong and second
# answers, the history holding both, screenshots of solved notebooks): closed to other users.
SOURCES = ("solutions", "tests", ".git", "build")


def say(text: str) -> None:
    print(f"[hub] {text}", flush=True)


def state_dir() -> Path:
    """The hub's state folder: $HUB_STATE, else hub/state in the repository."""
    return Path(os.environ.get("HUB_STATE") or DEFAULT_STATE).absolute()


def exchange_dir(state: Path) -> Path:
    return state / "exchange"


def shared_config_dir(state: Path) -> Path:
    """The Jupyter config folder every user's server and nbgrader read (its nbgrader_config.py names
    the exchange)."""
    return state / "jupyter"


@functools.cache
def course_config():
    """The repository's nbgrader_config.py, loaded (the instructor's course starts from a copy)."""
    from traitlets.config.loader import PyFileConfigLoader
    return PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()


def course_id() -> str:
    """The course id of the repository's nbgrader_config.py (the exchange's folder for this
    course)."""
    return course_config().CourseDirectory.course_id


def course_cell_seconds() -> float | None:
    """The limit per cell the repository's nbgrader_config.py sets (None: the grader's default).
    Read from the repository's file, never the instructor's copy: root runs no user's code."""
    config = course_config()
    return config.HardenedExecute.get("cell_seconds") if "HardenedExecute" in config else None


def course_dir(instructor: str) -> Path:
    """The instructor's nbgrader course directory: ~INSTRUCTOR/course."""
    return Path(pwd.getpwnam(instructor).pw_dir) / "course"


def course_path() -> str:
    """Every hub user's PATH, in their server, its kernels and its terminals: the course's
    environment first (nbgrader, python), then the system's folders, sbin included (Debian keeps
    util-linux's pivot_root, which the grader's sandbox runs, in /usr/sbin)."""
    return (f"{Path(sys.prefix) / 'bin'}"
            ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")


def terminal_rc(state: Path) -> Path:
    """What a JupyterLab terminal on the hub runs first (write_shared_config)."""
    return shared_config_dir(state) / "terminal.bashrc"


def user_environment(state: Path, accounts: Accounts, name: str,
                     service: bool = False) -> dict[str, str]:
    """What a user's single-user server (and nbgrader run as that user) gets in its environment:
    the shared config folder, and for the instructor the instructor tools' config first (with
    service, the course's service's: its menu links to its own Formgrader); the exchange, which the
    course's nbgrader_config.py (loaded last, in the instructor's course) reads."""
    paths = [shared_config_dir(state)]
    if name == accounts.instructor:
        paths[:0] = [grader_menu_dir(state, service), INSTRUCTOR_CONFIG]
    env = {"JUPYTER_CONFIG_PATH": os.pathsep.join(str(p) for p in paths),
           # for the course's nbgrader_config.py (the instructor's)
           "COURSE_EXCHANGE": str(exchange_dir(state)),
           "PATH": course_path()}
    if name == accounts.instructor:   # the grader's full sandbox, through sudo (allow_full_sandbox)
        env["COURSE_ROOT_WORKER"] = str(root_worker(state))
    return env


# --- the set-up, step by step ---------------------------------------------------------------------

def make_state(state: Path) -> None:
    """The state folder: root's, searchable by all (learners reach the exchange inside), listable by
    none."""
    state.mkdir(parents=True, exist_ok=True)
    os.chown(state, 0, 0)
    state.chmod(0o711)
    for parent in state.parents:
        if not parent.stat().st_mode & 0o001:
            raise BadInput(f"learners cannot reach the exchange in {state}: "
                           f"{parent} is not searchable by others "
                           f"(choose another HUB_STATE)")


def check_environment() -> None:
    """Every user's JupyterLab, kernels and nbgrader run this environment's Python: BadInput, with
    the fix, when another user (tried as nobody) cannot (a Python installed in root's home, as pyenv
    does)."""
    name = "nobody"
    python = Path(sys.prefix) / "bin" / "python"
    done = as_user(name, [str(python), "-c",
                          "import course_utils, course_admin, nbgrader, jupyterhub"],
                   Path("/"), {"PATH": f"{python.parent}:/usr/bin:/bin"})
    if done.returncode != 0:
        closed = next((str(p) for p in Path(os.path.realpath(python)).parents
                       if not p.stat().st_mode & 0o001), None)
        raise BadInput(f"other users cannot run this environment's Python "
                       f"({os.path.realpath(python)}"
                       f"{f': {closed} is closed to other users' if closed else ''}): "
                       f"make .venv from a Python every user "
                       f"can run, e.g. rm -rf .venv && "
                       f"PYTHON=/usr/bin/python3 bash course.sh setup")


def close_sources() -> list[Path]:
    """Take other users' permissions off the repository's SOURCES; the ones changed."""
    changed = []
    for name in SOURCES:
        path = ROOT / name
        if path.exists() and path.stat().st_mode & 0o007:
            path.chmod(path.stat().st_mode & ~0o007)
            changed.append(path)
    return changed


# The course's folders in the exchange, the instructor's, made before nbgrader's release (which sets
# a mode only on a folder it makes, and fails on one the instructor does not own): outbound
# (releases) and feedback as nbgrader makes them; inbound as nbgrader's 2733 (set-group-id:
# submissions take the instructor's group; anyone may hand in, only the instructor lists it) and
# sticky, so that a folder in it can be renamed or deleted by its owner and the instructor only,
# never by another learner.
COURSE_FOLDERS = {"outbound": 0o755, "inbound": 0o3733, "feedback": 0o711}
# How root opens a folder it changes: a folder, never through a link (os.open fails on one).
FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


def make_exchange(state: Path, instructor: str, course: str) -> None:
    """The exchange (1777, as nbgrader wants it, sticky), and in it the course's folder and its
    COURSE_FOLDERS, made now and owned by the instructor so that no learner can make one first, and
    given their modes again on every run. The instructor can put a link in place of any of these
    (the course's folder is theirs, and theirs in the sticky exchange): each is opened in the one
    above it, never through a link, and changed through its file descriptor; BadInput for one that
    is not a folder."""
    exchange = exchange_dir(state)
    exchange.mkdir(exist_ok=True)
    user = pwd.getpwnam(instructor)
    folders = [os.open(exchange, FOLDER)]   # STATE is root's: nobody else can swap the exchange
    try:
        os.fchmod(folders[0], 0o1777)
        for above, name, mode in [(0, course, 0o755),
                                  *((1, name, mode) for name, mode in COURSE_FOLDERS.items())]:
            path = exchange / course / name if above else exchange / course
            try:
                os.mkdir(name, 0o700, dir_fd=folders[above])
            except FileExistsError:
                pass
            try:
                folders.append(os.open(name, FOLDER, dir_fd=folders[above]))
            except OSError as e:
                raise BadInput(f"{path} is not a folder ({e.strerror}; a link, say): "
                               f"root follows no link there. "
                               f"Remove it and run this again") from None
            os.fchown(folders[-1], user.pw_uid, user.pw_gid)
            os.fchmod(folders[-1], mode)
    finally:
        for fd in folders:
            os.close(fd)


# its server side is off on the hub (write_shared_config)
COURSE_LIST = "@jupyter/nbgrader:course-list"


def write_shared_config(state: Path, course: str, cell_seconds: float | None = None) -> None:
    """STATE/jupyter, every user's first config folder but the instructor's (user_environment):
    nbgrader_config.py names the exchange and the course, sets Validate as grading runs and shows
    learners' text safely in Formgrader and feedback (SafeMarkdown); jupyter_server_config.json
    makes a JupyterLab terminal run terminal.bashrc: the course's PATH, in the server's folder
    (terminal_rc);
    labconfig/page_config.json gives back
    nbgrader's menu, which the environment's learner view hides (course.sh, ensure_learner_view):
    on the hub learners need its Assignment List to fetch and submit, and the menu shows only that,
    the instructor tools' commands being off (they stay so)."""
    exchange = exchange_dir(state)
    config = shared_config_dir(state)
    config.mkdir(exist_ok=True)
    config.chmod(0o755)
    write_private(config / "nbgrader_config.py", (
        '"""Made by `bash course.sh hub` (hub/classroom.py): '
        'read by every hub user\'s nbgrader."""\n'
        "c = get_config()  # noqa: F821\n"
        f"c.Exchange.root = {str(exchange)!r}\n"
        f"c.CourseDirectory.course_id = {course!r}\n"
        "# a submission readable by its learner and the instructor only, not by every user\n"
        'c.ExchangeFactory.submit = "course_admin.exchange.PrivateSubmit"\n'
        "# collect takes a learner's own folders only, follows no link, "
        "skips (and names) what it cannot take\n"
        'c.ExchangeFactory.collect = "course_admin.exchange.SafeCollect"\n'
        "# Validate runs as grading does (the grader's limit per cell), "
        "as in the course's nbgrader_config.py\n"
        + (f"c.HardenedExecute.cell_seconds = {float(cell_seconds)!r}\n"
           if cell_seconds is not None else "") +
        "from course_utils.grader.preprocessors import validate_like_grading\n"
        "validate_like_grading(c)\n"
        "# a learner's text shown as text, never run, in Formgrader and feedback, "
        "as in the course's nbgrader_config.py\n"
        "# (here too: the instructor's copy of it is made once, and may be older)\n"
        "from course_utils.grader.reports import SafeMarkdown\n"
        "c.HTMLExporter.sanitize_html = True\n"
        'c.HTMLExporter.filters = {"markdown2html": SafeMarkdown}\n'), mode=0o644)
    # A JupyterLab terminal: an interactive bash that keeps the course's PATH (jupyter_server would
    # start a login shell, whose /etc/profile drops it) and starts in the server's folder (the
    # instructor's: the course), not the home folder the server was started in.
    write_private(terminal_rc(state), (
        "# Made by `bash course.sh hub` (hub/classroom.py): "
        "every JupyterLab terminal on the hub runs it first.\n"
        "[ -f /etc/bash.bashrc ] && . /etc/bash.bashrc\n"
        '[ -f "$HOME/.bashrc" ] && . "$HOME/.bashrc"\n'
        f'export PATH={shlex.quote(course_path())}:"$PATH"   '
        '# first: nbgrader, the course\'s python, /usr/sbin\n'
        '[ "$PWD" = "$HOME" ] && [ -d "$JUPYTER_SERVER_ROOT" ] && cd "$JUPYTER_SERVER_ROOT"\n'),
        mode=0o644)
    # nbgrader's course list (a learner's page of courses, and Formgrader's list of them) looks for
    # a Formgrader at /services/COURSE on a hub and logs an error each time it finds none where it
    # asks: off for everyone (graders open the course's service from the hub's home page, or the
    # instructor's own Formgrader).
    write_private(config / "jupyter_server_config.json", json.dumps({"ServerApp": {
        "terminado_settings": {"shell_command": ["/bin/bash", "--rcfile", str(terminal_rc(state)),
                                                 "-i"]},
        "jpserver_extensions": {"nbgrader.server_extensions.course_list": False}}},
        indent=1) + "\n", mode=0o644)
    (config / "labconfig").mkdir(exist_ok=True)
    (config / "labconfig").chmod(0o755)
    plugins = {"@jupyter/nbgrader:menu": False, COURSE_LIST: True}
    write_private(config / "labconfig" / "page_config.json",
                  json.dumps({"disabledExtensions": plugins, "lockedExtensions": plugins}) + "\n",
                  mode=0o644)


def grader_menu_dir(state: Path, service: bool = False) -> Path:
    """The first config folder of the instructor's server, or with service of the course's service
    (user_environment; write_grader_menu)."""
    return state / ("service-jupyter" if service else "instructor-jupyter")


def service_prefix() -> str:
    """Where the hub serves the course's service (hub/jupyterhub_config.py): /services/COURSE/, as
    nbgrader names it."""
    return f"/services/{course_id()}/"


def write_grader_menu(state: Path, prefix: str, service: bool = False) -> None:
    """STATE/instructor-jupyter, read first by the instructor's server (prefix /user/INSTRUCTOR/),
    or STATE/service-jupyter, by the course's service (prefix service_prefix()): Formgrader opens
    from the Nbgrader menu in a browser tab of its own. JupyterHub forbids framing a user's server
    (Content-Security-Policy frame-ancestors 'none', against another user's page on the same
    origin), so nbgrader's Formgrader tab in JupyterLab, an iframe, stays blank on a hub; nbgrader's
    documented way is a browser tab of its own. Here nbgrader's menu and iframe plugins are off
    (labconfig/page_config.json) and an Nbgrader menu made from JupyterLab's settings
    (labconfig/default_setting_overrides.json: defaults, which the instructor's own menu settings,
    if they save any, replace) holds the Assignment List, Formgrader and Autograde a lesson
    (course_utils.grader.autograde_lesson: every submission of a lesson in one press), which
    JupyterLab's help:open opens in a new browser tab, each under prefix. Formgrader's links to
    files there reach the JupyterLab it came from through the hub's 404 page (hub/templates)."""
    folder = grader_menu_dir(state, service)
    for d in (folder, folder / "labconfig"):
        d.mkdir(exist_ok=True)
        d.chmod(0o755)
    off = {"@jupyter/nbgrader:menu": True, "@jupyter/nbgrader:formgrader": True, COURSE_LIST: True}
    write_private(folder / "labconfig" / "page_config.json",
                  json.dumps({"disabledExtensions": off, "lockedExtensions": off}) + "\n",
                  mode=0o644)
    menu = {"id": "jp-mainmenu-nbgrader", "label": "Nbgrader", "rank": 1000, "items": [
        {"command": "nbgrader:open-assignment-list"},
        {"command": "help:open", "args": {"url": f"{prefix}formgrader", "text": "Formgrader",
                                          "newBrowserTab": True}},
        {"command": "help:open", "args": {"url": f"{prefix}course/autograde",
                                          "text": "Autograde a lesson",
                                          "newBrowserTab": True}}]}
    write_private(folder / "labconfig" / "default_setting_overrides.json", json.dumps(
        {"@jupyterlab/mainmenu-extension:plugin": {"menus": [menu]}}, indent=1) + "\n", mode=0o644)


def root_worker(state: Path) -> Path:
    """The one command the instructor may run as root (allow_full_sandbox): STATE/rootworker."""
    return state / "rootworker"


def sudoers_file(state: Path) -> Path:
    """This class's sudo rule (a name sudo reads: no dot), one per state folder."""
    return SUDOERS_DIR / f"backprop-course-{hashlib.sha256(str(state).encode()).hexdigest()[:12]}"


def check_root_only(path: Path, tree: bool = False) -> None:
    """BadInput unless path and every folder above it can be changed by root only (owned by root and
    not writable by others, or sticky like /tmp), and with tree everything in it too (os.walk,
    following no link; a link to a file is checked by its target): what root runs for the
    instructor must stay root's."""
    def refuse(p, why: str = "can be changed by a user other than root") -> None:
        raise BadInput(f"{p} {why}, and root runs {path} for the instructor's grading: "
                       f"make it root's and not "
                       f"writable by others (chmod go-w)")
    for p in [path, *path.parents]:
        info = p.lstat()
        if info.st_uid != 0 or (info.st_mode & 0o022 and not (p != path and info.st_mode & 0o1000)):
            refuse(p)
    for folder, folders, files in os.walk(path) if tree else ():
        for name in folders + files:
            p = os.path.join(folder, name)
            info = os.lstat(p)
            if stat.S_ISLNK(info.st_mode):
                if not os.path.isfile(p):
                    refuse(p, "is a link to a folder or to nothing (not checked)")
                check_root_only(Path(os.path.realpath(p)))
            elif info.st_uid != 0 or info.st_mode & 0o022:
                refuse(p)


def allow_full_sandbox(state: Path, instructor: str) -> Path:
    """Grading on the hub with the full sandbox (the learner's own uid, memory and CPU cgroups)
    without giving the instructor root: one sudo rule lets the instructor run STATE/rootworker as
    root, with no arguments and no password; it runs course_utils.grader.rootworker in this
    environment's Python in isolated mode (-I), which serves one sandboxed learner's worker (or the
    instructor's own reference run, as them) to the instructor's grader.
    Everything root runs there must be root's alone (check_root_only). Returns the rule's file."""
    script = root_worker(state)
    if not SUDOERS_PATH.fullmatch(str(script)):
        raise BadInput(f"{str(script)!r}: the grading rule for sudo names it, "
                       f"and can name only a path of letters, digits "
                       f"and _ . + - / (no space): choose another HUB_STATE")
    if shutil.which("sudo") is None or shutil.which("visudo") is None:
        raise BadInput("sudo is missing (Debian: apt-get install sudo): "
                       "the instructor grades with the full sandbox through it")
    python = Path(sys.prefix) / "bin" / "python"
    import course_utils
    for path in (Path(os.path.realpath(python)), Path(sys.prefix),
                 *Path(sys.prefix).glob("pyvenv.cfg")):
        check_root_only(path)
    # and everything in what root imports and runs from, files too (a writable file in a root-only
    # folder can be written): 47,000 files and folders in a venv with torch, 0.3 to 0.8 s on two
    # busy cores
    for path in (Path(sys.prefix) / "bin", *Path(sys.prefix).glob("lib/*/site-packages"),
                 Path(course_utils.__file__).resolve().parent):
        check_root_only(path, tree=True)
    write_private(script, "#!/bin/sh\n# Made by `bash course.sh hub` "
                          "(hub/classroom.py, allow_full_sandbox): run as root by the\n"
                          "# instructor's grader through sudo; "
                          "serves one sandboxed learner's worker, "
                          "or the reference run as the caller.\n"
                          f"exec {shlex.quote(str(python))} -I -m course_utils.grader.rootworker\n",
                  mode=0o755)
    check_root_only(script)
    rule = sudoers_file(state)
    text = (f"# Made by `bash course.sh hub` for the class in {state}: "
            f"the instructor grades with the full sandbox\n"
            f'{instructor} ALL=(root) NOPASSWD: {script} ""\n')
    # sudo skips names with a dot: checked before it counts
    draft = SUDOERS_DIR / f".{rule.name}.new"
    write_private(draft, text, mode=0o440)
    done = subprocess.run(["visudo", "-cqf", str(draft)], capture_output=True, text=True)
    if done.returncode != 0:
        draft.unlink()
        raise BadInput(f"visudo refused the grading rule: "
                       f"{(done.stdout + done.stderr).strip() or 'no output'}")
    os.replace(draft, rule)
    return rule


# What the instructor runs to fill their course (make_course): $1 root's staged copy, $2 the course.
FILL_COURSE = """set -e
mkdir -p -m 700 "$2" && chmod 700 "$2"
[ -e "$2/solutions" ] || cp -R "$1/solutions" "$2/solutions"
[ -e "$2/nbgrader_config.py" ] || cp "$1/nbgrader_config.py" "$2/"
cp "$1/roster.csv" "$2/roster.csv"
mkdir -p "$HOME/.jupyter"
cp "$1/jupyter_nbgrader_config.py" "$HOME/.jupyter/nbgrader_config.py"
cd "$2"
exec nbgrader db student import roster.csv
"""


def make_course(state: Path, accounts: Accounts, roster: Path) -> Path:
    """~INSTRUCTOR/course: solutions/ and nbgrader_config.py copied once (the instructor's edits are
    kept on later runs), mode 700; the roster imported into its gradebook. The home is the
    instructor's, who can put a link anywhere in it: root writes nothing there, but copies the files
    into a folder of its own (in STATE), gives that copy to the instructor, and the instructor puts
    it in place (FILL_COURSE), so that any link there is followed with the instructor's rights
    alone."""
    course = course_dir(accounts.instructor)
    user = pwd.getpwnam(accounts.instructor)
    # root's, mode 700 until all is the instructor's
    tmp = Path(tempfile.mkdtemp(prefix="course-", dir=state))
    try:
        staged = tmp / "course"
        shutil.copytree(ROOT / "solutions", staged / "solutions",
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        shutil.copy(ROOT / "nbgrader_config.py", staged)
        shutil.copy(roster, staged / "roster.csv")
        # nbgrader run by the instructor anywhere, Formgrader included (it reads the config of its
        # server's working folder, the home), works on this course with the course's configuration.
        (staged / "jupyter_nbgrader_config.py").write_text(
            '"""Made by `bash course.sh hub` (hub/classroom.py): '
            'this account\'s nbgrader works on its course."""\n'
            f"load_subconfig({str(course / 'nbgrader_config.py')!r})  # noqa: F821\n")
        for path in [staged, *staged.rglob("*")]:
            os.chown(path, user.pw_uid, user.pw_gid, follow_symlinks=False)
        tmp.chmod(0o711)
        done = as_user(accounts.instructor,
                       ["sh", "-c", FILL_COURSE, "sh", str(staged), str(course)], Path(user.pw_dir),
                       user_environment(state, accounts, accounts.instructor))
    finally:
        # following no link (shutil.rmtree.avoids_symlink_attacks)
        shutil.rmtree(tmp, ignore_errors=True)
    if done.returncode != 0:
        raise BadInput(f"{accounts.instructor} could not fill {course} "
                       f"or import the roster into its gradebook.db: "
                       f"{(done.stderr.strip().splitlines() or ['no output'])[-1]}")
    return course


def install_proxy(state: Path) -> Path:
    """configurable-http-proxy CHP_VERSION, installed with npm into STATE/proxy (never globally)."""
    prefix = state / "proxy"
    exe = prefix / "node_modules" / ".bin" / "configurable-http-proxy"
    installed = prefix / "node_modules" / "configurable-http-proxy" / "package.json"
    if not (exe.exists() and installed.exists()
            and json.loads(installed.read_text())["version"] == CHP_VERSION):
        say(f"installing configurable-http-proxy {CHP_VERSION} from npm into {prefix}")
        done = subprocess.run(["npm", "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
                               "--omit=dev", f"configurable-http-proxy@{CHP_VERSION}"],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise BadInput(f"npm could not install configurable-http-proxy {CHP_VERSION}: "
                           f"{(done.stderr.strip().splitlines() or ['no output'])[-1]}")
    return exe


def make_secrets(state: Path) -> None:
    """The secret the hub and its proxy share, STATE/proxy_token, and the hub's database (tokens,
    sessions), made empty for JupyterHub to fill: both root only."""
    if not (state / "proxy_token").exists():
        write_private(state / "proxy_token", secrets.token_hex(32) + "\n")
    database = state / "jupyterhub.sqlite"
    if not database.exists():
        write_private(database, "")
    database.chmod(0o600)


# --- the command ----------------------------------------------------------------------------------

class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, like every other bad input
        raise BadInput(message)


def parse(argv: list[str]) -> argparse.Namespace:
    p = _Parser(prog="bash course.sh hub",
                description="Set up the class's accounts and start JupyterHub.")
    p.add_argument("--roster", type=Path,
                   default=Path(os.environ.get("HUB_ROSTER") or DEFAULT_ROSTER),
                   help="learners, in nbgrader's student list format id,first_name,last_name,email "
                        "($HUB_ROSTER; default: hub/roster.example.csv)")
    p.add_argument("--instructor", default=os.environ.get("HUB_INSTRUCTOR") or DEFAULT_INSTRUCTOR,
                   help="the instructor's account name ($HUB_INSTRUCTOR; default: instructor)")
    p.add_argument("--port", type=int,
                   default=os.environ.get("HUB_PORT") or str(DEFAULT_PORT),  # argparse converts it
                   help="the port the hub listens on ($HUB_PORT; default: 8000)")
    p.add_argument("--ip", default=os.environ.get("HUB_IP", ""),
                   help="the address the hub listens on ($HUB_IP; default: all)")
    p.add_argument("--ssl-cert", type=Path, default=os.environ.get("HUB_SSL_CERT") or None,
                   help="your certificate (PEM; with --ssl-key): "
                        "the hub serves HTTPS ($HUB_SSL_CERT)")
    p.add_argument("--ssl-key", type=Path, default=os.environ.get("HUB_SSL_KEY") or None,
                   help="its private key (PEM) ($HUB_SSL_KEY)")
    p.add_argument("--idle-minutes", type=int,
                   default=os.environ.get("HUB_IDLE_MINUTES") or str(DEFAULT_IDLE_MINUTES),
                   help="a learner's JupyterLab unused this long is stopped, their work kept "
                        f"(jupyterhub-idle-culler; $HUB_IDLE_MINUTES; "
                        f"default: {DEFAULT_IDLE_MINUTES}, at least "
                        f"{MIN_IDLE_MINUTES}; 0: never)")
    p.add_argument("--learner-memory-mb", type=int,
                   default=(os.environ.get("HUB_LEARNER_MEMORY_MB")
                            or str(DEFAULT_LEARNER_MEMORY_MB)),
                   help="memory of one learner's JupyterLab, kernels and terminals together; "
                        "past it the largest "
                        f"of their processes is ended ($HUB_LEARNER_MEMORY_MB; "
                        f"default: {DEFAULT_LEARNER_MEMORY_MB}; "
                        "0: no memory, process or CPU limit)")
    p.add_argument("--learner-cpus", type=float,
                   default=os.environ.get("HUB_LEARNER_CPUS") or str(DEFAULT_LEARNER_CPUS),
                   help=f"cores one learner's processes may use together ($HUB_LEARNER_CPUS; "
                        f"default: {DEFAULT_LEARNER_CPUS:g})")
    p.add_argument("--tas", default=os.environ.get("HUB_TAS", ""),
                   help="teaching assistants' account names, comma-separated: "
                        "they grade the course with the instructor "
                        "in its service at /services/COURSE/ "
                        "(as the instructor's account; $HUB_TAS; default: none)")
    p.add_argument("--service", action="store_true",
                   help=f"install the hub, with these options, as the systemd service {SERVICE} "
                        "that starts at boot "
                        "and after a failure, and start it now (its log: journalctl -u "
                        + SERVICE + ")")
    args = p.parse_args(argv)
    if args.learner_memory_mb < 0 or 0 < args.learner_memory_mb < 256:
        raise BadInput(f"--learner-memory-mb {args.learner_memory_mb}: give 256 or more "
                       "(a JupyterLab and a kernel "
                       "need about 500), or 0 for no limit")
    if not 0.01 <= args.learner_cpus <= (os.cpu_count() or 1) * 64:
        raise BadInput(f"--learner-cpus {args.learner_cpus:g}: give a number of cores from 0.01 up "
                       f"(0.5: half a core)")
    if not 0 < args.port < 65536:
        raise BadInput(f"--port {args.port} is not a port number")
    if args.idle_minutes < 0:
        raise BadInput(f"--idle-minutes {args.idle_minutes} is below 0 "
                       f"(0: never stop an idle server)")
    if 0 < args.idle_minutes < MIN_IDLE_MINUTES:
        raise BadInput(f"--idle-minutes {args.idle_minutes}: give {MIN_IDLE_MINUTES} or more "
                       "(the hub hears of a learner's "
                       "work only every 5 minutes, so a shorter time would stop servers in use), "
                       "or 0 for never")
    if (args.ssl_cert is None) != (args.ssl_key is None):
        raise BadInput("--ssl-cert and --ssl-key go together: the certificate and its private key")
    for option, path in (("--ssl-cert", args.ssl_cert), ("--ssl-key", args.ssl_key)):
        if path is not None and not path.is_file():
            raise BadInput(f"{option} {path}: no such file")
    if args.ssl_cert is not None:
        args.ssl_cert, args.ssl_key = args.ssl_cert.resolve(), args.ssl_key.resolve()
    args.roster = args.roster.absolute()
    return args


# --- the hub as a systemd service -----------------------------------------------------------------

def _unit_word(word: str, command: bool = True) -> str:
    """One word of a unit's ExecStart= (command) or Environment=, as systemd reads it back:
    double-quoted, systemd's specifiers (%) doubled, and in a command its variables ($) too."""
    word = word.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    return '"' + (word.replace("$", "$$") if command else word) + '"'


def hub_options(args: argparse.Namespace) -> list[str]:
    """The options of `bash course.sh hub` that give these args, each spelled out (not left to
    $HUB_*)."""
    options = ["--roster", str(args.roster), "--instructor", args.instructor,
               "--port", str(args.port),
               "--ip", args.ip, "--idle-minutes", str(args.idle_minutes),
               "--learner-memory-mb", str(args.learner_memory_mb),
               "--learner-cpus", f"{args.learner_cpus:g}",
               "--tas", args.tas]
    if args.ssl_cert is not None:
        options += ["--ssl-cert", str(args.ssl_cert), "--ssl-key", str(args.ssl_key)]
    return options


def service_unit(args: argparse.Namespace, state: Path) -> str:
    """The systemd unit that runs `bash course.sh hub` with args' options (as root,
    HUB_STATE=state): at boot, and again 10 s after it ended with an error. The roster is read again
    at each start."""
    command = " ".join(_unit_word(w) for w in ["/bin/bash", str(ROOT / "course.sh"), "hub",
                                               *hub_options(args)])
    return ("[Unit]\nDescription=Backprop, Autograd and Bigger Batches: the class's JupyterHub\n"
            "After=network-online.target\nWants=network-online.target\n\n"
            f"[Service]\nType=simple\n"
            f"Environment={_unit_word('HUB_STATE=' + str(state), command=False)}\n"
            f"Environment=HOME=/root\nExecStart={command}\n"
            "Restart=on-failure\nRestartSec=10\n"
            "# the hub stops every learner's server as it stops (their work stays in their homes)\n"
            "KillMode=mixed\nTimeoutStopSec=90\n\n"
            "[Install]\nWantedBy=multi-user.target\n")


def install_service(args: argparse.Namespace, state: Path) -> Path:
    """Write the unit (service_unit), enable it and (re)start it: BadInput where systemd is not the
    init (a container), before anything is written."""
    if not SYSTEMD_RUNNING.is_dir() or shutil.which("systemctl") is None:
        raise BadInput(f"systemd does not run on this machine ({SYSTEMD_RUNNING} is missing: "
                       "a container or another "
                       "init), so the hub cannot be its service here: "
                       "start it with `bash course.sh hub` from your "
                       "init's own service manager, "
                       "or in tmux or screen to keep it past your login")
    unit = UNIT_DIR / f"{SERVICE}.service"
    write_private(unit, service_unit(args, state), mode=0o644)
    for command in (["systemctl", "daemon-reload"], ["systemctl", "enable", f"{SERVICE}.service"],
                    ["systemctl", "restart", f"{SERVICE}.service"]):
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise BadInput(f"{' '.join(command)} failed: "
                           f"{(done.stderr or done.stdout).strip()[-300:]}")
    return unit


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    if os.geteuid() != 0:
        raise BadInput("the hub creates Unix accounts and serves every user as themselves: "
                       "run it as root")
    for tool in ("useradd", "usermod", "chpasswd", "runuser", "npm", "sudo"):
        if shutil.which(tool) is None:
            package = {"npm": "nodejs npm", "sudo": "sudo"}.get(tool, "passwd util-linux")
            raise BadInput(f"{tool} is missing (Debian: apt-get install {package})")
    state = state_dir()
    learners = read_learners(args.roster, args.instructor)      # every check before any change
    tas = read_tas(args.tas, args.instructor, learners)
    if args.service:
        unit = install_service(args, state)
        say(f"the hub is the systemd service {SERVICE} ({unit}): "
            f"it starts at boot and after a failure, set up as "
            f"this command would; its log: journalctl -u {SERVICE} -f; "
            f"stop it for good: systemctl disable --now {SERVICE}")
        return 0
    check_environment()
    make_state(state)
    say(f"state folder: {state} (HUB_STATE): "
        f"jupyterhub.sqlite, secrets, passwords.csv, exchange/, proxy/")
    accounts = Accounts(args.instructor, learners, tas)
    for name, password in make_accounts(state, [accounts.instructor, *learners, *tas]).items():
        say(f"new account {name}, password {password} "
            f"(shown once; kept in {state / 'passwords.csv'}, root only)")
    join_groups(accounts)
    for path in close_sources():
        say(f"closed {path} to other users (chmod o-rwx): "
            f"learners must not read the instructor's sources")
    make_exchange(state, accounts.instructor, course_id())
    say(f"the instructor grades with the full sandbox: "
        f"{allow_full_sandbox(state, accounts.instructor)} lets them run "
        f"{root_worker(state)} as root (course_utils.grader.rootworker)")
    write_shared_config(state, course_id(), course_cell_seconds())
    write_grader_menu(state, f"/user/{accounts.instructor}/")
    write_grader_menu(state, service_prefix(), service=True)
    course = make_course(state, accounts, args.roster)
    install_proxy(state)
    make_secrets(state)
    accounts.write(state)
    say(f"instructor (JupyterHub admin): {accounts.instructor}, course directory {course}")
    say(f"learners: {', '.join(learners) or 'none'} (from {args.roster})")
    say(f"the course for every grader "
        f"(the instructor{', teaching assistants ' + ', '.join(tas) if tas else ''}): "
        f"{service_prefix()}lab, served as {accounts.instructor} (the hub's home page: Services)"
        f"""{'; a teaching assistant works there as ' + accounts.instructor
             + ': trust them as that account (docs/hub.md)' if tas else ''}""")
    say(f"starting JupyterHub on "
        f"{'https' if args.ssl_cert else 'http'}://{args.ip or '0.0.0.0'}:{args.port}/ "
        "(Ctrl-C stops it and every server)")
    os.chdir(state)   # JupyterHub and its proxy write their pid files and logs where they start
    env = {**os.environ, "HUB_STATE": str(state), "HUB_PORT": str(args.port), "HUB_IP": args.ip,
           "HUB_IDLE_MINUTES": str(args.idle_minutes),
           "HUB_LEARNER_MEMORY_MB": str(args.learner_memory_mb),
           "HUB_LEARNER_CPUS": str(args.learner_cpus),
           "HUB_SSL_CERT": str(args.ssl_cert or ""), "HUB_SSL_KEY": str(args.ssl_key or "")}
    jupyterhub = str(Path(sys.prefix) / "bin" / "jupyterhub")
    os.execve(jupyterhub, [jupyterhub, "-f", str(ROOT / "hub" / "jupyterhub_config.py")], env)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BadInput as e:
        print(f"[hub] {e}", file=sys.stderr, flush=True)
        sys.exit(2)
