"""A lesson's wrong answers and second correct answers, and the two ways the test suite grades them.

tests/mutants/LESSON.json holds wrong answers a learner could plausibly write (each: the
submission's name "student", the solution cell "cell", a text "old" in its solution and its
replacement "new", or a whole answer "source" for a cheat; the words "feedback" must contain;
"needs": "memory" for one that only the grader's kernel-measured memory catches).
tests/alternates/LESSON.json holds second, differently written correct answers ("cell", "source",
"note").

Grading one submission through nbgrader runs the whole notebook in a fresh sandboxed kernel: about
20 s, whatever the answer. Grading every wrong answer that way cost the suite half an hour, so:

- through nbgrader (`through_grader`, tests/grader/test_preprocessors.py): every cheat, every wrong
  answer that needs the grader's own measurement, and the first plain wrong answer of each exercise.
  Those show, once per exercise, that the grader turns a failing test cell into lost points and
  feedback that names the mistake, that the rest of the notebook still runs, and that the mistake
  costs no other exercise its points (only these: the kernel below runs no other cell after an
  answer);
- in one kernel (`in_kernel`, `judge_in_kernel`, tests/authoring/test_wronganswers.py): every other
  wrong answer (the first of each exercise too) and every second correct answer. The instructor's
  notebook runs once, as nbgrader's Execute runs a submission (NBGRADER_EXECUTION=autograde), each
  of its hidden tests passing its own judge; then each answer goes into its solution cell and the
  exercise's test cell runs again, statement by statement, as the grader's worker runs it; its
  probe's results are sent through the grader's wire format and judged by the grader's own function
  (cellrunner.judge_observation) against the expected values of the instructor's run; the solution
  goes back in before the next answer. Seconds each.
"""

import json
import os
from dataclasses import dataclass
from pathlib import Path

import nbformat

# Run in the kernel first. A hidden test's verdict is decided as the grader's reference decides it
# (cellrunner.judge_observation: the probe's results as the wire carries them, the judge's message
# scrubbed, an error other than AssertionError "could not be compared"), against the expected values
# computed once when the instructor's notebook ran, whatever the visible test above it did; the
# probe's own exception fails the cell, as in the grader's worker.
WIRE = """
import json as _json
from course_utils import judging as _judging
from course_utils.grader import protocol as _protocol
from course_utils.grader.cellrunner import judge_observation as _judge_observation

class _Wire:
    # no kernel-measured memory here: judges that need it are graded through nbgrader
    judged_peaks = None
    verdict = None         # None: no hidden test judged; "": passed; else the judge's message
    cell = None            # the grade id of the test cell that runs
    wants = {}             # grade id -> its expected values

    def grade(self, probe, expect, judge):
        got = _judging.run_probe(probe)
        try:
            data = _protocol.loads(_json.dumps(_protocol.encode(got)))
        except ValueError:
            self.verdict = None   # too large to send: the grader judges nothing either
            raise
        want = self.wants[self.cell] if self.cell in self.wants else _judging.run_expect(expect)
        if self.cell is not None:
            self.wants[self.cell] = want
        judged = _judge_observation(judge, data, want)
        self.verdict = "" if judged["ok"] else judged["message"]

_wire = _judging.session = _Wire()
"""
VERDICT = "<<verdict>>"   # marks the line that carries a test cell's verdict out of the kernel


def load(root: Path, kind: str, name: str) -> list[dict]:
    """tests/KIND/NAME.json under root (kind: "mutants" or "alternates"), [] when there is none."""
    path = Path(root) / "tests" / kind / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else []


def through_grader(mutants: list[dict]) -> list[dict]:
    """The wrong answers graded through nbgrader, in their order: cheats (a whole answer), those
    that need the grader's own measurement, and the first plain wrong answer of each exercise."""
    firsts = {}
    for m in in_kernel(mutants):
        firsts.setdefault(m["cell"], id(m))
    return [m for m in mutants if "source" in m or "needs" in m or firsts.get(m["cell"]) == id(m)]


def in_kernel(mutants: list[dict]) -> list[dict]:
    """The wrong answers judged in one kernel, in their order: all but cheats and those that need
    the grader's own measurement (a cheat may change the kernel for every answer after it; only the
    grader measures memory)."""
    return [m for m in mutants if "source" not in m and "needs" not in m]


@dataclass
class Judged:
    """What one answer's test cell did, as the grader would decide it: verdict is the hidden judge's
    message as the grader shows it ("" when it passed; None when no hidden test was judged, because
    the answer cell or the probe raised: `error` names what was raised)."""
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
        raise RuntimeError(f"{where}: the solution of {answer['cell']} does not contain "
                           f"{answer['old']!r}")
    return solution.replace(answer["old"], answer["new"])


# each cell of WIRE and of the instructor's notebook, whatever an answer's limit
SETUP_SECONDS = 300


class _Kernel:
    """A kernel that ran the instructor's notebook (with WIRE first), each hidden test passing its
    judge."""

    def __init__(self, lesson, env: dict, cell_seconds: float):
        from nbclient import NotebookClient   # heavy import, only needed here
        self.lesson = lesson
        cells = [nbformat.v4.new_code_cell(c.source) for c in lesson.cells]
        self.client = NotebookClient(nbformat.v4.new_notebook(cells=cells), timeout=cell_seconds,
                                     interrupt_on_timeout=True, kernel_name="python3",
                                     allow_errors=True,
                                     resources={"metadata": {"path": str(lesson.path.parent)}})
        self.env = env

    def __enter__(self):
        self.context = self.client.setup_kernel(env=self.env)
        self.context.__enter__()
        limit, self.client.timeout = self.client.timeout, max(self.client.timeout, SETUP_SECONDS)
        # the instructor's notebook is not an answer: a busy machine's slow imports must not cut it
        # short
        try:
            self.run(WIRE)
            for i, cell in enumerate(self.lesson.cells):
                self.run(f"_wire.cell = {cell.gid if cell.kind == 'test' else None!r}")
                if _error(ran := self.run(cell.source, i)):
                    raise RuntimeError(f"{self.lesson.path.name}: cell {i} of the instructor's "
                                       f"notebook failed: {_error(ran)}")
                if cell.kind == "test" and (said := self.verdict()) != "":
                    raise RuntimeError(f"{self.lesson.path.name}: the instructor's {cell.gid} "
                                       f"fails its own judge: {said}")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        finally:
            self.client.timeout = limit   # each answer's cells: cell_seconds
        return self

    def __exit__(self, *exc):
        self.context.__exit__(None, None, None)

    def run(self, source: str, index: int = 0):
        # where the client updates displays
        cell = self.client.nb.cells[index] = nbformat.v4.new_code_cell(source)
        self.client.execute_cell(cell, index)
        return cell

    def verdict(self):
        cell = self.run(f"print({VERDICT!r} + _json.dumps(_wire.verdict)); "
                        "_wire.verdict = _wire.cell = None")
        lines = [line for o in cell.outputs if o.output_type == "stream" and o.name == "stdout"
                 for line in o.text.splitlines() if line.startswith(VERDICT)]
        if len(lines) != 1:
            raise RuntimeError(f"{self.lesson.path.name}: the kernel did not say its verdict: "
                               f"{_error(cell) or lines}")
        return json.loads(lines[0][len(VERDICT):])

    def judge(self, answer: dict, hidden: list[str]) -> "Judged":
        from course_utils.grader import feedback
        from course_utils.grader.cellrunner import statements

        gid, by_id = answer["cell"], {c.gid: i for i, c in enumerate(self.lesson.cells) if c.gid}
        if gid not in by_id or f"{gid}_test" not in by_id:
            raise RuntimeError(f"{self.lesson.path.name}: no solution cell {gid!r} with a test "
                               f"cell {gid}_test")
        solution, test = (self.lesson.cells[by_id[gid]].source,
                          self.lesson.cells[by_id[f"{gid}_test"]].source)
        defined = self.run(_answer_source(solution, answer, self.lesson.path.name), by_id[gid])
        if _error(defined):
            judged = Judged(answer, None, f"{_error(defined)} in the answer cell")
        else:
            self.run(f"_wire.cell = {gid + '_test'!r}")
            errors = [_error(self.run(part, by_id[f"{gid}_test"])) for part in statements(test)]
            said = self.verdict()
            judged = Judged(answer,
                            None if said is None else feedback.redact(said, hidden) if said else "",
                            # the last, as the grader's worker reports
                            next((e for e in reversed(errors) if e), ""))
        if _error(restored := self.run(solution, by_id[gid])):
            raise RuntimeError(f"{self.lesson.path.name}: the solution of {gid} failed when put "
                               f"back: {_error(restored)}")
        return judged


def judge_in_kernel(notebook: Path, answers: list[dict], cell_seconds: float = 300,
                    threads: int | None = None) -> list[Judged]:
    """Each answer's test-cell outcome, judged in a kernel that ran the instructor's notebook.

    notebook: a lesson's solution notebook (solutions/NN-name/NN-name.ipynb); answers: wrong or
    second correct answers (dicts with "cell" and "old"/"new" or "source"). Not the grader's: its
    sandbox, limits, kernel-measured memory and its own time; and where the grader freezes a judge's
    globals when the reference ran, here the probe and the judge read the kernel's globals after the
    whole notebook ran. A cell of an answer past cell_seconds is interrupted (its outcome:
    KeyboardInterrupt; the instructor's notebook gets SETUP_SECONDS a cell, so a busy machine cannot
    cut it short); a kernel that does not answer or dies is that answer's outcome, and a fresh
    kernel judges the rest. threads: the kernel's OMP_NUM_THREADS (None: as this process has it);
    beside other work, 1 (torch's threads spin, fighting over busy cores). Raises RuntimeError when
    the instructor's notebook fails or fails its own judge, or when an answer names no solution cell
    or a text not in it."""
    from nbclient.exceptions import CellTimeoutError, DeadKernelError
    from course_utils.grader import lessonfile

    # the cells as the grader runs them (solutions without markers)
    lesson = lessonfile.load_lesson(Path(notebook))
    hidden = [line for t in lesson.tests for line in t.hidden]
    # as nbgrader's Execute runs a submission
    env = {**os.environ, "NBGRADER_EXECUTION": "autograde"}
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    results, todo = [], list(answers)
    while todo:
        with _Kernel(lesson, env, cell_seconds) as kernel:
            while todo:
                answer = todo.pop(0)
                try:
                    results.append(kernel.judge(answer, hidden))
                except (CellTimeoutError, DeadKernelError) as e:
                    results.append(Judged(answer, None,
                                          f"{type(e).__name__} (the kernel hung or died)"))
                    break   # a fresh kernel for the rest
    return results
