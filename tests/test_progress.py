"""course_utils.progress: items pass through unchanged, the progress goes to stdout (never stderr,
which nbgrader scores as a failure), and in a notebook one display output is updated in place."""

from course_utils import progress as prog


def test_items_pass_through_and_progress_goes_to_stdout(capsys):
    assert list(prog.progress([3, 1, 2], "sorting")) == [3, 1, 2]
    out, err = capsys.readouterr()
    assert err == ""
    assert "sorting: 0/3" in out and "sorting: 3/3 done in" in out and out.endswith("\n")


def test_iterables_without_len():
    assert list(prog.progress((i for i in range(4)), "gen")) == [0, 1, 2, 3]
    assert list(prog.progress(iter([]), "nothing")) == []


def test_line():
    assert prog.line("measuring", 3, 4, 2.05, width=4) == "measuring: 3/4 [###.] 2.0 s"
    assert prog.line("measuring", 5, None, 1.0) == "measuring: 5 1.0 s"
    assert prog.line("measuring", 4, 4, 2.94, finished=True) == "measuring: 4/4 done in 2.9 s"


def test_in_a_notebook_one_output_is_updated(monkeypatch):
    import IPython.display

    shown, updated = [], []
    monkeypatch.setattr(prog, "_in_notebook", lambda: True)
    monkeypatch.setattr(IPython.display, "display",
                        lambda obj, raw, display_id: shown.append((obj, display_id)))
    monkeypatch.setattr(IPython.display, "update_display",
                        lambda obj, raw, display_id: updated.append((obj, display_id)))
    assert list(prog.progress(range(2), "steps")) == [0, 1]
    assert len(shown) == 1 and len(updated) == 3
    assert {d for _, d in updated} == {shown[0][1]}
    assert updated[-1][0]["text/plain"].startswith("steps: 2/2 done in")
