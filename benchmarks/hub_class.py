"""A class on one machine: N learners on `bash course.sh hub`, driven through JupyterHub's REST API
and the kernels' websocket, as N browsers would drive it.

    sudo .venv/bin/python benchmarks/hub_class.py [--learners 40] [--cells 5]
                                                  [--learner-memory-mb 2048] [--reserve-mb 1500]
                                                  [--no-oom] [--no-restart] [--json FILE]

Needs root, npm and a .venv other users can run (as `bash course.sh hub` does); never beside CI. It
makes N learner accounts and an instructor (tests/hub/hubdriver.py: class_hub, removed at the end),
then:
- set-up and start: `course.sh hub` with the roster, until the hub answers;
- the instructor releases LESSON in a JupyterLab terminal of theirs (nbgrader's commands), their
  server stops;
- start: every learner's server asked for at once (POST /hub/api/users/NAME/server, the admin's
  token), while the machine has --reserve-mb and a learner's share left; time until the last is
  ready (GET /hub/api/users), each server's own start time from the hub's log;
- cells: each learner fetches the lesson (nbgrader's /assignments/fetch), opens it (POST
  .../api/sessions: a kernel, as JupyterLab's notebook does) and runs its first --cells code cells
  through the kernel's websocket, all learners at once;
- memory per learner, from their server's cgroup (hub/limits.py): in use, anonymous (private)
  memory, the peak; the proportional share (PSS) of their server and of their kernel; the hub's and
  its proxy's PSS; the machine's memory in use (MemTotal - MemAvailable, sampled every 0.5 s):
  before, peak, after;
- one learner's kernel allocates their limit + 512 MB: the kernel's OOM killer ends it (that
  learner's oom_kill count goes up, no one else's), and every other learner's kernel still answers
  1 + 1;
- restart: the hub stopped and started again as its service's restart does; no learner process left,
  every user still there, every token still works.
Culling is not run here: jupyterhub-idle-culler's shortest timeout the hub accepts is 6 minutes
(hub/classroom.py: MIN_IDLE_MINUTES); tests/hub/test_hub.py checks that the hub runs it.

run_class() is also what tests/hub/test_hub.py runs for its three learners (counts, not times).

Measured (2 cores, 24 GB, cgroup v1, torch 2.13.0+cpu, 2026-11-27), `--learners 40`:
    set-up and start of the hub (40 learners' accounts): 33 s
    start: 40 of 40 servers ready in 77 s (each: median 71.2, p90 73.0, max 75.1 s)
    cells: 200 of 200 ran ok in 63 s, all learners at once
    memory per learner, in use: median 321 MB (anonymous 319, peak 322); server PSS 131 MB,
      kernel PSS 190 MB
    hub: 109 MB PSS, proxy 57 MB, culler 18 MB
    machine in use: before 821 MB, peak 15338 MB, after 6178 MB (of 24106 MB)
    over the limit: the learner's kernel restarting, 1 OOM kill there and 0 elsewhere; the others
      answer: 39 of 39
    restart: 36 s, 41 users, 40 tokens working, learners' processes left: none
"""

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "hub"))
from hubdriver import LESSON, class_hub, why_not

MB = 2 ** 20
# a learner's server and kernel with lesson 01's first cells run (measured: about 320 in use)
LEARNER_GUESS_MB = 450
# a cell of a lesson's first ones, with the whole class running theirs on the machine
CELL_TIMEOUT_S = 600


def meminfo(field: str) -> int:
    """A /proc/meminfo field, in bytes."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


class MachineMemory:
    """The machine's memory in use (MemTotal - MemAvailable), sampled every 0.5 s while the block
    runs."""

    def __enter__(self):
        self.before = self.peak = self.now()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    @staticmethod
    def now() -> int:
        return meminfo("MemTotal") - meminfo("MemAvailable")

    def _sample(self):
        while not self._stop.wait(0.5):
            self.peak = max(self.peak, self.now())

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.after = self.now()
        self.peak = max(self.peak, self.after)


# ---- the hub's REST API, as the instructor (an admin) ----

def admin(hub, method: str, path: str, data: dict | None = None):
    return hub.request(hub.accounts.instructor, method, path, data)


def learner_tokens(hub, names: list[str]) -> None:
    """An API token for each learner, made by the admin (POST /hub/api/users/NAME/tokens)."""
    for name in names:
        if name not in hub.tokens:
            status, answer = admin(hub, "POST", f"/hub/api/users/{name}/tokens",
                                   {"note": "hub_class", "expires_in": 7200})
            assert status == 201, (name, status, answer)
            hub.tokens[name] = answer["token"]


def ask_to_start(hub, name: str) -> int:
    """POST the learner's server; the hub's answer (201 started, 202 pending, 400 running), after
    any 429's wait."""
    while True:
        status, answer = admin(hub, "POST", f"/hub/api/users/{name}/server")
        if status != 429:   # the hub's concurrent_spawn_limit: it says when to ask again
            return status
        time.sleep(2)


def servers(hub) -> dict[str, dict]:
    """{user: their default server's model (ready, pending, state)}, from GET /hub/api/users a page
    at a time (the hub's largest page is 200 users)."""
    found: dict[str, dict] = {}
    while True:
        status, users = admin(hub, "GET", f"/hub/api/users?limit=200&offset={len(found)}")
        assert status == 200, (status, users)
        found.update({u["name"]: (u.get("servers") or {}).get("") or {} for u in users})
        if len(users) < 200:
            return found


def start_servers(hub, names: list[str], reserve_bytes: int, timeout: float) -> dict:
    """Every learner's server asked for at once while the machine keeps reserve_bytes plus a
    learner's guess for each one asked; waited for. Returns {"asked", "ready", "failed",
    "not_asked", "seconds"}."""
    running = {n for n, server in servers(hub).items() if server.get("ready")}
    asked, not_asked, new = [], [], 0
    # a running server is asked for too (the hub answers 400) and costs no more memory
    for name in names:
        fits = (name in running
                or meminfo("MemAvailable") - LEARNER_GUESS_MB * MB * (new + 1) > reserve_bytes)
        (asked if fits else not_asked).append(name)
        new += fits and name not in running
    start = time.monotonic()
    # a POST may wait 10 s for its server (slow_spawn_timeout)
    with ThreadPoolExecutor(max(1, len(asked))) as pool:
        answers = dict(zip(asked, pool.map(lambda n: ask_to_start(hub, n), asked)))
    refused = [n for n, status in answers.items() if status not in (201, 202, 400)]
    while True:
        now = servers(hub)
        ready = [n for n in asked if now.get(n, {}).get("ready")]
        gone = [n for n in asked if n not in ready and not now.get(n, {}).get("pending")]
        if (len(ready) + len(set(gone) | set(refused)) >= len(asked)
                or time.monotonic() - start > timeout):
            break
        time.sleep(1)
    return {"asked": asked, "ready": ready, "failed": sorted(set(asked) - set(ready)),
            "not_asked": not_asked, "seconds": time.monotonic() - start}


def start_times(hub, names: list[str]) -> list[float]:
    """Each server's own start time, from the hub's log ("User NAME took S seconds to start")."""
    took = {}
    for line in hub.log.read_text(errors="replace").splitlines():
        found = re.search(r"User (\S+) took ([\d.]+) seconds to start", line)
        if found and found.group(1) in names:
            took[found.group(1)] = float(found.group(2))
    return list(took.values())


# ---- a notebook's kernel, through its websocket ----

def open_lesson(hub, name: str) -> tuple[str, str, list[str]]:
    """The learner fetches the lesson (unless it is there) and opens it as JupyterLab does: (session
    id, kernel id, the notebook's code cells)."""
    notebook = f"/user/{name}/api/contents/{LESSON}/{LESSON}.ipynb"
    status, model = hub.request(name, "GET", notebook)
    if status == 404:
        hub.assignments(name, "fetch")
        status, model = hub.request(name, "GET", notebook)
    assert status == 200, (name, status, str(model)[:500])
    code = [c["source"] for c in model["content"]["cells"] if c["cell_type"] == "code"]
    status, session = hub.request(name, "POST", f"/user/{name}/api/sessions", {
        "path": f"{LESSON}/{LESSON}.ipynb", "name": f"{LESSON}.ipynb", "type": "notebook",
        "kernel": {"name": "python3"}})
    assert status == 201, (name, status, session)
    return session["id"], session["kernel"]["id"], code


async def execute(hub, name: str, kernel: str, sources: list[str],
                  timeout: float = CELL_TIMEOUT_S) -> list[str]:
    """Run each source in the learner's kernel through its websocket (Jupyter's JSON protocol, no
    subprotocol), one after another; each one's end: its execute_reply's status ("ok", "error"), or
    the kernel's state when it went away meanwhile ("restarting", "dead"; the rest are then not
    run)."""
    from jupyter_client.jsonutil import json_default
    from jupyter_client.session import Session
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    session = Session(username=name)
    url = f"ws{hub.url[4:]}/user/{name}/api/kernels/{kernel}/channels?session_id={session.session}"
    # the connection waits for the kernel to be ready: with a class starting theirs, far past
    # tornado's 20 s
    ws = await websocket_connect(HTTPRequest(url,
                                             headers={"Authorization": f"token {hub.token(name)}"},
                                             connect_timeout=timeout, request_timeout=timeout))
    ends = []
    try:
        for source in sources:
            msg = session.msg("execute_request", {"code": source, "silent": False,
                                                  "store_history": True, "user_expressions": {},
                                                  "allow_stdin": False, "stop_on_error": True})
            msg["channel"] = "shell"
            await ws.write_message(json.dumps(msg, default=json_default))
            reply = idle = None
            while reply is None or not idle:
                raw = await asyncio.wait_for(ws.read_message(), timeout)
                if raw is None:
                    reply, idle = "closed", True
                    break
                # a message with buffers (binary framing): not one we wait for
                if isinstance(raw, bytes):
                    continue
                m = json.loads(raw)
                kind = m.get("header", {}).get("msg_type")
                if (kind == "status"
                        and m["content"].get("execution_state") in ("restarting", "dead")):
                    reply, idle = m["content"]["execution_state"], True
                elif m.get("parent_header", {}).get("msg_id") != msg["header"]["msg_id"]:
                    continue
                elif kind == "execute_reply":
                    reply = m["content"]["status"]
                elif kind == "status" and m["content"].get("execution_state") == "idle":
                    idle = True
            ends.append(reply)
            if reply not in ("ok", "error"):
                break
    finally:
        ws.close()
    return ends


def run(hub, name: str, kernel: str, sources: list[str],
        timeout: float = CELL_TIMEOUT_S) -> list[str]:
    """execute(), with what kept it from ending (a timeout, a refused connection) as the last end:
    one learner's failure is a figure of the class, not the end of the benchmark."""
    try:
        return asyncio.run(execute(hub, name, kernel, sources, timeout))
    except Exception as e:  # reported per learner
        return [f"failed: {type(e).__name__}: {str(e)[:200]}"]


# ---- memory, from a learner's cgroup and /proc ----

def server_pid(hub, name: str) -> int:
    status, user = admin(hub, "GET", f"/hub/api/users/{name}")
    assert status == 200, (status, user)
    return int(user["servers"][""]["state"]["pid"])


def cgroup_of(pid: int) -> tuple[Path, int]:
    """The memory cgroup's directory of a learner's process (hub/limits.py makes it where the
    grader's cgroups go: course_utils.grader.cgroups.BASE, named course-hub-HUBPID-NAME-...), and
    the cgroup version (1 or 2). Found by its name, not by the path /proc shows: in a container that
    path has the container's prefix."""
    from course_utils.grader.cgroups import BASE
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        number, controllers, path = line.split(":", 2)
        name = path.rsplit("/", 1)[-1]
        if not name.startswith("course-hub-"):
            continue
        if "memory" in controllers.split(","):
            return BASE / "memory" / name, 1
        if number == "0" and controllers == "":
            return BASE / name, 2
    raise RuntimeError(f"process {pid} is in no learner's memory cgroup "
                       "(course.sh hub --learner-memory-mb 0?)")


def stat_field(path: Path, field: str) -> int:
    for line in path.read_text().splitlines():
        key, value = line.split()
        if key == field:
            return int(value)
    return 0


def pss(pid: int) -> int:
    """The proportional set size of a process (its private memory and its share of what it shares),
    bytes."""
    try:
        return stat_field_kb(Path(f"/proc/{pid}/smaps_rollup"), "Pss:")
    except OSError:
        return 0


def stat_field_kb(path: Path, field: str) -> int:
    for line in path.read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1]) * 1024
    return 0


def cmdline(pid: int) -> str:
    try:
        return (Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
                .decode(errors="replace"))
    except OSError:
        return ""


def learner_memory(hub, name: str) -> dict:
    """A learner's memory now: their cgroup's use, anonymous memory, peak and OOM kills; their
    server's and their kernels' PSS."""
    where, version = cgroup_of(server_pid(hub, name))
    if version == 1:
        used, peak = (int((where / "memory.usage_in_bytes").read_text()),
                      int((where / "memory.max_usage_in_bytes").read_text()))
        anon, kills = (stat_field(where / "memory.stat", "rss"),
                       stat_field(where / "memory.oom_control", "oom_kill"))
    else:
        used = int((where / "memory.current").read_text())
        peak = (int((where / "memory.peak").read_text()) if (where / "memory.peak").exists()
                else used)
        anon, kills = (stat_field(where / "memory.stat", "anon"),
                       stat_field(where / "memory.events", "oom_kill"))
    pids = [int(p) for p in (where / "cgroup.procs").read_text().split()]
    kernels = [p for p in pids if "ipykernel" in cmdline(p)]
    return {"used": used, "anon": anon, "peak": peak, "oom_kills": kills,
            "server_pss": sum(pss(p) for p in pids
                              if "jupyterhub-singleuser" in cmdline(p)
                              or "jupyter-lab" in cmdline(p)),
            "kernel_pss": sum(pss(p) for p in kernels), "kernels": len(kernels)}


def hub_memory(hub) -> dict:
    """PSS of the hub's process, its proxy and its services (children of the hub that are not
    learners' servers)."""
    hub_pid = hub.proc.pid   # course.sh hub execs jupyterhub
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == hub_pid:
                children.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            pass
    proxy = sum(pss(p) for p in children if "configurable-http-proxy" in cmdline(p))
    culler = sum(pss(p) for p in children if "jupyterhub_idle_culler" in cmdline(p))
    return {"hub_pss": pss(hub_pid), "proxy_pss": proxy, "culler_pss": culler}


# ---- the class ----

def run_class(hub, learners: list[str], cells: int = 5, oom: bool = True, restart: bool = False,
              reserve_bytes: int = 1500 * MB, learner_mb: int = 1024, timeout: float = 600) -> dict:
    """The class's path on a running hub (the lesson released); the figures of each phase, as
    data."""
    figures: dict = {"learners": len(learners)}
    learner_tokens(hub, learners)
    with MachineMemory() as machine:
        started = start_servers(hub, learners, reserve_bytes, timeout)
        ready = started["ready"]
        figures["start"] = {"ready": len(ready), "failed": started["failed"],
                            "not_asked": started["not_asked"], "seconds": started["seconds"],
                            "each": start_times(hub, ready)}
        begin = time.monotonic()
        with ThreadPoolExecutor(max(1, len(ready))) as pool:
            opened = dict(zip(ready, pool.map(lambda n: open_lesson(hub, n), ready)))
            ends = dict(zip(ready, pool.map(
                lambda n: run(hub, n, opened[n][1], opened[n][2][:cells]), ready)))
        figures["cells"] = {"ok": sum(e.count("ok") for e in ends.values()),
                            "asked": cells * len(ready),
                            "not_ok": {n: e for n, e in ends.items() if e != ["ok"] * cells},
                            "seconds": time.monotonic() - begin}
        memory = {n: learner_memory(hub, n) for n in ready}
        figures["memory"] = memory
        figures["hub"] = hub_memory(hub)
        if (oom and len(ready) >= 2
                and meminfo("MemAvailable") < (learner_mb + 512) * MB + reserve_bytes):
            figures["oom"] = {"skipped": "the machine has less than the learner's limit + 512 MB "
                                         "and the reserve free"}
        elif oom and len(ready) >= 2:
            victim, others = ready[0], ready[1:]
            before = {n: memory[n]["oom_kills"] for n in ready}
            took = run(hub, victim, opened[victim][1],
                       [f"data = b'x' * ({learner_mb + 512} * 2 ** 20)"], timeout=300)
            after = {n: learner_memory(hub, n)["oom_kills"] for n in ready}
            with ThreadPoolExecutor(len(others)) as pool:
                answers = dict(zip(others, pool.map(lambda n: run(hub, n, opened[n][1], ["1 + 1"]),
                                                    others)))
            figures["oom"] = {"victim": victim, "victim_kernel": took,
                              "kills": {n: after[n] - before[n] for n in ready},
                              "others_answer": answers}
        for name in ready:
            hub.request(name, "DELETE", f"/user/{name}/api/sessions/{opened[name][0]}")
    figures["machine"] = {"before": machine.before, "peak": machine.peak, "after": machine.after}
    if restart:
        begin = time.monotonic()
        hub.restart()
        users = servers(hub)
        left = [n for n in learners
                if subprocess.run(["pgrep", "-u", n], capture_output=True).returncode == 0]
        tokens = sum(hub.request(n, "GET", "/hub/api/user")[0] == 200 for n in learners)
        figures["restart"] = {"seconds": time.monotonic() - begin, "users": len(users),
                              "processes_left": left, "tokens_working": tokens}
    return figures


def spread(values: list[float], unit: float = 1.0, digits: int = 0) -> str:
    if not values:
        return "none"
    values = sorted(v / unit for v in values)
    p90 = values[min(len(values) - 1, int(0.9 * len(values)))]
    return (f"median {statistics.median(values):.{digits}f}, p90 {p90:.{digits}f}, "
            f"max {values[-1]:.{digits}f}")


def report(f: dict, setup_s: float) -> None:
    s = f["start"]
    print(f"set-up and start of the hub ({f['learners']} learners' accounts): {setup_s:.0f} s")
    print(f"start: {s['ready']} of {f['learners']} servers ready in {s['seconds']:.0f} s "
          f"(each: {spread(s['each'], digits=1)} s); "
          f"failed {s['failed'] or 'none'}; not asked (memory reserve) {len(s['not_asked'])}")
    c = f["cells"]
    print(f"cells: {c['ok']} of {c['asked']} ran ok in {c['seconds']:.0f} s, all learners at once; "
          f"not ok: {c['not_ok'] or 'none'}")
    m = f["memory"].values()
    for key, label in (("used", "in use"), ("anon", "anonymous"), ("peak", "peak"),
                       ("server_pss", "server PSS"), ("kernel_pss", "kernel PSS")):
        print(f"memory per learner, {label}: {spread([x[key] for x in m], MB)} MB")
    h = f["hub"]
    print(f"hub: {h['hub_pss'] / MB:.0f} MB PSS, proxy {h['proxy_pss'] / MB:.0f} MB, "
          f"culler {h['culler_pss'] / MB:.0f} MB")
    mm = f["machine"]
    print(f"machine in use: before {mm['before'] / MB:.0f} MB, peak {mm['peak'] / MB:.0f} MB, "
          f"after {mm['after'] / MB:.0f} MB (of {meminfo('MemTotal') / MB:.0f} MB)")
    if "oom" in f and "skipped" in f["oom"]:
        print(f"over the limit: not tried: {f['oom']['skipped']}")
    elif "oom" in f:
        o = f["oom"]
        print(f"over the limit: {o['victim']}'s kernel {o['victim_kernel']}, "
              f"OOM kills {o['kills'][o['victim']]} there and "
              f"{sum(v for n, v in o['kills'].items() if n != o['victim'])} elsewhere; "
              "the others answer 1 + 1: "
              f"{sum(a == ['ok'] for a in o['others_answer'].values())} "
              f"of {len(o['others_answer'])}")
    if "restart" in f:
        r = f["restart"]
        print(f"restart: {r['seconds']:.0f} s, {r['users']} users, "
              f"{r['tokens_working']} tokens working, "
              f"learners' processes left: {r['processes_left'] or 'none'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--learners", type=int, default=40)
    parser.add_argument("--cells", type=int, default=5,
                        help="the lesson's first code cells each learner runs")
    parser.add_argument("--learner-memory-mb", type=int, default=2048,
                        help="course.sh hub --learner-memory-mb")
    parser.add_argument("--reserve-mb", type=int, default=1500,
                        help="memory the machine keeps: no server asked past it")
    parser.add_argument("--no-oom", action="store_true")
    parser.add_argument("--no-restart", action="store_true")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    if (reason := why_not()) is not None:
        print(f"hub_class: {reason}", file=sys.stderr)
        return 2
    import torch
    print(f"# {os.cpu_count()} cores, MemTotal {meminfo('MemTotal') / MB:.0f} MB, "
          f"cgroup v{2 if Path('/sys/fs/cgroup/cgroup.controllers').exists() else 1}, "
          f"torch {torch.__version__}, "
          f"{time.strftime('%Y-%m-%d')}", flush=True)
    begin = time.monotonic()
    with class_hub(learners=args.learners, learner_mb=args.learner_memory_mb) as hub:
        setup_s = time.monotonic() - begin
        instructor = hub.accounts.instructor
        hub.start_server(instructor)
        hub.wait_for_server(instructor)
        hub.instructor("generate_assignment", LESSON, "--force")
        hub.instructor("release_assignment", LESSON, "--force")
        admin(hub, "DELETE", f"/hub/api/users/{instructor}/server")
        figures = run_class(hub, hub.accounts.learners, cells=args.cells, oom=not args.no_oom,
                            restart=not args.no_restart, reserve_bytes=args.reserve_mb * MB,
                            learner_mb=args.learner_memory_mb)
        report(figures, setup_s)
        if args.json:
            args.json.write_text(json.dumps(figures, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
