"""nbgrader's autograde and feedback steps for untrusted code (set in nbgrader_config.py).

- SanitizeSubmission: the first sanitizing step; the submission is rebuilt as the release with the
  learner's answer cells put in, so forged, renamed or deleted cells never reach nbgrader's checks.
- HardenedExecute: takes the place of nbgrader's Execute; the answers run in course_utils.sandbox
  and each test cell is judged outside it (course_utils.hardened), its outcome written as the cell's
  output, which nbgrader's SaveAutoGrades scores as usual.
- HideTestsInFeedback: `nbgrader generate_feedback` shows outcomes, never the hidden tests.
"""

import json
import zlib
from pathlib import Path

from nbgrader.preprocessors import ClearHiddenTests, NbGraderPreprocessor
from traitlets import Float, Integer, List

from course_utils.hardened import failed, grade_answers, reference_for
from course_utils.lessonfile import read_answers
from course_utils.review import review
from course_utils.isolation import isolation_warning
from course_utils.sandbox import Limits


class HideTestsInFeedback(ClearHiddenTests):
    """nbgrader's ClearHiddenTests, for `nbgrader generate_feedback`: the feedback shows each
    test's outcome, never the hidden tests. (Its parent's display_data_priority is not a config
    trait, so nbconvert's HTML exporter, which configures it for every step, made traitlets warn.)"""

    display_data_priority = List(NbGraderPreprocessor.display_data_priority.default_value).tag(config=True)

    def preprocess_cell(self, cell, resources, cell_index):
        """Test cells only (they come from the instructor's notebook): nbgrader's markers written
        anywhere in a learner's answer must not make this step fail for that learner."""
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution"):
            return super().preprocess_cell(cell, resources, cell_index)
        return cell, resources


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
        if warning := isolation_warning():
            self.log.warning("course_utils.autograde: %s", warning)
        answers, notes = read_answers(dict(nb), reference.lesson)
        try:
            result = grade_answers(reference.lesson, reference, answers, notes, info["student"], limits,
                                   slot=zlib.crc32(info["student"].encode()) % 4000)
        except Exception as e:  # noqa: BLE001 - scored 0 with the reason, so the class's grading goes on
            self.log.error("%s: the grader failed on this submission: %r", info["student"], e)
            result = failed(reference.lesson, info["student"], notes, e)
        for note in result.notes:
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
