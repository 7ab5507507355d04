"""course_utils.judging: the test-cell API. grade() in a notebook is judge(probe(), expect());
raised/outcome/value_of carry what a call did as plain data, and names shown in feedback are cleaned."""

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
    assert judging.raised_name(("SecretText",)) == judging.raised_name(None) == "an exception of the code's own type"


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
    with pytest.raises(AssertionError, match=r"int\('3'\) returned normally, expected it to raise ValueError"):
        judging.check_raised(judging.raised(int, "3"), "int('3')")
    with pytest.raises(AssertionError, match=r"f raised TypeError, expected ValueError"):
        judging.check_raised(judging.raised(len, 5), "f")
    with pytest.raises(AssertionError, match=r"f raised an exception of the code's own type, expected ValueError"):
        judging.check_raised(("Sneaky", "object"), "f")
