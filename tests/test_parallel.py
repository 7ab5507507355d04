"""course_utils.parallel: real process groups from a notebook, always reaped; and
scripts/train_ddp.py under torchrun."""

import os
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from course_utils import parallel
from course_utils.parallel import (WorkerError, init_from_env, pick_backend, run_workers,
                                   worker_device)

ROOT = Path(__file__).resolve().parent.parent


# Workers live at module level so that they travel by reference, as a library's functions do.
def summed(rank, world_size):
    x = torch.tensor([rank + 1.0], device=worker_device())
    dist.all_reduce(x)
    print(f"rank {rank} says hello")
    return {"sum": x, "device": str(worker_device()), "world_size": dist.get_world_size()}


def fails_on_rank_1(rank, world_size, pid_dir):
    write_pid(pid_dir, rank)
    if rank == 1:
        # so rank 0 is surely running (and then blocked) when rank 1 fails
        wait_for_pid_files(pid_dir, world_size)
        raise ValueError("rank 1 went wrong on purpose")
    dist.barrier()  # rank 0 waits here for a rank that never comes


def only_rank_0_reduces(rank, world_size):
    x = torch.ones(3)
    if rank == 0:
        dist.all_reduce(x)  # rank 1 never joins: rank 0 is left waiting until rank 1 leaves
    return x


def write_pid(pid_dir, rank):
    """Whole or not at all: written under another name, then renamed."""
    Path(pid_dir, f"{rank}.tmp").write_text(str(os.getpid()))
    os.replace(Path(pid_dir, f"{rank}.tmp"), Path(pid_dir, str(rank)))


def wait_for_pid_files(pid_dir, world_size, seconds=10):
    deadline = time.monotonic() + seconds
    while (not all(Path(pid_dir, str(r)).exists() for r in range(world_size))
           and time.monotonic() < deadline):
        time.sleep(0.01)


def hangs(rank, world_size, pid_dir):
    write_pid(pid_dir, rank)
    time.sleep(60)


def assert_gone(pid_dir, world_size):
    """Every worker that wrote its pid to pid_dir has exited (within a moment)."""
    pids = [int(Path(pid_dir, str(r)).read_text()) for r in range(world_size)]
    deadline = time.monotonic() + 5
    alive = pids
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if _alive(p)]
        time.sleep(0.05)
    assert not alive, f"worker processes {alive} are still running"


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie waiting to be reaped by its parent has exited too
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return True


def tcp_listeners(pid):
    """The TCP sockets process pid listens on, {inode: local address as /proc/net/tcp writes it}:
    its sockets in LISTEN state (0A) in its network namespace's /proc/net/tcp and tcp6."""
    mine = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            link = os.readlink(fd)
        except OSError:
            continue
        if link.startswith("socket:["):
            mine.add(link[len("socket:["):-1])
    listening = {}
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in mine:
                listening[fields[9]] = fields[1]
    return listening


# 127.0.0.1 and ::1 in /proc/net/tcp{,6}
LOOPBACK = ("0100007F:", "00000000000000000000000001000000:")


def rendezvous_seen(rank, world_size, parent_pid):
    """What a rank sees of its rendezvous: the store under the group's prefixes, its folder, whether
    the process that called run_workers listens on TCP while the ranks run, and where gloo
    listens."""
    store = dist.distributed_c10d._get_default_store()
    while isinstance(store, dist.PrefixStore):
        store = store.underlying_store
    folder = os.path.dirname(store.path) if isinstance(store, dist.FileStore) else None
    info = os.stat(folder) if folder else None
    dist.barrier()  # both ranks are in the group while the caller is looked at
    return {"store": type(store).__name__, "folder": folder,
            "mode": stat.S_IMODE(info.st_mode) if info else None,
            "owner": info.st_uid if info else None,
            "caller_listens": sorted(tcp_listeners(parent_pid)),
            "gloo_listens_on": sorted(tcp_listeners(os.getpid()).values())}


@pytest.fixture
def rendezvous_folders(monkeypatch):
    """The private folders run_workers makes for its rendezvous, as it makes them."""
    made, real = [], tempfile.mkdtemp

    def recording(*args, **kwargs):
        path = real(*args, **kwargs)
        if kwargs.get("prefix", "").startswith("course-rendezvous"):
            made.append(path)
        return path
    monkeypatch.setattr(parallel.tempfile, "mkdtemp", recording)
    return made


def test_two_gloo_processes_all_reduce_to_the_sum(capsys):
    results = run_workers(summed, world_size=2, backend="gloo", timeout=60)
    assert [r["sum"].item() for r in results] == [3.0, 3.0]
    assert all(type(r["sum"]) is torch.Tensor and r["sum"].device.type == "cpu" for r in results)
    assert [r["device"] for r in results] == ["cpu", "cpu"] and results[0]["world_size"] == 2
    out = capsys.readouterr()
    assert "[rank 0] rank 0 says hello" in out.out and "[rank 1] rank 1 says hello" in out.out
    assert out.err == ""


def test_the_rendezvous_is_a_file_in_a_private_folder_and_no_listening_socket(rendezvous_folders):
    """No TCPStore: nothing listens for the rendezvous (another user of the machine could connect to
    it), the ranks meet in a FileStore in a folder only this user can enter, removed afterwards; a
    second call (notebooks make many) gets a folder of its own."""
    before = tcp_listeners(os.getpid())
    for call in range(2):
        seen = run_workers(rendezvous_seen, world_size=2, backend="gloo", args=(os.getpid(),))
        assert [s["store"] for s in seen] == ["FileStore", "FileStore"]
        assert seen[0]["folder"] == seen[1]["folder"] == rendezvous_folders[call]
        assert seen[0]["mode"] == 0o700 and seen[0]["owner"] == os.getuid(), (
            "a folder only this user can enter")
        assert seen[0]["caller_listens"] == sorted(before), (
            "run_workers' process listens on no new TCP socket")
        listens = [a for s in seen for a in s["gloo_listens_on"]]
        assert listens and all(a.startswith(LOOPBACK) for a in listens), (
            f"gloo on the loopback only: {listens}")
        assert not Path(seen[0]["folder"]).exists(), (
            "the folder and its store file are removed afterwards")
    assert len(set(rendezvous_folders)) == 2


def test_a_failing_rank_is_named_with_its_traceback_and_no_worker_is_left(
        tmp_path, rendezvous_folders):
    start = time.monotonic()
    with pytest.raises(WorkerError, match=r"rank 1 of 2 failed: ValueError: rank 1 went "
                                          r"wrong on purpose") as info:
        run_workers(fails_on_rank_1, world_size=2, backend="gloo", timeout=30,
                    args=(str(tmp_path),))
    assert info.value.rank == 1
    assert "fails_on_rank_1" in info.value.remote_traceback and "Traceback" in str(info.value)
    assert time.monotonic() - start < 15, ("the blocked rank 0 should be ended at once, not "
                                           "at the timeout")
    assert_gone(tmp_path, 2)
    assert len(rendezvous_folders) == 1 and not Path(rendezvous_folders[0]).exists()


def test_a_rank_left_alone_in_a_collective_is_told_why():
    with pytest.raises(WorkerError,
                       match=r"rank 0 of 2 failed(.|\n)*ranks \[1\] had already returned"):
        run_workers(only_rank_0_reduces, world_size=2, backend="gloo", timeout=30)


def test_a_hanging_worker_is_killed_at_the_timeout(tmp_path, rendezvous_folders):
    start = time.monotonic()
    with pytest.raises(TimeoutError, match=r"did not finish within 5 s"):
        run_workers(hangs, world_size=2, backend="gloo", timeout=5, args=(str(tmp_path),))
    assert time.monotonic() - start < 15
    assert_gone(tmp_path, 2)
    assert len(rendezvous_folders) == 1 and not Path(rendezvous_folders[0]).exists(), (
        "removed after the kill too")


def test_notebook_functions_travel_by_source_with_what_they_use(notebook_function):
    ns = notebook_function(
        "SCALE = 10.0\n"
        "def helper(v):\n"
        "    return v * SCALE\n"
        "def fn(rank, world_size, offset):\n"
        "    t = torch.tensor([helper(rank) + offset])\n"
        "    dist.all_reduce(t)\n"
        "    return t.item()\n",
        torch=torch, dist=dist)
    assert run_workers(ns["fn"], world_size=2, backend="gloo", args=(1.0,)) == [12.0, 12.0]


def test_notebook_errors_show_the_notebook_line(notebook_function):
    ns = notebook_function("def broken(rank, world_size):\n    return 1 / 0\n")
    with pytest.raises(WorkerError, match="ZeroDivisionError") as info:
        run_workers(ns["broken"], world_size=1, backend="gloo")
    assert "return 1 / 0" in info.value.remote_traceback


def test_what_cannot_travel_is_refused_by_name(notebook_function):
    ns = notebook_function("def uses_lock(rank, world_size):\n    return LOCK.locked()\n",
                           LOCK=threading.Lock())
    with pytest.raises(TypeError, match="'LOCK'"):
        run_workers(ns["uses_lock"], world_size=1)
    with pytest.raises(TypeError, match="lambda"):
        run_workers(notebook_function("f = lambda rank, world_size: rank\n")["f"], world_size=1)


@pytest.mark.parametrize("kwargs, error", [
    ({"world_size": 0}, ValueError), ({"world_size": 2.0}, ValueError),
    ({"backend": "mpi"}, ValueError), ({"timeout": 0}, ValueError), ({"args": 3}, TypeError),
])
def test_bad_arguments_are_refused(kwargs, error):
    with pytest.raises(error):
        run_workers(summed, **kwargs)


def test_fn_must_be_a_function():
    with pytest.raises(TypeError, match="function"):
        run_workers(42)


def test_backend_choice_and_the_environment_checks(monkeypatch):
    assert pick_backend(torch.cuda.device_count() + 1) == "gloo"
    with pytest.raises(ValueError):
        pick_backend(0)
    if torch.cuda.device_count() < 2:
        with pytest.raises(ValueError, match="use backend='gloo'"):
            run_workers(summed, world_size=2, backend="nccl")
    with pytest.raises(RuntimeError, match="no process group"):
        worker_device()
    monkeypatch.delenv("RANK", raising=False)
    with pytest.raises(RuntimeError, match="torchrun"):
        init_from_env()


@pytest.mark.cuda
def test_nccl_one_rank_computes_on_its_gpu_and_results_come_back_on_the_cpu():
    result = run_workers(summed, world_size=1, backend="nccl")[0]
    assert (result["device"] == "cuda:0" and result["sum"].device.type == "cpu"
            and result["sum"].item() == 1.0)


@pytest.mark.cuda
@pytest.mark.skipif(torch.cuda.device_count() < 2,
                    reason="NCCL across ranks needs at least 2 CUDA GPUs")
def test_nccl_all_reduce_over_two_gpus():
    assert pick_backend(2) == "nccl"
    results = run_workers(summed, world_size=2)  # the same call as on CPUs: NCCL is picked
    assert [r["device"] for r in results] == ["cuda:0", "cuda:1"]
    assert [r["sum"].item() for r in results] == [3.0, 3.0]


@pytest.mark.slow
def test_train_ddp_script_under_torchrun_matches_one_process():
    def train(nproc):
        proc = subprocess.run(
            [sys.executable, "-m", "torch.distributed.run", "--standalone",
             f"--nproc_per_node={nproc}",
             "scripts/train_ddp.py", "--steps", "3", "--backend", "gloo"],
            cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True,
            text=True, timeout=180)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return [float(line.split()[-1]) for line in proc.stdout.splitlines()
                if line.startswith("step")], proc.stdout

    losses2, out2 = train(2)
    assert "world size 2, backend gloo" in out2 and len(losses2) == 3, out2
    losses1, _ = train(1)
    assert losses2 == pytest.approx(losses1, rel=1e-4), (
        "2 ranks on halves should train like 1 rank on the whole batch")


def test_a_worker_that_ran_an_unsolved_exercise_shows_one_line():
    from course_utils.exercises import NOT_ATTEMPTED
    stub = WorkerError(0, 2, f"NotImplementedError: {NOT_ATTEMPTED}: replace this line "
                             "with your code", "Traceback ...")
    shown = stub._render_traceback_()
    assert (len(shown) == 1 and "\n" not in shown[0]
            and shown[0].startswith("rank 0 of 2 failed: NotImplementedError"))
    other = WorkerError(1, 2, "ValueError: bad shape", "Traceback (most recent call last): ...")
    assert "---- traceback in rank 1 ----" in "\n".join(other._render_traceback_()), (
        "any other failure shows its traceback")
    assert other.stub is None


def test_a_worker_error_from_a_stub_carries_the_stub_named_by_its_function():
    from course_utils.exercises import NOT_ATTEMPTED, not_attempted_line, uses_your_code
    tb = ('Traceback (most recent call last):\n  File "/x/parallel.py", line 190, in _worker\n'
          '  File "<notebook function sharded_sgd_step>", line 17, in sharded_sgd_step\n'
          'NotImplementedError: ...')
    error = WorkerError(1, 2, f"NotImplementedError: {NOT_ATTEMPTED}: replace this line "
                              "with your code", tb)
    assert type(error.stub) is NotImplementedError and error.stub.exercise == "sharded_sgd_step"
    assert not_attempted_line(error.stub).startswith(f"{NOT_ATTEMPTED}: sharded_sgd_step (")
    with uses_your_code():  # a demonstration that starts workers waits for the exercise in one line
        raise error
    with pytest.raises(WorkerError):
        with uses_your_code():
            raise WorkerError(0, 2, "ValueError: bad shape", "Traceback ...")
