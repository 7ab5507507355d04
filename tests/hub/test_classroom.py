"""hub/classroom.py's steps run as root (`bash course.sh hub`) against an instructor who puts links
where root works: root must follow none of them.

- make_exchange: the instructor owns the exchange's course folder (and it is theirs in the sticky
  exchange), so they can put a link, or a file, in place of it or of inbound: BadInput naming it,
  and the link's target (a root-owned scratch folder, standing for /etc) keeps its mode and owner.
  The instructor here is the user nobody (no account made).
- make_course: the instructor's home is theirs: links as ~/course, ~/.jupyter, ~/course/solutions
  or ~/course/roster.csv, to a root-owned scratch folder, leave it as it was; a first run copies the
  course, keeping what the instructor has. One account made (useradd); two nbgrader runs, about 5 s
  each on two busy cores, most of the time.
- the checks of the set-up's input: the shared configuration's safe HTML, a state path sudo cannot
  name, and check_root_only over a whole tree.
The tests that change owners need root (as `bash course.sh hub`), else they are skipped with the
reason.
"""

import json
import os
import pwd
import re
import secrets
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "hub"))
import classroom

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
# The course's configuration as far as `nbgrader db student import` goes (the repository's imports
# the grader and nbconvert's exporters, which would make each nbgrader command slower)
COURSE_CONFIG = """import os
c = get_config()
c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.source_directory = "solutions"
"""
ROSTER = ("id,first_name,last_name,email\nzq_ada,Ada,L,ada@example.org\n"
          "zq_alan,Alan,T,alan@example.org\n")


def needs_root(*tools: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("root changes owners here, as `bash course.sh hub` does: run as root")
    for tool in tools:
        if shutil.which(tool) is None:
            pytest.skip(f"needs {tool} (Debian: apt-get install passwd util-linux)")


def as_user(command: list[str], user: str | None = None) -> subprocess.CompletedProcess:
    """A command as the user nobody, or as `user` (runuser)."""
    prefix = ["runuser", "-u", user, "--"] if user else NOBODY
    return subprocess.run([*prefix, *command], cwd="/", capture_output=True, text=True, timeout=60)


def tree(path: Path) -> dict[str, tuple]:
    """Owner, mode and bytes of path and everything in it (what root must leave as it was)."""
    return {str(p): (p.lstat().st_uid, p.lstat().st_mode, p.read_bytes() if p.is_file() else None)
            for p in [path, *path.rglob("*")]}


@pytest.fixture
def scratch():
    """A folder open to nobody's search (like /), holding a root-owned folder `etc` with a file:
    the folder, which the links point at."""
    top = Path(tempfile.mkdtemp(prefix="bbx-links-"))
    top.chmod(0o711)
    etc = top / "etc"
    etc.mkdir(mode=0o755)
    (etc / "passwd").write_text("root:x:0:0\n")
    try:
        yield etc
    finally:
        shutil.rmtree(top, ignore_errors=True)


# --- make_exchange: the exchange's course folder --------------------------------------------------

SWAPS = {   # as the instructor, sys.argv[1] the course's folder, [2] the scratch folder
    "inbound is a link": "import os, shutil, sys; shutil.rmtree(sys.argv[1] + '/inbound'); "
                         "os.symlink(sys.argv[2], sys.argv[1] + '/inbound')",
    "the course's folder is a link": "import os, sys; "
                                     "os.rename(sys.argv[1], sys.argv[1] + '.old'); "
                                     "os.symlink(sys.argv[2], sys.argv[1])",
    "inbound is a file": "import os, shutil, sys; shutil.rmtree(sys.argv[1] + '/inbound'); "
                         "open(sys.argv[1] + '/inbound', 'w').close()",
}


@pytest.mark.parametrize("swap", SWAPS)
def test_make_exchange_follows_no_link_the_instructor_puts_in_the_exchange(scratch, swap):
    needs_root("setpriv")
    state = scratch.parent / "state"
    classroom.make_state(state)
    classroom.make_exchange(state, "nobody", "course")
    folder = state / "exchange" / "course"
    assert ((folder / "inbound").stat().st_uid == 65534
            and stat.S_IMODE((folder / "inbound").stat().st_mode) == 0o3733)
    before = tree(scratch)
    done = as_user([sys.executable, "-c", SWAPS[swap], str(folder), str(scratch)])
    assert done.returncode == 0, done.stderr   # the instructor can do it
    with pytest.raises(classroom.BadInput, match="is not a folder") as e:
        classroom.make_exchange(state, "nobody", "course")
    assert str(folder / "inbound" if "inbound" in swap else folder) in str(e.value)
    assert tree(scratch) == before


# --- make_course: the instructor's home -----------------------------------------------------------

@pytest.fixture(scope="module")
def instructor():
    """An instructor's account and a state folder: (accounts, state)."""
    needs_root("useradd", "userdel", "runuser")
    probe = as_user([sys.executable, "-c", "import nbgrader"])
    if probe.returncode != 0:
        pytest.skip(f"other users cannot run this environment's Python "
                    f"({os.path.realpath(sys.executable)})")
    accounts = classroom.Accounts("bbx" + secrets.token_hex(3) + "i", [])
    tmp = Path(tempfile.mkdtemp(prefix="bbx-course-"))
    tmp.chmod(0o711)
    state = tmp / "state"
    try:
        classroom.make_state(state)
        classroom.make_accounts(state, [accounts.instructor])
        (tmp / "roster.csv").write_text(ROSTER)
        yield accounts, state
    finally:
        subprocess.run(["userdel", "-r", accounts.instructor], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


def fresh_home(name: str, **files: str) -> Path:
    """The instructor's home without a course or .jupyter, then `files` (path in the home: text)
    written as the instructor; the home."""
    home = Path(pwd.getpwnam(name).pw_dir)
    code = ("import os, shutil, sys\nfor p in ('course', '.jupyter'):\n"
            "    shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) "
            "else os.path.lexists(p) and os.remove(p)\n"
            "for p, text in zip(sys.argv[1::2], sys.argv[2::2]):\n"
            "    os.makedirs(os.path.dirname(p) or '.', exist_ok=True); open(p, 'w').write(text)\n")
    done = as_user([sys.executable, "-c", f"import os; os.chdir({str(home)!r})\n" + code,
                    *[x for item in files.items() for x in item]], user=name)
    assert done.returncode == 0, done.stderr
    return home


@pytest.mark.slow
@pytest.mark.hub
def test_make_course_copies_the_course_keeps_the_instructors_own_and_imports_the_roster(instructor):
    """A first run, in a home where the instructor has a course configuration of their own already:
    solutions/ copied, the configuration kept (as a later run keeps every file it would copy)."""
    accounts, state = instructor
    home = fresh_home(accounts.instructor, **{"course/nbgrader_config.py": COURSE_CONFIG})
    course = classroom.make_course(state, accounts, state.parent / "roster.csv")
    assert course == home / "course" and stat.S_IMODE(course.stat().st_mode) == 0o700
    ours = {str(p.relative_to(ROOT / "solutions")) for p in (ROOT / "solutions").rglob("*")
            if ".ipynb_checkpoints" not in str(p)}
    assert {str(p.relative_to(course / "solutions"))
            for p in (course / "solutions").rglob("*")} == ours
    assert ((course / "nbgrader_config.py").read_text() == COURSE_CONFIG
            and (course / "roster.csv").read_text() == ROSTER)
    owner = pwd.getpwnam(accounts.instructor).pw_uid
    assert all(p.lstat().st_uid == owner
               for p in [course, *course.rglob("*"), home / ".jupyter" / "nbgrader_config.py"])
    assert (f"load_subconfig({str(course / 'nbgrader_config.py')!r})"
            in (home / ".jupyter" / "nbgrader_config.py").read_text())
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        assert sorted(s.id for s in gb.students) == ["zq_ada", "zq_alan"]
    assert not list(state.glob("course-*"))   # root's staged copy is gone


@pytest.mark.hub
@pytest.mark.parametrize("link", ["course", ".jupyter", ".jupyter/nbgrader_config.py",
                                  "course/solutions", "course/roster.csv"])
def test_make_course_follows_no_link_the_instructor_puts_in_their_home(instructor, scratch, link):
    """Each link points at the root-owned scratch folder (a file in it for the links named like
    files): make_course either goes on or stops with BadInput, the scratch folder as it was."""
    accounts, state = instructor
    home = fresh_home(accounts.instructor, **({} if link == "course" else
                                              {"course/nbgrader_config.py": COURSE_CONFIG}))
    target = scratch / "passwd" if link.endswith((".py", ".csv")) else scratch
    done = as_user([sys.executable, "-c",
                    "import os, sys; os.makedirs(os.path.dirname(sys.argv[1]), exist_ok=True); "
                    "os.symlink(sys.argv[2], sys.argv[1])", str(home / link), str(target)],
                   user=accounts.instructor)
    assert done.returncode == 0, done.stderr
    before = tree(scratch)
    try:
        classroom.make_course(state, accounts, state.parent / "roster.csv")
        assert link == "course/solutions", (
            "only a link the course keeps as the instructor's own lets it go on")
        assert (home / link).is_symlink()
    except classroom.BadInput as e:
        assert (("Permission denied" in str(e) or "Operation not permitted" in str(e))
                and accounts.instructor in str(e)), e
    assert tree(scratch) == before


# --- the set-up's other input ---------------------------------------------------------------------

def test_every_users_nbgrader_shows_a_learners_text_safely(tmp_path):
    """The shared configuration, rewritten on every run, holds the course's safe HTML for Formgrader
    and feedback: a hub whose instructor has an older copy of the course's nbgrader_config.py gets
    it too."""
    from traitlets.config.loader import PyFileConfigLoader
    from course_utils.grader.reports import SafeMarkdown
    classroom.write_shared_config(tmp_path, "course")
    text = (classroom.shared_config_dir(tmp_path) / "nbgrader_config.py").read_text()
    assert "c.HTMLExporter.sanitize_html = True\n" in text
    assert 'c.HTMLExporter.filters = {"markdown2html": SafeMarkdown}\n' in text
    config = PyFileConfigLoader("nbgrader_config.py",
                                path=str(classroom.shared_config_dir(tmp_path))).load_config()
    assert (config.HTMLExporter.sanitize_html is True
            and config.HTMLExporter.filters == {"markdown2html": SafeMarkdown})
    course = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()
    assert (course.HTMLExporter.filters == config.HTMLExporter.filters
            and course.HTMLExporter.sanitize_html is True)


def test_learners_validate_stops_a_cell_where_the_courses_grading_does(tmp_path, monkeypatch):
    """The shared configuration (every learner's nbgrader) sets Validate's limit per cell from the
    repository's nbgrader_config.py: its default there, an instructor's 120 s when set; and names
    exchange classes that import."""
    import importlib
    from traitlets.config import Config
    from traitlets.config.loader import PyFileConfigLoader
    from course_utils.grader.worker import Limits

    def validate_timeout(configured):
        course = Config()
        if configured is not None:
            course.HardenedExecute.cell_seconds = configured
        monkeypatch.setattr(classroom, "course_config", lambda: course)
        classroom.write_shared_config(tmp_path, "course", classroom.course_cell_seconds())
        return PyFileConfigLoader("nbgrader_config.py",
                                  path=str(classroom.shared_config_dir(tmp_path))).load_config()

    assert validate_timeout(None).Execute.timeout == Limits().cell_seconds
    config = validate_timeout(120.0)
    assert config.Execute.timeout == 120 and config.Execute.interrupt_on_timeout is True
    for name in (config.ExchangeFactory.submit, config.ExchangeFactory.collect):
        module, _, cls = name.rpartition(".")
        assert hasattr(importlib.import_module(module), cls), name


@pytest.mark.parametrize("name", ["my state", "state,x", "state:x", "state=x", "state#x", 'state"x',
                                  "state\\x"])
def test_a_state_path_sudo_cannot_name_as_it_is_is_refused(tmp_path, name):
    with pytest.raises(classroom.BadInput, match="choose another HUB_STATE"):
        classroom.allow_full_sandbox(tmp_path / name, "nobody")
    assert not classroom.sudoers_file(tmp_path / name).exists() and not (tmp_path / name).exists()


@pytest.mark.parametrize("plant, offender", [
    (lambda top: (top / "pkg" / "mod.py").chmod(0o664), "site-packages/pkg/mod.py"),
    (lambda top: (top / "pkg" / "sub").chmod(0o777), "site-packages/pkg/sub"),
    (lambda top: os.chown(top / "pkg" / "sub" / "data.py", 65534, 0),
     "site-packages/pkg/sub/data.py"),
    (lambda top: (top / "pkg" / "gone.py").symlink_to(top / "nothing.py"),
     "site-packages/pkg/gone.py"),
    (lambda top: (top / "pkg" / "sub" / "elsewhere.py").symlink_to(top.parent / "open" / "mod.py"),
     "open"),
], ids=["group-writable file", "writable folder", "another's file", "link to nothing",
        "link to an open file"])
def test_check_root_only_names_the_first_file_or_folder_in_the_tree_others_can_change(
        tmp_path, plant, offender):
    needs_root()
    top = tmp_path / "site-packages"
    for folder in (top / "pkg" / "sub", tmp_path / "open"):
        folder.mkdir(parents=True)
    for path in (top / "pkg" / "mod.py", top / "pkg" / "sub" / "data.py",
                 tmp_path / "open" / "mod.py"):
        path.write_text("x = 1\n")
        path.chmod(0o644)
    (tmp_path / "open").chmod(0o777)
    classroom.check_root_only(top, tree=True)   # as made: root's alone
    plant(top)
    with pytest.raises(classroom.BadInput) as e:
        classroom.check_root_only(top, tree=True)
    assert str(e.value).startswith(str(tmp_path / offender) + " "), e.value


def test_a_terminal_keeps_the_course_path_and_starts_in_the_servers_folder(tmp_path):
    """jupyter_server's terminal is a login shell unless told otherwise, and a login shell's
    /etc/profile drops the course's PATH: the shared config makes it bash with terminal.bashrc,
    which puts the course's PATH first (the user's own after it) and goes from the home folder
    (where the server started) to the server's own (JUPYTER_SERVER_ROOT)."""
    classroom.write_shared_config(tmp_path, "course")
    config = json.loads(
        (classroom.shared_config_dir(tmp_path) / "jupyter_server_config.json").read_text())
    shell = config["ServerApp"]["terminado_settings"]["shell_command"]
    assert shell == ["/bin/bash", "--rcfile", str(classroom.terminal_rc(tmp_path)), "-i"]
    home, course = tmp_path / "home", tmp_path / "home" / "course"
    course.mkdir(parents=True)
    for start, root, ends_in in ((home, course, course), (course / ".", home, course),
                                 (home, tmp_path / "gone", home)):
        done = subprocess.run(shell, input='echo "at=$PWD path=$PATH"\n', cwd=start,
                              capture_output=True, text=True,
                              env={"HOME": str(home), "PATH": "/bin",
                                   "JUPYTER_SERVER_ROOT": str(root)}, timeout=60)
        said = dict(part.split("=", 1) for part in done.stdout.split())
        assert (Path(said["at"]).resolve() == ends_in.resolve()
                and said["path"] == f"{classroom.course_path()}:/bin"), done


def hub_config(state: Path, **env: str):
    """hub/jupyterhub_config.py as JupyterHub loads it, for a class in `state`, with course.sh hub's
    env."""
    from traitlets.config.loader import PyFileConfigLoader
    # the instructor: an account that exists (the course's service runs as it, in its course)
    classroom.Accounts(pwd.getpwuid(os.getuid()).pw_name, ["ada"], ["tom"]).write(state)
    (state / "proxy_token").write_text("token\n")
    saved = {k: os.environ.get(k) for k in ("HUB_STATE", *env)}
    os.environ.update(HUB_STATE=str(state), **env)
    try:
        return PyFileConfigLoader("jupyterhub_config.py", path=str(ROOT / "hub")).load_config()
    finally:
        for k, v in saved.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)


def test_https_from_the_instructors_certificate_and_idle_servers_stopped_by_the_hubs_culler(
        tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.write_text("-"), key.write_text("-")
    args = classroom.parse(["--ssl-cert", str(cert), "--ssl-key", str(key),
                            "--idle-minutes", "30"])
    config = hub_config(tmp_path, HUB_SSL_CERT=str(args.ssl_cert), HUB_SSL_KEY=str(args.ssl_key),
                        HUB_IDLE_MINUTES=str(args.idle_minutes), HUB_PORT="8443")
    assert config.JupyterHub.ssl_cert == str(cert) and config.JupyterHub.ssl_key == str(key)
    assert config.JupyterHub.bind_url == "https://:8443"
    culler, course = config.JupyterHub.services
    assert culler["command"][1:] == ["-m", "jupyterhub_idle_culler", "--timeout=1800",
                                     "--cull-every=300"]
    assert culler["user"] == "nobody", "not root"
    role, graders = config.JupyterHub.load_roles
    assert role["services"] == ["idle-culler"] and sorted(role["scopes"]) == [
        "delete:servers!group=culled", "list:users!group=culled", "read:servers!group=culled",
        "read:users:activity!group=culled"], (
        "learners' and TAs' servers only: never the instructor's")
    assert config.JupyterHub.load_groups == {"culled": {"users": ["ada", "tom"]}}
    plain = hub_config(tmp_path, HUB_SSL_CERT="", HUB_SSL_KEY="", HUB_IDLE_MINUTES="0",
                       HUB_PORT="8000")
    assert plain.JupyterHub.bind_url == "http://:8000"
    assert [s["name"] for s in plain.JupyterHub.services] == [course["name"]], (
        "no culler, the course's service stays")


def test_the_course_is_a_hub_service_for_the_instructor_and_the_teaching_assistants(tmp_path):
    """nbgrader's "one class, multiple graders": the course served by jupyterhub-singleuser as the
    hub's service named after the course, as the instructor's account, in their course, with the
    service's own menu; a role gives its access scope, and only it, to the instructor and the
    TAs."""
    config = hub_config(tmp_path, HUB_IDLE_MINUTES="0")
    instructor = pwd.getpwuid(os.getuid()).pw_name
    service, = config.JupyterHub.services
    assert service["name"] == classroom.course_id() and service["user"] == instructor, service
    # entered as the instructor (env -C), never by the hub as root
    course = str(classroom.course_dir(instructor))
    assert service["command"] == ["/usr/bin/env", "-C", course,
                                  str(Path(sys.prefix) / "bin" / "jupyterhub-singleuser")]
    assert service["url"].startswith("http://127.0.0.1:")
    env = service["environment"]
    assert service["cwd"] == "/" and env["JUPYTERHUB_ROOT_DIR"] == course
    assert env["JUPYTER_CONFIG_PATH"].split(os.pathsep)[0] == str(
        classroom.grader_menu_dir(tmp_path, service=True))
    assert (env["COURSE_ROOT_WORKER"] == str(classroom.root_worker(tmp_path))
            and env["JUPYTERHUB_DEFAULT_URL"] == "/lab")
    role, = config.JupyterHub.load_roles
    assert role == {"name": f"graders-{classroom.course_id()}", "users": [instructor, "tom"],
                    "scopes": [f"access:services!service={classroom.course_id()}"]}, role
    assert config.Authenticator.allowed_users == {instructor, "ada", "tom"}
    assert config.Authenticator.allow_existing_users is False, (
        "an account off the roster or --tas cannot log in")


def test_each_graders_menu_opens_its_own_formgrader(tmp_path):
    """The instructor's server's Nbgrader menu opens Formgrader and Autograde under
    /user/INSTRUCTOR/, the course's service's under /services/COURSE/: a TA in the service never
    lands in the instructor's server."""
    for prefix, service in (("/user/teacher/", False), (classroom.service_prefix(), True)):
        classroom.write_grader_menu(tmp_path, prefix, service=service)
        folder = classroom.grader_menu_dir(tmp_path, service)
        menu, = json.loads((folder / "labconfig" / "default_setting_overrides.json").read_text())[
            "@jupyterlab/mainmenu-extension:plugin"]["menus"]
        urls = [item["args"]["url"] for item in menu["items"] if item["command"] == "help:open"]
        assert urls == [f"{prefix}formgrader", f"{prefix}course/autograde"], urls
    assert classroom.service_prefix() == f"/services/{classroom.course_id()}/"


@pytest.mark.parametrize("argv, words", [
    (["--ssl-cert", "CERT"], "--ssl-cert and --ssl-key go together"),
    (["--ssl-key", "KEY"], "--ssl-cert and --ssl-key go together"),
    (["--ssl-cert", "CERT", "--ssl-key", "missing.pem"], "--ssl-key missing.pem: no such file"),
    (["--idle-minutes", "-5"], "--idle-minutes -5 is below 0"),
    (["--idle-minutes", "5"],
     "--idle-minutes 5: give 6 or more (the hub hears of a learner's work only every 5 minutes"),
    (["--idle-minutes", "1"], "--idle-minutes 1: give 6 or more"),
    (["--idle-minutes", "soon"], "argument --idle-minutes: invalid int value"),
    (["--learner-memory-mb", "100"], "--learner-memory-mb 100: give 256 or more"),
    (["--learner-memory-mb", "-1"], "--learner-memory-mb -1: give 256 or more"),
    (["--learner-cpus", "0"], "--learner-cpus 0: give a number of cores from 0.01 up"),
    (["--learner-cpus", "inf"], "--learner-cpus inf: give a number of cores from 0.01 up"),
    (["--learner-cpus", "nan"], "--learner-cpus nan: give a number of cores from 0.01 up"),
])
def test_bad_hub_options_are_one_line_errors(tmp_path, monkeypatch, argv, words):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "CERT").write_text("-")
    with pytest.raises(classroom.BadInput, match=re.escape(words)):
        classroom.parse(argv)


def test_learners_and_tas_get_the_hubs_limits_and_the_instructor_none(tmp_path):
    args = classroom.parse(["--learner-memory-mb", "1536", "--learner-cpus", "0.5"])
    config = hub_config(tmp_path, HUB_LEARNER_MEMORY_MB=str(args.learner_memory_mb),
                        HUB_LEARNER_CPUS=str(args.learner_cpus))
    spawner = config.LimitedSpawner
    assert (spawner.memory_bytes, spawner.cpus, spawner.unlimited) == (
        1536 * 2 ** 20, 0.5, {pwd.getpwuid(os.getuid()).pw_name})
    defaults = classroom.parse([])
    assert (defaults.learner_memory_mb, defaults.learner_cpus) == (
        classroom.DEFAULT_LEARNER_MEMORY_MB, classroom.DEFAULT_LEARNER_CPUS)


def test_a_learners_server_does_not_start_without_its_cgroup(monkeypatch):
    """Fails closed: where no cgroup can be made, the learner's server is not started, and the
    message says why and how to fix it before it names running without limits."""
    import asyncio
    import limits

    class NoDirs:
        def __init__(self, *args):
            self.dirs, self.cpu = [], False

        def remove(self):
            pass

    started = []

    async def start(self):
        started.append(self.user.name)

    monkeypatch.setattr(limits, "Cgroup", NoDirs)
    monkeypatch.setattr(limits.LocalProcessSpawner, "start", start)
    spawner = limits.LimitedSpawner(memory_bytes=2 ** 30, unlimited={"teacher"})
    for name, refused in (("ada", True), ("teacher", False)):
        monkeypatch.setattr(limits.LimitedSpawner, "user", type("User", (), {"name": name})(),
                            raising=False)
        if refused:
            with pytest.raises(limits.NoCgroup) as e:
                asyncio.run(spawner.start())
            why = str(e.value)
            assert ("ada's server was not started" in why
                    and why.index("must run as root") < why.index("--learner-memory-mb 0"))
        else:
            asyncio.run(spawner.start())
    assert started == ["teacher"]


@pytest.mark.skipif(os.geteuid() != 0,
                    reason="the server becomes its user in the same function: needs root")
def test_a_learners_server_joins_its_cgroup_before_it_runs(tmp_path):
    """make_preexec_fn: in the child, before exec, "0" (the child itself) is written to every
    controller's cgroup.procs of the learner's cgroup, then the child becomes its user."""
    import limits

    dirs = [tmp_path / "memory", tmp_path / "pids"]
    for d in dirs:
        d.mkdir()
        (d / "cgroup.procs").write_text("")
    spawner = limits.LimitedSpawner(memory_bytes=2 ** 30)
    spawner._cgroup = type("Cgroup", (), {"dirs": dirs})()
    done = subprocess.run(["id", "-un"], preexec_fn=spawner.make_preexec_fn("root"),
                          capture_output=True, text=True)
    assert done.stdout.strip() == "root"
    assert [(d / "cgroup.procs").read_text() for d in dirs] == ["0", "0"]



def unit_command(unit: str) -> list[str]:
    """ExecStart='s words as systemd reads them: its quoting, %% and $$ back to % and $."""
    import shlex
    line = next(x for x in unit.splitlines() if x.startswith("ExecStart="))
    return [w.replace("%%", "%").replace("$$", "$")
            for w in shlex.split(line.removeprefix("ExecStart="))]


def test_the_service_runs_the_hub_with_the_same_options_at_boot(tmp_path, monkeypatch):
    """`bash course.sh hub --service`: the unit runs `bash course.sh hub` with every option spelled
    out (those given through $HUB_* too), so that it starts the same hub at boot; systemd reads it
    without error (systemd-analyze verify, where installed)."""
    monkeypatch.setenv("HUB_PORT", "8123")
    monkeypatch.setenv("HUB_TAS", "tom,tia")
    (tmp_path / "cert.pem").write_text("-")
    (tmp_path / "key.pem").write_text("-")
    # systemd's specifier and variable characters, and a space
    roster = tmp_path / "class 100%$HOME.csv"
    args = classroom.parse(["--roster", str(roster), "--idle-minutes", "30",
                            "--learner-cpus", "0.5",
                            "--ssl-cert", str(tmp_path / "cert.pem"),
                            "--ssl-key", str(tmp_path / "key.pem"), "--service"])
    unit = classroom.service_unit(args, tmp_path / "state")
    words = unit_command(unit)
    assert words[:3] == ["/bin/bash", str(ROOT / "course.sh"), "hub"], words
    again = classroom.parse(words[3:])
    assert vars(again) == {**vars(args), "service": False}, (
        "the service starts the hub this command would start")
    assert again.port == 8123 and again.roster == roster and again.tas == "tom,tia"
    assert f'Environment="HUB_STATE={tmp_path / "state"}"' in unit and "Restart=on-failure" in unit
    assert "WantedBy=multi-user.target" in unit
    if shutil.which("systemd-analyze"):
        (tmp_path / f"{classroom.SERVICE}.service").write_text(unit)
        done = subprocess.run(["systemd-analyze", "verify",
                               str(tmp_path / f"{classroom.SERVICE}.service")],
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr


def test_the_service_where_systemd_does_not_run_is_a_one_line_error_and_writes_nothing(
        tmp_path, monkeypatch):
    monkeypatch.setattr(classroom, "SYSTEMD_RUNNING", tmp_path / "run" / "systemd" / "system")
    monkeypatch.setattr(classroom, "UNIT_DIR", tmp_path / "units")
    (tmp_path / "units").mkdir()
    with pytest.raises(classroom.BadInput,
                       match=r"^systemd does not run on this machine \(.* is missing: a container"):
        classroom.install_service(classroom.parse(["--service"]), tmp_path / "state")
    assert list((tmp_path / "units").iterdir()) == []
