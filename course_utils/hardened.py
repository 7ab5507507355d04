"""Grading that untrusted code cannot fool: the learner's code runs in a sandbox, scores are decided outside it.

For one submission of a lesson:
1. From the submission only the source text of each answer cell is taken, found by the grade ids
   of the instructor's notebook (solutions/). Everything else (the lesson's cells, the tests, the
   points, the cell metadata) comes from the instructor's notebook, so forged, renamed, duplicated
   or deleted cells change nothing but the learner's own answers.
2. A sandboxed worker (course_utils.sandbox) runs the lesson with those answers, cell by cell, each
   cell under a time limit. Test cells arrive with their EXPECTED block cut out, so grade() there
   only sends back what the learner's code returned, as plain data (course_utils.judging).
3. A reference worker, which ran the instructor's notebook once, judges that data with the test
   cell's judge against its own expect(): the comparison never runs where the learner's code runs.
4. If the worker dies or hangs (os._exit, a segfault, a loop that ignores Ctrl-C, a memory bomb),
   the exercise whose code was running gets 0 with the reason, and a fresh worker runs the lesson
   again with that answer replaced by the not-attempted stub, so the other exercises are graded.

`nbgrader autograde LESSON` uses this through HardenedExecute (set in nbgrader_config.py);
`python -m course_utils.hardened LESSON FOLDER` grades a folder of submissions in parallel and
writes grades.csv and one feedback page per learner. Both also name, for the instructor only, the
answers that course_utils.review flags (code reaching outside its exercise), which scores ignore.
"""

import argparse
import csv
import html
import json
import re
import sys
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from course_utils.judging import raised_name
from course_utils.review import review
from course_utils.sandbox import Limits, Worker, WorkerDied, can_isolate

STUB = 'raise NotImplementedError("Exercise not attempted yet: replace this line with your code")'
_SOLUTION_MARKERS = re.compile(r"^\s*### (BEGIN|END) SOLUTION\s*$")


# ---------------------------------------------------------------------------------------------
# The instructor's notebook

@dataclass
class Cell:
    kind: str            # "lesson", "answer" or "test"
    source: str          # instructor's source (answers: the solution, markers removed)
    gid: str | None = None
    points: float = 0.0
    exercise: str | None = None   # tests: the answer cell they grade
    hidden: list[str] = field(default_factory=list)  # tests: lines of the hidden region


@dataclass
class Lesson:
    name: str
    path: Path
    cells: list[Cell]

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
    cells, last_answer = [], None
    for c in nb.cells:
        if c.cell_type != "code":
            continue
        meta = c.metadata.get("nbgrader", {})
        gid = meta.get("grade_id")
        if meta.get("solution"):
            if meta.get("grade"):
                raise ValueError(f"{path}: cell {gid} is both an answer and a test; the grader needs them apart")
            source = "\n".join(l for l in c.source.splitlines() if not _SOLUTION_MARKERS.match(l))
            cells.append(Cell("answer", source, gid))
            last_answer = gid
        elif meta.get("grade"):
            if last_answer is None:
                raise ValueError(f"{path}: test cell {gid} comes before any answer cell")
            cells.append(Cell("test", c.source, gid, float(meta.get("points", 0)), last_answer, _hidden_lines(c.source)))
        else:
            cells.append(Cell("lesson", c.source))
    return Lesson(path.stem, path, cells)


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


# ---------------------------------------------------------------------------------------------
# A submission: only the answer cells' text is used

def read_answers(data, lesson: "Lesson | set[str]") -> tuple[dict[str, str], list[str]]:
    """The learner's source for each answer cell of `lesson`, and notes on what was odd.

    Input: the submission as bytes/str (a file's content) or an already parsed dict / NotebookNode.
    Never raises on bad input: an unreadable file gives no answers and a note saying why.
    """
    notes = []
    if isinstance(data, (bytes, str)):
        if not data.strip():
            return {}, ["the submitted file is empty"]
        try:
            data = json.loads(data)
        except (ValueError, UnicodeDecodeError) as e:
            return {}, [f"the submitted file is not a readable notebook (invalid or truncated JSON: {str(e)[:80]})"]
    cells = data.get("cells") if isinstance(data, dict) else None
    if not isinstance(cells, list):
        if isinstance(data, dict) and isinstance(data.get("worksheets"), list):  # nbformat 3
            cells = [c for ws in data["worksheets"] if isinstance(ws, dict) for c in ws.get("cells", []) if isinstance(c, dict)]
            for c in cells:
                c.setdefault("source", c.get("input", ""))
        else:
            return {}, ["the submitted file is not a notebook (no list of cells)"]
    wanted = set(lesson) if isinstance(lesson, set) else {c.gid for c in lesson.answers}
    answers: dict[str, str] = {}
    for c in cells:
        if not isinstance(c, dict) or c.get("cell_type") != "code":
            continue
        meta = c.get("metadata") if isinstance(c.get("metadata"), dict) else {}
        nbg = meta.get("nbgrader") if isinstance(meta.get("nbgrader"), dict) else {}
        gid = nbg.get("grade_id")
        if gid not in wanted:
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
    for gid in sorted(wanted - set(answers)):
        notes.append(f"answer cell {gid} is missing from the submission; graded as not attempted")
    return answers, notes


# ---------------------------------------------------------------------------------------------
# The reference run

class Reference:
    """The instructor's notebook run once in a trusted worker; it judges learners' observations."""

    def __init__(self, lesson: Lesson, limits: Limits):
        self.lesson = lesson
        self.limits = limits
        self._lock = threading.Lock()
        self._start()

    def _start(self) -> None:
        lesson, limits = self.lesson, self.limits
        self.worker = Worker("reference", limits)
        self.worker.start()
        for i, cell in enumerate(lesson.cells):
            try:
                answer = self.worker.send({"op": "cell", "id": i, "gid": cell.gid, "source": cell.source},
                                          timeout=limits.cell_seconds * 5)
            except WorkerDied as e:
                raise RuntimeError(f"{lesson.path}: the reference run failed in cell {i} ({cell.gid or 'lesson'}): {e}") from None
            if answer.get("setup_error"):
                self.close()
                raise RuntimeError(f"{lesson.path}: cell {i} ({cell.gid or 'lesson cell'}) failed in the reference run: "
                                   f"{answer['setup_error']}")
            if cell.kind == "test" and answer.get("obs") is None:
                self.close()
                raise RuntimeError(f"{lesson.path}: test cell {cell.gid} never called grade(probe, expect, judge), so "
                                   f"it cannot be judged outside the learner's process (see course_utils/judging.py)")

    def judge(self, gid: str, obs) -> tuple[bool, str]:
        """Judge one learner's observation. If judging it kills or hangs the reference worker (a
        huge answer to compare), that answer fails, and the reference is run again for the others."""
        with self._lock:
            try:
                answer = self.worker.send({"op": "judge", "gid": gid, "obs": obs}, timeout=self.limits.cell_seconds)
            except WorkerDied:
                self.worker.kill()
                self._start()
                raise
        return bool(answer.get("ok")), str(answer.get("message", ""))

    def close(self) -> None:
        self.worker.kill()


# ---------------------------------------------------------------------------------------------
# Grading one submission

@dataclass
class Outcome:
    score: float
    points: float
    message: str            # empty when full marks; otherwise why, in a learner's words


@dataclass
class Result:
    student: str
    lesson: str
    outcomes: dict[str, Outcome]   # by test cell grade id, in notebook order
    notes: list[str]
    seconds: float = 0.0
    review: list[str] = field(default_factory=list)  # course_utils.review's flags: for the instructor only

    @property
    def score(self) -> float:
        return sum(o.score for o in self.outcomes.values())

    @property
    def points(self) -> float:
        return sum(o.points for o in self.outcomes.values())


def _redact(message: str, lesson: Lesson) -> str:
    """Feedback never quotes the hidden tests, whatever the learner's values contained."""
    message = message.strip()
    for cell in lesson.tests:
        for line in cell.hidden:
            text = line.strip()
            if len(text) >= 16 and text in message:
                return "wrong answer (the message quoted the hidden tests, so it is not shown)"
    return message if len(message) <= 600 else message[:600] + " ..."


def grade_answers(lesson: Lesson, reference: Reference, answers: dict[str, str], notes: list[str] | None = None,
                  student: str = "", limits: Limits | None = None, slot: int = 0) -> Result:
    """Run the learner's answers in a sandbox and judge each test cell outside it."""
    limits = limits or reference.limits
    start = time.monotonic()
    notes = list(notes or [])
    outcomes: dict[str, Outcome] = {}
    stubbed: dict[str, str] = {}   # answer gid -> why it was replaced by the stub
    untried = {gid for gid, src in answers.items() if src.strip().endswith(STUB) or not src.strip()}
    for gid in {c.gid for c in lesson.answers} - set(answers):
        stubbed[gid] = "not attempted"

    def source_of(cell: Cell) -> str:
        if cell.gid in stubbed:
            return STUB
        return answers.get(cell.gid, STUB)

    while True:
        last_answer, died = None, None
        cell_errors: dict[str, str] = {}
        with Worker("learner", limits, slot=slot) as worker:
            for i, cell in enumerate(lesson.cells):
                if cell.kind == "answer":
                    source, last_answer = source_of(cell), cell.gid
                elif cell.kind == "test":
                    source = learner_version(cell.source)
                else:
                    source = cell.source
                left = limits.notebook_seconds - (time.monotonic() - start)
                if left <= 0:
                    died = (i, f"the whole notebook ran past its time limit of {limits.notebook_seconds:.0f} s")
                    break
                try:
                    answer = worker.send({"op": "cell", "id": i, "gid": cell.gid, "source": source,
                                          "resilient": cell.kind == "test"}, timeout=min(limits.cell_seconds, left))
                except WorkerDied as e:
                    died = (i, str(e))
                    break
                if answer.get("id") != i:
                    died = (i, "the grader got an answer for another cell")
                    break
                answer["error"] = _error_name(answer.get("error"))
                if cell.kind == "answer" and answer["error"]:
                    cell_errors[cell.gid] = answer["error"]
                if cell.kind == "test" and cell.gid not in outcomes:
                    outcomes[cell.gid] = _judge_test(lesson, reference, cell, answer, stubbed, untried, cell_errors)
        if died is None:
            break
        i, why = died
        cell = lesson.cells[i]
        blamed = cell.exercise if cell.kind == "test" else (cell.gid if cell.kind == "answer" else last_answer)
        if "whole notebook" in why or blamed is None or blamed in stubbed:
            for test in lesson.tests:
                outcomes.setdefault(test.gid, Outcome(0.0, test.points, f"not graded: {why} (in cell {i + 1})"))
            break
        stubbed[blamed] = why
        for test in lesson.tests:
            if test.exercise == blamed and test.gid not in outcomes:
                where = "your answer cell" if cell.kind == "answer" else ("its test" if cell.kind == "test" else "a later cell that uses it")
                outcomes[test.gid] = Outcome(0.0, test.points, f"while {where} ran, {why}")
    ordered = {t.gid: outcomes[t.gid] for t in lesson.tests}
    return Result(student, lesson.name, ordered, notes, time.monotonic() - start)


def _error_name(name) -> str | None:
    """What the learner's worker says was raised, as feedback may show it (the worker is the
    learner's process: anything it sends is learner-controlled text)."""
    return None if name is None else raised_name((name,))


def _judge_test(lesson, reference, cell, answer, stubbed, untried, cell_errors) -> Outcome:
    points = cell.points
    ex = cell.exercise
    if ex in stubbed or ex in untried:
        return Outcome(0.0, points, "not attempted" if ex in untried or stubbed[ex] == "not attempted" else stubbed[ex])
    if answer.get("obs") is None:
        if ex in cell_errors:
            why = f"your answer cell raised {cell_errors[ex]}, so its function was not defined"
        elif answer.get("problem"):
            why = ("your code's results could not be sent to the grader: too large (over 2 million numbers), "
                   "too deeply nested, or a string of over 10,000 characters")
        elif answer.get("error"):
            why = (f"the test raised {answer['error']} while running your code"
                   + (" (the visible test above the hidden ones failed, or your code raised it)" if answer["error"] == "AssertionError" else ""))
        else:
            why = "the hidden tests did not run (was the test cell changed at run time?)"
        return Outcome(0.0, points, why)
    try:
        ok, message = reference.judge(cell.gid, answer["obs"])
    except WorkerDied as e:
        return Outcome(0.0, points, f"the grader could not compare your results ({e})")
    return Outcome(points if ok else 0.0, points, "" if ok else _redact(message, lesson))


# ---------------------------------------------------------------------------------------------
# nbgrader: `nbgrader autograde` with the learner's code sandboxed

_references: dict[tuple, Reference] = {}
_references_lock = threading.Lock()


def reference_for(path: Path, limits: Limits) -> Reference:
    """One Reference per instructor notebook (and its modification time) per grading process."""
    path = Path(path).resolve()
    key = (str(path), path.stat().st_mtime_ns)
    with _references_lock:
        if key not in _references:
            _references[key] = Reference(load_lesson(path), limits)
        return _references[key]


try:
    from nbgrader.preprocessors import ClearHiddenTests, NbGraderPreprocessor
    from traitlets import Float, Integer, List

    class HideTestsInFeedback(ClearHiddenTests):
        """nbgrader's ClearHiddenTests, for `nbgrader generate_feedback`: the feedback shows each
        test's outcome, never the hidden tests. (Its parent's display_data_priority is not a config
        trait, so nbconvert's HTML exporter, which configures it for every step, made traitlets warn.)"""

        display_data_priority = List(NbGraderPreprocessor.display_data_priority.default_value).tag(config=True)

    class SanitizeSubmission(NbGraderPreprocessor):
        """The first of nbgrader's sanitizing steps: the submission is rebuilt as the released
        notebook with the learner's answer cells put in (found by grade id). Forged, renamed,
        duplicated or deleted cells, odd metadata and other editors' formats then never reach
        nbgrader's own checks, which would fail the whole submission over them.

        Test cells come from the instructor's notebook, hidden tests included, as nbgrader's
        OverwriteCells would restore them: it then finds every locked cell as the gradebook has it
        and has nothing to warn about (from the release it would report each test cell's checksum
        as changed, for every submission, untouched ones too)."""

        def preprocess(self, nb, resources):
            import nbformat
            from nbgrader.coursedir import CourseDirectory

            coursedir = CourseDirectory(config=self.config)
            info = resources["nbgrader"]

            def path(directory):
                return Path(coursedir.format_path(directory, ".", info["assignment"])) / f"{info['notebook']}.ipynb"

            clean = nbformat.read(path(coursedir.release_directory), as_version=4)
            tests = {c.metadata.nbgrader.grade_id: c.source
                     for c in nbformat.read(path(coursedir.source_directory), as_version=4).cells
                     if c.metadata.get("nbgrader", {}).get("grade") and not c.metadata.nbgrader.get("solution")}
            wanted = {c.metadata.nbgrader.grade_id for c in clean.cells if c.metadata.get("nbgrader", {}).get("solution")}
            answers, notes = read_answers(json.loads(json.dumps(nb)), wanted)
            for note in notes:
                self.log.warning("%s: %s", info["student"], note)
            for cell in clean.cells:
                meta = cell.metadata.get("nbgrader", {})
                if meta.get("solution") and meta.get("grade_id") in answers:
                    cell.source = answers[meta["grade_id"]]
                elif meta.get("grade") and meta.get("grade_id") in tests:
                    cell.source = tests[meta["grade_id"]]
            return clean, resources

    class HardenedExecute(NbGraderPreprocessor):
        """nbgrader's Execute step, replaced: the notebook's answers run in course_utils' sandbox and
        each test cell's outcome is written as its output (an error output when it lost its points),
        which nbgrader's SaveAutoGrades then scores as usual."""

        cell_seconds = Float(60, help="time limit for one cell of the learner's notebook").tag(config=True)
        notebook_seconds = Float(600, help="time limit for a whole submission").tag(config=True)
        memory_bytes = Integer(6 * 2 ** 30, help="address space per process of the learner's code").tag(config=True)

        def preprocess(self, nb, resources):
            import nbformat
            from nbgrader.coursedir import CourseDirectory

            limits = Limits(cell_seconds=self.cell_seconds, notebook_seconds=self.notebook_seconds,
                            memory_bytes=self.memory_bytes)
            coursedir = CourseDirectory(config=self.config)
            info = resources["nbgrader"]
            source = Path(coursedir.format_path(coursedir.source_directory, ".", info["assignment"])) / f"{info['notebook']}.ipynb"
            reference = reference_for(source, limits)
            if not can_isolate():
                self.log.warning("course_utils.hardened: not root, so the learner's code runs with limits but "
                                 "without the sandbox (no separate user, network or hidden files)")
            answers, notes = read_answers(dict(nb), reference.lesson)
            result = grade_answers(reference.lesson, reference, answers, notes, info["student"], limits,
                                   slot=zlib.crc32(info["student"].encode()) % 4000)
            for note in notes:
                self.log.warning("%s: %s", info["student"], note)
            for line in review(reference.lesson, answers):
                self.log.warning("%s: read this answer (course_utils.review): %s", info["student"], line)
            for cell in nb.cells:
                if cell.cell_type != "code":
                    continue
                cell.outputs = []
                gid = cell.metadata.get("nbgrader", {}).get("grade_id")
                outcome = result.outcomes.get(gid)
                if outcome is None or not cell.metadata.get("nbgrader", {}).get("grade"):
                    continue
                if outcome.score == outcome.points:
                    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="Passed.\n")]
                else:
                    cell.outputs = [nbformat.v4.new_output("error", ename="Failed", evalue=outcome.message,
                                                           traceback=[f"Failed: {outcome.message}"])]
            return nb, resources
except ImportError:  # pragma: no cover - nbgrader is in requirements.txt
    pass


# ---------------------------------------------------------------------------------------------
# A folder of submissions -> grades.csv and feedback pages

def find_submissions(folder: Path, lesson: str) -> dict[str, Path]:
    """{student: notebook path} from nbgrader's layout (FOLDER/student/LESSON/LESSON.ipynb) or a
    flat folder of FOLDER/student.ipynb."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"no folder {folder}")
    found = {p.parent.parent.name: p for p in sorted(folder.glob(f"*/{lesson}/{lesson}.ipynb"))}
    found.update({p.stem: p for p in sorted(folder.glob("*.ipynb")) if p.stem not in found})
    return found


def grade_folder(source: Path, folder: Path, out: Path, jobs: int = 2, limits: Limits | None = None) -> list[Result]:
    """Grade every submission of the lesson whose instructor notebook is `source`; write
    out/grades.csv and out/feedback/STUDENT/LESSON.html. Returns the results, sorted by student."""
    limits = limits or Limits()
    lesson = load_lesson(source)
    submissions = find_submissions(folder, lesson.name)
    reference = Reference(lesson, limits)
    try:
        def one(item):
            slot, (student, path) = item
            try:
                data = path.read_bytes()
            except OSError as e:
                data = b""
                note = [f"the submitted file could not be read ({e.strerror})"]
            else:
                note = []
            answers, notes = read_answers(data, lesson)
            result = grade_answers(lesson, reference, answers, note + notes, student, limits, slot=slot)
            result.review = review(lesson, answers)
            return result

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            results = list(pool.map(one, enumerate(sorted(submissions.items()))))
    finally:
        reference.close()
    write_reports(results, lesson, Path(out))
    return results


def write_reports(results: list[Result], lesson: Lesson, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tests = [t.gid for t in lesson.tests]
    with open(out / "grades.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["student", "lesson", "score", "max_score", *tests, "reasons", "review"])
        for r in results:
            reasons = [f"{gid}: {o.message}" for gid, o in r.outcomes.items() if o.message] + r.notes
            w.writerow([r.student, r.lesson, f"{r.score:g}", f"{r.points:g}",
                        *[f"{r.outcomes[g].score:g}" for g in tests], " | ".join(reasons), " | ".join(r.review)])
    for r in results:
        page = out / "feedback" / r.student / f"{r.lesson}.html"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(feedback_html(r))


def feedback_html(result: Result) -> str:
    """A learner's feedback page: the score of each exercise and what was wrong, no test code."""
    rows = "\n".join(
        f"<tr><td>{html.escape(gid)}</td><td>{o.score:g} / {o.points:g}</td>"
        f"<td>{html.escape(o.message) if o.message else 'passed'}</td></tr>" for gid, o in result.outcomes.items())
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in result.notes)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(result.lesson)}: feedback</title>"
            f"<style>body{{font-family:sans-serif;max-width:60em}}td{{padding:.3em .8em;vertical-align:top}}</style></head>"
            f"<body><h1>{html.escape(result.lesson)}</h1><p>Score: <b>{result.score:g} / {result.points:g}</b></p>"
            f"<table><tr><th>test</th><th>points</th><th>feedback</th></tr>{rows}</table>"
            + (f"<h2>Notes</h2><ul>{notes}</ul>" if notes else "") + "</body></html>\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course_utils.hardened",
        description="Grade a folder of submissions of one lesson in sandboxes; write grades.csv and feedback pages.")
    parser.add_argument("lesson", help="lesson name (solutions/LESSON/LESSON.ipynb) or the instructor notebook's path")
    parser.add_argument("folder", help="submissions: FOLDER/STUDENT/LESSON/LESSON.ipynb (nbgrader's submitted/) or FOLDER/STUDENT.ipynb")
    parser.add_argument("--out", default="graded", help="where grades.csv and feedback/ go (default: graded)")
    parser.add_argument("--jobs", type=int, default=2, help="submissions graded at once (default 2)")
    parser.add_argument("--cell-seconds", type=float, default=60, help="time limit for one cell (default 60)")
    parser.add_argument("--notebook-seconds", type=float, default=600, help="time limit for a whole submission (default 600)")
    args = parser.parse_args(argv)
    source = Path(args.lesson)
    if source.suffix != ".ipynb":
        source = Path("solutions") / args.lesson / f"{args.lesson}.ipynb"
    if not source.is_file():
        parser.error(f"no instructor notebook {source}")
    if not can_isolate():
        print("warning: not root, so the learner's code runs with limits but without the sandbox "
              "(separate user, no network, hidden files): grade untrusted work as root in a container", file=sys.stderr)
    results = grade_folder(source, Path(args.folder), Path(args.out), args.jobs,
                           Limits(cell_seconds=args.cell_seconds, notebook_seconds=args.notebook_seconds))
    for r in results:
        print(f"{r.student}: {r.score:g} / {r.points:g}  ({r.seconds:.1f} s)" + ("  [review]" if r.review else ""))
    if any(r.review for r in results):
        print("[review]: an answer reaches outside its exercise (the review column of grades.csv says how); read it")
    print(f"wrote {Path(args.out) / 'grades.csv'} and {Path(args.out) / 'feedback'}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
