"""course_utils.grader.peakmemory and the grader's use of it: peak memory measured by the kernel,
from outside the learner's process, where grading runs as root with a memory cgroup."""

import os
import subprocess
import sys

import pytest

from course_utils import judging
from course_utils.grader import peakmemory
from course_utils.grader.cgroups import Cgroup
from course_utils.grader.peakmemory import PeakMemory
from course_utils.grader.capabilities import measures_memory
from course_utils.grader.worker import Limits, Worker

MB = 2 ** 20
needs_cgroup = pytest.mark.skipif(not measures_memory(),
                                  reason="needs grading as root with a memory cgroup (a container "
                                         "or VM; CI has one)")


def test_nothing_measured_without_a_cgroup(tmp_path):
    peak = PeakMemory([tmp_path])
    assert not peak.available
    assert peak.reset() is False and peak.read() is None
    assert PeakMemory([]).read() is None


def test_a_judge_sees_no_numbers_outside_the_grader():
    assert judging.memory_peaks() is None


def test_the_reference_takes_its_cgroup_from_the_environment_once(monkeypatch, tmp_path):
    monkeypatch.setenv("COURSE_CGROUPS", str(tmp_path))  # no memory files there: nothing to measure
    assert peakmemory.from_environment() is None
    assert "COURSE_CGROUPS" not in os.environ, ("the variable is consumed, so the lesson's code "
                                                "never sees it")


@needs_cgroup
def test_peak_counts_every_process_in_the_cgroup_and_resets():
    """A child that touches 200 MB and exits still shows in the peak; reset() forgets it."""
    cgroup = Cgroup(f"course-test-peak-{os.getpid()}", 2 ** 30, 64)
    try:
        peak = PeakMemory(cgroup.dirs)
        assert peak.available
        script = ("import sys; b = bytearray(200 * 2 ** 20); b[::4096] = b'x' * len(b[::4096]); "
                  "sys.stdout.write('done')")
        join = ('for d in "$@"; do echo $$ > "$d/cgroup.procs"; done; exec '
                + f"{sys.executable} -c \"{script}\"")
        assert peak.reset()
        out = subprocess.run(["/bin/sh", "-c", join, "sh", *map(str, cgroup.dirs)],
                             capture_output=True, text=True, timeout=60)
        assert out.stdout == "done", out.stderr
        assert peak.read() >= 200 * MB
        assert peak.reset()
        assert peak.read() < 50 * MB, ("after reset the peak is what is in use now (nothing: the "
                                       "child is gone)")
        peak.close()
    finally:
        cgroup.remove()


def peaks(*sources: str) -> list[tuple[str | None, int]]:
    """Run each cell in one learner worker (after `import torch`); (the error it raised, the peak
    memory the grader measured over it) for each."""
    seen = []
    with Worker("learner", Limits()) as w:
        w.send({"op": "cell", "id": 0, "gid": None, "source": "import torch"}, timeout=120)
        for i, source in enumerate(sources, 1):
            w.reset_peak()
            answer = w.send({"op": "cell", "id": i, "gid": None, "source": source}, timeout=60)
            seen.append((answer["error"], w.peak_bytes()))
    return seen


@needs_cgroup
def test_the_learners_worker_is_measured_from_outside_and_cannot_hide_memory():
    """The peak over a cell includes memory the learner's code used and freed, or used in a child
    process, whatever the code does to its own process afterwards."""
    (_, idle), (_, used), (_, forked) = peaks(
        "x = 1",
        "t = torch.ones(300 * 2 ** 20 // 8, dtype=torch.float64)\ndel t",
        "import os\npid = os.fork()\nif pid == 0:\n    b = bytearray(300 * 2 ** 20)\n"
        "    b[::4096] = b'x' * len(b[::4096])\n"
        "    os._exit(0)\nos.waitpid(pid, 0)\n"
        "try:\n    open('/proc/self/clear_refs', 'w').write('5')\nexcept OSError:\n    pass\n")
    assert used - idle >= 290 * MB
    assert forked - idle >= 290 * MB


@needs_cgroup
def test_the_reference_worker_is_charged_from_its_start():
    """The reference joins its cgroup before Python starts, so its peaks compare with a
    learner's."""
    with Worker("reference", Limits()) as w:
        w.send({"op": "cell", "id": 0, "gid": None, "source": "import torch"}, timeout=120)
        usage = PeakMemory(w._cgroup.dirs)
        usage.reset()
        assert usage.read() > 50 * MB, "torch's import is charged to the reference's cgroup"
        usage.close()


PARK_IN_SOCKETS = """import socket
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen(64)
pairs, parked = [], 0
for _ in range(24):
    client = socket.create_connection(server.getsockname())
    pairs.append((client, server.accept()[0]))
    client.setblocking(False)
    try:
        while parked < 48 * 2 ** 20:
            parked += client.send(b"x" * 65536)
    except OSError:  # this connection's buffers are full
        pass
for a, b in pairs:
    a.close()
    b.close()
"""


@needs_cgroup
def test_data_parked_in_socket_buffers_is_counted():
    """Loopback TCP buffers are kernel memory that v1 cgroups count only when told to: a cheat could
    otherwise keep a summed graph's activations there, out of the measured peak."""
    (_, idle), (error, parked) = peaks("y = 2", PARK_IN_SOCKETS)
    assert error is None
    assert parked - idle >= 32 * MB, (f"only {(parked - idle) / MB:.0f} MB of the ~48 MB in socket "
                                      "buffers was counted")
