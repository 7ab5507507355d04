"""course_utils.models: shapes, forward against torch, MLP == MLPScratch, training, errors."""

import copy
import re
import warnings

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from course_utils.devices import try_gpu
from course_utils.models import MLP, Block, MLPScratch, Transformer, train_step

DEPTHS = [[], [8], [8, 6, 4]]  # softmax regression, one hidden layer, three
MODELS = {  # 6 inputs, 3 classes, one hidden layer of 5
    "scratch": lambda: MLPScratch(6, 3, [5], lr=0.1),
    "mlp": lambda: MLP(3, [5], lr=0.1, num_inputs=6),
    "lazy": lambda: MLP(3, [5], lr=0.1),
}
X_OK = torch.randn(4, 2, 3, generator=torch.Generator().manual_seed(1))  # (n, 2, 3): 6 features
Y_HAT = torch.randn(4, 3, generator=torch.Generator().manual_seed(2))  # (n, q)
LONG4 = torch.zeros(4, dtype=torch.long)


def linears(model):
    """The nn.Linear layers of an MLP, input to output."""
    return [m for m in model.net if isinstance(m, nn.Linear)]


def scratch_with_random_biases(D, q, hiddens):
    """An MLPScratch whose biases are not zero, so that adding them is tested too."""
    model = MLPScratch(D, q, hiddens, lr=0.1, sigma=0.5)
    with torch.no_grad():
        for b in model.biases:
            b.copy_(torch.randn(b.shape))
    return model


def blobs(n_per_class=20, D=4, q=3):
    """A separable dataset: q Gaussian blobs far apart in D dimensions. X: (q*n, D), y: (q*n,)."""
    g = torch.Generator().manual_seed(0)
    y = torch.arange(q).repeat_interleave(n_per_class)  # (q*n,)
    X = 3.0 * torch.eye(q, D)[y] + 0.3 * torch.randn(len(y), D, generator=g)  # (q*n, D)
    return X, y


@pytest.mark.parametrize("hiddens", DEPTHS)
def test_scratch_shapes_and_parameters(hiddens):
    model = MLPScratch(12, 5, hiddens, lr=0.1)
    assert model(torch.randn(7, 2, 3, 2)).shape == (7, 5)
    sizes = [12, *hiddens, 5]
    expected = {f"weights.{i}": (a, b) for i, (a, b) in enumerate(zip(sizes, sizes[1:]))}
    expected |= {f"biases.{i}": (b,) for i, b in enumerate(sizes[1:])}
    assert {n: tuple(p.shape) for n, p in model.named_parameters()} == expected
    assert all(torch.equal(b, torch.zeros_like(b)) for b in model.biases)
    assert (model.num_inputs, model.num_outputs, model.num_hiddens) == (12, 5, tuple(hiddens))
    assert (model.lr, model.sigma) == (0.1, 0.01)


@pytest.mark.parametrize("num_inputs", [None, 12])
@pytest.mark.parametrize("hiddens", DEPTHS)
def test_mlp_shapes_and_layers(hiddens, num_inputs):
    model = MLP(5, hiddens, lr=0.1, num_inputs=num_inputs)
    assert isinstance(model.net[1], nn.LazyLinear) == (num_inputs is None)
    assert model(torch.randn(7, 2, 3, 2)).shape == (7, 5)
    sizes = [12, *hiddens, 5]
    assert [(m.in_features, m.out_features) for m in linears(model)] == list(zip(sizes, sizes[1:]))
    assert sum(isinstance(m, nn.ReLU) for m in model.net) == len(hiddens)
    assert isinstance(model.net[0], nn.Flatten) and isinstance(model.net[-1], nn.Linear)
    assert (model.num_outputs, model.num_hiddens, model.lr) == (5, tuple(hiddens), 0.1)


def test_scratch_weights_have_std_sigma():
    torch.manual_seed(0)
    W = MLPScratch(400, 300, [], lr=0.1, sigma=0.2).weights[0]
    assert abs(W.std().item() - 0.2) < 0.005 and abs(W.mean().item()) < 0.005
    assert torch.count_nonzero(MLPScratch(4, 3, [5], lr=0.1, sigma=0).weights[0]) == 0


@pytest.mark.parametrize("hiddens", DEPTHS)
def test_scratch_forward_matches_hand_computation(hiddens):
    model = scratch_with_random_biases(6, 3, hiddens)
    H = X_OK.reshape(4, 6)
    for i, (W, b) in enumerate(zip(model.weights, model.biases)):
        H = torch.einsum("nd,dh->nh", H, W) + b
        if i < len(hiddens):
            H = torch.where(H > 0, H, torch.zeros_like(H))
    out = model(X_OK)
    torch.testing.assert_close(out, H)
    assert (out < 0).any()  # the output layer has no ReLU


@pytest.mark.parametrize("num_inputs", [None, 6])
@pytest.mark.parametrize("hiddens", DEPTHS)
def test_mlp_equals_scratch_with_copied_weights(hiddens, num_inputs):
    scratch = scratch_with_random_biases(6, 3, hiddens)
    mlp = MLP(3, hiddens, lr=0.1, num_inputs=num_inputs)
    mlp(X_OK)  # a LazyLinear learns its input size on the first batch
    with torch.no_grad():
        for lin, W, b in zip(linears(mlp), scratch.weights, scratch.biases, strict=True):
            lin.weight.copy_(W.T)  # nn.Linear stores W transposed
            lin.bias.copy_(b)
    out_s, out_m = scratch(X_OK), mlp(X_OK)
    torch.testing.assert_close(out_m, out_s)
    y = torch.tensor([0, 2, 1, 1])
    scratch.loss(out_s, y).backward()
    mlp.loss(out_m, y).backward()
    for lin, W, b in zip(linears(mlp), scratch.weights, scratch.biases):
        torch.testing.assert_close(lin.weight.grad, W.grad.T)
        torch.testing.assert_close(lin.bias.grad, b.grad)


def test_loss_is_cross_entropy():
    model = MLPScratch(4, 3, [5], lr=0.1)
    y = torch.tensor([0, 1, 2, 2])
    torch.testing.assert_close(model.loss(Y_HAT, y), F.cross_entropy(Y_HAT, y))
    per_example = model.loss(Y_HAT, y, averaged=False)
    expected = -torch.log_softmax(Y_HAT, dim=1)[torch.arange(4), y]  # (n,)
    torch.testing.assert_close(per_example, expected)
    torch.testing.assert_close(per_example.mean(), model.loss(Y_HAT, y))
    torch.testing.assert_close(model.loss(Y_HAT, y.int()), model.loss(Y_HAT, y))  # int32 works


@pytest.mark.parametrize("kind", ["scratch", "lazy"])
def test_configure_optimizers_and_train_step(kind):
    model = MODELS[kind]()
    X, y = blobs(n_per_class=4, D=6)
    model(X)
    optimizer = model.configure_optimizers()
    params = list(model.parameters())
    assert isinstance(optimizer, torch.optim.SGD) and optimizer.param_groups[0]["lr"] == 0.1
    assert {id(p) for p in optimizer.param_groups[0]["params"]} == {id(p) for p in params}
    for _ in range(2):  # the second step must not add to the first step's gradients
        before = [p.detach().clone() for p in params]
        expected_loss = model.loss(model(X), y)
        grads = torch.autograd.grad(expected_loss, params)
        loss = train_step(model, optimizer, X, y)
        assert loss.shape == () and not loss.requires_grad
        torch.testing.assert_close(loss, expected_loss.detach())
        for p, p0, g in zip(params, before, grads):
            torch.testing.assert_close(p.grad, g)
            torch.testing.assert_close(p.detach(), p0 - 0.1 * g)  # plain SGD: p -= lr * grad


@pytest.mark.parametrize("hiddens", [[], [16]])
@pytest.mark.parametrize("cls", [MLPScratch, MLP])
def test_sgd_lowers_loss_on_separable_data(cls, hiddens):
    torch.manual_seed(0)
    model = MLPScratch(4, 3, hiddens, 0.5, sigma=0.1) if cls is MLPScratch else MLP(3, hiddens, 0.5)
    X, y = blobs()
    model(X)
    optimizer = model.configure_optimizers()
    losses = [train_step(model, optimizer, X, y).item() for _ in range(40)]
    assert losses[-1] < 0.5 * losses[0]
    assert (model(X).argmax(dim=1) == y).float().mean() > 0.95


@pytest.mark.parametrize("kind", MODELS)
def test_float64(kind):
    model = MODELS[kind]().double()
    X = X_OK.double().requires_grad_()
    assert model(X).dtype == torch.float64
    assert all(p.dtype == torch.float64 for p in model.parameters())
    assert torch.autograd.gradcheck(model, (X,))
    with pytest.raises(TypeError, match="dtype torch.float64 like the model's parameters"):
        model(X_OK)


def test_lazy_mlp_emits_no_warning():
    # Older torch warned "Lazy modules are a new feature..." on stderr; 2.13 must not.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = MLP(3, [5], lr=0.1)
        optimizer = model.configure_optimizers()  # before the lazy layer is initialised
        train_step(model, optimizer, *blobs(n_per_class=2))
    assert model.net[1].weight.shape == (5, 4)


# ---- bad input --------------------------------------------------------------------------------

SIZE, LR = "must be a positive int", "lr must be a positive number"


@pytest.mark.parametrize("cls, kwargs, error, message", [
    (MLPScratch, dict(num_inputs=0), ValueError, f"num_inputs {SIZE}, got 0"),
    (MLPScratch, dict(num_inputs=True), TypeError, f"num_inputs {SIZE}, got bool True"),
    (MLPScratch, dict(num_inputs=4.0), TypeError, f"num_inputs {SIZE}, got float 4.0"),
    (MLPScratch, dict(num_outputs=-3), ValueError, f"num_outputs {SIZE}, got -3"),
    (MLPScratch, dict(num_outputs="3"), TypeError, f"num_outputs {SIZE}, got str '3'"),
    (MLPScratch, dict(num_hiddens=256), TypeError,
     "got the int 256; for one hidden layer of 256 units write [256]"),
    (MLPScratch, dict(num_hiddens=(4, 0)), ValueError, f"num_hiddens[1] {SIZE}, got 0"),
    (MLPScratch, dict(num_hiddens=[4, True]), TypeError, f"num_hiddens[1] {SIZE}, got bool True"),
    (MLPScratch, dict(num_hiddens="4"), TypeError, "num_hiddens must be a list or tuple"),
    (MLPScratch, dict(num_hiddens=range(2)), TypeError, "got range range(0, 2)"),
    (MLPScratch, dict(lr=0), ValueError, f"{LR}, got 0"),
    (MLPScratch, dict(lr=float("nan")), ValueError, f"{LR}, got nan"),
    (MLPScratch, dict(lr=True), TypeError, f"{LR}, got bool True"),
    (MLPScratch, dict(lr="0.1"), TypeError, f"{LR}, got str '0.1'"),
    (MLPScratch, dict(sigma=-0.1), ValueError, "sigma must be a non-negative number, got -0.1"),
    (MLP, dict(num_inputs=0), ValueError, f"num_inputs {SIZE}, got 0"),
    (MLP, dict(num_outputs=False), TypeError, f"num_outputs {SIZE}, got bool False"),
    (MLP, dict(num_hiddens=3), TypeError, "write [3]"),
    (MLP, dict(lr=-1), ValueError, f"{LR}, got -1"),
])
def test_constructor_rejects(cls, kwargs, error, message):
    args = dict(num_outputs=3, num_hiddens=[5], lr=0.1)
    args |= dict(num_inputs=4) if cls is MLPScratch else {}
    with pytest.raises(error, match=re.escape(message)):
        cls(**(args | kwargs))


@pytest.mark.parametrize("kind", MODELS)
@pytest.mark.parametrize("X, error, message", [
    (X_OK.numpy(), TypeError, "X must be a torch.Tensor, got numpy.ndarray; "
                              "convert it with torch.as_tensor(X, dtype=torch.float32)"),
    (X_OK.tolist(), TypeError, "X must be a torch.Tensor, got list; "
                               "convert it with torch.tensor(X, dtype=torch.float32)"),
    (X_OK.double(), TypeError, "torch.float32 like the model's parameters, got torch.float64"),
    (X_OK.to(torch.uint8), TypeError, "got torch.uint8; convert it with X.to(torch.float32)"),
    (torch.randn(6), ValueError, "X must have shape (n, ...) with the batch dimension first, "
                                 "got shape (6,)"),
])
def test_forward_rejects(kind, X, error, message):
    with pytest.raises(error, match=re.escape(message)):
        MODELS[kind]()(X)


@pytest.mark.parametrize("kind", MODELS)
def test_forward_rejects_wrong_number_of_features(kind):
    model = MODELS[kind]()
    model(X_OK)  # the lazy MLP fixes 6 features here
    message = ("X must have 6 features per example (num_inputs, the product of X.shape[1:]), "
               "got shape (4, 5) with 5")
    with pytest.raises(ValueError, match=re.escape(message)):
        model(torch.randn(4, 5))


@pytest.mark.parametrize("kind", MODELS)
def test_forward_rejects_wrong_device(kind):
    model = MODELS[kind]().to("meta")  # a second device that every machine has
    message = "X is on device cpu but the model's parameters are on meta; move it with X.to('meta')"
    with pytest.raises(ValueError, match=re.escape(message)):
        model(X_OK)


@pytest.mark.parametrize("y_hat, y, kwargs, error, message", [
    (Y_HAT, [0, 1, 2, 0], {}, TypeError, "y must be a torch.Tensor, got list"),
    (Y_HAT.numpy(), LONG4, {}, TypeError, "y_hat must be a torch.Tensor, got numpy.ndarray"),
    (Y_HAT, torch.zeros(4), {}, TypeError, "y must hold integer class labels (e.g. torch.int64), "
                                           "got torch.float32; convert it with y.long()"),
    (Y_HAT, LONG4.bool(), {}, TypeError, "got torch.bool"),
    (Y_HAT, LONG4[:, None], {}, ValueError,
     "y must have shape (n,) = (4,) to match y_hat of shape (4, 3), got (4, 1)"),
    (Y_HAT, torch.zeros(5, dtype=torch.long), {}, ValueError, "got (5,)"),
    (Y_HAT.flatten(), LONG4, {}, ValueError,
     "y_hat must be floating logits of shape (n, q), got torch.float32 of shape (12,)"),
    (Y_HAT, torch.tensor([0, 1, 3, 2]), {}, ValueError,
     "y must hold labels in [0, q) = [0, 3), got values from 0 to 3"),
    (Y_HAT, torch.tensor([0, -1, 2, 2]), {}, ValueError, "got values from -1 to 2"),
    (Y_HAT, LONG4, dict(averaged="yes"), TypeError, "averaged must be True or False, got 'yes'"),
    (Y_HAT, LONG4.to("meta"), {}, ValueError, "y is on device meta but y_hat is on cpu"),
])
def test_loss_rejects(y_hat, y, kwargs, error, message):
    with pytest.raises(error, match=re.escape(message)):
        MLPScratch(4, 3, [5], lr=0.1).loss(y_hat, y, **kwargs)


@pytest.mark.cuda
@pytest.mark.parametrize("kind", MODELS)
def test_cpu_and_cuda_agree(kind):
    torch.manual_seed(0)
    device = try_gpu()
    model = scratch_with_random_biases(6, 3, [8, 5]) if kind == "scratch" else MODELS[kind]()
    X, y = torch.randn(16, 2, 3), torch.randint(0, 3, (16,))
    model(X)  # initialise a lazy layer on the CPU, so both copies start equal
    on_gpu = copy.deepcopy(model).to(device)
    assert all(p.device == device for p in on_gpu.parameters())
    message = f"X is on device cpu but the model's parameters are on {device}"
    with pytest.raises(ValueError, match=message):
        on_gpu(X)
    out_cpu, out_gpu = model(X), on_gpu(X.to(device))
    assert out_gpu.device == device
    torch.testing.assert_close(out_gpu.cpu(), out_cpu, rtol=1e-4, atol=1e-5)
    model.loss(out_cpu, y).backward()
    on_gpu.loss(out_gpu, y.to(device)).backward()
    for (name, p), q in zip(model.named_parameters(), on_gpu.parameters(), strict=True):
        torch.testing.assert_close(q.grad.cpu(), p.grad, rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.cuda
def test_lazy_mlp_moved_to_cuda_before_first_batch():
    device = try_gpu()
    model = MLP(3, [5], lr=0.1).to(device)
    X, y = (t.to(device) for t in blobs(n_per_class=2))
    loss = train_step(model, model.configure_optimizers(), X, y)
    assert loss.device == device and model.net[1].weight.device == device


# The transformer: torch's own pre-LayerNorm encoder layer with a causal mask is the oracle for a
# Block.

def _torch_layer(block):
    """nn.TransformerEncoderLayer (norm_first, GELU, no dropout) holding `block`'s weights,
    float64."""
    d = block.ln1.normalized_shape[0]
    ref = nn.TransformerEncoderLayer(d, block.attn.num_heads, 4 * d, dropout=0.0, activation="gelu",
                                     batch_first=True, norm_first=True).double()
    pairs = [(ref.self_attn.in_proj_weight, block.attn.qkv.weight),
             (ref.self_attn.in_proj_bias, block.attn.qkv.bias),
             (ref.self_attn.out_proj.weight, block.attn.proj.weight),
             (ref.self_attn.out_proj.bias, block.attn.proj.bias),
             (ref.linear1.weight, block.mlp[0].weight), (ref.linear1.bias, block.mlp[0].bias),
             (ref.linear2.weight, block.mlp[2].weight), (ref.linear2.bias, block.mlp[2].bias),
             (ref.norm1.weight, block.ln1.weight), (ref.norm1.bias, block.ln1.bias),
             (ref.norm2.weight, block.ln2.weight), (ref.norm2.bias, block.ln2.bias)]
    with torch.no_grad():
        for theirs, ours in pairs:
            theirs.copy_(ours)
    return ref


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("d, h, s", [(16, 4, 7), (8, 1, 1), (12, 3, 5)])
def test_block_is_torchs_causal_pre_layernorm_layer(fused, d, h, s):
    torch.manual_seed(0)
    block = Block(d, h, fused).double()
    with torch.no_grad():
        for p in block.parameters():
            # not the initial values: every weight and bias matters
            p.copy_(0.3 * torch.randn_like(p))
    x = torch.randn(3, s, d, dtype=torch.float64, requires_grad=True)
    mask = nn.Transformer.generate_square_subsequent_mask(s, dtype=torch.float64)
    ref = _torch_layer(block)
    torch.testing.assert_close(block(x), ref(x, src_mask=mask, is_causal=True),
                               rtol=1e-12, atol=1e-12)
    g_ours, = torch.autograd.grad(block(x).sum(), x)
    g_ref, = torch.autograd.grad(ref(x, src_mask=mask, is_causal=True).sum(), x)
    torch.testing.assert_close(g_ours, g_ref, rtol=1e-11, atol=1e-11)


def test_transformer_shapes_causality_and_loss():
    torch.manual_seed(0)
    model = Transformer(vocab_size=11, d_model=16, num_heads=2, num_layers=2, max_len=9).double()
    idx = torch.randint(0, 11, (4, 9))
    logits = model(idx)
    assert logits.shape == (4, 9, 11) and logits.dtype == torch.float64
    changed = idx.clone()
    changed[:, 5] = (changed[:, 5] + 1) % 11                                # a token at position 5
    after = model(changed)
    # earlier positions cannot see it
    torch.testing.assert_close(after[:, :5], logits[:, :5], rtol=0, atol=0)
    assert not torch.allclose(after[:, 5:], logits[:, 5:])
    targets = torch.randint(0, 11, (4, 9))
    want = -torch.log_softmax(logits, dim=-1).gather(-1, targets[..., None]).mean()
    torch.testing.assert_close(model.loss(logits, targets), want)
    # fewer positions than max_len
    shorter = model(idx[:, :3])
    torch.testing.assert_close(shorter, logits[:, :3])
    fused = Transformer(11, 16, 2, 2, 9, fused=True).double()
    fused.load_state_dict(model.state_dict())
    torch.testing.assert_close(fused(idx), logits, rtol=1e-12, atol=1e-12)


def test_transformer_initialisation_is_gpt2s():
    model = Transformer(vocab_size=50, d_model=64, num_heads=4, num_layers=3, max_len=32)
    linears_ = [m for m in model.modules() if isinstance(m, nn.Linear)]
    assert all(float(m.weight.detach().std()) == pytest.approx(0.02, rel=0.15) for m in linears_)
    assert all(m.bias is None or not m.bias.any() for m in linears_)
    assert float(model.tok.weight.detach().std()) == pytest.approx(0.02, rel=0.1)
    assert (sum(p.numel() for p in model.parameters())
            == 50 * 64 + 32 * 64 + 3 * (12 * 64 * 64 + 13 * 64) + 2 * 64 + 64 * 50)


def test_transformer_trains_on_sequences():
    from course_utils.data import sequences
    torch.manual_seed(0)
    idx, targets = sequences(n=32, seq_len=16, vocab_size=16, seed=0)
    model = Transformer(16, 32, 2, 2, 16)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    first = None
    for _ in range(60):
        optimizer.zero_grad()
        loss = model.loss(model(idx), targets)
        loss.backward()
        optimizer.step()
        first = first if first is not None else loss.item()
    assert loss.item() < 0.6 * first     # from ln 16 = 2.77 towards the noise's floor


def test_transformer_bad_input():
    with pytest.raises(ValueError, match=r"d_model \(10\) must be a multiple of num_heads \(4\)"):
        Transformer(8, 10, 4, 1, 8)
    model = Transformer(8, 8, 2, 1, max_len=4)
    with pytest.raises(ValueError, match="sequences of 5 tokens are longer than max_len = 4"):
        model(torch.zeros(1, 5, dtype=torch.long))
    with pytest.raises(TypeError, match=r"integer tensor of token ids of shape \(batch, seq\), got "
                                        r"torch.Tensor torch.float32 of shape \(1, 3\)"):
        model(torch.zeros(1, 3))
    with pytest.raises(ValueError, match="num_layers must be a positive int, got 0"):
        Transformer(8, 8, 2, 0, 4)


@pytest.mark.cuda
@pytest.mark.parametrize("fused", [False, True], ids=["scores", "fused"])
def test_transformer_on_cuda_agrees_with_the_cpu(fused):
    """Lesson 10's model is the same on a GPU: a copy moved there gives the CPU's logits, loss and
    gradients (float32 matrix products without TF32, torch's default; fused attention through
    whichever kernel the GPU has)."""
    from course_utils.data import sequences

    device = try_gpu()
    torch.manual_seed(0)
    model = Transformer(vocab_size=32, d_model=32, num_heads=4, num_layers=2,
                        max_len=16, fused=fused)
    on_gpu = copy.deepcopy(model).to(device)
    idx, targets = sequences(n=4, seq_len=16, vocab_size=32, seed=0)
    out_cpu, out_gpu = model(idx), on_gpu(idx.to(device))
    assert out_gpu.device == device and out_gpu.shape == (4, 16, 32)
    torch.testing.assert_close(out_gpu.cpu(), out_cpu, rtol=1e-3, atol=1e-5)
    model.loss(out_cpu, targets).backward()
    on_gpu.loss(out_gpu, targets.to(device)).backward()
    for (name, p), q in zip(model.named_parameters(), on_gpu.parameters(), strict=True):
        torch.testing.assert_close(q.grad.cpu(), p.grad, rtol=1e-3, atol=1e-5, msg=name)
