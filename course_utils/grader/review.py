"""A static read of a submission's answers for the instructor: code that reaches outside its
exercise.

Scores never depend on it (course_utils.grader.grade decides them outside the learner's process); it
tells an instructor which submissions to open and read. It reads what the grader runs: the grader
runs each cell through IPython (course_utils.grader.cellrunner, InteractiveShell.run_cell), so the
review first transforms the cell as IPython does (its own inputtransformer2.TransformerManager,
then the one-line step of InteractiveShell.transform_cell: `ls -la`, `time f()` are magics there)
and reads the Python that comes out. An answer is flagged when it

- cannot be read: what IPython makes of it does not parse, holds a null byte, or costs the
  transform too much ("cannot be read: ..."); never left unflagged, since review cannot say what it
  does;
- uses IPython's own syntax: a shell command (`!ls`, `x = !ls`), a line or cell magic (`%pwd`,
  `%%capture`, `%time f()`, `ls -la` on a line of its own) or help (`?`), each named; the code a
  magic runs (`%%capture`'s cell, `%time`'s line) is read too;
- creates a process (os.fork, os.system, os.posix_spawn, os.exec*, subprocess, multiprocessing,
  torch.multiprocessing, concurrent.futures.ProcessPoolExecutor, pty, ...) in any spelling: import,
  attribute, alias, getattr(os, "fork"), importlib.import_module("subprocess"): a child process is
  outside every check the tests make in the learner's process (lesson 04's "without autograd" and
  03's "predict, don't measure" watch that process's threads);
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

torch.func is not flagged: lesson 07 teaches it, and in lesson 04's "without autograd" exercise its
use in the learner's process is seen and scored by the test itself (backward nodes, dual tensors; a
plausible mistake, tests/mutants/04-mlp-backprop.json "forward_mode_jacfwd"); what escapes that
test is a child process, which is flagged.

    >>> flags("import os\\ndef f(x):\\n    return eval(x)")
    ['calls eval', 'imports os']
    >>> flags("%pwd\\nimport os")
    ['imports os', 'runs the %pwd line magic']

What an exercise's own solution does is what the exercise asks for: review() never flags it in that
exercise's answers (lesson 11's overlapped_allreduce registers post-accumulate-grad hooks; its
check counts with hooks registered first, so an answer's cannot shadow them).

Not a sandbox and not a verdict: a determined cheat can hide from any static scan, and a flag
only says "read this one". The lessons' solutions and second solutions raise no flag (tests/).
"""

import ast
import builtins
import functools
import keyword
import re

MAX_SOURCE = 200_000  # longer answers are flagged unread (the lessons' solutions are under 5,000)
MODULES = {
    "os", "sys", "subprocess", "ctypes", "socket", "signal", "importlib", "builtins", "gc",
    "inspect", "multiprocessing", "threading", "shutil", "pathlib", "io", "pickle", "marshal",
    "resource", "pty", "atexit", "sqlite3", "urllib", "http", "requests", "IPython", "ipykernel",
    "nbgrader", "nbformat", "traitlets", "faulthandler", "code", "codeop", "sysconfig", "site",
    "runpy", "tempfile", "glob", "fcntl", "mmap", "asyncio", "concurrent", "unittest", "pytest",
    "_thread", "posix", "__main__", "linecache", "dis", "tracemalloc", "pdb", "bdb", "trace",
    "selectors", "select", "ssl", "ftplib", "smtplib",
}
# What of course_utils an answer has no business importing: the grader and the authors' tools, by
# package (every module in them, present and future), and the modules test cells call. The lessons'
# helpers (models, data, graph, memory...) are fine.
GRADING_PACKAGES = {"grader", "authoring"}
TEST_MODULES = {"judging", "checks"}
CALLS = {"exec", "eval", "compile", "__import__", "open", "globals", "vars", "locals",
         "get_ipython", "breakpoint", "input", "exit", "quit", "setattr", "delattr"}
ATTRIBUTES = {"__globals__", "__builtins__", "__subclasses__", "__code__", "__closure__",
              "__bases__", "__mro__", "__base__", "__getattribute__", "__setattr__", "__loader__",
              "__spec__", "__func__", "f_globals", "f_locals", "f_back", "tb_frame", "gi_frame",
              "__kwdefaults__", "__defaults__"}
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
         "__torch_function__", "_python_dispatch", "_push_mode", "_pop_mode",
         "_set_torch_function_mode", "_push_on_torch_dispatch_stack", "_pop_torch_dispatch_stack",
         "DisableTorchFunction", "DisableTorchFunctionSubclass", "_DisableTorchDispatch",
         "enable_python_dispatcher", "handle_torch_function", "_disabled_torch_function_impl"}
MODE_MODULES = {"torch.overrides", "torch.utils._python_dispatch", "torch._subclasses"}
GRAD_MODE = {"enable_grad", "set_grad_enabled", "_set_grad_enabled", "grad_mode"}
DICT_WRITES = {"update", "setdefault", "pop", "popitem", "clear", "__setitem__", "__delitem__",
               "__ior__"}


# Process creation, by module (every name in it) and by function; then names distinctive enough to
# mean it wherever they stand (an attribute of an object review cannot resolve, a string handed to
# getattr or get_context), with the flag each gives.
PROCESS_MODULES = ("subprocess", "_posixsubprocess", "multiprocessing", "_multiprocessing",
                   "torch.multiprocessing", "pty", "concurrent.futures.process",
                   "asyncio.subprocess", "torch.distributed.elastic.multiprocessing",
                   "torch.utils.cpp_extension")
OS_PROCESS = ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system", "popen",
              "spawnl", "spawnle", "spawnlp", "spawnlpe",
              "spawnv", "spawnve", "spawnvp", "spawnvpe",
              "execl", "execle", "execlp", "execlpe", "execv", "execve", "execvp", "execvpe")
PROCESS_FUNCTIONS = {f"{m}.{f}" for m in ("os", "posix", "nt") for f in OS_PROCESS} | {
    "concurrent.futures.ProcessPoolExecutor", "asyncio.create_subprocess_exec",
    "asyncio.create_subprocess_shell"}
# platform.system() is no process
PROCESS_NAMES = {**{f: f"os.{f}" for f in OS_PROCESS if f != "system"},
                 "subprocess": "subprocess", "_posixsubprocess": "subprocess",
                 "Popen": "subprocess", "fork_exec": "subprocess",
                 "multiprocessing": "multiprocessing", "forkserver": "multiprocessing",
                 "ProcessPoolExecutor": "concurrent.futures.ProcessPoolExecutor",
                 "create_subprocess_exec": "asyncio.create_subprocess_exec",
                 "create_subprocess_shell": "asyncio.create_subprocess_shell"}
_PROCESS = frozenset(PROCESS_MODULES) | PROCESS_FUNCTIONS
_PROCESS_ROOTS = frozenset(name.partition(".")[0] for name in _PROCESS)
# What IPython's input transformations write for its own syntax: get_ipython().METHOD(...)
IPYTHON_CALLS = {"run_line_magic", "run_cell_magic", "system", "getoutput", "show_usage"}
# Reading IPython syntax re-tokenizes the whole cell once per magic, shell or help escape (IPython's
# own TransformerManager, a few microseconds a character): past this many characters tokenized, for
# one answer and the magics' cells inside it, the answer is flagged unread (a 200,000-character
# answer with 500 escapes would take minutes; a plain one costs its length, once). Magics' cells
# inside magics' cells are read this deep.
TRANSFORM_BUDGET = 400_000
TOO_COSTLY = (f"its IPython syntax costs too much to transform (over {TRANSFORM_BUDGET:,} "
              "characters tokenized)")
MAX_DEPTH = 16
MAX_OPTION_WORDS = 6  # a line magic's leading words tried as options before its code


class _Unreadable(Exception):
    """What IPython makes of a cell cannot be read: the message says why."""


class _TooCostly(_Unreadable):
    """Reading it would cost too much: flags the whole answer, even from a magic's cell inside
    it."""


def flags(source: str, lesson_names: set[str] = frozenset(),
          own_names: set[str] = frozenset()) -> list[str]:
    """What in one answer cell's source an instructor may want to read, as short phrases.

    Inputs:
    - source: the answer cell's text, as submitted (IPython syntax included)
    - lesson_names: names the lesson's own (non-answer) cells define; rebinding one is flagged
    - own_names: names the exercise itself defines in the instructor's solution (never flagged)
    Returns: a sorted list of distinct phrases ("imports os", "calls eval", ...); [] when clean; one
    phrase "cannot be read: ..." for an answer review cannot read (what IPython makes of it does not
    parse, holds a null byte, or costs too much to transform).
    """
    if not isinstance(source, str):
        return ["the answer is not text"]
    if len(source) > MAX_SOURCE:
        return [f"the answer is over {MAX_SOURCE:,} characters long"]
    try:
        return sorted(_Reader(set(lesson_names), set(own_names)).flags(source))
    except _Unreadable as e:
        return [f"cannot be read: {e}"]


class _Reader:
    """Reads one answer (and the cells of the magics inside it) as IPython runs it, within one
    budget."""

    def __init__(self, lesson_names: set[str] = frozenset(), own_names: set[str] = frozenset()):
        self.lesson_names, self.own_names = lesson_names, own_names
        self.left = TRANSFORM_BUDGET

    def spend(self, chars: int) -> None:
        self.left -= chars
        if self.left < 0:
            raise _TooCostly(TOO_COSTLY)

    def code(self, source: str) -> str:
        """The Python IPython runs for source: InteractiveShell.transform_cell's static step
        (IPython's own TransformerManager) and, for a cell of one line, its dynamic step as a fresh
        shell takes it."""
        from IPython.core.inputtransformer2 import TransformerManager
        manager = TransformerManager()
        step = manager.do_one_token_transform

        def counted(lines):  # each step re-tokenizes the whole cell
            self.spend(sum(map(len, lines)))
            return step(lines)

        manager.do_one_token_transform = counted
        try:
            code = manager.transform_cell(source)
        except _Unreadable:
            raise
        # IPython does not run what it cannot transform; review cannot read it
        except Exception as e:
            raise _Unreadable(f"IPython cannot transform it ({type(e).__name__})") from None
        if len(code.splitlines()) == 1:
            code = _one_line(code.rstrip("\n"), self.lesson_names | self.own_names) + "\n"
        return code

    def tree(self, source: str) -> ast.Module:
        code = self.code(source)
        # Python refuses it (SyntaxError, or ValueError before 3.11.4): the cell does not run
        if "\0" in code:
            raise _Unreadable("it holds a null byte")
        try:  # IPython runs top-level await (autoawait)
            return compile(code, "<answer>", "exec",
                           ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
        except SyntaxError as e:
            raise _Unreadable(f"{e.msg} (line {e.lineno})"[:120]) from None
        # absurdly deep nesting, or what else the parser refuses
        except (ValueError, RecursionError, MemoryError):
            raise _Unreadable("too deeply nested for Python's parser") from None

    def flags(self, source: str, depth: int = 0) -> set[str]:
        tree = self.tree(source)
        try:
            return _flags(tree, self.lesson_names, self.own_names,
                          lambda text: self.nested(text, depth + 1))
        except RecursionError:
            raise _Unreadable("too deeply nested for the review") from None

    def nested(self, text: str, depth: int) -> set[str] | None:
        """The flags of the code a magic runs (%%capture's cell, %time's line); None where it is not
        Python (%%bash's script, %cd's folder): the magic itself is flagged by name."""
        if depth > MAX_DEPTH:
            raise _TooCostly(f"magics inside magics over {MAX_DEPTH} deep")
        try:
            return self.flags(text, depth)
        except _TooCostly:
            raise
        except _Unreadable:
            return None


@functools.cache
def _line_magics() -> frozenset[str]:
    """The line magics of a fresh InteractiveShell (its init_magics): IPython's declared magics,
    its magic aliases and its shell aliases (ls, cat, rm, ...)."""
    from IPython.core import magics
    from IPython.core.alias import default_aliases
    table = getattr(magics, "BUILTIN_LAZY_MAGICS", None)
    if table is not None:
        names = set(table["line"])
    else:  # IPython before the lazy table: the Magics classes carry their own
        names = {name for cls in vars(magics).values()
                 if isinstance(getattr(cls, "magics", None), dict)
                 for name in cls.magics.get("line", {})}
    return frozenset(names | {"ed", "hist", "rep"} | {alias[0] for alias in default_aliases()})


def _one_line(line: str, known: set[str]) -> str:
    """What InteractiveShell.transform_cell's dynamic step (prefilter_lines, single-line cells only)
    makes of line in a fresh shell: exit and quit (IPyAutocall objects) called, a line magic named
    first without its % (automagic: `ls -la`, `time f()`) run as one, unless an assignment follows
    (`ls = 1`) or the name is bound: a keyword, a builtin, or a name the lesson binds (known).
    Autocall is off and no macro exists in a fresh shell (making one takes a %macro, flagged)."""
    from IPython.core.splitinput import LineInfo
    if not line.strip():
        return line
    info = LineInfo(line)
    ifun, rest = info.ifun, info.the_rest
    if ifun in ("exit", "quit") and ifun not in known:  # IPyAutocallChecker, then AutoHandler
        if rest.startswith("("):
            return line
        return f"{ifun}({rest[:-1]});" if rest.endswith(";") else f"{ifun}({rest})"
    if rest and rest[0] in "=,":  # AssignmentChecker
        return line
    head = ifun.split(".", 1)[0]
    if ifun in _line_magics() and not (head in known or keyword.iskeyword(head)
                                       or hasattr(builtins, head)):
        name, _, args = f"{ifun} {rest}".partition(" ")  # MagicHandler
        return f"{info.pre_whitespace}get_ipython().run_line_magic({name.lstrip('%')!r}, {args!r})"
    return line


def _ipython_call(node) -> tuple[str, list] | None:
    """(METHOD, args) where node is get_ipython().METHOD(args): what IPython writes for a magic, a
    shell command or help."""
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in IPYTHON_CALLS):
        receiver = node.func.value
        if isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Name) \
                and receiver.func.id == "get_ipython" and not receiver.args \
                and not receiver.keywords:
            return node.func.attr, node.args
    return None


def _ipython_flags(method: str, args: list, nested) -> set[str]:
    """The flags of one get_ipython().METHOD(args) call: the magic or command by name, and what the
    code it runs does (a magic's line and cell, read as a cell of their own where they are
    Python)."""
    text = [a.value if isinstance(a, ast.Constant) and type(a.value) is str else None for a in args]
    if method in ("system", "getoutput"):
        return {"runs a shell command (!...)"}
    if method == "show_usage":
        return {"uses IPython's help (?)"}
    kind, escape = ("line", "%") if method == "run_line_magic" else ("cell", "%%")
    name = text[0] if text else None
    found = {f"runs the {escape}{name} {kind} magic" if name else f"runs a {kind} magic"}
    for code in text[1:]:
        if not (code and code.strip()):
            continue
        read = nested(code)
        # a line magic's options come first (%timeit -n 1 CODE, %prun -s time CODE): the code is
        # what parses after some of its leading words
        words = code.split(None, MAX_OPTION_WORDS)[:MAX_OPTION_WORDS] \
            if kind == "line" and read is None and len(code) <= 10_000 else []
        while read is None and words:
            code = code.lstrip()[len(words.pop(0)):]
            read = nested(code) if code.strip() else None
        found |= read or set()
    return found


def _flags(tree: ast.Module, lesson_names: set[str], own_names: set[str], nested) -> set[str]:
    """The flags of one parsed cell; nested(text) gives those of the code a magic in it runs."""
    found = set()
    imports = [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]
    modules = set(lesson_names) | {(a.asname or a.name).split(".")[0]
                                   for node in imports for a in node.names}
    dotted = _Dotted(imports)
    # the get_ipython() of get_ipython().run_line_magic(...) and its kind: named by what they run
    ipython_made = set()
    for node in ast.walk(tree):
        call = _ipython_call(node)
        if call is not None:
            found |= _ipython_flags(*call, nested)
            ipython_made.add(id(node.func.value))
        if isinstance(node, ast.Import):
            for alias in node.names:
                found |= _module_flag(alias.name)
        elif isinstance(node, ast.ImportFrom):
            found |= _module_flag(node.module or "", [a.name for a in node.names])
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in CALLS):
            if id(node) not in ipython_made:
                found.add(f"calls {node.func.id}")
        elif isinstance(node, ast.Attribute) and node.attr in ATTRIBUTES:
            found.add(f"uses {node.attr}")
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
              and node.value.id == "course_utils" and node.attr in GRADING_PACKAGES | TEST_MODULES):
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
                if (isinstance(target, ast.Attribute) and isinstance(root, ast.Name)
                        and root.id in modules):
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
            if (isinstance(func, ast.Attribute) and func.attr in DICT_WRITES
                    and _is_dict_of(func.value)):
                found.add(f"writes into {_shown(func.value)}")
            if _name(func) == "inference_mode" and _turns_off(node):
                found.add("switches grad mode (inference_mode(False))")
        found |= (_steering(node, dotted) | _private_torch(node, dotted) | _process(node, dotted)
                  | _native(node))
    for name in _top_level_names(tree) & (lesson_names - own_names):
        found.add(f"redefines {name}")
    return found


class _Dotted:
    """The dotted name an expression stands for, as far as one cell tells: os.fork, `o.fork` after
    `import os as o`, `fork` after `from os import fork`, getattr(os, "fork"),
    importlib.import_module("subprocess"), __import__("os").fork, sys.modules["subprocess"]. A name
    the cell does not import stands for itself (torch, os as the lesson imported them). None for
    anything else. Remembered per node: an attribute chain costs its length once, not squared."""

    IMPORTERS = {"__import__", "builtins.__import__", "importlib.import_module",
                 "importlib.__import__"}

    def __init__(self, imports: list):
        """imports: the cell's import statements, wherever they stand."""
        self.aliases, self.memo = {}, {}
        for node in imports:
            if isinstance(node, ast.Import):
                self.aliases.update({a.asname: a.name for a in node.names if a.asname})
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                self.aliases.update({a.asname or a.name: f"{node.module}.{a.name}"
                                     for a in node.names if a.name != "*"})

    def __call__(self, node) -> str | None:
        if id(node) in self.memo:
            return self.memo[id(node)]
        chain = []  # an attribute chain, walked down without recursion however long it is
        while isinstance(node, ast.Attribute) and id(node) not in self.memo:
            chain.append(node)
            node = node.value
        name = self.memo[id(node)] if id(node) in self.memo else self._dotted(node)
        self.memo[id(node)] = name
        for attribute in reversed(chain):
            name = f"{name}.{attribute.attr}" if name else None
            self.memo[id(attribute)] = name
        return name

    def _dotted(self, node) -> str | None:
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id, node.id)
        if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
            func, args = self(node.func), node.args
            text = [a.value if isinstance(a, ast.Constant) and type(a.value) is str else None
                    for a in args]
            if func in ("getattr", "builtins.getattr") and len(args) >= 2 and text[1]:
                base = self(args[0])
                return f"{base}.{text[1]}" if base else None
            if func in self.IMPORTERS and text and text[0]:
                return text[0]
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
                and type(node.slice.value) is str and self(node.value) == "sys.modules":
            return node.slice.value
        return None


def _process(node, dotted: _Dotted) -> set[str]:
    """A flag where node names process creation: an import of or from a process module or function,
    a (resolved) dotted name in one, or a name distinctive enough (fork, Popen, a string "fork")."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
        names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
    elif isinstance(node, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)):
        names = [dotted(node)]
    else:
        names = []
    found = set()
    for name in filter(None, names):
        parts = name.split(".")
        if parts[0] in _PROCESS_ROOTS:
            found |= {f"creates a process ({known})" for known in
                      (".".join(parts[:i]) for i in range(1, len(parts) + 1)) if known in _PROCESS}
    if not found and not isinstance(node, (ast.Import, ast.ImportFrom, ast.alias)):
        found = {f"creates a process ({PROCESS_NAMES[i]})" for i in _identifiers(node)
                 if i in PROCESS_NAMES}
    return found


# Native code run from Python: a function called through ctypes can run on a thread the runner
# already has (OpenMP's pool, GOMP_parallel), out of sight of a rule watched in the probe's thread.
# Any identifier naming ctypes, however it was reached (numpy.ctypeslib.ctypes, an array's .ctypes).
NATIVE = {"ctypes", "ctypeslib", "CDLL", "cdll", "PyDLL", "pydll", "CFUNCTYPE", "PYFUNCTYPE",
          "_ctypes", "cffi", "GOMP_parallel"}


def _native(node) -> set[str]:
    return {"calls native code (ctypes)"} if any(i in NATIVE for i in _identifiers(node)) else set()


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


def _steering(node, dotted: _Dotted) -> set[str]:
    """Flags for hooks, dispatch and function modes, grad-mode switches and __dict__ named at
    node."""
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
    elif isinstance(node, ast.Attribute):
        modules = [dotted(node)] if dotted(node) else []
    for module in modules:
        if any(module == m or module.startswith(m + ".") for m in MODE_MODULES):
            found.add("uses a dispatch or function mode "
                      f"({next(m for m in MODE_MODULES if module.startswith(m))})")
    return found


def _private_torch(node, dotted: _Dotted) -> set[str]:
    """A flag where node names a private part of torch (a dotted name from torch with a part that
    starts with one underscore: torch._C, profiler._disable_profiler)."""
    if isinstance(node, (ast.Attribute, ast.Call)):
        names = [dotted(node)] if dotted(node) else []
    elif isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom) and node.module:
        names = [f"{node.module}.{a.name}" for a in node.names]
    else:
        return set()
    for name in names:
        parts = name.split(".")
        if parts[0] == "torch" and all(p.isidentifier() for p in parts):
            private = next((p for p in parts[1:] if p.startswith("_") and not p.startswith("__")),
                           None)
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
    return (func.attr if isinstance(func, ast.Attribute)
            else func.id if isinstance(func, ast.Name) else None)


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

    Input: a course_utils.grader.lessonfile.Lesson. Cells are read as IPython runs them (a
    `%matplotlib inline` line changes nothing); cells that cannot be read are skipped."""
    shared, own = _lesson_names(tuple((cell.kind, cell.gid, cell.source) for cell in lesson.cells))
    return set(shared), {gid: set(names) for gid, names in own.items()}


@functools.lru_cache(maxsize=16)
def _lesson_names(cells: tuple[tuple[str, str, str], ...]
                  ) -> tuple[frozenset[str], dict[str, frozenset[str]]]:
    """lesson_names of cells given as (kind, grade id, source): the same lesson for every
    submission."""
    shared, own = set(), {}
    for kind, gid, source in cells:
        if kind == "written":  # prose, never run
            continue
        try:
            tree = _Reader().tree(source)
        except _Unreadable:
            continue
        if kind == "answer":
            own[gid] = frozenset(_top_level_names(tree) | _top_level_names(tree, answer=False))
        else:
            shared |= _top_level_names(tree, answer=False)
    return frozenset(shared), own


@functools.lru_cache(maxsize=64)
def _asked(solution: str, shared: frozenset, own: frozenset) -> tuple[str, ...]:
    """The flags of the exercise's own solution: what the exercise asks for (lesson 11's
    overlapped_allreduce installs register_post_accumulate_grad_hook), never flagged in its
    answers; the same in another exercise's answer still is."""
    return tuple(flags(solution, shared, own))


def review(lesson, answers: dict[str, str]) -> list[str]:
    """One line per flagged answer cell: "GRADE_ID: phrase, phrase" (instructors only; never
    feedback).

    Inputs: a course_utils.grader.lessonfile.Lesson and the submission's {grade id: source}
    (read_answers)."""
    shared, own = lesson_names(lesson)
    lines = []
    for cell in lesson.answers:
        if cell.gid in answers:
            mine = own.get(cell.gid, set())
            asked = set(_asked(cell.source, frozenset(shared), frozenset(mine)))
            found = [f for f in flags(answers[cell.gid], shared, mine) if f not in asked]
            if found:
                lines.append(f"{cell.gid}: {', '.join(found)}")
    return lines
