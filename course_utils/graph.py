"""Look inside an autograd graph: its nodes, the tensors they saved for backward, and a drawing.

A tensor computed from tensors that require grad has a `grad_fn`, a node of the graph that
backward() calls. A node points at its inputs' nodes (`next_functions`) and keeps the tensors its
backward formula needs (`_saved_*`): the memory cost of training, freed by backward().

    walk(root, params)           every node, breadth-first from the output, once each
    saved_tensors(node)          the tensors one node saved, with their bytes and storage
    report(root, params)         both, and the bytes the graph holds; print it
    draw(root, params)           torchviz.make_dot in the course colours

Example:
    x = torch.randn(3, requires_grad=True)
    y = (x * x).sum()
    print(report(y, {"x": x}))   # MulBackward0 saved x twice, but it is one storage: 12 bytes
"""

import re
import warnings
from collections import deque
from dataclasses import dataclass, field

import graphviz
import torch
from torch.autograd.graph import Node

COLOURS = {"param": "#a8d5ff", "output": "#b6e3a8", "saved": "#ffd59e", "op": "#eeeeee"}


@dataclass(frozen=True)
class SavedTensor:
    """One tensor that an autograd node saved for its backward pass.

    node: str, class name of the node that saved it, e.g. "MulBackward0"
    name: str, the attribute it is read from, e.g. "_saved_self" or "_saved_indices[0]"
    dtype: torch.dtype of its elements
    shape: tuple of ints
    nbytes: int, bytes of its own elements, numel * element_size
    storage: int, key of the memory it lives in (data_ptr of its untyped storage); views share it
    storage_nbytes: int, bytes of that whole storage: what keeping this tensor keeps alive
    is_leaf_storage: bool, True when that storage is a leaf's of the graph (a parameter or
        input with requires_grad=True, held by an AccumulateGrad node): saving it costs nothing
    """

    node: str
    name: str
    dtype: torch.dtype
    shape: tuple
    nbytes: int
    storage: int
    storage_nbytes: int
    is_leaf_storage: bool


@dataclass(eq=False)
class NodeInfo:
    """One node of an autograd graph, as walk() finds it.

    name: str, class name of the node, e.g. "AddmmBackward0" or "AccumulateGrad"
    depth: int, steps from the root along next_functions; the root is 0
    node: torch.autograd.graph.Node, the node itself
    next: list of str, class names of the nodes it passes gradients to, None entries skipped
    saved: list of SavedTensor, what it saved for backward
    variable: torch.Tensor or None, for AccumulateGrad the leaf whose .grad it fills
    param_name: str or None, for AccumulateGrad the name of that leaf in `params`, if there
    """

    name: str
    depth: int
    node: Node = field(repr=False)
    next: list
    saved: list
    variable: torch.Tensor = field(default=None, repr=False)
    param_name: str = None


def _as_node(root):
    """Return the autograd Node that `root` (a tensor with a grad_fn, or a Node) stands for."""
    if isinstance(root, Node):
        return root
    if not isinstance(root, torch.Tensor):
        raise TypeError("root must be a torch.Tensor with a grad_fn or an autograd Node, "
                        f"got {type(root).__name__}")
    if root.grad_fn is None and root.requires_grad:
        raise ValueError("root has no grad_fn: it is a leaf tensor (made with requires_grad=True, "
                         "not computed), so no graph hangs below it; pass a tensor computed from "
                         "it")
    if root.grad_fn is None:
        raise ValueError("root has no grad_fn: it does not require grad, so no graph was recorded; "
                         "it was computed under torch.no_grad(), from .detach(), or from inputs "
                         "that need no grad")
    return root.grad_fn


def _param_names(params):
    """Check `params` (None or dict name -> tensor) and return a dict id(tensor) -> name."""
    if params is None:
        return {}
    expected = "params must be a dict of name -> tensor such as dict(model.named_parameters()), got"
    if not isinstance(params, dict):
        raise TypeError(f"{expected} {type(params).__name__}")
    for k, v in params.items():
        if not isinstance(k, str) or not isinstance(v, torch.Tensor):
            raise TypeError(f"{expected} an entry {type(k).__name__} -> {type(v).__name__}")
    return {id(v): k for k, v in params.items()}


def _bfs(root):
    """Breadth-first over next_functions from Node `root`: list of (node, depth), each node once."""
    seen, order, queue = {id(root)}, [], deque([(root, 0)])
    while queue:
        node, depth = queue.popleft()
        order.append((node, depth))
        for child, _ in node.next_functions:
            # `order` keeps nodes alive: ids stay unique
            if child is not None and id(child) not in seen:
                seen.add(id(child))
                queue.append((child, depth + 1))
    return order


def _leaf_storages(nodes):
    """Storage keys of the leaves held by the AccumulateGrad nodes among `nodes`."""
    leaves = (getattr(n, "variable", None) for n in nodes)
    return {t.untyped_storage().data_ptr() for t in leaves if t is not None}


def saved_tensors(node: Node, leaf_storages: set | None = None) -> list[SavedTensor]:
    """List the tensors one autograd node saved for its backward pass.

    Inputs:
    - node: torch.autograd.graph.Node, e.g. `y.grad_fn`
    - leaf_storages: set of int storage keys of the graph's leaves, or None to find them below
      `node` (walk() passes the set for the whole graph)

    Returns a list of SavedTensor, one per tensor in a `_saved_*` attribute (a tuple or list
    of tensors gives `_saved_x[0]`, `_saved_x[1]`, ...; None entries are skipped).
    Raises RuntimeError if backward() already freed the graph.
    """
    if not isinstance(node, Node):
        raise TypeError("node must be an autograd Node such as y.grad_fn, "
                        f"got {type(node).__name__}")
    if leaf_storages is None:
        leaf_storages = _leaf_storages(n for n, _ in _bfs(node))
    out = []
    for attr in dir(node):
        if not attr.startswith("_saved_"):
            continue
        try:
            value = getattr(node, attr)
        except RuntimeError as e:
            if "freed" not in str(e):
                raise
            raise RuntimeError(f"cannot read {type(node).__name__}.{attr}: the graph was freed by "
                               "backward(); call backward(retain_graph=True) to keep it") from e
        if isinstance(value, torch.Tensor):
            named = [(attr, value)]
        elif isinstance(value, (tuple, list)):
            named = [(f"{attr}[{i}]", t) for i, t in enumerate(value)
                     if isinstance(t, torch.Tensor)]
        else:
            continue  # ints, floats, sizes, None: saved too, but not tensors
        for name, t in named:
            storage = t.untyped_storage()
            out.append(SavedTensor(
                node=type(node).__name__, name=name, dtype=t.dtype, shape=tuple(t.shape),
                nbytes=t.numel() * t.element_size(), storage=storage.data_ptr(),
                storage_nbytes=storage.nbytes(),
                is_leaf_storage=storage.data_ptr() in leaf_storages,
            ))
    return out


def walk(root, params: dict | None = None) -> list[NodeInfo]:
    """Visit every node of the graph behind `root`, breadth-first along next_functions.

    Inputs:
    - root: torch.Tensor with a grad_fn (e.g. a loss), or a torch.autograd.graph.Node
    - params: None or dict of name -> tensor, e.g. dict(model.named_parameters()), to name leaves

    Returns a list of NodeInfo in breadth-first order, root first; a node reached twice
    (x * x reaches x's AccumulateGrad twice) appears once, at its first depth.
    """
    names = _param_names(params)
    order = _bfs(_as_node(root))
    leaf_storages = _leaf_storages(n for n, _ in order)
    infos = []
    for node, depth in order:
        variable = getattr(node, "variable", None)  # only AccumulateGrad has one
        infos.append(NodeInfo(
            name=type(node).__name__, depth=depth, node=node,
            next=[type(c).__name__ for c, _ in node.next_functions if c is not None],
            saved=saved_tensors(node, leaf_storages), variable=variable,
            param_name=None if variable is None else names.get(id(variable)),
        ))
    return infos


@dataclass(repr=False, eq=False)
class GraphReport:
    """What report() found: the nodes, the leaves, and every saved tensor.

    nodes: list of NodeInfo, as walk() returns them
    leaves: list of NodeInfo, the AccumulateGrad nodes among them
    saved: list of SavedTensor, from all nodes, in walk order
    saved_bytes: int, bytes of the distinct storages that saved tensors keep alive
    activation_bytes: int, the same without the leaves' storages: what the graph costs
        beyond the parameters and inputs, freed by backward()
    """

    nodes: list
    leaves: list
    saved: list

    @property
    def saved_bytes(self) -> int:
        return sum({s.storage: s.storage_nbytes for s in self.saved}.values())  # each storage once

    @property
    def activation_bytes(self) -> int:
        return sum({s.storage: s.storage_nbytes for s in self.saved
                    if not s.is_leaf_storage}.values())

    def __str__(self) -> str:
        def fmt(s):
            leaf = " (leaf)" if s.is_leaf_storage else ""
            return f"{s.name} {str(s.dtype).removeprefix('torch.')} {s.shape} {s.nbytes}{leaf}"

        w_name = max([len("node")] + [len(n.name) for n in self.nodes])
        w_param = max([len("param")] + [len(n.param_name or "") for n in self.nodes])
        lines = [f"{'depth':>5}  {'node':<{w_name}}  {'param':<{w_param}}  "
                 "saved (name dtype shape bytes)"]
        for n in self.nodes:
            saved = ", ".join(fmt(s) for s in n.saved)
            row = f"{n.depth:>5}  {n.name:<{w_name}}  {n.param_name or '':<{w_param}}  {saved}"
            lines.append(row.rstrip())
        lines.append(f"total  nodes={len(self.nodes)} saved_tensors={len(self.saved)} "
                     f"storages={len({s.storage for s in self.saved})} "
                     f"saved_bytes={self.saved_bytes} activation_bytes={self.activation_bytes}")
        return "\n".join(lines)

    __repr__ = __str__  # a notebook cell ending in report(y) shows the table too


def report(root, params: dict | None = None) -> GraphReport:
    """Walk the graph behind `root` and total the memory its saved tensors hold.

    Inputs:
    - root: torch.Tensor with a grad_fn, or a torch.autograd.graph.Node
    - params: None or dict of name -> tensor, e.g. dict(model.named_parameters())

    Returns a GraphReport; print() it for a table.
    """
    nodes = walk(root, params)
    leaves = [n for n in nodes if n.variable is not None]
    return GraphReport(nodes=nodes, leaves=leaves, saved=[s for n in nodes for s in n.saved])


def draw(root: torch.Tensor, params: dict | None = None,
         show_saved: bool = False) -> graphviz.Digraph:
    """Draw the graph behind `root` with torchviz.make_dot, in the course colours (COLOURS).

    Inputs:
    - root: torch.Tensor with a grad_fn, the output to draw from
    - params: None or dict of name -> tensor, to label the leaves
    - show_saved: bool, also draw the tensors each node saved

    Returns a graphviz.Digraph; a notebook displays it, dot.render(...) writes a file.
    """
    if not isinstance(root, torch.Tensor):
        raise TypeError("root must be a torch.Tensor with a grad_fn (draw starts from the "
                        f"output), got {type(root).__name__}")
    _as_node(root)  # the same checks, and errors, as walk()
    _param_names(params)
    with warnings.catch_warnings():  # torchviz calls distutils' LooseVersion, deprecated
        warnings.simplefilter("ignore", DeprecationWarning)
        from torchviz import make_dot

        dot = make_dot(root, params=params, show_saved=show_saved)
    # torchviz names its colours at the end of each node line: `... fillcolor=orange]`
    torchviz_colours = {"lightblue": COLOURS["param"], "darkolivegreen1": COLOURS["output"],
                        "darkolivegreen3": COLOURS["output"], "orange": COLOURS["saved"]}
    recolour = lambda m: f'fillcolor="{torchviz_colours.get(m[1], m[1])}"]'
    dot.body = [re.sub(r"fillcolor=(\w+)\]$", recolour, line) for line in dot.body]
    dot.node_attr["fillcolor"] = COLOURS["op"]  # op nodes name no colour: they take the default
    return dot


def next_node_number() -> int:
    """The sequence number autograd gives the next node it makes in this thread. It only grows,
    whatever hooks, modes or grad mode code sets, so the difference of two readings counts the nodes
    made in between: how the lessons' checks tell that an answer built a graph it should not
    have."""
    with torch.enable_grad():
        return (torch.zeros(1, requires_grad=True) * 1).grad_fn._sequence_nr()
