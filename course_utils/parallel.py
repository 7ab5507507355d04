"""Real process groups from a notebook (gloo on CPUs, NCCL on GPUs), and from torchrun scripts.

    def show_rank(rank, world_size):         # runs in every worker, inside the process group
        x = torch.tensor([rank + 1.0])
        dist.all_reduce(x)                   # sum over the ranks
        return x.item()

    run_workers(show_rank, world_size=2)     # [3.0, 3.0]: one result per rank, in rank order

`run_workers` starts world_size processes, joins them into a process group (NCCL when there is a
GPU per rank, else gloo) through a torch.distributed.FileStore in a private temporary folder (mode
0700, removed afterwards: nothing listens on the network for it, so no other user of the machine
can reach it; gloo's own sockets between the ranks listen on the loopback interface only), calls
fn(rank, world_size, *args) in each and returns the results; what a worker prints comes back
prefixed with its rank. Workers are always reaped: after a failure in any rank (WorkerError names
the rank and shows its traceback), at the timeout, or on an interrupt, the rest are terminated.
A module's function travels to the workers by reference; a notebook's (or a script's __main__)
travels as source text with what it names: modules as imports, functions and classes of modules by
reference, other notebook functions as source, values (numbers, tensors) pickled; closures and
notebook classes cannot. Workers fork from a server process that has imported torch ("forkserver";
"spawn" where there is none): the first call takes about a second, later ones far less. Scripts
need the usual `if __name__ == "__main__":` guard, as with any multiprocessing.

For scripts started by `torchrun`, `init_from_env()` joins the group torchrun describes.
"""

import builtins
import dis
import gc
import importlib
import inspect
import linecache
import multiprocessing as mp
import os
import pickle
import queue
import shutil
import socket
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from datetime import timedelta

import torch
import torch.distributed as dist

from course_utils.exercises import NOT_ATTEMPTED

__all__ = ["run_workers", "WorkerError", "pick_backend", "worker_device", "init_from_env"]


class WorkerError(RuntimeError):
    """A worker of run_workers failed: .rank is the first rank that failed, .remote_traceback its
    traceback."""

    def __init__(self, rank: int, world_size: int, summary: str, remote_traceback: str):
        self.rank, self.remote_traceback = rank, remote_traceback
        # the rank ran an exercise not attempted yet: its stub's error, named
        # (course_utils.exercises)
        self.stub = None
        if summary.startswith(f"NotImplementedError: {NOT_ATTEMPTED}"):
            self.stub = NotImplementedError(summary.split(": ", 1)[1])
            frames = [line.rsplit(", in ", 1)[1] for line in remote_traceback.splitlines()
                      if line.startswith("  File ") and ", in " in line]
            self.stub.exercise = frames[-1] if frames and frames[-1].isidentifier() else None
        super().__init__(f"rank {rank} of {world_size} failed: {summary}\n"
                         f"---- traceback in rank {rank} ----\n{remote_traceback}")

    def _render_traceback_(self) -> list[str]:
        """How a notebook shows it: one line when the worker ran an exercise not attempted yet
        (course_utils.exercises), else IPython's own traceback, the worker's included."""
        first = str(self).splitlines()[0]
        if self.stub is not None:
            return [first + " (write the exercise, run its cell, then this one)"]
        from IPython import get_ipython
        shell = get_ipython()
        return (shell.InteractiveTB.structured_traceback(type(self), self, self.__traceback__)
                if shell else [str(self)])


def pick_backend(world_size: int) -> str:
    """'nccl' when torch sees at least world_size CUDA GPUs and has NCCL, else 'gloo' (any CPU)."""
    if type(world_size) is not int or world_size < 1:
        raise ValueError(f"world_size must be an int >= 1, got {world_size!r}")
    if (torch.cuda.is_available() and torch.cuda.device_count() >= world_size
            and dist.is_nccl_available()):
        return "nccl"
    return "gloo"


def worker_device() -> torch.device:
    """The device this rank computes on, inside a process group: cuda:<its GPU> with NCCL, else the
    CPU."""
    if not dist.is_initialized():
        raise RuntimeError("no process group here: call this inside a worker of run_workers or "
                           "after init_from_env")
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _global_names(code) -> set[str]:
    """Names a code object (and the functions nested in it) loads as globals."""
    names = {i.argval for i in dis.get_instructions(code)
             if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
    for const in code.co_consts:
        if inspect.iscode(const):
            names |= _global_names(const)
    return names


def portable(fn: Callable) -> tuple:
    """What a worker needs to rebuild fn, picklable: ("ref", fn) or ("source", name, sources,
    imports, values). run_workers sends its fn this way; to pass a notebook's function to workers as
    one of the args, pass portable(fn) and call rebuilt(recipe) in the worker."""
    if not callable(fn):
        raise TypeError(f"fn must be a function, got {type(fn).__name__}")
    if getattr(fn, "__module__", None) != "__main__":
        return ("ref", fn)
    sources, imports, values, todo = {}, {}, {}, [fn]
    while todo:
        f = todo.pop()
        if not inspect.isfunction(f) or f.__code__.co_freevars or f.__name__ == "<lambda>":
            raise TypeError(f"{getattr(f, '__name__', f)!r} cannot be sent to a worker process: "
                            "only plain `def` functions of a notebook travel (no closures, lambdas "
                            "or classes defined here)")
        try:
            sources[f.__name__] = inspect.getsource(f)
        except (OSError, TypeError) as e:
            raise TypeError(f"the source of {f.__name__!r} is not available ({e}): "
                            "define it in a cell") from None
        for name in sorted(_global_names(f.__code__)):
            if name not in f.__globals__ or name in sources or name in imports or name in values:
                continue  # a builtin, or seen already
            obj = f.__globals__[name]
            module = getattr(obj, "__module__", None)
            if inspect.ismodule(obj):
                imports[name] = (obj.__name__, None)
            elif inspect.isfunction(obj) and module == "__main__":
                todo.append(obj)
            elif ((inspect.isfunction(obj) or inspect.isclass(obj))
                  and module not in (None, "__main__")):
                imports[name] = (module, obj.__qualname__)
            else:
                try:
                    if inspect.isclass(obj) or type(obj).__module__ == "__main__":
                        raise TypeError("its class is defined in the notebook")
                    values[name] = pickle.dumps(obj)
                except Exception as e:  # the message names the variable instead
                    raise TypeError(f"{fn.__name__} uses {name!r} (a {type(obj).__name__}), which "
                                    f"cannot be sent to a worker process ({e}): create it inside "
                                    "the function or pass it in args") from None
    return ("source", fn.__name__, sources, imports, values)


def rebuilt(recipe: tuple) -> Callable:
    """The function a recipe describes, rebuilt in this (worker) process."""
    if recipe[0] == "ref":
        return recipe[1]
    _, name, sources, imports, values = recipe
    ns = {"__name__": "__notebook__", "__builtins__": builtins}
    for alias, (module, qualname) in imports.items():
        obj = importlib.import_module(module)
        for part in (qualname.split(".") if qualname else []):
            obj = getattr(obj, part)
        ns[alias] = obj
    ns.update({k: pickle.loads(v) for k, v in values.items()})
    for fname, src in sources.items():
        filename = f"<notebook function {fname}>"
        # tracebacks show lines
        linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
        exec(compile(src, filename, "exec"), ns)  # the user's own notebook code
    return ns[name]


def _to_cpu(obj):
    """obj with every tensor in it (also inside lists, tuples and dicts) detached and moved to the
    CPU."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_cpu(o) for o in obj)
    return {k: _to_cpu(v) for k, v in obj.items()} if isinstance(obj, dict) else obj


def _worker(rank: int, world_size: int, backend: str, store_file: str, timeout: float,
            payload: bytes, results) -> None:
    """Body of every worker process: capture its output, join the group, run fn, report back."""
    capture = tempfile.TemporaryFile()
    # all it prints, C++ warnings too, comes back
    for fd, stream in ((1, sys.stdout), (2, sys.stderr)):
        stream.flush()
        os.dup2(capture.fileno(), fd)
    try:
        recipe, args = pickle.loads(payload)
        fn = rebuilt(recipe)
        if backend == "nccl":
            torch.cuda.set_device(rank)
        else:
            torch.set_num_threads(max(1, (os.cpu_count() or 1) // world_size))  # share the cores
            if ("GLOO_SOCKET_IFNAME" not in os.environ
                    and "lo" in (name for _, name in socket.if_nameindex())):
                # every rank is on this machine: gloo listens on loopback only
                os.environ["GLOO_SOCKET_IFNAME"] = "lo"
        wait = timedelta(seconds=timeout)
        # the rendezvous: a file in the parent's private folder
        store = dist.FileStore(store_file, world_size)
        store.set_timeout(wait)
        dist.init_process_group(backend, store=store, rank=rank, world_size=world_size,
                                timeout=wait,
                                device_id=torch.device("cuda", rank) if backend == "nccl" else None)
        status, value = "ok", pickle.dumps(_to_cpu(fn(rank, world_size, *args)))
    except BaseException as e:  # everything goes back to the parent, by rank
        status, value = "error", (f"{type(e).__name__}: {e}", traceback.format_exc())
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    capture.seek(0)
    results.put((rank, status, value, capture.read().decode(errors="replace")))
    results.close()
    # the report is in the pipe before this rank leaves the group, so a rank's own
    # error arrives before the errors it causes in the ranks waiting for it
    results.join_thread()
    if dist.is_initialized():
        gc.collect()  # what fn left (a DDP model, say) lets go of the group first
        dist.destroy_process_group()


def _context():
    """forkserver (workers forked from a clean process with torch imported) where it exists, else
    spawn."""
    if "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        # DDP, FSDP import _dynamo
        ctx.set_forkserver_preload(["torch", "torch.distributed", "torch._dynamo", __name__])
        return ctx
    return mp.get_context("spawn")


def run_workers(fn: Callable, world_size: int = 2, backend: str | None = None, timeout: float = 60,
                args: Sequence = ()) -> list:
    """Run fn(rank, world_size, *args) in world_size new processes joined in one process group.

    Inputs:
    - fn: a function (rank: int, world_size: int, *args) -> a picklable result; a notebook's
      `def` function travels by source with what it uses (see the module docstring)
    - world_size: number of worker processes, an int >= 1
    - backend: "gloo", "nccl" (one GPU per rank, rank r on cuda:r) or None for
      pick_backend(world_size)
    - timeout: seconds for the whole run, a positive number; then every worker is killed
    - args: a tuple of picklable extra arguments, the same for every rank
    Returns: a list of world_size results, result[r] from rank r (tensors moved to the CPU).
    Raises: WorkerError naming the first rank that failed, with its traceback; TimeoutError.
    """
    if type(world_size) is not int or world_size < 1:
        raise ValueError(f"world_size must be an int >= 1, got {world_size!r}")
    if type(timeout) not in (int, float) or not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    if not isinstance(args, (tuple, list)):
        raise TypeError(f"args must be a tuple of extra arguments, got {type(args).__name__}")
    if backend not in (None, "gloo", "nccl"):
        raise ValueError(f"backend must be 'gloo', 'nccl' or None, got {backend!r}")
    if backend == "nccl" and pick_backend(world_size) != "nccl":
        raise ValueError(f"backend 'nccl' needs {world_size} CUDA GPUs and NCCL; this machine has "
                         f"{torch.cuda.device_count()} GPUs: use backend='gloo'")
    backend = backend or pick_backend(world_size)
    payload = pickle.dumps((portable(fn), tuple(args)))
    ctx = _context()
    results = ctx.Queue()
    # The rendezvous: no listening socket, a file in a folder only this user can enter (mkdtemp:
    # 0700).
    rendezvous = tempfile.mkdtemp(prefix="course-rendezvous-")
    store_file = os.path.join(rendezvous, "store")
    procs = [ctx.Process(target=_worker,
                         args=(r, world_size, backend, store_file, timeout, payload, results),
                         name=f"rank{r}", daemon=True) for r in range(world_size)]
    done, deadline = {}, time.monotonic() + timeout  # rank -> [status, value, output]
    try:
        for p in procs:
            p.start()
        while len(done) < world_size and all(d[0] == "ok" for d in done.values()):
            try:
                rank, *message = results.get(timeout=0.05)
                done[rank] = message
            except queue.Empty:
                gone = [r for r, p in enumerate(procs) if r not in done and p.exitcode is not None]
                # exited without a word? Its message may still be in the pipe: wait a moment
                if gone:
                    try:
                        rank, *message = results.get(timeout=1.0)
                        done[rank] = message
                    except queue.Empty:
                        done[gone[0]] = ["error", (f"exited with code {procs[gone[0]].exitcode}, "
                                                   "no result", ""), ""]
                elif time.monotonic() > deadline:
                    late = [r for r in range(world_size) if r not in done]
                    raise TimeoutError(
                        f"rank(s) {late} of {world_size} did not finish within {timeout} s and "
                        "were killed. A rank waits forever in a collective (all_reduce, barrier, "
                        "DDP's backward) that another rank never calls: do all ranks make the same "
                        "calls, in the same order?") from None
    finally:
        finished = len(done) == world_size and all(d[0] == "ok" for d in done.values())
        grace = time.monotonic() + (5.0 if finished else 0.0)  # finished workers exit by themselves
        # always reaped: the rest are terminated, then killed
        for p in (p for p in procs if p.pid is not None):
            p.join(timeout=max(0.0, grace - time.monotonic()))
            if p.is_alive():
                p.terminate()
                p.join(timeout=2.0)
            if p.is_alive():
                p.kill()
                p.join()
        results.close()
        shutil.rmtree(rendezvous, ignore_errors=True)
    for rank in sorted(done):
        for line in done[rank][2].splitlines():
            print(f"[rank {rank}] {line}")
    failed = [r for r in done if done[r][0] == "error"]
    if failed:
        summary, tb = done[failed[0]][1]
        finished = [r for r in sorted(done) if done[r][0] == "ok"]
        # the failing rank was probably left waiting in a collective the others never called
        if finished:
            summary += (f"\n(ranks {finished} had already returned: every rank must make the "
                        "same collective calls, all_reduce, barrier, DDP's backward, in the same "
                        "order)")
        raise WorkerError(failed[0], world_size, summary, tb)
    return [pickle.loads(done[r][1]) for r in range(world_size)]


def init_from_env(backend: str | None = None) -> tuple[int, int, torch.device]:
    """Join the process group torchrun describes in RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT.

    Inputs: backend: "gloo", "nccl" or None for pick_backend(number of ranks on this machine).
    Returns: (rank, world_size, device): device is cuda:LOCAL_RANK with NCCL, else the CPU.
    Call dist.destroy_process_group() at the end of the script.
    """
    missing = [k for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
               if k not in os.environ]
    if missing:
        raise RuntimeError(f"environment variables {missing} are not set: start this script with "
                           "torchrun, e.g. `torchrun --standalone --nproc_per_node=2 script.py`")
    rank, world_size, local_rank = (int(os.environ[k])
                                    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"))
    backend = backend or pick_backend(int(os.environ.get("LOCAL_WORLD_SIZE", world_size)))
    device = torch.device("cuda", local_rank) if backend == "nccl" else torch.device("cpu")
    if backend == "nccl":
        torch.cuda.set_device(device)
    dist.init_process_group(backend, init_method="env://", rank=rank, world_size=world_size,
                            device_id=device if backend == "nccl" else None)
    return rank, world_size, device

