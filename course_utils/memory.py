"""Activation memory, measured: what autograd keeps for the backward pass, on any device.

On every device, `SavedTensors` counts the tensors autograd saves, through
torch.autograd.graph.saved_tensors_hooks: every tensor a node saves passes through a pack hook,
where its storage is recorded once (a view of a stored tensor costs nothing extra). It follows
them until the graph releases them, so it knows both the bytes held now and the peak.
On CUDA, `cuda_peak_bytes` reads the caching allocator's peak statistics instead, which include
everything (temporaries, rounding of each request up to 512-byte blocks).
On the CPU, `TensorAllocations` and `cpu_peak_bytes` follow every tensor that operations create
(forward, backward, and what torch.utils.checkpoint recomputes) until it is freed: the peak of
one step, which saved-tensor hooks alone cannot see.

    with SavedTensors(exclude=model.parameters()) as saved:
        loss = model.loss(model(X), y)        # the forward pass saves activations
        print(saved.live_bytes)               # held by the graph now
        loss.backward()                       # ... and frees them
    saved.peak_bytes, saved.live_bytes        # (what the graph held at most, 0)
"""

import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves


def tensor_bytes(t: torch.Tensor) -> int:
    """Bytes of a tensor's own elements: numel * element_size."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"expected a torch.Tensor, got {type(t).__name__}")
    return t.numel() * t.element_size()


def _local(t):
    """A DTensor's local shard (what this rank holds), any other tensor itself."""
    if not hasattr(t, "to_local"):
        return t
    with torch.no_grad():  # a look at the shard, not a step of anyone's graph
        return t.to_local()


def storage_bytes(tensors: Iterable[torch.Tensor | None]) -> int:
    """Bytes of the distinct storages behind tensors: what holding them all costs. A storage shared
    by several tensors (views, a flat buffer and its parameters) counts once; a DTensor counts its
    local shard; None (a parameter without .grad) counts nothing."""
    storages = {}
    for t in tensors:
        if t is None:
            continue
        t = _local(t)
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"expected torch.Tensors, got {type(t).__name__}")
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    return sum(storages.values())


def format_bytes(n: int) -> str:
    """1536 -> '1.5 KiB': bytes in the binary units the allocators use."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ValueError(f"n must be a non-negative int of bytes, got {n!r}")
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


@dataclass(frozen=True)
class Saved:
    """One storage saved for backward: the saved tensor's dtype and shape, the storage's bytes."""

    dtype: torch.dtype
    shape: tuple
    nbytes: int
    excluded: bool


class _Packed:
    """What autograd stores in place of a saved tensor while we watch; freed with the graph."""

    __slots__ = ("tensor", "__weakref__")

    def __init__(self, tensor):
        self.tensor = tensor


class SavedTensors:
    """Context manager that measures the tensors autograd saves for backward, by storage.

    Inputs:
    - exclude: tensors (e.g. model.parameters()) whose storages are not activations: recorded
      once, flagged excluded, and left out of activation_bytes, live_bytes and peak_bytes.
    A DTensor (tensor parallel) counts as the shard this rank holds: its local shape and bytes.
    Attributes, valid during and after the `with` block:
    - saved: list of Saved, one per storage saved inside the block (a storage freed and saved
      again later, like the same input in two micro-batches, is listed again)
    - total_bytes: bytes of all of them; activation_bytes: the same without the excluded ones
    - live_bytes: activation bytes the graphs hold now; peak_bytes: the most they held at once
    """

    def __init__(self, exclude: Iterable[torch.Tensor] = ()):
        exclude = list(exclude)
        for t in exclude:
            if not isinstance(t, torch.Tensor):
                raise TypeError("exclude must hold tensors (e.g. model.parameters()), "
                                f"got {type(t).__name__}")
        self._excluded = {_local(t).untyped_storage().data_ptr() for t in exclude}
        self._excluded_seen: set[int] = set()
        self._live: dict[int, list[int]] = {}  # storage key -> [saved references alive, bytes]
        self.saved: list[Saved] = []
        self.live_bytes = 0
        self.peak_bytes = 0
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)

    def _pack(self, t: torch.Tensor):
        local = _local(t)  # a DTensor (tensor parallel): the shard this rank holds
        storage = local.untyped_storage()
        key = storage.data_ptr()
        if key in self._excluded:  # a parameter: alive anyway, nothing to follow
            if key not in self._excluded_seen:
                self._excluded_seen.add(key)
                self.saved.append(Saved(t.dtype, tuple(local.shape), storage.nbytes(), True))
            return t
        live = self._live.get(key)
        if live is None:  # no graph holds this storage yet: it starts costing memory now
            live = self._live[key] = [0, storage.nbytes()]
            self.saved.append(Saved(t.dtype, tuple(local.shape), storage.nbytes(), False))
            self.live_bytes += live[1]
            self.peak_bytes = max(self.peak_bytes, self.live_bytes)
        live[0] += 1
        packed = _Packed(t)
        weakref.finalize(packed, self._release, key)  # runs when the graph lets go of it
        return packed

    @staticmethod
    def _unpack(packed) -> torch.Tensor:
        return packed.tensor if isinstance(packed, _Packed) else packed

    def _release(self, key: int) -> None:
        live = self._live[key]
        live[0] -= 1
        if live[0] == 0:
            self.live_bytes -= live[1]
            del self._live[key]

    @property
    def total_bytes(self) -> int:
        return sum(s.nbytes for s in self.saved)

    @property
    def activation_bytes(self) -> int:
        return sum(s.nbytes for s in self.saved if not s.excluded)

    def __enter__(self) -> "SavedTensors":
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._hooks.__exit__(*exc)

    def __repr__(self) -> str:
        return (f"SavedTensors({len(self.saved)} storages, "
                f"activations {format_bytes(self.activation_bytes)}, "
                f"live {format_bytes(self.live_bytes)}, peak {format_bytes(self.peak_bytes)})")


def cuda_peak_bytes(fn: Callable[[], object], device: torch.device | str = "cuda") -> int:
    """Peak bytes the CUDA caching allocator handed out while fn() ran, above what was allocated
    before.

    Inputs:
    - fn: a function of no arguments (e.g. one training step); its result is dropped after the call
    - device: a CUDA device
    Returns: int, max_memory_allocated during fn minus memory_allocated before it.
    """
    device = torch.device(device)
    if device.type != "cuda":
        raise ValueError(f"cuda_peak_bytes measures a CUDA device, got {device}; "
                         "use SavedTensors on the CPU")
    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA device here: torch.cuda.is_available() is False")
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    fn()
    torch.cuda.synchronize(device)
    return torch.cuda.max_memory_allocated(device) - before


class _Recorder(TorchDispatchMode):
    """Runs each aten operation, then hands its name, inputs and outputs to `record`."""

    def __init__(self, record: Callable):
        super().__init__()
        self.record = record

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.record(func.__name__, (args, kwargs), out)
        return out


class TensorAllocations:
    """Context manager that follows every tensor the operations inside it create, until it is freed.

    A TorchDispatchMode sees each aten operation, in the forward, in the backward, and in the
    recomputation that torch.utils.checkpoint runs inside the backward (which saved-tensor hooks
    outside it cannot see). An output whose storage is new (not an input's: views and in-place
    results cost nothing) is counted from then on; after each operation the storages that have
    been freed are dropped. Tensors that existed before the block (parameters, the batch, .grad
    buffers reused in place) are not counted. Allocator rounding, kernels' internal scratch space
    and tensors made outside aten operations (such as the RNG state that torch.utils.checkpoint
    saves per segment, 5056 bytes on the CPU) are not counted either: this is the bytes of the
    storages that operations return.

    Inputs:
    - device: count storages on this device only (default "cpu"; "cuda" means any CUDA device)
    Attributes, valid during and after the `with` block:
    - live_bytes: int, bytes of the counted storages alive now (after the last operation)
    - peak_bytes: int, the most bytes they held at once
    - timeline: list of (str, int): (operation name, live_bytes right after it), one per operation
    - at_peak: dict {operation name: bytes}, the storages alive at the (first) peak by the operation
      that created each, largest first; its values sum to peak_bytes (which tensors hold the peak)
    """

    def __init__(self, device: torch.device | str = "cpu"):
        if not isinstance(device, (str, torch.device)):
            raise TypeError("device must be a str or torch.device such as 'cpu', "
                            f"got {type(device).__name__}")
        self.device = torch.device(device)
        self.live_bytes = 0
        self.peak_bytes = 0
        self.timeline: list[tuple[str, int]] = []
        # storage key -> (weak reference, bytes, the operation that made it)
        self._live: dict[int, tuple] = {}
        # (operation, bytes) of each storage alive at the peak
        self._at_peak: list[tuple[str, int]] = []
        self._mode = None

    def _drop_freed(self) -> None:
        for key in [k for k, (ref, *_) in self._live.items() if ref.expired()]:
            self.live_bytes -= self._live.pop(key)[1]

    def _record(self, name: str, inputs, outputs) -> None:
        self._drop_freed()
        tensors = lambda tree: [t for t in tree_leaves(tree) if isinstance(t, torch.Tensor)]
        seen = {StorageWeakRef(t.untyped_storage()).cdata for t in tensors(inputs)}
        for t in tensors(outputs):
            if t.layout != torch.strided or t.device.type != self.device.type or \
                    self.device.index not in (None, t.device.index):
                continue
            ref = StorageWeakRef(t.untyped_storage())
            if ref.cdata not in seen and ref.cdata not in self._live:
                nbytes = t.untyped_storage().nbytes()
                self._live[ref.cdata] = (ref, nbytes, name)
                self.live_bytes += nbytes
        if self.live_bytes > self.peak_bytes:
            self.peak_bytes = self.live_bytes
            self._at_peak = [(made_by, nbytes) for _, nbytes, made_by in self._live.values()]
        self.timeline.append((name, self.live_bytes))

    @property
    def at_peak(self) -> dict[str, int]:
        by_op: dict[str, int] = {}
        for name, nbytes in self._at_peak:
            by_op[name] = by_op.get(name, 0) + nbytes
        return dict(sorted(by_op.items(), key=lambda item: -item[1]))

    def __enter__(self) -> "TensorAllocations":
        self._mode = _Recorder(self._record)
        self._mode.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._mode.__exit__(*exc)
        self._drop_freed()

    def __repr__(self) -> str:
        return (f"TensorAllocations({len(self.timeline)} operations, "
                f"live {format_bytes(self.live_bytes)}, peak {format_bytes(self.peak_bytes)})")


def cpu_peak_bytes(fn: Callable[[], object]) -> int:
    """Peak bytes of CPU tensors created while fn() ran and alive at the same time (see
    TensorAllocations).

    The CPU counterpart of cuda_peak_bytes: what one step adds on top of what existed before it,
    at its worst moment, including what torch.utils.checkpoint recomputes during the backward.
    Inputs:
    - fn: a function of no arguments (e.g. one training step); its result is dropped after the call
    Returns: int, bytes.
    """
    if not callable(fn):
        raise TypeError(f"fn must be a function of no arguments, got {type(fn).__name__}")
    with TensorAllocations("cpu") as mem:
        fn()
    return mem.peak_bytes
