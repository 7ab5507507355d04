"""Grading that untrusted code cannot fool: the learner's code runs in a sandbox, scores are decided
outside it.

For one submission of a lesson:
1. From the submission only the source text of each answer cell is taken, found by the grade ids
   of the instructor's notebook (solutions/). Everything else (the lesson's cells, the tests, the
   points, the cell metadata) comes from the instructor's notebook, so forged, renamed, duplicated
   or deleted cells change nothing but the learner's own answers.
2. A sandboxed worker (course_utils.grader.worker) runs the lesson with those answers, cell by cell,
   each cell under a time limit. Test cells arrive with their EXPECTED block cut out, so grade()
   there only sends back what the learner's code returned, as plain data (course_utils.judging).
3. A reference worker, which ran the instructor's notebook (once per lesson, shared by the gradings
   of a process: reference_for), judges that data with the test
   cell's judge against its own expect(): the comparison never runs where the learner's code runs.
   Grading as root, the judge also gets the test cell's peak memory as the kernel measured it
   (course_utils.grader.peakmemory), against the reference's on the same probe.
4. If the worker dies or hangs (os._exit, a segfault, a loop that ignores Ctrl-C, a memory bomb),
   the exercise whose code was running gets 0 with the reason, and a fresh worker runs the lesson
   again with that answer replaced by the not-attempted stub, so the other exercises are graded.
5. While a test cell runs, the learner's code can start no process or thread
   (Worker.forbid_processes, from outside: processes it left are killed first), unless the lesson's
   probes need them (Lesson.probes_start_processes: lessons 08 and 09). Rules that a test checks in
   the learner's own process (lesson 04's "without autograd", lesson 03's "predict, don't measure")
   so cannot be stepped around in a child that does the work and pipes the result back. Where the
   kernel counted a refused process or thread (grading as root), the test scores 0 with OWN_PROCESS
   as its reason; so does a test whose rule is checked in the probe's own thread
   (Lesson.judged_in_one_thread: lesson 03's predict_saved) while a thread the learner's code
   started in an earlier cell still runs.

The instructor's notebook and the submission are read by course_utils.grader.lessonfile. `nbgrader
autograde LESSON` uses this module through course_utils.grader.preprocessors (set in
nbgrader_config.py); `python -m course_utils.grader.gradefolder LESSON FOLDER` grades a folder of
submissions in parallel.
"""

import atexit
import contextlib
import enum
import threading
import time
from dataclasses import astuple, dataclass, field
from pathlib import Path

from course_utils.grader import feedback
# not from course_utils.judging: it imports torch
from course_utils.exercises import STUB, raised_name
from course_utils.grader.lessonfile import Cell, Lesson, learner_version, load_lesson
from course_utils.grader.capabilities import measures_memory
from course_utils.grader.rootworker import learner_worker, pin_environment, reference_worker
from course_utils.grader.worker import Limits, Overloaded, WorkerDied


# ---------------------------------------------------------------------------------------------
# The reference run

class Reference:
    """The instructor's notebook run in a trusted worker; it judges learners' observations.

    The peak memory of each test cell's probe is measured once, in a known state: after its first
    run the shared files' page cache is pinned (course_utils.grader.pagecache), and if that run had
    to read files nobody had cached (COLD_BYTES, charged to its peaks), it runs again, warm, and
    keeps that run's peaks. A reference started again later (after a learner's answer killed it)
    judges against those, not against peaks measured in whatever state the machine is in then."""

    def __init__(self, lesson: Lesson, limits: Limits):
        self.lesson = lesson
        self.limits = limits
        self.peaks: dict[str, int | None] = {}
        # pagecache.Pin, made after the first run; kept through restarts, ended by close()
        self.pin = None
        self._lock = threading.Lock()
        self._start()

    def _start(self) -> None:
        """Run the instructor's notebook; a run the machine held up is tried again (RETRIES)."""
        for _ in range(1 + RETRIES):
            try:
                self._run()
                if self.pin is None:
                    # its probes' peaks, by a cgroup
                    measured = any(type(p) is int for p in self.peaks.values())
                    self.pin = pin_environment(self.worker.pid, measured)
                    # its peaks counted a cold page cache
                    if (self.worker.file_bytes() or 0) > COLD_BYTES:
                        self.worker.kill()
                        self.peaks.clear()
                        self._run()
                return
            except Overloaded as e:
                self.worker.kill()
                why = e
        raise ReferenceOverloaded(f"{self.lesson.path}: {OVERLOADED}: the reference run could not "
                                  f"finish ({why})")

    def _run(self) -> None:
        lesson, limits = self.lesson, self.limits
        self.worker = reference_worker(limits)
        self.worker.start()
        for i, cell in enumerate(lesson.cells):
            try:
                answer = self.worker.send(
                    {"op": "cell", "id": i, "gid": cell.gid, "source": cell.source},
                    timeout=limits.cell_seconds * limits.reference_cell_factor)
            except Overloaded:
                raise
            except WorkerDied as e:
                raise RuntimeError(f"{lesson.path}: the reference run failed in cell {i} "
                                   f"({cell.gid or 'lesson'}): {e}") from None
            if answer.get("setup_error"):
                self.worker.kill()
                raise RuntimeError(f"{lesson.path}: cell {i} ({cell.gid or 'lesson cell'}) failed "
                                   f"in the reference run: {answer['setup_error']}")
            if cell.kind == "test" and answer.get("obs") is None:
                self.worker.kill()
                raise RuntimeError(f"{lesson.path}: test cell {cell.gid} never called grade(probe, "
                                   "expect, judge), so it cannot be judged outside the learner's "
                                   "process (see course_utils/judging.py)")
            if cell.kind == "test":
                self.peaks.setdefault(cell.gid, answer.get("peak"))

    def judge(self, gid: str, obs, peak: int | None = None) -> tuple[bool, str]:
        """Judge one learner's observation (and the peak memory of its test cell, where measured).
        If judging it kills or hangs the reference worker (a huge answer to compare), that answer
        fails, and the reference is run again for the others. Raises Overloaded when the machine,
        not this answer, kept it from being judged (a reference that could not be started again)."""
        with self._lock:
            if self.worker.proc is None:   # an earlier restart failed: not this learner's doing
                try:
                    self._start()
                except RuntimeError as e:
                    raise Overloaded("the reference run could not be started again "
                                     f"({e})") from None
            try:
                answer = self.worker.send({"op": "judge", "gid": gid, "obs": obs, "peak": peak,
                                           "reference_peak": self.peaks.get(gid)},
                                          timeout=self.limits.cell_seconds)
            except WorkerDied as e:
                self.worker.kill()
                try:
                    self._start()
                except RuntimeError:
                    # the next judge() tries again; this answer is judged by what happened to it
                    pass
                raise e from None
        return bool(answer.get("ok")), str(answer.get("message", ""))

    def close(self) -> None:
        """End it: the worker, and the page-cache pin."""
        self.worker.kill()
        if self.pin is not None:
            self.pin.close()


# ---------------------------------------------------------------------------------------------
# Grading one submission

# What the learner reads; decisions are taken on Status, never on these words
# (tests/grader/test_grade.py rewords every one and grades to the same scores and statuses).
OVERLOADED = "not graded: the grading machine was overloaded, grade again"
NOT_ATTEMPTED = "not attempted"
NOTEBOOK_TIME = "the whole notebook ran past its time limit of {seconds:.0f} s"
GRADER_FAILED = "not graded: the grader failed on this submission ({error}); tell your instructor"
# further tries, from a fresh worker, for what the machine (not the learner's code) kept from
# finishing
RETRIES = 2
# files read into the page cache by the reference's first run that make it run again
COLD_BYTES = 16 * 2 ** 20


OWN_PROCESS = ("this exercise is judged in your own process: your code tried to start another "
               "process (or a thread) while its test ran, or a thread it started in an earlier "
               "cell still ran, which the grader refuses; compute the answer in the function "
               "itself, and end every thread you start before its cell ends")


class Status(enum.Enum):
    """What happened to a test, which decides what the commands do with it (messages are for
    people)."""
    # its test ran and was judged (full marks or not), or the code it tests failed
    GRADED = "graded"
    # the exercise still holds its stub, or its answer cell is missing
    NOT_ATTEMPTED = "not attempted"
    # the submission ran past its whole-notebook limit, or the grader failed on it: 0
    NOT_GRADED = "not graded"
    # the machine, not the learner's code, kept it from being graded: no score
    OVERLOADED = "overloaded"


class ReferenceOverloaded(RuntimeError):
    """The machine kept the lesson's reference run from finishing: nothing can be graded; grade
    again."""


@dataclass
class Outcome:
    score: float
    points: float
    message: str            # empty when full marks; otherwise why, in a learner's words
    status: Status = Status.GRADED


@dataclass
class Result:
    student: str
    lesson: str
    outcomes: dict[str, Outcome]   # by test cell grade id, in notebook order
    notes: list[str]
    seconds: float = 0.0
    # course_utils.grader.review's flags: for the instructor only
    review: list[str] = field(default_factory=list)
    # written answers as the learner wrote them: graded by hand
    written: dict[str, str] = field(default_factory=dict)

    @property
    def score(self) -> float:
        return sum(o.score for o in self.outcomes.values())

    @property
    def points(self) -> float:
        return sum(o.points for o in self.outcomes.values())

    @property
    def overloaded(self) -> bool:
        """True when the grader could not finish through no fault of the learner's code: the scores
        are not a grade, and the command that graded it exits non-zero (grade it again)."""
        return any(o.status is Status.OVERLOADED for o in self.outcomes.values())


class _NotTheLearners(Exception):
    """The machine or the lesson, not the learner's code, kept a submission from being graded."""


def grade_answers(lesson: Lesson, reference: Reference, answers: dict[str, str],
                  notes: list[str] | None = None, student: str = "", limits: Limits | None = None,
                  slot: int = 0) -> Result:
    """Run the learner's answers in a sandbox and judge each test cell outside it. What the machine
    kept from finishing (Overloaded, a lesson cell before any answer) is graded again from the
    start, RETRIES times, then reported as OVERLOADED for every test: never a score."""
    limits = limits or reference.limits
    start = time.monotonic()
    for _ in range(1 + RETRIES):
        try:
            result = _Grading(lesson, reference, answers, list(notes or []), student, limits,
                              slot).result()
            result.seconds = time.monotonic() - start
            return result
        except _NotTheLearners as e:
            why = str(e)
    outcomes = {t.gid: Outcome(0.0, t.points, f"{OVERLOADED} ({why})", Status.OVERLOADED)
                for t in lesson.tests}
    return Result(student, lesson.name, outcomes, list(notes or []), time.monotonic() - start)


class _CellFailed(Exception):
    """The worker died (or answered for another cell) while a cell ran: why, in the learner's
    words."""


@dataclass
class _Stop:
    """Why a pass over the lesson ended before its last cell."""
    cell: int                 # the index of the cell that was running, or due to run
    why: str                  # in the learner's words
    whole_notebook: bool      # the notebook's time limit is spent: nothing more can run
    last_answer: str | None   # the grade id of the last answer cell the pass reached


UNMEASURED = ("the memory cgroup of this submission could not be made: its memory was not measured "
              "by the kernel")


@dataclass
class _Grading:
    """One submission graded once: passes over the lesson, each in a fresh worker; an answer whose
    code ended a pass is replaced by the stub for the next, so the other exercises are graded."""
    lesson: Lesson
    reference: Reference
    answers: dict[str, str]
    notes: list[str]
    student: str
    limits: Limits
    slot: int
    start: float = field(default_factory=time.monotonic)
    # the workers' own time (course_utils.grader.workerclock): what the notebook's limit counts
    own: float = 0.0
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    # answer gid -> why it was replaced by the stub
    stubbed: dict[str, str] = field(default_factory=dict)
    # answer gids that hold the stub, or are missing
    untried: set[str] = field(default_factory=set)

    def __post_init__(self):
        self.untried = {gid for gid, src in self.answers.items()
                        if src.strip().endswith(STUB) or not src.strip()}
        # the stub runs in their place
        self.untried |= {c.gid for c in self.lesson.answers} - set(self.answers)

    def result(self) -> Result:
        while (stop := self._pass()) is not None and self._blame(stop):
            pass
        ordered = {t.gid: self.outcomes[t.gid] for t in self.lesson.tests}
        return Result(self.student, self.lesson.name, ordered, self.notes,
                      time.monotonic() - self.start)

    def _source(self, cell: Cell) -> str:
        if cell.kind == "answer":
            return STUB if cell.gid in self.stubbed else self.answers.get(cell.gid, STUB)
        return learner_version(cell.source) if cell.kind == "test" else cell.source

    def _pass(self) -> _Stop | None:
        """The lesson run once in a fresh worker, each test cell judged as it ends; None once every
        cell ran."""
        last_answer, cell_errors = None, {}
        with learner_worker(self.limits, slot=self.slot) as worker:
            try:
                if worker.peak is None and measures_memory() and UNMEASURED not in self.notes:
                    self.notes.append(UNMEASURED)
                for i, cell in enumerate(self.lesson.cells):
                    last_answer = cell.gid if cell.kind == "answer" else last_answer
                    left = self.limits.notebook_seconds - self.own - worker.own_seconds
                    if left <= 0:
                        return _Stop(i, NOTEBOOK_TIME.format(seconds=self.limits.notebook_seconds),
                                     True, last_answer)
                    if (time.monotonic() - self.start
                            > self.limits.notebook_seconds * self.limits.overload_factor):
                        raise _NotTheLearners("the notebook took "
                                              f"{time.monotonic() - self.start:.0f} s on the clock")
                    try:
                        answer = self._run_cell(worker, i, cell,
                                                min(self.limits.cell_seconds, left))
                    # a cell cut short by the notebook's budget: nothing more can run
                    except _CellFailed as e:
                        if self.own + worker.own_seconds >= self.limits.notebook_seconds:
                            return _Stop(i,
                                         NOTEBOOK_TIME.format(seconds=self.limits.notebook_seconds),
                                         True, last_answer)
                        return _Stop(i, str(e), False, last_answer)
                    answer["error"] = _shown_error(answer.get("error"))
                    if cell.kind == "answer" and answer["error"]:
                        cell_errors[cell.gid] = answer["error"]
                    if cell.kind == "test" and cell.gid not in self.outcomes:
                        self.outcomes[cell.gid] = _judge_test(self.lesson, self.reference, cell,
                                                              answer, self.stubbed, self.untried,
                                                              cell_errors)
                return None
            finally:
                self.own += worker.own_seconds

    def _run_cell(self, worker, i: int, cell: Cell, timeout: float) -> dict:
        """The worker's answer for cell i, with the test cell's peak memory and whether the kernel
        refused its code a process ("refused"). While a test cell runs, its code may start no
        process or thread unless the lesson's probes need them."""
        own_process = cell.kind == "test" and not self.lesson.probes_start_processes
        refused = strays = None
        try:
            try:
                # before the peak's reset: what the killed processes held is not counted
                if own_process:
                    strays = (worker.forbid_processes()
                              and cell.exercise in self.lesson.judged_in_one_thread)
                if cell.kind == "test" and worker.peak is not None:   # garbage is not counted
                    worker.send({"op": "collect"}, timeout=timeout)
                    worker.reset_peak()
                answer = worker.send({"op": "cell", "id": i, "gid": cell.gid,
                                      "source": self._source(cell),
                                      "resilient": cell.kind == "test"}, timeout=timeout)
                answer["peak"] = worker.peak_bytes() if cell.kind == "test" else None
            finally:
                if own_process:
                    refused = worker.allow_processes() or strays
        except Overloaded as e:
            raise _NotTheLearners(f"in cell {i + 1}, {e}") from None
        except WorkerDied as e:
            raise _CellFailed(f"{e}; {OWN_PROCESS}" if refused else str(e)) from None
        if answer.get("id") != i:
            raise _CellFailed("the grader got an answer for another cell")
        answer["refused"] = refused is True
        return answer

    def _blame(self, stop: _Stop) -> bool:
        """Score the exercise whose code ended the pass 0 with why, and stub it: True to run the
        lesson again. After the notebook's limit, or a stubbed exercise failing again, every test
        not yet judged is not graded: False."""
        cell = self.lesson.cells[stop.cell]
        blamed = cell.exercise if cell.kind == "test" else (cell.gid if cell.kind == "answer"
                                                            else stop.last_answer)
        # the lesson's own cells, no learner's code
        if blamed is None and not (stop.whole_notebook and self.stubbed):
            raise _NotTheLearners(f"the lesson's cell {stop.cell + 1} failed before any answer "
                                  f"ran: {stop.why}")
        # the budget went on the learner's code (earlier passes too)
        if stop.whole_notebook or blamed in self.stubbed:
            for test in self.lesson.tests:
                self.outcomes.setdefault(test.gid, Outcome(0.0, test.points,
                                                           f"not graded: {stop.why} (in cell "
                                                           f"{stop.cell + 1})", Status.NOT_GRADED))
            return False
        self.stubbed[blamed] = stop.why
        where = "your answer cell" if cell.kind == "answer" else ("its test" if cell.kind == "test"
                                                                  else "a later cell that uses it")
        for test in self.lesson.tests:
            if test.exercise == blamed and test.gid not in self.outcomes:
                self.outcomes[test.gid] = Outcome(0.0, test.points,
                                                  f"while {where} ran, {stop.why}")
        return True


def failed(lesson: Lesson, student: str, notes: list[str], error: BaseException) -> Result:
    """A submission the grader itself failed on: 0 for every test, with the reason, in the
    report."""
    why = GRADER_FAILED.format(error=type(error).__name__)
    return Result(student, lesson.name,
                  {t.gid: Outcome(0.0, t.points, why, Status.NOT_GRADED) for t in lesson.tests},
                  notes)


def _shown_error(name) -> str | None:
    """What the learner's worker says was raised, as feedback may show it (the worker is the
    learner's process: anything it sends is learner-controlled text)."""
    return None if name is None else raised_name((name,))


def _judge_test(lesson, reference, cell, answer, stubbed, untried, cell_errors) -> Outcome:
    points = cell.points
    ex = cell.exercise
    if ex in untried:
        return Outcome(0.0, points, NOT_ATTEMPTED, Status.NOT_ATTEMPTED)
    if ex in stubbed:
        return Outcome(0.0, points, stubbed[ex])
    if answer.get("refused"):   # counted by the kernel, outside the learner's process
        return Outcome(0.0, points, OWN_PROCESS)
    if answer.get("obs") is None:
        if ex in cell_errors:
            why = f"your answer cell raised {cell_errors[ex]}, so its function was not defined"
        elif answer.get("problem"):
            why = ("your code's results could not be sent to the grader: too large (over 2 million "
                   "numbers), too deeply nested, or a string of over 10,000 characters")
        # a probe without judging.outcome, which names the call that raised
        elif answer.get("error"):
            why = (f"the hidden test raised {answer['error']}: your code raised it, or returned "
                   "something the test could not read (check its type against the docstring)")
        else:
            why = "the hidden tests did not run (was the test cell changed at run time?)"
        return Outcome(0.0, points, why)
    try:
        ok, message = reference.judge(cell.gid, answer["obs"], answer["peak"])
    except Overloaded as e:
        raise _NotTheLearners(f"while the grader compared results, {e}") from None
    except WorkerDied as e:
        return Outcome(0.0, points, f"the grader could not compare your results ({e})")
    except (ValueError, RecursionError):  # results nested too deep to send on to the reference
        return Outcome(0.0, points,
                       "the grader could not compare your results (they are nested too deeply)")
    return Outcome(points if ok else 0.0, points,
                   "" if ok
                   else feedback.redact(message, [line for t in lesson.tests for line in t.hidden]))


# a reference no grading has used for this long ends (its worker, its page-cache pin)
REFERENCE_IDLE_SECONDS = 60


@dataclass
class _Shared:
    reference: Reference
    users: int = 0
    timer: threading.Timer | None = None


_references: dict[tuple, _Shared] = {}
_references_lock = threading.Lock()
_atexit_registered: list[bool] = []   # _close_references, registered once per process


@contextlib.contextmanager
def reference_for(path: Path, limits: Limits):
    """with reference_for(path, limits) as reference: one Reference per instructor notebook (and its
    modification time, and the limits it runs under: torch's threads shape its peaks), shared by the
    gradings of a process while they run and for REFERENCE_IDLE_SECONDS after the last one ends,
    then closed: a process that lives on after grading (JupyterLab's server, where Formgrader
    autogrades) keeps no worker or pinned page cache; the rest end with the process."""
    path = Path(path).resolve()
    key = (str(path), path.stat().st_mtime_ns, astuple(limits))
    with _references_lock:
        if key not in _references:
            if not _atexit_registered:
                atexit.register(_close_references)
                _atexit_registered.append(True)
            _references[key] = _Shared(Reference(load_lesson(path), limits))
        shared = _references[key]
        shared.users += 1
        if shared.timer is not None:
            shared.timer.cancel()
            shared.timer = None
    try:
        yield shared.reference
    finally:
        with _references_lock:
            shared.users -= 1
            if shared.users == 0:
                shared.timer = threading.Timer(REFERENCE_IDLE_SECONDS, _close_idle, (key, shared))
                shared.timer.daemon = True
                shared.timer.start()


def _close_idle(key: tuple, shared: _Shared) -> None:
    """Close an idle reference, under the lock: a grading that starts meanwhile waits and then
    starts a new one, and the process's exit (_close_references) waits for it rather than leave a
    worker behind."""
    with _references_lock:
        if shared.users or _references.get(key) is not shared:
            return
        del _references[key]
        shared.reference.close()


def _close_references() -> None:
    with _references_lock:
        for shared in _references.values():
            if shared.timer is not None:
                shared.timer.cancel()
            shared.reference.close()
        _references.clear()
