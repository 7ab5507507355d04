"""nbgrader's autograde and feedback steps for untrusted code (set in nbgrader_config.py).

- SubmissionExporter: reads each submission for `nbgrader autograde`; a file that is not a
  notebook (empty, truncated, not UTF-8) is graded as an empty one with the reason as a note, so it
  scores 0 with that reason in the gradebook instead of failing with no reason after the run.
- SanitizeSubmission: the first sanitizing step; the submission is rebuilt as the release with the
  learner's answer cells put in (code answers and written answers, the source text only), so forged,
  renamed or deleted cells never reach nbgrader's checks. A written answer (a markdown cell nbgrader
  grades by hand) keeps the learner's text: nbgrader's SaveAutoGrades scores it 0 if it still holds
  the release's stub, and otherwise marks it "needs manual grade" for Formgrader.
- HardenedExecute: takes the place of nbgrader's Execute; the answers run in
  course_utils.grader.worker and each test cell is judged outside it (course_utils.grader.grade),
  its outcome written as the cell's output, which nbgrader's SaveAutoGrades scores as usual.
- SaveReasons: after nbgrader's SaveAutoGrades, each exercise's reasons for lost points (and the
  grader's notes) become the auto_comment of its answer cell in the gradebook, which Formgrader and
  `nbgrader generate_feedback` show: no 0 without a reason where the instructor looks.
- HideTestsInFeedback: `nbgrader generate_feedback` shows outcomes, never the hidden tests.
- validate_like_grading(c): nbgrader's Validate set on the configuration as grading runs.

A submission the machine kept from being graded (course_utils.grader.grade.Status.OVERLOADED) is not
scored: HardenedExecute raises, so nbgrader reports it as failed and exits non-zero. Grade it again.
"""

import json
import zlib
from pathlib import Path

import nbformat
from nbconvert.exporters import NotebookExporter
from nbgrader.preprocessors import ClearHiddenTests, NbGraderPreprocessor
from traitlets import Enum, Float, Integer, List

from course_utils.grader.grade import Status, failed, grade_answers, reference_for
from course_utils.grader.lessonfile import read_answers
from course_utils.grader.review import review
from course_utils.grader.rootworker import check_sandbox
from course_utils.grader.worker import Limits

DEFAULTS = Limits()


class HideTestsInFeedback(ClearHiddenTests):
    """nbgrader's ClearHiddenTests, for `nbgrader generate_feedback`: the feedback shows each
    test's outcome, never the hidden tests. (Its parent's display_data_priority is not a config
    trait, so nbconvert's HTML exporter, which configures it for every step, made traitlets
    warn.)"""

    display_data_priority = List(
        NbGraderPreprocessor.display_data_priority.default_value).tag(config=True)

    def preprocess_cell(self, cell, resources, cell_index):
        """Test cells only (they come from the instructor's notebook): nbgrader's markers written
        anywhere in a learner's answer must not make this step fail for that learner."""
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution"):
            return super().preprocess_cell(cell, resources, cell_index)
        return cell, resources


# The grader's notes on a submission: from SubmissionExporter to SanitizeSubmission in
# resources[NOTES], then to HardenedExecute in the rebuilt notebook's metadata (built from the
# release: no learner writes it).
NOTES = "course_utils_notes"


class SubmissionExporter(NotebookExporter):
    """nbgrader's exporter (c.Autograde.exporter_class), except that a submitted file nbformat
    cannot read becomes an empty notebook with a note saying why: graded, it scores 0 with that
    reason where the instructor looks (gradebook comment, log), instead of failing the
    submission."""

    def from_file(self, file_stream, resources=None, **kw):
        try:
            nb = nbformat.read(file_stream, as_version=4)
        except Exception as e:  # whatever is wrong with the file, it is the learner's file
            what = ("not UTF-8 text" if isinstance(e, UnicodeDecodeError)
                    else "empty, truncated or not a notebook")
            nb = nbformat.v4.new_notebook()
            resources = dict(resources or {})
            resources[NOTES] = [f"the submitted file could not be read as a notebook ({what}): "
                                "it was graded as if empty"]
        return self.from_notebook_node(nb, resources=resources, **kw)


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
        from nbgrader.coursedir import CourseDirectory

        coursedir = CourseDirectory(config=self.config)
        info = resources["nbgrader"]

        def path(directory):
            return (Path(coursedir.format_path(directory, ".", info["assignment"]))
                    / f"{info['notebook']}.ipynb")

        clean = nbformat.read(path(coursedir.release_directory), as_version=4)
        tests = {c.metadata.nbgrader.grade_id: c.source
                 for c in nbformat.read(path(coursedir.source_directory), as_version=4).cells
                 if c.metadata.get("nbgrader", {}).get("grade")
                 and not c.metadata.nbgrader.get("solution")}
        wanted = {c.metadata.nbgrader.grade_id: c.cell_type for c in clean.cells
                  if c.metadata.get("nbgrader", {}).get("solution")}
        answers, notes = read_answers(json.loads(json.dumps(nb)), wanted)
        notes = list(resources.get(NOTES, [])) + notes
        clean.metadata[NOTES] = notes   # for HardenedExecute, which grades the rebuilt notebook
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

    cell_seconds = Float(DEFAULTS.cell_seconds,
                         help="time limit for one cell of the learner's notebook (its own time, "
                              "not the wall clock of a busy machine)").tag(config=True)
    notebook_seconds = Float(DEFAULTS.notebook_seconds,
                             help="time limit for a whole submission").tag(config=True)
    memory_bytes = Integer(DEFAULTS.memory_bytes,
                           help="address space per process of the learner's code").tag(config=True)
    sandbox = Enum(["required", "optional"], DEFAULTS.sandbox,
                   help="'required': stop where the learner's code would run without the "
                        "sandbox's namespaces; 'optional': grade there with resource "
                        "limits only").tag(config=True)

    def limits(self) -> Limits:
        return Limits(cell_seconds=self.cell_seconds, notebook_seconds=self.notebook_seconds,
                      memory_bytes=self.memory_bytes, sandbox=self.sandbox)

    def preprocess(self, nb, resources):
        from nbgrader.coursedir import CourseDirectory

        limits = self.limits()
        warning = check_sandbox(limits)   # raises SandboxUnavailable: fails closed
        coursedir = CourseDirectory(config=self.config)
        info = resources["nbgrader"]
        source = (Path(coursedir.format_path(coursedir.source_directory, ".", info["assignment"]))
                  / f"{info['notebook']}.ipynb")
        if warning:
            self.log.warning("course_utils.grader.preprocessors: %s", warning)
        # shared by this process's gradings, then closed
        with reference_for(source, limits) as reference:
            lesson = reference.lesson
            answers, notes = read_answers(dict(nb), lesson)
            notes = list(nb.metadata.get(NOTES, [])) + notes
            try:
                result = grade_answers(lesson, reference, answers, notes, info["student"], limits,
                                       slot=zlib.crc32(info["student"].encode()) % 4000)
            except Exception as e:  # scored 0 with the reason, so the class's grading goes on
                self.log.error("%s: the grader failed on this submission: %r", info["student"], e)
                result = failed(lesson, info["student"], notes, e)
        if result.overloaded:
            why = next(o.message for o in result.outcomes.values() if o.status is Status.OVERLOADED)
            raise RuntimeError(f"{info['student']}: {why}")
        for note in result.notes:
            self.log.warning("%s: %s", info["student"], note)
        for gid, outcome in result.outcomes.items():
            if outcome.score < outcome.points:
                self.log.info("%s: %s %g/%g: %s", info["student"], gid, outcome.score,
                              outcome.points, outcome.message)
        resources["course_reasons"] = reasons(lesson, result)
        for line in review(lesson, answers):
            self.log.warning("%s: read this answer (course_utils.grader.review): %s",
                             info["student"], line)
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
                cell.outputs = [nbformat.v4.new_output("error", ename="Failed",
                                                       evalue=outcome.message,
                                                       traceback=[f"Failed: {outcome.message}"])]
        return nb, resources


def reasons(lesson, result) -> dict[str, str]:
    """{answer cell grade id: what its tests lost points for}, the grader's notes on the first."""
    by_answer: dict[str, list[str]] = {}
    for test in lesson.tests:
        outcome = result.outcomes[test.gid]
        if outcome.message:
            by_answer.setdefault(test.exercise, []).append(
                f"{test.gid} ({outcome.score:g}/{outcome.points:g}): {outcome.message}")
    if result.notes and lesson.answers:
        by_answer.setdefault(lesson.answers[0].gid, []).extend(f"note: {n}" for n in result.notes)
    return {gid: "\n".join(lines) for gid, lines in by_answer.items()}


class SaveReasons(NbGraderPreprocessor):
    """After nbgrader's SaveAutoGrades: the reasons HardenedExecute found for lost points become the
    auto_comment of each exercise's answer cell in the gradebook (nbgrader keeps comments on answer
    cells), which Formgrader shows beside the score and generate_feedback puts in the feedback."""

    def preprocess(self, nb, resources):
        from nbgrader.api import Gradebook
        found = resources.get("course_reasons") or {}
        info = resources["nbgrader"]
        with Gradebook(info["db_url"]) as gradebook:
            for gid, text in found.items():
                try:
                    comment = gradebook.find_comment(gid, info["notebook"], info["assignment"],
                                                     info["student"])
                except Exception:  # no such answer cell in the gradebook: the log has the reason
                    continue
                comment.auto_comment = "\n".join(filter(None, [comment.auto_comment, text]))
            gradebook.db.commit()
        return nb, resources


def validate_like_grading(c) -> None:
    """Set nbgrader's Validate (the button, `nbgrader validate`) on config c as grading runs: the
    learner's own notebook in a normal kernel, stopped at the grader's limit per cell
    (c.HardenedExecute.cell_seconds where c sets it before this call, else Limits()'s), going on
    past errors so every failing cell is listed. nbgrader_config.py and the hub's shared config
    (hub/classroom.py) call it."""
    configured = c.HardenedExecute.get("cell_seconds") if "HardenedExecute" in c else None
    c.Execute.timeout = int(-(-(configured if configured is not None else Limits().cell_seconds)
                              // 1))   # whole seconds, up
    c.Execute.interrupt_on_timeout = True
    # going on past errors is nbgrader's Execute's own fixed default (allow_errors = True, not a
    # setting: setting it only logs "Config option allow_errors not recognized by Execute")
