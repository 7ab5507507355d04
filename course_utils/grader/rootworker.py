"""A learner's worker with the full sandbox for a grader that is not root, through one sudo rule.

On a class hub the instructor grades as themselves (nbgrader autograde in their JupyterLab), and a
grader that is not root gets only the "userns" sandbox: the learner's code keeps the instructor's
uid outside its namespaces and has no memory cgroup, so the memory checks of lessons 05 and 06
cannot be measured from outside. `bash course.sh hub` (hub/classroom.py, allow_full_sandbox) lets
the instructor run exactly one command as root, without a password and without arguments:

    sudo -n $COURSE_ROOT_WORKER      # STATE/rootworker, root's:
                                       python -I -m course_utils.grader.rootworker

It serves one worker (or holds one page-cache pin, below), driven by the grader through this
process's stdin and stdout, one JSON line each way: a learner's (a course_utils.grader.worker.Worker
built as root: its own uid, memory, pids and CPU cgroups, peaks read by the kernel), or the
reference run (the instructor's notebook) as the instructor, the user who ran sudo (SUDO_UID): root
never runs a notebook the instructor can edit as root, but puts the instructor's process in a memory
cgroup of its own and gives it that cgroup's peak files alone, so that the reference measures its
probes' peaks as a root grader's does and lessons 05 and 06's memory checks are judged on the hub
too.

    {"op": "start", "limits": {...Limits' fields}, "slot": 3}  -> {"ok": true, "peak": true,
                                                                   "pid": 4242}
    {"op": "start", "mode": "reference", "limits": {...}}     -> {"ok": true, "peak": false,
                                                                   "pid": 4243}
    {"op": "send", "command": {...}, "timeout": 60}            -> {"answer": {...}, "own": 1.2}
                                                                  or {"died": "why",
                                                                      "overloaded": false,
                                                                      "own": ...}
    {"op": "reset_peak"} / {"op": "peak_bytes"} / {"op": "file_bytes"} -> {"value": ...}
    {"op": "forbid_processes"} / {"op": "allow_processes"}   -> {"value": true/false/null}
                                                                (or "died", as send)
    {"op": "capabilities"}                                     -> {"isolation": "root",
                                                                   "warning": ..., "memory": ...}
    {"op": "pin", "pid": 4243}                                 -> {"files": ..., "bytes": ...,
                                                                   "skipped": ..., "seconds": ...}

A pin (course_utils.grader.pagecache) is made here, as root, and held by this process until the end
of its input: only root sees which pages of root's files are cached (Linux tells a user that every
page of a file it may not write is cached, so a pin made as the instructor read about 2.5 GB of
files from disk and held them all). It walks root's own folders (pagecache.folders), first the files
mapped by `pid` (or null), which must be a process of the caller (the reference worker); the caller
learns only the counts.

What it trusts of its caller: nothing but these requests, checked (a Limits of numbers, a slot in
range, a command that is a JSON object); it reads no file the caller names (a pin reads the maps of
the caller's own process and maps, of the files listed there, regular files in root's own folders,
never through a link), and the code it is sent
runs in the sandbox as the learner's uid, or (a reference) outside it as the caller's own uid, as
the caller could run it anyway. -I keeps the caller's folder and PYTHON* variables out of root's
imports, and it sets its own PATH (the system's folders): sudo may pass on the caller's. It refuses
to start a learner's worker with less than the root sandbox (fails closed). At
the end of its input (the grader is done, or died) it kills the worker and exits: the grader, which
cannot signal a root process, stops a worker by closing the pipe.

SudoWorker is the grader's side, with Worker's methods; learner_worker() and reference_worker() give
the grader a SudoWorker where $COURSE_ROOT_WORKER is set, else a Worker; check_sandbox() fails
closed where that rule does not work.
"""

import functools
import json
import os
import pwd
import select
import subprocess
import sys
from dataclasses import fields

from course_utils.grader.capabilities import (SandboxUnavailable, isolation, isolation_warning,
                                               measures_memory)
from course_utils.grader.sandbox import FIRST_UID, SYSTEM_PATH
from course_utils.grader.worker import Limits, Overloaded, Worker, WorkerDied
from course_utils.grader.worker import check_sandbox as worker_check_sandbox

# seconds a request may take past the worker's own overload cut-off (Limits.overload_factor)
# before the grader gives up on it
HEADROOM = 60


def command() -> list[str] | None:
    """The one command the hub's sudo rule allows, as the grader runs it: sudo on
    $COURSE_ROOT_WORKER (the hub gives it to the instructor's server); None where it is not set (no
    hub: Worker as usual)."""
    path = os.environ.get("COURSE_ROOT_WORKER")
    return ["sudo", "-n", path] if path else None


@functools.lru_cache(maxsize=1)
def sudo_allowed() -> bool:
    """Whether this user may run command() as root without a password (`sudo -n -l`)."""
    try:
        return subprocess.run(["sudo", "-n", "-l", command()[-1]], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired, TypeError):
        return False


def through_sudo() -> bool:
    """Whether this grader's workers come from the hub's rule: $COURSE_ROOT_WORKER set, and not
    root."""
    return command() is not None and os.geteuid() != 0


def learner_worker(limits: Limits, slot: int = 0):
    """The worker a learner's answers run in: a SudoWorker (the root sandbox) where
    $COURSE_ROOT_WORKER names the hub's rule and this grader is not root, else a Worker of mode
    "learner". Same methods."""
    return SudoWorker(limits, slot) if through_sudo() else Worker("learner", limits, slot)


def reference_worker(limits: Limits):
    """The worker the instructor's notebook runs in: through the hub's rule (as learner_worker), a
    SudoWorker that runs it as this user in a memory cgroup root made, so its probes' peaks are
    measured; else a Worker of mode "reference"."""
    return SudoWorker(limits, mode="reference") if through_sudo() else Worker("reference", limits)


def check_sandbox(limits: Limits) -> str | None:
    """worker.check_sandbox for the sandbox learner_worker() gives: through the hub's rule, the root
    worker's own warning (None: the full sandbox), and SandboxUnavailable, naming the cause and the
    fix, where the rule is named but does not work: it fails closed, never into a weaker sandbox
    unasked."""
    if not through_sudo():
        return worker_check_sandbox(limits)
    if not sudo_allowed():
        raise SandboxUnavailable("$COURSE_ROOT_WORKER names the hub's grading sandbox "
                                 f"({command()[-1]}), but sudo does not let this user run it: run "
                                 "`sudo bash course.sh hub` again to restore the rule. To grade in "
                                 "the weaker user-namespace sandbox instead (no memory cgroup), "
                                 "unset COURSE_ROOT_WORKER")
    found = capabilities()
    if found.get("isolation") != "root":
        raise SandboxUnavailable("the hub's root worker gives no root sandbox here: "
                                 f"{found.get('warning')}")
    return found.get("warning")


# --- root's side ----------------------------------------------------------------------------------

def _limits(data, mode: str):
    names = {f.name for f in fields(Limits)}
    if type(data) is not dict or not set(data) <= names:
        raise ValueError(f"limits must be an object with keys among {sorted(names)}")
    limits = Limits(**data)
    if limits.sandbox != "required" and mode == "learner":
        raise ValueError("the root worker always grades with the full sandbox")
    return limits


def _start(request: dict) -> Worker:
    """The worker a start request asks for, started: a learner's in the sandbox, or the caller's
    reference."""
    mode, worker = request.get("mode", "learner"), None
    if mode == "learner":
        slot = request.get("slot")
        slot = slot if type(slot) is int else -1
        if _account(FIRST_UID + slot):
            raise ValueError(f"slot {slot}: uid {FIRST_UID + slot} is an account of this machine")
        worker = Worker("learner", _limits(request.get("limits"), mode), slot=slot)
    elif mode == "reference":
        worker = Worker("reference", _limits(request.get("limits"), mode), run_as=_caller())
    else:
        raise ValueError(f"mode must be 'learner' or 'reference', got {mode!r}")
    try:
        worker.start()
    except BaseException:
        worker.kill()
        raise
    return worker


def _caller() -> int:
    """The uid of the user who ran sudo (sudo sets SUDO_UID; the caller cannot): the reference runs
    as them."""
    uid = os.environ.get("SUDO_UID", "")
    if not uid.isdigit() or int(uid) == 0 or not _account(int(uid)):
        raise ValueError("a reference run is the caller's own: run through sudo by a user other "
                         "than root")
    return int(uid)


def _account(uid: int) -> bool:
    """Whether uid belongs to an account (the sandbox's uids must be nobody's)."""
    try:
        pwd.getpwuid(uid)
        return True
    except (KeyError, OverflowError):
        return False


def _pin(request: dict) -> dict:
    """Map the cached pages of the shared files in this process (kept until it exits); the first
    files are those mapped by the caller's process request["pid"]."""
    from course_utils.grader import pagecache
    pid = request.get("pid")
    if pid is not None and (type(pid) is not int or pid <= 0):
        raise ValueError("pin takes the pid of one of the caller's processes, or null")
    if pid is not None and os.stat(f"/proc/{pid}").st_uid != _caller():
        raise ValueError(f"process {pid} is not the caller's")
    return pagecache.hold(pid)


def _serve(worker, request: dict) -> dict:
    op = request.get("op")
    if op == "send":
        command, timeout = request.get("command"), request.get("timeout")
        if (type(command) is not dict or type(timeout) not in (int, float)
                or not 0 < timeout <= 86400):
            return {"error": "send needs a command object and a timeout in (0, 86400] seconds"}
        before = worker.own_seconds
        try:
            return {"answer": worker.send(command, timeout), "own": worker.own_seconds - before}
        except WorkerDied as e:
            return {"died": str(e), "overloaded": isinstance(e, Overloaded),
                    "own": worker.own_seconds - before}
    if op == "reset_peak":
        worker.reset_peak()
        return {"value": None}
    if op == "peak_bytes":
        return {"value": worker.peak_bytes()}
    if op == "file_bytes":
        return {"value": worker.file_bytes()}
    if op == "forbid_processes":
        try:
            return {"value": worker.forbid_processes()}
        except WorkerDied as e:
            return {"died": str(e), "overloaded": False, "own": 0.0}
    if op == "allow_processes":
        return {"value": worker.allow_processes()}
    return {"error": f"unknown op {op!r}"}


def main() -> int:
    if os.geteuid() != 0:
        print(json.dumps({"error": "the root worker runs as root (through the hub's sudo rule)"}),
              flush=True)
        return 2
    # what root runs (unshare, setpriv) is the system's, whatever sudo passed on
    os.environ["PATH"] = SYSTEM_PATH
    worker, pinned = None, False
    try:
        for line in sys.stdin:
            try:
                request = json.loads(line)
            except ValueError:
                request = None
            if type(request) is not dict:
                reply = {"error": "a request is one JSON object per line"}
            elif request.get("op") == "capabilities":
                reply = {"isolation": isolation(), "warning": isolation_warning(),
                         "memory": measures_memory()}
            elif request.get("op") == "pin":
                if worker is not None or pinned:
                    reply = {"error": "this root worker serves one worker or one pin"}
                else:
                    try:
                        reply, pinned = _pin(request), True
                    except (ValueError, TypeError, OSError) as e:
                        reply = {"error": f"{type(e).__name__}: {e}"}
            elif pinned:
                reply = {"error": "this root worker holds a pin: close its input to let it go"}
            elif request.get("op") == "start":
                if worker is not None:
                    reply = {"error": "this root worker has started its worker already"}
                elif isolation() != "root":
                    reply = {"error": f"no root sandbox here ({isolation_warning()})"}
                else:
                    try:
                        worker = _start(request)
                        reply = {"ok": True, "peak": worker.peak is not None, "pid": worker.pid}
                    except (ValueError, TypeError, OSError, KeyError, RuntimeError) as e:
                        worker = None
                        reply = {"error": f"{type(e).__name__}: {e}"}
            elif worker is None:
                reply = {"error": "start the worker first"}
            else:
                try:
                    reply = _serve(worker, request)
                # the grader is told (and grades again), this process goes on
                except Exception as e:
                    reply = {"error": f"{type(e).__name__}: {e}"}
            print(json.dumps(reply), flush=True)
    finally:
        if worker is not None:
            worker.kill()
    return 0


# --- the grader's side ----------------------------------------------------------------------------

def pin_environment(pid: int | None, measured: bool | None = None):
    """The page-cache pin for this grader (a course_utils.grader.pagecache.Pin): made by root
    through command() where this grader's workers come from the hub's rule (see "pin" above: only
    root sees which pages of root's files are cached), else pagecache.pin_environment. A pin that
    cannot be made has a reason."""
    from course_utils.grader import pagecache
    if not through_sudo():
        return pagecache.pin_environment(pid, measured)
    proc = subprocess.Popen(command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        proc.stdin.write((json.dumps({"op": "pin", "pid": pid}) + "\n").encode())
        proc.stdin.flush()
        answer = json.loads(pagecache._read_line(proc, pagecache.START_SECONDS))
        if type(answer) is not dict or "files" not in answer:
            raise ValueError(answer.get("error", "not a summary") if type(answer) is dict
                             else "not a summary")
    except (OSError, ValueError, TimeoutError) as e:
        # root's side cannot be signalled: it ends at the end of its input
        for pipe in (proc.stdin, proc.stdout):
            try:
                pipe.close()
            except OSError:
                pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        return pagecache.Pin(f"the hub's root worker could not pin ({type(e).__name__}: "
                             f"{str(e)[:200]})")
    return pagecache.Pin(None, proc, answer)


class SudoWorker:
    """A worker run by command() through sudo, with Worker's methods: a learner's with the root
    sandbox's protection, or (mode "reference") this user's reference run, its peaks measured in a
    cgroup."""

    def __init__(self, limits, slot: int = 0, mode: str = "learner"):
        self.mode, self.limits, self.slot = mode, limits, slot
        self.proc = None
        self.pid = None    # the cellrunner's, as the root side started it
        self.peak = None   # True where the root side measures the worker's peak memory
        self.own_seconds = 0.0

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.kill()

    def _ask(self, request: dict, seconds: float) -> dict:
        try:
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            self.proc.stdin.flush()
            ready, _, _ = select.select([self.proc.stdout], [], [], seconds)
            line = self.proc.stdout.readline() if ready else b""
        except (OSError, ValueError):
            line = b""
        try:
            reply = json.loads(line)
        except ValueError:
            reply = None
        # sudo or the root side failed: the grader's problem, graded again
        if type(reply) is not dict:
            self.kill()
            raise Overloaded("the grading sandbox (the hub's root worker, run through sudo) "
                             "stopped answering")
        if "error" in reply and request.get("op") != "start":
            self.kill()
            raise Overloaded("the grading sandbox (the hub's root worker) failed: "
                             f"{reply['error']}")
        return reply

    def start(self) -> None:
        limits = {f.name: getattr(self.limits, f.name) for f in fields(self.limits)}
        self.proc = subprocess.Popen(command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)
        reply = self._ask({"op": "start", "mode": self.mode, "limits": limits, "slot": self.slot},
                          HEADROOM + 600)
        if not reply.get("ok"):
            self.kill()
            raise SandboxUnavailable(f"the hub's grading sandbox ({' '.join(command())}) could not "
                                     f"start a {self.mode}'s worker: {reply.get('error')}")
        self.peak = True if reply.get("peak") else None
        self.pid = reply.get("pid") if type(reply.get("pid")) is int else None

    def send(self, message: dict, timeout: float) -> dict:
        if self.proc is None:
            raise WorkerDied("stopped answering")
        reply = self._ask({"op": "send", "command": message, "timeout": timeout},
                          timeout * self.limits.overload_factor + HEADROOM)
        self.own_seconds += float(reply.get("own") or 0.0)
        # the root side killed it, and still says what was refused (allow_processes)
        if "died" in reply:
            raise (Overloaded if reply.get("overloaded") else WorkerDied)(str(reply["died"]))
        if type(reply.get("answer")) is not dict:
            self.kill()
            raise Overloaded("the grading sandbox (the hub's root worker) sent no answer")
        return reply["answer"]

    def reset_peak(self) -> None:
        if self.peak is not None:
            self._ask({"op": "reset_peak"}, HEADROOM)

    def peak_bytes(self) -> int | None:
        return self._value("peak_bytes") if self.peak is not None else None

    def file_bytes(self) -> int | None:
        return self._value("file_bytes")

    def forbid_processes(self) -> bool:
        reply = self._ask({"op": "forbid_processes"}, HEADROOM)
        if "died" in reply:
            raise WorkerDied(str(reply["died"]))
        # threads left running, or an answer that does not say: refused
        return reply.get("value") is not False

    def allow_processes(self) -> bool | None:
        if self.proc is None:
            return None
        value = self._ask({"op": "allow_processes"}, HEADROOM).get("value")
        return value if type(value) is bool else None

    def _value(self, op: str):
        value = self._ask({"op": op}, HEADROOM).get("value")
        return value if type(value) is int else None

    def kill(self) -> None:
        """Close the root worker's input: it kills the sandbox and exits (the grader cannot signal
        root)."""
        if self.proc is None:
            return
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        self.proc, self.pid = None, None


@functools.lru_cache(maxsize=1)
def capabilities() -> dict:
    """What the root worker's side sees (its isolation, warning, memory measuring), asked once."""
    try:
        out = subprocess.run(command(), input=b'{"op": "capabilities"}\n', capture_output=True,
                             timeout=HEADROOM + 600).stdout
        reply = json.loads(out.splitlines()[0])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        reply = None
    return reply if type(reply) is dict else {"isolation": "none",
                                              "warning": "the root worker did not answer"}


if __name__ == "__main__":
    sys.exit(main())
