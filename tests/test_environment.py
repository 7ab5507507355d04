"""The set-up files agree with each other: the pip and conda routes pin the same versions, and CI
runs exactly the test command that README.md gives."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# conda-forge names that differ from PyPI names
CONDA_TO_PIP = {"pytorch": "torch", "python-graphviz": "graphviz"}


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pip_pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            m = re.fullmatch(r"([A-Za-z0-9_.-]+)==([0-9][^\s;]*)", line)
            assert m, f"requirements.txt: {line!r} is not pinned with =="
            pins[norm(m[1])] = m[2]
    return pins


def conda_pins() -> dict[str, str]:
    """Versions from environment.yml: `- name=version` (conda) and `- name==version` (its pip
    list)."""
    pins = {}
    for line in (ROOT / "environment.yml").read_text().splitlines():
        m = re.match(r"\s*-\s+([A-Za-z0-9_.-]+)\s*==?\s*([0-9][^\s#]*)", line)
        if m and m[1] != "python":
            pins[norm(CONDA_TO_PIP.get(m[1], m[1]))] = m[2]
    return pins


def test_pip_and_conda_routes_pin_the_same_versions():
    pip, conda = pip_pins(), conda_pins()
    assert pip, "no pins found in requirements.txt"
    assert set(pip) == set(conda), (f"only in requirements.txt: {set(pip) - set(conda)}; "
                                    f"only in environment.yml: {set(conda) - set(pip)}")
    differ = {k: (pip[k], conda[k]) for k in pip if pip[k] != conda[k]}
    assert not differ, f"(pip, conda) versions differ: {differ}"


def test_torch_is_pinned():
    assert pip_pins().get("torch") == "2.13.0"


def readme_commands() -> list[str]:
    return re.findall(r"^\s*(bash course\.sh \w+)\s*$",
                      (ROOT / "README.md").read_text(), flags=re.M)


def test_readme_gives_the_two_setup_commands_and_ci_runs_the_test_one():
    cmds = readme_commands()
    assert "bash course.sh lab" in cmds and "bash course.sh test" in cmds, cmds
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^bash course\.sh test$", ci, flags=re.M), (
        ".ci/run must call the README's test command")
