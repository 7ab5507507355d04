"""course_utils.valuegraph: trace and draw_values on hand-built micrograd-style graphs."""

import re

import graphviz
import pytest

from course_utils.circuits import GREEN, RED
from course_utils.graph import COLOURS
from course_utils.valuegraph import draw_values, trace


class V:
    """Just enough of a micrograd Value to be drawn: numbers and links set by hand, no engine."""

    def __init__(self, data, prev=(), op="", grad=0.0, label=""):
        self.data, self.grad, self._prev, self._op, self.label = data, grad, tuple(prev), op, label


@pytest.fixture
def neuron():
    """CS231n's sigmoid neuron folded into fewer nodes: z = w0*x0 + w1, f = sigmoid(z), grads filled
    in."""
    w0, x0, w1 = (V(2.0, label="w0", grad=-0.19661193), V(-1.0, label="x0", grad=0.39322387),
                  V(-3.0, label="w1", grad=0.19661193))
    p = V(-2.0, (w0, x0), "*", grad=0.19661193, label="p")
    z = V(-5.0, (p, w1), "+", grad=0.19661193, label="z")
    f = V(0.0066928509, (z,), "sigmoid", grad=1.0, label="f")
    return f, z, p, w0, x0, w1


def diamond():
    a = V(1.0, label="a")
    b = V(2.0, (a, a), "+", label="b")
    c = V(4.0, (b, b), "+", label="c")
    return a, b, c


def test_trace_is_breadth_first_from_the_root_each_node_once(neuron):
    f, z, p, w0, x0, w1 = neuron
    nodes, edges = trace(f)
    assert nodes == [f, z, p, w1, w0, x0]
    assert edges == [(z, f), (p, z), (w1, z), (w0, p), (x0, p)]


def test_trace_keeps_one_edge_per_use():
    a, b, c = diamond()
    nodes, edges = trace(c)
    assert nodes == [c, b, a]
    assert edges == [(b, c), (b, c), (a, b), (a, b)]


def test_trace_of_a_leaf_and_of_sets():
    leaf = V(3.0)
    assert trace(leaf) == ([leaf], [])
    x, y = V(1.0), V(2.0)
    s = V(3.0, op="+")
    s._prev = {x, y}  # micrograd keeps _prev as a set
    nodes, edges = trace(s)
    assert nodes[0] is s and set(map(id, nodes[1:])) == {id(x), id(y)} and len(edges) == 2


def test_trace_compares_by_identity_not_equality():
    class Equal(V):
        def __eq__(self, other):
            return True

        __hash__ = object.__hash__

    x, y = Equal(1.0), Equal(1.0)
    nodes, _ = trace(V(2.0, (x, y), "+"))
    assert len(nodes) == 3


def test_trace_stops_on_a_cycle():
    a = V(1.0)
    b = V(2.0, (a,), "exp")
    a._prev = (b,)
    nodes, edges = trace(b)
    assert nodes == [b, a] and len(edges) == 2


def test_draw_shows_data_and_grad_of_every_value(neuron):
    f, *_ = neuron
    dot = draw_values(f)
    assert isinstance(dot, graphviz.Digraph)
    src = dot.source
    assert "rankdir=LR" in src
    for label, data, grad in [("f", "0.0067", "1.0000"), ("z", "-5.0000", "0.1966"),
                              ("w0", "2.0000", "-0.1966"), ("x0", "-1.0000", "0.3932")]:
        # left to right: label, data and grad stacked in a column, as a graphviz record would be
        assert re.search(rf"<tr><td><b>{label}</b></td></tr><tr><td><font color=\"{GREEN}\">data "
                         rf"{data}</font></td></tr><tr><td><font color=\"{RED}\">grad "
                         rf"{grad}</font></td></tr>", src), label
    assert src.count(f'<font color="{GREEN}">') == 6 and src.count(f'<font color="{RED}">') == 6
    top_down = draw_values(f, rankdir="TB").source  # top to bottom: the three fields in one row
    assert re.search(rf"<tr><td><b>w0</b></td><td><font color=\"{GREEN}\">data 2.0000</font></td>"
                     rf"<td><font color=\"{RED}\">grad -0.1966</font></td></tr>", top_down)


def test_draw_has_a_circle_per_op_and_arrows_through_it(neuron):
    f, *_ = neuron
    src = draw_values(f).source
    assert re.findall(r"(v\d+_op) \[label=(\S+) ", src) == [("v0_op", "sigmoid"), ("v1_op", '"+"'),
                                                            ("v2_op", '"*"')]
    assert src.count("shape=circle") == 3
    for edge in ["v0_op -> v0", "v1 -> v0_op", "v1_op -> v1", "v2 -> v1_op", "v3 -> v1_op",
                 "v4 -> v2_op", "v5 -> v2_op"]:
        assert edge in src, edge
    assert src.count("->") == 8  # 3 op -> value, 5 input -> op


def test_draw_colours_leaves_and_root(neuron):
    f, *_ = neuron
    src = draw_values(f).source
    assert src.count(f'bgcolor="{COLOURS["param"]}"') == 3
    assert src.count(f'bgcolor="{COLOURS["output"]}"') == 1
    assert src.count(f'fillcolor="{COLOURS["op"]}"') == 3


def test_draw_the_diamond_twice_used_inputs_give_two_arrows():
    a, b, c = diamond()
    src = draw_values(c, rankdir="TB").source
    assert "rankdir=TB" in src
    assert src.count("v1 -> v0_op") == 2 and src.count("v2 -> v1_op") == 2


def test_draw_renders_and_escapes_labels():
    x = V(1.5, label="x<1 & y>2")
    dot = draw_values(V(2.25, (x, x), "*", grad=1.0, label="out"))
    assert "x&lt;1 &amp; y&gt;2" in dot.source
    svg = dot.pipe(format="svg").decode()
    assert "data 2.2500" in svg and "grad 1.0000" in svg and "x&lt;1 &amp; y&gt;2" in svg


def test_unlabelled_values_have_no_label_cell():
    src = draw_values(V(3.0, (V(1.0), V(2.0)), "+")).source
    assert "<b>" not in src and src.count("data ") == 3


def test_node_without_what_draw_needs_names_the_missing_attributes():
    with pytest.raises(TypeError, match=r"got a float without \.data, \.grad, \._prev, \._op"):
        draw_values(3.0)

    class NoGrad:
        data, _prev, _op = 1.0, (), ""

    with pytest.raises(TypeError, match=r"got a NoGrad without \.grad$"):
        draw_values(NoGrad())
    with pytest.raises(TypeError, match=r"every node must be .* got a NoGrad without \.grad"):
        draw_values(V(1.0, (NoGrad(),), "exp"))
    with pytest.raises(TypeError, match=r"root must be a micrograd-style value with \._prev; "
                                        r"got a list without \._prev"):
        trace([1, 2])
    with pytest.raises(TypeError, match=r"a child of V node 'out' .* got a int without \._prev"):
        trace(V(1.0, (1,), "exp", label="out"))


def test_bad_fields_are_type_errors():
    bad_prev = V(1.0)
    bad_prev._prev = 5
    with pytest.raises(TypeError, match=r"_prev must be an iterable .* got int"):
        trace(bad_prev)
    with pytest.raises(TypeError, match=r"\.data must be a Python number, got str"):
        draw_values(V("1.0"))
    with pytest.raises(TypeError, match=r"\.grad must be a Python number, got NoneType"):
        draw_values(V(1.0, grad=None, label="w"))
    with pytest.raises(TypeError, match=r"\._op must be a str, got int"):
        draw_values(V(1.0, op=3))
    with pytest.raises(TypeError, match=r"\.label must be a str, got int"):
        draw_values(V(1.0, label=7))


def test_bad_rankdir():
    with pytest.raises(ValueError, match=r"rankdir must be one of .* got 'XY'"):
        draw_values(V(1.0), rankdir="XY")
