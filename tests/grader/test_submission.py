"""One submission from its bytes to its Result (course_utils.grader.submission), with the sandboxed
grading stubbed: what grade_one adds around it (notes, review flags, the grader's own failure)."""

from test_gradefolder import FIXTURE, submission

from course_utils.grader import lessonfile
from course_utils.grader import submission as one
from course_utils.grader.grade import Outcome, Result, Status

LESSON = lessonfile.load_lesson(FIXTURE)


def full_marks(lesson, reference, answers, notes=None, student="", limits=None, slot=0):
    return Result(student, lesson.name, {t.gid: Outcome(t.points, t.points, "")
                                         for t in lesson.tests}, list(notes or []))


def test_an_unreadable_file_is_a_note_not_an_error(tmp_path):
    assert one.read_submission(tmp_path / "missing.ipynb") == (
        b"", ["the submitted file could not be read (No such file or directory)"])
    (tmp_path / "big.ipynb").write_bytes(b"x" * (lessonfile.MAX_SUBMISSION_BYTES + 10))
    data, notes = one.read_submission(tmp_path / "big.ipynb")
    assert len(data) == lessonfile.MAX_SUBMISSION_BYTES + 1 and notes == []


def test_grade_one_reviews_the_answers_it_graded(monkeypatch):
    monkeypatch.setattr(one, "grade_answers", full_marks)
    data = submission(fx_scale="import os\ndef scale(x, k):\n    return x * k\n")
    result = one.grade_one(LESSON, None, "ada", data, ["a note"], None, 0)
    assert result.score == result.points == 5 and result.notes == ["a note"]
    assert result.review and "os" in " ".join(result.review)


def test_the_graders_own_failure_is_a_row_of_zeros_with_the_reason(monkeypatch):
    def boom(*args, **kwargs):
        raise RecursionError("the grader's own trouble")
    monkeypatch.setattr(one, "grade_answers", boom)
    result = one.grade_one(LESSON, None, "bob", submission(), [], None, 0)
    assert result.score == 0 and result.points == 5
    assert {o.status for o in result.outcomes.values()} == {Status.NOT_GRADED}
    assert all("RecursionError" in o.message for o in result.outcomes.values())
