"""course_utils.grader.capabilities: what this machine gives is found out by trying it, and the
sandbox fails closed: a set-up that never finishes or fails stops grading unless the instructor
accepts weaker isolation."""

import shutil
import sys
from pathlib import Path

import pytest

from course_utils.grader import capabilities, sandbox, worker
from course_utils.grader.capabilities import isolation
from course_utils.grader.worker import Limits, Worker

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def cell(source, i=0):
    return {"op": "cell", "id": i, "gid": None, "source": source}


@pytest.fixture
def fresh_isolation():
    """isolation() asked anew (it is cached per process), and asked anew again after the test."""
    capabilities.isolation.cache_clear()
    capabilities._why_none.clear()
    yield
    capabilities.isolation.cache_clear()
    capabilities._why_none.clear()


@pytest.mark.skipif(any(shutil.which(t, path=sandbox.tool_path()) is None for t in sandbox.TOOLS),
                    reason="needs util-linux's unshare, setpriv and pivot_root")
def test_a_sandbox_set_up_that_never_finishes_stops_grading(monkeypatch, fresh_isolation):
    """A busy machine that cannot build the probe sandbox in time never lowers the protection."""
    monkeypatch.setattr(capabilities, "PROBE_SECONDS", (0.01, 0.01))
    with pytest.raises(capabilities.SandboxUnavailable, match="did not finish in .* over 2 tries"):
        isolation()


def test_a_failing_sandbox_set_up_grades_nothing_unless_the_instructor_accepts_it(
        monkeypatch, fresh_isolation):
    monkeypatch.setattr(capabilities, "setup_command",
                        lambda *args: ["sh", "-c", "echo 'mount: permission denied' >&2; exit 32"])
    assert isolation() == "none"
    with pytest.raises(capabilities.SandboxUnavailable,
                       match="permission denied.*--sandbox optional"):
        worker.check_sandbox(Limits())
    with pytest.raises(capabilities.SandboxUnavailable):
        Worker("learner", Limits(), slot=17).start()
    assert "no sandbox here" in worker.check_sandbox(Limits(sandbox="optional"))
    with Worker("learner", Limits(sandbox="optional"), slot=17) as w:  # asked for: limits only
        assert w.send(cell("x = 1"), 60)["error"] is None
    with pytest.raises(ValueError, match="sandbox"):
        Limits(sandbox="none")



def test_the_folder_command_grades_nothing_without_the_sandbox_unless_asked(
        monkeypatch, fresh_isolation, tmp_path):
    from course_utils.grader import gradefolder
    monkeypatch.setattr(capabilities, "setup_command", lambda *args: ["sh", "-c", "exit 32"])
    folder, out = tmp_path / "class", tmp_path / "out"
    folder.mkdir()
    fixture = ROOT / "tests" / "fixtures" / "99-fixture" / "99-fixture.ipynb"
    shutil.copy(fixture, folder / "ada.ipynb")
    assert gradefolder.main([str(fixture), str(folder), "--out", str(out)]) == 2
    assert not out.exists(), "nothing is written when grading cannot be protected"


@pytest.mark.skipif(any(shutil.which(t, path=sandbox.SYSTEM_PATH) is None for t in sandbox.TOOLS),
                    reason="needs util-linux's unshare, setpriv and pivot_root in the "
                           "system's folders")
def test_the_sandbox_finds_util_linux_in_the_system_folders_whatever_path_holds(
        monkeypatch, fresh_isolation):
    """An instructor's login shell on the hub has no /usr/sbin on PATH, where Debian keeps
    pivot_root: grading there still gets the sandbox, and a learner's cell runs in it."""
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))   # the course's environment alone
    assert (shutil.which("pivot_root") is None
            or Path(shutil.which("pivot_root")).parent == Path(sys.executable).parent)
    assert isolation() != "none", capabilities.isolation_warning()
    assert worker.check_sandbox(Limits()) == capabilities.isolation_warning()
    with Worker("learner", Limits(), slot=17) as w:   # sandbox "required"
        assert w.send(cell("import os; x = os.getuid()"), 60)["error"] is None


def test_a_missing_tool_is_named_with_its_fix_before_any_weaker_isolation(
        monkeypatch, fresh_isolation):
    monkeypatch.setattr(capabilities, "TOOLS", ("unshare", "no-such-sandbox-tool"))
    assert isolation() == "none"
    with pytest.raises(capabilities.SandboxUnavailable) as info:
        worker.check_sandbox(Limits())
    message = str(info.value)
    assert ("util-linux's no-such-sandbox-tool is on neither PATH nor /usr/sbin:/usr/bin:/sbin:/bin"
            in message)
    fix, weaker = message.index("apt-get install util-linux"), message.index("--sandbox optional")
    assert fix < message.index("grade untrusted work as root") < weaker, message

