"""course_utils: the helpers every notebook of the course imports, one short module per topic.

    devices   try_gpu, try_all_gpus, num_gpus: CPU or CUDA, whichever is there
    models    d2l-style MLPScratch and MLP with any list of hidden sizes
    graph     walk an autograd graph, report saved tensors, draw it with torchviz
    checks    what test cells call: strict comparisons with diagnostic messages, finite differences
    circuits  the circuit diagrams of lessons 01-02, static and interactive
    valuegraph  draw a micrograd-style scalar graph (data and grad on each value), lesson 02
    memory    activation memory measured: saved-tensor accounting (any device), CUDA peak statistics
    data      small data sets made on the spot: no downloads
    doctor    is this machine ready? one-line fixes (bash course.sh doctor, lesson 00)
    progress  a progress line on stdout for long cells (never stderr: graded cells stay clean)
    parallel  run_workers: real gloo/NCCL process groups from a notebook; init_from_env for torchrun
    grading   nbgrader driven as an instructor would, for tests and benchmarks
    release   `python -m course_utils.release`: re-run solutions/, regenerate notebooks/

Grading untrusted code (README "Grading untrusted code"):
    lessonfile  the instructor's notebook and a submission's answer cells, as the grader reads them
    judging     hidden tests split into probe / expect / judge; observations as strict JSON
    cellrunner  the worker that runs a learner's notebook cell by cell (learner or reference mode)
    sandbox     that worker, limited, timed and always killed; dies with the grader
    isolation   which sandbox this machine gives: namespaces, its own read-only file system, uid, cgroup
    hardened    grade one submission: the answers in a sandbox, each test judged outside it
    autograde   nbgrader preprocessors for nbgrader_config.py (`nbgrader autograde` uses hardened)
    gradefolder `python -m course_utils.gradefolder`: a folder of submissions -> grades.csv + feedback
    review      a static read of the answers that names, for the instructor, code reaching outside

Importing the package does nothing but import: call `setup(seed=...)` at the top of a notebook.
"""

__version__ = "0.1.0"


def setup(seed: int = 0) -> None:
    """Make a notebook repeatable and quiet: seed Python, NumPy and torch; filter noisy warnings.

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
