"""nbgrader's exchange for a class on JupyterHub: `bash course.sh hub` names PrivateSubmit and
SafeCollect in every user's nbgrader configuration (hub/classroom.py, write_shared_config).

nbgrader's own submit leaves a submission readable, even writable, by every user of the machine
(files 0644 in a folder 0777), hidden only by its name's timestamp and random string. PrivateSubmit
submits the same way, then closes the submission to everyone but its learner and the members of its
files' group: the learner's own group or the instructor's (the inbound folder is the instructor's
and set-group-id, but copying the learner's folder clears that bit on the submission's folder, so
files written after the copy take the learner's group). On the hub each of these groups holds its
account and the instructor only (classroom.check_own_group, join_groups), so `nbgrader collect`
reads the submission and other learners get "Permission denied", even with the exact path.

nbgrader's own collect, run by the instructor, takes for each learner the folder of inbound named
LEARNER+LESSON+TIME+RANDOM with the latest TIME, whoever made it (it only warns), copies it with
links followed (a notebook swapped for a link to the instructor's solutions is collected as the
learner's), and stops for the whole class at a name whose TIME does not parse. SafeCollect lists
only the folders it may take: a name that parses, a folder (not a link), owned by the learner it
names (the Unix account of that name: on the hub a learner's id is their account) or by the
collecting user (a submission the instructor made, for themselves or for a learner; outside the
hub, where one Unix account does everything, every folder is the collecting user's, so all are
taken); among those it takes the latest, as nbgrader does. It copies that folder without following
any link, into a private copy that nbgrader's copy (its ignore and size rules) then reads: a link
in it, anything but files and folders, anything another account owns, more than
CourseDirectory.max_dir_size, or a timestamp.txt that is not a time refuses the submission (that
learner is not collected; their earlier folders are not taken instead, and a copy collected before
stays: the private copy is made before nbgrader's --update deletes the old one). The time a late
penalty counts from is the learner's own text (timestamp.txt, in a folder they own, or none at all):
where the kernel's time of the submission's last change (ctime, which no user can set back) is later
by more than SUBMIT_SLACK, or timestamp.txt is missing, the collected copy's timestamp.txt holds the
kernel's time instead, and the log says so. Every folder passed over or
refused is named in the log (an error) and the others are collected: `nbgrader collect` exits 0.
No learner can rename or delete another's folder: inbound is sticky (classroom.make_exchange).
"""

import os
import pwd
import stat
import tempfile
from datetime import datetime, timezone

from nbgrader.exchange.default.collect import ExchangeCollect
from nbgrader.exchange.default.submit import ExchangeSubmit
from nbgrader.utils import parse_utc
from traitlets import Bool

FILE_MODE = 0o640     # the learner writes, the group (the instructor) reads
FOLDER_MODE = 0o770   # and the instructor may delete it, as nbgrader's 0777 let every user
# Seconds nbgrader's submit may take from taking its time (at its start) to the last change of the
# submission (its copy, PrivateSubmit's permissions): the kernel's later ctime within it is not
# late. The ctime is the exchange's file system's clock; on the hub, the same machine's as the
# learners' servers.
SUBMIT_SLACK = 60


class PrivateSubmit(ExchangeSubmit):
    """nbgrader's ExchangeSubmit, its submission closed to everyone but its learner and the
    instructor."""

    def copy_files(self):
        super().copy_files()
        self.set_perms(os.path.join(self.inbound_path, self.assignment_filename),
                       fileperms=FILE_MODE, dirperms=FOLDER_MODE)


class Refused(Exception):
    """Why a submission is not collected (one line, naming the path)."""


class SafeCollect(ExchangeCollect):
    """nbgrader's ExchangeCollect that takes a learner's own folders only, never follows a link and
    names, then skips, whatever it cannot take."""

    check_owner = Bool(False, help="nbgrader's warning about a folder's owner: off, SafeCollect "
                                   "takes only folders their learner owns").tag(config=True)

    def init_src(self):
        self.owners = {}      # the name of each folder it may take: its owner's uid
        # a refused folder's record has the learner None, so it is no learner's latest
        super().init_src()
        self.src_records = [r for r in self.src_records if r["username"] is not None]

    def _path_to_record(self, path):
        """nbgrader's record of the folder `path`, or refuse(path) if it may not be taken."""
        name = os.path.basename(path)
        try:
            record = super()._path_to_record(path)
        except Exception:     # the time's parser (dateutil) raises several kinds
            return self.refuse(path, "its name is not LEARNER+LESSON+TIME+RANDOM with a time")
        try:
            info = os.lstat(path)
        except OSError as e:
            return self.refuse(path, f"it cannot be read ({e.strerror})")
        if not stat.S_ISDIR(info.st_mode):
            return self.refuse(path, "it is a link" if stat.S_ISLNK(info.st_mode)
                               else "it is not a folder")
        if info.st_uid != os.geteuid() and info.st_uid != account_uid(record["username"]):
            return self.refuse(path,
                               f"it is owned by {user_name(info.st_uid)}, not by "
                               f"{record['username']!r}")
        self.owners[name] = info.st_uid
        return record

    def refuse(self, path, reason):
        """Log that `path` is not collected, and why; its record, of the learner None."""
        self.log.error("Not collected: %r: %s", path, reason)
        return {"username": None, "filename": os.path.basename(path), "timestamp": datetime.min}

    def copy_files(self):
        """nbgrader's collect of the latest folder of each learner, each first copied privately
        without following any link (copy_own): a refused one is named in the log and not collected,
        and a copy collected earlier stays (nbgrader's --update deletes it only once the new one can
        be taken)."""
        with tempfile.TemporaryDirectory(prefix="nbgrader-collect-") as private:
            self.private_copies, kept = {}, []
            for record in self.src_records:
                src = os.path.join(self.inbound_path, record["filename"])
                copy = os.path.join(private, record["filename"])
                changed = []
                try:
                    copy_own(src, None, src, copy, self.owners[record["filename"]],
                             1000 * self.coursedir.max_dir_size, changed)
                    if not os.path.isdir(copy):
                        raise Refused(f"{src!r}: it is not a folder")
                    check_timestamp(src, copy)
                    if (why := keep_kernel_time(copy, max(changed))) is not None:
                        self.log.warning("%r: %s", src, why)
                except (Refused, OSError, RecursionError) as e:
                    self.log.error("Not collected: %s", e if isinstance(e, Refused)
                                   else f"{src!r}: it cannot be copied ({e})")
                    continue
                self.private_copies[src] = copy
                kept.append(record)
            self.src_records = kept
            super().copy_files()

    def do_copy(self, src, dest, log=None):
        """nbgrader's copy (its ignore and size rules) of the private copy of the submission src."""
        super().do_copy(self.private_copies[src], dest)


def account_uid(name: str) -> int | None:
    try:
        return pwd.getpwnam(name).pw_uid
    except (KeyError, ValueError):
        return None


def user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def copy_own(name: str, dir_fd: int | None, shown: str, dest: str, uid: int, budget: int,
             changed: list | None = None) -> int:
    """Copy the file or folder `name` (in the folder open as dir_fd; None: a path), `shown` in
    messages, to dest without following any link: Refused, naming the path, for a link, anything but
    files and folders, anything not owned by uid, or more than `budget` bytes in all. Returns the
    bytes left; appends to `changed` each copied entry's ctime (the kernel's time of its last
    change)."""
    fd, info = open_own(name, dir_fd, shown, uid)
    if changed is not None:
        changed.append(info.st_ctime)
    try:
        if stat.S_ISDIR(info.st_mode):
            os.mkdir(dest, 0o700)
            with os.scandir(fd) as entries:
                names = sorted(e.name for e in entries)
            for child in names:
                budget = copy_own(child, fd, f"{shown}/{child}", os.path.join(dest, child), uid,
                                  budget, changed)
            return budget
        with open(dest, "xb") as out:
            while block := os.read(fd, 1 << 20):
                budget -= len(block)
                if budget < 0:
                    raise Refused(f"{shown!r}: the submission is larger than "
                                  "CourseDirectory.max_dir_size")
                out.write(block)
        return budget
    finally:
        os.close(fd)


def open_own(name: str, dir_fd: int | None, shown: str, uid: int) -> tuple[int, os.stat_result]:
    """Open `name` (in dir_fd) without following a link: (fd, its stat). Refused for a link,
    anything but a file or a folder, or an owner other than uid: checked before it is opened (no
    link, pipe or device is opened) and again on what was opened (had it been swapped in
    between)."""
    check_own(os.stat(name, dir_fd=dir_fd, follow_symlinks=False), shown, uid)
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        info = os.fstat(fd)
        check_own(info, shown, uid)
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def check_own(info: os.stat_result, shown: str, uid: int) -> None:
    if stat.S_ISLNK(info.st_mode):
        raise Refused(f"{shown!r}: it is a link")
    if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
        raise Refused(f"{shown!r}: it is neither a file nor a folder")
    if info.st_uid != uid:
        raise Refused(f"{shown!r}: it is owned by {user_name(info.st_uid)}, not by the "
                      "submission's owner")


def check_timestamp(shown: str, folder: str) -> None:
    """Refused when the submission's timestamp.txt (which nbgrader reads after collecting) is not a
    time."""
    path = os.path.join(folder, "timestamp.txt")
    # nbgrader would open() it at every later collect
    if os.path.lexists(path) and not os.path.isfile(path):
        raise Refused(f"{shown!r}: its timestamp.txt is not a file")
    if os.path.isfile(path):
        try:
            with open(path, errors="replace") as f:
                parse_utc(f.read().strip() or None)
        except Exception:
            raise Refused(f"{shown!r}: its timestamp.txt is not a time") from None


def keep_kernel_time(folder: str, changed: float) -> str | None:
    """Make the collected copy `folder`'s timestamp.txt no earlier than `changed` (the submission's
    last ctime, less SUBMIT_SLACK): nbgrader's late penalty reads it, and the learner wrote it.
    Returns what was changed and why, for the log, or None where the learner's time stands."""
    path = os.path.join(folder, "timestamp.txt")
    kernel = datetime.fromtimestamp(changed, timezone.utc).replace(tzinfo=None)
    stated = None
    if os.path.isfile(path):
        with open(path, errors="replace") as f:
            stated = parse_utc(f.read().strip() or None)   # a time: check_timestamp ran first
    if stated is not None and (kernel - stated).total_seconds() <= SUBMIT_SLACK:
        return None
    with open(path, "w") as f:
        f.write(kernel.strftime("%Y-%m-%d %H:%M:%S.%f") + " UTC")
    said = (f"its timestamp.txt says {stated} UTC" if stated is not None
            else "it has no timestamp.txt")
    return (f"{said}, but its files were last changed at {kernel} UTC (the kernel's time): "
            f"lateness counts from {kernel} UTC")
