"""Work done once per key for a test session, a failure included: `Once(what, work)`.

A test fixture that makes something per lesson on demand (a release, a grading, a browser run) must
not do the work again for each test that needs it when the work failed: five tests that each grade
every lesson again after a hang cost fifty minutes. Once keeps each key's result or its error: the
error is raised in full to the first caller, and named in one line (FailedEarlier) to the others.

    release = Once("releasing", lambda name: scratch_course(ROOT, folder(name), [name]))
    release.ensure(["01-circuits", "02-local-gradients"], run_many=two_at_a_time)
        # the work, once each
    release("01-circuits")          # its result, or its error (in full the first time)
"""

from collections.abc import Callable, Iterable


class FailedEarlier(RuntimeError):
    """The work for this key failed before, and was reported in full to the first caller."""


class Once:
    def __init__(self, what: str, work: Callable):
        self.what, self.work = what, work
        self.done: dict = {}
        self.failed: dict = {}
        self._reported: set = set()

    def ensure(self, keys: Iterable, run_many: Callable = map) -> None:
        """Do the work for each key not done yet (run_many(fn, keys): map, or a pool's), keeping
        errors."""
        todo = [k for k in dict.fromkeys(keys) if k not in self.done and k not in self.failed]

        def attempt(key):
            try:
                return True, self.work(key)
            except Exception as e:  # kept, and raised to whoever needs this key
                return False, e
        for key, (ok, value) in zip(todo, list(run_many(attempt, todo))):
            (self.done if ok else self.failed)[key] = value

    def __call__(self, key):
        self.ensure([key])
        if key in self.failed:
            error = self.failed[key]
            if key not in self._reported:
                self._reported.add(key)
                raise error
            first = (str(error).splitlines() or [""])[0][:300]
            raise FailedEarlier(f"{self.what} {key} failed once, reported in full at the first "
                                f"test that needed it: {type(error).__name__}: {first}")
        return self.done[key]
