"""course_utils.authoring.nbgrader_cli: the parts that need no nbgrader run (the pipeline is
tests/grader/test_preprocessors.py)."""

import pytest

from course_utils.authoring.nbgrader_cli import mutant_rounds


def students(rounds):
    return [[m["student"] for m in r] for r in rounds]


def test_rounds_put_one_mutant_per_exercise_and_leave_one_exercise_right():
    ms = [dict(cell=c, student=f"{c}{i}") for c, n in (("a", 2), ("b", 1), ("c", 3))
          for i in range(n)]
    rounds = mutant_rounds(ms)
    # the busiest exercises first
    assert students(rounds) == [["a0", "c0"], ["a1", "c1"], ["b0", "c2"]]
    for r in rounds:
        cells = [m["cell"] for m in r]
        assert len(cells) == len(set(cells)) <= 2
    assert sorted(m["student"] for r in rounds for m in r) == sorted(m["student"] for m in ms)


@pytest.mark.parametrize("counts",
                         [(3, 3, 4, 3), (8, 14, 10), (5, 5, 6, 7), (12, 9, 7), (1, 1), (4,)])
def test_rounds_are_as_few_as_the_rules_allow(counts):
    """As many rounds as the busiest exercise has mutants, or as it takes to change all but one
    exercise per round, whichever is more."""
    ms = [dict(cell=f"e{k}", student=f"e{k}-{i}") for k, n in enumerate(counts) for i in range(n)]
    rounds = mutant_rounds(ms)
    per_round = max(1, len(counts) - 1)
    assert len(rounds) == max(max(counts), -(-sum(counts) // per_round))
    assert all(len({m["cell"] for m in r}) == len(r) <= per_round for r in rounds)
    assert sorted(m["student"] for r in rounds for m in r) == sorted(m["student"] for m in ms)


@pytest.mark.parametrize("ms", [[], [dict(cell="a", student=1), dict(cell="a", student=2)]])
def test_degenerate_cases(ms):
    assert students(mutant_rounds(ms)) == [[m["student"]] for m in ms]
