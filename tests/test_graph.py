"""course_utils.graph: walk, saved_tensors, report and draw, checked against torch's own graph."""

import warnings

import graphviz
import pytest
import torch
import torch.nn as nn

from course_utils.graph import (COLOURS, GraphReport, NodeInfo, SavedTensor, draw, report,
                                saved_tensors, walk)


def storage(t):
    return t.untyped_storage().data_ptr()


@pytest.fixture
def fxyz():
    """f = (x + y) * z on three leaves of shape (3,); s = x + y."""
    x, y, z = (torch.randn(3, requires_grad=True) for _ in range(3))
    s = x + y
    return s * z, s, x, y, z


@pytest.fixture
def mlp():
    """A 2-layer MLP, 5 x 4 -> 8 -> 3, and an input that does not require grad."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)), torch.randn(5, 4)


# walk


def test_walk_order_names_and_depths(fxyz):
    f, s, x, y, z = fxyz
    nodes = walk(f, {"x": x, "y": y, "z": z})
    assert all(isinstance(n, NodeInfo) for n in nodes)
    assert [(n.name, n.depth) for n in nodes] == [
        ("MulBackward0", 0), ("AddBackward0", 1), ("AccumulateGrad", 1),
        ("AccumulateGrad", 2), ("AccumulateGrad", 2),
    ]
    assert nodes[0].node is f.grad_fn and nodes[1].node is s.grad_fn
    assert nodes[0].next == ["AddBackward0", "AccumulateGrad"]
    assert nodes[1].next == ["AccumulateGrad", "AccumulateGrad"]
    assert nodes[2].next == []
    assert all(a.variable is b for a, b in zip(nodes[2:], (z, x, y)))
    assert [n.param_name for n in nodes] == [None, None, "z", "x", "y"]
    assert nodes[0].variable is None


def test_walk_from_node_equals_walk_from_tensor(fxyz):
    f = fxyz[0]
    assert [n.node for n in walk(f.grad_fn)] == [n.node for n in walk(f)]
    assert all(n.param_name is None for n in walk(f))  # no params, no names


def test_walk_visits_a_shared_node_once():
    x = torch.randn(3, requires_grad=True)
    nodes = walk(x * x)
    assert nodes[0].next == ["AccumulateGrad", "AccumulateGrad"]  # torch lists x twice
    assert [n.name for n in nodes] == ["MulBackward0", "AccumulateGrad"]


def test_walk_skips_inputs_that_need_no_grad():
    x = torch.randn(3, requires_grad=True)
    y = x * torch.randn(3)
    assert [c for c, _ in y.grad_fn.next_functions][1] is None  # torch's entry for the constant
    nodes = walk(y)
    assert nodes[0].next == ["AccumulateGrad"]
    assert [n.name for n in nodes] == ["MulBackward0", "AccumulateGrad"]


def test_walk_names_parameters_of_a_module(mlp):
    model, x = mlp
    params = dict(model.named_parameters())
    leaves = [n for n in walk(model(x), params) if n.name == "AccumulateGrad"]
    assert sorted(n.param_name for n in leaves) == sorted(params)
    assert all(n.variable is params[n.param_name] for n in leaves)


# saved_tensors


def test_mul_saves_both_inputs_add_saves_nothing(fxyz):
    f, s, x, y, z = fxyz
    saved = {t.name: t for t in saved_tensors(f.grad_fn)}
    assert sorted(saved) == ["_saved_other", "_saved_self"]
    assert all(isinstance(t, SavedTensor) and t.node == "MulBackward0" for t in saved.values())
    self_, other = saved["_saved_self"], saved["_saved_other"]
    assert (self_.storage, other.storage) == (storage(s), storage(z))
    assert (self_.is_leaf_storage, other.is_leaf_storage) == (False, True)
    assert ((other.dtype, other.shape, other.nbytes, other.storage_nbytes)
            == (torch.float32, (3,), 12, 12))
    assert saved_tensors(s.grad_fn) == []


def test_saved_tuple_is_indexed_and_none_skipped():
    x = torch.randn(4, 5, requires_grad=True)
    idx = torch.tensor([0, 2, 3])
    (rows,) = saved_tensors(x[idx].grad_fn)
    assert ((rows.name, rows.dtype, rows.shape, rows.nbytes)
            == ("_saved_indices[0]", torch.int64, (3,), 24))
    assert rows.storage == storage(idx)
    cols = saved_tensors(x[:, idx].grad_fn)  # torch saves (None, idx)
    assert x[:, idx].grad_fn._saved_indices[0] is None
    assert [t.name for t in cols] == ["_saved_indices[1]"]


def test_a_saved_view_keeps_its_whole_storage():
    x = torch.randn(4, 5, requires_grad=True)
    h = x.exp()  # (4, 5), 80 bytes, saved by ExpBackward0 as its result
    (row,) = saved_tensors(h[0].sin().grad_fn)  # SinBackward0 saves the view h[0]
    assert (row.shape, row.nbytes, row.storage_nbytes, row.storage) == ((5,), 20, 80, storage(h))
    assert report(h[0].sin()).activation_bytes == 80  # one storage, saved twice


def test_linear_input_is_saved_not_a_leaf(mlp):
    model, x = mlp
    node = model[0](x).grad_fn
    assert type(node).__name__ == "AddmmBackward0"
    saved = {t.name: t for t in saved_tensors(node)}
    assert saved["_saved_mat1"].storage == storage(x)
    assert not saved["_saved_mat1"].is_leaf_storage  # x does not require grad: no AccumulateGrad
    # torch saves the weight only to compute the input's gradient, and x needs none
    assert node._saved_mat2 is None and "_saved_mat2" not in saved


def test_linear_weight_is_saved_as_leaf_storage(mlp):
    model, x = mlp
    params = dict(model.named_parameters())
    out = model(x)  # the second Linear's input, the ReLU output, requires grad: mat2 is saved
    assert type(out.grad_fn).__name__ == "AddmmBackward0"
    saved = {t.name: t for t in saved_tensors(out.grad_fn)}
    mat2 = saved["_saved_mat2"]
    assert mat2.is_leaf_storage and mat2.shape == (8, 3)  # W2.T, a view of W2 (3, 8)
    assert mat2.storage == storage(model[2].weight) and mat2.nbytes == 8 * 3 * 4
    owner = [n for n in report(out, params).leaves if storage(n.variable) == mat2.storage]
    assert [n.param_name for n in owner] == ["2.weight"]
    assert not saved["_saved_mat1"].is_leaf_storage


def test_freed_graph_error_says_retain_graph(fxyz):
    f = fxyz[0]
    f.sum().backward()
    with pytest.raises(RuntimeError, match=r"freed by backward\(\).*retain_graph=True"):
        saved_tensors(f.grad_fn)
    with pytest.raises(RuntimeError, match=r"freed by backward\(\)"):
        report(f)


def test_retain_graph_keeps_saved_tensors(fxyz):
    f = fxyz[0]
    f.sum().backward(retain_graph=True)
    assert len(saved_tensors(f.grad_fn)) == 2


# report


def test_x_times_x_counts_once():
    x = torch.randn(3, requires_grad=True)
    r = report(x * x)
    assert isinstance(r, GraphReport)
    assert [s.name for s in r.saved] == ["_saved_other", "_saved_self"]
    assert r.saved[0].storage == r.saved[1].storage == storage(x)
    assert (r.saved_bytes, r.activation_bytes) == (12, 0)  # x is a leaf: no extra memory


def test_one_activation_saved_three_times_counts_once():
    x = torch.randn(3, requires_grad=True)
    h = x.exp()  # ExpBackward0 saves its result h; h * h saves h twice more
    r = report(h * h)
    assert len(r.saved) == 3 and {s.storage for s in r.saved} == {storage(h)}
    assert (r.saved_bytes, r.activation_bytes) == (12, 12)


def test_mlp_activation_bytes_by_hand(mlp):
    model, x = mlp
    params = dict(model.named_parameters())
    out = model(x)
    r = report(out.pow(2).sum(), params)
    B, D, H, C, f32 = 5, 4, 8, 3, 4
    # distinct activations: x (saved by Linear 1), relu output (saved by ReLU and Linear 2), out (by
    # pow)
    assert r.activation_bytes == (B * D + B * H + B * C) * f32
    assert r.saved_bytes == r.activation_bytes + H * C * f32  # plus W2, whose view Linear 2 saved
    assert len(r.saved) == 5 and len({s.storage for s in r.saved}) == 4
    assert [n.param_name for n in r.leaves] == ["2.bias", "2.weight", "0.bias", "0.weight"]
    assert [n.name for n in r.nodes] == [
        "SumBackward0", "PowBackward0", "AddmmBackward0", "AccumulateGrad",
        "ReluBackward0", "TBackward0",
        "AddmmBackward0", "AccumulateGrad", "AccumulateGrad", "TBackward0", "AccumulateGrad",
    ]


def test_report_str_is_a_table(fxyz):
    f, s, x, y, z = fxyz
    r = report(f, {"x": x, "y": y, "z": z})
    lines = str(r).splitlines()
    assert len(lines) == len(r.nodes) + 2  # header, one per node, totals
    assert lines[0].split()[:3] == ["depth", "node", "param"]
    assert lines[1].split()[:2] == ["0", "MulBackward0"]
    assert ("_saved_self float32 (3,) 12" in lines[1]
            and "_saved_other float32 (3,) 12 (leaf)" in lines[1])
    assert lines[3].split() == ["1", "AccumulateGrad", "z"]
    assert "saved_bytes=24" in lines[-1] and "activation_bytes=12" in lines[-1]
    assert repr(r) == str(r)


# draw


def test_draw_uses_course_colours_and_renders(fxyz):
    f, s, x, y, z = fxyz
    view = f[1:]  # a view: torchviz also draws its base, in darkolivegreen3
    dot = draw(view, {"x": x, "y": y, "z": z}, show_saved=True)
    assert isinstance(dot, graphviz.Digraph)
    for colour in COLOURS.values():
        assert colour in dot.source
    for name in ("lightblue", "darkolivegreen", "orange"):
        assert name not in dot.source
    assert dot.source.count(f'fillcolor="{COLOURS["saved"]}"') == 2  # MulBackward0's two
    assert dot.source.count(f'fillcolor="{COLOURS["param"]}"') == 3
    svg = dot.pipe(format="svg").decode()
    assert "<svg" in svg and COLOURS["param"] in svg and COLOURS["op"] in svg


def test_draw_without_saved_has_no_saved_colour_and_no_warning(fxyz):
    with warnings.catch_warnings():
        # torchviz's DeprecationWarning would reach stderr in nbgrader
        warnings.simplefilter("error")
        dot = draw(fxyz[0])
    assert COLOURS["saved"] not in dot.source and COLOURS["output"] in dot.source


# bad input


@pytest.mark.parametrize("fn", [walk, report, draw])
@pytest.mark.parametrize("root, got",
                         [(3, "int"), ("y", "str"), (None, "NoneType"), ([1.0], "list")])
def test_root_of_wrong_type(fn, root, got):
    with pytest.raises(TypeError,
                       match=rf"root must be a torch\.Tensor with a grad_fn.*got {got}$"):
        fn(root)


def test_walk_error_message_in_full():
    with pytest.raises(TypeError) as e:
        walk(3)
    assert str(e.value) == "root must be a torch.Tensor with a grad_fn or an autograd Node, got int"


@pytest.mark.parametrize("fn", [walk, report, draw])
def test_root_without_grad_fn(fn):
    x = torch.randn(3, requires_grad=True)
    with pytest.raises(ValueError, match="no grad_fn.*leaf tensor"):
        fn(x)
    with torch.no_grad():
        y = x * 2
    for root in (y, (x * 2).detach(), torch.randn(3) * 2):
        with pytest.raises(ValueError, match=r"no grad_fn.*torch\.no_grad\(\).*\.detach\(\)"):
            fn(root)


def test_draw_needs_a_tensor_not_a_node(fxyz):
    with pytest.raises(TypeError, match="got MulBackward0"):
        draw(fxyz[0].grad_fn)


def test_saved_tensors_needs_a_node(fxyz):
    with pytest.raises(TypeError, match="node must be an autograd Node.*got Tensor"):
        saved_tensors(fxyz[0])


@pytest.mark.parametrize("fn", [walk, report, draw])
def test_params_must_be_a_dict_of_tensors(fn, mlp):
    model, x = mlp
    out = model(x)
    w = model[0].weight
    for params, got in [(model.named_parameters(), "generator"), ([w], "list"),
                        ({0: w}, "int -> Parameter"), ({"w": w.tolist()}, "str -> list")]:
        with pytest.raises(TypeError,
                           match=rf"params must be a dict of name -> tensor.*got.* {got}$"):
            fn(out, params)


def test_next_node_number_counts_the_nodes_made_whatever_the_grad_mode():
    from course_utils.graph import next_node_number
    x = torch.ones(3, requires_grad=True)
    before = next_node_number()
    y = (x * 2).sum()  # two nodes: MulBackward0, SumBackward0
    after = next_node_number()
    assert after - before == 2 + 1  # + the reading's own node
    with torch.no_grad():  # grad mode off: the reading still works, and nothing else was made
        assert next_node_number() == after + 1
    assert y.grad_fn is not None
