"""Draw a micrograd-style scalar graph: every value with its data and its gradient.

Lesson 02 builds a scalar autograd engine, a `Value` class. This module draws the graph such an
engine records, whatever the class is called, by duck typing: a node is any object with

    .data    a Python number, the value computed by the forward pass
    .grad    a Python number, d(root)/d(this value) once backward() has run
    ._prev   an iterable of the nodes it was computed from (its children); empty for a leaf
    ._op     a str naming the op that made it ("+", "*", "tanh", ...); "" for a leaf
    .label   optional str, a name to show

    nodes, edges = trace(root)      # every node once; one (child, parent) pair per use
    draw_values(root)               # a graphviz.Digraph: a notebook shows it

Each value is a box "label | data 0.7311 | grad 0.1966", the data in green and the gradient in
red as on lesson 01's circuits; each op is a small circle between a value and its inputs. Leaves
are filled in the colour of parameters, the root in the colour of outputs
(course_utils.graph.COLOURS).
"""

import numbers
from collections import deque
from html import escape

import graphviz

from course_utils.circuits import GREEN, RED
from course_utils.graph import COLOURS

RANKDIRS = ("LR", "RL", "TB", "BT")


def _require(node, attrs: tuple[str, ...], where: str) -> None:
    """Raise TypeError naming the attributes in `attrs` that `node` lacks."""
    missing = [a for a in attrs if not hasattr(node, a)]
    if missing:
        raise TypeError(f"{where} must be a micrograd-style value with "
                        f"{', '.join('.' + a for a in attrs)}; got a {type(node).__name__} without "
                        f"{', '.join('.' + a for a in missing)}")


def _children(node, where: str) -> list:
    """node._prev as a list, or TypeError if it is not iterable."""
    try:
        return list(node._prev)
    except TypeError:
        raise TypeError(f"{where}._prev must be an iterable of values (tuple, list or set), "
                        f"got {type(node._prev).__name__}") from None


def trace(root) -> tuple[list, list]:
    """Every node of the graph behind `root`, breadth-first from the root, and every edge.

    Inputs:
    - root: the output value; it and every node reached through ._prev must have ._prev

    Returns (nodes, edges):
    - nodes: list of the N distinct nodes (compared by identity), root first, then breadth-first
      along ._prev. Not a topological order: a node reached early by a short path may also lie
      at the end of a longer one.
    - edges: list of (child, parent) pairs, one per entry of each parent's ._prev, so b = a + a
      gives the pair (a, b) twice.
    """
    _require(root, ("_prev",), "root")
    nodes, edges, seen, queue = [root], [], {id(root)}, deque([root])
    while queue:
        parent = queue.popleft()
        for child in _children(parent, "a node"):
            _require(child, ("_prev",), f"a child of {type(parent).__name__} node {_name(parent)}")
            edges.append((child, parent))
            if id(child) not in seen:
                seen.add(id(child))
                nodes.append(child)
                queue.append(child)
    return nodes, edges


def _name(node) -> str:
    label = getattr(node, "label", "")
    return repr(label) if label else f"with data {getattr(node, 'data', '?')}"


def _number(node, attr: str) -> float:
    value = getattr(node, attr)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"a node's .{attr} must be a Python number, got {type(value).__name__} "
                        f"(in node {_name(node) if attr != 'data' else type(node).__name__})")
    return float(value)


def _value_label(node, fill: str, stacked: bool) -> str:
    """An HTML-like graphviz table: label | data (green) | grad (red), in a row or stacked in a
    column."""
    label = getattr(node, "label", "") or ""
    if not isinstance(label, str):
        raise TypeError(f"a node's .label must be a str, got {type(label).__name__}")
    data, grad = _number(node, "data"), _number(node, "grad")
    cells = [f"<td><b>{escape(label)}</b></td>"] if label else []
    cells += [f'<td><font color="{GREEN}">data {data:.4f}</font></td>',
              f'<td><font color="{RED}">grad {grad:.4f}</font></td>']
    rows = "".join(f"<tr>{c}</tr>" for c in cells) if stacked else f"<tr>{''.join(cells)}</tr>"
    return (f'<<table border="0" cellborder="1" cellspacing="0" cellpadding="3" bgcolor="{fill}">'
            f"{rows}</table>>")


def draw_values(root, rankdir: str = "LR") -> graphviz.Digraph:
    """Draw the graph behind `root` with each value's data and gradient.

    Inputs:
    - root: the output value (see the module docstring for what a node needs)
    - rankdir: "LR" (inputs on the left, the default), "RL", "TB" or "BT"

    Returns a graphviz.Digraph: a box per value (ids v0, v1, ... in trace order, root v0; its
    fields stacked in a column for "LR" and "RL", in a row for "TB" and "BT", as graphviz records),
    a circle per op (id vK_op, for every value with a non-empty ._op), arrows from each input to the
    op and from the op to its output. A notebook displays it; dot.render(...) writes a file.
    Raises TypeError for a node without .data, .grad, ._prev or ._op, or whose data or grad is
    not a number; ValueError for an unknown rankdir.
    """
    if rankdir not in RANKDIRS:
        raise ValueError(f"rankdir must be one of {RANKDIRS}, got {rankdir!r}")
    attrs = ("data", "grad", "_prev", "_op")
    _require(root, attrs, "root")
    nodes, edges = trace(root)
    for node in nodes:
        _require(node, attrs, "every node")
    ids = {id(node): f"v{i}" for i, node in enumerate(nodes)}

    dot = graphviz.Digraph(graph_attr={"rankdir": rankdir},
                           node_attr={"fontname": "monospace", "fontsize": "11"})
    for node in nodes:
        fill = (COLOURS["output"] if node is root
                else COLOURS["param"] if not _children(node, "a node") else "white")
        dot.node(ids[id(node)], _value_label(node, fill, stacked=rankdir in ("LR", "RL")),
                 shape="none", margin="0")
        op = node._op
        if not isinstance(op, str):
            raise TypeError(f"a node's ._op must be a str, got {type(op).__name__}")
        if op:
            dot.node(ids[id(node)] + "_op", op, shape="circle", style="filled",
                     fillcolor=COLOURS["op"], width="0.3", fixedsize="false", margin="0.02")
            dot.edge(ids[id(node)] + "_op", ids[id(node)])
    for child, parent in edges:
        head = ids[id(parent)] + ("_op" if parent._op else "")
        dot.edge(ids[id(child)], head)
    return dot
