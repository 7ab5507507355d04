"""The process that runs a notebook's cells for the grader:
`python -m course_utils.grader.cellrunner MODE FD`.

Started by course_utils.grader.worker, one per submission (MODE=learner, inside the sandbox) and one
per lesson (MODE=reference, the instructor's solution). Once it has started (torch's threads,
IPython), before it reads any command, it writes {"ready": true} on file descriptor FD: no learner's
code has run yet, so the grader takes the threads it has then as the runner's own. It then reads one
JSON command per line on stdin and answers one JSON line on FD:

    {"op": "cell", "id": 7, "gid": "l01_x_test", "source": "...", "resilient": true}
        -> {"id": 7, "error": null | "NameError", "obs": ...}
           (resilient: one statement at a time, going on past errors)
    {"op": "judge", "gid": "l01_x_test", "obs": ..., "peak": bytes | None,
     "reference_peak": bytes | None}
        -> {"gid": ..., "ok": bool, "message": "..."}
    {"op": "collect"}
        -> {"collected": true}   (gc, malloc_trim)

Before the first command it starts the threads torch would start lazily (_start_torch_threads):
while a test cell runs the grader forbids new threads and processes
(course_utils.grader.worker.forbid_processes). Cells run in IPython's InteractiveShell (magics work,
no kernel); stdout and stderr go nowhere. In learner mode a test cell's grade() sends
encode(probe()) and nothing else; in reference mode it keeps expect() and judge for the "judge"
command. The learner's code can write anything on FD, but the grader accepts one answer for the cell
it sent, and only plain data in it.
"""

import json
import os
import sys
import types

from course_utils import judging
from course_utils.grader import feedback, peakmemory, protocol


READY = {"ready": True}


def _error_name(exc: BaseException | None) -> str | None:
    """The name of the first built-in class the exception is an instance of ("AssertionError" for a
    check's verdict, course_utils.checks.CheckFailed; "ValueError" for a learner's subclass of it),
    Exception and BaseException left out, else a generic phrase: a learner-made class name must not
    carry text into feedback."""
    if exc is None:
        return None
    import builtins
    for cls in type(exc).__mro__:
        if issubclass(cls, BaseException) and cls not in (Exception, BaseException) \
                and getattr(builtins, cls.__name__, None) is cls:
            return cls.__name__
    return judging.raised_name(())


class Session:
    def __init__(self, mode: str):
        self.mode = mode
        self.gid = None
        self.obs = None
        self.problem = None
        self.registry: dict[str, tuple] = {}
        # while a judge runs: (learner's, reference's) peak bytes, for judging.memory_peaks()
        self.judged_peaks = None
        # reference mode, grading as root: its own cgroup's peak (course_utils.grader.peakmemory)
        self.peak = None

    def grade(self, probe, expect, judge):
        if self.obs is not None or self.problem is not None:
            return  # one grade() per test cell
        if self.mode == "learner":
            got = judging.run_probe(probe)  # the learner's exceptions propagate: the cell fails
            try:
                self.obs = protocol.encode(got)
            except ValueError:
                self.problem = "too large"
            return
        if not (callable(expect) and callable(judge)):
            raise judging.GradingSetupError(f"{self.gid}: grade() needs expect and judge in the "
                                            "reference run")
        if self.peak is not None:
            collect()
            self.peak.reset()
        got = judging.run_probe(probe)
        # the probe's, as a learner's cell is measured
        peak = self.peak.read() if self.peak is not None else None
        want = judging.run_expect(expect)
        for what, value in (("its own answer", got),
                            ("its answer sent through JSON",
                             protocol.decode(json.loads(json.dumps(protocol.encode(got)))))):
            try:
                judge(value, want)
            except AssertionError as e:
                raise judging.GradingSetupError(f"{self.gid}: the reference solution fails its "
                                                f"judge on {what}: {e}") from None
        self.registry[self.gid] = (want, _frozen(judge), peak)
        self.obs = protocol.encode(got)


def collect() -> None:
    """Free garbage and hand freed heap back to the system (glibc), so that a peak measured next
    starts from what is really in use: done before each measured test cell, learner and reference
    alike."""
    import ctypes
    import gc
    gc.collect()
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def statements(source: str) -> list[str]:
    """A test cell's top-level statements, run one by one in the learner's worker: a visible
    check that fails must not keep the hidden test below it from running (its judge says more)."""
    import ast
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return [source]
    parts = []
    for node in tree.body:
        decorators = "".join(f"@{ast.get_source_segment(source, d)}\n"
                             for d in getattr(node, "decorator_list", []))
        parts.append(decorators + ast.get_source_segment(source, node))
    return parts or [source]


def _frozen(fn):
    """fn with its globals as they are now: later cells that reuse a name (CASES, inputs) must not
    change what an earlier test cell's judge sees when it judges learners after the whole run."""
    live = fn.__globals__
    snapshot = dict(live)
    for name, value in list(snapshot.items()):
        if isinstance(value, types.FunctionType) and value.__globals__ is live:
            copy = types.FunctionType(value.__code__, snapshot, value.__name__, value.__defaults__,
                                      value.__closure__)
            copy.__kwdefaults__ = value.__kwdefaults__
            snapshot[name] = copy
    frozen = types.FunctionType(fn.__code__, snapshot, fn.__name__, fn.__defaults__, fn.__closure__)
    frozen.__kwdefaults__ = fn.__kwdefaults__
    return frozen


def _limit_self() -> None:
    """Apply the limits the grader passed in COURSE_LIMITS, a JSON object by name
    (course_utils.grader.worker: address_space, file_bytes, open_files, cpu_seconds and processes,
    the last two null where not set): soft = hard, so the code that runs next cannot raise them.
    Without COURSE_LIMITS the runner stops before any code runs: it never runs unlimited."""
    import resource
    values = os.environ.pop("COURSE_LIMITS", "")
    if not values:
        raise SystemExit("course_utils.grader.cellrunner: COURSE_LIMITS is not set; start the "
                         "runner through course_utils.grader.worker.Worker, which sets it from its "
                         "Limits")
    given = json.loads(values)
    names = {"address_space", "file_bytes", "open_files", "cpu_seconds", "processes"}
    # null: the reference (no CPU limit), or not sandboxed (no process limit)
    optional = {"cpu_seconds", "processes"}
    if type(given) is not dict or set(given) != names or any(
            (given[k] is not None or k not in optional)
            and (type(given[k]) is not int or given[k] < 1) for k in names):
        raise SystemExit("course_utils.grader.cellrunner: COURSE_LIMITS must name "
                         f"{sorted(names)}, got {values[:200]!r}")
    wanted = [(resource.RLIMIT_AS, given["address_space"]),
              (resource.RLIMIT_FSIZE, given["file_bytes"]),
              (resource.RLIMIT_NOFILE, given["open_files"]), (resource.RLIMIT_CORE, 0)]
    wanted += ([(resource.RLIMIT_CPU, given["cpu_seconds"])]
               if given["cpu_seconds"] is not None else [])
    wanted += ([(resource.RLIMIT_NPROC, given["processes"])]
               if given["processes"] is not None else [])
    for which, value in wanted:
        try:
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):  # a limit this system does not support (RLIMIT_AS on macOS)
            pass


def _start_torch_threads() -> None:
    """Start, before any of the learner's code, the threads torch starts on first use: its OpenMP
    pool (OMP_NUM_THREADS threads: libgomp ends the process when it cannot start them) and its
    profiler's (lesson 04's checks run the profiler). While a test cell runs the kernel refuses the
    worker any new thread, so a test that is the first to need them would otherwise fail through no
    fault of the learner's. Both stay for the process's life (a pool shrunk by
    torch.set_num_threads(1) keeps its threads for when it grows back). Done in reference mode too,
    so both workers' memory compares."""
    import torch
    torch.ones(1 << 20).sum()   # over the grain size: a parallel region, which starts the pool
    with torch.autograd.profiler.profile():
        pass


def main(mode: str, fd: int) -> None:
    _limit_self()
    _start_torch_threads()
    os.environ.setdefault("MPLBACKEND", "Agg")
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    reply = os.fdopen(fd, "w", buffering=1)
    session = Session(mode)
    if mode == "reference":
        session.peak = peakmemory.from_environment()
    judging.session = session
    # History in memory: no sqlite file, and no history-saving thread, which IPython stops before
    # every os.fork and starts again at the next cell: a test cell after an answer that forked would
    # be refused it.
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    shell = InteractiveShell.instance(config=config)
    # tracebacks would go to stdout, which goes nowhere anyway
    shell.showtraceback = lambda *a, **k: None
    # before any command: the grader notes this process's own threads
    reply.write(json.dumps(READY) + "\n")

    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["op"] == "exit":
            break
        if cmd["op"] == "cell":
            session.gid, session.obs, session.problem = cmd.get("gid"), None, None
            exc = None
            for part in statements(cmd["source"]) if cmd.get("resilient") else [cmd["source"]]:
                result = shell.run_cell(part, store_history=True)
                error = result.error_before_exec or result.error_in_exec
                # the learner's: the last (a test cell's hidden test); the reference's: the first
                # (the cause)
                exc = (exc or error) if mode == "reference" else (error or exc)
            answer = {"id": cmd["id"], "error": _error_name(exc), "obs": session.obs,
                      "problem": session.problem}
            if mode == "reference" and session.gid in session.registry:
                # the grader keeps the first run's
                answer["peak"] = session.registry[session.gid][2]
            if isinstance(exc, judging.GradingSetupError):
                answer["setup_error"] = str(exc)
            elif mode == "reference" and exc is not None:
                answer["setup_error"] = f"{type(exc).__name__}: {exc}"
        elif cmd["op"] == "collect":
            collect()
            answer = {"collected": True}
        elif cmd["op"] == "judge":
            answer = {"gid": cmd["gid"], **judge(session, cmd["gid"], cmd["obs"], cmd.get("peak"),
                                                 cmd.get("reference_peak"))}
        else:
            answer = {"error": f"unknown op {cmd['op']!r}"}
        reply.write(json.dumps(answer) + "\n")


def judge(session: Session, gid: str, data, peak: int | None = None,
          reference_peak: int | None = None) -> dict:
    """Decode a learner's observation and run the test cell's judge on it against the reference's
    expect(). peak: the learner's test cell's peak memory, measured by the grader (or None);
    reference_peak: the reference's, as the grader kept it from the first reference run (default:
    this run's own)."""
    if gid not in session.registry:
        return {"ok": False,
                "message": "no hidden test was recorded for this cell in the reference run"}
    want, judge_fn, own_peak = session.registry[gid]
    reference_peak = reference_peak if reference_peak is not None else own_peak
    measured = type(peak) is int and type(reference_peak) is int
    session.judged_peaks = (peak, reference_peak) if measured else None
    try:
        return judge_observation(judge_fn, data, want)
    finally:
        session.judged_peaks = None


def judge_observation(judge_fn, data, want) -> dict:
    """A learner's observation (the wire's data) judged against want: {"ok", "message"}, the message
    scrubbed. The reference worker's judging, and course_utils.authoring.wronganswers' in one
    kernel."""
    try:
        got = protocol.decode(data)
    except Exception as e:  # whatever the learner's process sent, this process goes on judging
        why = (str(e) if type(e) is ValueError and str(e).startswith("malformed observation")
               else "malformed observation")
        return {"ok": False,
                "message": f"the grader could not read the values your code returned ({why})"}
    try:
        judge_fn(got, want)
    except AssertionError as e:
        return {"ok": False, "message": feedback.scrub(str(e), got, want)}
    except Exception as e:  # a value of the wrong kind makes the comparison itself fail
        # Only the exception's built-in name: its text may quote torch internals or the learner's
        # values.
        return {"ok": False, "message": "your code returned values that could not be compared with "
                                        f"the expected ones ({_error_name(e)})"}
    return {"ok": True, "message": ""}


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
