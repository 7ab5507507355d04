"""Show that a long cell is working: one line that updates in place, on stdout (never stderr).

A cell that measures for more than a few seconds should say what it is doing, or a learner
thinks it hangs. tqdm writes to stderr, which nbgrader scores as a failure in a graded cell and
which looks like an error in a notebook; this writes to stdout, and in a notebook it updates one
output line instead of printing many.

    from course_utils.progress import progress
    for size in progress([1, 2, 4, 8], "measuring micro-batch sizes"):
        ...

prints, updated in place:   measuring micro-batch sizes: 3/4 [#######.....] 2.1 s
and when done:              measuring micro-batch sizes: 4/4 done in 2.9 s
"""

import sys
import time
from collections.abc import Iterable, Iterator
from typing import TypeVar

__all__ = ["progress"]

T = TypeVar("T")


def _in_notebook() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def line(label: str, done: int, total: int | None, seconds: float, finished: bool = False,
         width: int = 12) -> str:
    """The text shown: label, count, a bar when the total is known, elapsed seconds."""
    count = f"{done}/{total}" if total is not None else f"{done}"
    if finished:
        return f"{label}: {count} done in {seconds:.1f} s"
    bar = ""
    if total:
        filled = round(width * done / total)
        bar = " [" + "#" * filled + "." * (width - filled) + "]"
    return f"{label}: {count}{bar} {seconds:.1f} s"


def progress(items: Iterable[T], label: str = "working", total: int | None = None) -> Iterator[T]:
    """Yield each item of items, showing `label: k/n [###...] seconds` as it goes.

    Inputs:
    - items: any iterable; its len() is used as the total when it has one (or pass total)
    - label: str, what is being done, e.g. "measuring memory"
    - total: int, the number of items, when items has no len()

    In a notebook the line updates in place (one display output); elsewhere it is rewritten with a
    carriage return on stdout. The last state says how long it took.
    """
    if total is None and hasattr(items, "__len__"):
        total = len(items)
    start = time.perf_counter()
    handle = None
    notebook = _in_notebook()

    def show(done: int, finished: bool = False) -> None:
        nonlocal handle
        text = line(label, done, total, time.perf_counter() - start, finished)
        if notebook:
            from IPython.display import display, update_display

            if handle is None:
                handle = f"course-progress-{id(items)}-{start}"
                display({"text/plain": text}, raw=True, display_id=handle)
            else:
                update_display({"text/plain": text}, raw=True, display_id=handle)
        else:
            sys.stdout.write("\r" + text + ("\n" if finished else ""))
            sys.stdout.flush()

    done = 0
    show(done)
    for item in items:
        yield item
        done += 1
        show(done)
    show(done, finished=True)
