"""How an exercise looks to a learner before it is solved: the stub, and the one line it shows.

nbgrader replaces each solution with STUB (nbgrader_config.py's ClearSolutions.code_stub), inside
the exercise's function. Calling the function before it is written raises NotImplementedError with
STUB's message; in a notebook (after course_utils.setup()) that error shows as one line naming the
function, not as a traceback:

    Exercise not attempted yet: circuit_grads (write it in its exercise cell, run that cell, then
    this one)

Any other exception keeps its full traceback. The grader recognises an untouched answer by the same
line (course_utils.grader.grade). A demonstration cell that runs an exercise's code wraps it in
`with uses_your_code():`, so that before the exercise is written it prints that line and Run All
goes on. When a learner's code raises, feedback names the exception only by a built-in class
(raised_name).
"""

import contextlib

NOT_ATTEMPTED = "Exercise not attempted yet"
STUB = f'raise NotImplementedError("{NOT_ATTEMPTED}: replace this line with your code")'


def not_attempted_line(error: BaseException) -> str | None:
    """The one line shown for an unsolved exercise's stub, or None when `error` is anything else.

    The exercise is named by the innermost function the error went through: the stub's own (or by
    the error's `exercise` attribute, set where the stub ran in another process and its error was
    raised again here).
    """
    if type(error) is not NotImplementedError or not str(error).startswith(NOT_ATTEMPTED):
        return None
    tb, name = error.__traceback__, getattr(error, "exercise", None)
    while tb is not None and not name:
        if tb.tb_next is None:
            name = tb.tb_frame.f_code.co_name
        tb = tb.tb_next
    what = f": {name}" if name and not name.startswith("<") else ""
    return f"{NOT_ATTEMPTED}{what} (write it in its exercise cell, run that cell, then this one)"


def raised_name(names) -> str:
    """For a judge (course_utils.judging) and the grader: the first built-in exception class among
    the names a learner's code raised, or a generic phrase. A class the learner's code defined is
    never named: no text from the learner's process reaches the feedback. Here, not in judging,
    because the grader's own process (every nbgrader command) must not import torch for it."""
    import builtins
    for n in names if type(names) in (list, tuple) else ():
        cls = getattr(builtins, n, None) if type(n) is str else None
        if isinstance(cls, type) and issubclass(cls, BaseException):
            return n
    return "an exception of the code's own type"


def show_stubs_in_one_line(shell) -> None:
    """Make IPython `shell` show an unsolved exercise's NotImplementedError as one line
    (IPython's set_custom_exc); every other NotImplementedError keeps its traceback."""
    def handler(shell, etype, value, tb, tb_offset=None):
        line = not_attempted_line(value)
        if line is None:
            return shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
        shell._showtraceback(etype, value, [line])
        return [line]

    shell.set_custom_exc((NotImplementedError,), handler)


@contextlib.contextmanager
def uses_your_code():
    """For a demonstration cell that runs an exercise's code:

        with uses_your_code():
            vf = neuron_values(w, x)[3]
            vf.backward()

    Before the exercise is written, the block stops at its first call of the stub and the cell
    prints one line saying which exercise it waits for, without failing: Run All goes on, also when
    the stub ran in a worker process (an error whose `stub` attribute is the stub's error, such as
    course_utils.parallel.WorkerError). Any other error (a bug in a written answer) propagates as
    usual.
    """
    try:
        yield
    except Exception as e:  # only an unsolved exercise's stub is caught; the rest propagates
        # a worker process ran the stub (course_utils.parallel.WorkerError)
        stub = getattr(e, "stub", None)
        line = not_attempted_line(e if stub is None else stub)
        if line is None:
            raise
        print(f"This cell runs your code, so it waits for it. {line}")
