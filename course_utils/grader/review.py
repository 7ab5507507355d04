"""A static read of a submission's answers for the instructor: code that reaches outside its exercise.

Scores never depend on it (course_utils.grader.grade decides them outside the learner's process); it
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
  (check_floats, grade, torch, a helper the tests call, ...);
- installs hooks that see what autograd or a module does (saved_tensors_hooks, save_on_cpu,
  register_hook, register_forward_hook, register_multi_grad_hook, a module's _forward_hooks, ...):
  the checks of lessons 03, 05 and 06 count saved tensors with hooks of their own, which an
  answer's hooks, nested inside them, would shadow;
- uses dispatch or function modes (TorchDispatchMode, TorchFunctionMode, __torch_dispatch__,
  __torch_function__, torch.overrides), which see and can change every torch call the tests make;
- switches grad mode on (torch.enable_grad, torch.set_grad_enabled, torch.inference_mode(False),
  torch.autograd.grad_mode): the tests of exercises "without autograd" run them under no_grad;
- writes into a module's or an object's __dict__ (m.__dict__["f"] = ..., vars(m)[...] = ...,
  m.__dict__.update(...)), or reads it;
- uses torch's private API (torch._C, torch.autograd.profiler._disable_profiler, ...): what can turn
  off the tests' own instruments (lesson 04's profiler, record_function events) from inside.

    >>> flags("import os\\ndef f(x):\\n    return eval(x)")
    ['calls eval', 'imports os']

Not a sandbox and not a verdict: a determined cheat can hide from any static scan, and a flag
only says "read this one". The lessons' solutions and second solutions raise no flag (tests/).
"""

import ast
import re

MAX_SOURCE = 200_000  # longer answers are flagged unread (the lessons' solutions are under 5,000)
MODULES = {
    "os", "sys", "subprocess", "ctypes", "socket", "signal", "importlib", "builtins", "gc", "inspect",
    "multiprocessing", "threading", "shutil", "pathlib", "io", "pickle", "marshal", "resource", "pty",
    "atexit", "sqlite3", "urllib", "http", "requests", "IPython", "ipykernel", "nbgrader", "nbformat",
    "traitlets", "faulthandler", "code", "codeop", "sysconfig", "site", "runpy", "tempfile", "glob",
    "fcntl", "mmap", "asyncio", "concurrent", "unittest", "pytest", "_thread", "posix", "__main__",
    "linecache", "dis", "tracemalloc", "pdb", "bdb", "trace", "selectors", "select", "ssl", "ftplib", "smtplib",
}
# What of course_utils an answer has no business importing: the grader and the authors' tools, by
# package (every module in them, present and future), and the modules test cells call. The lessons'
# helpers (models, data, graph, memory...) are fine.
GRADING_PACKAGES = {"grader", "authoring"}
TEST_MODULES = {"judging", "checks"}
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
# Names that let an answer watch or steer what the tests' own torch calls do. Matched against
# every identifier the answer mentions (names, attributes, imported names, defined functions) and
# its string constants (getattr(torch, "enable_grad")).
HOOKS = re.compile(r"_*register_\w*hooks?|_*\w+_hooks|save_on_cpu|saved_tensors_hooks")
MODES = {"TorchDispatchMode", "TorchFunctionMode", "BaseTorchFunctionMode", "__torch_dispatch__",
         "__torch_function__", "_python_dispatch", "_push_mode", "_pop_mode", "_set_torch_function_mode",
         "_push_on_torch_dispatch_stack", "_pop_torch_dispatch_stack", "DisableTorchFunction",
         "DisableTorchFunctionSubclass", "_DisableTorchDispatch", "enable_python_dispatcher",
         "handle_torch_function", "_disabled_torch_function_impl"}
MODE_MODULES = {"torch.overrides", "torch.utils._python_dispatch", "torch._subclasses"}
GRAD_MODE = {"enable_grad", "set_grad_enabled", "_set_grad_enabled", "grad_mode"}
DICT_WRITES = {"update", "setdefault", "pop", "popitem", "clear", "__setitem__", "__delitem__", "__ior__"}


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
    if "\0" in source:
        return []  # a null byte: the cell fails when it runs (SyntaxError; ValueError before Python 3.11.4)
    try:
        return _flags(ast.parse(source), lesson_names, own_names)
    except SyntaxError:
        return []  # the grader already reports it: the cell fails when it runs
    except (ValueError, RecursionError, MemoryError):  # absurdly deep nesting, or what else ast refuses
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
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "course_utils"
              and node.attr in GRADING_PACKAGES | TEST_MODULES):
            found.add(f"uses course_utils.{node.attr}")
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
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for target in _unpacked(targets):
                if isinstance(target, ast.Subscript) and _is_dict_of(target.value):
                    found.add(f"writes into {_shown(target.value)}")
                elif isinstance(target, ast.Attribute) and target.attr == "__dict__":
                    found.add(f"writes into {_shown(target)}")
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in DICT_WRITES and _is_dict_of(func.value):
                found.add(f"writes into {_shown(func.value)}")
            if _name(func) == "inference_mode" and _turns_off(node):
                found.add("switches grad mode (inference_mode(False))")
        found |= _steering(node) | _private_torch(node)
    for name in _top_level_names(tree) & (lesson_names - own_names):
        found.add(f"redefines {name}")
    return sorted(found)


def _identifiers(node) -> list[str]:
    """The identifiers one node mentions: a name, an attribute, a def's or class's name, an
    imported name (each part of a dotted one), a string constant that could be one."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.alias):
        return node.name.split(".") + ([node.asname] if node.asname else [])
    if isinstance(node, ast.ImportFrom):
        return (node.module or "").split(".")
    if isinstance(node, ast.Constant) and type(node.value) is str and len(node.value) <= 64 \
            and node.value.isidentifier():
        return [node.value]
    return []


def _steering(node) -> set[str]:
    """Flags for hooks, dispatch and function modes, grad-mode switches and __dict__ named at node."""
    found = set()
    for ident in _identifiers(node):
        if HOOKS.fullmatch(ident):
            found.add(f"installs hooks ({ident})")
        elif ident in MODES:
            found.add(f"uses a dispatch or function mode ({ident})")
        elif ident in GRAD_MODE:
            found.add(f"switches grad mode ({ident})")
        elif ident == "__dict__":
            found.add("uses __dict__")
    modules = []
    if isinstance(node, ast.ImportFrom) and node.module:
        modules = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
    elif isinstance(node, ast.Import):
        modules = [a.name for a in node.names]
    elif isinstance(node, ast.Attribute) and isinstance(node.value, (ast.Name, ast.Attribute)):
        modules = [ast.unparse(node)]
    for module in modules:
        if any(module == m or module.startswith(m + ".") for m in MODE_MODULES):
            found.add(f"uses a dispatch or function mode ({next(m for m in MODE_MODULES if module.startswith(m))})")
    return found


def _private_torch(node) -> set[str]:
    """A flag where node names a private part of torch (a dotted name from torch with a part that
    starts with one underscore: torch._C, profiler._disable_profiler)."""
    if isinstance(node, ast.Attribute):
        names = [ast.unparse(node)]
    elif isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom) and node.module:
        names = [f"{node.module}.{a.name}" for a in node.names]
    else:
        return set()
    for name in names:
        parts = name.split(".")
        if parts[0] == "torch" and all(p.isidentifier() for p in parts):
            private = next((p for p in parts[1:] if p.startswith("_") and not p.startswith("__")), None)
            if private is not None:
                return {f"uses torch's private API ({'.'.join(parts[:parts.index(private) + 1])})"}
    return set()


def _shown(node, limit: int = 60) -> str:
    text = ast.unparse(node)
    return text if len(text) <= limit else text[:limit] + "..."


def _is_dict_of(node) -> bool:
    """node is `x.__dict__` or `vars(x)`: writing into it rebinds x's attributes behind its back."""
    return (isinstance(node, ast.Attribute) and node.attr == "__dict__") or (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "vars")


def _name(func) -> str | None:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def _turns_off(call: ast.Call) -> bool:
    """inference_mode(...) called with a mode that is not the constant True (inference_mode() and
    inference_mode(True) only turn grad off, which the tests allow)."""
    modes = list(call.args[:1]) + [k.value for k in call.keywords if k.arg == "mode"]
    return any(not (isinstance(m, ast.Constant) and m.value is True) for m in modes) or any(
        k.arg is None for k in call.keywords) or any(isinstance(a, ast.Starred) for a in call.args)


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
        first = rest.split(".")[0]
        if first:  # import course_utils.X..., from course_utils.X... import ...
            return {f"imports {module}"} if first in GRADING_PACKAGES | TEST_MODULES else set()
        hit = sorted(set(names) & (GRADING_PACKAGES | TEST_MODULES))  # from course_utils import X
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

    Input: a course_utils.grader.lessonfile.Lesson. Cells that do not parse are skipped."""
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

    Inputs: a course_utils.grader.lessonfile.Lesson and the submission's {grade id: source} (read_answers)."""
    shared, own = lesson_names(lesson)
    lines = []
    for cell in lesson.answers:
        if cell.gid in answers:
            found = flags(answers[cell.gid], shared, own.get(cell.gid, set()))
            if found:
                lines.append(f"{cell.gid}: {', '.join(found)}")
    return lines
