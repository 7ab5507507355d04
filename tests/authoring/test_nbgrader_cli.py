"""course_utils.authoring.nbgrader_cli: the parts that need no nbgrader run (the pipeline is tests/grader/test_preprocessors.py)."""

import pytest

from course_utils.authoring.nbgrader_cli import mutant_rounds


def students(rounds):
    return [[m["student"] for m in r] for r in rounds]


def test_rounds_put_one_mutant_per_exercise_and_leave_one_exercise_right():
    ms = [dict(cell=c, student=f"{c}{i}") for c, n in (("a", 2), ("b", 1), ("c", 3)) for i in range(n)]
    rounds = mutant_rounds(ms)
    assert students(rounds) == [["a0", "b0"], ["a1", "c0"], ["c1"], ["c2"]]
    for r in rounds:
        cells = [m["cell"] for m in r]
        assert len(cells) == len(set(cells)) <= 2
    assert sorted(m["student"] for r in rounds for m in r) == sorted(m["student"] for m in ms)


@pytest.mark.parametrize("ms", [[], [dict(cell="a", student=1), dict(cell="a", student=2)]])
def test_degenerate_cases(ms):
    assert students(mutant_rounds(ms)) == [[m["student"]] for m in ms]
