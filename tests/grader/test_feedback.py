"""course_utils.grader.feedback: what of a judge's message a learner may see, and the feedback page."""

from course_utils.grader import feedback
from course_utils.grader.grade import Outcome, Result


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


# The red team's leak: a hidden test's source, 7 bytes per integer, in a list the judge echoes.
SECRET = ("def expect():\n    return [sum(1 for v in case if v > 0) for case in CASES]\n"
          "CASES = [[3, -1, 4, -1, 5], [-9, -2, -6], [], [0, 0, 0], list(range(-5, 6))]\n"
          "def judge(got, want):\n    for g, w, case in zip(got, want, CASES):\n"
          "        check_float(g, w, f'count_positive({case})', rtol=0.0, atol=0.0)\n") * 2


def _chunks(text: bytes, n: int = 7) -> list[bytes]:
    return [text[i:i + n].ljust(n, b" ") for i in range(0, len(text), n)]


def _recovered(shown: str, chunks: list[bytes]) -> int:
    """How many bytes of `chunks` an attacker reads back from the numbers in `shown`: a number shown
    whole gives its 7 bytes; one cut to "1234567890…" gives the leading bytes that every integer of
    7 bytes starting with those digits shares."""
    import re
    got = 0
    numbers = re.findall(r"(?<![\w.])(\d+)(…)?", shown)
    for chunk in chunks:
        value = int.from_bytes(chunk, "big")
        for digits, cut in numbers:
            if not cut:
                if int(digits) == value:
                    got += len(chunk)
                    break
                continue
            width = len(str(value))
            if str(value).startswith(digits):
                low, high = int(digits) * 10 ** (width - len(digits)), (int(digits) + 1) * 10 ** (width - len(digits)) - 1
                a, b = low.to_bytes(8, "big")[1:], min(high, 2 ** 56 - 1).to_bytes(8, "big")[1:]
                same = next((i for i in range(7) if a[i] != b[i]), 7)
                got += same
                break
    return got


def test_numbers_in_a_message_carry_at_most_a_few_dozen_bytes():
    """60 integers of 7 bytes of the hidden tests each, echoed as a judge echoes a learner's result:
    before, every number the first 600 characters held came through whole (about 200 bytes of
    the source); now at most MAX_NUMBERS numbers of at most MAX_DIGITS digits, NUMBER_BUDGET in all."""
    chunks = _chunks(SECRET.encode())[:60]
    assert len(chunks) == 60
    got = [int.from_bytes(c, "big") for c in chunks]
    message = f"count_positive([3, -1, 4, -1, 5]) is {got}, expected 3"
    whole = message[:feedback.MAX_MESSAGE]
    assert _recovered(whole, chunks) >= 150, "the attack as it was: the numbers of one message, whole"
    shown = feedback.redact(message, [])
    assert _recovered(shown, chunks) <= 40, shown
    digits = sum(ch.isdigit() for ch in shown)
    assert digits <= feedback.NUMBER_BUDGET + 3 and digits * 0.415 <= 64, "at most ~64 bytes, whatever the encoding"
    assert shown.startswith("count_positive([3, -1, 4, -1, 5]) is [") and shown.endswith(", …], expected 3")


def test_numbers_are_shortened_and_bounded_but_the_lessons_messages_keep_theirs():
    assert feedback.redact("got 0.30000000000000004, expected 0.3", []) == "got 0.3000000000…, expected 0.3"
    assert feedback.redact("x is 12345678901234567 and 1.2345678901234567e-05", []) == \
        "x is 1234567890… and 1.2345678…e-05"
    assert feedback.redact("node x12345678901234567890y", []) == "node x1234567890…y", "digits in a name are cut too"
    assert feedback.redact(f"f() is {list(range(100, 140))}, expected 7", []).count("1") <= 2 * feedback.MAX_NUMBERS
    # messages of the lessons' judges, with every number they show (15 numbers, 52 digits at most)
    for message in [
        "second_circuit_grads(3.0, -4.0, 2.0, -1.0) is (-4, 3, 1, 0), expected (-8, 6, 2, 0): the factor 2 "
        "of the last gate is missing: every gradient must be multiplied by it.",
        "neuron_grads([2.0, -3.0, -3.0], [-1.0, -2.0]): dw is (-0.731059, -1.46212, 0.731059), expected "
        "(-0.196612, -0.393224, 0.196612): the sigmoid's local gradient is s(1 - s), not s.",
        "mlp_backward(MLPScratch(10, 3, [8, 6]), X of shape (7, 10), lam=0.1): weight_grads[0] differs from the "
        "expected values (largest difference 1.51): the cross-entropy part is exactly n = 7 times too large",
        "gradient_shapes((2, 3, 2, 2), (7,), 4) raised TypeError", "should be a tuple of ints, got torch.Size([8, 1, 4, 4])",
        "plan_accumulation(256, 2064, 1000) returned normally, expected it to raise ValueError",
        "torch.float64 takes 8; MulBackward0 and AddBackward0; version 1.5. Done 3.",
    ]:
        assert feedback.redact(message, []) == message


def test_a_huge_message_is_handled_quickly():
    import time
    start = time.perf_counter()
    shown = feedback.redact("9" * 5_000_000 + " x" * 1_000_000, ["CASES = [(1.5, -2.0), (0.0, 3.0)]"])
    assert time.perf_counter() - start < 1.0 and len(shown) <= feedback.MAX_MESSAGE + 4


UNSAFE = "a\udcff b\x00c\x1b[31m d\r\n e\u202eevil f\x7f\x85 \ud800\tg"


def _safe(text: str) -> bool:
    text.encode("utf-8")  # raises on a lone surrogate
    return not any((ord(ch) < 32 and ch != "\n") or 0x7f <= ord(ch) <= 0x9f or ch in "\u202e" for ch in text)


def test_any_string_comes_out_safe_to_write():
    """A lone surrogate quoted by a judge crashed the folder grader writing UTF-8; controls could
    rewrite a terminal or the CSV. redact, scrub and page return text that encodes as UTF-8 and holds
    no control character but newlines."""
    assert _safe(feedback.redact(UNSAFE, [])) and feedback.redact(UNSAFE, []).startswith("a\ufffd b\ufffdc")
    assert "\n" in feedback.redact(UNSAFE, []), "newlines stay"
    assert _safe(feedback.scrub(f"f() is {UNSAFE!r} and {UNSAFE}", {"v": UNSAFE}, {}))
    assert _safe(feedback.scrub(f"raised ValueError{UNSAFE[1:4]}", {"raised": ("ValueError",)}, {}))
    assert _safe(feedback.safe_text("\udcff" * 10)) and feedback.safe_text(b"\xff") == "b'\\xff'"
    result = Result("ada\udcff", "99-fixture\x00", {"fx_scale_test\udcff": Outcome(0.0, 2.0, UNSAFE),
                                                     "fx_count_test": Outcome(1.0, 1.0, "")}, [UNSAFE, "\udcff"])
    page = feedback.page(result)
    assert _safe(page.replace("\n", "")) and "1 / 3" in page
