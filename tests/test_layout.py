"""course_utils' layout holds: what notebooks import at the top, the grader in grader/, the authors'
tools in authoring/, class administration (the hub's exchange, a class's grades) in course_admin
beside it; the import graph has no cycle and points one way; no module writes another's
globals except through the documented hook; the grader's own process never imports torch; a plain
(non-editable) install ships every subpackage; each grading constant is read from its one place."""

import ast
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "course_utils"
ADMIN = ROOT / "course_admin"
# The one place where a module sets another module's global: the grader's session, which
# course_utils.judging documents as its hook (grade() and memory_peaks() read it).
HOOKS = {("course_utils.grader.cellrunner", "course_utils.judging", "session")}


def modules() -> dict[str, Path]:
    """{dotted name: file} for every module of the packages (packages by their __init__.py)."""
    found = {}
    for path in sorted([*PACKAGE.rglob("*.py"), *ADMIN.rglob("*.py")]):
        parts = path.relative_to(ROOT).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = modules()


def imports(name: str) -> dict[str, str]:
    """{local name: module} for every import of a course_utils or course_admin module in `name`'s
    file, function-level imports included (they are imports all the same)."""
    tree = ast.parse(MODULES[name].read_text())
    bound = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith(("course_utils", "course_admin")):
                    bound[a.asname or a.name] = a.name
        elif (isinstance(node, ast.ImportFrom) and node.level == 0
              and (node.module or "").startswith(("course_utils", "course_admin"))):
            for a in node.names:
                target = f"{node.module}.{a.name}"
                bound[a.asname or a.name] = target if target in MODULES else node.module
    return bound


GRAPH = {name: {m for m in imports(name).values() if m != name and m in MODULES}
         for name in MODULES}


def test_the_layout_is_what_readme_and_the_package_docstrings_say():
    top = {n.split(".")[1] for n in MODULES if n.count(".") == 1}
    assert {"grader", "authoring", "judging", "checks", "timing", "devices", "models", "graph",
            "memory"} <= top
    for package in ("course_utils.grader", "course_utils.authoring", "course_utils.lessonchecks",
                    "course_admin"):
        docstring = ast.get_docstring(ast.parse(MODULES[package].read_text()), clean=False)
        listed = {line.split()[0] for line in docstring.splitlines()
                  if line.startswith(" ") and line.strip()}
        for name in MODULES:
            if name.startswith(f"{package}."):
                assert name.rsplit(".", 1)[1] in listed, \
                    f"{package}'s __init__.py does not list {name}"


def test_the_import_graph_has_no_cycle():
    done, active = set(), []

    def visit(name):
        if name in active:
            cycle = active[active.index(name):] + [name]
            pytest.fail("import cycle: " + " -> ".join(cycle))
        if name in done:
            return
        active.append(name)
        for other in sorted(GRAPH[name]):
            visit(other)
        active.pop()
        done.add(name)

    for name in sorted(GRAPH):
        visit(name)


def test_imports_point_one_way():
    """Notebooks' modules never import the grader or the authoring tools; the grader never imports
    the authoring tools (which drive it from outside); nothing in course_utils imports
    course_admin."""
    for name, targets in GRAPH.items():
        for target in targets:
            if name.startswith("course_utils"):
                assert not target.startswith("course_admin"), f"{name} imports {target}"
            if name.startswith("course_utils") and not name.startswith(("course_utils.grader",
                                                                        "course_utils.authoring")):
                assert not target.startswith(("course_utils.grader", "course_utils.authoring")), \
                    f"{name} (what notebooks import) imports {target}"
            if name.startswith("course_utils.grader"):
                assert not target.startswith("course_utils.authoring"), f"{name} imports {target}"


# What the grader's own process imports: nbgrader_config.py (every nbgrader command, a learner's
# Validate included, loads it) and the grader's commands. Only the workers run torch, in processes
# of their own.
GRADER_SIDE = ["course_utils.grader.preprocessors", "course_utils.grader.gradefolder",
               "course_admin.grades", "course_utils.grader.autograde_lesson"]


def test_the_graders_own_process_never_imports_torch():
    """Importing torch costs about 1.3 s of CPU: every nbgrader command would pay it (each
    autograde, feedback, release, Validate) although only the sandboxed workers run torch."""
    code = ("import sys, traitlets.config; "
            "ns = {'get_config': traitlets.config.get_config, '__file__': sys.argv[1]}; "
            "exec(compile(open(sys.argv[1]).read(), sys.argv[1], 'exec'), ns); "
            f"import {', '.join(GRADER_SIDE)}; "
            "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))")
    done = subprocess.run([sys.executable, "-c", code, str(ROOT / "nbgrader_config.py")], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]", ("the grader's own process imports torch (import what it "
                                         "needs from a module that does not import torch): "
                                         f"{done.stdout.strip()[:300]}")


def test_no_module_writes_another_modules_globals_but_the_documented_hook():
    for name in MODULES:
        bound = imports(name)
        for node in ast.walk(ast.parse(MODULES[name].read_text())):
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
            for t in targets:
                if (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                        and bound.get(t.value.id) in MODULES):
                    assert (name, bound[t.value.id], t.attr) in HOOKS, \
                        f"{name} sets {bound[t.value.id]}.{t.attr}: not a documented hook"


def test_each_grading_constant_is_read_from_its_one_place():
    from nbgrader.preprocessors import ClearSolutions
    from traitlets.config import Config

    from course_utils.grader import gradefolder, preprocessors
    from course_utils.exercises import STUB
    from course_utils.grader.worker import Limits

    config = Config()
    namespace = {"get_config": lambda: config, "__file__": str(ROOT / "nbgrader_config.py")}
    exec(compile((ROOT / "nbgrader_config.py").read_text(), "nbgrader_config.py", "exec"),
         namespace)
    limits = Limits()
    assert config.Execute.timeout == limits.cell_seconds, \
        "Validate's time limit per cell is the grader's"
    assert config.Exchange.root in (os.environ.get("COURSE_EXCHANGE"), str(ROOT / "exchange")), \
        "nbgrader's exchange is named by the course (never nbgrader's default system folder)"
    assert STUB in config.ClearSolutions.code_stub["python"], \
        "the released stub is the line the grader recognises"
    assert ClearSolutions  # the class the stub configures exists in this nbgrader
    traits = preprocessors.HardenedExecute.class_traits()
    assert traits["cell_seconds"].default_value == limits.cell_seconds
    assert traits["notebook_seconds"].default_value == limits.notebook_seconds
    assert gradefolder.DEFAULTS == limits
    for path in [*MODULES.values(), ROOT / "nbgrader_config.py"]:
        text = path.read_text()
        if path.name != "exercises.py":
            assert "Exercise not attempted yet" not in text, f"{path} repeats the stub's text"
        if path.name != "lessonfile.py":
            assert "(BEGIN|END) SOLUTION" not in text, f"{path} repeats the solution-marker pattern"


@pytest.mark.slow
def test_a_plain_install_ships_the_grader_and_the_authoring_tools(tmp_path):
    """`pip install .` (not editable) from a copy of the packages: every module of every subpackage,
    and the grader's page templates, are in the installed course_utils and course_admin, and
    course_utils.grader imports from there."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    for package in (PACKAGE, ADMIN):
        subprocess.run(["cp", "-r", str(package), str(src / package.name)], check=True)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(tmp_path / "dist"), str(src)], check=True, capture_output=True)
    venv.create(tmp_path / "env", with_pip=True)
    python = tmp_path / "env" / "bin" / "python"
    wheel = next((tmp_path / "dist").glob("course_utils-*.whl"))
    subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "-q", str(wheel)], check=True,
                   capture_output=True)
    code = ("import pathlib, course_utils, course_utils.grader.lessonfile, course_utils.authoring, "
            "course_admin; "
            "root = pathlib.Path(course_utils.__file__).parent.parent; "
            "print('\\n'.join(str(p.relative_to(root)) for p in root.rglob('*') "
            "if p.suffix in ('.py', '.j2')))")
    out = subprocess.run([str(python), "-c", code], check=True, capture_output=True, text=True,
                         cwd=tmp_path)
    installed = set(out.stdout.split())
    assert ("course_utils/grader/lessonfile.py" in installed
            and "course_admin/grades.py" in installed)
    wanted = {str(p.relative_to(ROOT)) for package in (PACKAGE, ADMIN) for p in package.rglob("*")
              if p.suffix in (".py", ".j2")}   # .j2: templates
    assert wanted <= installed, f"missing from the installed package: {sorted(wanted - installed)}"


@pytest.mark.parametrize("module", sorted(n for n in MODULES
                                          if n.count(".") == 2 and ".lessonchecks." not in n))
def test_every_grader_and_authoring_module_has_its_test_file(module):
    """Tests mirror the modules: course_utils/grader/X.py is tested in tests/grader/test_X.py. (A
    lesson's checks, course_utils/lessonchecks/lNN.py, are tested through its lesson:
    tests/test_lessonchecks.py, and its solution, mutants and alternates graded in
    tests/grader/test_preprocessors.py.)"""
    _, package, name = module.split(".")
    assert (ROOT / "tests" / package / f"test_{name}.py").is_file(), \
        f"no tests/{package}/test_{name}.py for {module}"


@pytest.mark.parametrize("module", sorted(n for n in MODULES if n.startswith("course_admin.")))
def test_every_class_administration_module_has_its_test_file(module):
    """course_admin/X.py is tested in tests/course_admin/test_X.py, or, where it needs the hub's
    Unix accounts (the exchange), with the hub's tests in tests/hub/test_X.py."""
    name = module.split(".")[1]
    found = [ROOT / "tests" / folder / f"test_{name}.py" for folder in ("course_admin", "hub")]
    assert any(p.is_file() for p in found), \
        f"no {' or '.join(str(p.relative_to(ROOT)) for p in found)} for {module}"
