"""course_utils.authoring.wronganswers: which wrong answers the grader grades and which one kernel
judges, the kernel's judging on a small lesson of its own, and then every lesson's wrong and second
correct answers judged in one kernel each: a wrong answer's hidden test fails with a message that
names the mistake (the words in tests/mutants/LESSON.json), a second correct answer's passes.
tests/grader/test_preprocessors.py grades the cheats, the memory cheats and each exercise's first
wrong answer through nbgrader.
"""

from pathlib import Path

import nbformat
import pytest

from course_utils.authoring import nbgrader_cli
from course_utils.authoring.once import Once
from course_utils.authoring.wronganswers import in_kernel, judge_in_kernel, load, through_grader

ROOT = Path(__file__).resolve().parents[2]
GRADED = nbgrader_cli.lessons(ROOT, graded=True)


def test_the_grader_grades_cheats_memory_cheats_and_each_exercises_first_plain_wrong_answer():
    mutants = [{"student": "a_cheat_first", "cell": "a", "source": "def f(): pass"},
               {"student": "a1", "cell": "a", "old": "x", "new": "y"},
               {"student": "b1", "cell": "b", "old": "x", "new": "y"},
               {"student": "a2", "cell": "a", "old": "x", "new": "z"},
               {"student": "a_cheat", "cell": "a", "source": "def f(): pass"},
               {"student": "b_memory", "cell": "b", "old": "x", "new": "w", "needs": "memory"},
               {"student": "b2", "cell": "b", "old": "x", "new": "v"}]
    assert ([m["student"] for m in through_grader(mutants)]
            == ["a_cheat_first", "a1", "b1", "a_cheat", "b_memory"])
    assert [m["student"] for m in in_kernel(mutants)] == ["a1", "b1", "a2", "b2"]
    twins = [{"student": "same", "cell": "a", "old": "x", "new": "y"},
             {"student": "same", "cell": "a", "old": "x", "new": "y"}]
    assert through_grader(twins) == twins[:1]   # by position, not by equal contents


TINY_TEST = '''assert double(1.0) == 2.0, "double(1.0) is not 2.0"
### BEGIN HIDDEN TESTS
from course_utils.judging import grade
def probe():
    return [double(x) for x in (1.5, 0.0)]
### BEGIN EXPECTED
def expect():
    return [3.0, 0.0]
def judge(got, want):
    assert type(got) is list and all(type(g) is float for g in got), (
        f"double returned {[type(g).__name__ for g in got]}")
    assert got == want, f"double gave {got}, expected {want}"
### END EXPECTED
grade(probe, expect, judge)
### END HIDDEN TESTS'''


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A one-exercise lesson of its own (double(x) = 2x, hidden cases 1.5 and 0.0) in nbgrader's
    form."""
    meta = lambda gid, **kw: {"nbgrader": {"grade_id": gid, "schema_version": 3,
                                           "locked": False, **kw}}
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("import math"),
        nbformat.v4.new_code_cell("def double(x):\n    ### BEGIN SOLUTION\n    return 2.0 * x\n"
                                  "    ### END SOLUTION",
                                  metadata=meta("t_double", solution=True, grade=False)),
        nbformat.v4.new_code_cell(
            TINY_TEST, metadata=meta("t_double_test", solution=False, grade=True, points=1))])
    path = tmp_path_factory.mktemp("tiny") / "99-tiny.ipynb"
    nbformat.write(nb, path)
    return path


def test_one_kernel_judges_as_the_grader_would(tiny):
    """The hidden verdict is kept when the visible test above it fails; results cross the grader's
    wire format first (a float subclass arrives as an opaque object); an answer cell that raises is
    named; a correct answer passes, and each answer finds the solution put back after the one
    before."""
    answers = [{"cell": "t_double", "old": "2.0 * x", "new": "3.0 * x"},
               {"cell": "t_double", "old": "return 2.0 * x",
                "new": "return type('F', (float,), {})(2.0 * x)"},
               {"cell": "t_double", "old": "return", "new": "retrun"},
               {"cell": "t_double", "source": "def double(x):\n    return x + x"}]
    got = judge_in_kernel(tiny, answers)
    assert [g.answer for g in got] == answers
    assert got[0].verdict == "double gave [4.5, 0.0], expected [3.0, 0.0]"
    assert "double(1.0) is not 2.0" in got[0].error          # the visible test failed first
    assert got[1].verdict.startswith("double returned [") and "'float'" not in got[1].verdict
    assert (got[2].verdict is None and "SyntaxError" in got[2].error
            and "answer cell" in got[2].outcome)
    assert got[3].verdict == "" and got[3].error == ""


def test_an_answer_that_hangs_is_its_own_outcome_and_a_fresh_kernel_judges_the_next(tiny):
    answers = [{"cell": "t_double", "old": "return 2.0 * x",
                "new": "import time\n    time.sleep(60)\n    return 2.0 * x"},
               {"cell": "t_double", "old": "2.0 * x", "new": "3.0 * x"}]
    got = judge_in_kernel(tiny, answers, cell_seconds=3)
    # interrupted at cell_seconds
    assert got[0].verdict is None and "KeyboardInterrupt" in got[0].error
    assert got[1].verdict == "double gave [4.5, 0.0], expected [3.0, 0.0]"


def test_an_instructor_whose_hidden_test_fails_its_own_judge_is_an_error(tiny, tmp_path):
    nb = nbformat.read(tiny, as_version=4)
    nb.cells[2].source = nb.cells[2].source.replace("return [3.0, 0.0]", "return [3.0, 1.0]")
    nbformat.write(nb, broken := tmp_path / "99-tiny.ipynb")
    with pytest.raises(RuntimeError, match="fails its own judge: double gave"):
        judge_in_kernel(broken, [{"cell": "t_double", "old": "2.0", "new": "3.0"}])


def test_an_answer_whose_text_is_not_in_the_solution_is_an_error(tiny):
    with pytest.raises(RuntimeError, match="does not contain 'return 4'"):
        judge_in_kernel(tiny, [{"cell": "t_double", "old": "return 4", "new": "return 5"}])
    with pytest.raises(RuntimeError, match="no solution cell 't_triple'"):
        judge_in_kernel(tiny, [{"cell": "t_triple", "source": "pass"}])


def _judged(name: str) -> dict:
    """{"mutants": [Judged], "alternates": [Judged]} of one lesson, in one kernel."""
    mutants, alternates = in_kernel(load(ROOT, "mutants", name)), load(ROOT, "alternates", name)
    # one thread: another test file runs beside this one (conftest.py), and spinning threads on busy
    # cores made lesson 10's judging five times slower (420 s against 87 s alone)
    results = judge_in_kernel(nbgrader_cli.notebook_path(ROOT, "solutions", name),
                              mutants + alternates, threads=1)
    return {"mutants": results[:len(mutants)], "alternates": results[len(mutants):]}


# a failure once in full, then named
judged = Once("judging the wrong and second answers of", _judged)


def _cases(kind: str):
    """(lesson, index) of each answer judge() judges: wrong answers by their student, second answers
    by number."""
    return [pytest.param(n, i, id=f"{n}-{a['student'] if kind == 'mutants' else f'alternate{i}'}")
            for n in GRADED
            for i, a in enumerate(in_kernel(load(ROOT, kind, n)) if kind == "mutants"
                                  else load(ROOT, kind, n))]


@pytest.mark.slow
@pytest.mark.parametrize("name, index", _cases("mutants"))
def test_a_wrong_answer_fails_its_hidden_test_naming_the_mistake(name, index):
    result = judged(name)["mutants"][index]
    mutant, words = result.answer, result.answer["feedback"]
    assert result.verdict != "", (f"{mutant['student']}: a wrong {mutant['cell']} passed "
                                  "its hidden test")
    assert words in result.outcome, (f"{mutant['student']}: the outcome of {mutant['cell']}_test "
                                     f"does not say {words!r}: {result.outcome}")


@pytest.mark.slow
@pytest.mark.parametrize("name, index", _cases("alternates"))
def test_a_second_correct_answer_passes_its_hidden_test(name, index):
    result = judged(name)["alternates"][index]
    assert result.verdict == "", (f"{name}: the second correct answer ({result.answer['note']}) "
                                  f"failed: {result.outcome}")
