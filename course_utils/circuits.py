"""Circuit diagrams for lessons 01-02: scalar gates, forward values in green, gradients in red.

A `Circuit` is a few named inputs and a list of gates, each gate making one named value from
others. It evaluates itself with torch autograd in float64, so every number on the picture is
the number torch computes, and draws itself as SVG (no Graphviz needed): inputs on the left,
one column per depth, each wire labelled with its value above (green) and its gradient below
(red), like the classic figure of CS231n's notes.

    c = Circuit({"x": -2.0, "y": 5.0, "z": -4.0},
                [("q", "add", ("x", "y")), ("f", "mul", ("q", "z"))])
    c.values["f"], c.grads["x"]      # -12.0, -4.0
    c                                # shows the SVG in a notebook
    interactive(c)                   # sliders for x, y, z; the picture follows them live
"""

from collections.abc import Mapping, Sequence
from html import escape

import torch

# op name -> (symbol drawn in the gate, number of inputs, forward function on tensors)
OPS = {
    "add": ("+", 2, lambda a, b: a + b),
    "mul": ("*", 2, lambda a, b: a * b),
    "max": ("max", 2, torch.maximum),
    "neg": ("*-1", 1, lambda a: -a),
    "exp": ("exp", 1, torch.exp),
    "add1": ("+1", 1, lambda a: a + 1),
    "inv": ("1/x", 1, lambda a: 1 / a),
}
GREEN, RED = "#1a8f1a", "#d62728"
_DX, _DY, _PAD = 170, 90, 40  # column width, row height, margin (pixels)


class Circuit:
    """Scalar inputs and gates, evaluated forward and backward with torch (float64).

    Inputs:
    - inputs: {name: number}, in the order they are drawn top to bottom
    - gates: [(output name, op, (input names...))], in an order where every input exists already;
      op is one of OPS. The last gate's output is the circuit's output.
    Attributes after construction: values and grads, both {name: float} for every wire.
    """

    def __init__(self, inputs: Mapping[str, float],
                 gates: Sequence[tuple[str, str, tuple[str, ...]]]):
        if not isinstance(inputs, Mapping) or not inputs:
            raise TypeError("inputs must be a non-empty dict of name -> number, "
                            f"got {type(inputs).__name__}")
        for name, v in inputs.items():
            if type(v) not in (int, float):
                raise TypeError(f"input {name!r} must be an int or float, got {type(v).__name__}")
        if not gates:
            raise ValueError("a circuit needs at least one gate")
        known = list(inputs)
        for gate in gates:
            if not (isinstance(gate, tuple) and len(gate) == 3):
                raise TypeError("each gate must be a tuple (output, op, (inputs...)), "
                                f"got {gate!r}")
            out, op, args = gate
            if op not in OPS:
                raise ValueError(f"unknown op {op!r} in gate {out!r}; "
                                 f"expected one of {sorted(OPS)}")
            if len(args) != OPS[op][1]:
                raise ValueError(f"gate {out!r}: {op} takes {OPS[op][1]} input(s), got {len(args)}")
            missing = [a for a in args if a not in known]
            if missing:
                raise ValueError(f"gate {out!r} reads {missing}, which are not defined before it")
            if out in known:
                raise ValueError(f"the name {out!r} is defined twice")
            known.append(out)
        self.inputs = dict(inputs)
        self.gates = [(out, op, tuple(args)) for out, op, args in gates]
        self.output = self.gates[-1][0]
        self.values, self.grads = self._evaluate()

    def _evaluate(self) -> tuple[dict[str, float], dict[str, float]]:
        wires = {n: torch.tensor(float(v), dtype=torch.float64, requires_grad=True)
                 for n, v in self.inputs.items()}
        for out, op, args in self.gates:
            wires[out] = OPS[op][2](*(wires[a] for a in args))
            wires[out].retain_grad()  # keep gradients of intermediate values for the picture
        wires[self.output].backward()
        values = {n: t.item() for n, t in wires.items()}
        grads = {n: (t.grad.item() if t.grad is not None else 0.0) for n, t in wires.items()}
        return values, grads

    def with_inputs(self, **inputs: float) -> "Circuit":
        """The same gates with some inputs changed, e.g. c.with_inputs(x=1.0)."""
        unknown = set(inputs) - set(self.inputs)
        if unknown:
            raise ValueError(f"unknown inputs {sorted(unknown)}; "
                             f"this circuit has {list(self.inputs)}")
        return Circuit({**self.inputs, **inputs}, self.gates)

    def _layout(self) -> dict[str, tuple[float, float]]:
        """(x, y) pixel position of every input label and gate."""
        col = {n: 0 for n in self.inputs}
        row = {n: float(i) for i, n in enumerate(self.inputs)}
        for out, _, args in self.gates:
            col[out] = 1 + max(col[a] for a in args)
            row[out] = sum(row[a] for a in args) / len(args)
            while any(col[o] == col[out] and row[o] == row[out] for o in row if o != out):
                row[out] += 0.5  # two gates would overlap: move the later one down
        return {n: (_PAD + 20 + col[n] * _DX, _PAD + 20 + row[n] * _DY) for n in col}

    def svg(self) -> str:
        """The diagram as an SVG string."""
        pos = self._layout()
        width = max(x for x, _ in pos.values()) + _DX + _PAD
        height = max(y for _, y in pos.values()) + _PAD + 30
        parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" '
                 f'height="{height:.0f}" font-family="monospace" font-size="14">']

        def wire(name, x0, y0, x1, y1):
            parts.append(f'<line x1="{x0:.0f}" y1="{y0:.0f}" x2="{x1:.0f}" y2="{y1:.0f}" '
                         'stroke="#444" stroke-width="1.5"/>')
            # nearer the source: wires meet at gates
            mx, my = x0 + 0.45 * (x1 - x0), y0 + 0.45 * (y1 - y0)
            parts.append(f'<text x="{mx:.0f}" y="{my - 6:.0f}" fill="{GREEN}" text-anchor="middle" '
                         f'class="value" data-wire="{escape(name)}">{self.values[name]:.2f}</text>')
            parts.append(f'<text x="{mx:.0f}" y="{my + 17:.0f}" fill="{RED}" text-anchor="middle" '
                         f'class="grad" data-wire="{escape(name)}">{self.grads[name]:.2f}</text>')

        for name in self.inputs:
            x, y = pos[name]
            parts.append(f'<text x="{x - 8:.0f}" y="{y + 5:.0f}" text-anchor="end" '
                         f'font-weight="bold">{escape(name)}</text>')
        for out, op, args in self.gates:
            gx, gy = pos[out]
            for a in args:
                ax, ay = pos[a]
                # gates have radius 22
                wire(a, ax + (22 if a not in self.inputs else 0), ay, gx - 22, gy)
            parts.append(f'<circle cx="{gx:.0f}" cy="{gy:.0f}" r="22" fill="#f4f4f4" '
                         'stroke="#444"/>')
            parts.append(f'<text x="{gx:.0f}" y="{gy + 5:.0f}" '
                         f'text-anchor="middle">{escape(OPS[op][0])}</text>')
        ox, oy = pos[self.output]
        wire(self.output, ox + 22, oy, ox + _DX - 40, oy)
        parts.append(f'<text x="{ox + _DX - 32:.0f}" y="{oy + 5:.0f}" '
                     f'font-weight="bold">{escape(self.output)}</text>')
        parts.append(f'<text x="{_PAD:.0f}" y="{height - 10:.0f}" font-size="12" '
                     f'fill="{GREEN}">green: forward value</text>')
        parts.append(f'<text x="{_PAD + 190:.0f}" y="{height - 10:.0f}" font-size="12" '
                     f'fill="{RED}">red: gradient d{escape(self.output)}/d(wire)</text>')
        parts.append("</svg>")
        return "\n".join(parts)

    def _repr_svg_(self) -> str:
        return self.svg()

    def __repr__(self) -> str:
        gates = ", ".join(f"{o}={op}({', '.join(a)})" for o, op, a in self.gates)
        return f"Circuit({self.inputs}, {gates})"


def circuit_f(x: float = -2.0, y: float = 5.0, z: float = -4.0) -> Circuit:
    """Lesson 01's circuit f(x, y, z) = (x + y) z, staged as q = x + y, f = q z."""
    return Circuit({"x": x, "y": y, "z": z}, [("q", "add", ("x", "y")), ("f", "mul", ("q", "z"))])


SLIDER_WIDTH = "320px"  # description, a track of about 200 px, readout


def interactive(circuit: Circuit, low: float = -10.0, high: float = 10.0, step: float = 0.5):
    """Sliders for every input of `circuit`; the diagram redraws as they move.

    Returns an ipywidgets.VBox: FloatSliders (one per input, named like the input) above an HTML
    widget holding the SVG. Each slider's change re-evaluates the circuit with torch. Every slider
    keeps SLIDER_WIDTH and the row wraps, so a track stays wide enough to drag on a small screen
    (five sliders in one row left each 14 px at a 1400-px window).
    """
    import ipywidgets as widgets  # imported here: only notebooks with a front end need it

    if not isinstance(circuit, Circuit):
        raise TypeError(f"circuit must be a Circuit, got {type(circuit).__name__}")
    sliders = {n: widgets.FloatSlider(value=v, min=min(low, v), max=max(high, v), step=step,
                                      description=n, continuous_update=True, readout_format=".1f",
                                      layout=widgets.Layout(width=SLIDER_WIDTH,
                                                            min_width=SLIDER_WIDTH))
               for n, v in circuit.inputs.items()}
    picture = widgets.HTML(circuit.svg())

    def redraw(_change=None):
        picture.value = circuit.with_inputs(**{n: s.value for n, s in sliders.items()}).svg()

    for s in sliders.values():
        s.observe(redraw, names="value")
    row = widgets.HBox(list(sliders.values()), layout=widgets.Layout(flex_flow="row wrap"))
    box = widgets.VBox([row, picture])
    box.sliders, box.picture = sliders, picture  # handles for tests and for curious learners
    return box
