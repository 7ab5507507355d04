"""The fixture lesson as the corpus's cases build their submissions from it (not a case: its name
starts with "_").

The fixture (tests/fixtures/99-fixture) has three exercises: scale (fx_scale_test, 2 points),
square_grad (fx_grad_test, 2 points) and count_positive (fx_count_test, 1 point). A case that gives
ANSWERS gets notebook(**ANSWERS): the release with those answer cells, the correct answers (OK) in
the others. A case that changes more than answers writes `def submission(tmp: Path) -> bytes`
with the helpers below. What a case file holds, in which order: load_case in
tests/grader/test_grade.py.
"""

from pathlib import Path

import nbformat

from course_utils.exercises import STUB

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = ROOT / "tests" / "fixtures" / "99-fixture" / "99-fixture.ipynb"
FULL = {"fx_scale_test": 2.0, "fx_grad_test": 2.0, "fx_count_test": 1.0}

SCALE_OK = "def scale(x, k):\n    return x * k\n"
GRAD_OK = "def square_grad(x):\n    return 2 * x\n"
COUNT_OK = "def count_positive(xs):\n    return sum(1 for v in xs if v > 0)\n"
OK = {"fx_scale": SCALE_OK, "fx_grad": GRAD_OK, "fx_count": COUNT_OK}


def release() -> nbformat.NotebookNode:
    """The fixture as a learner receives it: answers are stubs, hidden tests are gone."""
    nb = nbformat.read(FIXTURE, as_version=4)
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution"):
            cell.source = cell.source.split("### BEGIN SOLUTION")[0] + "    " + STUB
        elif meta.get("grade"):
            cell.source = cell.source.split("### BEGIN HIDDEN TESTS")[0]
    return nb


def notebook(**answers) -> nbformat.NotebookNode:
    """The release with answer cells filled in: OK answers unless given (None keeps the stub)."""
    nb = release()
    chosen = {**OK, **answers}
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid in chosen and chosen[gid] is not None:
            cell.source = chosen[gid]
    return nb


def dumps(nb) -> bytes:
    return nbformat.writes(nb).encode()


def cell_of(nb, gid):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == gid)


def edited(edit, **answers) -> bytes:
    """notebook(**answers) changed in place by edit(nb), as a file's bytes."""
    nb = notebook(**answers)
    edit(nb)
    return dumps(nb)


def fixture_course(dest: Path) -> Path:
    """An nbgrader course at dest (the course's nbgrader_config.py) with the fixture lesson
    released: for tests of the grading pipeline that need nbgrader's own path but no real lesson (a
    real lesson's reference run and notebook cost seconds a submission)."""
    import shutil
    from course_utils.authoring import nbgrader_cli
    (dest / "solutions" / "99-fixture").mkdir(parents=True)
    shutil.copy(ROOT / "nbgrader_config.py", dest)
    shutil.copy(FIXTURE, dest / "solutions" / "99-fixture")
    nbgrader_cli.nbgrader("generate_assignment", "99-fixture", "--force", cwd=dest)
    return dest
