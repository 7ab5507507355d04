"""For checks that run an exercise in real worker processes (course_utils.parallel.run_workers).

A probe runs its cases with `run_cases` (one process group per world size, each case's results kept
apart), which catches what run_workers raised and keeps it as data (`workers_failed`); the judge
turns that data into one message that says what went wrong in the ranks (`judge_failure`). No text
from the learner's processes reaches the message: only built-in exception names.
"""

from course_utils.judging import MALFORMED, raised_name

SAME_CALLS = ("every rank must make the same collective calls (all_reduce, barrier, ...), in "
              "the same order")


def workers_failed(e: BaseException, exercise: str) -> dict:
    """What run_workers raised, as data: its classes, a failing rank's exception class, whether
    others returned. An exercise's untouched stub that ran in a worker is raised again here, named,
    so that the test shows the stub's one line."""
    text = str(e)
    remote = None
    # "rank 1 of 2 failed: ValueError: ..."
    if type(e).__name__ == "WorkerError" and " failed: " in text:
        remote = text.split(" failed: ", 1)[1].split(":", 1)[0]
    # course_utils.parallel.WorkerError: a rank ran the exercise's stub
    stub = getattr(e, "stub", None)
    if isinstance(stub, NotImplementedError):
        stub.exercise = exercise
        raise stub
    return {"raised": tuple(c.__name__ for c in type(e).__mro__),
            "rank_raised": remote if remote and remote.isidentifier() else None,
            "others_returned": "had already returned" in text}


def judge_failure(failed, where: str, exercise: str, hint: str | None) -> None:
    """Raise the AssertionError that names what `workers_failed` recorded; `hint` (or None) is what
    a failed run's message adds for this case."""
    assert type(failed) is dict and set(failed) == {"raised", "rank_raised", "others_returned"}, \
        MALFORMED
    names = failed["raised"] if type(failed["raised"]) is tuple else ()
    if "TimeoutError" in names:
        raise AssertionError(f"{where}, the ranks did not finish in time: a rank waits forever in "
                             f"a collective that another rank never calls: {SAME_CALLS}")
    if "WorkerError" not in names:
        raise AssertionError(f"{where}, run_workers raised {raised_name(names)} before "
                             "the workers ran"
                             + (f": {exercise} must be a plain def function, which travels to the "
                                "workers by its source (no closures or lambdas)"
                                if "TypeError" in names else ""))
    hints = ([f"some ranks had already returned: {SAME_CALLS}"]
             * (failed["others_returned"] is True) + [hint])
    raise AssertionError(f"{where}, the workers failed: a rank raised "
                         f"{raised_name((failed['rank_raised'],))}"
                         + "".join(f" ({h})" for h in hints if h))


def _each_case(rank: int, world_size: int, worker, recipe: tuple, many: list) -> list:
    """In each worker of one process group: worker(rank, world_size, recipe, *args) for every args
    in many, each case starting from the process's defaults (torch's default dtype and grad mode,
    which a learner's function may change), as it would in a process of its own."""
    import torch
    found = []
    for args in many:
        dtype, grad = torch.get_default_dtype(), torch.is_grad_enabled()
        try:
            found.append(worker(rank, world_size, recipe, *args))
        finally:
            torch.set_default_dtype(dtype)
            torch.set_grad_enabled(grad)
    return found


def run_cases(worker, fn, cases, exercise: str, timeout: float = 20) -> list:
    """Each case's results from worker(rank, world_size, portable(fn), *args) in real gloo
    processes, where a case is (world_size, *args): a list of one result per rank, or what went
    wrong (workers_failed); after a failure the remaining cases are not run, None stands for each.

    The cases of one world size run one after another in one process group: a start of processes per
    world size, not per case. When such a group of several cases fails, its cases run again one per
    group, in the cases' order, so that what went wrong belongs to the case it went wrong in: a rank
    that hangs costs up to two timeouts. An exercise's untouched stub is raised at once
    (workers_failed).
    """
    from course_utils.parallel import portable, run_workers
    try:
        recipe = portable(fn)
    except Exception as e:  # fn cannot travel to a worker (a lambda, a closure): an observation
        return [workers_failed(e, exercise)] + [None] * (len(cases) - 1)
    grouped = {}  # world size -> each case's results, or its one failure
    for world_size in dict.fromkeys(c[0] for c in cases):   # in the order of their first case
        many = [tuple(c[1:]) for c in cases if c[0] == world_size]
        try:
            per_rank = run_workers(_each_case, world_size=world_size, backend="gloo",
                                   timeout=timeout, args=(worker, recipe, many))
        except Exception as e:  # a failing rank is an observation
            if len(many) == 1 or isinstance(getattr(e, "stub", None), NotImplementedError):
                # its one case's (a stub: raised here)
                grouped[world_size] = iter([workers_failed(e, exercise)])
            break   # of several cases: told apart one by one below
        grouped[world_size] = iter([list(ranks) for ranks in zip(*per_rank)])
    found = []
    for world_size, *args in cases:
        if found and type(found[-1]) is not list:
            found.append(None)
        elif world_size in grouped:
            found.append(next(grouped[world_size]))
        else:
            try:
                found.append(run_workers(worker, world_size=world_size, backend="gloo",
                                         timeout=timeout, args=(recipe, *args)))
            except Exception as e:  # a failing rank is an observation
                found.append(workers_failed(e, exercise))
    return found
