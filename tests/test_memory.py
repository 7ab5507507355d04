"""course_utils.memory: saved-tensor accounting agrees with the graph and with hand-computed
bytes."""

import pytest
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint, checkpoint_sequential

from course_utils.graph import report
from course_utils.memory import (SavedTensors, TensorAllocations, cpu_peak_bytes, cuda_peak_bytes,
                                 format_bytes, storage_bytes, tensor_bytes)


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))


def test_activation_bytes_match_the_graph_report_and_the_shapes():
    model, X = mlp(), torch.randn(5, 4)
    with SavedTensors(exclude=model.parameters()) as saved:
        out = model(X).pow(2).sum()
    by_graph = report(out, dict(model.named_parameters())).activation_bytes
    # float32: the input (5x4), the relu output (5x8, also the 2nd Linear's input), pow's input
    # (5x3)
    assert saved.activation_bytes == by_graph == 4 * (5 * 4 + 5 * 8 + 5 * 3)

def test_a_storage_saved_twice_counts_once():
    x = torch.randn(100, requires_grad=True)
    with SavedTensors() as saved:
        (x * x).sum()  # mul saves x as self and as other
    assert len(saved.saved) == 1 and saved.total_bytes == 400


def test_parameters_are_excluded_but_listed():
    lin = nn.Linear(10, 10)
    X = torch.randn(3, 10, requires_grad=True)
    with SavedTensors(exclude=lin.parameters()) as saved:
        lin(X).sum()
    excluded = [s for s in saved.saved if s.excluded]
    assert [s.shape for s in excluded] == [(10, 10)]  # the weight, saved as a transposed view
    assert saved.activation_bytes == tensor_bytes(X)


def test_live_and_peak_follow_the_graph():
    model, X, y = mlp(), torch.randn(64, 4), torch.randint(0, 3, (64,))
    # Separate tensors: chunks of X would be views of its storage, which is saved whole.
    micro = [(Xm.clone(), ym.clone()) for Xm, ym in zip(X.chunk(4), y.chunk(4))]
    loss_fn = nn.CrossEntropyLoss()
    with SavedTensors(exclude=model.parameters()) as one:
        loss = loss_fn(model(X), y)
        held = one.live_bytes
        loss.backward()
    assert held == one.activation_bytes > 0 and one.live_bytes == 0 and one.peak_bytes == held
    # Four micro-batches, each backward before the next forward: the peak is one micro-batch's.
    with SavedTensors(exclude=model.parameters()) as loop:
        for Xm, ym in micro:
            loss_fn(model(Xm), ym).backward()
    # The same four losses summed into one graph: all four graphs alive at once.
    with SavedTensors(exclude=model.parameters()) as summed:
        sum(loss_fn(model(Xm), ym) for Xm, ym in micro).backward()
    assert loop.live_bytes == summed.live_bytes == 0
    assert summed.peak_bytes == 4 * loop.peak_bytes
    assert loop.total_bytes == summed.total_bytes  # the same tensors were saved, at different times


def test_no_grad_saves_nothing():
    model = mlp()
    with SavedTensors() as saved, torch.no_grad():
        model(torch.randn(5, 4))
    assert saved.saved == [] and saved.peak_bytes == 0


def test_storage_bytes_counts_each_storage_once():
    flat = torch.zeros(10)                                 # 40 bytes
    a, b = flat[:6], flat[6:]                              # parameters viewing one flat buffer
    other = torch.zeros(3, dtype=torch.float64)            # 24 bytes
    assert storage_bytes([a, b, flat, None, other]) == 40 + 24
    assert storage_bytes([a]) == 40, "a view holds its whole storage"
    assert storage_bytes([]) == 0
    with pytest.raises(TypeError, match="expected torch.Tensors, got int"):
        storage_bytes([1])


def test_format_and_bad_input():
    assert (format_bytes(512) == "512 B" and format_bytes(1536) == "1.5 KiB"
            and format_bytes(3 * 2**30) == "3.0 GiB")
    with pytest.raises(ValueError, match="non-negative int"):
        format_bytes(-1)
    with pytest.raises(TypeError, match="expected a torch.Tensor, got list"):
        tensor_bytes([1, 2])
    with pytest.raises(TypeError, match="exclude must hold tensors"):
        SavedTensors(exclude=[1.0])
    with pytest.raises(ValueError, match="measures a CUDA device, got cpu"):
        cuda_peak_bytes(lambda: None, "cpu")


@pytest.mark.cuda
def test_cuda_peak_is_at_least_the_saved_activations():
    device = torch.device("cuda")
    model = mlp().to(device)
    X = torch.randn(256, 4, device=device)
    with SavedTensors(exclude=model.parameters()) as saved:
        out = model(X).relu().sum()
    del out
    held = {}

    def step():
        held["out"] = model(X).relu().sum()

    peak = cuda_peak_bytes(step, device)
    assert peak >= saved.activation_bytes


# TensorAllocations / cpu_peak_bytes: every tensor an operation makes, followed until it is freed.


def test_allocations_follow_creation_and_freeing_and_skip_views():
    before = torch.ones(1000)
    with TensorAllocations() as mem:
        a = torch.ones(1000)                  # 4000 bytes, new
        v = a.view(10, 100)                   # a view: no new storage
        a.add_(1)                             # in place: nothing new
        before.t()                            # a view of a tensor made before the block
        b = a * 2                             # 4000 more: 8000 alive
        del b
        c = a + 1                             # b was freed first: still 8000 at most
        del a, v, c
    assert mem.peak_bytes == 8000 and mem.live_bytes == 0
    assert [name for name, _ in mem.timeline] == ["ones.default", "view.default",
                                                  "add_.Tensor", "t.default",
                                                  "mul.Tensor", "add.Tensor"]
    assert [live for _, live in mem.timeline] == [4000, 4000, 4000, 4000, 8000, 8000]
    assert "peak 7.8 KiB" in repr(mem)


def test_at_peak_says_which_operations_made_what_is_alive_at_the_first_peak():
    with TensorAllocations() as mem:
        a = torch.ones(1000)                  # 4000 bytes
        b = a.exp()                           # 4000: 8000 alive
        c = a * 2                             # 4000: 12000, the peak
        del a, b, c
        # 12000 again, made by one operation: not higher, the first peak stays
        d = torch.zeros(3000)
        del d
    assert mem.at_peak == {"ones.default": 4000, "exp.default": 4000, "mul.Tensor": 4000}
    assert sum(mem.at_peak.values()) == mem.peak_bytes == 12000
    with TensorAllocations() as mem:
        _a = torch.ones(100)                  # 400
        # ones 4000 then exp 4000: 8400, the peak; then the ones is freed
        b = torch.ones(1000).exp()
        del b
        _c = torch.zeros(1500)                # 6000 with _a: lower, the peak's list stays
    assert mem.at_peak == {"ones.default": 4400, "exp.default": 4000}, mem.at_peak
    assert list(mem.at_peak) == ["ones.default", "exp.default"]   # largest first


def test_tensors_made_before_are_not_counted_and_other_devices_are_skipped():
    x = torch.randn(100, 10)
    with TensorAllocations() as mem:
        x.sum()
    assert mem.peak_bytes == 4  # only the 0-dim result
    with TensorAllocations("cuda") as on_gpu:  # CPU tensors are not on that device
        torch.ones(1000) * 2
    assert on_gpu.peak_bytes == 0 and len(on_gpu.timeline) == 2


def chain(n, d):
    torch.manual_seed(0)
    return nn.Sequential(*[nn.Sequential(nn.Linear(d, d), nn.Tanh()) for _ in range(n)])


def test_cpu_peak_sees_what_checkpoint_recomputes():
    n, B, d = 8, 256, 8
    act = B * d * 4
    blocks, x = chain(n, d), torch.randn(B, d)
    blocks(x).sum().backward()  # .grad exists: later steps add into it in place
    plain = cpu_peak_bytes(lambda: blocks(x).sum().backward())
    ckpt = cpu_peak_bytes(
        lambda: checkpoint_sequential(blocks, 4, x, use_reentrant=False).sum().backward())
    # n kept activations + 1 temporary; with 4 segments of 2: 3 kept inputs + 2 recomputed + 1
    # temporary. What is left over is one block's weight and bias gradients and a few scalars.
    assert 0 <= plain - (n + 1) * act <= act // 2
    assert 0 <= ckpt - (3 + 2 + 1) * act <= act // 2
    # Saved-tensor hooks outside the checkpoint see only its input: the recomputation is invisible
    # to them.
    with SavedTensors(exclude=blocks.parameters()) as saved:
        checkpoint(blocks, x, use_reentrant=False).sum().backward()
    assert saved.peak_bytes == act and saved.live_bytes == 0


def test_cpu_peak_bad_input():
    with pytest.raises(TypeError, match="fn must be a function of no arguments, got int"):
        cpu_peak_bytes(3)
    with pytest.raises(TypeError, match="device must be a str or torch.device"):
        TensorAllocations(0)


@pytest.mark.cuda
def test_tensor_allocations_on_cuda_are_within_the_allocator_peak():
    device = torch.device("cuda")
    blocks, x = chain(8, 64).to(device), torch.randn(512, 64, device=device)
    blocks(x).sum().backward()

    def step():
        checkpoint_sequential(blocks, 4, x, use_reentrant=False).sum().backward()

    with TensorAllocations("cuda") as mem:
        step()
    assert 0 < mem.peak_bytes <= cuda_peak_bytes(step, device)


# A module-level worker: it travels to the ranks by reference.
def tensor_parallel_saved(rank, world_size):
    """What SavedTensors lists for a column- then row-parallel MLP (8 -> 16 -> 8) on this rank."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   parallelize_module)
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8))
    parallelize_module(mlp, init_device_mesh("cpu", (world_size,)),
                       {"0": ColwiseParallel(), "2": RowwiseParallel()})
    x = torch.randn(4, 8, requires_grad=True)
    with SavedTensors(exclude=mlp.parameters()) as saved:
        mlp(x).sum().backward()
    return [(s.shape, s.nbytes, s.excluded) for s in saved.saved]


def test_a_dtensor_counts_as_the_shard_this_rank_holds():
    """Tensor parallel over 2 ranks: the hidden activations (GELU's input and output, (4, 16)
    whole) are (4, 8) shards of 128 bytes on each rank, the weights (16, 8) and (8, 16) are (8, 8)
    shards, excluded; x, saved by the first Linear, is whole on every rank."""
    from course_utils.parallel import run_workers
    for ranks_saved in run_workers(tensor_parallel_saved, world_size=2, timeout=60):
        assert sorted(ranks_saved) == sorted([((4, 8), 128, False), ((8, 8), 256, True),
                                              ((4, 8), 128, False), ((4, 8), 128, False),
                                              ((8, 8), 256, True)])
