"""course_utils.exercises: an unsolved exercise shows one line naming it; anything else keeps its
traceback; the stub is the one line nbgrader writes and the grader recognises."""

import pytest
from IPython.core.interactiveshell import InteractiveShell

from course_utils.exercises import NOT_ATTEMPTED, STUB, not_attempted_line, show_stubs_in_one_line


def stub_error(source: str) -> BaseException:
    namespace = {}
    exec(source, namespace)
    try:
        namespace["run"]()
    except BaseException as e:
        return e
    raise AssertionError("the stub did not raise")


def test_the_stub_is_one_line_that_raises_not_implemented():
    assert (STUB.startswith("raise NotImplementedError(") and "\n" not in STUB
            and NOT_ATTEMPTED in STUB)


def test_an_unsolved_exercise_is_named_in_one_line():
    error = stub_error(f"def circuit_grads(x):\n    {STUB}\ndef run():\n"
                       "    return circuit_grads(1.0)")
    line = not_attempted_line(error)
    assert line.startswith(f"{NOT_ATTEMPTED}: circuit_grads (") and "\n" not in line


@pytest.mark.parametrize("source", [
    "def run():\n    raise NotImplementedError('sparse tensors are not supported')",
    "def run():\n    raise ValueError('Exercise not attempted yet')",
    "class Mine(NotImplementedError): pass\ndef run():\n"
    "    raise Mine('Exercise not attempted yet')",
])
def test_every_other_error_keeps_its_traceback(source):
    assert not_attempted_line(stub_error(source)) is None


def test_ipython_shows_the_one_line_and_still_counts_the_cell_as_failed(capsys):
    shell = InteractiveShell.instance()
    shown = []
    real = shell._showtraceback
    shell._showtraceback = lambda etype, value, stb: shown.append(stb)
    try:
        show_stubs_in_one_line(shell)
        result = shell.run_cell(f"def f():\n    {STUB}\nf()")
        assert isinstance(result.error_in_exec, NotImplementedError), (
            "the cell still fails (Validate, nbgrader)")
        assert shown == [[not_attempted_line(result.error_in_exec)]]
        shown.clear()
        result = shell.run_cell("raise NotImplementedError('other')")
        assert isinstance(result.error_in_exec, NotImplementedError)
        assert len(shown) == 1 and len(shown[0]) > 1, (
            "another NotImplementedError shows its whole traceback")
    finally:
        shell._showtraceback = real
        shell.set_custom_exc((), None)


def test_a_demonstration_waits_for_an_unsolved_exercise_without_failing(capsys):
    from course_utils.exercises import uses_your_code
    namespace = {}
    exec(f"def backward():\n    {STUB}", namespace)
    ran = []
    with uses_your_code():
        namespace["backward"]()
        ran.append("after")
    assert ran == [] and capsys.readouterr().out.startswith("This cell runs your code, so it waits "
                                                            f"for it. {NOT_ATTEMPTED}: backward")
    with pytest.raises(ZeroDivisionError):  # a bug in a written answer is not hidden
        with uses_your_code():
            1 / 0
    with pytest.raises(NotImplementedError):
        with uses_your_code():
            raise NotImplementedError("not supported")


def test_a_stub_that_ran_in_another_process_is_named_by_its_exercise_attribute():
    error = NotImplementedError(f"{NOT_ATTEMPTED}: replace this line with your code")
    error.exercise = "average_gradients"  # raised again here from a worker's report (lesson 08)
    try:
        raise error
    except NotImplementedError as e:
        assert not_attempted_line(e).startswith(f"{NOT_ATTEMPTED}: average_gradients (")
