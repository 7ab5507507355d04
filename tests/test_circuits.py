"""course_utils.circuits: the numbers on the picture are torch's, and the widget follows its
sliders."""

import re

import pytest
import torch

from course_utils.circuits import OPS, Circuit, circuit_f, interactive


def torch_grads(x, y, z):
    t = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in (x, y, z)]
    f = (t[0] + t[1]) * t[2]
    f.backward()
    return f.item(), [v.grad.item() for v in t]


def test_lesson_values():
    c = circuit_f()
    assert c.values == {"x": -2.0, "y": 5.0, "z": -4.0, "q": 3.0, "f": -12.0}
    assert c.grads == {"x": -4.0, "y": -4.0, "z": 3.0, "q": -4.0, "f": 1.0}


@pytest.mark.parametrize("x, y, z", [(1.5, -0.5, 2.0), (0.0, 0.0, 0.0), (-7.0, 3.25, 9.5)])
def test_matches_torch(x, y, z):
    c = circuit_f(x, y, z)
    f, grads = torch_grads(x, y, z)
    assert c.values["f"] == f
    assert [c.grads[n] for n in "xyz"] == grads


def test_every_op_matches_torch_autograd():
    a, b = 0.7, -1.3
    for op, (_, arity, fn) in OPS.items():
        names = ("a", "b")[:arity]
        c = Circuit({"a": a, "b": b}, [("out", op, names)])
        ta, tb = (torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in (a, b))
        out = fn(*(ta, tb)[:arity])
        out.backward()
        assert c.values["out"] == out.item(), op
        assert c.grads["a"] == ta.grad.item(), op


def test_svg_shows_values_green_and_gradients_red():
    svg = circuit_f().svg()
    values = dict(re.findall(r'class="value" data-wire="(\w+)">([-\d.]+)<', svg))
    grads = dict(re.findall(r'class="grad" data-wire="(\w+)">([-\d.]+)<', svg))
    assert values == {"x": "-2.00", "y": "5.00", "z": "-4.00", "q": "3.00", "f": "-12.00"}
    assert grads == {"x": "-4.00", "y": "-4.00", "z": "3.00", "q": "-4.00", "f": "1.00"}
    assert svg.count('fill="#1a8f1a"') >= 5 and svg.count('fill="#d62728"') >= 5
    assert circuit_f()._repr_svg_() == svg


def test_layout_keeps_gates_apart():
    c = Circuit({"a": 1.0, "b": 2.0},
                [("s", "add", ("a", "b")), ("p", "mul", ("a", "b")), ("f", "mul", ("s", "p"))])
    pos = c._layout()
    assert len(set(pos.values())) == len(pos)


def test_widget_redraws_when_a_slider_moves():
    box = interactive(circuit_f())
    assert set(box.sliders) == {"x", "y", "z"}
    box.sliders["x"].value = 1.0  # q = 6, f = -24
    assert 'data-wire="f">-24.00<' in box.picture.value
    assert 'class="grad" data-wire="z">6.00<' in box.picture.value


def test_with_inputs_and_bad_input():
    assert circuit_f().with_inputs(z=1.0).values["f"] == 3.0
    with pytest.raises(ValueError, match="unknown inputs"):
        circuit_f().with_inputs(w=1.0)
    with pytest.raises(TypeError, match="non-empty dict"):
        Circuit([], [("f", "add", ("x", "y"))])
    with pytest.raises(TypeError, match="must be an int or float, got Tensor"):
        Circuit({"x": torch.tensor(1.0)}, [("f", "neg", ("x",))])
    with pytest.raises(ValueError, match="unknown op 'pow'"):
        Circuit({"x": 1.0}, [("f", "pow", ("x",))])
    with pytest.raises(ValueError, match="takes 2 input"):
        Circuit({"x": 1.0}, [("f", "add", ("x",))])
    with pytest.raises(ValueError, match="not defined before it"):
        Circuit({"x": 1.0}, [("f", "add", ("x", "y"))])
    with pytest.raises(ValueError, match="defined twice"):
        Circuit({"x": 1.0}, [("x", "neg", ("x",))])
    with pytest.raises(ValueError, match="at least one gate"):
        Circuit({"x": 1.0}, [])
    with pytest.raises(TypeError, match="must be a Circuit"):
        interactive("f")
