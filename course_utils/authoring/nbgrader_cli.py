"""nbgrader, driven the way an instructor drives it, for the course's tests and benchmarks.

Everything goes through nbgrader's real command line (`nbgrader generate_assignment`,
`autograde`, `generate_feedback`) and its real gradebook (`nbgrader.api.Gradebook`), in a
scratch course directory that holds a copy of solutions/ and nbgrader_config.py, so a test never
touches the course's own gradebook.

    course = scratch_course(repo_root, tmp_path, ["01-circuits"])
    submit(course, "alice", "01-circuits", solved(course, "01-circuits"))
    autograde(course, "01-circuits")
    scores(course, "01-circuits")          # {"alice": (10.0, 10.0)}: the autograded points
    written(course, "01-circuits")
        # {"alice": {"l01_why_dx": (0.0, 2.0, True)}}: graded by hand

oversubscribed(4) makes the machine busier than a shared one usually is (4 busy processes per core),
to grade beside it.
"""

import os
import re
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import nbformat

from course_utils.grader.lessonfile import SOLUTION_MARKERS



def lessons(root: Path, graded: bool = False) -> list[str]:
    """The nbgrader assignments under root/solutions, e.g. ["00-start-here", "01-circuits", ...].

    With graded=True only the lessons with exercises: 00-start-here checks the set-up and is
    released like a lesson, but has nothing to grade.
    """
    found = sorted(p.name for p in (Path(root) / "solutions").iterdir()
                   if re.fullmatch(r"\d\d-[a-z0-9-]+", p.name))
    if not found:
        raise ValueError(f"no lessons (folders named NN-topic) in {Path(root) / 'solutions'}")
    return [n for n in found if not (graded and n.startswith("00-"))]


COMMAND = [sys.executable, "-m", "nbgrader"]   # how nbgrader is run (a test may wrap it)
# a command that does no grading: past this it hung (nbgrader's own start takes seconds)
HANG_SECONDS = 3600


class Hung(RuntimeError):
    """An nbgrader command that ran past its generous limit: it hung (the message says which, and
    why)."""


def nbgrader(*args: str, cwd: Path, timeout: float = HANG_SECONDS, work: str = "",
             threads: int | None = None) -> subprocess.CompletedProcess:
    """Run `nbgrader ARGS` in cwd with this Python's environment; raise with its log on failure, and
    Hung, naming the command and `work` (what the limit was scaled to), past `timeout` seconds.
    threads: OMP_NUM_THREADS for it and the grader's workers (None: as this process has it), so that
    gradings run side by side share the cores instead of each filling them."""
    env = dict(os.environ)
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    # nbgrader shells out to alembic, which lives next to this interpreter.
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.pop("NBGRADER_EXECUTION", None)
    try:
        proc = subprocess.run([*COMMAND, *args], cwd=cwd, env=env, text=True, capture_output=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired as e:
        said = (e.stderr or b"")[-2000:]
        said = said.decode(errors="replace") if isinstance(said, bytes) else said
        raise Hung(f"nbgrader {' '.join(args)} hung: no end after {timeout:.0f} s{work}"
                   + (f"; the last of its log:\n{said}" if said.strip() else "")) from None
    if proc.returncode != 0:
        raise RuntimeError(f"nbgrader {' '.join(args)} failed ({proc.returncode}):\n"
                           f"{proc.stdout}\n{proc.stderr}")
    return proc


def limits(course: Path):
    """The grader's limits as the course's nbgrader_config.py sets them for `nbgrader autograde`
    (c.HardenedExecute.*, else their defaults): a course_utils.grader.worker.Limits."""
    from traitlets.config import Config
    from traitlets.config.loader import ConfigFileNotFound, PyFileConfigLoader

    from course_utils.grader.preprocessors import HardenedExecute
    try:
        config = PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()
    except ConfigFileNotFound:
        config = Config()
    return HardenedExecute(config=config).limits()


def notebook_seconds(course: Path) -> float:
    """The grader's limit for one submission: what it stops a submission at, by the submission's own
    time."""
    return float(limits(course).notebook_seconds)


def scratch_course(root: Path, dest: Path, names: list[str] | None = None) -> Path:
    """Copy the course's config and solutions into dest and release the given lessons there.

    Returns dest, a course directory holding solutions/, notebooks/ (the releases) and gradebook.db.
    """
    root, dest = Path(root), Path(dest)
    names = names or lessons(root)
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(root / "nbgrader_config.py", dest)
    for name in names:
        src = root / "solutions" / name
        if not src.is_dir():
            raise ValueError(f"no lesson {name!r}: {src} does not exist")
        shutil.copytree(src, dest / "solutions" / name,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        nbgrader("generate_assignment", name, "--force", cwd=dest)
    return dest


def notebook_path(course: Path, folder: str, name: str) -> Path:
    """course/folder/name/name.ipynb: one notebook per lesson, named like the lesson."""
    return Path(course) / folder / name / f"{name}.ipynb"


def solved(course: Path, name: str) -> nbformat.NotebookNode:
    """The released notebook with every solution cell filled in as a learner who solved it would.

    Each solution cell of the release gets the instructor's code (a written answer: the model
    answer) with the ### BEGIN/END SOLUTION lines removed; everything else stays as released.
    """
    release = nbformat.read(notebook_path(course, "notebooks", name), as_version=4)
    source = nbformat.read(notebook_path(course, "solutions", name), as_version=4)
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in source.cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    for cell in release.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.metadata.get("nbgrader", {}).get("solution") and grade_id in answers:
            cell.source = "\n".join(line for line in answers[grade_id].splitlines()
                                    if not SOLUTION_MARKERS.match(line))
    return release


def untouched(course: Path, name: str) -> nbformat.NotebookNode:
    """The released notebook exactly as a learner receives it."""
    return nbformat.read(notebook_path(course, "notebooks", name), as_version=4)


def replace_solution(nb: nbformat.NotebookNode, grade_id: str, old: str,
                     new: str) -> nbformat.NotebookNode:
    """A copy of nb with `old` replaced by `new` in the solution cell `grade_id` (a wrong
    answer)."""
    nb = nbformat.from_dict(nb)
    cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id]
    if len(cells) != 1 or old not in cells[0].source:
        raise ValueError(f"no solution cell {grade_id!r} containing {old!r}")
    cells[0].source = cells[0].source.replace(old, new)
    return nb


def with_answer(nb: nbformat.NotebookNode, grade_id: str, source: str) -> nbformat.NotebookNode:
    """A copy of nb whose solution cell `grade_id` holds `source` (another learner's answer)."""
    nb = nbformat.from_dict(nb)
    cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id]
    if len(cells) != 1 or not cells[0].metadata.nbgrader.get("solution"):
        raise ValueError(f"no solution cell {grade_id!r}")
    cells[0].source = source
    return nb


def mutant_rounds(mutants: list[dict]) -> list[list[dict]]:
    """Group wrong answers into submissions, so one autograde run checks several exercises.

    Input: dicts with "cell" (the solution grade_id they change).
    Returns: a list of rounds (lists of mutants, in input order), each touching an exercise at most
        once and leaving at least one exercise untouched: that exercise's full marks show that a
        wrong answer costs its own points and no others (an exercise that builds on another is
        judged with a reference copy of it, so no mistake costs another exercise's points).
        Each round takes the next mutant of the exercises with the most left (ties: the first
        named), which needs the fewest rounds: max(most of one exercise,
        ceil(all / (exercises - 1))).
    """
    position = {id(m): i for i, m in enumerate(mutants)}
    queues: dict[str, list[dict]] = {}
    for m in mutants:
        queues.setdefault(m["cell"], []).append(m)
    limit = max(1, len(queues) - 1)
    order = list(queues)
    rounds: list[list[dict]] = []
    while any(queues.values()):
        busiest = sorted((c for c in order if queues[c]), key=lambda c: -len(queues[c]))[:limit]
        picked = [queues[c].pop(0) for c in busiest]
        rounds.append(sorted(picked, key=lambda m: position[id(m)]))
    return rounds


def submit(course: Path, student: str, name: str, nb: nbformat.NotebookNode) -> Path:
    """Place nb where `nbgrader autograde` looks for student's submission of lesson `name`."""
    path = Path(course) / "submitted" / student / name / f"{name}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def autograde(course: Path, name: str, threads: int | None = None) -> subprocess.CompletedProcess:
    """`nbgrader autograde NAME --force` over every submission of the lesson (threads: see
    nbgrader()). The grader bounds each submission (and the reference run) by its own time, so the
    only limit here is against a hang: (submissions + 1) x the notebook limit, far above what
    grading takes on any machine that grades."""
    count = len(list(Path(course).glob(f"submitted/*/{name}")))
    each = notebook_seconds(course)
    return nbgrader("autograde", name, "--force", cwd=course, timeout=(count + 1) * each,
                    work=f" ({count} submissions and the reference, each stopped by the grader at "
                         f"{each:.0f} s of its own time)", threads=threads)


def scores(course: Path, name: str) -> dict[str, tuple[float, float]]:
    """{student: (score, max_score)} of the autograded cells (nbgrader's code score) for lesson
    `name`, read from the course's gradebook. Written answers, graded by hand, are written()'s."""
    from nbgrader.api import Gradebook  # heavy import, only needed here

    with Gradebook(f"sqlite:///{Path(course) / 'gradebook.db'}") as gb:
        assignment = gb.find_assignment(name)
        return {s.student.id: (s.code_score, s.max_code_score) for s in assignment.submissions}


def written(course: Path, name: str) -> dict[str, dict[str, tuple[float, float, bool]]]:
    """{student: {written answer's grade id: (score, max_score, needs_manual_grade)}} for lesson
    `name`: nbgrader's manually graded answers (markdown grade cells), from the gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{Path(course) / 'gradebook.db'}") as gb:
        return {s.student.id: {g.name: (g.score, g.max_score, g.needs_manual_grade)
                               for nb in s.notebooks for g in nb.grades
                               if g.cell_type == "markdown"}
                for s in gb.find_assignment(name).submissions}


def cell_scores(course: Path, name: str) -> dict[str, dict[str, tuple[float, float]]]:
    """{student: {autograded cell id: (score, max_score)}} for lesson `name`, from the gradebook
    (written answers, graded by hand: written())."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{Path(course) / 'gradebook.db'}") as gb:
        return {s.student.id: {g.name: (g.score, g.max_score)
                               for nb in s.notebooks for g in nb.grades if g.cell_type == "code"}
                for s in gb.find_assignment(name).submissions}


def feedback(course: Path, name: str) -> dict[str, str]:
    """Run `nbgrader generate_feedback NAME --force`; {student: the feedback HTML}
    (feedback_pages)."""
    nbgrader("generate_feedback", name, "--force", cwd=course)
    return feedback_pages(course, name)


def feedback_pages(course: Path, name: str) -> dict[str, str]:
    """{student: the feedback HTML} of lesson `name`, as generate_feedback left them in the
    course."""
    return {p.parent.parent.name: p.read_text()
            for p in Path(course).glob(f"feedback/*/{name}/{name}.html")}


@contextmanager
def oversubscribed(per_core: int):
    """per_core busy processes per core for as long as the block runs, each in a session of its own,
    as other users' work is (with autogroup scheduling, one session's processes would share one
    CPU weight): the load average climbs to about per_core * cores. Each also stops by itself once
    this process is gone, so a test run that is killed leaves no hog behind."""
    spin = (f"while kill -0 {os.getpid()} 2>/dev/null; do i=0; while [ $i -lt 5000 ]; "
            "do i=$((i+1)); done; done")
    hogs = [subprocess.Popen(["sh", "-c", spin], start_new_session=True)
            for _ in range(per_core * (os.cpu_count() or 1))]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
        for hog in hogs:
            hog.wait()
