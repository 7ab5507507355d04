"""How a learner's worker is kept apart from the machine: which sandbox this machine gives, and how.

isolation() says which kind:
- "root" (grading as root: CI, a container) and "userns" (a normal user where the kernel allows
  unprivileged user namespaces, as most Linux distributions do): new network, mount, PID, IPC and
  UTS namespaces (util-linux `unshare`): no network but its own loopback (so gloo between its own
  processes works), and a file system of its own, built from an allowlist and entered with
  `pivot_root`: the system's /usr, /bin, /lib*, /etc (and /nix) and the Python environment and
  course_utils, all read-only (submounts included), a read-only /dev of six devices, its own /proc
  (/proc/sys read-only), its own read-only /sys, and a private /tmp and /dev/shm, all it can write. The course directory (solutions, gradebook, other submissions), /home,
  /root, /srv, /opt, /var, /run and every other folder simply are not there. No capabilities are
  left, a process limit of its own holds, and everything is killed with it;
- "root" also: its own uid (60000 + slot, via `setpriv`), so sandboxes cannot read each other's
  files or anything that is not world-readable, and a memory and process cgroup (course_utils.cgroups) where the
  machine offers one. Under "userns" the learner's code keeps the instructor's uid outside its
  namespaces, which matters only for what the allowlist shows (the system's files) and for memory,
  which is limited per process only;
- "none" (no util-linux, or user namespaces disabled): limits only. A learner's worker runs there
  only when the instructor accepts it (Limits.sandbox = "optional"); otherwise grading stops with
  SandboxUnavailable (course_utils.sandbox.check_sandbox). It fails closed.

Asking builds a real sandbox (sandbox_works). A set-up that does not finish in time on a busy
machine is tried again with more time (PROBE_SECONDS); if it never finishes, isolation() raises
SandboxUnavailable rather than say "none": a slow machine never lowers the protection.

setup_command(kind, uid, cgroup_dirs, command) is the command line that builds the sandbox and runs
`command` in it; course_utils.sandbox.Worker starts it.
"""

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import course_utils

FIRST_UID = 60000
PROBE_SECONDS = (120, 300, 600)   # wall-clock time for each try at building the probe sandbox


class SandboxUnavailable(Exception):
    """Grading cannot go on with the protection it needs here; str(e) tells the instructor why and what to do."""

USERNS = ["--user", "--map-root-user"]   # a normal user becomes root of its own user namespace, no more
NAMESPACES = ["--net", "--mount", "--pid", "--ipc", "--uts", "--fork", "--kill-child", "--mount-proc"]


@functools.lru_cache(maxsize=1)
def isolation() -> str:
    """The sandbox this machine gives a learner's worker: "root", "userns" or "none" (see above).
    Asked once per grading process, by building one (sandbox_works)."""
    if any(shutil.which(tool) is None for tool in ("unshare", "setpriv", "pivot_root")):
        _why_none.append("util-linux unshare, setpriv or pivot_root is missing")
        return "none"
    kind = "root" if os.geteuid() == 0 else "userns"
    return kind if sandbox_works(kind) else "none"


_why_none: list[str] = []


def sandbox_works(kind: str) -> bool:
    """Whether a sandbox of `kind` can be built here and run this Python with course_utils: the real
    set-up script, as a worker would start it. (As root, "userns" maps root to itself: that checks
    the mechanics only; grading as root always uses "root".) A failure's last line is kept for
    isolation_warning()."""
    command = [sys.executable, "-c", "import course_utils.cellrunner"]
    for seconds in PROBE_SECONDS:
        try:
            probe = subprocess.run(setup_command(kind, FIRST_UID, [], command),
                                   env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **environment()},
                                   stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=seconds)
            break
        except OSError as e:
            _why_none.append(f"{kind}: {type(e).__name__}")
            return False
        except subprocess.TimeoutExpired:
            continue
    else:
        raise SandboxUnavailable(f"the sandbox's set-up did not finish in {sum(PROBE_SECONDS)} s over "
                                 f"{len(PROBE_SECONDS)} tries: the machine is too busy to grade safely now; try again later")
    if probe.returncode != 0:
        lines = [line for line in probe.stderr.splitlines() if line.strip() and not line[0].isspace()]
        _why_none.append(f"{kind}: {lines[-1][:200] if lines else f'exit code {probe.returncode}'}")
    return probe.returncode == 0


def can_isolate() -> bool:
    """True where a learner's worker gets the namespaces (its own file system, no network)."""
    return isolation() != "none"


_UNMEASURED = ("; lessons 05 and 06 then check memory inside the learner's process, where a cheat can fake it")


def isolation_warning() -> str | None:
    """What an instructor should know about the sandbox here, or None when it is the full one."""
    kind = isolation()
    if kind == "root":
        from course_utils.cgroups import cpu_shares
        from course_utils.peakmemory import measures_memory
        notes = ([] if measures_memory() else ["no memory cgroup could be made here" + _UNMEASURED]) + \
                ([] if cpu_shares() else ["no CPU cgroup could be made here: submissions graded at once share the "
                                          "CPU unevenly (a submission that starts many busy processes slows its "
                                          "neighbours down; their time limits still count only their own time)"])
        return "; ".join(notes) or None
    if kind == "userns":
        return ("not root: the learner's code runs in user namespaces (no network; a file system of its own: the "
                "system's files and the Python environment, read-only, and a private /tmp) but as your own uid "
                "outside them, with no memory cgroup" + _UNMEASURED + "; for the full sandbox grade as root in a container")
    why = "; ".join(_why_none) or "unknown"
    return (f"no sandbox here ({why}): the learner's code runs with resource limits only and could read "
            "or write your files; grade untrusted work as root in a container")


# Top-level folders the sandbox's file system carries, read-only (symbolic links are copied as links).
SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "nix")

_SETUP = r"""
set -e
umask 022
uid=$1; shift
# The new root: a tmpfs holding read-only binds of what is allowed, nothing else.
R=/dev/shm
mount -t tmpfs -o size=1m,mode=755 sandbox-root "$R"
# The private /tmp first: a kept path may lie under /tmp (a checkout in /tmp/course).
mkdir "$R/tmp"
mount -t tmpfs -o size=256m,mode=1777 tmp "$R/tmp"
while [ "$1" != "--cgroups" ]; do mkdir -p "$R$1"; mount --rbind "$1" "$R$1"; shift; done; shift
while [ "$1" != "--" ]; do echo 0 > "$1/cgroup.procs"; shift; done; shift
# Loopback up (gloo between the learner's own processes); python's ioctl where neither tool is installed.
ip link set lo up 2>/dev/null || ifconfig lo up 2>/dev/null || "$1" -c "$LOUP"
for d in $SYSTEM_DIRS; do
  if [ -L "/$d" ]; then ln -s "$(readlink "/$d")" "$R/$d"
  elif [ -d "/$d" ]; then mkdir "$R/$d"; mount --rbind "/$d" "$R/$d"; fi
done
# Every mount brought in, submounts included, read-only (mountinfo's 5th field, octal escapes decoded).
while read -r _ _ _ _ at _; do
  at=$(printf '%b' "$at")
  case "$at" in "$R/tmp") ;; "$R"/*) mount -o remount,bind,ro "$at" ;; esac
done < /proc/self/mountinfo
mkdir "$R/dev"
mount -t tmpfs -o size=64k,mode=755 dev "$R/dev"
for n in null zero full random urandom tty; do
  if [ -e "/dev/$n" ]; then touch "$R/dev/$n"; mount --bind "/dev/$n" "$R/dev/$n"; fi
done
ln -s /proc/self/fd "$R/dev/fd"
mkdir "$R/dev/shm"
mount -o remount,bind,ro "$R/dev"
mkdir "$R/proc"
mount --rbind /proc "$R/proc"
for f in sys sysrq-trigger; do
  if [ -e "$R/proc/$f" ]; then mount --bind "$R/proc/$f" "$R/proc/$f"; mount -o remount,bind,ro "$R/proc/$f"; fi
done
mkdir "$R/sys"
mount -t sysfs -o ro,nosuid,nodev,noexec sysfs "$R/sys" 2>/dev/null || true  # its own, without cgroups
mkdir -p "$R/var"
[ -e "$R/var/tmp" ] || ln -s ../tmp "$R/var/tmp"
mkdir "$R/.old"
cd "$R"
pivot_root . .old
umount -l /.old
rmdir /.old
mount -o remount,bind,ro /
mount -t tmpfs -o size=64m,mode=1777 shm /dev/shm
mkdir /tmp/work
chmod 700 /tmp/work
cd /tmp/work
export HOME=/tmp/work TMPDIR=/tmp/work; unset LOUP SYSTEM_DIRS
# "same": a user namespace's root (the instructor outside); else a uid of the sandbox's own.
ids=""
if [ "$uid" != same ]; then chown "$uid:$uid" /tmp/work; ids="--reuid=$uid --regid=$uid --clear-groups"; fi
# Not exec: this shell stays the namespace's first process, keeping the parent-death signal that a
# change of user would clear, so the whole sandbox dies with the grader. No capabilities are left
# (bounding set empty), so the learner's code cannot undo the mounts.
setpriv $ids --no-new-privs --inh-caps=-all --bounding-set=-all -- "$@"
"""


def _kept_paths() -> list[str]:
    """The Python environment and course_utils: mounted, read-only, into the sandbox's file system
    (those inside the system folders it carries anyway are there already)."""
    here = Path(course_utils.__file__).resolve().parent
    keep = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), here,
            Path(sys.executable).resolve().parent.parent}
    system = [Path("/", d).resolve() for d in SYSTEM_DIRS]
    return sorted(str(k) for k in keep if not any(k.is_relative_to(d) for d in system))


_LOOPBACK_UP = ("import fcntl, socket, struct; s = socket.socket(); "
                "flags = struct.unpack('16sh', fcntl.ioctl(s, 0x8913, struct.pack('16sh', b'lo', 0)))[1]; "
                "fcntl.ioctl(s, 0x8914, struct.pack('16sh', b'lo', flags | 1))")  # SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP


def setup_command(kind: str, uid: int, cgroup_dirs: list, command: list[str]) -> list[str]:
    """The command line that builds a sandbox of `kind` ("root" or "userns") and runs `command` in it
    as `uid` (root) or as the user namespace's root (userns). The environment needs LOUP and
    SYSTEM_DIRS (environment()). setpriv --pdeathsig: if the grader dies, unshare dies, and
    --kill-child takes the sandbox with it. The set-up script (root of the namespaces, before the
    learner's code) joins the cgroups."""
    if kind not in ("root", "userns"):
        raise ValueError(f"kind must be 'root' or 'userns', got {kind!r}")
    return ["setpriv", "--pdeathsig", "KILL", "--",
            "unshare", *(USERNS if kind == "userns" else []), *NAMESPACES, "--",
            "/bin/sh", "-c", _SETUP, "sandbox", str(uid) if kind == "root" else "same", *_kept_paths(),
            "--cgroups", *[str(d) for d in cgroup_dirs], "--", *command]


def environment() -> dict[str, str]:
    """What the set-up script reads from its environment (it unsets both before the learner's code)."""
    return {"LOUP": _LOOPBACK_UP, "SYSTEM_DIRS": " ".join(SYSTEM_DIRS)}
