"""A lesson's wrong answers and second correct answers, and the two ways the test suite grades them.

tests/mutants/LESSON.json holds wrong answers a learner could plausibly write (each: the submission's
name "student", the solution cell "cell", a text "old" in its solution and its replacement "new", or a
whole answer "source" for a cheat; the words "feedback" must contain; "needs": "memory" for one that
only the grader's kernel-measured memory catches). tests/alternates/LESSON.json holds second, differently
written correct answers ("cell", "source", "note").

Grading one submission through nbgrader runs the whole notebook in a fresh sandboxed kernel: about
20 s, whatever the answer. Grading every wrong answer that way cost the suite half an hour, so:

- through nbgrader (`through_grader`, tests/grader/test_preprocessors.py): every cheat, every wrong answer
  that needs the grader's own measurement, and the first wrong answer of each exercise. Those show,
  once per exercise, that the grader turns a failing test cell into lost points and feedback that
  names the mistake, and costs no other exercise its points;
- in one kernel (`in_kernel`, `judge_in_kernel`, tests/authoring/test_wronganswers.py): every other wrong
  answer (the first of each exercise too) and every second correct answer. The instructor's notebook runs once, as nbgrader's Execute runs a submission
  (NBGRADER_EXECUTION=autograde); then each answer goes into its solution cell and the exercise's test
  cell runs again, its probe's results sent through the grader's wire format before the judge reads
  them (course_utils.grader.protocol: what the grader's judge receives), and the solution goes back
  in before the next answer. Seconds each.
"""

import json
import os
from dataclasses import dataclass
from pathlib import Path

import nbformat

# Run in the kernel first: a hidden test's judge reads what the grader's judge would receive (the
# probe's results encoded, sent as JSON and decoded) and its verdict is kept, as the grader keeps it,
# whatever the visible test above it did; the probe's own exception fails the cell, as in the grader.
# The expected values of a test cell are computed once, when the instructor's notebook runs, and every
# answer is judged against them, as the grader's reference run computes them once for a whole class.
WIRE = """
import json as _json
from course_utils import judging as _judging
from course_utils.grader import protocol as _protocol

class _Wire:
    judged_peaks = None    # no kernel-measured memory here: judges that need it are graded through nbgrader
    verdict = None         # None: no hidden test judged; "": passed; else the judge's message
    cell = None            # the grade id of the test cell that runs
    wants = {}             # grade id -> its expected values

    def grade(self, probe, expect, judge):
        got = _protocol.decode(_protocol.loads(_json.dumps(_protocol.encode(_judging.run_probe(probe)))))
        want = self.wants[self.cell] if self.cell in self.wants else _judging.run_expect(expect)
        if self.cell is not None:
            self.wants[self.cell] = want
        try:
            judge(got, want)
            self.verdict = ""
        except AssertionError as e:
            self.verdict = str(e) or type(e).__name__

_wire = _judging.session = _Wire()
"""

def load(root: Path, kind: str, name: str) -> list[dict]:
    """tests/KIND/NAME.json under root (kind: "mutants" or "alternates"), [] when there is none."""
    path = Path(root) / "tests" / kind / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else []


def through_grader(mutants: list[dict]) -> list[dict]:
    """The wrong answers graded through nbgrader, in their order: cheats (a whole answer), those that
    need the grader's own measurement, and the first wrong answer of each exercise."""
    firsts = {}
    for m in mutants:
        firsts.setdefault(m["cell"], id(m))
    return [m for m in mutants if "source" in m or "needs" in m or firsts[m["cell"]] == id(m)]


def in_kernel(mutants: list[dict]) -> list[dict]:
    """The wrong answers judged in one kernel, in their order: all but cheats and those that need the
    grader's own measurement (a cheat may change the kernel for every answer after it; only the grader
    measures memory)."""
    return [m for m in mutants if "source" not in m and "needs" not in m]


@dataclass
class Judged:
    """What one answer's test cell did, as the grader would decide it: verdict is the hidden judge's
    message as the grader shows it ("" when it passed; None when no hidden test was judged, because the
    answer cell or the probe raised: `error` names what was raised)."""
    answer: dict
    verdict: str | None
    error: str

    @property
    def outcome(self) -> str:
        """What the learner is told: the judge's message, or what was raised."""
        return self.verdict if self.verdict is not None else f"the test raised {self.error}"


def _error(cell) -> str:
    return " ".join(f"{o.ename}: {o.evalue}" for o in cell.outputs if o.output_type == "error")


def _answer_source(solution: str, answer: dict, where: str) -> str:
    if "source" in answer:
        return answer["source"]
    if answer["old"] not in solution:
        raise RuntimeError(f"{where}: the solution of {answer['cell']} does not contain {answer['old']!r}")
    return solution.replace(answer["old"], answer["new"])


def judge_in_kernel(notebook: Path, answers: list[dict], cell_seconds: float = 600,
                    threads: int | None = None) -> list[Judged]:
    """Each answer's test-cell outcome, judged in one kernel that ran the instructor's notebook.

    notebook: a lesson's solution notebook (solutions/NN-name/NN-name.ipynb); answers: wrong or second
    correct answers (dicts with "cell" and "old"/"new" or "source"). The test cell runs statement by
    statement, as the grader runs it (a failing visible test does not stop the hidden one), and the
    judge's message is redacted as the grader redacts it. Not the grader's: its sandbox, limits and
    kernel-measured memory, and globals frozen when the reference ran (here a judge reads the kernel's
    globals after the whole notebook ran). Raises RuntimeError when the notebook itself fails, or when
    an answer names no solution cell or a text not in it. threads: the kernel's OMP_NUM_THREADS (None:
    as this process has it); beside other work, 1 (torch's threads spin, fighting over busy cores)."""
    from nbclient import NotebookClient   # heavy imports, only needed here
    from course_utils.grader import feedback, lessonfile
    from course_utils.grader.cellrunner import statements

    notebook = Path(notebook)
    lesson = lessonfile.load_lesson(notebook)   # the cells as the grader runs them (solutions without markers)
    hidden = [line for t in lesson.tests for line in t.hidden]
    by_id = {c.gid: i for i, c in enumerate(lesson.cells) if c.gid}
    cells = [nbformat.v4.new_code_cell(c.source) for c in lesson.cells]
    env = {**os.environ, "NBGRADER_EXECUTION": "autograde"}   # as nbgrader's Execute runs a submission
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    client = NotebookClient(nbformat.v4.new_notebook(cells=cells), timeout=cell_seconds, interrupt_on_timeout=True,
                            kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(notebook.parent)}})
    results = []
    with client.setup_kernel(env=env):
        def run(source: str, index: int = 0):
            cell = client.nb.cells[index] = nbformat.v4.new_code_cell(source)   # where the client updates displays
            client.execute_cell(cell, index)
            return cell

        def verdict():
            cell = run("print(_json.dumps(_wire.verdict)); _wire.verdict = _wire.cell = None")
            return json.loads("".join(o.text for o in cell.outputs if o.output_type == "stream"))

        run(WIRE)
        for i, cell in enumerate(lesson.cells):
            run(f"_wire.cell = {cell.gid if cell.kind == 'test' else None!r}")
            if _error(ran := run(cell.source, i)):
                raise RuntimeError(f"{notebook.name}: cell {i} of the instructor's notebook failed: {_error(ran)}")
        verdict()
        for answer in answers:
            gid = answer["cell"]
            if gid not in by_id or f"{gid}_test" not in by_id:
                raise RuntimeError(f"{notebook.name}: no solution cell {gid!r} with a test cell {gid}_test")
            solution, test = lesson.cells[by_id[gid]].source, lesson.cells[by_id[f"{gid}_test"]].source
            defined = run(_answer_source(solution, answer, notebook.name), by_id[gid])
            if _error(defined):
                results.append(Judged(answer, None, f"{_error(defined)} in the answer cell"))
            else:
                run(f"_wire.cell = {gid + '_test'!r}")
                errors = [_error(run(part, by_id[f"{gid}_test"])) for part in statements(test)]
                said = verdict()
                results.append(Judged(answer, None if said is None else feedback.redact(said, hidden) if said else "",
                                      next((e for e in errors if e), "")))
            if _error(restored := run(solution, by_id[gid])):
                raise RuntimeError(f"{notebook.name}: the solution of {gid} failed when put back: {_error(restored)}")
    return results
