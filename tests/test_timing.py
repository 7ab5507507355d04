"""course_utils.timing.fastest_seconds: how many calls, which time comes back, when CUDA is
synchronised.

No assertion depends on how fast this machine is: the timed functions advance a fake clock, put in
the place of perf_counter, by set amounts.
"""

import math

import pytest
import torch

from course_utils import timing
from course_utils.timing import fastest_seconds


class FakeClock:
    """perf_counter's stand-in: it reads `now`, which only the timed function moves."""

    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(timing, "perf_counter", fake)
    return fake


def taking(clock, durations, calls):
    """A function whose k-th call (counting from 0) takes durations[k] seconds of the fake clock."""
    def fn():
        clock.now += durations[len(calls)]
        calls.append(clock.now)
    return fn


def test_one_call_by_default(clock):
    calls = []
    assert fastest_seconds(taking(clock, [0.5], calls)) == 0.5
    assert len(calls) == 1


def test_repeat_timed_calls_after_warmup_untimed_ones_and_the_fastest_comes_back(clock):
    calls = []
    # the first two are the warm-up: slow, and not counted
    durations = [9.0, 8.0, 0.75, 0.25, 0.5, 1.0]
    assert fastest_seconds(taking(clock, durations, calls), repeat=4, warmup=2) == 0.25
    assert len(calls) == 6


def test_the_fastest_not_the_median_nor_the_mean(clock):
    calls = []
    assert fastest_seconds(taking(clock, [2.0, 0.5, 4.0], calls), repeat=3) == 0.5


def test_fn_returns_are_ignored_and_fn_gets_no_arguments(clock):
    seen = []

    def fn(*args, **kwargs):
        seen.append((args, kwargs))
        clock.now += 0.125
        return "ignored"
    assert fastest_seconds(fn, repeat=2) == 0.125
    assert seen == [((), {}), ((), {})]


def test_budget_stops_new_calls_once_spent(clock):
    calls = []
    # 0.25 s a call, a budget of 1 s: after 4 calls 1 s has passed, so no fifth starts.
    assert fastest_seconds(taking(clock, [0.25] * 20, calls), repeat=15, budget=1.0) == 0.25
    assert len(calls) == 4


def test_budget_still_allows_three_calls(clock):
    calls = []
    assert fastest_seconds(taking(clock, [5.0, 4.0, 6.0, 1.0], calls), repeat=15, budget=1.0) == 4.0
    assert len(calls) == 3


def test_budget_never_exceeds_repeat(clock):
    calls = []
    assert fastest_seconds(taking(clock, [5.0, 4.0, 6.0], calls), repeat=2, budget=1.0) == 4.0
    assert len(calls) == 2
    calls.clear()
    fastest_seconds(taking(clock, [0.25] * 10, calls), repeat=3, budget=100.0)
    assert len(calls) == 3


def test_the_budget_counts_from_the_first_timed_call_not_the_warmup(clock):
    calls = []
    # The warm-up takes 10 s, more than the budget: the timed calls still run until 1 s of them has
    # passed.
    assert fastest_seconds(taking(clock, [10.0] + [0.25] * 10, calls), repeat=15, warmup=1,
                           budget=1.0) == 0.25
    assert len(calls) == 1 + 4


def test_cpu_devices_are_not_synchronised(clock, monkeypatch):
    monkeypatch.setattr(torch.cuda, "synchronize",
                        lambda *a: pytest.fail("synchronised a CPU device"))
    for device in (None, "cpu", torch.device("cpu")):
        assert fastest_seconds(taking(clock, [0.5, 0.25], []), repeat=2, device=device) == 0.25


# Ids without the word "cuda": tests/conftest.py skips every test with that keyword where there is
# no GPU.
@pytest.mark.parametrize("device", ["cuda", "cuda:0", torch.device("cuda", 0)],
                         ids=["name", "name:index", "torch.device"])
def test_cuda_is_synchronised_after_every_call_and_before_the_first_timed_one(
        clock, monkeypatch, device):
    """torch.cuda.synchronize is replaced by a recorder: this runs on machines without a GPU too."""
    events = []

    def fn():
        clock.now += 0.5
        events.append("call")

    def synchronize(dev):
        assert dev == device, "synchronize must be given the device that was passed"
        clock.now += 0.25  # the GPU finishing the queued work: part of the call's time
        events.append("sync")

    monkeypatch.setattr(torch.cuda, "synchronize", synchronize)
    assert fastest_seconds(fn, repeat=2, warmup=1, device=device) == 0.75
    assert events == ["call", "sync", "call", "sync", "call", "sync"]


@pytest.mark.cuda
def test_on_a_real_gpu():
    x = torch.randn(256, 256, device="cuda")
    seconds = fastest_seconds(lambda: x @ x, repeat=3, warmup=1, device=x.device)
    assert type(seconds) is float and 0 < seconds < math.inf


def test_on_the_real_clock():
    calls = []
    seconds = fastest_seconds(lambda: calls.append(sum(range(100))), repeat=3, warmup=2)
    assert len(calls) == 5
    assert type(seconds) is float and 0 <= seconds < math.inf


@pytest.mark.parametrize("kwargs, phrase", [
    ({"fn": None}, "fn must be a function"),
    ({"fn": 3}, "fn must be a function"),
    ({"repeat": 0}, "repeat must be an int >= 1"),
    ({"repeat": -2}, "repeat must be an int >= 1"),
    ({"repeat": 2.0}, "repeat must be an int >= 1"),
    ({"repeat": True}, "repeat must be an int >= 1"),
    ({"repeat": "3"}, "repeat must be an int >= 1"),
    ({"warmup": -1}, "warmup must be an int >= 0"),
    ({"warmup": 1.5}, "warmup must be an int >= 0"),
    ({"warmup": None}, "warmup must be an int >= 0"),
    ({"budget": 0}, "budget must be None or a number of seconds > 0"),
    ({"budget": -1.0}, "budget must be None or a number of seconds > 0"),
    ({"budget": math.nan}, "budget must be None or a number of seconds > 0"),
    ({"budget": "1"}, "budget must be None or a number of seconds > 0"),
    ({"budget": True}, "budget must be None or a number of seconds > 0"),
])
def test_bad_arguments_raise_a_clear_value_error_before_any_call(kwargs, phrase):
    calls = []
    args = {"fn": lambda: calls.append(1), **kwargs}
    with pytest.raises(ValueError, match=phrase) as info:
        fastest_seconds(**args)
    assert repr(next(iter(kwargs.values()))) in str(info.value), "the message shows the bad value"
    assert calls == []


def test_a_budget_may_be_an_int():
    assert fastest_seconds(lambda: None, repeat=2, budget=1) >= 0
