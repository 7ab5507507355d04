"""Rules that a test checks in the learner's own process hold against a child process (issue 24,
attack 7).

Lesson 04's mlp_backward must compute gradients without autograd, and lesson 03's predict_saved must
predict saved bytes without building a graph to measure; both are watched in the learner's process
and thread (course_utils/lessonchecks/l04.py's _autograd_watched, l03.py's _saved_seen). The answers
below do the forbidden work in a child made with torch.multiprocessing's fork context and pipe the
result back, as a learner who read those checks would: before the grader forbade process creation in
test cells (course_utils.grader.worker.forbid_processes, course_utils.grader.grade), they scored 5/5
and 3/3. A third does lesson 03's in a thread its answer cell started (3/3 before the grader looked
for threads left running); the thread runs on, and the later exercises, judged on values, keep their
marks. Each lesson is graded once, through the real grader, with the attack in one exercise and the
solution in the others, which must keep their full marks.
"""

import os

import pytest
from corpus._notebook import FIXTURE, ROOT

from course_utils.grader import grade
from course_utils.grader.capabilities import can_isolate, isolation
from course_utils.grader.lessonfile import load_lesson
from course_utils.grader.worker import Limits

pytestmark = pytest.mark.slow

LIMITS = Limits(cell_seconds=60, notebook_seconds=300,
                sandbox="required" if can_isolate() else "optional")

# Measured, not predicted: 81 small graphs built in a forked child and fitted (the fit also covers
# the test's sizes that are far too large to build), the coefficients piped back.
MEASURED_IN_A_CHILD = '''def predict_saved(n, d, h, o, dtype=torch.float32, x_requires_grad=False):
    """What report() counts, measured on small graphs in a forked child and fitted."""
    import itertools
    import torch.multiprocessing as mp
    if min(n, d, h, o) < 1:
        raise ValueError("every size must be at least 1")

    def measure(conn):
        torch.set_num_threads(1)  # the parent's OpenMP pool does not survive a fork
        rows, ys = [], []
        for a, b, c, e in itertools.product((1, 2, 3), repeat=4):
            net = nn.Sequential(nn.Linear(b, c), nn.Tanh(), nn.Linear(c, e)).to(dtype)
            X = torch.randn(a, b, dtype=dtype, requires_grad=x_requires_grad)
            r = report((net(X) - torch.randn(a, e, dtype=dtype)).pow(2).mean(),
                       dict(net.named_parameters()))
            rows.append([1, a * b, a * c, c * e, a * e, b * c])
            ys.append([len(r.saved), r.saved_bytes, r.activation_bytes])
        A, B = torch.tensor(rows, dtype=torch.float64), torch.tensor(ys, dtype=torch.float64)
        fit = torch.linalg.lstsq(A, B).solution
        conn.send([[round(v) for v in row] for row in fit.tolist()])
        conn.close()

    ctx = mp.get_context("fork")
    mine, theirs = ctx.Pipe()
    child = ctx.Process(target=measure, args=(theirs,))
    child.start()
    coef = mine.recv()
    child.join()
    features = [1, n * d, n * h, h * o, n * o, d * h]
    return tuple(sum(f * row[k] for f, row in zip(features, coef)) for k in range(3))
'''

# Autograd after all: torch.func.grad in a forked child (warmed up in the answer cell, where nothing
# watches, so that each child is quick), the gradients piped back.
AUTOGRAD_IN_A_CHILD = '''import torch.func

torch.func.grad(lambda v: (v ** 2).sum())(torch.ones(2))


def mlp_backward(model, X, y, lam):
    """The gradients from torch.func.grad, run in a forked child."""
    import torch.multiprocessing as mp
    L = len(model.weights)

    def work(conn):
        torch.set_num_threads(1)  # the parent's OpenMP pool does not survive a fork

        def J(params):
            H = X.reshape(X.shape[0], -1)
            for i in range(L):
                H = H @ params[i] + params[L + i]
                if i < L - 1:
                    H = torch.relu(H)
            return F.cross_entropy(H, y) + lam / 2 * sum((W ** 2).sum() for W in params[:L])
        grads = torch.func.grad(J)([W.detach() for W in model.weights]
                                   + [b.detach() for b in model.biases])
        conn.send([g.tolist() for g in grads])
        conn.close()

    ctx = mp.get_context("fork")
    mine, theirs = ctx.Pipe()
    child = ctx.Process(target=work, args=(theirs,))
    child.start()
    grads = [torch.tensor(g, dtype=X.dtype) for g in mine.recv()]
    child.join()
    return grads[:L], grads[L:]
'''

# The same measurement in a thread the answer cell started, waiting for work: saved-tensor hooks and
# autograd's node numbers are per thread, so the test's watch in the probe's thread sees nothing,
# and forbidding new threads comes too late for one that already runs.
MEASURED_IN_AN_EARLIER_THREAD = '''import itertools
import queue
import threading

_jobs, _fits = queue.Queue(), queue.Queue()


def _measure_forever():
    while True:
        dtype, x_requires_grad = _jobs.get()
        rows, ys = [], []
        for a, b, c, e in itertools.product((1, 2, 3), repeat=4):
            net = nn.Sequential(nn.Linear(b, c), nn.Tanh(), nn.Linear(c, e)).to(dtype)
            X = torch.randn(a, b, dtype=dtype, requires_grad=x_requires_grad)
            r = report((net(X) - torch.randn(a, e, dtype=dtype)).pow(2).mean(),
                       dict(net.named_parameters()))
            rows.append([1, a * b, a * c, c * e, a * e, b * c])
            ys.append([len(r.saved), r.saved_bytes, r.activation_bytes])
        A, B = torch.tensor(rows, dtype=torch.float64), torch.tensor(ys, dtype=torch.float64)
        _fits.put([[round(v) for v in row] for row in torch.linalg.lstsq(A, B).solution.tolist()])


threading.Thread(target=_measure_forever, daemon=True).start()
# a first job now, while nothing watches: OpenMP's team for that thread starts
_jobs.put((torch.float32, False))
_fits.get()


def predict_saved(n, d, h, o, dtype=torch.float32, x_requires_grad=False):
    """What report() counts, measured on small graphs by a thread started earlier, and fitted."""
    if min(n, d, h, o) < 1:
        raise ValueError("every size must be at least 1")
    _jobs.put((dtype, x_requires_grad))
    coef = _fits.get()
    features = [1, n * d, n * h, h * o, n * o, d * h]
    return tuple(sum(f * row[k] for f, row in zip(features, coef)) for k in range(3))
'''


def _solutions(name: str):
    return ROOT / "solutions" / name / f"{name}.ipynb"


@pytest.mark.parametrize("name, exercise, answer", [
    ("03-pytorch-autograd", "l03_predict_saved", MEASURED_IN_A_CHILD),
    ("04-mlp-backprop", "l04_mlp_backward", AUTOGRAD_IN_A_CHILD),
    ("03-pytorch-autograd", "l03_predict_saved", MEASURED_IN_AN_EARLIER_THREAD),
], ids=["03-measured-in-a-child", "04-autograd-in-a-child", "03-measured-in-an-earlier-thread"])
def test_a_child_process_does_not_step_around_a_rule_checked_in_the_learners_process(
        name, exercise, answer):
    # one per lesson (the grader's own cache)
    with grade.reference_for(_solutions(name), LIMITS) as reference:
        answers = {c.gid: c.source for c in reference.lesson.answers}
        result = grade.grade_answers(reference.lesson, reference, {**answers, exercise: answer}, [],
                                     "mallory", LIMITS)
    for gid, outcome in result.outcomes.items():
        if gid == f"{exercise}_test":
            assert outcome.score == 0, (f"{gid}: the child's work scored "
                                        f"{outcome.score}/{outcome.points}")
            if (answer is MEASURED_IN_AN_EARLIER_THREAD
                    or (os.geteuid() == 0 and isolation() == "root")):
                # the thread found, or the fork counted
                assert outcome.message.endswith(grade.OWN_PROCESS), outcome.message
        else:
            assert outcome.score == outcome.points, (
                f"{gid}: the solution lost points: {outcome.message}")


def test_only_lessons_whose_probes_run_process_groups_may_start_processes():
    """Declared once, in the lesson's checks module (PROBES_START_PROCESSES); every other lesson,
    and one without a checks module (the grader's fixture), is graded with process creation
    forbidden."""
    lessons = sorted(p.parent.name for p in (ROOT / "solutions").glob("[0-9][0-9]-*/*.ipynb"))
    allowed = {name for name in lessons if load_lesson(_solutions(name)).probes_start_processes}
    assert allowed == {"08-multi-device", "09-bigger-batch", "11-splitting-layers"}
    assert not load_lesson(FIXTURE).probes_start_processes


def test_the_exercises_judged_in_one_thread_are_exercises_of_their_lesson():
    """JUDGED_IN_ONE_THREAD names answer cells of its own lesson (a typo would protect nothing)."""
    declared = {}
    for path in sorted((ROOT / "solutions").glob("[0-9][0-9]-*/*.ipynb")):
        lesson = load_lesson(path)
        assert lesson.judged_in_one_thread <= {c.gid for c in lesson.answers}, lesson.name
        declared.update({gid: lesson.name for gid in lesson.judged_in_one_thread})
    assert declared == {"l03_predict_saved": "03-pytorch-autograd"}
