"""Grades that nothing but the learner's own code can change: a busy machine and a hostile
neighbour.

A class of the fixture lesson (tests/fixtures/99-fixture) is graded with the folder command, two
submissions at a time, (1) while CPU hogs started outside the grader oversubscribe the machine 4
times over (each in a session of its own, as other users' work is: the load average climbs to
about 10 on 2 cores), with a cell limit (LOADED) that the lesson's first cell (import torch) passes
on its own time, about 2-3 s, and fails on the wall clock, 8-13 s on 2 cores: a grader that timed
cells on the wall clock would charge these learners for the machine; and (2) beside a hostile
submission that forks CPU spinners, each in a session of its own, and sleeps every cell to just
under its limit. Each learner must score exactly what the same submission scores on a quiet machine
(its case in tests/grader/corpus/, as tests/grader/test_grade.py loads it), and none may be left
"not graded".
"""

from dataclasses import replace

import pytest

from course_utils.grader import gradefolder
from course_utils.authoring.nbgrader_cli import oversubscribed
from test_grade import CORPUS, FIXTURE, LIMITS, dumps, notebook

# its CPU hogs would slow the other test worker's tests
pytestmark = [pytest.mark.slow, pytest.mark.alone]

# A right and a wrong answer: each must keep its own score (an untouched notebook scores 0 either
# way).
QUIET = {name: CORPUS[name].expected for name in ("solved", "wrong_answer")}
# twice the first cell's own time under the load, under half its wall clock
LOADED = replace(LIMITS, cell_seconds=6)


def _grade(tmp_path, submissions: dict[str, bytes], limits=LIMITS):
    folder = tmp_path / "class"
    folder.mkdir()
    for student, data in submissions.items():
        (folder / f"{student}.ipynb").write_bytes(data)
    results = gradefolder.grade_folder(FIXTURE, folder, tmp_path / "out", jobs=2, limits=limits)
    return {r.student: r for r in results}


def _check(result, expected):
    got = {gid: o.score for gid, o in result.outcomes.items()}
    reasons = " | ".join(o.message for o in result.outcomes.values())
    assert not result.overloaded, f"{result.student} was left not graded: {reasons}"
    assert got == expected, (f"{result.student} scored {got}, {expected} on a quiet "
                             f"machine: {reasons}")


def test_a_class_on_an_oversubscribed_machine_scores_what_it_scores_on_a_quiet_one(tmp_path):
    with oversubscribed(4):
        results = _grade(tmp_path, {name.replace("_", "-"): CORPUS[name].data(tmp_path)
                                    for name in QUIET}, LOADED)
    for name, expected in QUIET.items():
        _check(results[name.replace("_", "-")], expected)


HOSTILE = f"""import os, time
for _ in range(40):
    try:
        if os.fork() == 0:
            os.setsid()
            while True:
                pass
    except OSError:
        break
time.sleep({LIMITS.cell_seconds - 1})

def scale(x, k):
    time.sleep({LIMITS.cell_seconds - 1})
    return x * k
"""


def test_a_hostile_neighbour_changes_no_one_elses_score(tmp_path):
    results = _grade(tmp_path, {"mallory": dumps(notebook(fx_scale=HOSTILE)),
                                **{name.replace("_", "-"): CORPUS[name].data(tmp_path)
                                   for name in ("solved", "wrong_answer")}})
    for name in ("solved", "wrong_answer"):
        _check(results[name.replace("_", "-")], QUIET[name])
    assert results["mallory"].outcomes["fx_scale_test"].score == 0
