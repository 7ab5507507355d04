"""A class graded on a Dask cluster of grading machines (dask.distributed).

    bash course.sh grade-worker --scheduler tls://HOST:8786 [--jobs N]   on each grading machine
    bash course.sh grade LESSON FOLDER --out OUT --cluster tls://HOST:8786   where the class is

The caller (course_utils.grader.gradefolder) reads the submissions and sends each one's bytes to
the cluster as a task; a worker grades it exactly as `bash course.sh grade` does on one machine
(submission.grade_one: the full sandbox, and its own reference run of the lesson, shared by its
jobs) and sends the Result back; the caller writes grades.csv and the feedback pages as a local run
does. Scheduling is Dask's: a task goes to a free worker, and the tasks of a worker that dies are
run again on another (the scheduler's doing), so every submission's result reaches the caller once.

Which workers grade: a grading worker (serve) offers the Dask resource `course-VERSION`, VERSION a
hash of what decides a grade there (`parts`: course_utils, each lesson's instructor notebook, torch
and Python), and every task asks for the caller's; a worker of another commit, or a plain `dask
worker`, is never given a submission, and the caller names each refused one with both versions. A
worker checks that it can build the full sandbox (own uid, memory and CPU cgroups: as root) before
it joins (grade-worker stops; a plain `dask worker --preload` joins without the resource, so it is
given nothing): it fails closed, never grading with less protection.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import functools
import hashlib
import json
import logging
import os
import platform
import re
import socket
import stat
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import CancelledError
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from course_utils.grader.reports import BadInput, OneLineParser, at_least_one, clean, one_line
from course_utils.grader.submission import grade_one, read_submission, reference_failed

if TYPE_CHECKING:
    from course_utils.grader.grade import Result
    from course_utils.grader.lessonfile import Lesson
    from course_utils.grader.worker import Limits

ROOT = Path(__file__).resolve().parents[2]   # the checkout this worker's code comes from
RESOURCE = "course-"          # + the version: what a grading worker offers and a task asks for
CONNECT_SECONDS = 10          # to reach the scheduler
START_SECONDS = 300           # for a grading worker's own start (its sandbox check, the hashing)
WORKERLESS_SECONDS = 120      # submissions wait this long for a grading worker, then are not graded
GONE_SECONDS = 20             # the scheduler's connection lost this long: the run stops
# A grading worker's sandboxes take their slots (uid FIRST_UID + slot) here, one lock file each,
# held while grading: two runs on one cluster, or two workers sharing /run, never share a uid.
# A local run's slots are below 4000 (gradefolder, nbgrader's autograde).
SLOTS = range(4000, 5000)
SLOT_LOCKS = Path("/run/course-grader-slots")
LEFT = "COURSE_GRADER_LEFT"   # where a grading worker that left says why (grade-worker's exit 3)


ADDRESS = re.compile(r"(tcp|tls)://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):([0-9]{1,5})")


class SchedulerGone(BadInput):
    """The scheduler went away mid-run: like bad input, a one-line error, exit status 2 and nothing
    written (grade again when it is back)."""

    def __init__(self, address: str, how: str = ""):
        super().__init__(f"the Dask scheduler at {clean(address)} went away mid-run{how}: nothing "
                         "written; grade again when it is back")


# ---------------------------------------------------------------------------------------------
# What decides a grade on a checkout

def _digest(chunks) -> str:
    h = hashlib.sha256()
    for chunk in chunks:
        h.update(len(chunk).to_bytes(8, "little"))
        h.update(chunk)
    return h.hexdigest()[:12]


def _notebook_digest(path: Path) -> str:
    """The cells' types, sources and nbgrader metadata: outputs and run counts decide no grade."""
    cells = json.loads(path.read_bytes()).get("cells", [])
    return _digest([json.dumps([c.get("cell_type"), c.get("source"),
                                c.get("metadata", {}).get("nbgrader")], sort_keys=True).encode()
                    for c in cells])


def parts(root: Path = ROOT) -> dict[str, str]:
    """{part: its version} of the course at root: course_utils (every file), each lesson's
    instructor notebook (solutions/NAME/NAME.ipynb), torch and Python."""
    package = root / "course_utils"
    files = sorted(p for p in package.rglob("*")
                   if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")
    found = {"course_utils": _digest([p.relative_to(package).as_posix().encode() + b"\0"
                                      + p.read_bytes() for p in files]),
             "torch": metadata.version("torch"), "python": platform.python_version()}
    for nb in sorted(root.glob("solutions/*/*.ipynb")):
        if nb.stem == nb.parent.name:
            found[f"lesson {nb.stem}"] = _notebook_digest(nb)
    return found


def version(found: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(found, sort_keys=True).encode()).hexdigest()[:16]


def commit(root: Path = ROOT) -> str:
    """The checkout's git commit (+ "-dirty" with uncommitted changes), for people; "" without
    git."""
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--",
                                "course_utils", "solutions"], capture_output=True, text=True,
                               timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    if head.returncode:
        return ""
    return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


@dataclass(frozen=True)
class Course:
    parts: dict
    version: str
    commit: str

    @classmethod
    def at(cls, root: Path) -> "Course":
        found = parts(root)
        return cls(found, version(found), commit(root))

    def differences(self, there: "Course", names: tuple[str, str] = ("there", "here")) -> str:
        """What differs, in a line: 'course_utils 1a2b.. there, 9f8e.. here; ...'."""
        keys = sorted(set(self.parts) | set(there.parts))
        said = [f"{k} {there.parts.get(k, 'missing')} {names[0]}, "
                f"{self.parts.get(k, 'missing')} {names[1]}"
                for k in keys if self.parts.get(k) != there.parts.get(k)]
        if (self.commit or there.commit) and self.commit != there.commit:
            said.append(f"commit {there.commit or 'unknown'} {names[0]}, "
                        f"{self.commit or 'unknown'} {names[1]}")
        return "; ".join(said)


@functools.lru_cache(maxsize=1)
def this_course() -> Course:
    """The course this process's code is (a worker's: computed once, when it starts)."""
    return Course.at(ROOT)


# ---------------------------------------------------------------------------------------------
# A grading worker's side

def describe() -> Course:
    """Run on each worker by the caller (Client.run): its course."""
    return this_course()


def changed_since(course: Course, root: Path = ROOT) -> str:
    """"" where the checkout at root still is course (the files that decide a grade); else what
    changed, in a line (a `git pull` under a running worker)."""
    found = parts(root)
    if version(found) == course.version:
        return ""
    return course.differences(Course(found, version(found), ""), ("now", "when it started"))


@contextlib.contextmanager
def machine_slot():
    """A sandbox slot (SLOTS) that no other grading on this machine holds until the block ends:
    one flock'd file per slot in SLOT_LOCKS, root's own folder (checked once opened, and the files
    opened in it without following links); a slot whose uid is an account here is skipped.
    SandboxUnavailable where none can be taken."""
    from course_utils.grader.capabilities import SandboxUnavailable
    from course_utils.grader.rootworker import _account
    from course_utils.grader.sandbox import FIRST_UID
    SLOT_LOCKS.mkdir(mode=0o700, exist_ok=True)
    folder = os.open(SLOT_LOCKS, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        held = os.fstat(folder)
        if held.st_uid != os.geteuid() or held.st_mode & 0o022 or not stat.S_ISDIR(held.st_mode):
            raise SandboxUnavailable(f"{SLOT_LOCKS} is not this user's own folder (owner uid "
                                     f"{held.st_uid}, mode {stat.filemode(held.st_mode)}): "
                                     "remove it")
        for slot in SLOTS:
            try:
                fd = os.open(str(slot), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600,
                             dir_fd=folder)
            except OSError as e:   # not a file of ours (a link, a folder): not a slot to take
                if e.errno in (errno.ELOOP, errno.EISDIR, errno.ENOTDIR, errno.ENXIO):
                    continue
                raise
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:   # held by another grading
                os.close(fd)
                continue
            except BaseException:
                os.close(fd)
                raise
            try:
                if not _account(FIRST_UID + slot):
                    yield slot
                    return
            finally:
                os.close(fd)   # the lock goes with it (and with the process, however it ends)
    finally:
        os.close(folder)
    raise SandboxUnavailable(f"none of the {len(SLOTS)} sandbox slots of this machine is free")


def _leave(why: str) -> NoReturn:
    """This worker closes (with its nanny: grade-worker stops, exit status 3), saying why; the
    submission it holds goes back to the scheduler (distributed.Reschedule) for another worker."""
    from distributed import Reschedule, get_worker
    worker = get_worker()
    # closing first (its status is `closing` before this task comes back, so the scheduler gives
    # it nothing more); what follows may fail without keeping it from leaving
    worker.loop.add_callback(worker.close, nanny=True, reason=f"course-grader: {why}"[:200])
    try:
        print(f"error: grading worker {worker.name} leaves the cluster: {why}", file=sys.stderr,
              flush=True)
        if marker := os.environ.get(LEFT):   # for grade-worker's exit status
            Path(marker).write_text(why)
    except OSError:
        pass
    raise Reschedule()


class ReferenceFailed(RuntimeError):
    """The lesson's reference run failed on a worker (as it would on every one): the caller
    stops, nothing graded, as a local run does."""


def grade_remote(expected: str, lesson_name: str, student: str, data: bytes, notes: list[str],
                 limits: Limits) -> Result:
    """One submission, graded on this worker with the full sandbox and its own reference run of
    the lesson (shared by this worker's jobs, closed when idle: grade.reference_for). A worker
    whose checkout changed since it started, that lost the full sandbox or cannot take a sandbox
    slot never grades: it leaves, and the submission goes to another worker. A reference run that
    fails is ReferenceFailed (the caller stops); one the machine held up, ReferenceOverloaded
    (the caller's row: not graded, grade again)."""
    from distributed import get_worker

    from course_utils.grader.capabilities import SandboxUnavailable
    from course_utils.grader.grade import ReferenceOverloaded, reference_for
    from course_utils.grader.rootworker import check_sandbox

    mine = this_course()
    if mine.version != expected:   # the resource keeps this from happening; never grade if it does
        _leave(f"its course is {mine.version}, the caller's {expected}")
    limits = limits.shared_by(get_worker().state.nthreads)
    try:
        warning = check_sandbox(limits)   # fails closed: the full sandbox or nothing
    except SandboxUnavailable as e:
        warning = str(e)
    if warning:
        _leave(f"it lost the full sandbox ({warning})")
    if changed := changed_since(mine):
        _leave(f"its checkout changed since it started (a git pull?): {changed}; start its "
               "`bash course.sh grade-worker` again")
    source = ROOT / "solutions" / lesson_name / f"{lesson_name}.ipynb"
    with contextlib.ExitStack() as stack:
        try:
            reference = stack.enter_context(reference_for(source, limits))
        except ReferenceOverloaded:   # this machine's doing: the caller's row says grade again
            raise
        except RuntimeError as e:   # the lesson's (every worker's): the caller stops, as locally
            raise ReferenceFailed(reference_failed(lesson_name, e)) from None
        try:
            slot = stack.enter_context(machine_slot())
        except (OSError, SandboxUnavailable) as e:   # this machine's: it grades nothing more
            _leave(f"it cannot take a sandbox slot ({one_line(e)})")
        result = grade_one(reference.lesson, reference, student, data, notes, limits, slot)
    if changed := changed_since(mine):   # while it graded: that grade may mix two checkouts
        _leave(f"its checkout changed while it graded (a git pull?): {changed}; start its "
               "`bash course.sh grade-worker` again")
    return result


def sandbox_problem() -> str | None:
    """Why this machine cannot grade with the full sandbox (own uid, memory and CPU cgroups), the
    cause and the fix; None where it can."""
    from course_utils.grader.capabilities import SandboxUnavailable
    from course_utils.grader.rootworker import check_sandbox
    from course_utils.grader.worker import Limits
    try:
        warning = check_sandbox(Limits())
    except SandboxUnavailable as e:
        return f"this machine cannot grade: {e}"
    if warning:
        return ("this machine cannot build the full sandbox (own uid, memory and CPU cgroups), "
                f"so it does not join the cluster: {warning}. Start the worker as root (sudo bash "
                "course.sh grade-worker ...); a grading worker never grades with less protection")
    try:
        with machine_slot():
            pass
    except (OSError, SandboxUnavailable) as e:
        fix = (f"repair or remove {SLOT_LOCKS}" if os.geteuid() == 0
               else "start the worker as root (sudo bash course.sh grade-worker ...)")
        return (f"this machine cannot take sandbox slots in {SLOT_LOCKS} ({one_line(e)}), so it "
                f"does not join the cluster: {fix}")
    return None


def dask_setup(worker) -> None:
    """Dask's preload hook: `dask worker --preload course_utils.grader.cluster`, run from the
    checkout (what grade-worker starts; dask-jobqueue and dask-kubernetes can start the same). It
    raises where the full sandbox cannot be built (Dask logs it and starts the worker without the
    resource, so it is given no submission); else the worker offers
    RESOURCE + its course's version, one per thread, when it registers with the scheduler."""
    if problem := sandbox_problem():
        raise RuntimeError(problem)
    name, jobs = RESOURCE + this_course().version, worker.state.nthreads
    worker.state.total_resources[name] = worker.state.available_resources[name] = jobs


async def _reach(scheduler: str) -> str | None:
    """Why the scheduler cannot be reached (one line), None where it can."""
    from distributed.comm import connect
    try:
        arguments = check_tls(scheduler, "worker")
    except BadInput as e:
        return str(e)
    try:
        comm = await connect(scheduler, timeout=CONNECT_SECONDS, **arguments)
    except (OSError, asyncio.TimeoutError, TimeoutError, ValueError, TypeError) as e:
        return unreachable(scheduler, e)
    await comm.close()
    return None


def unreachable(address: str, error: BaseException) -> str:
    """Why the scheduler at address could not be reached, and what to do, in a line."""
    from distributed.comm.core import FatalCommClosedError
    why = one_line(error, 200)
    if address.startswith("tls://") and isinstance(error, FatalCommClosedError):
        return (f"no TLS connection to the Dask scheduler at {clean(address)} ({why}): this "
                "machine's certificate must be signed by the CA the cluster's certificates are")
    return (f"no Dask scheduler at {clean(address)} ({why}): start one there (dask scheduler) or "
            "check the address")


async def _serve(scheduler: str, jobs: int, name: str, left: Path) -> int:
    from distributed import Nanny
    course = this_course()
    if problem := await _reach(scheduler):
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        # a nanny: the worker it runs is started again if it dies; the sandbox, not Dask, limits
        # memory (memory_limit=0: no Dask memory limit, which would count the learners' processes)
        nanny = Nanny(scheduler, nthreads=jobs, preload=["course_utils.grader.cluster"],
                      name=name, memory_limit=0, death_timeout=START_SECONDS,
                      env={"PYTHONPATH": str(ROOT), LEFT: str(left)}, dashboard=False)
        await asyncio.wait_for(nanny.start(), START_SECONDS)
    except (asyncio.TimeoutError, TimeoutError):
        print(f"error: the grading worker did not start within {START_SECONDS} s (its sandbox "
              f"check, or reaching the scheduler at {clean(scheduler)}): is this machine "
              "overloaded? Start it again", file=sys.stderr)
        return 2
    except Exception as e:   # Dask's "failed to start", from the cause: the scheduler gone
        # meanwhile, the worker's process (a failing preload is only logged: it joins, offering
        # no course, and is given nothing)
        print(f"error: the grading worker did not start ({one_line(e.__cause__ or e)})",
              file=sys.stderr)
        return 2
    print(f"grading worker {name} joined {clean(scheduler)}, {jobs} at a time: course "
          f"{course.version} (commit {course.commit or 'unknown'})", flush=True)
    await nanny.finished()
    if left.exists():
        print(f"grading worker {name} stopped: it left the cluster ({left.read_text()})",
              file=sys.stderr, flush=True)
        return 3
    print(f"grading worker {name} stopped: the scheduler at {clean(scheduler)} went away, or it "
          "was told to stop", flush=True)
    return 0


def serve(argv: list[str] | None = None) -> int:
    parser = OneLineParser(
        prog="bash course.sh grade-worker",
        description="Join a Dask cluster as a grading machine: it grades the submissions that "
                    "`bash course.sh grade ... --cluster` sends, in the full sandbox (run it as "
                    "root).")
    parser.add_argument("--scheduler", required=True,
                        help="the scheduler, e.g. tls://HOST:8786 (tcp:// on this machine only)")
    parser.add_argument("--jobs", type=at_least_one, default=max(1, (os.cpu_count() or 2) // 2),
                        help="submissions graded at once here (default: half the cores)")
    parser.add_argument("--name", default=None, help="this worker's name (default: host-pid)")
    args = parser.parse_args(argv)
    try:
        check_address(args.scheduler)
    except BadInput as e:
        parser.exit(2, f"error: {e}\n")
    if problem := sandbox_problem():   # said here in one line; dask_setup checks it again
        parser.exit(2, f"error: {problem}\n")
    name = args.name or f"{socket.gethostname()}-{os.getpid()}"
    try:
        with _quiet(), tempfile.TemporaryDirectory(prefix="course-grade-worker-") as tmp:
            return asyncio.run(_serve(args.scheduler, args.jobs, name, Path(tmp) / "left"))
    except KeyboardInterrupt:
        return 0


# ---------------------------------------------------------------------------------------------
# The caller's side

LOOPBACK = ("127.0.0.1", "localhost", "[::1]")


def check_tls(address: str, role: str) -> dict:
    """Dask's connection arguments for role ("client" or "worker") here; BadInput where address
    is tls:// and this machine has no TLS settings for that role."""
    from distributed.security import Security
    arguments = Security().get_connection_args(role)
    if address.startswith("tls://") and arguments.get("ssl_context") is None:
        raise BadInput(f"{clean(address)} is tls:// but this machine has no Dask TLS settings for "
                       f"a {role}: set distributed.comm.tls.ca-file, .{role}.cert and .{role}.key "
                       "(~/.config/dask/distributed.yaml or DASK_DISTRIBUTED__COMM__TLS__... "
                       "variables; docs/instructors.md)")
    return arguments


def check_address(address: str) -> str:
    """address, or BadInput where it is not a scheduler's address, or is plain tcp:// to another
    machine: Dask's tcp:// has no login, and whoever reaches a scheduler or a worker can run code
    on the grading workers (as root) or pose as one; between machines only tls://, with the
    mutual certificates of Dask's settings (distributed.comm.tls)."""
    match = ADDRESS.fullmatch(address)
    if not match:
        raise BadInput(f"{clean(address)!r} is not a Dask scheduler's address: give "
                       "tls://HOST:PORT, or tcp://127.0.0.1:PORT on this machine (the address "
                       "`dask scheduler` prints, port 8786 by default)")
    if match[1] == "tcp" and match[2] not in LOOPBACK:
        raise BadInput(f"{clean(address)} is plain tcp:// to another machine: anyone who can reach "
                       "it could run code as root on the grading workers or pose as one; use "
                       "tls://HOST:PORT with mutual certificates (Dask's distributed.comm.tls "
                       "settings on every machine, docs/instructors.md)")
    return address


@contextlib.contextmanager
def _quiet():
    """The client's and the nanny's INFO lines and logged tracebacks off while the block runs (what
    goes wrong is said in one line); the levels as they were after it."""
    import distributed  # noqa: F401  (its loggers exist once imported)
    names = [n for n in ["distributed", *logging.root.manager.loggerDict]
             if n.startswith("distributed")]
    before = {n: logging.getLogger(n).level for n in names}
    for n in names:
        logging.getLogger(n).setLevel(logging.WARNING)
    for n in ["distributed.client", "distributed.utils"]:   # tracebacks when it goes away
        logging.getLogger(n).setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for n, level in before.items():
            logging.getLogger(n).setLevel(level)


def _connect(address: str):
    from distributed import Client
    check_tls(address, "client")   # else Dask's Client fails, and its __del__ prints a traceback
    try:
        return Client(address, timeout=CONNECT_SECONDS, set_as_default=False)
    except (OSError, TimeoutError, ValueError, TypeError) as e:
        raise BadInput(f"{unreachable(address, e)}; nothing graded") from None


def _grading_workers(client) -> dict[str, dict]:
    return {addr: w for addr, w in client.scheduler_info(n_workers=-1)["workers"].items()
            if any(r.startswith(RESOURCE) for r in w.get("resources", {}))}


def check_workers(client, course: Course, address: str) -> list[str]:
    """The grading workers of this course, waiting up to WORKERLESS_SECONDS for the first (a batch
    queue may start them late); every other grading worker is named on stderr with both versions.
    BadInput where none came."""
    deadline, named, waiting = time.monotonic() + WORKERLESS_SECONDS, set(), False
    while True:
        if client.status != "running":   # else scheduler_info answers from its cache
            raise SchedulerGone(address)
        workers = _grading_workers(client)
        ours = [a for a, w in workers.items() if RESOURCE + course.version in w["resources"]]
        if others := [a for a in workers if a not in ours and a not in named]:
            found = client.run(describe, workers=others, on_error="return")
            for addr in others:
                there = found.get(addr)
                why = (course.differences(there) if isinstance(there, Course)
                       else f"it could not say ({type(there).__name__})")
                print(f"error: refused the grading worker {clean(addr)}: its course differs from "
                      f"this checkout's ({why}); check out the same commit there and start its "
                      "`bash course.sh grade-worker` again", file=sys.stderr)
            named.update(others)
        if ours:
            return ours
        if time.monotonic() > deadline:
            raise BadInput(f"no grading worker of this course at {clean(address)} in "
                           f"{WORKERLESS_SECONDS} s" + (f" ({len(named)} refused, above)"
                                                         if named else "")
                           + ": start `bash course.sh grade-worker --scheduler "
                           f"{clean(address)}` (as root) on a grading machine; nothing graded")
        if not waiting:
            print(f"waiting up to {WORKERLESS_SECONDS} s for a grading worker of this course at "
                  f"{clean(address)}", flush=True)
            waiting = True
        time.sleep(1)


def not_graded(lesson: Lesson, student: str, notes: list[str], why: str) -> Result:
    """A submission the cluster could not grade (no fault of the learner's): no score; the
    command exits 3 (grade again)."""
    from course_utils.grader.grade import Outcome, Result, Status
    return Result(student, lesson.name,
                  {t.gid: Outcome(0.0, t.points, f"not graded: {why}, grade again",
                                  Status.OVERLOADED) for t in lesson.tests}, list(notes))


def _why(error: BaseException) -> str:
    from distributed import KilledWorker
    if isinstance(error, KilledWorker):   # Dask's allowed-failures: a worker leaving counts too
        return "the grading workers that took it died or left too often (Dask's allowed-failures)"
    return f"the worker failed ({one_line(error, 300)})"


def grade_on_cluster(address: str, lesson: Lesson, source: Path, course_root: Path,
                     submissions: dict[str, Path], limits: Limits) -> list[Result]:
    """Grade the submissions on the cluster whose scheduler is at address; the results, one per
    submission. BadInput (nothing graded) where the lesson is not the course's by name, there is
    no scheduler or no grading worker of this course; SchedulerGone where the scheduler goes away
    mid-run."""
    named = Path(course_root) / "solutions" / lesson.name / f"{lesson.name}.ipynb"
    if not named.is_file() or named.resolve() != Path(source).resolve():
        raise BadInput(f"--cluster grades a lesson of the course by name (each worker reads "
                       f"solutions/LESSON/LESSON.ipynb from its own checkout), not "
                       f"{clean(source)}")
    if limits.sandbox != "required":
        raise BadInput("--sandbox optional cannot be used with --cluster: a grading worker "
                       "always grades in the full sandbox")
    check_address(address)
    course = Course.at(Path(course_root))
    with _quiet():
        client = _connect(address)
        try:
            check_workers(client, course, address)
            return _gather(client, course, lesson, submissions, limits)
        except BadInput:
            raise
        except Exception as e:   # the scheduler's connection, mid-call
            from distributed.client import ClosedClientError
            if client.status == "running" and not isinstance(
                    e, (OSError, CancelledError, ClosedClientError)):
                raise
            raise SchedulerGone(address, f" ({one_line(e)[:200]})") from None
        finally:
            try:
                client.close(timeout=CONNECT_SECONDS)
            except Exception:   # closing a client whose scheduler is gone: nothing left to do
                pass


def _gather(client, course: Course, lesson: Lesson, submissions: dict[str, Path],
            limits: Limits) -> list[Result]:
    """Each submission sent as a task, and its result collected as it comes (once)."""
    from distributed import wait

    token = uuid.uuid4().hex[:8]
    futures, notes_of = {}, {}
    for n, (student, path) in enumerate(sorted(submissions.items())):
        data, notes = read_submission(path)
        notes_of[student] = notes
        future = client.submit(grade_remote, course.version, lesson.name, student, data, notes,
                               limits, key=f"grade-{lesson.name}-{n}-{token}",
                               resources={RESOURCE + course.version: 1}, pure=False)
        futures[future] = student
    results: dict[str, Result] = {}
    pending, lonely, unreachable = set(futures), None, None
    while pending:
        try:
            with client.as_current():
                done, _ = wait(pending, timeout=2, return_when="FIRST_COMPLETED")
        except TimeoutError:
            done = set()
        for future in done:
            student = futures[future]
            if future.status == "lost":   # its worker died holding it: Dask computes it again
                continue
            if future.status == "cancelled":   # the client lost the scheduler
                raise CancelledError()
            try:   # bounded: a result lost while fetched waits in `pending` again, not here
                if future.status == "error":   # its task's own (KilledWorker, ReferenceFailed)
                    error = future.exception(timeout=GONE_SECONDS)
                    if isinstance(error, ReferenceFailed):
                        raise BadInput(str(error))
                    value = not_graded(lesson, student, notes_of[student], _why(error))
                else:
                    value = future.result(timeout=GONE_SECONDS)
            except TimeoutError:
                continue
            except BadInput:
                raise
            except Exception:
                if future.status == "error":   # it failed while fetched: the next round says why
                    continue
                raise
            results[student] = value
            future.release()   # collected: the worker need not keep it
            pending.discard(future)
        if not pending:
            break
        now = time.monotonic()
        if client.status != "running":
            unreachable = unreachable or now
            if now - unreachable > GONE_SECONDS:
                raise CancelledError()
            continue
        unreachable = None
        if _grading_workers_of(client, course):
            lonely = None
        elif (lonely := lonely or now) and now - lonely > WORKERLESS_SECONDS:
            for future in pending:
                student = futures[future]
                results[student] = not_graded(
                    lesson, student, notes_of[student],
                    f"no grading worker of this course was left on the cluster for "
                    f"{WORKERLESS_SECONDS} s")
            client.cancel(list(pending))
            break
    return [results[s] for s in sorted(results)]


def _grading_workers_of(client, course: Course) -> bool:
    try:
        return any(RESOURCE + course.version in w["resources"]
                   for w in _grading_workers(client).values())
    except Exception:   # asked while the connection drops: the next poll sees the status
        return True


if __name__ == "__main__":
    sys.exit(serve())
