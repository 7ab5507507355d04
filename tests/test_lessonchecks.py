"""course_utils.lessonchecks: each lesson's checks are its test cells' checks, one for one.

Every test cell of lesson NN runs a Check of course_utils.lessonchecks.lNN (tests/test_lessons.py:
the cell's shape), and every Check of that module is run by exactly one test cell: no check is
written for nothing or shared by two exercises. Whether the checks grade right is tested by grading
the lesson's solution, untouched notebook, mutants and alternates
(tests/grader/test_preprocessors.py). Also: course_utils.lessonchecks.workers.run_cases, which runs
the cases of the checks that start real process groups (lessons 08, 09 and 11), one group per
world size, each failure kept with its own case; and lesson 11's judges on hand-made observations
(tp_mlp's ranks, one_f_one_b's grids), with its collective counter in a real process group.
"""

import importlib
import re
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F

from course_utils import judging, parallel
from course_utils.authoring import nbgrader_cli
from course_utils.grader import lessonfile
from course_utils.lessonchecks import l08, l11
from course_utils.lessonchecks.workers import run_cases

ROOT = Path(__file__).resolve().parent.parent
LESSONS = nbgrader_cli.lessons(ROOT, graded=True)


def checks_of(name: str) -> dict[str, judging.Check]:
    try:
        module = importlib.import_module(f"course_utils.lessonchecks.l{name[:2]}")
    except ModuleNotFoundError:
        return {}
    return {k: v for k, v in vars(module).items() if isinstance(v, judging.Check)}


@pytest.mark.parametrize("name", LESSONS)
def test_each_check_of_a_lesson_is_run_by_one_of_its_test_cells(name):
    checks = checks_of(name)
    if not checks:
        pytest.skip(f"{name} has no module in course_utils.lessonchecks yet")
    lesson = lessonfile.load_lesson(nbgrader_cli.notebook_path(ROOT, "solutions", name))
    used = [m.group(1) for t in lesson.tests
            for m in re.finditer(r"^([A-Z][A-Z0-9_]*)\.hidden\(", t.source, re.M)]
    assert sorted(used) == sorted(set(used)), f"{name}: a Check is run by two test cells: {used}"
    assert set(used) == set(checks), (f"{name}: Checks no test cell runs: "
                                      f"{sorted(set(checks) - set(used))}; "
                                      "test cells whose Check is not in the module: "
                                      f"{sorted(set(used) - set(checks))}")
    for key, check in checks.items():
        assert callable(check.probe) and callable(check.judge) and check.name, (
            f"{name}: {key} is incomplete")




# Lesson 08's average_gradients as learners write it (a notebook function, sent by its source), run
# by run_cases with the lesson's own worker. With 3 ranks and a frozen parameter, "raises" fails on
# rank 1 and "hangs" leaves rank 0 out of the all_reduce.
AVERAGE = """
def average_gradients(model):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    if MISTAKE == "stub":
        # the stub
        raise NotImplementedError("Exercise not attempted yet: replace this line with your code")
    if MISTAKE == "float64":
        torch.set_default_dtype(torch.float64)   # left so for whatever runs next in this process
    frozen = any(p.grad is None for p in model.parameters())
    if MISTAKE == "raises" and world_size == 3 and frozen and rank == 1:
        raise ValueError("on purpose")
    if MISTAKE == "hangs" and world_size == 3 and frozen and rank == 0:
        return
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad)
            p.grad /= world_size
"""


def average(notebook_function, mistake=None):
    return notebook_function(AVERAGE, dist=dist, torch=torch, MISTAKE=mistake)["average_gradients"]


def one_process(cases):
    """What every rank must end with: the gradients of one process on the whole batch (lesson 08's
    expect)."""
    want = []
    for _, seed, kind in cases:
        model, X, y = l08.dp_problem(seed, kind)
        F.cross_entropy(model(X), y).backward()
        want.append([p.grad for p in model.parameters()])
    return want


@pytest.fixture
def launches(monkeypatch):
    """The world size of every process group run_cases starts."""
    sizes, real = [], parallel.run_workers

    def counted(*args, **kwargs):
        sizes.append(kwargs["world_size"])
        return real(*args, **kwargs)
    monkeypatch.setattr(parallel, "run_workers", counted)
    return sizes


def test_run_cases_starts_one_process_group_per_world_size_and_keeps_each_cases_results(
        launches, notebook_function):
    cases = [(2, 0, "plain"), (1, 3, "plain"), (2, 2, "frozen"), (3, 1, "plain"), (1, 4, "float32"),
             (3, 5, "frozen")]
    found = run_cases(l08._dp_worker, average(notebook_function), cases, "average_gradients")
    # raises AssertionError on any wrong rank
    l08.AVERAGE_GRADIENTS.judge(found, one_process(cases), cases)
    assert [len(ranks) for ranks in found] == [2, 1, 2, 3, 1, 3]
    assert launches == [2, 1, 3], "one group per world size, in the order of their first case"


def test_a_failure_in_a_group_is_told_apart_case_by_case_as_one_group_per_case_tells_it(
        launches, notebook_function):
    """The failing case gets its own failure, the cases before it their results, the ones after it
    None: what one group per case found. Only the failed group's cases (up to the failure) run
    again."""
    cases = [(2, 0, "plain"), (3, 1, "plain"), (3, 5, "frozen"), (2, 2, "frozen"), (3, 6, "plain")]
    found = run_cases(l08._dp_worker, average(notebook_function, "raises"), cases,
                      "average_gradients")
    l08.AVERAGE_GRADIENTS.judge(found[:2], one_process(cases[:2]), cases[:2])
    assert found[2]["rank_raised"] == "ValueError" and "WorkerError" in found[2]["raised"]
    assert found[3:] == [None, None]
    assert launches == [2, 3, 3, 3], ("the two groups, then the failed group's cases alone up "
                                      "to the failure")


def test_a_rank_left_alone_in_a_group_is_its_own_cases_failure(launches, notebook_function):
    cases = [(3, 1, "plain"), (3, 5, "frozen"), (1, 3, "plain")]
    found = run_cases(l08._dp_worker, average(notebook_function, "hangs"), cases,
                      "average_gradients", timeout=10)
    l08.AVERAGE_GRADIENTS.judge(found[:1], one_process(cases[:1]), cases[:1])
    assert "TimeoutError" in found[1]["raised"] or found[1]["others_returned"] is True, found[1]
    assert found[2] is None
    assert launches == [3, 3, 3], "the group stops the rest; its cases run alone up to the hang"


def test_one_case_that_fails_alone_is_not_run_again_and_an_untouched_stub_is_raised_at_once(
        launches, notebook_function):
    cases = [(3, 5, "frozen"), (2, 0, "plain")]
    found = run_cases(l08._dp_worker, average(notebook_function, "raises"), cases,
                      "average_gradients")
    assert found[0]["rank_raised"] == "ValueError" and found[1] is None
    assert launches == [3], "a group of one case is that case: its failure is already told apart"
    launches.clear()
    with pytest.raises(NotImplementedError) as stub:
        run_cases(l08._dp_worker, average(notebook_function, "stub"),
                  [(2, 0, "plain"), (2, 1, "plain")], "average_gradients")
    assert stub.value.exercise == "average_gradients" and launches == [2]


def test_a_function_that_cannot_travel_is_the_first_cases_failure_with_its_hint(
        launches, notebook_function):
    # a notebook's lambda
    lam = notebook_function("average_gradients = lambda model: None\n")["average_gradients"]
    found = run_cases(l08._dp_worker, lam, [(2, 0, "plain"), (1, 3, "plain")], "average_gradients")
    assert launches == []
    assert "TypeError" in found[0]["raised"] and found[1] is None
    with pytest.raises(AssertionError, match="must be a plain def function"):
        l08.AVERAGE_GRADIENTS.judge(found, one_process([(2, 0, "plain"), (1, 3, "plain")]),
                                    [(2, 0, "plain"), (1, 3, "plain")])


def test_each_case_of_a_group_starts_from_torchs_defaults(launches, notebook_function):
    """A learner's function that changes torch's default dtype changes nothing for the next case (in
    a process of its own it would not have): the models of later cases are built as one process
    builds them."""
    cases = [(2, 0, "plain"), (2, 2, "plain"), (2, 6, "frozen")]
    found = run_cases(l08._dp_worker, average(notebook_function, "float64"), cases,
                      "average_gradients")
    l08.AVERAGE_GRADIENTS.judge(found, one_process(cases), cases)
    assert launches == [2]


def test_the_capstones_batches_have_losses_that_differ_and_are_the_same_each_time_they_are_built():
    """lessonchecks.l10.capstone_inputs: the same case twice is the same model, gradients and batch;
    the first half of its batch has a clearly higher mean loss than the second (so returning one
    micro-batch's loss fails the 2 % check), and a bfloat16-autocast step still updates within 1 %
    of the float32 step."""
    from course_utils.lessonchecks import l10

    config, batch, seed = (64, 32, 4, 2, 64), 16, 5
    (m1, _, x1, y1), (m2, _, x2, y2) = (l10.capstone_inputs(config, batch, seed),
                                        l10.capstone_inputs(config, batch, seed))
    assert torch.equal(l10.flat(m1), l10.flat(m2)) and torch.equal(x1, x2) and torch.equal(y1, y2)
    assert all(torch.equal(a.grad, b.grad) for a, b in zip(m1.parameters(), m2.parameters()))
    with torch.no_grad():
        first, second = (float(m1.loss(m1(x), y)) for x, y in zip(x1.chunk(2), y1.chunk(2)))
        whole = float(m1.loss(m1(x1), y1))
    assert first > 1.2 * second, (first, second)
    assert abs(second - whole) / whole > 5 * l10.UPDATE_RTOL, (second, whole)

    want = l10.plain_step_measured(config, batch, seed)["update"]
    model, optimizer, idx, targets = l10.capstone_inputs(config, batch, seed)
    before = l10.flat(model)
    optimizer.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = model.loss(model(idx), targets)
    loss.backward()
    optimizer.step()
    assert float((l10.flat(model) - before - want).norm() / want.norm()) < l10.UPDATE_RTOL / 2


def test_the_capstones_judge_names_a_step_hidden_from_counters_and_one_that_skips_micro_batches():
    """A fit_step whose work the counters never saw (FLOPs 0, peak 0) fails on its FLOPs; one that
    kept only some micro-batches' gradients (a quarter of the update, a quarter of the FLOPs) is
    told about its update first."""
    from course_utils.lessonchecks import l10

    case = ((32, 32, 2, 2, 32), 16, 1, 0)
    want = l10.plain_step_measured(*case[:2], case[3])
    fine = {"value": want["loss"], "peak": 2 ** 19, "flops": want["flops"],
            "calls": want["calls"], "steps": 1,
            "dtypes": ["torch.float32"], "update": want["update"].clone()}
    l10._judge_case(fine, want, case)   # the plain step's own numbers, within budget: passes
    with pytest.raises(AssertionError, match=r"counters saw 0\.00 times the plain step's "
                                             r"floating-point operations"):
        l10._judge_case({**fine, "peak": 0, "flops": 0, "calls": 1}, want, case)
    with pytest.raises(AssertionError, match="differs from the plain full-batch step's"):
        l10._judge_case({**fine, "flops": want["flops"] // 4, "update": want["update"] / 4}, want,
                        case)



# Lesson 11's judges on hand-made observations. tp_mlp: every rank's outputs as its worker would
# send them (l11._tp_worker), built here from one process's autograd; one_f_one_b: grids.

def tp_whole(case) -> dict:
    """What tp_mlp's hidden cell's expect() gives for a case: one process's autograd on the whole
    MLP."""
    _, seed, b, d, h, dtype = case
    x, dy, W1, b1, W2, b2 = l11.tp_problem(seed, b, d, h, dtype)
    for t in (x, W1, b1, W2, b2):
        t.requires_grad_()
    y = torch.tanh(x @ W1.T + b1) @ W2.T + b2
    y.backward(dy)
    return {"y": y.detach(), "dx": x.grad, "dW1": W1.grad, "db1": b1.grad, "dW2": W2.grad,
            "db2": b2.grad}


TWO_ALL_REDUCES = [2] + [0] * (len(l11.KINDS) - 1)


def tp_observed(case, whole, change=None, counts=TWO_ALL_REDUCES, summed=None) -> list:
    """Every rank's observation: its right shards, then change(rank, outputs, problem); summed: what
    the first all_reduce summed (None: not recorded)."""
    n, k = case[0], case[4] // case[0]
    found = []
    for r in range(n):
        rows = slice(r * k, (r + 1) * k)
        out = {"y": whole["y"], "dx": whole["dx"], "dW1": whole["dW1"][rows],
               "db1": whole["db1"][rows], "dW2": whole["dW2"][:, rows], "db2": whole["db2"]}
        out = {key: v.clone() for key, v in out.items()}
        if change is not None:
            out = change(r, out, l11.tp_problem(*case[1:]))
        found.append({"returned": "dict", "outputs": out, "collectives": list(counts),
                      "first_summed": summed})
    return found


def tp_judge(case, change=None, counts=TWO_ALL_REDUCES, outputs=None):
    whole = tp_whole(case)
    found = tp_observed(case, whole, change, counts)
    if outputs is not None:
        found[0]["outputs"], found[0]["returned"] = outputs
    l11.TP_MLP.judge([found], [whole], [case])


def partial_y(r, n, problem):
    x, _, W1, b1, W2, _ = problem
    k = W1.shape[0] // n
    rows = slice(r * k, (r + 1) * k)
    return torch.tanh(x @ W1[rows].T + b1[rows]) @ W2[:, rows].T


TP_CASE = (2, 1, 3, 5, 12, "float64")


def _with(key, value):
    return lambda r, out, problem: {**out, key: value(r, out, problem)}


@pytest.mark.parametrize("change, counts, match", [
    (_with("y", lambda r, out, pr: partial_y(r, 2, pr) + pr[5]), None,
     r"rank 0's y: not the expected values .*partial sum on each rank: all_reduce it \(SUM\)"),
    (_with("y", lambda r, out, pr: out["y"] + pr[5]), None,
     "so it is counted 2 times: add it after"),
    (_with("y", lambda r, out, pr: out["y"] - pr[5]), None, "b2 is missing"),
    (_with("dx", lambda r, out, pr: out["dx"] + 0.3), None,
     r"rank 0's dx: not the expected values \(largest difference 0\.3\)\.$"),
    (lambda r, out, pr: {k: 2 * v if k != "y" else v for k, v in out.items()}, None,
     "rank 0's dx: .*dy was all-reduced again in the backward"),
    (_with("db2", lambda r, out, pr: 2 * out["db2"]), None, "db2 was summed over the ranks"),
    (_with("dW1", lambda r, out, pr: torch.zeros(12, 5, dtype=torch.float64)), None,
     r"rank 0's dW1 has shape \(12, 5\), expected \(6, 5\): the whole dW1's shape"),
    (_with("dW2", lambda r, out, pr: out["dW2"].T.contiguous()), None,
     r"dW2 has shape \(6, 5\), expected \(5, 6\): transposed\?"),
    (_with("db1", lambda r, out, pr: out["db1"].float()), None,
     "rank 0's db1 has dtype torch.float32, expected torch.float64: keep the inputs' dtype"),
    (_with("dW2", lambda r, out, pr: "DTensor"), None,
     r"dW2 should be a torch.Tensor, got DTensor: return its local shard \(\.to_local\(\)\)"),
    (_with("db2", lambda r, out, pr: None), None, r"rank 0's dict has no \['db2'\]"),
    (None, [3] + [0] * (len(l11.KINDS) - 1),
     "rank 0 made 3 all_reduce calls: exactly one all_reduce in the forward"),
    (None, [2, 1] + [0] * (len(l11.KINDS) - 2), "made 2 all_reduce calls and 1 all_gather"),
    (None, [0] * len(l11.KINDS), "rank 0 made no collective"),
    (None, [2, 0, 0, 1, 0, 0, 0, 3, 0], "1 broadcast and 3 scatter: .*src_data_rank=None"),
])
def test_tp_mlps_judge_names_each_mistake(change, counts, match):
    tp_judge(TP_CASE)   # the right shards pass
    with pytest.raises(AssertionError, match=match) as failed:
        tp_judge(TP_CASE, change, counts or TWO_ALL_REDUCES)
    assert str(failed.value).startswith("tp_mlp with 2 ranks, x of shape (3, 5), h = 12, "
                                        "float64"), "the message names the case"


def test_tp_mlps_judge_names_each_ranks_shard_and_the_split_of_the_weights():
    case = (4, 3, 5, 4, 8, "float32")
    whole = tp_whole(case)
    tp_judge(case)
    # rank 2 of 4 returned rank 3's rows, then rows 2, 6 (a strided split)
    for rows, match in ((slice(6, 8), "this is rank 3's shard: .* here 4 .. 5"),
                        (slice(2, None, 4), r"hidden units 2, 6, 10, ... \(a strided split\)")):
        found = tp_observed(case, whole)
        found[2]["outputs"]["db1"] = whole["db1"][rows].clone()
        with pytest.raises(AssertionError, match=f"rank 2's db1: .*{match}"):
            l11.TP_MLP.judge([found], [whole], [case])
    for key, shape, match in (("dW1", (8, 1), r"W1 is split by its rows, the output features "
                                              r"\(column-parallel\), not its columns"),
                              ("dW2", (1, 8), r"W2 is split by its columns, the input features "
                                              r"\(row-parallel\), not its rows")):
        found = tp_observed(case, whole)
        found[0]["outputs"][key] = torch.zeros(shape)
        with pytest.raises(AssertionError, match=match):
            l11.TP_MLP.judge([found], [whole], [case])
    # float32's tolerance: a relative error of 1e-7 passes, 1e-3 does not
    found = tp_observed(case, whole)
    found[1]["outputs"]["y"] *= 1 + 1e-7
    l11.TP_MLP.judge([found], [whole], [case])
    found[1]["outputs"]["y"] *= 1 + 1e-3
    with pytest.raises(AssertionError, match="rank 1's y: not the expected values"):
        l11.TP_MLP.judge([found], [whole], [case])


def test_tp_mlps_judge_names_the_whole_mlp_computed_on_every_rank():
    """Every rank computes the whole MLP, all-reduces it and divides by N: the right values and two
    all_reduces, but no split; what the first all_reduce summed tells it from the partial sum (and
    from a partial sum with b2 / N added, which is right)."""
    case = (2, 0, 4, 6, 8, "float64")
    whole = tp_whole(case)
    for summed in (whole["y"], whole["y"] - l11.tp_problem(*case[1:])[5]):
        with pytest.raises(AssertionError, match="no split at all"):
            l11.TP_MLP.judge([tp_observed(case, whole, summed=summed.clone())], [whole], [case])
    x, dy, W1, b1, W2, b2 = l11.tp_problem(*case[1:])
    partial = torch.tanh(x @ W1[:4].T + b1[:4]) @ W2[:, :4].T
    for summed in (partial, partial + b2 / 2):
        l11.TP_MLP.judge([tp_observed(case, whole, summed=summed)], [whole], [case])


def test_tp_mlps_judge_takes_no_collective_with_one_rank_and_names_a_result_that_is_no_dict():
    case = (1, 2, 2, 3, 4, "float64")
    tp_judge(case, counts=[0] * len(l11.KINDS))   # DTensor makes none on one rank
    with pytest.raises(AssertionError, match=r"made 1 all_reduce: .*\(with one rank, no "
                                             r"collective at all is fine too\)"):
        tp_judge(case, counts=[1] + [0] * (len(l11.KINDS) - 1))
    with pytest.raises(AssertionError, match="tp_mlp should return a dict with the keys "
                                             r"\['y', 'dx', 'dW1', 'db1', 'dW2', 'db2'\], got a "
                                             "tuple on rank 0"):
        tp_judge(case, outputs=(None, "tuple"))
    failed = {"raised": ("WorkerError", "RuntimeError", "Exception", "BaseException", "object"),
              "rank_raised": "RuntimeError", "others_returned": False}
    with pytest.raises(AssertionError, match="tp_mlp with 1 rank, .*the workers failed: a rank "
                                             "raised RuntimeError"):
        l11.TP_MLP.judge([failed], [tp_whole(case)], [case])


# A tensor-parallel MLP as learners write it (a notebook function): MISTAKE "extra" sums y with a
# functional collective and, with one rank only, all_gathers x for nothing.
TP_MLP_SOURCE = """
def tp_mlp(x, dy, W1, b1, W2, b2):
    rank, n = dist.get_rank(), dist.get_world_size()
    k = W1.shape[0] // n
    rows = slice(rank * k, (rank + 1) * k)
    t = torch.tanh(x @ W1[rows].T + b1[rows])
    y = t @ W2[:, rows].T
    if MISTAKE == "extra":
        y = funcol.all_reduce(y, "sum", dist.group.WORLD)
        if n == 1:
            dist.all_gather([torch.empty_like(x)], x)
    else:
        dist.all_reduce(y)
    dz = (dy @ W2[:, rows]) * (1 - t * t)
    dx = dz @ W1[rows]
    dist.all_reduce(dx)
    return {"y": y + b2, "dx": dx, "dW1": dz.T @ x, "db1": dz.sum(0), "dW2": dy.T @ t,
            "db2": dy.sum(0)}
"""


def test_tp_mlp_runs_in_process_groups_and_every_kind_of_collective_is_counted(notebook_function):
    """The probe in real gloo groups: plain and functional all_reduces both count as all_reduce;
    an all_gather is named."""
    import torch.distributed._functional_collectives as funcol
    cases = [(2, 0, 4, 6, 8, "float64"), (1, 2, 2, 3, 4, "float64")]
    fn = notebook_function(TP_MLP_SOURCE, dist=dist, torch=torch, funcol=funcol,
                           MISTAKE="extra")["tp_mlp"]
    found = l11.TP_MLP.probe(fn, cases)
    want = [tp_whole(case) for case in cases]
    l11.TP_MLP.judge(found[:1], want[:1], cases[:1])
    with pytest.raises(AssertionError, match="tp_mlp with 1 rank, .*: rank 0 made 2 all_reduce "
                                             "calls and 1 all_gather: exactly one"):
        l11.TP_MLP.judge(found, want, cases)


def greedy_1f1b(p, m, bound=None) -> list:
    """1F1B by a greedy rule: at each step each stage runs a backward when its gradient is there,
    else a forward when its input is there and it holds fewer than bound(s), min(m, p - s)."""
    bound = bound or (lambda s: min(m, p - s))
    steps = 2 * (m + p - 1)
    grid, never = [[""] * steps for _ in range(p)], steps
    f_at, b_at = [[never] * m for _ in range(p)], [[never] * m for _ in range(p)]
    done_f, done_b = [0] * p, [0] * p
    for t in range(3 * steps):   # more steps than allowed, to see how many it needs
        for s in range(p):
            j, k = done_b[s], done_f[s]
            source = f_at[s] if s == p - 1 else b_at[s + 1]
            if j < m and source[j] < t:
                b_at[s][j], done_b[s] = t, j + 1
            elif k < m and k - j < bound(s) and (s == 0 or f_at[s - 1][k] < t):
                f_at[s][k], done_f[s] = t, k + 1
    last = max(max(row) for row in b_at)
    grid = [[""] * (last + 1) for _ in range(p)]
    for s in range(p):
        for j in range(m):
            grid[s][f_at[s][j]], grid[s][b_at[s][j]] = f"F{j}", f"B{j}"
    return grid


def closed_1f1b(p, m) -> list:
    """1F1B in closed form: F j at s + j (warm-up, j < p - s) or s + 2j, B j at 2p - s - 1 + 2j."""
    grid = [[""] * (2 * (m + p - 1)) for _ in range(p)]
    for s in range(p):
        for j in range(m):
            grid[s][s + j if j < p - s else s + 2 * j] = f"F{j}"
            grid[s][2 * p - s - 1 + 2 * j] = f"B{j}"
    return grid


def one_f_one_b_want(p, m) -> dict:
    """one_f_one_b's hidden cell's expect() for one case."""
    return {"steps": 2 * (m + p - 1), "in_flight": [min(m, p - s) for s in range(p)]}


def pipe_judge(p, m, grid):
    l11.ONE_F_ONE_B.judge({"values": [{"value": grid}], "raised": []}, [one_f_one_b_want(p, m)],
                          {"values": [(p, m)], "bad": []})


def test_the_greedy_1f1b_takes_2_m_plus_p_minus_1_steps_is_the_closed_form_and_passes():
    for p in range(1, 9):
        for m in range(1, 20):
            grid = greedy_1f1b(p, m)
            assert len(grid[0]) == 2 * (m + p - 1), (p, m)
            assert grid == closed_1f1b(p, m), (p, m)
            pipe_judge(p, m, grid)


def gpipe(p, m) -> list:
    """Lesson 08's gpipe_schedule."""
    steps = 2 * (m + p - 1)
    grid = [[""] * steps for _ in range(p)]
    for s in range(p):
        for j in range(m):
            grid[s][s + j] = f"F{j}"
            grid[s][(m + p - 1) + (p - 1 - s) + j] = f"B{j}"
    return grid


def edited(grid, *changes) -> list:
    """grid with (stage, step, entry) changes; an entry None shortens the row to that step."""
    grid = [list(row) for row in grid]
    for s, t, entry in changes:
        if entry is None:
            del grid[s][t:]
        else:
            grid[s][t] = entry
    return grid


@pytest.mark.parametrize("p, m, grid, match", [
    (4, 8, gpipe(4, 8), r"one_f_one_b\(4, 8\): stage 0 holds 8 micro-batches after step 7; 1F1B "
                        r"holds at most min\(m, p - s\) = 4 there: that is GPipe's order"),
    (4, 4, gpipe(4, 4), "stage 1 holds 4 micro-batches .* = 3 there: that is GPipe's order"),
    (4, 8, greedy_1f1b(4, 8, bound=lambda s: 4), "stage 1 holds 4 micro-batches after step 4; "
     r"1F1B holds at most min\(m, p - s\) = 3 there: a bound of p \(or m\) on every stage is too "
     "loose"),
    (4, 8, greedy_1f1b(4, 8, bound=lambda s: 4 - s + (s == 2)), "stage 2 holds 3 micro-batches "
     r"after step 4; 1F1B holds at most min\(m, p - s\) = 2 there: run a backward as soon as its "
     "gradient arrives"),
    (4, 4, [row + [""] for row in closed_1f1b(4, 4)],
     r"one_f_one_b\(4, 4\) takes 15 steps; 1F1B takes 2\(m \+ p - 1\) = 14"),
    (4, 4, edited(closed_1f1b(4, 4), (0, 13, None)), r"the rows hold \[13, 14, 14, 14\] entries: "
                                                     "pad every row"),
    (2, 2, [["F0", "F1", "", "B0", "", "B1"], ["F0", "", "B0", "F1", "B1", ""]],
     "stage 1 runs F0 at step 0, in the same step as stage 0: .*output from an earlier step"),
    (2, 1, [["F0", "", "B0", ""], ["", "F0", "B0", ""]],
     "stage 0 runs B0 at step 2, in the same step as stage 1: B0 on stage 0 needs stage 1's "
     "gradient from an earlier step"),
    (1, 2, [["F0", "B1", "F1", "B0"]], r"the last stage, 0, runs B1 at step 1 and F1 at step 2"),
    (2, 2, edited(closed_1f1b(2, 2), (0, 4, "B0")), "stage 0 runs B0 twice"),
    (2, 2, edited(closed_1f1b(2, 2), (1, 3, "")), "stage 1 never runs F1"),
    (2, 2, edited(closed_1f1b(2, 2), (1, 3, "F2")), r"stage 1's step 3 holds 'F2': each entry is"),
    (2, 2, edited(closed_1f1b(2, 2), (1, 3, 1)), "stage 1's step 3 holds a int: each entry is"),
    (2, 2, [[c for c in row if c] for row in closed_1f1b(2, 2)],
     "the rows hold only their 4 operations, no idle steps"),
    (2, 2, closed_1f1b(3, 2), r"has 3 rows, expected 2"),
    (2, 2, tuple(closed_1f1b(2, 2)), "should be a list of 2 lists, one row of strings per stage, "
                                     "got a tuple"),
])
def test_one_f_one_bs_judge_names_each_broken_rule(p, m, grid, match):
    with pytest.raises(AssertionError, match=match):
        pipe_judge(p, m, grid)


def test_one_f_one_bs_judge_names_arguments_that_should_have_raised():
    cases = {"values": [], "bad": [(0, 4), (4.0, 4), (True, 2)]}
    value_error = ("ValueError", "Exception", "BaseException", "object")
    found = {"values": [], "raised": [value_error, value_error, None]}
    with pytest.raises(AssertionError, match=r"one_f_one_b\(True, 2\) returned normally, expected "
                                             "it to raise ValueError: p = True is a bool, not an "
                                             "int"):
        l11.ONE_F_ONE_B.judge(found, [], cases)
    found["raised"][1] = ("TypeError", "Exception", "BaseException", "object")
    with pytest.raises(AssertionError, match=r"one_f_one_b\(4\.0, 4\) raised TypeError, expected "
                                             "ValueError: p = 4.0 is a float, not an int"):
        l11.ONE_F_ONE_B.judge(found, [], cases)
