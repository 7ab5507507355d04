"""course_utils.grader.protocol: observations survive JSON exactly, anything else arrives opaque,
malformed data is refused, and every size is bounded before the work it costs."""

import json

import pytest
import torch

from course_utils.grader import protocol


def roundtrip(value):
    return protocol.decode(json.loads(json.dumps(protocol.encode(value))))


def test_plain_data_survives_json_exactly():
    value = {"a": [1, 2.5, -0.0, True, None, "text"], "t": (1, (2, 3)), "big": 2 ** 70,
             "x": torch.tensor([[1.5, float("nan")], [float("inf"), -2.0]], dtype=torch.float64),
             "i": torch.arange(6, dtype=torch.int32).reshape(2, 3),
             "b": torch.tensor([True, False]),
             "c": torch.tensor([1 + 2j], dtype=torch.complex64), "size": torch.Size([2, 3]),
             "dtype": torch.float16, "e": torch.zeros(0, 4), "nan": float("nan")}
    back = roundtrip(value)
    assert type(back["t"]) is tuple and back["t"] == (1, (2, 3))
    assert type(back["big"]).__name__ == "int too large", (
        "no exercise returns one; its digits could spell any text")
    assert back["a"] == value["a"] and back["size"] == (2, 3) and back["dtype"] is torch.float16
    for k in ("x", "i", "b", "c", "e"):
        assert (type(back[k]) is torch.Tensor and back[k].dtype == value[k].dtype
                and back[k].shape == value[k].shape)
        assert (torch.equal(back[k].nan_to_num(0.0), value[k].nan_to_num(0.0)) if k == "x"
                else torch.equal(back[k], value[k]))
    assert back["nan"] != back["nan"]


def test_subclasses_and_objects_arrive_opaque_with_their_type_name():
    class Sneaky(float):
        def __eq__(self, other):
            return True

    back = roundtrip([Sneaky(1.0),
                      torch.zeros(2).as_subclass(type("Agreeable", (torch.Tensor,), {})),
                      object(), {1: 2}])
    assert [type(v).__name__ for v in back] == ["Sneaky", "Agreeable", "object",
                                                "dict with nonstring keys"]
    assert all(isinstance(v, protocol.Opaque) for v in back)
    assert back[0] != 1.0


def test_tensors_lose_their_graph_and_device():
    x = torch.ones(2, requires_grad=True)
    back = roundtrip(x * 2)
    assert back.grad_fn is None and not back.requires_grad and back.device.type == "cpu"


@pytest.mark.parametrize("bad", [
    {"$tensor": {"dtype": "float32", "shape": [2], "data": [1.0]}},
    {"$tensor": {"dtype": "object", "shape": [1], "data": [1]}},
    {"$tensor": {"dtype": "int64", "shape": [1], "data": [1.5]}},
    {"$tensor": {"dtype": "float32", "shape": [-1], "data": []}},
    {"$pickle": "gASV"}, {"a": 1, "b": 2}, {"$float": "1e999"}, {"$bigint": "12a"},
    {"$dtype": "os.system"}, {"$tuple": "abc"}, {"$dtype": ["float32"]}, {"$float": ["nan"]},
    # encode sends those as $bigint
    2 ** 63, -2 ** 63 - 1, [1, 10 ** 30], {"$tuple": [2 ** 64]},
    # more dimensions than torch allows
    {"$tensor": {"dtype": "float32", "shape": [1] * 33, "data": [1.0]}},
    {"$tensor": {"dtype": "float32", "shape": [2 ** 63, 0], "data": []}},
    {"$tensor": {"dtype": "float32", "shape": [True], "data": [1.0]}},
    {"$tensor": {"dtype": "float64", "shape": [1], "data": [2 ** 70]}},
    {"$tensor": {"dtype": "int8", "shape": [1], "data": [300]}},
    {"$tensor": {"dtype": ["int8"], "shape": [1], "data": [3]}},
])
def test_malformed_observations_are_refused(bad):
    with pytest.raises(ValueError, match="malformed"):
        protocol.decode(bad)


def test_integers_fill_the_int64_range_and_no_more():
    edge = torch.tensor([-2 ** 63, 2 ** 63 - 1, 0])
    assert torch.equal(roundtrip(edge), edge)
    assert roundtrip([2 ** 63 - 1, -(2 ** 63 - 1)]) == [2 ** 63 - 1, -(2 ** 63 - 1)]
    assert type(roundtrip(-2 ** 63)).__name__ == "int too large"
    assert protocol.loads(
        json.dumps(protocol.encode({"n": [2 ** 63 - 1, -2 ** 63 + 1], "x": 1.5e300})).encode()) == \
        {"$dict": {"n": [2 ** 63 - 1, -2 ** 63 + 1], "x": 1.5e300}}


def _timed(fn, *args):
    import time
    start = time.perf_counter()
    try:
        fn(*args)
    except ValueError as e:
        assert "malformed" in str(e)
    return time.perf_counter() - start


def test_decoding_is_bounded_before_it_is_attempted():
    """A red team's observation hung the reference: a tensor "shape" of thousands of 4,299-digit
    integers (math.prod of them builds numbers of millions of digits). Each such observation is
    refused in well under a second, parsed with protocol.loads (the grader's) or already parsed."""
    digits = "7" * 4299
    huge = int(digits)
    for shape in ([huge] * 3000, [2 ** 62] * 32, [1] * 3000):
        data = {"$tensor": {"dtype": "float32", "shape": shape, "data": []}}
        assert _timed(protocol.decode, data) < 0.2
        with pytest.raises(ValueError, match="malformed"):
            protocol.decode(data)
    for data in ("HUGE", ["HUGE"] * 3000, {"$tuple": ["HUGE"] * 3000},
                 {"$dict": {"k": ["HUGE"] * 3000}},
                 {"$tensor": {"dtype": "int64", "shape": [3000], "data": ["HUGE"] * 3000}},
                 {"$tensor": {"dtype": "float32", "shape": ["HUGE"] * 3000, "data": []}}):
        # what a hostile worker could send
        line = json.dumps(data).replace('"HUGE"', digits).encode()
        assert _timed(protocol.loads, line) < 0.2
        with pytest.raises(ValueError, match="digits"):
            protocol.loads(line)
        parsed = json.loads(line)  # as a parser without the bound would hand it on
        assert _timed(protocol.decode, parsed) < 0.2
        with pytest.raises(ValueError, match="malformed"):
            protocol.decode(parsed)
    assert (protocol.loads(b'[12345678901234567890, -12345678901234567890]')
            == [12345678901234567890, -12345678901234567890])
    with pytest.raises(ValueError):
        protocol.loads(b"[123456789012345678901]")


def test_size_and_depth_are_capped():
    nested = []
    for _ in range(100):
        nested = [nested]
    with pytest.raises(ValueError):
        protocol.encode(nested)
    with pytest.raises(ValueError):
        protocol.encode(torch.zeros(protocol.MAX_NODES + 1))
    with pytest.raises(ValueError):
        protocol.encode("x" * (protocol.MAX_STR + 1))


def test_type_names_from_the_learners_process_are_bounded_in_number():
    many = [{"$opaque": f"T{i}"} for i in range(protocol.MAX_OPAQUE_TYPES + 50)]
    names = [type(v).__name__ for v in protocol.decode(many)]
    # + the catch-all
    assert len(set(names)) == protocol.MAX_OPAQUE_TYPES + 1 and names[-1] == "object"


def test_one_observations_type_names_never_reach_the_next():
    """The reference judges a whole class: a learner who fills the table of names must not turn
    the next learner's "got Anything" into "got object"."""
    protocol.decode([{"$opaque": f"T{i}"} for i in range(protocol.MAX_OPAQUE_TYPES + 50)])
    assert type(protocol.decode({"$opaque": "Anything"})).__name__ == "Anything"
    assert type(protocol.decode({"$bigint": "1" * 30})).__name__ == "int too large"
    assert not hasattr(protocol, "_opaque_types"), "no table of names outlives a decode() call"
