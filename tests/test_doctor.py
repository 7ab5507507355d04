"""course_utils.doctor: every check reports a one-line fix when it fails, and a crash in a check is
reported, not raised."""

import os
import subprocess
import sys

import pytest

from course_utils import doctor


def test_check_setup_returns_one_row_per_check():
    rows = doctor.check_setup()
    assert [type(r) for r in rows] == [doctor.Check] * len(doctor.CHECKS)
    names = [r.name for r in rows]
    for name in ("PyTorch", "CPU or GPU", "Graphviz", "nbgrader Validate"):
        assert name in names
    for r in rows:
        assert isinstance(r.ok, bool) and r.detail
        if not r.ok:
            assert r.fix and "\n" not in r.fix, f"{r.name}: the fix must be one line: {r.fix!r}"


def test_this_environment_passes():
    # The test environment is the course's own set-up: every check passes here.
    failed = [r for r in doctor.check_setup() if not r.ok]
    assert not failed, doctor.format_rows(failed)


def test_missing_dot_says_how_to_install_graphviz(monkeypatch):
    monkeypatch.setattr(doctor.shutil, "which", lambda name: None)
    row = doctor.check_graphviz()
    assert not row.ok
    assert "apt-get install graphviz" in row.fix and "brew install graphviz" in row.fix


def test_missing_torch_says_to_run_setup(monkeypatch):
    real = doctor.importlib.import_module

    def fake(name, *args):
        if name == "torch":
            raise ImportError("No module named 'torch'", name="torch")
        return real(name, *args)

    monkeypatch.setattr(doctor.importlib, "import_module", fake)
    row = doctor.check_torch()
    assert not row.ok and "course.sh setup" in row.fix
    assert not doctor.check_device().ok


def test_wrong_torch_version_names_the_pin(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch, "__version__", "1.13.1")
    row = doctor.check_torch()
    assert not row.ok and "torch==2.13.0" in row.fix


def test_no_gpu_is_fine(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    row = doctor.check_device()
    assert row.ok and "CPU" in row.detail


def test_broken_gpu_says_how_to_use_the_cpu(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)

    def broken(*args, **kwargs):
        raise RuntimeError("CUDA driver version is insufficient for CUDA runtime version")

    monkeypatch.setattr(torch.cuda, "get_device_name", broken)
    row = doctor.check_device()
    assert not row.ok and "CUDA_VISIBLE_DEVICES" in row.fix and "insufficient" in row.detail


@pytest.mark.parametrize("problem, fix", [
    ("@jupyter/nbgrader:validate-assignment is disabled in JupyterLab", "labextension enable"),
    ("nbgrader's validate server extension is not enabled", "server extension enable"),
    ("cannot import nbgrader", "course.sh setup"),
])
def test_validate_problems_have_fixes(monkeypatch, problem, fix):
    monkeypatch.setattr(doctor, "validate_problem", lambda: problem)
    row = doctor.check_validate()
    assert not row.ok and row.detail == problem and fix in row.fix


def test_the_learner_set_up_keeps_validate():
    # course.sh disables nbgrader's instructor plugins for learners, never the Validate button.
    assert doctor.validate_problem() is None


def test_a_crashing_check_is_reported(monkeypatch):
    def boom():
        raise OSError("disk on fire")

    monkeypatch.setattr(doctor, "CHECKS", [boom])
    (row,) = doctor.check_setup()
    assert not row.ok and "disk on fire" in row.detail and row.fix


def test_format_rows_lists_fixes_and_a_verdict():
    rows = [doctor.Check("A", True, "fine"), doctor.Check("B", False, "broken", "do this")]
    text = doctor.format_rows(rows)
    assert "OK   A  fine" in text and "FIX  B  broken" in text and "-> do this" in text
    assert text.splitlines()[-1] == "Fix B, then run this again."
    assert doctor.format_rows(rows[:1]).splitlines()[-1].startswith("All set")


def test_command_line_exit_status():
    proc = subprocess.run([sys.executable, "-m", "course_utils.doctor"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Graphviz" in proc.stdout and not proc.stderr


def test_merged_config_reads_what_jupyter_reads():
    from jupyter_core.paths import jupyter_config_path
    from jupyter_server.extension.config import ExtensionConfigManager
    from jupyterlab_server.config import get_static_page_config

    server = (
        ExtensionConfigManager(read_config_path=jupyter_config_path()).get_jpserver_extensions())
    assert (doctor.merged_config("jupyter_server_config")["ServerApp"]["jpserver_extensions"]
            == server)
    assert doctor.merged_config("page_config", "labconfig") == get_static_page_config(level="all")


def test_a_disabled_validate_button_is_found(tmp_path):
    # a config directory that comes first (JUPYTER_CONFIG_PATH) and disables the Validate plugin
    (tmp_path / "labconfig").mkdir()
    (tmp_path / "labconfig" / "page_config.json").write_text(
        '{"disabledExtensions": {"@jupyter/nbgrader:validate-assignment": true}}')
    code = "from course_utils import doctor; r = doctor.check_validate(); print(r.ok, r.fix)"
    env = dict(os.environ, JUPYTER_CONFIG_PATH=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout
    assert (out.startswith("False")
            and "labextension enable @jupyter/nbgrader:validate-assignment" in out)
