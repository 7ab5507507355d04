"""course_utils.data: shapes, dtypes, determinism, and clear errors."""

import pytest
import torch

from course_utils.data import batches, blobs, linear, sequences


def test_blobs_shapes_balance_and_seed():
    X, y = blobs(n=100, num_inputs=5, num_classes=4, seed=1)
    assert (X.shape == (100, 5) and X.dtype == torch.float32 and y.shape == (100,)
            and y.dtype == torch.int64)
    assert torch.bincount(y).tolist() == [25, 25, 25, 25]
    X2, y2 = blobs(n=100, num_inputs=5, num_classes=4, seed=1)
    assert torch.equal(X, X2) and torch.equal(y, y2)
    assert not torch.equal(X, blobs(n=100, num_inputs=5, num_classes=4, seed=2)[0])
    assert blobs(n=8, dtype=torch.float64)[0].dtype == torch.float64


def test_blobs_are_separable_enough_to_learn():
    X, y = blobs(n=400, num_inputs=10, num_classes=3, seed=0)
    centres = torch.stack([X[y == k].mean(0) for k in range(3)])
    nearest = torch.cdist(X, centres).argmin(1)
    assert (nearest == y).float().mean() > 0.95


def test_linear_recovers_its_weights_by_least_squares():
    X, y = linear(n=500, num_inputs=3, seed=0, dtype=torch.float64)
    A = torch.cat([X, torch.ones(500, 1, dtype=torch.float64)], 1)
    coef = torch.linalg.lstsq(A, y).solution.squeeze()
    torch.testing.assert_close(coef, torch.tensor([2.0, -3.4, 1.0, 4.2], dtype=torch.float64),
                               atol=5e-3, rtol=0)


def test_batches_cover_everything_with_a_short_last_batch():
    X, y = torch.arange(10.0).reshape(10, 1), torch.arange(10)
    sizes = [len(b[0]) for b in batches(X, y, 4)]
    assert sizes == [4, 4, 2]
    assert torch.equal(torch.cat([b[1] for b in batches(X, y, 4)]), y)


def test_sequences_are_shifted_counts_with_some_noise():
    idx, targets = sequences(n=200, seq_len=40, vocab_size=16, seed=3)
    assert idx.shape == targets.shape == (200, 40) and idx.dtype == targets.dtype == torch.int64
    # targets are idx shifted by one
    assert torch.equal(idx[:, 1:], targets[:, :-1])
    assert 0 <= int(idx.min()) and int(idx.max()) < 16
    # the counting step, where not noisy
    steps = (targets - idx) % 16
    counted = (steps >= 1) & (steps <= 3)
    # about 7 in 8 (plus noise that hits)
    assert 0.75 < counted.float().mean() < 0.95
    assert torch.equal(sequences(n=5, seq_len=7, seed=1)[0], sequences(n=5, seq_len=7, seed=1)[0])
    assert not torch.equal(sequences(n=5, seq_len=7, seed=1)[0],
                           sequences(n=5, seq_len=7, seed=2)[0])


def test_bad_input():
    with pytest.raises(ValueError, match="n must be an int >= 1, got 0"):
        blobs(n=0)
    with pytest.raises(ValueError, match="num_classes must be an int"):
        blobs(num_classes=2.5)
    with pytest.raises(ValueError, match="seed must be an int >= 0"):
        linear(seed=-1)
    with pytest.raises(ValueError, match="same length"):
        list(batches(torch.zeros(3, 1), torch.zeros(2), 2))
    with pytest.raises(TypeError, match="must be tensors"):
        list(batches([1, 2], torch.zeros(2), 1))
    with pytest.raises(ValueError, match="seq_len must be an int >= 1, got 0"):
        sequences(seq_len=0)
