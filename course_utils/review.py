"""A static read of a submission's answers for the instructor: code that reaches outside its exercise.

Scores never depend on it (course_utils.hardened decides them outside the learner's process); it
tells an instructor which submissions to open and read. An answer is flagged when it

- imports a module that touches the process, files, network, the interpreter or the grading
  machinery (os, subprocess, ctypes, IPython, course_utils.judging, ...);
- calls exec, eval, compile, __import__, open, globals, get_ipython and their kind;
- reaches into Python's internals (__globals__, __builtins__, __subclasses__, __code__, ...);
- defines __eq__, __bool__, __instancecheck__ and other dunders that make a value pass any check,
  or subclasses float, Tensor or another value type;
- assigns to an attribute of a module or helper the lesson provides or the answer imports
  (torch.allclose = ..., math.isclose = ...);
- rebinds a name that the lesson's own cells import or define as a function or class
  (check_floats, grade, torch, a helper the tests call, ...).

    >>> flags("import os\\ndef f(x):\\n    return eval(x)")
    ['imports os', 'calls eval']

Not a sandbox and not a verdict: a determined cheat can hide from any static scan, and a flag
only says "read this one". The lessons' solutions and second solutions raise no flag (tests/).
"""

import ast

MAX_SOURCE = 200_000  # longer answers are flagged unread (the lessons' solutions are under 5,000)
MODULES = {
    "os", "sys", "subprocess", "ctypes", "socket", "signal", "importlib", "builtins", "gc", "inspect",
    "multiprocessing", "threading", "shutil", "pathlib", "io", "pickle", "marshal", "resource", "pty",
    "atexit", "sqlite3", "urllib", "http", "requests", "IPython", "ipykernel", "nbgrader", "nbformat",
    "traitlets", "faulthandler", "code", "codeop", "sysconfig", "site", "runpy", "tempfile", "glob",
    "fcntl", "mmap", "asyncio", "concurrent", "unittest", "pytest", "_thread", "posix", "__main__",
    "linecache", "dis", "tracemalloc", "pdb", "bdb", "trace", "selectors", "select", "ssl", "ftplib", "smtplib",
}
# course_utils modules that grade or compare: the lesson's helpers (models, data, graph...) are fine
GRADING_MODULES = {"judging", "checks", "grading", "hardened", "sandbox", "cellrunner", "release",
                   "lessonfile", "autograde", "gradefolder", "isolation"}
CALLS = {"exec", "eval", "compile", "__import__", "open", "globals", "vars", "locals", "get_ipython",
         "breakpoint", "input", "exit", "quit", "setattr", "delattr"}
ATTRIBUTES = {"__globals__", "__builtins__", "__subclasses__", "__code__", "__closure__", "__bases__",
              "__mro__", "__base__", "__getattribute__", "__setattr__", "__loader__", "__spec__", "__func__",
              "f_globals", "f_locals", "f_back", "tb_frame", "gi_frame", "__kwdefaults__", "__defaults__"}
# dunders that make a value pass checks it should fail (what crosses to the judge is plain data,
# so they cannot earn points there, but they show the intent)
DUNDERS = {"__eq__", "__ne__", "__bool__", "__instancecheck__", "__subclasscheck__", "__del__",
           "__getattribute__", "__getattr__", "__init_subclass__", "__float__", "__index__"}
# built-in value types whose subclasses could pretend to be a right answer
VALUE_TYPES = {"float", "int", "bool", "str", "tuple", "list", "dict", "complex", "Tensor", "Size"}


def flags(source: str, lesson_names: set[str] = frozenset(), own_names: set[str] = frozenset()) -> list[str]:
    """What in one answer cell's source an instructor may want to read, as short phrases.

    Inputs:
    - source: the answer cell's text, as submitted
    - lesson_names: names the lesson's own (non-answer) cells define; rebinding one is flagged
    - own_names: names the exercise itself defines in the instructor's solution (never flagged)
    Returns: a sorted list of distinct phrases ("imports os", "calls eval", ...); [] when clean.
    """
    if not isinstance(source, str):
        return ["the answer is not text"]
    if len(source) > MAX_SOURCE:
        return [f"the answer is over {MAX_SOURCE:,} characters long"]
    try:
        return _flags(ast.parse(source), lesson_names, own_names)
    except SyntaxError:
        return []  # the grader already reports it: the cell fails when it runs
    except (ValueError, RecursionError, MemoryError):  # null bytes, absurdly deep nesting
        return ["the answer could not be read by the review"]


def _flags(tree: ast.Module, lesson_names: set[str], own_names: set[str]) -> list[str]:
    found = set()
    modules = set(lesson_names) | {(a.asname or a.name).split(".")[0] for node in ast.walk(tree)
                                   if isinstance(node, (ast.Import, ast.ImportFrom)) for a in node.names}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found |= _module_flag(alias.name)
        elif isinstance(node, ast.ImportFrom):
            found |= _module_flag(node.module or "", [a.name for a in node.names])
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in CALLS:
            found.add(f"calls {node.func.id}")
        elif isinstance(node, ast.Attribute) and node.attr in ATTRIBUTES:
            found.add(f"uses {node.attr}")
        elif isinstance(node, ast.Name) and node.id == "__builtins__":
            found.add(f"uses {node.id}")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in DUNDERS:
            found.add(f"defines {node.name}")
        elif isinstance(node, ast.ClassDef):
            for base in node.bases:
                name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", None)
                if name in VALUE_TYPES:
                    found.add(f"subclasses {name}")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for target in _unpacked(targets):
                root = target
                while isinstance(root, (ast.Attribute, ast.Subscript)):
                    root = root.value
                if isinstance(target, ast.Attribute) and isinstance(root, ast.Name) and root.id in modules:
                    found.add(f"assigns to {ast.unparse(target)}")
        elif isinstance(node, ast.Global):
            found |= {f"declares global {n}" for n in node.names if n in lesson_names - own_names}
    for name in _top_level_names(tree) & (lesson_names - own_names):
        found.add(f"redefines {name}")
    return sorted(found)


def _unpacked(targets):
    """Assignment targets with tuples and lists opened: `a.x, (b.y, c) = ...` -> a.x, b.y, c."""
    for t in targets:
        if isinstance(t, (ast.Tuple, ast.List)):
            yield from _unpacked(t.elts)
        elif isinstance(t, ast.Starred):
            yield from _unpacked([t.value])
        else:
            yield t


def _module_flag(module: str, names=()) -> set[str]:
    top, _, rest = module.partition(".")
    if top in MODULES:
        return {f"imports {top}"}
    if top == "course_utils":
        parts = set(rest.split(".")) | set(names)
        hit = sorted(parts & GRADING_MODULES)
        return {f"imports course_utils.{hit[0]}"} if hit else set()
    return set()


def _top_level_names(tree: ast.Module, answer: bool = True) -> set[str]:
    """Names a cell binds in the notebook's globals: its top-level defs, classes and imports, and
    for an answer its assigned variables too. An answer's plain `import torch` or
    `import torch.nn as nn` binds a name to what it already was, so only renaming imports count."""
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                if a.name != "*" and not (answer and a.asname in (None, a.name.rpartition(".")[2])):
                    names.add((a.asname or a.name).split(".")[0])
        elif answer and isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in _unpacked(targets) if isinstance(t, ast.Name)}
    return names


def lesson_names(lesson) -> tuple[set[str], dict[str, set[str]]]:
    """(names the lesson's lesson and test cells import or define as functions and classes,
    {answer grade id: names its solution binds}). Variables the lesson assigns (x, model, loss) are
    left out: an answer may well reuse such a name.

    Input: a course_utils.lessonfile.Lesson. Cells that do not parse are skipped."""
    shared, own = set(), {}
    for cell in lesson.cells:
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        if cell.kind == "answer":
            own[cell.gid] = _top_level_names(tree) | _top_level_names(tree, answer=False)
        else:
            shared |= _top_level_names(tree, answer=False)
    return shared, own


def review(lesson, answers: dict[str, str]) -> list[str]:
    """One line per flagged answer cell: "GRADE_ID: phrase, phrase" (instructors only; never feedback).

    Inputs: a course_utils.lessonfile.Lesson and the submission's {grade id: source} (read_answers)."""
    shared, own = lesson_names(lesson)
    lines = []
    for cell in lesson.answers:
        if cell.gid in answers:
            found = flags(answers[cell.gid], shared, own.get(cell.gid, set()))
            if found:
                lines.append(f"{cell.gid}: {', '.join(found)}")
    return lines
