"""The instructor's notebook and a learner's submission, as the hardened grader reads them.

- load_lesson(solutions/LESSON/LESSON.ipynb) -> Lesson: its code cells in order, each a lesson cell,
  an answer cell (the solution, markers removed) or a test cell (its points, the answer it grades
  and its hidden lines), and apart from them its written answers (nbgrader's manually graded
  answers: markdown cells with grade and solution set, worth their points, scored by hand, never by
  the grader). Everything the grader trusts comes from here, never from a submission.
- read_answers(submission, lesson) -> ({grade id: the learner's source}, notes): only the source
  text of the answer cells, found by grade id and cell type; it never raises on a broken file.
  read_written(submission, lesson) does the same for the written answers.
- learner_version(test cell) -> the test cell as the learner's sandbox runs it, its EXPECTED block
  cut.
- Lesson.probes_start_processes: whether the lesson's test cells may start processes (declared by
  the lesson's checks module; see probes_start_processes()). Everywhere else the grader forbids
  process creation while a test cell runs (course_utils.grader.grade).
- Lesson.judged_in_one_thread: the exercises whose rule is checked in the probe's own thread
  (declared by the checks module as JUDGED_IN_ONE_THREAD): their tests are refused while a thread
  the learner's code started in an earlier cell still runs.
"""

import importlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

MAX_SUBMISSION_BYTES = 50 * 2 ** 20   # a lesson's notebook with its figures is well under 10 MB
SOLUTION_MARKERS = re.compile(r"^\s*### (BEGIN|END) SOLUTION\s*$")


@dataclass
class Cell:
    kind: str            # "lesson", "answer", "test" or "written"
    source: str          # instructor's source (answers: the solution, markers removed; written: the
                         # model answer)
    gid: str | None = None
    points: float = 0.0   # tests and written answers
    exercise: str | None = None   # tests: the answer cell they grade
    hidden: list[str] = field(default_factory=list)  # tests: lines of the hidden region


@dataclass
class Lesson:
    name: str
    path: Path
    cells: list[Cell]
    written: list[Cell] = field(default_factory=list)   # markdown answers graded by hand, in order
    # see probes_start_processes(): False forbids it in every test cell
    probes_start_processes: bool = False
    # exercises (answer grade ids): see judged_in_one_thread()
    judged_in_one_thread: frozenset = frozenset()

    @property
    def tests(self) -> list[Cell]:
        return [c for c in self.cells if c.kind == "test"]

    @property
    def answers(self) -> list[Cell]:
        return [c for c in self.cells if c.kind == "answer"]


def load_lesson(path: Path) -> Lesson:
    """Read the instructor's notebook (nbgrader source) into the cells the grader runs."""
    import nbformat

    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    cells, written, last_answer = [], [], None
    for c in nb.cells:
        meta = c.metadata.get("nbgrader", {})
        gid = meta.get("grade_id")
        if c.cell_type == "markdown" and meta.get("solution") and meta.get("grade"):
            written.append(Cell("written", c.source, gid, float(meta.get("points", 0))))
        if c.cell_type != "code":
            continue
        if meta.get("solution"):
            if meta.get("grade"):
                raise ValueError(f"{path}: cell {gid} is both an answer and a test; the grader "
                                 "needs them apart")
            source = "\n".join(line for line in c.source.splitlines()
                               if not SOLUTION_MARKERS.match(line))
            cells.append(Cell("answer", source, gid))
            last_answer = gid
        elif meta.get("grade"):
            if last_answer is None:
                raise ValueError(f"{path}: test cell {gid} comes before any answer cell")
            cells.append(Cell("test", c.source, gid, float(meta.get("points", 0)), last_answer,
                              _hidden_lines(c.source)))
        else:
            cells.append(Cell("lesson", c.source))
    return Lesson(path.stem, path, cells, written, probes_start_processes(path.stem),
                  judged_in_one_thread(path.stem))


def probes_start_processes(name: str) -> bool:
    """Whether the test cells of lesson `name` ("NN-topic") may start processes: only where its
    checks module, course_utils.lessonchecks.lNN, declares PROBES_START_PROCESSES = True (lessons
    08, 09 and 11, whose probes run an exercise in process groups). It fails closed: any other
    lesson, one without such a module included, has every test cell run with process creation
    forbidden, so a
    rule checked in the learner's process (lesson 04's "without autograd", lesson 03's "predict,
    don't measure") cannot be stepped around in a child process."""
    return _declared(name, "PROBES_START_PROCESSES", False) is True


def judged_in_one_thread(name: str) -> frozenset:
    """The exercises of lesson `name` whose rule its checks module checks in the probe's own thread
    (JUDGED_IN_ONE_THREAD: lesson 03's predict_saved, whose saved-tensor hooks and autograd node
    numbers are per thread). A thread the learner's code left running could do the forbidden work
    there, out of the check's sight, so the grader refuses such a test while one runs. Other
    exercises may leave threads: their checks judge values, or watch every thread (lesson 04's
    profiler)."""
    declared = _declared(name, "JUDGED_IN_ONE_THREAD", ())
    if not (type(declared) is tuple and all(type(g) is str for g in declared)):
        raise TypeError(f"{name}'s checks module: JUDGED_IN_ONE_THREAD must be a tuple "
                        "of answer grade ids")
    return frozenset(declared)


def _declared(name: str, attribute: str, default):
    """What lesson `name`'s checks module (course_utils.lessonchecks.lNN) sets `attribute` to;
    default where it does not, or has no such module."""
    match = re.fullmatch(r"(\d\d)-[a-z0-9-]+", name)
    if match is None:
        return default
    module_name = f"course_utils.lessonchecks.l{match.group(1)}"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name != module_name:
            raise   # the module is there but broken: the instructor must know
        return default
    return getattr(module, attribute, default)


def _hidden_lines(source: str) -> list[str]:
    inside, out = False, []
    for line in source.splitlines():
        if "BEGIN HIDDEN TESTS" in line:
            inside = True
        elif "END HIDDEN TESTS" in line:
            inside = False
        elif inside:
            out.append(line)
    return out


def learner_version(test_source: str) -> str:
    """A test cell as the learner's worker gets it: every ### BEGIN EXPECTED ... ### END EXPECTED
    block replaced by `expect = judge = None`, so no expected value is ever computed there."""
    out, inside = [], False
    for line in test_source.splitlines():
        if line.strip() == "### BEGIN EXPECTED":
            inside = True
            out.append(line[: len(line) - len(line.lstrip())] + "expect = judge = None")
        elif line.strip() == "### END EXPECTED":
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError("### BEGIN EXPECTED without ### END EXPECTED")
    return "\n".join(out)


def read_answers(data,
                 lesson: "Lesson | set[str] | dict[str, str]") -> tuple[dict[str, str], list[str]]:
    """The learner's source for each answer cell of `lesson`, and notes on what was odd.

    lesson: a Lesson (its code answer cells), a set of code cells' grade ids, or {grade id: cell
    type} ("code" or "markdown"): a cell counts only with its grade id and the type the release gave
    it. Input: the submission as bytes/str (a file's content) or an already parsed dict /
    NotebookNode. Never raises on bad input: an unreadable file gives no answers and a note saying
    why.
    """
    if isinstance(lesson, dict):
        wanted = dict(lesson)
    else:
        wanted = dict.fromkeys(lesson if isinstance(lesson, set)
                               else [c.gid for c in lesson.answers], "code")
    try:
        return _read_answers(data, wanted)
    except Exception as e:  # a shape nobody thought of is still only a bad file
        return {}, [f"the submitted file could not be read as a notebook ({type(e).__name__})"]


def read_written(data, lesson: "Lesson") -> tuple[dict[str, str], list[str]]:
    """The learner's text for each written answer of `lesson` (markdown cells, by grade id), and
    notes."""
    return read_answers(data, {c.gid: "markdown" for c in lesson.written})


def _read_answers(data, wanted: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    notes = []
    if isinstance(data, (bytes, str)):
        if len(data) > MAX_SUBMISSION_BYTES:
            return {}, [f"the submitted file is over {MAX_SUBMISSION_BYTES // 2 ** 20} MB, so it "
                        "was not read (clear the notebook's outputs and submit it again)"]
        if not data.strip():
            return {}, ["the submitted file is empty"]
        try:
            data = json.loads(data)
        except RecursionError:
            return {}, ["the submitted file is not a readable notebook "
                        "(its JSON is nested too deeply)"]
        except ValueError as e:  # UnicodeDecodeError included
            return {}, ["the submitted file is not a readable notebook (invalid or truncated JSON: "
                        f"{str(e)[:80]})"]
    cells = data.get("cells") if isinstance(data, dict) else None
    if not isinstance(cells, list):
        if isinstance(data, dict) and isinstance(data.get("worksheets"), list):  # nbformat 3
            cells = [c for ws in data["worksheets"]
                     if isinstance(ws, dict) and isinstance(ws.get("cells"), list)
                     for c in ws["cells"] if isinstance(c, dict)]
            for c in cells:
                c.setdefault("source", c.get("input", ""))
        else:
            return {}, ["the submitted file is not a notebook (no list of cells)"]
    answers: dict[str, str] = {}
    for c in cells:
        if not isinstance(c, dict):
            continue
        meta = c.get("metadata") if isinstance(c.get("metadata"), dict) else {}
        nbg = meta.get("nbgrader") if isinstance(meta.get("nbgrader"), dict) else {}
        gid = nbg.get("grade_id")
        if type(gid) is not str or gid not in wanted or c.get("cell_type") != wanted[gid]:
            continue
        source = c.get("source", "")
        if isinstance(source, list) and all(isinstance(s, str) for s in source):
            source = "".join(source)
        if not isinstance(source, str):
            notes.append(f"answer cell {gid}: its source is not text; graded as not attempted")
            continue
        if gid in answers:
            notes.append(f"answer cell {gid} appears more than once; the first one was graded")
            continue
        answers[gid] = source
    for gid in sorted(set(wanted) - set(answers)):
        notes.append(f"answer cell {gid} is missing from the submission; graded as not attempted")
    return answers, notes
