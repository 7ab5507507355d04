"""A memory planner for course_utils.models.Transformer: one training step's peak predicted from the
shapes, beside the peak measured, for lesson 10's interactive figure.

    plan = Plan(layers=4, d_model=64, heads=4, seq=128, batch=64, micro_batches=4, checkpoint=True)
    predict(plan, block_bytes)
        # {"parameters": bytes, "momentum": ..., "gradients": ..., "activations": ...,
        #  "temporaries": ...}
    measure(plan, block_bytes)
        # the same parts measured, or None when the step is too big to run at once
    planner(plan, block_bytes)   # the widget: sliders and switches, predicted beside measured

What one float32 Block saves is the caller's `block_bytes(batch, seq, d_model, heads, fused)`: in
lesson 10 the learner's exercise 1 (its formula is not written here). Under bfloat16 autocast a
block is measured instead: SavedTensors on one block with one and with two sequences, scaled to the
micro-batch (the bytes are linear in the batch; the mask and autocast's copies of the weights are
the constant part). The model is SGD with momentum as in lesson 10: the state is the parameters and
the momentum; a step adds the gradients, the saved activations and, at its peak, one block's
attention scores as temporaries. ZeRO over N processes divides the momentum (stage 1), the gradients
(stage 2) and the parameters (stage 3) by N, and each process takes batch / N; what is sharded must
still be whole where it is used, as FSDP does it with each block its own unit: stage 3 gathers one
block's parameters in full while the block runs, and stages 2 and 3 hold one block's full gradients
until they are reduce-scattered; both are counted as temporaries. Two simplifications: FSDP's root
unit (the embeddings, the last LayerNorm and the head, about a third of a block at the lesson's
sizes) is counted as sharded, and the forward's scores and the backward's whole gradients are added
as if alive at the same moment.
"""

import functools
from dataclasses import dataclass, replace

import torch

MIB = 2 ** 20
# measured live when the predicted step is smaller than this (well under a second)
MEASURE_BELOW = 48 * MIB
PARTS = ("parameters", "momentum", "gradients", "activations", "temporaries")
COLOURS = ("#4c72b0", "#8172b2", "#55a868", "#dd8452", "#c44e52")


@dataclass(frozen=True)
class Plan:
    """A Transformer(vocab, d_model, heads, layers, seq), a batch, and the tools switched on."""
    layers: int = 4
    d_model: int = 64
    heads: int = 4
    seq: int = 128
    batch: int = 64
    vocab: int = 64
    # gradient accumulation: the batch in this many parts, one after another
    micro_batches: int = 1
    checkpoint: bool = False      # each block through torch.utils.checkpoint
    fused: bool = False           # attention through F.scaled_dot_product_attention
    bf16: bool = False            # torch.autocast to bfloat16
    zero_stage: int = 0           # 0 (plain data parallel) to 3
    processes: int = 1            # data-parallel processes, each with batch / processes

    def __post_init__(self):
        for name in ("layers", "d_model", "heads", "seq", "batch", "vocab", "micro_batches",
                     "processes"):
            if type(getattr(self, name)) is not int or getattr(self, name) < 1:
                raise ValueError(f"{name} must be an int >= 1, got {getattr(self, name)!r}")
        if self.d_model % self.heads:
            raise ValueError(f"d_model ({self.d_model}) must be a multiple of heads ({self.heads})")
        if self.zero_stage not in (0, 1, 2, 3):
            raise ValueError(f"zero_stage must be 0, 1, 2 or 3, got {self.zero_stage!r}")
        if self.batch % (self.processes * self.micro_batches):
            raise ValueError(f"the batch ({self.batch}) must split evenly into processes x "
                             f"micro_batches ({self.processes} x {self.micro_batches})")

    @property
    def micro_batch(self) -> int:
        """Sequences in one forward and backward of one process."""
        return self.batch // (self.processes * self.micro_batches)

    @property
    def block_params(self) -> int:
        """Parameters of one Block: qkv 3d^2 + 3d, projection d^2 + d, MLP 8d^2 + 5d, two LayerNorms
        4d."""
        return 12 * self.d_model ** 2 + 13 * self.d_model

    @property
    def num_params(self) -> int:
        d, v = self.d_model, self.vocab
        return v * d + self.seq * d + self.layers * self.block_params + 2 * d + d * v


@functools.lru_cache(maxsize=512)
def _saved_bf16(batch: int, seq: int, d_model: int, heads: int, fused: bool) -> int:
    """SavedTensors' activation bytes of one Block's forward under bfloat16 autocast on (batch, seq,
    d_model)."""
    from course_utils.memory import SavedTensors
    from course_utils.models import Block

    with torch.random.fork_rng():
        torch.manual_seed(0)
        block = Block(d_model, heads, fused)
        x = torch.randn(batch, seq, d_model, requires_grad=True)
    h = x * 1.0                                   # the block's input, an activation as in the model
    with (torch.autocast("cpu", dtype=torch.bfloat16),
          SavedTensors(exclude=block.parameters()) as saved):
        block(h)
    return saved.activation_bytes


def saved_by_block(plan: Plan, b: int, block_bytes) -> int:
    """Bytes one Block saves for its backward on b sequences (its input counted, its parameters
    not): the caller's block_bytes in float32, measured on one and two sequences and scaled under
    autocast."""
    if not plan.bf16:
        return block_bytes(b, plan.seq, plan.d_model, plan.heads, plan.fused)
    one, two = (_saved_bf16(n, plan.seq, plan.d_model, plan.heads, plan.fused) for n in (1, 2))
    return one + (two - one) * (b - 1)


def predict(plan: Plan, block_bytes) -> dict:
    """Each part of the peak of one process's training step, in bytes (PARTS); block_bytes(batch,
    seq, d_model, heads, fused) gives what one float32 block saves."""
    P, n, b, s, d = plan.num_params, plan.processes, plan.micro_batch, plan.seq, plan.d_model
    shard = lambda stage: -(-4 * P // n) if plan.zero_stage >= stage else 4 * P
    head = (b * s * ((6 if plan.bf16 else 8) * d + 4 * plan.vocab + 24)
            + (2 * d * plan.vocab if plan.bf16 else 0))
    # the blocks' inputs stay, one block is run again at a time in the backward
    if plan.checkpoint:
        saved = plan.layers * 4 * b * s * d + saved_by_block(plan, b, block_bytes) + head
    else:
        saved = plan.layers * saved_by_block(plan, b, block_bytes) + head
    scores = 0 if plan.fused else (2 if plan.bf16 else 4) * b * plan.heads * s * s
    # one block's parameters gathered (stage 3) and gradients not yet reduce-scattered (stages 2
    # and 3), float32
    whole = (4 * plan.block_params * ((plan.zero_stage >= 2) + (plan.zero_stage == 3)) if n > 1
             else 0)
    return {"parameters": shard(3), "momentum": shard(1), "gradients": shard(2),
            "activations": saved, "temporaries": scores + whole}


def training_step(plan: Plan):
    """One process's training step of the plan, as a function of no arguments, on a fresh model (SGD
    with momentum, the data of course_utils.data.sequences): each call is one step."""
    from torch.utils.checkpoint import checkpoint

    from course_utils.data import sequences
    from course_utils.models import Transformer

    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = Transformer(plan.vocab, plan.d_model, plan.heads, plan.layers, plan.seq,
                            fused=plan.fused)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    idx, targets = sequences(n=plan.batch // plan.processes, seq_len=plan.seq,
                             vocab_size=plan.vocab, seed=0)

    def forward(x):
        z = model.tok(x) + model.pos(torch.arange(x.shape[1]))            # (b, s, d)
        for block in model.blocks:
            z = checkpoint(block, z, use_reentrant=False) if plan.checkpoint else block(z)
        return model.head(model.ln_f(z))                                    # (b, s, vocab)

    def step():
        optimizer.zero_grad()
        for x, y in zip(idx.chunk(plan.micro_batches), targets.chunk(plan.micro_batches)):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=plan.bf16):
                loss = model.loss(forward(x), y) * (len(x) / len(idx))
            loss.backward()
        optimizer.step()
    return step


def measure(plan: Plan, block_bytes, below: int = MEASURE_BELOW) -> dict | None:
    """The parts of one process's step measured on the CPU: the parameters and the momentum counted,
    the rest the peak of the first step (its gradients, activations and temporaries; the momentum is
    made after the peak), as lesson 10 measures it. None when ZeRO runs over several processes, or
    when the predicted step adds more than `below` bytes (too slow to run at once)."""
    from course_utils.stepcost import measured_step

    parts = predict(plan, block_bytes)
    if (plan.processes > 1
            or parts["gradients"] + parts["activations"] + parts["temporaries"] > below):
        return None
    peak = measured_step(training_step(plan))["peak"]
    return {"parameters": parts["parameters"], "momentum": parts["momentum"], "step": peak}


def svg(predicted: dict, measured: dict | None, width: int = 640) -> str:
    """Two stacked bars, predicted and measured, with each part's MiB written on it."""
    total_p = sum(predicted.values())
    total_m = sum(measured.values()) if measured else 0
    scale = (width - 180) / max(total_p, total_m, 1)
    rows = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="120" '
            'font-family="sans-serif" font-size="11">' % width]

    def bar(y, label, parts, colours):
        x = 90
        rows.append(f'<text x="4" y="{y + 17}">{label}</text>')
        for (name, nbytes), colour in zip(parts, colours):
            w = nbytes * scale
            rows.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="26" fill="{colour}">'
                        f'<title>{name}: {nbytes / MIB:.1f} MiB</title></rect>')
            x += w
        rows.append(f'<text x="{x + 6:.1f}" y="{y + 17}">'
                    f'{sum(n for _, n in parts) / MIB:.1f}</text>'
                    f'<text x="{x + 46:.1f}" y="{y + 17}">MiB</text>')

    bar(10, "predicted", list(predicted.items()), COLOURS)
    if measured:
        bar(46, "measured", list(measured.items()), COLOURS[:2] + ("#937860",))
    else:
        rows.append('<text x="4" y="63">measured: not run (several processes, or more than '
                    f'{MEASURE_BELOW // MIB} MiB for one step)</text>')
    x = 90
    for name, colour in zip(PARTS, COLOURS):
        rows.append(f'<rect x="{x}" y="92" width="10" height="10" fill="{colour}"/>'
                    f'<text x="{x + 14}" y="101">{name} {predicted[name] / MIB:.1f}</text>')
        x += 104
    rows.append("</svg>")
    return "".join(rows)


def planner(plan: Plan, block_bytes):
    """The interactive planner: a widget with a slider or a switch for each field of Plan and the
    figure, redrawn (predicted with block_bytes, and measured when small enough) whenever one of
    them changes."""
    import html

    import ipywidgets as w

    # block_bytes not written yet, or wrong for this plan: raised here, not in a redraw
    predict(plan, block_bytes)
    look = {"layout": w.Layout(width="420px"), "style": {"description_width": "110px"}}
    slider = lambda name, options, value: w.SelectionSlider(options=options, value=value,
                                                            description=name,
                                                            continuous_update=False, **look)
    menu = lambda name, options, value: w.Dropdown(options=options, value=value, description=name,
                                                   **look)
    controls = {   # sliders where there are enough steps to drag between, menus for a few choices
        "layers": slider("layers", list(range(1, 9)), plan.layers),
        "d_model": slider("d_model", list(range(32, 257, 32)), plan.d_model),
        "seq": slider("sequence", [16, 32, 64, 128, 256, 512, 1024], plan.seq),
        "batch": slider("batch", [1, 2, 4, 8, 16, 32, 64, 128, 256], plan.batch),
        "heads": menu("heads", [1, 2, 4, 8], plan.heads),
        "micro_batches": menu("micro-batches", [1, 2, 4, 8, 16], plan.micro_batches),
        "processes": menu("processes", [1, 2, 4, 8], plan.processes),
        "zero_stage": menu("ZeRO stage", [0, 1, 2, 3], plan.zero_stage),
        "checkpoint": w.Checkbox(value=plan.checkpoint, description="checkpoint each block"),
        "fused": w.Checkbox(value=plan.fused, description="fused attention"),
        "bf16": w.Checkbox(value=plan.bf16, description="autocast to bfloat16"),
    }
    figure = w.HTML()

    def redraw(_=None):
        values = {name: c.value for name, c in controls.items()}
        try:
            current = replace(plan, **values)
            figure.value = svg(predict(current, block_bytes), measure(current, block_bytes))
        # a plan that does not split, or block_bytes failing: shown, not raised
        except Exception as e:
            figure.value = f"<p>{html.escape(type(e).__name__)}: {html.escape(str(e))}</p>"

    for c in controls.values():
        c.observe(redraw, names="value")
    redraw()
    return w.VBox([*controls.values(), figure])
