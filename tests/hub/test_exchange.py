"""nbgrader's exchange on the hub, attacked by learners: `nbgrader collect` takes each learner's
own submission and nothing else (course_admin.exchange.SafeCollect, hub/classroom.py
make_exchange).

No hub is started. The class's Unix accounts (an instructor, learners a, b and c), the state folder,
the exchange and the shared nbgrader configuration are made by hub/classroom.py's own steps; the
instructor's course holds the course configuration's exchange settings (COURSE_CONFIG), a solution
only the instructor can read and a small release of LESSON. The instructor runs `nbgrader
release_assignment`; each learner, and the instructor for a trial, `nbgrader submit` (their own
account, the hub's environment); then the attacks, each as its learner's account:
- c replaces their submitted notebook with a link to the instructor's solution;
- b makes a folder named as a's with a later time, another whose name holds no time, another that
  is a link to the instructor's solutions, and tries to rename and delete a's folder; b also sets
  their own submission's timestamp.txt back by years (to escape a late penalty);
then the instructor runs `nbgrader collect` once. Another test collects as a single Unix user
outside the hub (the course folder's exchange/, ids with and without an account). These need root
(useradd), else they are skipped with the reason: about 20 s on two idle cores, nbgrader's start
(3 s of CPU a command) most of it. The last tests try the copy on its own (any user, no account):
links, a pipe, another's file, too much, a bad timestamp.txt, and a link swapped in while it copies.
"""

import json
import os
import pwd
import secrets
import shutil
import stat
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from datetime import datetime, timedelta, timezone

import nbformat
import pytest
from nbgrader.utils import parse_utc

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "hub"))
import classroom
sys.path.insert(0, str(ROOT / "tests" / "hub"))
from hubdriver import remove_account, why_not

from course_admin import exchange

LESSON = "01-circuits"
LATER = "2099-01-01 00:00:00.000000 UTC"   # a time after any real submission's
SECRET = "SOLUTION-" + secrets.token_hex(8)


COURSE_CONFIG = """import os
c = get_config()
c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
c.Exchange.root = (os.environ.get("COURSE_EXCHANGE")
                   or os.path.join(c.CourseDirectory.root, "exchange"))
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "notebooks"
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback"]
"""


def notebook(text: str) -> str:
    return nbformat.writes(nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_markdown_cell(text, id="text")]))


def owned_by(name: str, *paths: Path) -> None:
    user = pwd.getpwnam(name)
    for path in paths:
        for p in [path, *(path.rglob("*") if path.is_dir() else [])]:
            os.chown(p, user.pw_uid, user.pw_gid, follow_symlinks=False)


def nbgrader(name: str, cwd: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return classroom.as_user(name, [str(Path(sys.prefix) / "bin" / "nbgrader"), *args], cwd, env,
                             timeout=300)


def learner_tries(name: str, step: str, *args: str) -> str:
    """As the Unix user `name`, the Python expression `step` (args in sys.argv[1:]): "ok", or the
    name of the OSError it raised."""
    code = ("import json, os, sys\ntry:\n    " + step + "\n    print(json.dumps('ok'))\n"
            "except OSError as e:\n    print(json.dumps(type(e).__name__))\n")
    done = subprocess.run(["runuser", "-u", name, "--", sys.executable, "-c", code, *args], cwd="/",
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


# a submission folder, as nbgrader's submit fills it: sys.argv[1] the folder, [2] the notebook
MAKE_FOLDER = ("(os.mkdir(sys.argv[1]), "
               "open(os.path.join(sys.argv[1], '01-circuits.ipynb'), 'w').write(sys.argv[2]), "
               "open(os.path.join(sys.argv[1], 'timestamp.txt'), 'w')"
               ".write('2099-01-01 00:00:00.000000 UTC'))")


@pytest.fixture(scope="module")
def collected():
    """The class, its submissions, the attacks and one `nbgrader collect`. Returns what the tests
    check."""
    reason = why_not("the exchange test", ("useradd", "userdel", "usermod", "runuser"))
    if reason:
        pytest.skip(reason)
    prefix = "bbx" + secrets.token_hex(3)
    accounts = classroom.Accounts(f"{prefix}i", [f"{prefix}a", f"{prefix}b", f"{prefix}c"])
    instructor, (victim, attacker, linker) = accounts.instructor, accounts.learners
    tmp = Path(tempfile.mkdtemp(prefix="bbx-exchange-"))
    tmp.chmod(0o711)
    state, course_id = tmp / "state", classroom.course_id()
    try:
        classroom.make_state(state)
        classroom.make_accounts(state, [instructor, *accounts.learners])
        classroom.join_groups(accounts)
        classroom.make_exchange(state, instructor, course_id)
        classroom.write_shared_config(state, course_id)
        course = classroom.course_dir(instructor)
        solution = course / "solutions" / LESSON / f"{LESSON}.ipynb"
        # the configuration's release_directory
        release = course / "notebooks" / LESSON / f"{LESSON}.ipynb"
        for path, text in ((solution, notebook(SECRET)), (release, notebook("the lesson"))):
            path.parent.mkdir(parents=True)
            path.write_text(text)
        # the course's configuration as far as the exchange goes (its grader, which imports torch,
        # would make each nbgrader command seconds slower;
        # test_the_course_configuration_keeps_safecollect)
        (course / "nbgrader_config.py").write_text(COURSE_CONFIG)
        course.chmod(0o700)
        owned_by(instructor, course)
        env = {name: classroom.user_environment(state, accounts, name)
               for name in [instructor, *accounts.learners]}
        done = nbgrader(instructor, course, env[instructor], "release_assignment", LESSON,
                        "--force")
        assert done.returncode == 0, done.stdout + done.stderr
        # each learner submits their work, and the instructor a test submission of their own (from
        # a folder of theirs that is not the course)
        work, folders = {}, {}
        for name in [*accounts.learners, instructor]:
            folders[name] = Path(pwd.getpwnam(name).pw_dir) / (
                "trial" if name == instructor else "")
            work[name] = notebook(f"the work of {name}")
            (folders[name] / LESSON).mkdir(parents=True)
            (folders[name] / LESSON / f"{LESSON}.ipynb").write_text(work[name])
            owned_by(name, folders[name])
        submitting = datetime.now(timezone.utc).replace(tzinfo=None, microsecond=0)
        with ThreadPoolExecutor(4) as pool:
            submits = list(pool.map(lambda n: nbgrader(n, folders[n], env[n], "submit", LESSON),
                                    folders))
        assert all(s.returncode == 0 for s in submits), [s.stdout + s.stderr for s in submits]

        inbound = state / "exchange" / course_id / "inbound"
        # submit's log names it
        mine = {name: next(inbound.glob(f"{name}+{LESSON}+*")) for name in accounts.learners}
        # 1. c's notebook becomes a link to the instructor's solution, which c cannot read
        link = mine[linker] / f"{LESSON}.ipynb"
        attack = {"linker reads the solution": learner_tries(linker, "open(sys.argv[1]).read()",
                                                             str(solution)),
                  "link": learner_tries(linker, "os.remove(sys.argv[1]), "
                                                "os.symlink(sys.argv[2], sys.argv[1])",
                                        str(link), str(solution))}
        # 2. b forges a's submission, later than a's; a name without a time; a folder that is a link
        forged = inbound / f"{victim}+{LESSON}+{LATER}+forged"
        malformed = inbound / f"{attacker}+{LESSON}+not a time+x"
        linked = inbound / f"{attacker}+{LESSON}+{LATER}+link"
        attack["forged"] = learner_tries(attacker, MAKE_FOLDER, str(forged),
                                         notebook(f"forged by {attacker}"))
        attack["malformed"] = learner_tries(attacker, MAKE_FOLDER, str(malformed),
                                            notebook(f"malformed by {attacker}"))
        attack["linked"] = learner_tries(attacker, "os.symlink(sys.argv[1], sys.argv[2])",
                                         str(solution.parent), str(linked))
        # 3. b renames or deletes a's folder (its name known, say, from a's screen)
        attack["rename"] = learner_tries(attacker, "os.rename(sys.argv[1], sys.argv[1] + 'x')",
                                         str(mine[victim]))
        attack["delete"] = learner_tries(attacker, "os.rmdir(sys.argv[1])", str(mine[victim]))
        # 4. b backdates their own submission
        attack["backdated"] = learner_tries(attacker,
                                            "open(sys.argv[1], 'w')"
                                            ".write('2001-01-01 00:00:00.000000 UTC')",
                                            str(mine[attacker] / "timestamp.txt"))

        done = nbgrader(instructor, course, env[instructor], "collect", LESSON)
        submitted = {name: course / "submitted" / name / LESSON / f"{LESSON}.ipynb"
                     for name in folders}
        yield {"done": done, "log": done.stdout + done.stderr, "attack": attack, "work": work,
               "submitted": {n: p.read_text() if p.exists() else None
                             for n, p in submitted.items()},
               "stamps": {n: parse_utc((p.parent / "timestamp.txt").read_text())
                          for n, p in submitted.items() if p.exists()},
               "submitting": submitting,
               "all collected": {str(p): p.read_bytes()
                                 for p in (course / "submitted").rglob("*") if p.is_file()},
               "inbound": inbound, "mine": mine, "link": link, "forged": forged,
               "malformed": malformed,
               "linked": linked, "victim": victim, "attacker": attacker, "linker": linker,
               "instructor": instructor, "tmp": tmp}
    finally:
        for name in [accounts.instructor, *accounts.learners]:
            remove_account(name)
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.hub
def test_collect_ends_well_for_the_class_whatever_the_learners_put_in_inbound(collected):
    assert collected["done"].returncode == 0, collected["log"]
    assert "Traceback" not in collected["log"], collected["log"]
    # the honest ones, the instructor's own test submission among them
    for name in (collected["victim"], collected["attacker"], collected["instructor"]):
        assert collected["submitted"][name] == collected["work"][name], name


@pytest.mark.slow
@pytest.mark.hub
def test_a_notebook_swapped_for_a_link_to_the_solution_is_not_collected_and_the_log_names_it(
        collected):
    assert collected["attack"]["linker reads the solution"] == "PermissionError"
    assert collected["attack"]["link"] == "ok"
    assert collected["submitted"][collected["linker"]] is None
    assert not any(SECRET.encode() in data for data in collected["all collected"].values())
    assert f"Not collected: {str(collected['link'])!r}: it is a link" in collected["log"], (
        collected["log"])


@pytest.mark.slow
@pytest.mark.hub
def test_a_folder_forged_in_a_learners_name_is_passed_over_and_theirs_collected(collected):
    assert collected["attack"]["forged"] == "ok"
    victim = collected["victim"]
    assert collected["submitted"][victim] == collected["work"][victim]
    assert (f"Not collected: {str(collected['forged'])!r}: it is owned by {collected['attacker']}, "
            f"not by {victim!r}") in collected["log"], collected["log"]


@pytest.mark.slow
@pytest.mark.hub
def test_a_folder_name_without_a_time_is_named_and_skipped_and_the_others_collected(collected):
    assert collected["attack"]["malformed"] == "ok"
    assert f"Not collected: {str(collected['malformed'])!r}: its name is not" in collected["log"], (
        collected["log"])
    attacker = collected["attacker"]
    # their real one, the only one left
    assert collected["submitted"][attacker] == collected["work"][attacker]


@pytest.mark.slow
@pytest.mark.hub
def test_a_submission_folder_that_is_a_link_is_passed_over(collected):
    assert collected["attack"]["linked"] == "ok"
    assert f"Not collected: {str(collected['linked'])!r}: it is a link" in collected["log"], (
        collected["log"])


@pytest.mark.slow
@pytest.mark.hub
def test_a_backdated_timestamp_counts_from_the_kernels_time_of_the_submission(collected):
    """The learner writes timestamp.txt (nbgrader's late penalty reads it): the collected copy holds
    the kernel's time of the submission's last change where the learner's is earlier; honest ones
    stand."""
    assert collected["attack"]["backdated"] == "ok"
    attacker, stamps = collected["attacker"], collected["stamps"]
    assert stamps[attacker] >= collected["submitting"], stamps
    assert ("its timestamp.txt says 2001-01-01 00:00:00 UTC, "
            "but its files were last changed at" in collected["log"])
    moved = [line for line in collected["log"].splitlines() if "lateness counts from" in line]
    # the honest ones' times stand
    assert len(moved) == 1 and str(collected["mine"][attacker]) in moved[0], moved
    for name in (collected["victim"], collected["instructor"]):
        assert stamps[name] >= collected["submitting"], (name, stamps)


@pytest.mark.slow
@pytest.mark.hub
def test_inbound_is_sticky_so_a_learner_cannot_rename_or_delete_another_learners_folder(collected):
    mode = collected["inbound"].stat().st_mode   # as nbgrader's release_assignment left it
    assert (stat.S_IMODE(mode) == 0o3733
            and collected["inbound"].stat().st_uid == pwd.getpwnam(collected["instructor"]).pw_uid)
    assert collected["attack"]["rename"] == "PermissionError"
    assert collected["attack"]["delete"] == "PermissionError"
    assert collected["mine"][collected["victim"]].is_dir()


def test_the_course_configuration_keeps_safecollect(tmp_path):
    """The course's nbgrader_config.py, which the instructor's nbgrader loads after the hub's shared
    configuration, names no other exchange, and the fixture's course has its exchange settings."""
    from traitlets.config.loader import PyFileConfigLoader
    config = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()
    assert "ExchangeFactory" not in config and "ExchangeCollect" not in config
    (tmp_path / "nbgrader_config.py").write_text(COURSE_CONFIG)
    ours = PyFileConfigLoader("nbgrader_config.py", path=str(tmp_path)).load_config()
    for name in ("source_directory", "release_directory", "ignore"):
        assert ours.CourseDirectory[name] == config.CourseDirectory[name], name


@pytest.mark.slow
@pytest.mark.hub
def test_outside_the_hub_the_collecting_user_collects_the_submissions_they_made(collected):
    """One Unix user does everything, in a course folder with its exchange/ (the course's exchange
    settings outside the hub, with SafeCollect named): submissions for a learner's id with no
    account, and for one that is another account's name, as nbgrader's submit names and fills them,
    are both collected."""
    user = collected["instructor"]
    course = collected["tmp"] / "single"
    course.mkdir()
    (course / "nbgrader_config.py").write_text(
        COURSE_CONFIG + "c.CourseDirectory.course_id = 'single'\n"
                        "c.ExchangeFactory.collect = 'course_admin.exchange.SafeCollect'\n")
    ids = ["nosuchaccount", collected["victim"]]
    for student in ids:
        folder = (course / "exchange" / "single" / "inbound"
                  / f"{student}+{LESSON}+2026-01-01 00:00:00.000000 UTC+r")
        folder.mkdir(parents=True)
        (folder / f"{LESSON}.ipynb").write_text(notebook(f"the work of {student}"))
        (folder / "timestamp.txt").write_text("2026-01-01 00:00:00.000000 UTC")
    owned_by(user, course)
    done = nbgrader(user, course, {"PATH": f"{Path(sys.prefix) / 'bin'}:/usr/bin:/bin"}, "collect",
                    LESSON)
    assert done.returncode == 0 and "Not collected" not in done.stdout + done.stderr, (
        done.stdout + done.stderr)
    for student in ids:
        assert (course / "submitted" / student / LESSON / f"{LESSON}.ipynb").read_text() == (
            notebook(f"the work of {student}"))


# --- the copy on its own: any user, no account ----------------------------------------------------

def a_submission(folder: Path) -> Path:
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "data.txt").write_text("data")
    (folder / f"{LESSON}.ipynb").write_text(notebook("work"))
    (folder / "timestamp.txt").write_text("2026-01-01 00:00:00.000000 UTC")
    return folder


def copy(src: Path, dest: Path, budget: int = 10**6) -> None:
    exchange.copy_own(str(src), None, str(src), str(dest), os.geteuid(), budget)
    exchange.check_timestamp(str(src), str(dest))


def test_the_copy_takes_a_learners_own_files_and_folders(tmp_path):
    src = a_submission(tmp_path / "src")
    copy(src, tmp_path / "dest")
    assert ({str(p.relative_to(tmp_path / "dest")): p.read_bytes()
             for p in (tmp_path / "dest").rglob("*") if p.is_file()} ==
            {str(p.relative_to(src)): p.read_bytes() for p in src.rglob("*") if p.is_file()})


@pytest.mark.parametrize("plant, words", [
    (lambda src, secret: (src / "sub" / "data.txt").unlink()
     or (src / "sub" / "data.txt").symlink_to(secret), "it is a link"),
    (lambda src, secret: shutil.rmtree(src / "sub") or (src / "sub").symlink_to(secret.parent),
     "it is a link"),
    (lambda src, secret: os.mkfifo(src / "sub" / "pipe"), "it is neither a file nor a folder"),
    (lambda src, secret: (src / "sub" / "big").write_bytes(b"x" * 2000),
     "larger than CourseDirectory.max_dir_size"),
    (lambda src, secret: (src / "timestamp.txt").write_text("not a time"),
     "its timestamp.txt is not a time"),
    (lambda src, secret: os.chown(src / "sub" / "data.txt", 65534, 65534) if os.geteuid() == 0
     else pytest.skip("chown needs root"),
     "it is owned by"),
], ids=["file link", "folder link", "pipe", "too big", "bad timestamp", "another's file"])
def test_the_copy_refuses_and_names_what_is_not_the_learners_own(tmp_path, plant, words):
    src = a_submission(tmp_path / "src")
    secret = tmp_path / "secret" / "solution.ipynb"
    secret.parent.mkdir()
    secret.write_text(SECRET)
    plant(src, secret)
    with pytest.raises(exchange.Refused, match=words) as e:
        copy(src, tmp_path / "dest", budget=1500)
    assert repr(str(src)).strip("'") in str(e.value)
    assert not any(SECRET.encode() in p.read_bytes() for p in (tmp_path / "dest").rglob("*")
                   if p.is_file())


@pytest.mark.parametrize("stated, kept", [("2001-01-01 00:00:00.000000 UTC", False), (None, False),
                                           ("now", True),
                                           ("2099-01-01 00:00:00.000000 UTC", True)],
                         ids=["backdated", "none", "honest", "later than the kernel's"])
def test_lateness_counts_from_the_kernels_time_where_the_learners_is_earlier(tmp_path, stated,
                                                                             kept):
    src = a_submission(tmp_path / "src")
    if stated is None:
        (src / "timestamp.txt").unlink()
    else:
        now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f") + " UTC"
        (src / "timestamp.txt").write_text(now if stated == "now" else stated)
    changed = []
    exchange.copy_own(str(src), None, str(src), str(tmp_path / "dest"), os.geteuid(), 10**6,
                      changed)
    why = exchange.keep_kernel_time(str(tmp_path / "dest"), max(changed))
    written = parse_utc((tmp_path / "dest" / "timestamp.txt").read_text())
    kernel = datetime.fromtimestamp(max(changed), timezone.utc).replace(tzinfo=None)
    if kept:
        assert why is None and written == parse_utc((src / "timestamp.txt").read_text())
    else:
        assert (written == kernel.replace(microsecond=written.microsecond)
                and "lateness counts from" in why), why
        assert kernel >= datetime.now(timezone.utc).replace(tzinfo=None) - timedelta(minutes=5)


def test_a_notebook_swapped_with_a_link_while_it_is_copied_is_never_followed(tmp_path):
    """Another process swaps the notebook for a link to a secret and back as fast as it can, while
    the copy runs again and again: the copy gets the notebook or refuses, and never holds the
    secret."""
    src = a_submission(tmp_path / "src")
    secret = tmp_path / "secret.ipynb"
    secret.write_text(SECRET)
    (tmp_path / "real.ipynb").write_bytes((src / f"{LESSON}.ipynb").read_bytes())
    swapper = subprocess.Popen([sys.executable, "-c", (
        "import os, sys\nnb, real, secret, spare = sys.argv[1:]\n"
        "while True:\n"
        "    os.symlink(secret, spare); os.replace(spare, nb)\n"
        "    os.link(real, spare); os.replace(spare, nb)\n"
        "    if sys.stdout: print('swapping', flush=True); sys.stdout = None\n"),
        str(src / f"{LESSON}.ipynb"), str(tmp_path / "real.ipynb"), str(secret),
        str(tmp_path / "spare")],
        stdout=subprocess.PIPE, text=True)
    outcomes = set()
    try:
        assert swapper.stdout.readline() == "swapping\n"
        # 300 copies at least, and on until the swap has caught one mid-copy (a busy machine may
        # schedule the swapper rarely): at most 5000
        attempt = 0
        while attempt < 300 or (outcomes <= {"copied"} and attempt < 5000):
            attempt += 1
            dest = tmp_path / f"dest{attempt}"
            try:
                copy(src, dest)
                outcomes.add("copied")
            except (exchange.Refused, OSError) as e:
                outcomes.add("refused" if isinstance(e, exchange.Refused) else "not read")
            assert not any(SECRET.encode() in p.read_bytes() for p in dest.rglob("*")
                           if p.is_file())
            shutil.rmtree(dest, ignore_errors=True)
    finally:
        swapper.kill()
        swapper.wait()
    # the swap did happen under the copy
    assert "refused" in outcomes or "not read" in outcomes, outcomes
