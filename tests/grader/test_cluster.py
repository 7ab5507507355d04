"""Grading on a Dask cluster (course_utils.grader.cluster), with a real scheduler and grading
workers, each a process of its own on loopback, started as `bash course.sh grade-worker` starts
them.

The checkouts are made here: course_utils copied from this one and the fixture lesson as their one
lesson (solutions/99-fixture), so that a worker "of another commit" is a real other checkout."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from test_gradefolder import FIXTURE, submission

from course_utils.grader import cluster

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
LESSON = "99-fixture"
SLEEPY = "import time\ndef scale(x, k):\n    time.sleep(0.3)\n    return x * k\n"
TLS = "DASK_DISTRIBUTED__COMM__TLS__"
CA, CERT, KEY = TLS + "CA_FILE", TLS + "CLIENT__CERT", TLS + "CLIENT__KEY"


def tls_settings(where: Path, ca: str = "ca") -> dict:
    """Dask's TLS settings, as docs/instructors.md gives them: one certificate of the CA ca for
    every role (made with certipy, JupyterHub's own tool for its internal TLS)."""
    from certipy import Certipy
    store = Certipy(store_dir=str(where))
    store.create_ca(ca)
    files = store.create_signed_pair(f"{ca}-node", ca,
                                     alt_names=["IP:127.0.0.1", "DNS:localhost"])["files"]
    roles = {f"{TLS}{role}__{part.upper()}": files[part]
             for role in ("SCHEDULER", "WORKER", "CLIENT") for part in ("cert", "key")}
    return {CA: files["ca"], **roles, "DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION": "True"}


def make_course(where: Path, change: str = "") -> Path:
    """A checkout whose one lesson is the fixture; `change` is appended to its course_utils."""
    shutil.copytree(ROOT / "course_utils", where / "course_utils",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (where / "solutions" / LESSON).mkdir(parents=True)
    shutil.copy(FIXTURE, where / "solutions" / LESSON)
    if change:
        with open(where / "course_utils" / "__init__.py", "a") as f:
            f.write(change)
    return where


def env(course: Path | None) -> dict:
    """The environment of a process of course's checkout (None: no PYTHONPATH, as a deployment
    tool starts a `dask worker` in the checkout's folder)."""
    found = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return {**found, "PYTHONDONTWRITEBYTECODE": "1"} | (
        {"PYTHONPATH": str(course)} if course else {})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """A scheduler, and grading workers started (and killed) by name."""

    def __init__(self, tmp: Path, protocol: str = "tcp", settings: dict | None = None):
        """settings: Dask's (DASK_... variables) for the scheduler and every worker."""
        self.tmp, self.workers, self.logs, self.settings = tmp, {}, {}, settings or {}
        self.runs: list[subprocess.Popen] = []   # grading runs started beside it, ended with it
        file = tmp / "scheduler.json"
        self.scheduler = subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
             "--port", "0", "--no-dashboard", "--scheduler-file", str(file), "--protocol",
             protocol], env={**os.environ, **self.settings},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 60
        while not file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        self.address = json.loads(file.read_text())["address"]

    def start(self, name: str, course: Path, jobs: int = 1, plain: bool = False,
              run_as: tuple = ()) -> None:
        """A grading worker of course, as grade-worker starts it; plain: as a deployment tool
        (dask-jobqueue, dask-kubernetes) would, a `dask worker` with the course's preload started
        in the checkout's folder, no PYTHONPATH."""
        self.logs[name] = self.tmp / f"{name}.log"
        command = ([sys.executable, "-m", "distributed.cli.dask_worker", self.address,
                    "--preload", "course_utils.grader.cluster", "--nthreads", str(jobs),
                    "--name", name, "--no-dashboard", "--memory-limit", "0"] if plain
                   else [sys.executable, "-m", "course_utils.grader.cluster", "--scheduler",
                         self.address, "--jobs", str(jobs), "--name", name])
        with open(self.logs[name], "w") as log:
            self.workers[name] = subprocess.Popen(
                [*run_as, *command], cwd=course,
                env=env(None if plain else course) | self.settings,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def client(self):
        from distributed import Client
        from distributed.security import Security
        security = Security(tls_ca_file=self.settings[CA], tls_client_cert=self.settings[CERT],
                            tls_client_key=self.settings[KEY], require_encryption=True
                            ) if self.settings else None
        return Client(self.address, timeout=30, set_as_default=False, security=security)

    def wait_for(self, *names: str) -> dict[str, str]:
        """{name: address} once every named worker has joined."""
        with self.client() as client:
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                joined = {w["name"]: a for a, w in client.scheduler_info()["workers"].items()}
                if set(names) <= set(joined):
                    return joined
                dead = [n for n in names if self.workers[n].poll() is not None]
                assert not dead, f"{dead} stopped: {self.logs[dead[0]].read_text()[-2000:]}"
                time.sleep(0.5)
        raise AssertionError(f"{names} did not join")

    def wait_busy(self) -> None:
        """Until some worker holds a submission (a run has begun grading)."""
        with self.client() as client:
            deadline = time.monotonic() + 120
            while not any(client.processing().values()) and time.monotonic() < deadline:
                time.sleep(0.2)

    def kill(self, name: str) -> None:
        os.killpg(self.workers[name].pid, signal.SIGKILL)
        self.workers[name].wait()

    def close(self) -> None:
        for proc in [*self.runs, *self.workers.values(), self.scheduler]:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def grade(course: Path, folder: Path, out: Path, address: str | None = None,
          settings: dict | None = None, **popen):
    """`bash course.sh grade` as the course's checkout runs it (its own course_utils), with
    Dask's settings (DASK_... variables)."""
    command = [sys.executable, "-m", "course_utils.grader.gradefolder", LESSON, str(folder),
               "--out", str(out), "--course", str(course)]
    command += ["--cluster", address] if address else []
    environment = env(course) | (settings or {})
    if popen:
        return subprocess.Popen(command, cwd=folder.parent, env=environment, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen)
    return subprocess.run(command, cwd=folder.parent, env=environment, text=True,
                          capture_output=True, timeout=600)


def write_class(folder: Path, learners: dict[str, bytes]) -> Path:
    folder.mkdir()
    for name, data in learners.items():
        (folder / f"{name}.ipynb").write_bytes(data)
    return folder


def files(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file()}


@pytest.fixture(scope="module")
def setting(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cluster")
    course = make_course(tmp / "course")
    other = make_course(tmp / "other", change="\n# another commit\n")
    grid = Cluster(tmp)
    try:
        grid.start("a", course)
        grid.start("b", course)
        grid.start("stale", other, plain=True)
        grid.wait_for("a", "b", "stale")
        yield tmp, course, grid
    finally:
        grid.close()


def test_a_class_graded_on_the_cluster_gets_the_grades_of_a_local_run(setting):
    tmp, course, grid = setting
    folder = write_class(tmp / "class", {
        "ada": submission(), "bob": submission(fx_grad="def square_grad(x):\n    return x\n"),
        "cy": submission(fx_scale=SLEEPY), "dee": b"not a notebook",
        "eve": submission(fx_count="def count_positive(xs):\n    return len(xs)\n")})
    remote = grade(course, folder, tmp / "remote", grid.address)
    assert remote.returncode == 0, remote.stderr
    local = grade(course, folder, tmp / "local")
    assert local.returncode == 0, local.stderr
    assert files(tmp / "remote") == files(tmp / "local")
    assert "ada: 5 / 5" in remote.stdout and "bob: 3 / 5" in remote.stdout
    # the worker of another checkout is named, with both versions, and given nothing
    mine, theirs = (cluster.Course.at(c) for c in (course, tmp / "other"))
    refused = [line for line in remote.stderr.splitlines() if "refused" in line]
    assert len(refused) == 1, remote.stderr
    assert (f"course_utils {theirs.parts['course_utils']} there, "
            f"{mine.parts['course_utils']} here") in refused[0]
    tasks = graded_by(grid)
    assert not tasks["stale"] and tasks["a"] and tasks["b"], tasks


def test_a_worker_killed_mid_run_leaves_every_submission_graded_once(setting):
    tmp, course, grid = setting
    grid.start("victim", course)
    grid.wait_for("victim")
    learners = {f"s{i}": submission(fx_scale=SLEEPY) for i in range(6)}
    folder = write_class(tmp / "sleepy", learners)
    run = grade(course, folder, tmp / "sleepy-out", grid.address, start_new_session=True)
    grid.runs.append(run)
    with grid.client() as client:
        deadline, taken = time.monotonic() + 120, []
        while not taken and time.monotonic() < deadline:
            victim = next((a for a, w in client.scheduler_info()["workers"].items()
                           if w["name"] == "victim"), None)
            taken = list(client.processing().get(victim, ())) if victim else []
            time.sleep(0.2)
    assert taken, "the victim was given no submission"
    grid.kill("victim")
    stdout, stderr = run.communicate(timeout=600)
    assert run.returncode == 0, stderr
    rows = (tmp / "sleepy-out" / "grades.csv").read_text().splitlines()[1:]
    assert sorted(row.split(",")[0] for row in rows) == sorted(learners)
    assert all(f"{s}: 5 / 5" in stdout for s in learners), stdout
    # what the victim held when it died was graded again by a worker left (SLEEPY takes seconds)
    assert set(map(str, taken)) <= set().union(*graded_by(grid).values()), taken


def test_a_result_lost_with_its_worker_before_it_was_collected_is_graded_again(setting):
    """A worker dies holding a grade it finished that the caller has not collected yet (here the
    caller is stopped meanwhile): Dask says the result is lost and computes it again; the caller
    waits for it, never writing `not graded` for it."""
    tmp, course, grid = setting
    grid.start("holder", course)
    holder = grid.wait_for("holder")["holder"]
    learners = {f"s{i}": submission(fx_scale=SLEEPY) for i in range(3)}
    folder = write_class(tmp / "held", learners)
    run = grade(course, folder, tmp / "held-out", grid.address, start_new_session=True)
    grid.runs.append(run)
    grid.wait_busy()
    os.kill(run.pid, signal.SIGSTOP)   # the caller collects nothing until SIGCONT
    try:
        with grid.client() as client:
            deadline = time.monotonic() + 120
            while not client.has_what().get(holder) and time.monotonic() < deadline:
                time.sleep(0.2)
            held = list(client.has_what().get(holder, ()))
            assert held, "the holder finished no submission"
            grid.kill("holder")
            while holder in client.scheduler_info()["workers"] and time.monotonic() < deadline:
                time.sleep(0.2)
    finally:
        os.kill(run.pid, signal.SIGCONT)
    stdout, stderr = run.communicate(timeout=600)
    assert run.returncode == 0, stderr
    assert all(f"{s}: 5 / 5" in stdout for s in learners), stdout


def graded_by(grid: Cluster) -> dict[str, set[str]]:
    """{worker's name: the grading tasks it ran}, of the workers alive."""
    with grid.client() as client:
        names = {a: w["name"] for a, w in client.scheduler_info()["workers"].items()}
        tasks = client.run(lambda dask_worker: sorted(
            {str(k) for k, *_ in dask_worker.state.log if str(k).startswith("grade-")}))
    return {names[a]: set(keys) for a, keys in tasks.items()}


def test_the_scheduler_going_away_mid_run_is_one_line_and_writes_nothing(tmp_path):
    course = make_course(tmp_path / "course")
    grid = Cluster(tmp_path)
    try:
        grid.start("w", course)
        grid.wait_for("w")
        folder = write_class(tmp_path / "class",
                             {f"s{i}": submission(fx_scale=SLEEPY) for i in range(3)})
        run = grade(course, folder, tmp_path / "out", grid.address, start_new_session=True)
        grid.runs.append(run)
        grid.wait_busy()
        os.killpg(grid.scheduler.pid, signal.SIGKILL)
        stdout, stderr = run.communicate(timeout=300)
    finally:
        grid.close()
    assert run.returncode == 2, stderr
    assert stderr.count("\n") == 1, stderr
    assert "went away mid-run" in stderr and "nothing written" in stderr, stderr
    assert not (tmp_path / "out").exists()


# no scheduler at the address: test_course_sh_runs_the_worker_and_the_cluster_grading
@pytest.mark.parametrize("case", ["not an address", "plain tcp to another machine",
                                  "sandbox optional", "jobs", "no worker of this course"])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(setting, case, tmp_path, capsys,
                                                         monkeypatch):
    import logging

    from course_utils.grader import gradefolder
    monkeypatch.setattr(cluster, "WORKERLESS_SECONDS", 3)
    tmp, course, grid = setting
    folder = write_class(tmp_path / "class", {"ada": submission()})
    address = {"not an address": "localhost",
               "plain tcp to another machine": "tcp://grader.example.org:8786"}.get(case,
                                                                                 grid.address)
    argv = [LESSON, str(folder), "--out", str(tmp_path / "out"), "--course", str(course),
            "--cluster", address]
    argv += {"sandbox optional": ["--sandbox", "optional"], "jobs": ["--jobs", "4"]}.get(case, [])
    if case == "no worker of this course":   # a third checkout: every worker is refused
        third = make_course(tmp_path / "third", change="\n# a third commit\n")
        argv[argv.index("--course") + 1] = str(third)
    levels = {n: logging.getLogger(n).level for n in ("distributed", "distributed.client")}
    try:
        code = gradefolder.main(argv)
    except SystemExit as e:   # argparse's own errors
        code = e.code
    stderr = capsys.readouterr().err
    assert code == 2, stderr
    lines = stderr.splitlines()
    assert lines and all(line.startswith("error: ") for line in lines), stderr
    expected = {"not an address": "tls://HOST:PORT",
                "plain tcp to another machine": "use tls://HOST:PORT with mutual certificates",
                "sandbox optional": "always grades in the full sandbox",
                "jobs": "each grading machine's `bash course.sh grade-worker --jobs N` decides",
                "no worker of this course": "no grading worker of this course at"}[case]
    assert expected in lines[-1], stderr
    # each worker refused is named (a, b and stale), then the error
    assert len(lines) == (4 if case == "no worker of this course" else 1), stderr
    assert not (tmp_path / "out").exists()
    # the client's quiet logging was this run's only
    assert levels == {n: logging.getLogger(n).level for n in levels}


def test_a_reference_run_that_fails_stops_the_run_as_locally_and_keeps_the_workers(
        setting, tmp_path, capsys):
    """The lesson's reference run fails (here: the caller's --cell-seconds is too short for it),
    as it would on every worker: one line, exit 2, nothing written, as a local run says it; the
    grading workers stay (a failing lesson is not a broken machine)."""
    from course_utils.grader import gradefolder
    tmp, course, grid = setting
    folder = write_class(tmp_path / "class", {"ada": submission(), "bob": submission()})
    argv = [LESSON, str(folder), "--course", str(course), "--cell-seconds", "0.001"]
    code = gradefolder.main(argv + ["--out", str(tmp_path / "out"), "--cluster", grid.address])
    remote = capsys.readouterr().err.splitlines()
    local = gradefolder.main(argv + ["--out", str(tmp_path / "local")])
    said = capsys.readouterr().err.splitlines()
    assert code == local == 2, remote
    expected = f"error: the reference run of {LESSON} failed, nothing graded: "
    assert remote[-1].startswith(expected) and said[-1].startswith(expected), (remote, said)
    assert "ran past the time limit" in remote[-1]
    assert not (tmp_path / "out").exists()
    assert all(grid.workers[n].poll() is None for n in ("a", "b"))


@pytest.mark.parametrize("where", ["fetching a result", "sending a submission"])
def test_the_scheduler_lost_at_any_call_is_one_line(setting, where, tmp_path, capsys,
                                                    monkeypatch):
    """The errors Dask raises when the scheduler's connection drops mid-call (a result cancelled
    while fetched, a closed client while sending) are the scheduler gone: one line, exit 2,
    nothing written, no traceback."""
    import distributed
    from distributed.client import ClosedClientError, FutureCancelledError

    from course_utils.grader import gradefolder
    tmp, course, grid = setting

    def fails(future, *args, **kwargs):
        if where == "fetching a result":
            raise FutureCancelledError(future.key, "scheduler-connection-lost")
        raise ClosedClientError()
    monkeypatch.setattr(distributed.Future if where == "fetching a result" else
                        distributed.Client, "result" if where == "fetching a result" else
                        "submit", fails)
    folder = write_class(tmp_path / "class", {"ada": submission()})
    code = gradefolder.main([LESSON, str(folder), "--out", str(tmp_path / "out"), "--course",
                             str(course), "--cluster", grid.address])
    stderr = capsys.readouterr().err
    assert code == 2, stderr
    lines = stderr.splitlines()   # the stale worker refused, then the error
    assert all(line.startswith("error: ") for line in lines), stderr
    assert "went away mid-run" in lines[-1] and "nothing written" in lines[-1], stderr
    assert not (tmp_path / "out").exists()


def test_course_sh_runs_the_worker_and_the_cluster_grading(tmp_path):
    """The instructor's commands reach this code: a grading worker with no scheduler at its address
    and a grading run likewise stop with one line, exit 2."""
    port = free_port()
    worker = subprocess.run(["bash", str(ROOT / "course.sh"), "grade-worker", "--scheduler",
                             f"tcp://127.0.0.1:{port}", "--jobs", "1"],
                            text=True, capture_output=True, timeout=300)
    assert worker.returncode == 2, worker.stderr
    assert worker.stderr.splitlines()[-1].startswith("error: no Dask scheduler at"), worker.stderr
    (tmp_path / "class").mkdir()
    (tmp_path / "class" / "ada.ipynb").write_bytes(
        (ROOT / "notebooks" / "01-circuits" / "01-circuits.ipynb").read_bytes())
    run = subprocess.run(["bash", str(ROOT / "course.sh"), "grade", "01-circuits", "class",
                          "--out", "out", "--cluster", f"tcp://127.0.0.1:{port}"], cwd=tmp_path,
                         text=True, capture_output=True, timeout=300)
    assert run.returncode == 2, run.stderr
    assert run.stderr.splitlines()[-1].startswith("error: no Dask scheduler at"), run.stderr
    assert not (tmp_path / "out").exists()


def test_between_machines_tls_with_the_courses_certificates(tmp_path):
    """The route docs/instructors.md gives between machines: a scheduler, a grading worker and
    the grading run over tls:// with mutual certificates of one CA grade the class; a caller
    without TLS settings, or with a certificate of another CA, is one line, exit 2, nothing
    written."""
    course = make_course(tmp_path / "course")
    settings = tls_settings(tmp_path / "certs")
    grid = Cluster(tmp_path, protocol="tls", settings=settings)
    try:
        assert grid.address.startswith("tls://127.0.0.1:")
        folder = write_class(tmp_path / "class", {"ada": submission()})
        run = grade(course, folder, tmp_path / "out", grid.address, settings=settings,
                    start_new_session=True)   # before any worker: it waits for the first
        grid.runs.append(run)
        grid.start("w", course)
        grid.wait_for("w")
        graded = subprocess.CompletedProcess(run.args, 0, *run.communicate(timeout=300))
        graded.returncode = run.returncode
        unset = grade(course, folder, tmp_path / "unset", grid.address)
        stranger = grade(course, folder, tmp_path / "stranger", grid.address,
                         settings=tls_settings(tmp_path / "other-certs", ca="other"))
    finally:
        grid.close()
    assert graded.returncode == 0, graded.stderr
    assert "ada: 5 / 5" in graded.stdout, graded.stdout
    assert "waiting up to 120 s for a grading worker of this course" in graded.stdout
    for refused, said in [(unset, "has no Dask TLS settings for a client"),
                          (stranger, "this machine's certificate must be signed by the CA")]:
        assert refused.returncode == 2, refused.stderr
        assert refused.stderr.count("\n") == 1 and said in refused.stderr, refused.stderr
    assert not (tmp_path / "unset").exists() and not (tmp_path / "stranger").exists()


def test_a_lessons_version_is_its_cells_not_their_outputs(tmp_path):
    course = make_course(tmp_path / "course")
    before = cluster.parts(course)
    nb_path = course / "solutions" / LESSON / f"{LESSON}.ipynb"
    nb = json.loads(nb_path.read_text())
    code = next(c for c in nb["cells"] if c["cell_type"] == "code")
    code["outputs"], code["execution_count"] = [{"output_type": "stream", "name": "stdout",
                                                  "text": "run again\n"}], 7
    nb_path.write_text(json.dumps(nb))
    assert cluster.parts(course) == before
    code["source"] = "x = 1\n"
    nb_path.write_text(json.dumps(nb))
    after = cluster.parts(course)
    assert {k for k in before if before[k] != after[k]} == {f"lesson {LESSON}"}
    differences = cluster.Course(before, cluster.version(before), "").differences(
        cluster.Course(after, cluster.version(after), ""))
    assert differences == (f"lesson {LESSON} {after[f'lesson {LESSON}']} there, "
                           f"{before[f'lesson {LESSON}']} here")


def test_a_machine_without_the_full_sandbox_never_joins(setting, tmp_path):
    """Fails closed: a worker that could only build a weaker sandbox (here: not root, so no own uid
    and no cgroups) stops with one line before it joins, and names the cause and the fix."""
    tmp, course, grid = setting
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    where = Path(tempfile.mkdtemp(prefix="course-nobody-"))
    try:
        where.chmod(0o755)
        course = make_course(where / "course")
        if os.geteuid() != 0 or subprocess.run(as_nobody + [sys.executable, "-c", "pass"],
                                               cwd=course).returncode:
            pytest.skip("needs root, and a Python that the account nobody can run")
        proc = subprocess.run(as_nobody + [sys.executable, "-m", "course_utils.grader.cluster",
                                           "--scheduler", grid.address, "--name", "weak"],
                              cwd=course, env={**env(course), "HOME": str(where)}, text=True,
                              capture_output=True, timeout=120)
        # a deployment tool's `dask worker --preload ...` as nobody: Dask logs the preload's error
        # and lets the worker join, but it offers no resource of the course, so it gets nothing
        grid.start("weak-plain", course, plain=True, run_as=tuple(as_nobody))
        joined = grid.wait_for("weak-plain")
        with grid.client() as client:
            offered = client.scheduler_info()["workers"][joined["weak-plain"]]["resources"]
        said = grid.logs["weak-plain"].read_text()
    finally:
        if "weak-plain" in grid.workers:
            grid.kill("weak-plain")
        shutil.rmtree(where, ignore_errors=True)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: "), proc.stderr
    assert "as root" in proc.stderr or "cannot grade" in proc.stderr, proc.stderr
    with grid.client() as client:
        assert "weak" not in {w["name"] for w in client.scheduler_info()["workers"].values()}
    assert not any(r.startswith(cluster.RESOURCE) for r in offered), offered
    assert "cannot build the full sandbox" in said or "cannot grade" in said, said[-2000:]


def test_the_preload_fails_a_worker_without_the_full_sandbox(monkeypatch):
    """`dask worker --preload course_utils.grader.cluster` (a deployment tool's worker): the same
    check, before the worker registers; with the sandbox, the resource of this course."""
    class Worker:
        class state:
            nthreads, total_resources, available_resources = 3, {}, {}
    monkeypatch.setattr(cluster, "sandbox_problem", lambda: "no cgroups here: start it as root")
    with pytest.raises(RuntimeError, match="no cgroups here"):
        cluster.dask_setup(Worker)
    assert not Worker.state.total_resources
    monkeypatch.setattr(cluster, "sandbox_problem", lambda: None)
    cluster.dask_setup(Worker)
    name = cluster.RESOURCE + cluster.this_course().version
    assert Worker.state.total_resources == Worker.state.available_resources == {name: 3}


def test_submissions_left_without_any_grading_worker_are_not_graded_exit_3(tmp_path, monkeypatch):
    """The only grading worker dies mid-run and none comes back within WORKERLESS_SECONDS: the
    submissions it had not finished get a `not graded: ... grade again` row (never a score), the
    others keep theirs, and the command exits 3."""
    import threading

    from course_utils.grader import gradefolder
    monkeypatch.setattr(cluster, "WORKERLESS_SECONDS", 3)
    course = make_course(tmp_path / "course")
    grid = Cluster(tmp_path)
    try:
        grid.start("only", course)
        grid.wait_for("only")
        folder = write_class(tmp_path / "class",
                             {f"s{i}": submission(fx_scale=SLEEPY) for i in range(3)})
        said = {}
        run = threading.Thread(target=lambda: said.update(code=gradefolder.main(
            [LESSON, str(folder), "--out", str(tmp_path / "out"), "--course", str(course),
             "--cluster", grid.address])))
        run.start()
        grid.wait_busy()
        grid.kill("only")
        run.join(timeout=300)
    finally:
        grid.close()
    assert said.get("code") == 3
    rows = (tmp_path / "out" / "grades.csv").read_text()
    assert "no grading worker of this course was left on the cluster" in rows
    assert sorted(r.split(",")[0] for r in rows.splitlines()[1:]) == ["s0", "s1", "s2"]


def test_a_worker_whose_checkout_changed_leaves_and_its_submission_is_graded_elsewhere(
        tmp_path):
    """A `git pull` under a running worker, here into its course_utils while it grades: the grade
    it made is never returned; it says why, leaves (grade-worker's exit status 3), and the
    submission waits for, and is graded by, a worker of the caller's course."""
    course, caller = make_course(tmp_path / "course"), make_course(tmp_path / "caller")
    grid = Cluster(tmp_path)
    try:
        grid.start("pulled", course)
        pulled = grid.wait_for("pulled")["pulled"]
        folder = write_class(tmp_path / "class", {"ada": submission(fx_scale=SLEEPY)})
        run = grade(caller, folder, tmp_path / "out", grid.address, start_new_session=True)
        grid.runs.append(run)
        with grid.client() as client:   # until it grades (past the checks before grading)
            deadline = time.monotonic() + 120
            while not client.run(lambda dask_worker: len(dask_worker.state.executing),
                                 workers=[pulled])[pulled] and time.monotonic() < deadline:
                time.sleep(0.1)
        time.sleep(0.5)
        started = cluster.parts(course)["course_utils"]
        with open(course / "course_utils" / "__init__.py", "a") as f:
            f.write("\n# pulled\n")
        assert grid.workers["pulled"].wait(timeout=120) == 3
        said = grid.logs["pulled"].read_text()
        assert ("grading worker pulled leaves the cluster: its checkout changed while it graded "
                f"(a git pull?): course_utils {cluster.parts(course)['course_utils']} now, "
                f"{started} when it started") in said, said
        grid.start("fresh", caller)
        stdout, stderr = run.communicate(timeout=300)
        tasks = graded_by(grid)
    finally:
        grid.close()
    assert run.returncode == 0, stderr
    assert "ada: 5 / 5" in stdout, stdout
    assert len(tasks["fresh"]) == 1, tasks


def test_a_checkout_changed_is_named_part_by_part(tmp_path):
    course = make_course(tmp_path / "course")
    started = cluster.Course.at(course)
    assert cluster.changed_since(started, course) == ""
    with open(course / "course_utils" / "__init__.py", "a") as f:
        f.write("\n# pulled\n")
    now = cluster.parts(course)["course_utils"]
    assert cluster.changed_since(started, course) == (
        f"course_utils {now} now, {started.parts['course_utils']} when it started")


def test_sandbox_slots_are_never_shared_on_a_machine(tmp_path, monkeypatch):
    """Two runs graded at once on one worker, or two workers on one machine: each sandbox holds a
    slot (its uid) that no other process or thread holds; one freed when its holder ends; what is
    not a lock file of ours is skipped; a folder others may write to is refused, and a machine that
    cannot take slots does not join."""
    from course_utils.grader.capabilities import SandboxUnavailable
    monkeypatch.setattr(cluster, "SLOT_LOCKS", tmp_path / "slots")
    monkeypatch.setattr(cluster, "SLOTS", range(4000, 4004))
    (tmp_path / "slots").mkdir(mode=0o700)
    (tmp_path / "slots" / "4000").mkdir()   # not a lock file: skipped
    with cluster.machine_slot() as first:
        assert first == 4001
        holder = subprocess.Popen(   # another process on this machine holds the next one
            [sys.executable, "-c", "import fcntl, os, sys, time\n"
             f"fd = os.open({str(tmp_path / 'slots' / '4002')!r}, os.O_RDWR | os.O_CREAT)\n"
             "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)"],
            stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout.readline() == "held\n"
            with cluster.machine_slot() as second:
                assert second == 4003
                with pytest.raises(SandboxUnavailable, match="none of the 4 sandbox slots"):
                    with cluster.machine_slot():
                        pass
        finally:
            holder.kill()
            holder.wait()
        with cluster.machine_slot() as third:
            assert third == 4002
    (tmp_path / "slots").chmod(0o777)
    with pytest.raises(SandboxUnavailable, match="is not this user's own folder"):
        with cluster.machine_slot():
            pass
    if os.geteuid() == 0:   # the rest of sandbox_problem holds as root only
        assert "cannot take sandbox slots" in cluster.sandbox_problem()
