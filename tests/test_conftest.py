"""The root conftest.py: how `bash course.sh test` runs the suite in two pytest-xdist workers. A
lane's files run in one worker, one after another; a test marked `alone` runs with no test of the
other worker beside it; and every test file that makes accounts or runs code as another user is in
the lane that keeps such files apart (they and `course.sh hub`, which closes the repository to other
users, must never overlap)."""

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# pytest's own is "conftest"
_spec = importlib.util.spec_from_file_location("suite_conftest", ROOT / "conftest.py")
suite = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(suite)

# What a test file does that puts it in the "other-users" lane: accounts, sudo rules, another uid,
# the hub.
OTHER_USERS = re.compile(
    r"useradd|userdel|runuser|setpriv|--reuid|as_user\(|sudoers|class_hub|\"hub\",|nobody")


def test_every_file_that_acts_as_another_user_is_in_the_other_users_lane():
    found = [p for p in sorted((ROOT / "tests").rglob("test_*.py"))
             if OTHER_USERS.search(p.read_text()) and p.name != Path(__file__).name]
    assert found, "the pattern finds nothing: it no longer describes the suite"
    outside = [str(p.relative_to(ROOT)) for p in found
               if suite.group_of(str(p.relative_to(ROOT)) + "::test") != "other-users"]
    assert not outside, (f"{outside} make accounts or run code as another user: add them to "
                         "LANES['other-users'] in conftest.py, or they may run beside the hub "
                         "test, which closes tests/ and solutions/ to other users")


TIMED = '''
import json, os, time
import pytest
{mark}
def test_{name}():
    start = time.monotonic()
    time.sleep({seconds})
    with open({log!r}, "a") as f:
        f.write(json.dumps({{"name": "{name}", "worker": os.environ.get("PYTEST_XDIST_WORKER"),
                            "start": start, "end": time.monotonic()}}) + "\\n")
'''


@pytest.mark.slow
def test_lanes_stay_in_one_worker_and_an_alone_test_runs_by_itself(tmp_path):
    """A small suite in two workers with the root conftest.py: the two files of the browser lane in
    one worker, and the `alone` test overlapping no other test (it waits for the other worker's test
    to end, and the other worker waits for it)."""
    shutil.copy(ROOT / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    alone: runs by itself\n")
    log = tmp_path / "log.jsonl"
    files = {"tests/browser/test_a.py": ("lane_a", 1.5, ""),
             "tests/browser/test_b.py": ("lane_b", 1.5, ""),
             "tests/test_slow.py": ("slow", 3, ""), "tests/test_quick.py": ("quick", 0.5, ""),
             "tests/test_hogs.py": ("alone", 1.5, "@pytest.mark.alone")}
    for path, (name, seconds, mark) in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(TIMED.format(name=name, seconds=seconds, mark=mark,
                                                  log=str(log)))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n",
                           "2", "tests"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    runs = {r["name"]: r for r in map(json.loads, log.read_text().splitlines())}
    assert set(runs) == {name for name, _, _ in files.values()}, runs
    assert runs["lane_a"]["worker"] == runs["lane_b"]["worker"], runs
    alone = runs.pop("alone")
    overlapping = [n for n, r in runs.items()
                   if r["start"] < alone["end"] and alone["start"] < r["end"]]
    assert not overlapping, (f"{overlapping} ran while the alone test did", alone, runs)
