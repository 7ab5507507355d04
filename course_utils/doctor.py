"""Is this machine ready for the course? Each check says what is wrong and the one line that fixes
it.

Run it from the start-here notebook (solutions/00-start-here) or a shell:

    bash course.sh doctor            # or: python -m course_utils.doctor
    from course_utils import doctor
    doctor.report()                  # prints one line per check, in a notebook or a terminal

check_setup() returns the rows, for tests and for code that wants to act on them:
    [Check(name="torch", ok=True, detail="2.13.0+cpu", fix=""), ...]

Nothing here changes the machine: the fixes are printed for a person to run.
"""

import importlib
import importlib.metadata
import importlib.util
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Check", "check_setup", "report", "main"]

ROOT = Path(__file__).resolve().parent.parent
SETUP = "bash course.sh setup"  # installs every pinned package into .venv (README, "Start")


@dataclass(frozen=True)
class Check:
    """One check: its name, whether it passed, what was found, and a one-line fix when it did
    not."""

    name: str
    ok: bool
    detail: str
    fix: str = ""


def pinned(package: str, requirements: Path = ROOT / "requirements.txt") -> str | None:
    """The version requirements.txt pins for package, or None (no file, or not pinned there)."""
    if not requirements.is_file():
        return None
    m = re.search(rf"^{re.escape(package)}==(\S+)", requirements.read_text(), flags=re.M)
    return m[1] if m else None


def check_python() -> Check:
    v = sys.version_info
    venv = Path(sys.prefix).resolve() == (ROOT / ".venv").resolve()
    # where it runs, unless it is the course's own environment (a wrong kernel shows here)
    found = (f"Python {v.major}.{v.minor}.{v.micro} "
             + ("(the course's .venv)" if venv else f"({sys.executable})"))
    if v >= (3, 10):
        return Check("Python", True, found)
    return Check("Python", False, found,
                 "install Python 3.10 or newer, then run: PYTHON=python3.11 " + SETUP)


def check_torch() -> Check:
    try:
        torch = importlib.import_module("torch")
    except ImportError as e:
        return Check("PyTorch", False, f"cannot import torch ({e})",
                     f"run `{SETUP}`, then choose the kernel of .venv (Kernel > Change Kernel)")
    want = pinned("torch")
    have = torch.__version__.split("+")[0]
    if want and have != want:
        return Check("PyTorch", False, f"torch {torch.__version__}, the course pins {want}",
                     f"pip install torch=={want}   (or `{SETUP}`)")
    return Check("PyTorch", True, f"torch {torch.__version__}")


def check_device() -> Check:
    """CPU or GPU: both are fine. A GPU that is present but fails is not."""
    try:
        torch = importlib.import_module("torch")
    except ImportError:
        return Check("CPU or GPU", False, "torch is missing", f"run `{SETUP}`")
    if not torch.cuda.is_available():
        return Check("CPU or GPU", True, "no CUDA GPU: every lesson runs on the CPU")
    try:
        name = torch.cuda.get_device_name(0)
        (torch.ones(2, device="cuda") * 2).sum().item()
    except Exception as e:  # a driver that does not match the build, a GPU in use by others...
        return Check("CPU or GPU", False, f"CUDA is reported but fails: {str(e).splitlines()[0]}",
                     "set CUDA_VISIBLE_DEVICES= (empty) before starting JupyterLab to use the CPU, "
                     "or fix the driver")
    return Check("CPU or GPU", True, f"{torch.cuda.device_count()} CUDA GPU(s): {name}")


def check_graphviz() -> Check:
    """torchviz draws autograd graphs with Graphviz's `dot` program (a system package, not pip)."""
    dot = shutil.which("dot")
    fix = ("sudo apt-get install graphviz | brew install graphviz "
           "| conda install -c conda-forge graphviz")
    if dot is None:
        return Check("Graphviz", False, "the `dot` program is not on PATH", fix)
    try:
        out = subprocess.run([dot, "-V"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        return Check("Graphviz", False, f"{dot} does not run ({e})", fix)
    version = (out.stderr or out.stdout).strip().splitlines()
    if out.returncode != 0:
        return Check("Graphviz", False, f"`{dot} -V` failed", fix)
    return Check("Graphviz", True, version[0] if version else dot)


def check_widgets() -> Check:
    """The interactive circuits need ipywidgets in the kernel and its JupyterLab extension."""
    try:
        ipywidgets = importlib.import_module("ipywidgets")
        importlib.import_module("jupyterlab_widgets")
    except ImportError as e:
        want = pinned("ipywidgets") or "8"
        return Check("Widgets", False, f"cannot import {e.name}",
                     f"pip install ipywidgets=={want}   (or `{SETUP}`)")
    return Check("Widgets", True, f"ipywidgets {ipywidgets.__version__}")


def merged_config(section: str, folder: str = "") -> dict:
    """A Jupyter config section merged over every config directory, the first one winning, as
    jupyter_server and JupyterLab read it (`folder`: "labconfig" for JupyterLab's page_config)."""
    from jupyter_core.paths import jupyter_config_path
    from jupyter_server.config_manager import BaseJSONConfigManager, recursive_update

    data: dict = {}
    for path in reversed(jupyter_config_path()):
        recursive_update(data,
                         BaseJSONConfigManager(config_dir=str(Path(path) / folder)).get(section))
    return data


def validate_problem() -> str | None:
    """Why nbgrader's Validate button would be missing, or None when it is there."""
    # find_spec and config files, not imports: importing nbgrader or JupyterLab takes seconds
    for package in ("nbgrader", "jupyterlab", "jupyter_server"):
        if importlib.util.find_spec(package) is None:
            return f"cannot import {package}"
    from jupyter_core.paths import jupyter_path

    server = (merged_config("jupyter_server_config").get("ServerApp", {})
              .get("jpserver_extensions", {}))
    if not server.get("nbgrader.server_extensions.validate_assignment"):
        return "nbgrader's validate server extension is not enabled"
    if not any((Path(p) / "@jupyter" / "nbgrader" / "package.json").is_file()
               for p in jupyter_path("labextensions")):
        return "nbgrader's JupyterLab extension is not installed"
    disabled = merged_config("page_config", "labconfig").get("disabledExtensions", {})
    if isinstance(disabled, list):
        disabled = dict.fromkeys(disabled, True)
    for plugin in ("@jupyter/nbgrader", "@jupyter/nbgrader:validate-assignment"):
        if disabled.get(plugin):
            return f"{plugin} is disabled in JupyterLab"
    return None


def check_validate() -> Check:
    problem = validate_problem()
    if problem is None:
        version = importlib.metadata.version("nbgrader")
        return Check("nbgrader Validate", True,
                     f"nbgrader {version}: the Validate button is in each notebook's toolbar")
    if "disabled" in problem:
        fix = "jupyter labextension enable @jupyter/nbgrader:validate-assignment"
    elif "server extension" in problem:
        fix = ("jupyter server extension enable --sys-prefix "
               "nbgrader.server_extensions.validate_assignment")
    else:
        fix = f"run `{SETUP}`: it installs nbgrader and its JupyterLab extension"
    return Check("nbgrader Validate", False, problem, fix)


CHECKS = [check_python, check_torch, check_device, check_graphviz, check_widgets, check_validate]


def check_setup() -> list[Check]:
    """Run every check; a check that crashes is reported as failed, never raised."""
    rows = []
    for check in CHECKS:
        try:
            rows.append(check())
        except Exception as e:  # the doctor must report, not crash
            name = check.__name__.removeprefix("check_")
            rows.append(Check(name, False, f"the check itself failed: {type(e).__name__}: {e}",
                              f"run `{SETUP}`, then `bash course.sh doctor` again"))
    return rows


def format_rows(rows: list[Check]) -> str:
    """One line per check ("OK" or "FIX"), each failed one followed by its fix, then a verdict."""
    width = max(len(r.name) for r in rows)
    lines = []
    for r in rows:
        lines.append(f"{'OK ' if r.ok else 'FIX'}  {r.name:<{width}}  {r.detail}")
        if not r.ok:
            lines.append(f"     {'':<{width}}  -> {r.fix}")
    bad = [r.name for r in rows if not r.ok]
    lines.append("All set: open lesson 01." if not bad
                 else f"Fix {', '.join(bad)}, then run this again.")
    return "\n".join(lines)


def report() -> bool:
    """Print the checks (to stdout: it is safe in any notebook cell); return True when all
    passed."""
    rows = check_setup()
    print(format_rows(rows))
    return all(r.ok for r in rows)


def main() -> int:
    return 0 if report() else 1


if __name__ == "__main__":
    sys.exit(main())
