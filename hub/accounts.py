"""The class's Unix accounts, for hub/classroom.py: who may log in, made and checked.

- Accounts: the instructor (a JupyterHub admin), the learners and the teaching assistants, kept in
  STATE/accounts.json.
- read_learners: the learners' account names from the roster (nbgrader's student list), each one
  checked before anything is changed: a valid name, not a system account, not the instructor, a
  primary group of its own (or of the instructor's only).
- read_tas: the teaching assistants' names (course.sh hub --tas), checked the same way, none a
  learner.
- make_accounts: useradd for the ones that do not exist, a generated password each (kept in
  STATE/passwords.csv, root only), every home mode 700.
- join_groups: the instructor joins each learner's own group (nbgrader collect reads submissions
  through it: course_admin.exchange).
- as_user: a command run as one of them, in a clean environment.
"""

import grp
import json
import os
import pwd
import re
import secrets
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path

from course_utils.grader.sandbox import FIRST_UID

ACCOUNT_NAME = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
# useradd's UID_MIN and UID_MAX on Debian (/etc/login.defs), less the grader's sandbox uids
# (FIRST_UID + slot, from 60000): other uids are system accounts (nobody is 65534) or the sandbox's,
# never reused for the class
HUMAN_UIDS = range(1000, FIRST_UID)


class BadInput(Exception):
    """A one-line reason the class cannot be set up as asked."""


@dataclass
class Accounts:
    """Who may log in: the instructor (admin), the learners and the teaching assistants, who grade
    the instructor's course with them (hub/jupyterhub_config.py: the course's service). Kept in
    STATE/accounts.json."""

    instructor: str
    learners: list[str]
    tas: list[str] = field(default_factory=list)   # none in a file written before there were TAs

    @staticmethod
    def read(state: Path) -> "Accounts":
        return Accounts(**json.loads((state / "accounts.json").read_text()))

    def write(self, state: Path) -> None:
        write_private(state / "accounts.json", json.dumps(asdict(self), indent=1) + "\n")


def as_user(name: str, command: list[str], cwd: Path, env: dict[str, str],
            **kwargs) -> subprocess.CompletedProcess:
    """Run command as the Unix user `name` (runuser), in cwd, with env added to a clean
    environment."""
    home = pwd.getpwnam(name).pw_dir
    full = {"HOME": home, "USER": name, "LOGNAME": name, "LANG": "C.UTF-8", **env}
    return subprocess.run(["runuser", "-u", name, "--", "env", "-i",
                           *[f"{k}={v}" for k, v in full.items()], *command],
                          cwd=cwd, text=True, capture_output=True, **kwargs)


def write_private(path: Path, text: str, mode: int = 0o600) -> None:
    """Write text to path, created with `mode` from the start (never readable by others in between),
    never through a link (OSError for one)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
    os.fchmod(fd, mode)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def read_learners(roster: Path, instructor: str) -> list[str]:
    """The learners' account names, from the roster's id column; BadInput for a name that cannot be
    an account of its own (not a valid name, the instructor, a system account)."""
    from course_admin.grades import BadInput as RosterError, read_roster
    try:
        ids = [row["id"] for row in read_roster(roster)]
    except RosterError as e:
        raise BadInput(str(e)) from None
    check_names([instructor, *ids])
    if instructor in ids:
        raise BadInput(f"the instructor {instructor!r} is also in the roster")
    for name in [instructor, *ids]:
        check_own_group(name, instructor)
    return ids


def read_tas(tas: str, instructor: str, learners: list[str]) -> list[str]:
    """The teaching assistants' account names from course.sh hub's --tas (comma-separated, may be
    empty); BadInput for a name that cannot be an account of its own, the instructor or a
    learner."""
    names = [name.strip() for name in tas.split(",") if name.strip()]
    check_names(names)
    for name in names:
        if name == instructor or name in learners:
            role = "the instructor" if name == instructor else "a learner in the roster"
            raise BadInput(f"the teaching assistant {name!r} is also {role}: "
                           f"an account has one role")
    return list(dict.fromkeys(names))


def check_names(names: list[str]) -> None:
    """BadInput for a name that cannot be a class account: not a valid Unix name, or a system
    account's."""
    for name in names:
        if not ACCOUNT_NAME.fullmatch(name):
            raise BadInput(f"{name[:40]!r} cannot be a Unix account name "
                           f"(lower-case letters, digits, _ and -, "
                           f"starting with a letter or _, at most 32)")
        try:
            uid = pwd.getpwnam(name).pw_uid
        except KeyError:
            continue
        if uid not in HUMAN_UIDS:
            raise BadInput(f"{name!r} is a system account (uid {uid}): choose another name")


def check_own_group(name: str, instructor: str) -> None:
    """A submission is readable by its learner's and the instructor's primary groups (join_groups,
    course_admin.exchange): BadInput when an existing account shares its primary group with anyone
    but the instructor."""
    try:
        gid = pwd.getpwnam(name).pw_gid
    except KeyError:
        return   # useradd --user-group makes it a group of its own
    others = {u.pw_name for u in pwd.getpwall() if u.pw_gid == gid} | set(grp.getgrgid(gid).gr_mem)
    others -= {name, instructor}
    if others:
        raise BadInput(f"{name}'s group {grp.getgrgid(gid).gr_name!r} has other members "
                       f"({', '.join(sorted(others))[:100]}): they could read {name}'s submissions")


def make_accounts(state: Path, names: list[str]) -> dict[str, str]:
    """Create the accounts that do not exist, each with a generated password; {name: password} of
    the new ones, each kept in STATE/passwords.csv (root only) as soon as it is set. Every home
    becomes mode 700."""
    new = {}
    passwords = state / "passwords.csv"
    for name in names:
        try:
            pwd.getpwnam(name)
        except KeyError:
            made = subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash",
                                   "--user-group",
                                   # never a sandbox's uid
                                   "--key", f"UID_MAX={HUMAN_UIDS[-1]}", name],
                                  capture_output=True, text=True)
            if made.returncode != 0:
                raise BadInput(f"useradd could not make the account {name}: "
                               f"{made.stderr.strip()[:200]}")
            new[name] = secrets.token_urlsafe(12)
            subprocess.run(["chpasswd"], input=f"{name}:{new[name]}\n", text=True, check=True)
            old = passwords.read_text() if passwords.exists() else "account,password\n"
            write_private(passwords, old + f"{name},{new[name]}\n")
        os.chmod(pwd.getpwnam(name).pw_dir, 0o700)
    return new


def join_groups(accounts: Accounts) -> None:
    """The instructor joins each learner's primary group (a group of that learner alone): nbgrader
    collect reads a submission through it (course_admin.exchange); homes stay 700, so it opens
    nothing else of the learner's."""
    groups = [grp.getgrgid(pwd.getpwnam(name).pw_gid).gr_name for name in accounts.learners]
    if groups:
        subprocess.run(["usermod", "--append", "--groups", ",".join(groups), accounts.instructor],
                       check=True)
