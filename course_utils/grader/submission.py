"""One submission, from its bytes to its Result: answers read, graded in the sandbox, reviewed,
written answers copied. The folder grader runs it here (gradefolder); a cluster's grading worker
runs it there (cluster)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from course_utils.grader.lessonfile import MAX_SUBMISSION_BYTES, Lesson, read_answers, read_written
from course_utils.grader.reports import clean
from course_utils.grader.review import review

if TYPE_CHECKING:
    from course_utils.grader.grade import Result
    from course_utils.grader.worker import Limits


def grade_answers(*args, **kwargs) -> Result:
    """course_utils.grader.grade.grade_answers, looked up when called (tests put a stub in its
    place)."""
    from course_utils.grader.grade import grade_answers
    return grade_answers(*args, **kwargs)


def reference_failed(lesson_name: str, error: BaseException) -> str:
    """What a grading run says when the lesson's reference run fails (here or on a worker)."""
    return (f"the reference run of {lesson_name} failed, nothing graded: "
            f"{' '.join(clean(error).split())}")


def read_submission(path: Path) -> tuple[bytes, list[str]]:
    """A submission's bytes (never more than read_answers accepts) and notes on reading it."""
    try:
        with open(path, "rb") as f:
            return f.read(MAX_SUBMISSION_BYTES + 1), []
    except OSError as e:
        return b"", [f"the submitted file could not be read ({e.strerror})"]


def grade_one(lesson: Lesson, reference, student: str, data: bytes, notes: list[str],
              limits: Limits, slot: int) -> Result:
    """One submission's Result, its review flags and written answers: here, or on a cluster's
    worker (course_utils.grader.cluster)."""
    from course_utils.grader.grade import failed
    try:
        answers, more = read_answers(data, lesson)
        result = grade_answers(lesson, reference, answers, notes + more, student, limits,
                               slot=slot)
        result.review = review(lesson, answers)
    except Exception as e:  # one submission's trouble never costs the others their grades
        result = failed(lesson, student, notes, e)
    if lesson.written:   # copied for the instructor, who grades them by hand
        result.written = read_written(data, lesson)[0]
    return result
