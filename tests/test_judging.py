"""course_utils.judging: the test-cell API. grade() in a notebook is judge(probe(), expect());
raised/outcome/value_of carry what a call did as plain data, and names shown in feedback are
cleaned."""

import json

import pytest
import torch

from course_utils import judging
from course_utils.grader import protocol


def roundtrip(value):
    """value as a judge in the grader receives it (course_utils.grader.protocol)."""
    return protocol.decode(json.loads(json.dumps(protocol.encode(value))))


def test_grade_in_a_notebook_is_judge_of_probe_and_expect():
    seen = []

    def probe():
        seen.append(torch.rand(1).item())
        return 2.0

    def expect():
        seen.append(torch.rand(1).item())
        return 2.0

    def judge(got, want):
        assert got == want, "wrong"

    judging.grade(probe, expect, judge)
    assert seen[0] == seen[1], "probe and expect start from the same seed"
    with pytest.raises(AssertionError, match="wrong"):
        judging.grade(lambda: 3.0, expect, judge)
    with pytest.raises(TypeError):
        judging.grade(probe, None, None)
    with pytest.raises(TypeError):
        judging.grade("probe", expect, judge)


def test_raised_names_the_exception_and_its_bases():
    assert judging.raised(int, "x")[:2] == ("ValueError", "Exception")
    assert judging.raised(int, "3") is None


def test_names_from_the_learners_process_are_cleaned_for_feedback():
    assert judging.name_of("My<script>Type " * 10) == "MyscriptTypeMyscriptTypeMyscriptTypeMysc"
    assert judging.name_of(42) == "object" and judging.name_of("!!!") == "object"
    assert judging.raised_name(("ValueError", "Exception")) == "ValueError"
    assert judging.raised_name(["MyError", "KeyError"]) == "KeyError"
    assert (judging.raised_name(("SecretText",)) == judging.raised_name(None)
            == "an exception of the code's own type")


def test_outcome_and_value_of_carry_a_result_or_what_was_raised():
    assert judging.outcome(int, "3") == {"value": 3}
    assert judging.outcome(int, "x")["raised"][:2] == ("ValueError", "Exception")
    assert judging.outcome(lambda a, b=0: a + b, 1, b=2) == {"value": 3}
    with pytest.raises(NotImplementedError):  # an untouched stub fails with its own message
        judging.outcome(lambda: (_ for _ in ()).throw(NotImplementedError()))
    back = roundtrip(judging.outcome(int, "x"))
    with pytest.raises(AssertionError, match=r"^int\('x'\) raised ValueError$"):
        judging.value_of(back, "int('x')")
    assert judging.value_of(roundtrip({"value": [1, 2], "types": "list"}), "f") == [1, 2]
    for malformed in ({}, {"value": 1, "raised": ("ValueError",)}, [1], None):
        with pytest.raises(AssertionError, match="malformed"):
            judging.value_of(malformed, "f")


def test_check_raised_wants_the_expected_exception_or_a_subclass():
    judging.check_raised(judging.raised(int, "x"), "int('x')")
    judging.check_raised(judging.raised(lambda: {}["k"]), "lookup", expected="LookupError")
    with pytest.raises(AssertionError,
                       match=r"int\('3'\) returned normally, expected it to raise ValueError"):
        judging.check_raised(judging.raised(int, "3"), "int('3')")
    with pytest.raises(AssertionError, match=r"f raised TypeError, expected ValueError"):
        judging.check_raised(judging.raised(len, 5), "f")
    with pytest.raises(AssertionError,
                       match=r"f raised an exception of the code's own type, expected ValueError"):
        judging.check_raised(("Sneaky", "object"), "f")


# A Check: one probe and one judge, used by the visible test and by the hidden one.

def _double(x):
    return 2 * x


def _stub(x):
    from course_utils.exercises import NOT_ATTEMPTED
    raise NotImplementedError(f"{NOT_ATTEMPTED}: replace this line with your code")


def _judge_doubles(got, want, cases):
    assert type(got) is list and len(got) == len(cases), "not run on every case"
    for g, w, x in zip(got, want, cases):
        if g != w:  # raised, not asserted: pytest's assert rewriting would add to the message
            raise AssertionError(f"double({x}) is {g}, expected {w}"
                                 + (": x + 2?" if g == x + 2 else ""))


DOUBLE = judging.Check("double", lambda fn, cases: [fn(x) for x in cases], _judge_doubles)


def test_a_check_passes_a_right_answer_and_says_so_in_one_line(capsys):
    DOUBLE.visible(_double, [1, 2], [2, 4])
    assert (capsys.readouterr().out
            == "double: passed the visible test (the grader also tries other cases)\n")


def test_visible_and_hidden_tests_run_the_same_judge():
    def plus_two(x):
        return x + 2

    with pytest.raises(AssertionError, match=r"double\(3\) is 5, expected 6: x \+ 2\?"):
        DOUBLE.visible(plus_two, [3], [6])
    with pytest.raises(AssertionError, match=r"double\(3\) is 5, expected 6: x \+ 2\?"):
        DOUBLE.hidden(plus_two, [3], lambda: [6])
    DOUBLE.hidden(_double, [3, -1], lambda: [6, -2])


def test_an_unattempted_exercise_is_one_printed_line_in_jupyterlab_but_fails_under_nbgrader(
        capsys, monkeypatch):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    DOUBLE.visible(_stub, [1], [2])  # Run All goes on
    assert capsys.readouterr().out.startswith("Exercise not attempted yet: _stub (write it")
    for mode in ("validate", "autograde"):
        monkeypatch.setenv("NBGRADER_EXECUTION", mode)
        with pytest.raises(NotImplementedError):
            DOUBLE.visible(_stub, [1], [2])
    with pytest.raises(NotImplementedError):
        DOUBLE.hidden(_stub, [1], lambda: [2])


def test_an_unattempted_exercise_fails_in_the_grader(monkeypatch):
    class Session:
        def grade(self, probe, expect, judge):
            probe()

    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.setattr(judging, "session", Session())
    with pytest.raises(NotImplementedError):
        DOUBLE.visible(_stub, [1], [2])


def test_hidden_sends_no_judge_where_the_expected_block_was_cut(monkeypatch):
    seen = {}

    class Session:
        def grade(self, probe, expect, judge):
            seen.update(got=probe(), expect=expect, judge=judge)

    monkeypatch.setattr(judging, "session", Session())
    DOUBLE.hidden(_double, [1, 5], None)
    assert seen == {"got": [2, 10], "expect": None, "judge": None}


def test_a_failed_visible_check_shows_its_message_alone_not_a_traceback():
    from course_utils.checks import CheckFailed

    def plus_two(x):
        return x + 2

    with pytest.raises(CheckFailed) as failed:
        DOUBLE.visible(plus_two, [3], [6])
    assert failed.value._render_traceback_() == ["Check failed: double(3) is 5, expected 6: x + 2?"]


def _halve_each(fn, cases):
    return [judging.outcome(fn, x) for x in cases]


def _judge_halves(got, want, cases):
    for g, w, x in zip(got, want, cases):
        assert judging.value_of(g, f"halve({x})") == w, f"halve({x}) is wrong"


HALVE = judging.Check("halve", _halve_each, _judge_halves)


def test_a_call_that_raised_is_named_and_shows_the_learners_traceback_in_the_visible_test_only():
    from course_utils.checks import CheckFailed

    def halve(x):
        return 1 / (1 / x) / 2   # raises at x = 0

    with pytest.raises(CheckFailed) as failed:
        HALVE.visible(halve, [4.0, 0.0], [2.0, 0.0])
    shown = failed.value._render_traceback_()
    assert shown[-1] == "Check failed: halve(0.0) raised ZeroDivisionError"
    assert ("ZeroDivisionError: float division by zero" in shown
            and any("return 1 / (1 / x) / 2" in line for line in shown))
    assert judging._causes is None   # nothing kept alive after the visible test
    with pytest.raises(AssertionError, match=r"^halve\(0\.0\) raised ZeroDivisionError$") as hidden:
        HALVE.hidden(halve, [4.0, 0.0], lambda: [2.0, 0.0])
    assert hidden.value.__cause__ is None   # the hidden test's judge keeps no frames


def test_a_call_in_a_message_shows_each_float_as_feedback_can_show_it():
    from course_utils.grader.feedback import redact
    assert judging.call_name("f", 2, -0.7, 1e-3, "max", True) == "f(2, -0.7, 0.001, 'max', True)"
    import math
    for value, shown in ((1 / 3, "1 / 3"), (-2 / 7, "-2 / 7"),
                         (0.19999999999999998, "math.nextafter(0.2, -math.inf)"),
                         (2.5000000000000004, "math.nextafter(2.5, math.inf)"),
                         (0.1 + 1e-15, "0.1 + 1e-15"),
                         (0.1 + 1.5e-15, "0.1 + 1.5e-15"), (0.25 - 1e-12, "0.25 - 1e-12"),
                         (1.0 + 2.0 ** -40, "1.0 + 2.0 ** -40"), (1.234567e-05, "1.234567e-05"),
                         (0.1, "0.1"), (1e-300, "1e-300")):
        assert judging.argument(value) == shown
        # an expression that gives the argument back exactly
        assert eval(shown, {"math": math}) == value
        # nothing cut by feedback's number limits
        assert redact(f"g({shown}) is wrong", []) == f"g({shown}) is wrong"
    assert judging.argument(float("inf")) == "inf" and judging.argument(float("nan")) == "nan"


def test_a_visible_test_chains_only_the_learners_exception_and_none_inside_the_grader(monkeypatch):
    from course_utils.checks import CheckFailed

    def halve(x):
        return 1 / (1 / x) / 2

    def judge_with_its_own_cause(got, want, cases):
        try:
            {}["missing"]
        except KeyError as e:
            raise AssertionError("the judge's own wording") from e

    with pytest.raises(CheckFailed) as failed:
        judging.Check("halve", _halve_each, judge_with_its_own_cause).visible(halve, [4.0], [2.0])
    assert failed.value.__cause__ is None   # no traceback through course_utils
    monkeypatch.setattr(judging, "session", object())   # the grader's worker: tracebacks go nowhere
    with pytest.raises(CheckFailed) as failed:
        HALVE.visible(halve, [0.0], [0.0])
    assert (failed.value.__cause__ is None
            and str(failed.value) == "halve(0.0) raised ZeroDivisionError")
