"""course_utils.checks: strict types first, then values, and messages that name the mistake."""

import math

import numpy as np
import pytest
import torch

from course_utils.checks import (CheckFailed, check_float, check_floats, check_raises, check_tensor,
                                 numerical_grad, relation)


class FakeFloat(float):
    def __eq__(self, other):
        return True

    __hash__ = float.__hash__


class FakeTensor(torch.Tensor):
    pass


@pytest.mark.parametrize("actual, expected, words", [
    (-3.0, 3.0, "opposite sign"),
    (12.0, 3.0, "4 times too large"),
    (0.75, 3.0, "4 times too small"),
    (0.0, 3.0, "is 0"),
    (-6.0, 3.0, "opposite sign and is 2 times too large"),
])
def test_relation_names_the_link(actual, expected, words):
    assert words in relation(actual, expected)


def test_relation_is_silent_when_nothing_stands_out():
    assert relation(3.7, 3.0) is None
    assert relation(1.0, 0.0) is None


def test_check_float_passes_close_values_and_ints():
    check_float(0.1 + 0.2, 0.3, "x")
    check_float(3, 3.0, "x")


@pytest.mark.parametrize("bad, hint", [
    (None, "forget to `return`"),
    (torch.tensor(3.0), ".item()"),
    (np.float64(3.0), "float(...)"),
    (True, "bool"),
    (FakeFloat(1.0), "subclass"),
    ("3.0", "got str"),
])
def test_check_float_rejects_wrong_types_with_a_hint(bad, hint):
    with pytest.raises(AssertionError, match="should be a Python float") as e:
        check_float(bad, 3.0, "answer")
    assert hint in str(e.value)


def test_check_float_rejects_nan_and_inf():
    for bad in (math.nan, math.inf):
        with pytest.raises(AssertionError, match="overflow"):
            check_float(bad, 1.0, "answer")


def test_check_float_prefers_the_exercise_own_mistake():
    with pytest.raises(AssertionError, match="the upstream gradient was not multiplied in"):
        check_float(1.0, -4.0, "dx", mistakes={"the upstream gradient was not multiplied in": 1.0})
    with pytest.raises(AssertionError, match=r"is 4, expected -4 \(it has the opposite sign\)"):
        check_float(4.0, -4.0, "dx")


def test_check_floats_types_length_and_entries():
    check_floats((-4.0, -4.0, 3), (-4.0, -4.0, 3.0), "g")
    with pytest.raises(AssertionError, match="should be a tuple of 3 floats, got Tensor"):
        check_floats(torch.tensor([1.0, 2.0, 3.0]), (1.0, 2.0, 3.0), "g")
    with pytest.raises(AssertionError, match="should have 3 entries"):
        check_floats((1.0, 2.0), (1.0, 2.0, 3.0), "g")
    with pytest.raises(AssertionError,
                       match=r"df/dz should be a Python float, got Tensor \(a torch.Tensor"):
        check_floats((1.0, 2.0, torch.tensor(3.0)), (1.0, 2.0, 3.0), "g",
                     labels=("df/dx", "df/dy", "df/dz"))
    with pytest.raises(AssertionError, match="df/dz has the opposite sign") as e:
        check_floats((1.0, 2.0, -3.0), (1.0, 2.0, 3.0), "g", labels=("df/dx", "df/dy", "df/dz"))
    assert "df/dx" not in str(e.value).split(":")[1]  # only the wrong entry is named
    with pytest.raises(AssertionError, match="mul inputs not swapped"):
        check_floats((3.0, 3.0, -4.0), (-4.0, -4.0, 3.0), "g",
                     mistakes={"mul inputs not swapped": (3.0, 3.0, -4.0)})


def test_check_tensor_checks_type_shape_dtype_then_values():
    e = torch.arange(6.0).reshape(2, 3)
    check_tensor(e.clone(), e, "t")
    with pytest.raises(AssertionError, match="should be a torch.Tensor, got list"):
        check_tensor(e.tolist(), e, "t")
    with pytest.raises(AssertionError, match="got FakeTensor"):
        check_tensor(e.as_subclass(FakeTensor), e, "t")
    with pytest.raises(AssertionError, match="nn.Parameter"):
        check_tensor(torch.nn.Parameter(e.clone()), e, "t")
    with pytest.raises(AssertionError, match="transposed"):
        check_tensor(e.T.contiguous(), e, "t")
    with pytest.raises(AssertionError, match="dtype torch.float64"):
        check_tensor(e.double(), e, "t")
    with pytest.raises(AssertionError, match="every entry is exactly 4 times too large"):
        check_tensor(4 * e, e, "t")
    with pytest.raises(AssertionError, match="forgot the bias"):
        check_tensor(e - 1, e, "t", mistakes={"forgot the bias": e - 1})
    with pytest.raises(AssertionError, match="nan or inf"):
        check_tensor(e / 0, e, "t")
    sq = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(AssertionError, match="equals the expected tensor transposed"):
        check_tensor(sq.T.contiguous(), sq, "t")
    with pytest.raises(TypeError, match="expected must be a torch.Tensor"):
        check_tensor(e, [1.0], "t")


def test_check_raises():
    def bad(op):
        raise ValueError(op)

    check_raises(ValueError, bad, "div", name="gate_backward('div')")
    with pytest.raises(AssertionError, match="returned normally, expected it to raise ValueError"):
        check_raises(ValueError, lambda: 1, name="f()")
    with pytest.raises(AssertionError, match=r"raised KeyError\('div'\), expected ValueError"):
        check_raises(ValueError, lambda: {}["div"], name="f()")


def test_numerical_grad_matches_autograd():
    x = torch.randn(3, 4, dtype=torch.float64)
    w = torch.randn(4, dtype=torch.float64)

    def f(t):
        return (t.tanh() @ w).pow(2).sum()

    xr = x.clone().requires_grad_()
    f(xr).backward()
    num = numerical_grad(f, x)
    assert num.shape == x.shape
    torch.testing.assert_close(num, xr.grad, rtol=1e-6, atol=1e-8)
    assert torch.equal(x, x.clone())  # x untouched


def test_numerical_grad_bad_input():
    with pytest.raises(TypeError, match="must be a torch.Tensor, got list"):
        numerical_grad(lambda t: t.sum(), [1.0])
    with pytest.raises(ValueError, match="float64.*use x.double"):
        numerical_grad(lambda t: t.sum(), torch.ones(2))
    with pytest.raises(ValueError, match="positive float"):
        numerical_grad(lambda t: t.sum(), torch.ones(2, dtype=torch.float64), h=0)


def test_a_failed_check_shows_its_message_without_a_traceback():
    """IPython renders an exception through its _render_traceback_: the learner sees one line."""
    from IPython.core.interactiveshell import InteractiveShell

    from course_utils.checks import CheckFailed
    shell = InteractiveShell.instance()
    shown = []
    real = shell._showtraceback
    shell._showtraceback = lambda etype, value, stb: shown.append(stb)
    try:
        result = shell.run_cell("from course_utils.checks import check_float\n"
                                "check_float(2.0, 3.0, 'f(1)')")
        assert (isinstance(result.error_in_exec, CheckFailed)
                and isinstance(result.error_in_exec, AssertionError))
        assert (len(shown) == 1 and len(shown[0]) == 1
                and shown[0][0].startswith("Check failed: f(1)"))
        result = shell.run_cell("def g():\n    return 1 / 0\ng()")
        assert len(shown) == 2 and len(shown[1]) > 1, (
            "an error in the learner's own code keeps its traceback")
    finally:
        shell._showtraceback = real


def test_check_floats_holds_a_result_to_the_container_and_floats_its_docstring_promises():
    check_floats((1.0, 0.0), [1.0, 0.0], "g(1)", promised=tuple)
    check_floats([1.0, 0.0], [1.0, 0.0], "g(1)")   # nothing promised: either container, ints too
    check_floats((1, 0), [1.0, 0.0], "g(1)")
    with pytest.raises(CheckFailed, match=r"g\(1\) has the right values, but it is a list: the "
                                          r"docstring promises a tuple"):
        check_floats([1.0, 0.0], [1.0, 0.0], "g(1)", promised=tuple)
    with pytest.raises(CheckFailed, match=r"it is a tuple: the docstring promises a list"):
        check_floats((1.0, 0.0), [1.0, 0.0], "g(1)", promised=list)
    with pytest.raises(CheckFailed, match=r"^g\(1\): d/db has the right value, but it is the int "
                                          r"0: .*write 0\.0"):
        check_floats((1.0, 0), [1.0, 0.0], "g(1)", labels=("d/da", "d/db"), promised=tuple)
    # wrong values are told first
    with pytest.raises(CheckFailed, match=r"is \(2, 0\), expected \(1, 0\)"):
        check_floats([2, 0], [1.0, 0.0], "g(1)", promised=tuple)


def test_a_result_off_by_float32_rounding_is_told_so_where_float64_is_promised():
    right = 0.1 + 0.2
    in_float32 = (torch.tensor(0.1) + torch.tensor(0.2)).item()
    with pytest.raises(CheckFailed, match=r"is 0\.30000001192092896, expected "
                                          r"0\.30000000000000004: it agrees only to float32 "
                                          r"precision \(off by 4e-08 of itself\)"):
        check_float(in_float32, right, "q", rtol=1e-12)
    with pytest.raises(CheckFailed) as error:   # said once, however many entries it explains
        check_floats([in_float32, 0.5, (torch.tensor(0.4)).item()], [right, 0.5, 0.4],
                     "q", rtol=1e-12)
    assert (str(error.value).count("float32") == 2
            and ": q[0], q[2] agree only to float32 precision" in str(error.value))
    # all its digits only where 6 look equal
    assert "expected (0.30000000000000004, 0.5, 0.4)" in str(error.value)
    # an int, or a float that float32 cannot hold: not float32's doing
    with pytest.raises(CheckFailed) as error:
        check_floats([2 ** 44 + 64], [2 ** 44], "n", rtol=0, atol=0)
    assert "float32" not in str(error.value)
    check_float(in_float32, right, "q")   # the default tolerance promises float32's digits only
    # off by more than float32 rounds: nothing said about float32
    with pytest.raises(CheckFailed) as error:
        check_float(right * (1 + 1e-5), right, "q", rtol=1e-12)
    assert "float32" not in str(error.value)


def test_check_floats_names_only_what_it_can_say_about_wrong_entries():
    # nothing telling: the values shown say it, no list of "is wrong"
    with pytest.raises(CheckFailed) as error:
        check_floats([0.3, 0.5, 0.2], [0.4, 0.4, 0.2], "w([4, 4, 2])")
    assert str(error.value) == "w([4, 4, 2]) is (0.3, 0.5, 0.2), expected (0.4, 0.4, 0.2)."
    with pytest.raises(CheckFailed,
                       match=r": w\[0\] has the opposite sign; 1 other entry is wrong too\.$"):
        check_floats([-0.4, 0.5, 0.2], [0.4, 0.4, 0.2], "w")


def test_a_tensor_where_a_list_is_promised_is_told_to_use_tolist():
    with pytest.raises(CheckFailed, match=r"w should be a list of 2 floats, got Tensor \(a "
                                          r"torch.Tensor: use .tolist\(\)"):
        check_floats(torch.tensor([0.5, 0.5]), [0.5, 0.5], "w", promised=list)


def test_a_tensor_off_by_float32_rounding_is_told_so_where_float64_is_promised():
    right = torch.tensor([0.1, 0.2, 0.3], dtype=torch.float64)
    with pytest.raises(CheckFailed,
                       match="agrees only to float32 precision.*Compute in torch.float64"):
        check_tensor(right.float().double(), right, "g", rtol=1e-9, atol=1e-12)
    with pytest.raises(CheckFailed) as error:   # a real mistake is not blamed on float32
        check_tensor(right * 1.01, right, "g", rtol=1e-9, atol=1e-12)
    assert "float32" not in str(error.value)
