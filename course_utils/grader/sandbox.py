"""How a learner's worker is kept apart from the machine: the sandbox's namespaces and file system.

setup_command(kind, uid, cgroup_dirs, command) is the command line that builds a sandbox and runs
`command` in it; course_utils.grader.worker.Worker starts it, course_utils.grader.capabilities tries
it once to learn which kind this machine gives:
- "root" (grading as root: CI, a container) and "userns" (a normal user where the kernel allows
  unprivileged user namespaces, as most Linux distributions do): new network, mount, PID, IPC and
  UTS namespaces (util-linux `unshare`): no network but its own loopback (so gloo between its own
  processes works), and a file system of its own, built from an allowlist and entered with
  `pivot_root`: the system's /usr, /bin, /lib*, /etc (and /nix) and the Python environment and
  course_utils, all read-only (submounts included), a read-only /dev of six devices, its own /proc
  (/proc/sys read-only), its own read-only /sys, and a private /tmp and /dev/shm, all it can write.
  The course directory (solutions, gradebook, other submissions), /home, /root, /srv, /opt, /var,
  /run and every other folder simply are not there. No capabilities are left, a process limit of
  its own holds, and everything is killed with it;
- "root" also: its own uid (FIRST_UID + slot, via `setpriv`), so sandboxes cannot read each other's
  files or anything that is not world-readable, and the worker's cgroups
  (course_utils.grader.cgroups), joined by the set-up script before the learner's code runs. Under
  "userns" the learner's code keeps the instructor's uid outside its namespaces, which matters only
  for what the allowlist shows (the system's files) and for memory, which is limited per process
  only.

private_network(command) is the reference worker's (the instructor's solution's) one namespace: a
network of its own with only its loopback up, nothing else changed (same uid, same files, same
cgroups), so that no service it starts (gloo's sockets between run_workers' ranks, lesson 09) can be
reached by another user of the machine. As root a network namespace; as a normal user a user
namespace that maps the user to itself around it. Where neither can be made it runs as before,
with a warning (logged once) that names the cause.
"""

import functools
import logging
import os
import subprocess
import sys
from pathlib import Path

import course_utils

FIRST_UID = 60000


# a normal user becomes root of its own user namespace, no more
USERNS = ["--user", "--map-root-user"]
NAMESPACES = ["--net", "--mount", "--pid", "--ipc", "--uts", "--fork", "--kill-child",
              "--mount-proc"]


# Top-level folders the sandbox's file system carries, read-only (symbolic links are copied as
# links).
SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "nix")
# where Debian installs util-linux (pivot_root: /usr/sbin)
SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
TOOLS = ("unshare", "setpriv", "pivot_root")    # util-linux's, which the set-up runs


def tool_path() -> str:
    """The PATH the sandbox's tools are looked up and run with: the grader's own PATH, then the
    system's folders it lacks, so that they are found whatever PATH the grader was started with (an
    instructor's login shell has no /usr/sbin)."""
    own = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d]
    return os.pathsep.join(own + [d for d in SYSTEM_PATH.split(":") if d not in own])

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
# Loopback up (gloo between the learner's own processes); python's ioctl where neither tool is
# installed.
ip link set lo up 2>/dev/null || ifconfig lo up 2>/dev/null || "$1" -c "$LOUP"
for d in $SYSTEM_DIRS; do
  if [ -L "/$d" ]; then ln -s "$(readlink "/$d")" "$R/$d"
  elif [ -d "/$d" ]; then mkdir "$R/$d"; mount --rbind "/$d" "$R/$d"; fi
done
# Every mount brought in, submounts included, read-only (mountinfo's 5th field, octal escapes
# decoded).
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
  if [ -e "$R/proc/$f" ]; then
    mount --bind "$R/proc/$f" "$R/proc/$f"; mount -o remount,bind,ro "$R/proc/$f"
  fi
done
mkdir "$R/sys"
# its own, without cgroups
mount -t sysfs -o ro,nosuid,nodev,noexec sysfs "$R/sys" 2>/dev/null || true
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
if [ "$uid" != same ]; then
  chown "$uid:$uid" /tmp/work; ids="--reuid=$uid --regid=$uid --clear-groups"
fi
# Not exec: this shell stays the namespace's first process, keeping the parent-death signal that a
# change of user would clear, so the whole sandbox dies with the grader. No capabilities are left
# (bounding set empty), so the learner's code cannot undo the mounts.
setpriv $ids --no-new-privs --inh-caps=-all --bounding-set=-all -- "$@"
"""


def python_path() -> str:
    """PYTHONPATH for a worker: the folder holding the grader's own course_utils, so that the
    sandbox imports the very code the grader imported (mounted by _kept_paths), not whatever
    course_utils the Python environment would find (a .venv shared by two checkouts)."""
    return str(Path(course_utils.__file__).resolve().parent.parent)


def _kept_paths() -> list[str]:
    """The Python environment and course_utils: mounted, read-only, into the sandbox's file system
    (those inside the system folders it carries anyway are there already)."""
    here = Path(course_utils.__file__).resolve().parent
    keep = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), here,
            Path(sys.executable).resolve().parent.parent}
    system = [Path("/", d).resolve() for d in SYSTEM_DIRS]
    return sorted(str(k) for k in keep if not any(k.is_relative_to(d) for d in system))


# SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP
_LOOPBACK_UP = ("import fcntl, socket, struct; s = socket.socket(); "
                "flags = struct.unpack('16sh', "
                "fcntl.ioctl(s, 0x8913, struct.pack('16sh', b'lo', 0)))[1]; "
                "fcntl.ioctl(s, 0x8914, struct.pack('16sh', b'lo', flags | 1))")


def setup_command(kind: str, uid: int, cgroup_dirs: list, command: list[str]) -> list[str]:
    """The command line that builds a sandbox of `kind` ("root" or "userns") and runs `command` in
    it as `uid` (root) or as the user namespace's root (userns). The environment needs LOUP and
    SYSTEM_DIRS (environment()). setpriv --pdeathsig: if the grader dies, unshare dies, and
    --kill-child takes the sandbox with it. The set-up script (root of the namespaces, before the
    learner's code) joins the cgroups."""
    if kind not in ("root", "userns"):
        raise ValueError(f"kind must be 'root' or 'userns', got {kind!r}")
    return ["setpriv", "--pdeathsig", "KILL", "--",
            "unshare", *(USERNS if kind == "userns" else []), *NAMESPACES, "--",
            "/bin/sh", "-c", _SETUP, "sandbox", str(uid) if kind == "root" else "same",
            *_kept_paths(),
            "--cgroups", *[str(d) for d in cgroup_dirs], "--", *command]


def environment() -> dict[str, str]:
    """What the set-up script reads from its environment (it unsets both before the learner's
    code)."""
    return {"LOUP": _LOOPBACK_UP, "SYSTEM_DIRS": " ".join(SYSTEM_DIRS)}


# Runs as `python -I -S -c _PRIVATE_NETWORK COMMAND...`: one process, replaced by COMMAND (same
# pid).
_PRIVATE_NETWORK = r"""
import os, sys
try:
    from os import unshare, CLONE_NEWNET, CLONE_NEWUSER  # Python 3.12+
except ImportError:
    import ctypes
    CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000
    libc = ctypes.CDLL(None, use_errno=True)
    def unshare(flags):
        if libc.unshare(flags) != 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
uid, gid = os.geteuid(), os.getegid()
try:
    unshare(CLONE_NEWNET)  # root (CAP_SYS_ADMIN): a network namespace and nothing else
except OSError as as_is:
    # A normal user: a user namespace in which this user is itself (same uid and gid, so the same
    # files and owners; supplementary groups kept), owning the new network namespace.
    try:
        unshare(CLONE_NEWUSER | CLONE_NEWNET)
    except OSError as e:
        sys.exit(f"no network namespace can be made here: as uid {uid}: {as_is.strerror}; in a "
                 f"user namespace of its own: {e.strerror} (unprivileged user namespaces are off: "
                 "the sysctls user.max_user_namespaces, kernel.unprivileged_userns_clone or "
                 "AppArmor's restriction)")
    try:
        for name, text in (("uid_map", f"{uid} {uid} 1"), ("setgroups", "deny"),
                           ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)
    except OSError as e:
        sys.exit(f"no network namespace can be made here: as uid {uid}: {as_is.strerror}; a user "
                 f"namespace that keeps uid {uid}: {e.strerror}")
""" + _LOOPBACK_UP + r"""  # its loopback up
os.execvp(sys.argv[1], sys.argv[1:])  # a uid other than 0 keeps no capabilities past this exec
"""

_log = logging.getLogger(__name__)


def _private_network_prefix() -> list[str]:
    return [sys.executable, "-I", "-S", "-c", _PRIVATE_NETWORK]


@functools.lru_cache(maxsize=1)
def private_network_problem() -> str | None:
    """Why no private network can be made here (None: it can), found out once per process by making
    one: the wrapped probe must see its own network namespace, its uid unchanged and its loopback
    up."""
    check = ("import os, socket, sys; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); "
             "socket.create_connection(s.getsockname(), timeout=5).close(); "
             "sys.exit(0 if os.geteuid() == int(sys.argv[1]) "
             "and os.readlink('/proc/self/ns/net') != sys.argv[2] else 3)")
    command = [sys.executable, "-I", "-S", "-c", check, str(os.geteuid()),
               os.readlink("/proc/self/ns/net")]
    try:
        probe = subprocess.run(_private_network_prefix() + command, stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=300,
                               env={"PATH": tool_path()})
    # not an answer (and not cached): a slow machine never lowers the protection
    except subprocess.TimeoutExpired:
        raise RuntimeError("making a network namespace took over 300 s: the machine is too busy "
                           "to grade safely now; try again later") from None
    except OSError as e:
        return f"{type(e).__name__}: {e}"
    if probe.returncode == 0:
        return None
    lines = [line for line in probe.stderr.splitlines()
             if line.strip() and not line[0].isspace()]
    return lines[-1][:400] if lines else f"exit code {probe.returncode}"


def private_network(command: list[str]) -> list[str]:
    """`command` made to run in a network namespace of its own with its loopback up, nothing else
    changed: the same uid, file system and cgroups (join them before: this wraps with an exec, so
    the pid stays command's). Where no network namespace can be made (no root and no unprivileged
    user namespaces), `command` unchanged and a warning logged once: a weaker fallback, not an
    unsafe one, for the instructor's own code, where (as root, or with user namespaces, the same
    mechanisms) a learner's worker gets no sandbox either and grading needs sandbox "optional"
    anyway."""
    problem = private_network_problem()
    if problem is None:
        return _private_network_prefix() + list(command)
    _warn_once(problem)
    return list(command)


@functools.lru_cache(maxsize=1)
def _warn_once(problem: str) -> None:
    _log.warning("the reference worker runs without a network of its own (%s): services it starts, "
                 "such as gloo's sockets in lesson 09, listen on this machine's loopback, where "
                 "other users could reach them while it grades", problem)
