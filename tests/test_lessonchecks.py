"""course_utils.lessonchecks: each lesson's checks are its test cells' checks, one for one.

Every test cell of lesson NN runs a Check of course_utils.lessonchecks.lNN (tests/test_lessons.py:
the cell's shape), and every Check of that module is run by exactly one test cell: no check is
written for nothing or shared by two exercises. Whether the checks grade right is tested by grading
the lesson's solution, untouched notebook, mutants and alternates
(tests/grader/test_preprocessors.py). Also: course_utils.lessonchecks.workers.run_cases, which runs
the cases of the checks that start real process groups (lessons 08 and 09), one group per world
size, each failure kept with its own case.
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
from course_utils.lessonchecks import l08
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

