"""A limited process that runs a notebook's cells for the grader (course_utils.cellrunner inside).

    with Worker("learner", Limits(), slot=3) as w:
        w.send({"op": "cell", "id": 0, "gid": None, "source": "x = 1"}, timeout=60)   # -> {"id": 0, ...}

What limits a learner's worker (`isolation()` says which kind this machine gives):
- always: resource limits (setrlimit, set by the worker on itself before any cell): address space,
  CPU seconds, file size, open files, no core dumps; and a wall-clock limit per command, past which
  the worker and everything it started get SIGKILL;
- "root" (grading as root: CI, a container) and "userns" (a normal user where the kernel allows
  unprivileged user namespaces, as most Linux distributions do): new network, mount and PID
  namespaces (util-linux `unshare`): no network but its own loopback (so gloo between its own
  processes works), tmpfs over the course directory, the home directory, /tmp, /var/tmp and /run (so
  no solutions, gradebook, other submissions, grading files or the instructor's agent sockets are
  visible; the Python environment and course_utils are mounted back read-only), /proc showing only
  its own processes, a process limit of its own, no capabilities, and everything killed with it;
- "root" also: its own uid (60000 + slot, via `setpriv`), so sandboxes cannot read each other's
  files or anything that is not world-readable, and a memory and process cgroup where the machine
  offers one. Under "userns" the learner's code keeps the instructor's uid outside its namespaces:
  it cannot see the hidden folders, but could write files the instructor owns elsewhere;
- "none" (no unshare, or user namespaces disabled): limits and wall clock only; the grader warns.

The worker's stdout and stderr go to /dev/null; answers come on a pipe of their own, one JSON line
each, size-capped. The reference worker (the instructor's solution) gets limits but no sandbox.
"""

import functools
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import course_utils

FIRST_UID = 60000


@dataclass
class Limits:
    """Per worker. memory_bytes is address space per process (torch alone maps ~1.5 GB)."""
    cell_seconds: float = 60
    notebook_seconds: float = 600
    memory_bytes: int = 6 * 2 ** 30
    processes: int = 128
    file_bytes: int = 64 * 2 ** 20
    open_files: int = 512
    reply_bytes: int = 32 * 2 ** 20

    def __post_init__(self):
        for name, value in vars(self).items():
            if not (isinstance(value, (int, float)) and value > 0):
                raise ValueError(f"Limits.{name} must be a positive number, got {value!r}")


class WorkerDied(Exception):
    """The worker ended, or was killed, before answering; str(e) says why in a learner's words."""


@functools.lru_cache(maxsize=1)
def isolation() -> str:
    """The sandbox this machine gives a learner's worker: "root", "userns" or "none" (see above)."""
    if shutil.which("unshare") is None or shutil.which("setpriv") is None:
        return "none"
    if os.geteuid() == 0:
        return "root"
    try:  # the namespaces, a tmpfs mount and dropping every capability, as _SETUP does them
        probe = subprocess.run(["unshare", *_USERNS, *_NAMESPACES, "--", "/bin/sh", "-c",
                                "mount -t tmpfs probe /dev/shm && mkdir /dev/shm/k && mount --rbind /usr /dev/shm/k "
                                "&& mount -o remount,bind,ro /dev/shm/k && setpriv --no-new-privs --inh-caps=-all "
                                "--bounding-set=-all -- true"],
                               stdin=subprocess.DEVNULL, capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return "none"
    return "userns" if probe.returncode == 0 else "none"


def can_isolate() -> bool:
    """True where a learner's worker gets the namespaces (hidden files, no network): isolation() != "none"."""
    return isolation() != "none"


def isolation_warning() -> str | None:
    """What an instructor should know about the sandbox here, or None when it is the full one."""
    kind = isolation()
    if kind == "root":
        return None
    if kind == "userns":
        return ("not root: the learner's code runs in user namespaces (no network; this folder, your home, /tmp "
                "and /run hidden) but as your own uid outside them, with no memory cgroup; for the full sandbox "
                "grade as root in a container")
    return ("no sandbox here (util-linux unshare or setpriv missing, or user namespaces disabled): the learner's "
            "code runs with resource limits only and could read or write your files; grade untrusted work as "
            "root in a container")


_USERNS = ["--user", "--map-root-user"]   # a normal user becomes root of its own user namespace, no more
_NAMESPACES = ["--net", "--mount", "--pid", "--fork", "--kill-child", "--mount-proc"]

_SETUP = r"""
set -e
uid=$1; shift
i=0; keep=""
while [ "$1" != "--cgroups" ]; do keep="$keep $1"; shift; done; shift
while [ "$1" != "--hide" ]; do echo 0 > "$1/cgroup.procs"; shift; done; shift
hide=""
while [ "$1" != "--" ]; do hide="$hide $1"; shift; done; shift
py=$1
# Loopback up (gloo between the learner's own processes); python's ioctl where neither tool is installed.
ip link set lo up 2>/dev/null || ifconfig lo up 2>/dev/null || "$py" -c "$LOUP"
mount -t tmpfs -o size=1m,mode=700 stage /dev/shm
for k in $keep; do i=$((i+1)); mkdir -p /dev/shm/k$i; mount --rbind "$k" /dev/shm/k$i; done
for h in $hide; do [ -d "$h" ] && mount -t tmpfs -o size=256m,mode=755 hidden "$h"; done
i=0
for k in $keep; do
  i=$((i+1)); mkdir -p "$k"; mount --rbind /dev/shm/k$i "$k"; umount -l /dev/shm/k$i
  mount -o remount,bind,ro "$k"   # the environment and course_utils: read-only for the learner's code
done
umount /dev/shm
mount -t tmpfs -o size=64m,mode=1777 shm /dev/shm
mkdir -p /tmp/work && chmod 700 /tmp/work && cd /tmp/work
export HOME=/tmp/work TMPDIR=/tmp/work; unset LOUP
# "same": a user namespace's root (the instructor outside); else a uid of the sandbox's own.
ids=""
if [ "$uid" != same ]; then chown "$uid:$uid" /tmp/work; ids="--reuid=$uid --regid=$uid --clear-groups"; fi
# Not exec: this shell stays the namespace's first process, keeping the parent-death signal that a
# change of user would clear, so the whole sandbox dies with the grader. No capabilities are left
# (bounding set empty), so the learner's code cannot undo the mounts.
setpriv $ids --no-new-privs --inh-caps=-all --bounding-set=-all -- "$@"
"""


def _mount_plan(kind: str) -> tuple[list[str], list[str]]:
    """(paths to mount back read-only, paths to hide under tmpfs) for the learner's mount namespace."""
    here = Path(course_utils.__file__).resolve().parent
    root = here.parent
    keep = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), here,
            Path(sys.executable).resolve().parent.parent}
    hide = {root, Path.home().resolve(), Path("/tmp"), Path("/var/tmp"), Path("/run").resolve(),
            Path(os.getcwd()).resolve()}
    hide = {h for h in hide if h != Path("/") and h.is_dir()}

    def needed(k: Path) -> bool:
        if any(k.is_relative_to(h) for h in hide):  # the environment inside a hidden folder (a venv in the course)
            return True
        # Under "userns" the learner's code has the instructor's uid: what the instructor may write
        # (a venv in /opt they own) is mounted back read-only. (Under "root" it has a uid of its own.)
        return kind == "userns" and (os.access(k, os.W_OK) or _owner(k) == os.getuid())

    return sorted(str(k) for k in keep if needed(k)), sorted(str(h) for h in hide)


def _owner(path: Path) -> int | None:
    try:
        return path.stat().st_uid
    except OSError:
        return None


_LOOPBACK_UP = ("import fcntl, socket, struct; s = socket.socket(); "
                "flags = struct.unpack('16sh', fcntl.ioctl(s, 0x8913, struct.pack('16sh', b'lo', 0)))[1]; "
                "fcntl.ioctl(s, 0x8914, struct.pack('16sh', b'lo', flags | 1))")  # SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP


class _Cgroup:
    """A memory + pids cgroup (v2, or v1 controllers), where the machine lets us make one."""

    def __init__(self, name: str, limits: Limits):
        self.dirs: list[Path] = []
        base = Path("/sys/fs/cgroup")
        wants = ({"memory.max": limits.memory_bytes, "pids.max": limits.processes}
                 if (base / "cgroup.controllers").exists() else None)
        try:
            if wants is not None:
                d = base / name
                d.mkdir()
                self.dirs.append(d)
                for k, v in wants.items():
                    (d / k).write_text(str(v))
            else:
                for ctrl, k, v in (("memory", "memory.limit_in_bytes", limits.memory_bytes),
                                   ("pids", "pids.max", limits.processes)):
                    d = base / ctrl / name
                    d.mkdir()
                    self.dirs.append(d)
                    (d / k).write_text(str(v))
        except OSError:
            self.remove()

    def kill(self) -> None:
        for d in self.dirs:
            if (d / "cgroup.kill").exists():
                try:
                    (d / "cgroup.kill").write_text("1")
                except OSError:
                    pass
            try:
                for pid in (d / "cgroup.procs").read_text().split():
                    os.kill(int(pid), signal.SIGKILL)
            except (OSError, ValueError):
                pass

    def remove(self) -> None:
        for d in self.dirs:
            try:
                d.rmdir()
            except OSError:
                pass
        self.dirs = []


class Worker:
    """One cellrunner process. mode "learner" is sandboxed; mode "reference" runs as the grader."""

    def __init__(self, mode: str, limits: Limits | None = None, slot: int = 0):
        if mode not in ("learner", "reference"):
            raise ValueError(f"mode must be 'learner' or 'reference', got {mode!r}")
        if type(slot) is not int or not 0 <= slot < 5000:
            raise ValueError(f"slot must be an int in [0, 5000), got {slot!r}")
        self.mode, self.limits, self.slot = mode, limits or Limits(), slot
        self.proc = None
        self.isolation = "none"
        self._buffer = bytearray()

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.kill()

    def start(self) -> None:
        limits = self.limits
        read_fd, write_fd = os.pipe()
        self._tmp = tempfile.mkdtemp(prefix="course-worker-")
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "MPLBACKEND": "Agg",
               "NBGRADER_EXECUTION": "autograde", "CUDA_VISIBLE_DEVICES": "", "PYTHONHASHSEED": "0",
               "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2"),
               "HOME": self._tmp, "TMPDIR": self._tmp, "PYTHONDONTWRITEBYTECODE": "1"}
        command = [sys.executable, "-m", "course_utils.cellrunner", self.mode, str(write_fd)]
        kind = isolation() if self.mode == "learner" else "none"
        sandboxed = kind != "none"
        uid = FIRST_UID + self.slot
        self._cgroup = _Cgroup(f"course-sandbox-{os.getpid()}-{self.slot}", limits) if kind == "root" else None
        if sandboxed:
            keep, hide = _mount_plan(kind)
            # setpriv --pdeathsig: if the grader dies, unshare dies, and --kill-child takes the sandbox with it.
            # The set-up script (root of the namespaces, before the learner's code) joins the cgroup.
            command = ["setpriv", "--pdeathsig", "KILL", "--",
                       "unshare", *(_USERNS if kind == "userns" else []), *_NAMESPACES, "--",
                       "/bin/sh", "-c", _SETUP, "sandbox", str(uid) if kind == "root" else "same", *keep,
                       "--cgroups", *[str(d) for d in (self._cgroup.dirs if self._cgroup else [])],
                       "--hide", *hide, "--", *command]
            self.isolation = (f"full (uid {uid}, no network, private /tmp, course directory hidden)" if kind == "root" else
                              "user namespace (your uid, no network, private /tmp, course directory hidden)")
        else:
            self.isolation = "limits only" if self.mode == "learner" else "reference (trusted)"
        # The runner sets these limits on itself before it runs anything (no preexec_fn: the
        # grader starts workers from several threads).
        env["LOUP"] = _LOOPBACK_UP
        env["COURSE_LIMITS"] = ",".join(str(int(v)) for v in (
            limits.memory_bytes, limits.notebook_seconds * 2, limits.file_bytes, limits.open_files,
            limits.processes if sandboxed else 0))
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, pass_fds=(write_fd,), cwd=self._tmp, env=env,
                                     start_new_session=True)
        os.close(write_fd)
        self._reply = read_fd
        self._buffer = bytearray()

    def send(self, command: dict, timeout: float) -> dict:
        """Send one command; return the worker's JSON answer. Raises WorkerDied (and kills the
        worker) if it exits, passes `timeout` seconds, or answers with something that is not one
        JSON object within the size limit."""
        if self.proc is None or self.proc.poll() is not None:
            raise WorkerDied(self._death_reason())
        try:
            self.proc.stdin.write((json.dumps(command) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self.kill()
            raise WorkerDied(self._death_reason()) from None
        deadline = time.monotonic() + timeout
        scanned = 0
        while b"\n" not in self._buffer[scanned:]:
            scanned = len(self._buffer)
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise WorkerDied(f"ran past the time limit of {timeout:.0f} s and was stopped")
            ready, _, _ = select.select([self._reply], [], [], min(left, 1.0))
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
                raise WorkerDied(f"sent more than {self.limits.reply_bytes // 2 ** 20} MB to the grader and was stopped")
        cut = self._buffer.index(b"\n")
        line = bytes(self._buffer[:cut])
        del self._buffer[:cut + 1]
        try:
            answer = json.loads(line)
        except (ValueError, UnicodeDecodeError):
            answer = None
        if type(answer) is not dict:
            self.kill()
            raise WorkerDied("sent the grader something that is not an answer and was stopped")
        return answer

    def _death_reason(self) -> str:
        code = self.proc.poll() if self.proc else None
        if code is None:
            return "stopped answering"
        if code < 0 or code > 128:
            sig = -code if code < 0 else code - 128
            name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else f"signal {sig}"
            why = {"SIGSEGV": "a segmentation fault", "SIGKILL": "killed (out of memory or over a limit)",
                   "SIGXCPU": "out of CPU time", "SIGXFSZ": "a file over the size limit",
                   "SIGABRT": "an abort"}.get(name, name)
            return f"the Python process crashed ({why})"
        return f"the Python process exited (exit code {code}: os._exit, sys.exit from a thread, or a crash)"

    def kill(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            if self._cgroup is not None:
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
            if self._cgroup is not None:
                self._cgroup.remove()
            try:
                os.close(self._reply)
            except OSError:
                pass
            shutil.rmtree(self._tmp, ignore_errors=True)
            self.proc = None
