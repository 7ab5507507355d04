"""course_utils: the helpers every notebook of the course imports, one short module per topic.

What notebooks import (this folder):
    devices     try_gpu, try_all_gpus, num_gpus: CPU or CUDA, whichever is there
    models      d2l-style MLPScratch and MLP with any list of hidden sizes
    graph       walk an autograd graph, report saved tensors, draw it with torchviz
    circuits    the circuit diagrams of lessons 01-02, static and interactive
    valuegraph  draw a micrograd-style scalar graph (data and grad on each value), lesson 02
    memory      activation memory measured: saved-tensor accounting (any device), CUDA peak
                statistics
    timing      the fastest of a few calls of a function, the same way in every lesson and benchmark
    data        small data sets made on the spot: no downloads
    doctor      is this machine ready? one-line fixes (bash course.sh doctor, lesson 00)
    progress    a progress line on stdout for long cells (never stderr: graded cells stay clean)
    parallel    run_workers: real gloo/NCCL process groups from a notebook; init_from_env for
                torchrun
    pipeline    pipeline schedules measured: stages that take a set time, what each rank ran
                when and how many micro-batches it held, its idle share (lesson 11)
    exercises   the stub of an unsolved exercise and the one line it shows
    checks      what visible test cells call: strict comparisons with diagnostic messages, finite
                differences
    judging     what hidden test cells call: grade(probe, expect, judge), raised, outcome,
                memory_peaks

course_utils.grader: the sandboxed grader (docs/grading-design.md); no notebook imports it.
course_utils.authoring: tools for course authors (nbgrader driven from tests, `release`).
course_admin (beside this package, never imported from it): the hub's exchange, a class's grades.

Importing the package does nothing but import: call `setup(seed=...)` at the top of a notebook.
"""

__version__ = "0.1.0"


def setup(seed: int = 0) -> None:
    """Make a notebook repeatable and quiet: seed Python, NumPy and torch; filter noisy warnings;
    show an exercise not attempted yet as one line (course_utils.exercises).

    Call once at the top of a notebook: `course_utils.setup(seed=0)`.
    """
    import random
    import warnings

    import numpy as np
    import torch

    if type(seed) is not int or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # seeds CUDA devices too
    # Warnings go to stderr, and nbgrader scores a test cell with stderr output as failed.
    # These are about the tooling, not the lesson: keep them out of learners' way.
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    # An exercise not attempted yet shows one line naming it, not a traceback
    # (course_utils.exercises).
    from IPython import get_ipython

    from course_utils.exercises import show_stubs_in_one_line
    shell = get_ipython()
    if shell is not None:
        show_stubs_in_one_line(shell)
