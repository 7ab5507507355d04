"""course_utils.authoring.once: a fixture's per-lesson work is done once, a failure included."""

import pytest

from course_utils.authoring.once import FailedEarlier, Once


def test_work_is_done_once_per_key_and_a_failure_is_not_done_again():
    calls = []

    def work(key):
        calls.append(key)
        if key == "bad":
            raise TimeoutError("it hung")
        return key.upper()

    once = Once("grading", work)
    once.ensure(["a", "bad", "a"])
    assert once("a") == "A" and once("a") == "A"
    with pytest.raises(TimeoutError, match="it hung"):   # in full, to the first that needs it
        once("bad")
    for _ in range(3):
        with pytest.raises(FailedEarlier, match="grading bad failed once, reported in full .*: "
                                                "TimeoutError: it hung"):
            once("bad")
    assert calls == ["a", "bad"]


def test_many_keys_go_through_the_runner_given():
    ran = []
    once = Once("releasing", lambda key: key * 2)
    once.ensure(
        ["x", "y"], run_many=lambda fn, keys: ran.append(list(keys)) or [fn(k) for k in keys])
    assert ran == [["x", "y"]] and once("y") == "yy"
