"""course_utils.feedback: what of a judge's message a learner may see, and the feedback page."""

from course_utils import feedback
from course_utils.hardened import Outcome, Result


def test_strings_the_learners_process_made_up_are_not_quoted():
    """A judge that quotes a learner's value must not carry arbitrary text (the test cell's source,
    read from linecache) into feedback; expected strings and short names stay."""
    got = {"names": ["MulBackward0", "CASES = [[], [0, 0]]", "abc"]}
    want = {"names": ["MulBackward0", "AddBackward0"]}
    message = f"walk gave {got['names']}, expected {want['names']}; also CASES = [[], [0, 0]] and abc"
    assert feedback.scrub(message, got, want) == (
        "walk gave ['MulBackward0', <a string of 20 characters>, 'abc'], "
        "expected ['MulBackward0', 'AddBackward0']; also <text> and abc")


def test_names_and_the_judges_own_words_stay():
    """Exception names and probe keys come from the learner's process too, and are what feedback is
    made of ("raised ValueError"); a learner string inside a longer word leaves the word alone."""
    got = {"raised": ("ValueError", "Exception", "BaseException", "object"), "text": "acters x"}
    message = "micro_batch_weights([]) raised ValueError; 10 characters x"
    assert feedback.scrub(message, got, {}) == message


def test_a_message_quoting_the_hidden_tests_is_withheld_and_long_ones_cut():
    hidden = ["CASES = [(1.5, -2.0), (0.0, 3.0)]", "x = 1"]
    assert "not shown" in feedback.redact("got CASES = [(1.5, -2.0), (0.0, 3.0)] back", hidden)
    assert feedback.redact("x = 1 is fine", hidden) == "x = 1 is fine", "short lines are too common to match"
    assert feedback.redact("y" * 700, hidden) == "y" * feedback.MAX_MESSAGE + " ..."


def test_the_page_shows_scores_and_messages_escaped():
    result = Result("ada", "99-fixture", {"fx_scale_test": Outcome(0.0, 2.0, "scale(1, 2) is <3>"),
                                          "fx_count_test": Outcome(1.0, 1.0, "")}, ["a note & more"])
    page = feedback.page(result)
    assert "1 / 3" in page and "scale(1, 2) is &lt;3&gt;" in page and "passed" in page and "a note &amp; more" in page
