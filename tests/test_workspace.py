"""course_utils.workspace: a learner's copies of the lessons, which no release overwrites once
changed."""

import subprocess
import sys
from pathlib import Path

from course_utils.workspace import KEPT, fill, main

ROOT = Path(__file__).resolve().parents[1]


def release(tmp_path, **notebooks) -> Path:
    """A release folder: lesson/lesson.ipynb for each keyword, holding its text."""
    rel = tmp_path / "notebooks"
    for name, text in notebooks.items():
        (rel / name).mkdir(parents=True, exist_ok=True)
        (rel / name / f"{name}.ipynb").write_text(text)
    return rel


def test_first_fill_copies_every_lesson_and_says_so_in_one_line(tmp_path):
    rel, ws = release(tmp_path, a="A1", b="B1"), tmp_path / "ws"
    assert fill(rel, ws) == [f"copied 2 lesson(s) into {ws}: a, b"]
    assert (ws / "a" / "a.ipynb").read_text() == "A1" and (ws / "b" / "b.ipynb").read_text() == "B1"
    assert fill(rel, ws) == [], "a second fill with nothing new must do and say nothing"


def test_a_new_release_replaces_untouched_work_and_keeps_changed_work(tmp_path):
    rel, ws = release(tmp_path, a="A1", b="B1"), tmp_path / "ws"
    fill(rel, ws)
    (ws / "b" / "b.ipynb").write_text("my answers")           # the learner works in b
    # generate_assignment --force rewrites both
    release(tmp_path, a="A2", b="B2")
    lines = fill(rel, ws)
    assert (ws / "a" / "a.ipynb").read_text() == "A2", (
        "an untouched notebook should take the new release")
    assert (ws / "b" / "b.ipynb").read_text() == "my answers", "a learner's work was overwritten"
    assert (lines[0].startswith("updated a/a.ipynb") and "b/b.ipynb has a new release" in lines[1]
            and "kept" in lines[1])
    assert (ws / KEPT / "a" / "a.ipynb").read_text() == "A2"
    assert fill(rel, ws) == [lines[1]], ("the kept copy is named again at the next start, "
                                         "nothing else")


def test_a_deleted_notebook_comes_back_and_a_deleted_release_deletes_nothing(tmp_path):
    rel, ws = release(tmp_path, a="A1"), tmp_path / "ws"
    fill(rel, ws)
    (ws / "a" / "a.ipynb").unlink()
    (ws / KEPT / "a" / "a.ipynb").unlink()
    assert fill(rel, ws) == [f"copied 1 lesson(s) into {ws}: a"]
    (ws / "mine").mkdir()
    (ws / "mine" / "notes.ipynb").write_text("x")
    (rel / "a" / "a.ipynb").unlink()
    assert (fill(rel, ws) == [] and (ws / "a" / "a.ipynb").exists()
            and (ws / "mine" / "notes.ipynb").exists())


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    assert main([str(tmp_path / "missing"), str(tmp_path / "ws")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main([str(release(tmp_path, a="A")), str(blocker / "ws")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot fill the workspace" in err
    assert main([]) == 2


def test_course_sh_lab_fills_the_workspace_from_the_committed_release(tmp_path):
    """The command course.sh lab runs, on the real notebooks/: every lesson arrives, byte for
    byte."""
    ws = tmp_path / "ws"
    subprocess.run([sys.executable, "-m", "course_utils.workspace", str(ROOT / "notebooks"),
                    str(ws)], check=True)
    released = sorted(p.relative_to(ROOT / "notebooks")
                      for p in (ROOT / "notebooks").rglob("*.ipynb")
                      if ".ipynb_checkpoints" not in p.parts)
    assert released and sorted(p.relative_to(ws) for p in ws.glob("*/*.ipynb")) == released
