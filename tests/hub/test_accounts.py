"""hub/accounts.py and the command's bad input: checked before `bash course.sh hub` changes
anything.

No account is made here: a roster is read and refused, and the command is run with input it must
refuse before it looks at the machine (one line on stderr, exit 2, no traceback).
"""

import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "hub"))
import accounts

HEADER = "id,first_name,last_name,email\n"


def roster(tmp_path, *ids, header=HEADER):
    path = tmp_path / "roster.csv"
    path.write_text(header + "".join(f"{i},First,Last,{i}@example.org\n" for i in ids))
    return path


def test_a_roster_of_new_names_gives_its_learners(tmp_path):
    # fresh names: none of them an account on this machine
    assert accounts.read_learners(roster(tmp_path, "zq_ada", "zq_alan"), "zq_teacher") == [
        "zq_ada", "zq_alan"]


@pytest.mark.parametrize("ids, instructor, words", [
    (["Ada"], "zq_teacher", "cannot be a Unix account name"),
    (["ada smith"], "zq_teacher", "cannot be a Unix account name"),
    (["-ada"], "zq_teacher", "cannot be a Unix account name"),
    (["a" * 33], "zq_teacher", "cannot be a Unix account name"),
    (["zq_ada"], "Teacher", "cannot be a Unix account name"),
    (["root"], "zq_teacher", "system account (uid 0)"),
    (["nobody"], "zq_teacher", "system account (uid 65534)"),   # above Debian's UID_MAX
    (["zq_ada"], "daemon", "system account"),
    (["zq_ada", "zq_teacher"], "zq_teacher", "is also in the roster"),
    (["zq_ada", "zq_ada"], "zq_teacher", "empty or repeated id"),
    ([""], "zq_teacher", "empty or repeated id"),
])
def test_a_roster_the_class_cannot_have_is_refused_with_the_reason(tmp_path, ids, instructor,
                                                                   words):
    with pytest.raises(accounts.BadInput) as e:
        accounts.read_learners(roster(tmp_path, *ids), instructor)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_teaching_assistants_are_named_once_each_in_any_spacing():
    assert accounts.read_tas(" zq_tom, zq_tia,,zq_tom ", "zq_teacher", ["zq_ada"]) == [
        "zq_tom", "zq_tia"]
    assert accounts.read_tas("", "zq_teacher", ["zq_ada"]) == []


@pytest.mark.parametrize("tas, words", [
    ("Tom", "cannot be a Unix account name"),
    ("zq_tom,root", "system account (uid 0)"),
    ("zq_teacher", "'zq_teacher' is also the instructor: an account has one role"),
    ("zq_tom,zq_ada", "'zq_ada' is also a learner in the roster: an account has one role"),
])
def test_a_teaching_assistant_the_class_cannot_have_is_refused_with_the_reason(tas, words):
    with pytest.raises(accounts.BadInput) as e:
        accounts.read_tas(tas, "zq_teacher", ["zq_ada"])
    assert words in str(e.value) and "\n" not in str(e.value)


def test_accounts_written_before_there_were_tas_have_none(tmp_path):
    (tmp_path / "accounts.json").write_text(
        '{"instructor": "zq_teacher", "learners": ["zq_ada"]}\n')
    assert accounts.Accounts.read(tmp_path) == accounts.Accounts("zq_teacher", ["zq_ada"], [])


def test_a_roster_without_the_id_column_is_refused(tmp_path):
    with pytest.raises(accounts.BadInput, match="no column id"):
        accounts.read_learners(roster(tmp_path, "zq_ada",
                                      header="name,first_name,last_name,email\n"), "zq_teacher")


@pytest.mark.parametrize("args, words", [
    (["--port", "0"], "is not a port number"),
    (["--port", "65536"], "is not a port number"),
    (["--port", "eight"], "invalid int value"),
    (["--colour"], "unrecognized arguments"),
])
def test_the_command_refuses_bad_options_in_one_line(args, words):
    done = subprocess.run([sys.executable, str(ROOT / "hub" / "classroom.py"), *args],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert words in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stdout == ""


def test_the_command_needs_root_or_a_roster_it_can_read(tmp_path):
    """As anyone but root it says so; as root, a roster it cannot read stops it before any
    change."""
    done = subprocess.run([sys.executable, str(ROOT / "hub" / "classroom.py"),
                           "--roster", str(tmp_path / "none.csv")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    if os.geteuid() != 0:
        assert "run it as root" in done.stderr
    else:
        assert "none.csv" in done.stderr or "is missing" in done.stderr, done.stderr


def test_an_account_with_a_uid_of_the_graders_sandbox_is_refused(tmp_path, monkeypatch):
    """The grader's sandbox runs learners' code as FIRST_UID + slot: no such uid is a learner's, and
    useradd is told so (UID_MAX) for the accounts it makes."""
    from course_utils.grader.sandbox import FIRST_UID
    assert accounts.HUMAN_UIDS[-1] < FIRST_UID and FIRST_UID - 1 in accounts.HUMAN_UIDS
    real = accounts.pwd.getpwnam
    monkeypatch.setattr(accounts.pwd, "getpwnam",
                        lambda name: types.SimpleNamespace(pw_uid=FIRST_UID, pw_gid=FIRST_UID)
                        if name == "zq_sandboxed" else real(name))
    with pytest.raises(accounts.BadInput, match=f"system account \\(uid {FIRST_UID}\\)"):
        accounts.read_learners(roster(tmp_path, "zq_ada", "zq_sandboxed"), "zq_teacher")
