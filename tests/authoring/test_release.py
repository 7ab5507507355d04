"""course_utils.authoring.release: bad invocations stop with a one-line error before anything runs;
a notebook is executed in place with its outputs saved. (That the committed notebooks/ are what
nbgrader makes from solutions/ is tests/grader/test_preprocessors.py's.)"""

from pathlib import Path

import nbformat
import pytest

from course_utils.authoring import release

ROOT = Path(__file__).resolve().parents[2]


def test_it_runs_only_from_the_course_root(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        release.main(["01-circuits"])
    assert stop.value.code == 2 and "run this from the repository root" in capsys.readouterr().err


def test_an_unknown_lesson_is_named_with_the_known_ones(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    with pytest.raises(SystemExit) as stop:
        release.main(["01-circuit"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "unknown lessons ['01-circuit']" in err and "01-circuits" in err


@pytest.mark.slow
def test_a_notebook_is_executed_in_place_with_its_outputs(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import os\nprint(os.path.basename(os.getcwd()), 6 * 7)")]
    folder = tmp_path / "lesson"
    folder.mkdir()
    nbformat.write(nb, folder / "lesson.ipynb")
    assert release.execute_in_place(folder / "lesson.ipynb") >= 0
    out = nbformat.read(folder / "lesson.ipynb", as_version=4).cells[0].outputs
    assert out[0]["text"] == "lesson 42\n", "run in the notebook's own folder, outputs saved"
