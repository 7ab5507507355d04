"""A limited process that runs a notebook's cells for the grader (course_utils.grader.cellrunner
inside).

    with Worker("learner", Limits(), slot=3) as w:
        w.send({"op": "cell", "id": 0, "gid": None, "source": "x = 1"},
               timeout=60)   # -> {"id": 0, ...}

A learner's worker always has resource limits (setrlimit, set by the worker on itself before any
cell: address space, CPU seconds, file size, open files, no core dumps; processes too in a sandbox)
and a time limit per command (its own time: see below), past which it and everything it started get
SIGKILL. Where the machine allows, it also runs in namespaces of its own with its own read-only file
system (course_utils.grader.sandbox says which kind: "root", "userns" or "none").

The worker's stdout and stderr go to /dev/null; answers come on a pipe of their own, one JSON line
each, size-capped. The reference worker (the instructor's solution) gets limits but no sandbox.

Grading as root, each worker also has a memory cgroup whose peak the grader resets and reads
(reset_peak, peak_bytes; course_utils.grader.peakmemory): the learner's worker around each test
cell, from outside; the reference worker around each probe, itself. The same cgroup gives the worker
an equal CPU share and a quota of Limits.cpus cores (course_utils.grader.cgroups).

Time limits are the worker's own time, not the wall clock of a busy machine
(course_utils.grader.workerclock): a command is stopped, as the learner's doing, once its own time
(wall clock less the time its threads waited for a CPU) passes the limit or its CPU time passes the
limit times Limits.cpus; one the machine held up past Limits.overload_factor times the limit raises
Overloaded (grade it again), never a score.

Process creation can be forbidden from outside while one command runs (forbid_processes, then
allow_processes): a rule that a test cell checks in the learner's own process (lesson 04's "without
autograd", lesson 03's "predict, don't measure") must not fall to a child process that does the
forbidden work and sends the result back. Every process the learner's code left (a helper waiting on
a pipe) is killed first; a thread it left running cannot be killed alone, so forbid_processes()
says whether one runs (the cellrunner's own threads are those it had when it said it was ready,
before any cell), for the grader to refuse a test whose rule is checked in the probe's thread. Then
the kernel refuses the worker any new process or thread:
- grading as root, its pids cgroup's pids.max is set to 0, and back to Limits.processes afterwards;
  the cgroup's pids.events counts each refusal, so the grader knows that the code tried;
- elsewhere (the "userns" sandbox of a normal user, or no pids cgroup), the cellrunner's
  RLIMIT_NPROC is set to 1 with prlimit from outside. Nothing counts refusals there (None), and a
  normal user can lower a hard limit of its own processes but never raise it again (that takes
  CAP_SYS_RESOURCE outside the namespace): the cellrunner then starts no process or thread for the
  rest of its life. The cellrunner starts torch's lazily started threads before any cell for this
  reason.
"""

import json
import math
import os
import pwd
import resource
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from course_utils.grader.cgroups import Cgroup
from course_utils.grader.capabilities import SandboxUnavailable, isolation, isolation_warning
from course_utils.grader.sandbox import (FIRST_UID, SYSTEM_PATH, environment, private_network,
                                         python_path, setup_command, tool_path)
from course_utils.grader.peakmemory import PeakMemory, peak_files
from course_utils.grader.workerclock import Clock, _listdir, _stat


@dataclass
class Limits:
    """Per worker. Seconds are the worker's own time (course_utils.grader.workerclock), not the wall
    clock. memory_bytes is address space per process (torch alone maps ~1.5 GB); cpus is its CPU
    quota in cores (a cell may use cell_seconds * cpus CPU seconds); threads is torch's thread pool
    in it (OMP_NUM_THREADS; None: the grading process's OMP_NUM_THREADS, else 2; see shared_by).
    sandbox: "required" (a learner's worker never runs without the namespaces where the machine
    cannot give them: SandboxUnavailable) or "optional" (the instructor accepts limits only there).
    reference_cell_factor: the reference run (the instructor's notebook, demonstrations included)
    may take this many times cell_seconds per cell. A learner's worker may use
    notebook_seconds * cpus CPU seconds in all (RLIMIT_CPU). overload_factor: a command held up past
    this many times its limit on the wall clock (by a busy machine, not its own time: workerclock)
    is the machine's doing, graded again and never scored."""
    cell_seconds: float = 60
    notebook_seconds: float = 600
    memory_bytes: int = 6 * 2 ** 30
    processes: int = 128
    file_bytes: int = 64 * 2 ** 20
    open_files: int = 512
    reply_bytes: int = 32 * 2 ** 20
    cpus: float = 2
    threads: int | None = None
    sandbox: str = "required"
    reference_cell_factor: float = 5
    overload_factor: float = 20

    def __post_init__(self):
        if self.threads is None:
            said = os.environ.get("OMP_NUM_THREADS", "")
            self.threads = int(said) if said.isdecimal() and said.isascii() and int(said) > 0 else 2
        for name, value in vars(self).items():
            if name == "sandbox":
                if value not in ("required", "optional"):
                    raise ValueError("Limits.sandbox must be 'required' or 'optional', got "
                                     f"{value!r}")
            elif not (isinstance(value, (int, float)) and not isinstance(value, bool)
                      and value > 0):
                raise ValueError(f"Limits.{name} must be a positive number, got {value!r}")
            elif name == "threads" and type(value) is not int:
                raise ValueError(f"Limits.threads must be a positive int, got {value!r}")
        if self.threads >= self.processes:   # libgomp ends a worker that cannot start its threads
            raise ValueError(f"Limits.threads ({self.threads}) must be below Limits.processes "
                             f"({self.processes})")

    def shared_by(self, at_once: int) -> "Limits":
        """These limits for each of `at_once` workers that grade side by side: torch's threads cut
        to their share of this machine's cores (at least 1). Workers that each fill every core grade
        side by side no faster than one after the other (benchmarks/grading_threads.py). A cell that
        computes in parallel then takes longer in its own time: the time limits are far above what
        the lessons' cells take."""
        cores = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                 else (os.cpu_count() or 1))
        return replace(self, threads=max(1, min(self.threads, cores // max(1, at_once))))


def check_sandbox(limits: Limits) -> str | None:
    """What the grader should warn about here (None: the full sandbox). Raises SandboxUnavailable
    where a learner's worker would get no namespaces and limits.sandbox is "required": grading
    fails closed unless the instructor accepts weaker isolation."""
    if isolation() == "none" and limits.sandbox == "required":
        raise SandboxUnavailable(f"{isolation_warning()}. To grade here anyway with resource "
                                 "limits only, accept weaker isolation: --sandbox optional "
                                 "(course.sh grade) or c.HardenedExecute.sandbox = 'optional' "
                                 "(nbgrader_config.py)")
    return isolation_warning()


def _alive(pid: int, state: str) -> bool:
    """Whether process pid still runs: not a zombie, or a zombie main thread whose other threads run
    on (a process whose main thread called pthread_exit shows "Z" in /proc/PID/stat)."""
    if state not in ("Z", "X"):
        return True
    return any((_stat(int(t.name)) or ["Z"])[0] not in ("Z", "X")
               for t in _listdir(Path(f"/proc/{pid}/task")))


READY = b'{"ready": true}'   # the cellrunner's first line (course_utils.grader.cellrunner.READY)


def _system_tool(name: str) -> str:
    """The system's own `name` (root must not find it through a PATH another user set)."""
    found = shutil.which(name, path=SYSTEM_PATH)
    if found is None:
        raise FileNotFoundError(f"{name} is missing from the system's folders {SYSTEM_PATH} "
                                "(Debian: apt-get install util-linux)")
    return found


def _threads(pid: int) -> set[tuple[int, int]]:
    """Process pid's live threads now, as (thread id, start time): an id a new thread reuses is
    another thread."""
    found = set()
    for task in _listdir(Path(f"/proc/{pid}/task")):
        fields = _stat(int(task.name))
        if fields and len(fields) > 19 and fields[0] not in ("Z", "X"):
            found.add((int(task.name), int(fields[19])))
    return found


class WorkerDied(Exception):
    """The worker ended, or was killed, before answering; str(e) says why in a learner's words."""


class Overloaded(WorkerDied):
    """The machine, not the worker's code, kept a command from finishing: held up past
    Limits.overload_factor times its limit while its own time stayed under the limit. Never the
    learner's score: grade again."""


class Worker:
    """One cellrunner process. mode "learner" is sandboxed; mode "reference" runs as the grader (or,
    from root, as the account run_as names)."""

    def __init__(self, mode: str, limits: Limits | None = None, slot: int = 0,
                 run_as: int | None = None):
        """run_as (root only, reference mode): the uid of the account the reference runs as, in a
        cgroup root made, measuring its own peaks through the peak files alone, which it is given
        (the hub's root worker runs the instructor's reference so:
        course_utils.grader.rootworker)."""
        if mode not in ("learner", "reference"):
            raise ValueError(f"mode must be 'learner' or 'reference', got {mode!r}")
        if type(slot) is not int or not 0 <= slot < 5000:
            raise ValueError(f"slot must be an int in [0, 5000), got {slot!r}")
        if run_as is not None and (mode != "reference" or os.geteuid() != 0
                                   or type(run_as) is not int):
            raise ValueError("run_as is root's, for a reference worker, and names a uid")
        self.mode, self.limits, self.slot, self.run_as = mode, limits or Limits(), slot, run_as
        # KeyError: no such account
        self._account = pwd.getpwuid(run_as) if run_as is not None else None
        self.proc = None
        self.peak = None
        self.clock = None
        # own time (course_utils.grader.workerclock) of every command sent so far
        self.own_seconds = 0.0
        self._buffer = bytearray()
        # while forbidden: (the cellrunner's pid, its NPROC before or None, refusals counted before)
        self._forbidden = None
        self._refused = None     # refusals counted when the worker was killed while forbidden
        # the cellrunner's threads when it said it was ready, before any cell ran
        self._own_threads = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.kill()

    def start(self) -> None:
        limits = self.limits
        read_fd, write_fd = os.pipe()
        self._tmp = tempfile.mkdtemp(prefix="course-worker-")
        env = {"PATH": tool_path(), "LANG": "C.UTF-8", "MPLBACKEND": "Agg",
               "NBGRADER_EXECUTION": "autograde", "CUDA_VISIBLE_DEVICES": "", "PYTHONHASHSEED": "0",
               "OMP_NUM_THREADS": str(limits.threads),
               "HOME": self._tmp, "TMPDIR": self._tmp, "PYTHONDONTWRITEBYTECODE": "1",
               "PYTHONPATH": python_path(),
               # glibc: a fixed threshold (its usual start) stops it from raising the threshold as
               # big blocks are freed and then keeping them in its heap: memory in use then follows
               # the tensors alive, and peaks measured in two processes compare
               # (course_utils.grader.peakmemory).
               "MALLOC_MMAP_THRESHOLD_": "131072"}
        command = [sys.executable, "-m", "course_utils.grader.cellrunner", self.mode, str(write_fd)]
        self._cgroup = self.peak = None
        try:   # anything that fails before the worker runs leaves no cgroup, folder or pipe behind
            kind = isolation() if self.mode == "learner" else "none"
            self._kind = kind
            if kind == "none" and self.mode == "learner" and limits.sandbox == "required":
                # raises SandboxUnavailable: never a learner's code without the sandbox unasked
                check_sandbox(limits)
            sandboxed = kind != "none"
            uid = FIRST_UID + self.slot
            # As root, a cgroup for the reference too: not to limit it, to measure its probes'
            # peaks.
            # Cgroup makes the name unique
            self._cgroup = (Cgroup(f"course-sandbox-{os.getpid()}-{self.slot}",
                                   limits.memory_bytes, limits.processes, limits.cpus)
                            if kind == "root" or (self.mode == "reference" and os.geteuid() == 0)
                            else None)
            # the account's own uid, gids and groups (from root: after the cgroup and network)
            if self._account is not None:
                account = self._account
                os.chown(self._tmp, account.pw_uid, account.pw_gid)
                for path in peak_files(self._cgroup.dirs if self._cgroup else []):
                    os.chown(path, account.pw_uid, -1)
                command = [_system_tool("setpriv"), f"--reuid={account.pw_uid}",
                           f"--regid={account.pw_gid}", "--init-groups", "--", *command]
            # a network of its own: no service it starts (gloo's sockets) reachable by others
            if self.mode == "reference":
                command = private_network(command)
            if sandboxed:
                command = setup_command(kind, uid, self._cgroup.dirs if self._cgroup else [],
                                        command)
                env.update(environment())
            # joined before Python starts, so that all its memory is charged there
            elif self._cgroup is not None:
                env["COURSE_CGROUPS"] = ":".join(str(d) for d in self._cgroup.dirs)
                command = ["/bin/sh", "-c",
                           'IFS=:; for d in $COURSE_CGROUPS; do echo $$ > "$d/cgroup.procs" || '
                           'exit 97; done; exec "$@"', "join-cgroup", *command]
            self.peak = (PeakMemory(self._cgroup.dirs)
                         if self._cgroup is not None and self.mode == "learner" else None)
            if self.peak is not None and not self.peak.available:
                self.peak = None
            # The runner sets these limits on itself before it runs anything (no preexec_fn: the
            # grader starts workers from several threads).
            # by name: course_utils.grader.cellrunner._limit_self
            env["COURSE_LIMITS"] = json.dumps({
                "address_space": int(limits.memory_bytes), "file_bytes": int(limits.file_bytes),
                "open_files": int(limits.open_files),
                "cpu_seconds": (math.ceil(limits.notebook_seconds * limits.cpus)
                                if self.mode == "learner" else None),
                "processes": int(limits.processes) if sandboxed else None})
            self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, pass_fds=(write_fd,),
                                         cwd=self._tmp, env=env, start_new_session=True)
        except BaseException:
            for fd in (read_fd, write_fd):
                os.close(fd)
            if self.peak is not None:
                self.peak.close()
            if self._cgroup is not None:
                self._cgroup.remove()
            self._cgroup = self.peak = None
            shutil.rmtree(self._tmp, ignore_errors=True)
            raise
        os.close(write_fd)
        self._reply = read_fd
        self._buffer = bytearray()
        self._own_threads = None
        self.clock = Clock(self.proc.pid, self._cgroup)

    def send(self, command: dict, timeout: float) -> dict:
        """Send one command; return the worker's JSON answer. Raises WorkerDied (and kills the
        worker) if it exits, passes `timeout` seconds of its own time or timeout * cpus seconds of
        CPU, or answers with something that is not one JSON object within the size limit; raises
        Overloaded if the machine held it up past Limits.overload_factor times the timeout
        (course_utils.grader.workerclock)."""
        if self.proc is None or self.proc.poll() is not None:
            raise WorkerDied(self._death_reason())
        self.clock.start()
        try:
            # its first line, written before it reads a command: no learner's code yet
            if self._own_threads is None:
                if self._line(timeout) != READY:
                    self.kill()
                    raise WorkerDied("its Python process did not start")
                runner, _ = self._processes()
                self._own_threads = _threads(runner) if runner is not None else set()
            try:
                self.proc.stdin.write((json.dumps(command) + "\n").encode())
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError):
                self.kill()
                raise WorkerDied(self._death_reason()) from None
            line = self._line(timeout)
        finally:
            self.own_seconds += self.clock.read().own
        # (protocol imports torch: only once a worker answers)
        from course_utils.grader.protocol import loads
        try:
            answer = loads(line)   # no integer literal too long to convert cheaply
        # invalid, not UTF-8, nested too deep, or a huge integer literal
        except (ValueError, RecursionError):
            answer = None
        if type(answer) is not dict:
            self.kill()
            raise WorkerDied("sent the grader something that is not an answer and was stopped")
        return answer

    def _line(self, timeout: float) -> bytes:
        """The worker's next line on its answer pipe, within the limits send() keeps (its clock
        started)."""
        scanned = 0
        while b"\n" not in self._buffer[scanned:]:
            scanned = len(self._buffer)
            spent = self.clock.read()
            if spent.own > timeout:
                self.kill()
                raise WorkerDied(f"ran past the time limit of {timeout:.0f} s and was stopped")
            if spent.cpu > timeout * self.limits.cpus:
                self.kill()
                raise WorkerDied(f"used more than {timeout * self.limits.cpus:.0f} s of CPU time "
                                 f"(the time limit of {timeout:.0f} s on {self.limits.cpus:g} "
                                 "cores) and was stopped")
            if spent.wall > timeout * self.limits.overload_factor:
                self.kill()
                raise Overloaded(f"the machine was too busy to run it: {spent.wall:.0f} s on the "
                                 f"clock, {spent.held:.0f} s of them waiting for a CPU")
            ready, _, _ = select.select([self._reply], [], [],
                                        min(max(timeout - spent.own, 0.05), 1.0))
            if not ready:
                continue
            chunk = os.read(self._reply, 1 << 20)
            if not chunk:
                self.proc.wait()
                reason = self._death_reason()
                self.kill()
                raise WorkerDied(reason)
            self._buffer += chunk
            if len(self._buffer) > self.limits.reply_bytes:
                self.kill()
                raise WorkerDied(f"sent more than {self.limits.reply_bytes // 2 ** 20} MB to the "
                                 "grader and was stopped")
        cut = self._buffer.index(b"\n")
        line = bytes(self._buffer[:cut])
        del self._buffer[:cut + 1]
        return line

    # -- process creation, forbidden from outside (see the module's docstring) ---------------------

    def forbid_processes(self) -> bool:
        """Before a command whose rule must hold in the learner's own process: kill every process
        the worker holds but the cellrunner and the sandbox's own (unshare, its set-up shell), then
        have the kernel refuse it any new process or thread until allow_processes(). Returns whether
        threads the learner's code started in earlier cells still run in the cellrunner (they cannot
        be killed alone). Raises WorkerDied (and kills the worker) where its processes cannot be
        stopped, and SandboxUnavailable where the kernel cannot be told to refuse (no pids cgroup,
        and no right to lower the cellrunner's limit)."""
        if self.proc is None or self.proc.poll() is not None:
            raise WorkerDied(self._death_reason())
        runner, _ = self._processes()
        if runner is None:
            self.kill()
            raise WorkerDied("its Python process could not be found")
        counted = self._cgroup.processes_refused() if self._cgroup is not None else None
        old = None
        if counted is None or not self._cgroup.limit_processes(0):
            counted = None
            try:   # no pids cgroup: the cellrunner's own limit, from outside
                old = resource.prlimit(runner, resource.RLIMIT_NPROC)
                resource.prlimit(runner, resource.RLIMIT_NPROC, (1, 1))
            except OSError as e:
                if self._kind != "none":   # "none": limits only, as the instructor accepted
                    self.kill()
                    raise SandboxUnavailable("the grader cannot forbid the learner's code to "
                                             "start processes here (no pids cgroup, and setting "
                                             f"its process limit failed: {e.strerror}); grade as "
                                             "root where cgroups can be made") from None
                old = None
        self._forbidden, self._refused = (runner, old, counted), None
        # Threads its code started in earlier cells (none can start now): one waiting for work would
        # do what a rule forbids where a check in the probe's thread does not look.
        strays = self._own_threads is not None and bool(_threads(runner) - self._own_threads)
        # a thread joined as its cell ended may linger a moment in /proc: look once more
        if strays:
            time.sleep(0.05)
            strays = bool(_threads(runner) - self._own_threads)
        # processes it left (a helper waiting on a pipe would do the work), killed
        for _ in range(200):
            _, others = self._processes()
            if not others:
                return strays
            for pid in others:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.01)
        self.kill()
        raise WorkerDied("its code left processes running that kept starting others, and was "
                         "stopped")

    def allow_processes(self) -> bool | None:
        """After it: lift what forbid_processes set, where the grader can (a pids cgroup's limit, or
        the cellrunner's limit as root; a normal user's cellrunner stays limited). Returns whether
        the kernel refused a new process or thread of the worker meanwhile (a worker killed
        meanwhile included): True or False where its pids cgroup counts them, None where nothing
        does."""
        if self._forbidden is None:
            return self._refused
        runner, old, counted = self._forbidden
        self._forbidden = None
        if self.proc is None:
            return self._refused
        refused = self._refusals(counted)
        if counted is not None:
            self._cgroup.limit_processes(self.limits.processes)
        if old is not None:
            try:
                resource.prlimit(runner, resource.RLIMIT_NPROC, old)
            except (OSError, ValueError):
                # a normal user cannot raise a hard limit again: it stays as forbid_processes set it
                pass
        return refused

    def _refusals(self, counted: int | None) -> bool | None:
        now = self._cgroup.processes_refused() if counted is not None else None
        return None if now is None else now > counted

    def _processes(self) -> tuple[int | None, list[int]]:
        """The cellrunner's pid, and every other live process the learner's code may have started:
        in a sandbox, all that its PID namespace holds but its set-up shell (the namespace's first
        process) and the cellrunner, that shell's oldest child (orphans are reparented to the shell,
        always younger); without one, the cellrunner's descendants."""
        table = {}   # pid -> (parent, state, start time)
        for entry in _listdir(Path("/proc")):
            fields = _stat(int(entry.name))
            if fields and len(fields) > 19:
                table[int(entry.name)] = (int(fields[1]), fields[0], int(fields[19]))
        children: dict[int, list[int]] = {}
        for pid, (parent, _, _) in table.items():
            children.setdefault(parent, []).append(pid)

        def oldest_child(pid):
            kids = children.get(pid, [])
            return min(kids, key=lambda k: (table[k][2], k)) if kids else None

        top = self.proc.pid
        if self._kind == "none":
            runner, keep = top, {top}
        else:
            init = oldest_child(top)
            runner = oldest_child(init) if init is not None else None
            keep = {top, init, runner}
        found, seen, todo = [], set(), [top]
        while todo:
            pid = todo.pop()
            # /proc is read one process at a time: a reused pid must not make a loop
            if pid in seen:
                continue
            seen.add(pid)
            if pid not in keep and _alive(pid, table.get(pid, (0, "Z", 0))[1]):
                found.append(pid)
            todo.extend(children.get(pid, []))
        return runner, found

    @property
    def pid(self) -> int | None:
        """The cellrunner's process id while it runs."""
        return self.proc.pid if self.proc is not None else None

    def reset_peak(self) -> None:
        """Start measuring the learner's worker's peak memory (see peak_bytes)."""
        if self.peak is not None:
            self.peak.reset()

    def peak_bytes(self) -> int | None:
        """Memory in use by the learner's worker (all its processes) at its highest point since
        reset_peak(), measured by the kernel; None where there is no memory cgroup (not root)."""
        return self.peak.read() if self.peak is not None else None

    def file_bytes(self) -> int | None:
        """Page cache its processes brought in by reading files nobody had cached (charged to its
        cgroup); None without a memory cgroup."""
        return self._cgroup.file_bytes() if self._cgroup is not None else None

    def _death_reason(self) -> str:
        code = self.proc.poll() if self.proc else None
        if code is None:
            return "stopped answering"
        if code < 0 or code > 128:
            sig = -code if code < 0 else code - 128
            name = (signal.Signals(sig).name if sig in signal.Signals._value2member_map_
                    else f"signal {sig}")
            why = {"SIGSEGV": "a segmentation fault",
                   "SIGKILL": "killed (out of memory or over a limit)",
                   "SIGXCPU": "out of CPU time", "SIGXFSZ": "a file over the size limit",
                   "SIGABRT": "an abort"}.get(name, name)
            return f"the Python process crashed ({why})"
        return (f"the Python process exited (exit code {code}: os._exit, sys.exit from a thread, "
                "or a crash)")

    def kill(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            if self._cgroup is not None:
                if self._forbidden is not None:   # what was refused before it died still counts
                    self._refused = self._refusals(self._forbidden[2])
                self._cgroup.kill()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            for stream in (self.proc.stdin,):
                try:
                    stream.close()
                except OSError:
                    pass
            if self.peak is not None:
                self.peak.close()
            if self._cgroup is not None:
                self._cgroup.remove()
            try:
                os.close(self._reply)
            except OSError:
                pass
            shutil.rmtree(self._tmp, ignore_errors=True)
            self.proc = None
