"""course_utils.devices: the CPU fallback, the GPU path (faked and real), and bad indices."""

import pytest
import torch

from course_utils.devices import cpu, num_gpus, try_all_gpus, try_gpu

CPU = torch.device("cpu")


def fake_gpus(monkeypatch, n):
    """Make torch report n GPUs; torch.device("cuda:i") needs no GPU to be constructed."""
    monkeypatch.setattr(torch.cuda, "device_count", lambda: n)


def test_num_gpus_matches_torch():
    assert num_gpus() == torch.cuda.device_count()
    assert type(num_gpus()) is int


def test_cpu():
    assert cpu() == CPU
    assert isinstance(cpu(), torch.device)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only fallback")
def test_cpu_only_machine():
    assert try_gpu() == CPU
    assert try_gpu(1) == CPU
    assert try_all_gpus() == [CPU]
    assert torch.ones(2, device=try_gpu()).device == CPU


def test_no_gpu_falls_back_to_cpu(monkeypatch):
    fake_gpus(monkeypatch, 0)
    assert num_gpus() == 0
    assert try_gpu() == CPU
    assert try_gpu(3) == CPU
    assert try_all_gpus() == [CPU]  # d2l returns [] here; we keep the list loopable


def test_gpu_path_with_two_gpus(monkeypatch):
    fake_gpus(monkeypatch, 2)
    assert num_gpus() == 2
    assert try_gpu() == torch.device("cuda:0")
    assert try_gpu(1) == torch.device("cuda:1")
    assert try_gpu(2) == CPU  # only cuda:0 and cuda:1 exist
    assert try_all_gpus() == [torch.device("cuda:0"), torch.device("cuda:1")]


@pytest.mark.parametrize("i", [-1, -5])
def test_try_gpu_rejects_negative_index(i):
    with pytest.raises(ValueError, match=f"i must be a non-negative int, got {i}"):
        try_gpu(i)


@pytest.mark.parametrize(
    "i, got", [(True, "bool True"), (False, "bool False"), (1.0, "float 1.0"), ("0", "str '0'"),
               (None, "NoneType None")]
)
def test_try_gpu_rejects_non_int(i, got):
    with pytest.raises(TypeError, match=f"i must be a non-negative int, got {got}"):
        try_gpu(i)


@pytest.mark.cuda
def test_real_gpu_path():
    n = torch.cuda.device_count()
    assert num_gpus() == n >= 1
    assert try_gpu() == torch.device("cuda:0")
    assert try_gpu(n) == CPU
    assert try_all_gpus() == [torch.device(f"cuda:{k}") for k in range(n)]
    x = torch.ones(2, device=try_gpu())
    assert x.device == torch.device("cuda:0")
    assert torch.equal((x + x).cpu(), torch.full((2,), 2.0))
