"""Hidden tests split in three, so that scores can be decided outside the learner's process.

A graded test cell's hidden part defines three functions and hands them to `grade`:

    ### BEGIN HIDDEN TESTS
    def probe():                  # builds inputs, calls the learner's code, returns plain data
        return {"grads": [circuit_grads(x, y, z) for x, y, z in CASES]}
    ### BEGIN EXPECTED
    def expect():  # the right answers (and known wrong ones), never shown to the learner's code
        return {"grads": [(z, z, x + y) for x, y, z in CASES]}
    def judge(got, want):         # compares with course_utils.checks; raises AssertionError
        for g, w, case in zip(got["grads"], want["grads"], CASES):
            check_floats(g, w, f"circuit_grads{case}")
    ### END EXPECTED
    grade(probe, expect, judge)
    ### END HIDDEN TESTS

Where it runs decides what `grade` does:
- in a notebook (Validate, plain `nbgrader autograde`): judge(probe(), expect()), as an ordinary
  test;
- in the learner's sandbox (course_utils.grader.grade): the EXPECTED block is cut out before the
  cell is sent, and grade() sends encode(probe()) to the grader: the learner's process never
  computes, and so can never copy, an expected value;
- in the reference worker (the instructor's solution, trusted): grade() keeps expect() and judge,
  checks that the reference passes, and later judges each learner's decoded observations.

Observations cross between processes in the grader's wire format (course_utils.grader.protocol).

An exercise's check is written once, as a `Check` (a probe and a judge in a
course_utils.lessonchecks module), and a test cell only names its cases: the visible part is
`CHECK.visible(answer, cases, want)`, the hidden part is its cases, an EXPECTED block with expect(),
and `CHECK.hidden(answer, cases, expect)`, which calls grade() with the same probe and judge.
Validate and the grader so apply the same rules, and the learner reads two lines under the exercise
instead of the checker's code.
"""

import math
import os
import random
from collections.abc import Callable
from fractions import Fraction

import torch

from course_utils.checks import CheckFailed
# raised_name: judges use it from here
from course_utils.exercises import not_attempted_line, raised_name

SEED = 0

# The grader's one hook into this module: course_utils.grader.cellrunner sets it to its Session when
# a notebook runs inside the grader (None in a notebook); grade() and memory_peaks() read it.
session = None

# While a visible test's probe and judge run: id of each names-tuple outcome() returned -> (that
# tuple, the exception), so that the verdict "f(...) raised X" shows the traceback through the
# learner's code (value_of). None otherwise: hidden tests keep no frames alive between cells.
_causes: dict[int, tuple] | None = None


class GradingSetupError(Exception):
    """The instructor's side is wrong: the reference fails its own judge, or a test cell is
    malformed."""


def _seed() -> None:
    random.seed(SEED)
    torch.manual_seed(SEED)
    try:
        import numpy as np
        np.random.seed(SEED)
    except ImportError:  # pragma: no cover - numpy comes with the course
        pass


def grade(probe: Callable[[], object], expect: Callable[[], object] | None,
          judge: Callable[[object, object], None] | None) -> None:
    """Run a hidden test: judge(probe(), expect()) here, or split across processes by the grader.

    Inputs:
    - probe: no arguments; calls the learner's code on the hidden cases and returns plain data
      (see `encode`); it must build its own inputs (grade seeds torch, random and numpy with 0
      first)
    - expect: no arguments; returns the expected values the judge compares with (None in the
      learner's sandbox, where the EXPECTED block is cut out)
    - judge: judge(got, want) raises AssertionError naming the mistake when `got` is wrong
    """
    if not callable(probe):
        raise TypeError(f"probe must be a function, got {type(probe).__name__}")
    if session is not None:
        session.grade(probe, expect, judge)
        return
    if not (callable(expect) and callable(judge)):
        raise TypeError("expect and judge must be functions "
                        "(the ### BEGIN/END EXPECTED block defines them)")
    judge(run_probe(probe), run_expect(expect))


class Check:
    """One exercise's test, written once, used by its visible test and by its hidden judge.

    - probe(answer, cases) calls the learner's `answer` (a function or class) on `cases` and returns
      plain data (what `encode` takes); it builds inputs from `cases` and never computes a right
      answer
    - judge(got, want, cases) raises AssertionError (course_utils.checks) naming the mistake when
      `got` differs from `want`, the expected data for those cases
    """

    def __init__(self, name: str, probe: Callable, judge: Callable):
        self.name, self.probe, self.judge = name, probe, judge

    def visible(self, answer, cases, want) -> None:
        """The visible test (Validate): judge(probe(answer, cases), want, cases), then one line.

        In JupyterLab, before the exercise is written, it prints the stub's one line instead of
        failing, so that Run All goes on; under nbgrader (Validate, autograde: NBGRADER_EXECUTION)
        and in the grader it fails, so an unsolved exercise is never reported as passed."""
        global _causes
        # the grader's worker shows no traceback: keep no frames
        _causes = {} if session is None else None
        try:
            try:
                got = run_probe(lambda: self.probe(answer, cases))
            except NotImplementedError as e:
                line = not_attempted_line(e)
                if line is None or session is not None or os.environ.get("NBGRADER_EXECUTION"):
                    raise
                print(line)
                return
            try:
                self.judge(got, want, cases)
            except CheckFailed:
                raise
            # its message, after the traceback of what the learner's code raised if it did
            except AssertionError as e:
                learners = (e.__cause__
                            if any(e.__cause__ is kept for _, kept in (_causes or {}).values())
                            else None)
                raise CheckFailed(str(e)) from learners
        finally:
            _causes = None
        print(f"{self.name}: passed the visible test (the grader also tries other cases)")

    def hidden(self, answer, cases, expect: Callable[[], object] | None) -> None:
        """The hidden test: grade() with this check's probe and judge on `cases` (expect is None in
        the learner's sandbox, where the EXPECTED block that defines it is cut out)."""
        check = self

        def probe():
            return check.probe(answer, cases)

        def judge(got, want):
            check.judge(got, want, cases)

        grade(probe, expect, judge if expect is not None else None)


MALFORMED = "the test's probe sent malformed results"


def results(got, cases, what: str) -> list:
    """For a judge: `got` when it is a list with one result per case, else an AssertionError saying
    that `what` was not run on every case."""
    assert type(got) is list and len(got) == len(cases), f"{what} was not run on every case"
    return got


def run_probe(probe: Callable[[], object]) -> object:
    """probe() from the same seeded start everywhere (notebook, learner's worker, reference)."""
    _seed()
    return probe()


def run_expect(expect: Callable[[], object]) -> object:
    """expect() from the same seeded start as probe()."""
    _seed()
    return expect()


def raised(fn: Callable, *args, **kwargs) -> tuple[str, ...] | None:
    """For a probe: what fn(*args, **kwargs) raised, as plain data.

    Returns None when fn returned normally, else the names of the exception's classes, most
    specific first (("ValueError", "Exception", "BaseException", "object")), so a judge can ask
    `"ValueError" in got` as check_raises accepts subclasses.
    """
    try:
        fn(*args, **kwargs)
    except Exception as e:  # what was raised is the observation
        return tuple(c.__name__ for c in type(e).__mro__)
    return None


def outcome(fn: Callable, *args, **kwargs) -> dict:
    """For a probe: {"value": fn(*args, **kwargs)}, or {"raised": the exception's class names, most
    specific first} when it raised. NotImplementedError (an exercise's untouched stub) propagates,
    so the test fails with the stub's own message."""
    try:
        return {"value": fn(*args, **kwargs)}
    except NotImplementedError:
        raise
    except Exception as e:  # what was raised is the observation
        names = tuple(c.__name__ for c in type(e).__mro__)
        if _causes is not None:
            _causes[id(names)] = (names, e)
        return {"raised": names}


def value_of(case, name: str):
    """For a judge: the value in one of `outcome`'s results (a probe may add other keys beside it),
    or an AssertionError saying that the call `name` raised (a built-in exception by its name, never
    the learner's text). In a visible test that AssertionError's __cause__ is the exception itself,
    so the notebook shows where the learner's code raised it (CheckFailed)."""
    assert type(case) is dict and ("value" in case) != ("raised" in case), \
        f"{name}: the test's probe sent malformed results"
    if "raised" in case:
        kept = (_causes or {}).get(id(case["raised"]))
        raise AssertionError(f"{name} raised {raised_name(case['raised'])}") \
            from (kept[1] if kept is not None and kept[0] is case["raised"] else None)
    return case["value"]


def argument(a) -> str:
    """For a judge: an argument as a message shows it in a call, an expression that gives it back
    exactly. repr(a), but a float with more significant digits than feedback shows (10, exponent
    digits included: course_utils.grader.feedback) as the fraction it is, 1 / 3, or the short number
    it lies next to, math.nextafter(0.2, -math.inf), or beside, 0.25 - 1e-12."""
    if type(a) is not float or not math.isfinite(a):
        return repr(a)
    mantissa, _, exponent = repr(a).partition("e")
    keep = 10 - sum(ch.isdigit() for ch in exponent)
    if len(mantissa.lstrip("-0.").replace(".", "")) <= keep:
        return repr(a)
    fraction = Fraction(a).limit_denominator(1000)
    if float(fraction) == a and fraction.denominator > 1:
        return f"{fraction.numerator} / {fraction.denominator}"
    short = float(f"{a:.{max(1, keep - 3)}g}")   # room for the offset's digits
    for toward in ("-math.inf", "math.inf"):
        if math.nextafter(short, -math.inf if toward[0] == "-" else math.inf) == a:
            return f"math.nextafter({short!r}, {toward})"
    sign = "-" if a < short else "+"
    for digits in range(1, 4):
        offset = float(f"{abs(a - short):.{digits}g}")
        if (short - offset if a < short else short + offset) == a:
            return f"{short!r} {sign} {offset!r}"
    fraction_part, power = math.frexp(abs(a - short))
    if fraction_part == 0.5 and (short - 2.0 ** (power - 1) if a < short
                                 else short + 2.0 ** (power - 1)) == a:
        return f"{short!r} {sign} 2.0 ** {power - 1}"
    return repr(a)   # no short form: feedback cuts its digits


def call_name(fn: str, *args) -> str:
    """For a judge: the call fn(args) as a message shows it, each argument by `argument`."""
    return f"{fn}({', '.join(argument(a) for a in args)})"


def check_raised(names, name: str, expected: str = "ValueError") -> None:
    """For a judge: `raised()`'s result for the call `name` shows that it raised `expected` (or a
    subclass); else an AssertionError saying it returned normally or what it raised instead."""
    assert names is not None, f"{name} returned normally, expected it to raise {expected}"
    assert type(names) is tuple and expected in names, \
        f"{name} raised {raised_name(names)}, expected {expected}"


def name_of(text) -> str:
    """For a judge: a name the learner's process sent (a type's), as feedback may show it: ASCII
    letters, digits and _ only, at most 40 ("object" when nothing is left)."""
    if type(text) is not str:
        return "object"
    return ("".join(ch for ch in text if ch.isascii() and (ch.isalnum() or ch == "_"))[:40]
            or "object")


def memory_peaks() -> tuple[int, int] | None:
    """For a judge: (learner, reference) peak bytes of memory in use, measured by the kernel while
    the learner's test cell ran and while the reference ran the same probe
    (course_utils.grader.peakmemory); None in a notebook, or where the grader has no memory cgroup
    (grading as a normal user). A judge that uses it:

        peaks = memory_peaks()
        if peaks is not None and peaks[0] - peaks[1] > 64 * 2 ** 20:
            raise AssertionError("... used more memory than ... : ...")
    """
    return session.judged_peaks if session is not None else None
