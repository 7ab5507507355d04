"""course_utils.grader.feedback: what of a judge's message a learner may see, and the feedback
page."""

from course_utils.grader import feedback
from course_utils.grader.grade import Outcome, Result


def test_strings_the_learners_process_made_up_are_not_quoted():
    """A judge that quotes a learner's value must not carry arbitrary text (the test cell's source,
    read from linecache) into feedback; expected strings and short names stay."""
    got = {"names": ["MulBackward0", "CASES = [[], [0, 0]]", "abc"]}
    want = {"names": ["MulBackward0", "AddBackward0"]}
    message = (f"walk gave {got['names']}, expected {want['names']}; "
               "also CASES = [[], [0, 0]] and abc")
    assert feedback.scrub(message, got, want) == (
        "walk gave ['MulBackward0', <a string>, 'abc'], "
        "expected ['MulBackward0', 'AddBackward0']; also <text> and abc")


def test_names_and_the_judges_own_words_stay():
    """Exception names and probe keys come from the learner's process too, and are what feedback is
    made of ("raised ValueError"); a learner string inside a longer word leaves the word alone."""
    got = {"raised": ("ValueError", "Exception", "BaseException", "object"), "text": "acters x"}
    message = "micro_batch_weights([]) raised ValueError; 10 characters x"
    assert feedback.scrub(message, got, {}) == message


# The red team's leak through names: the hidden tests' source, cut into identifiers, in a list that
# a judge echoes (lesson 03's walk shows 12 names): CJK letters carry about 14 bits each, and every
# identifier up to 40 characters used to be quoted.
SOURCE = ("def expect():\n    return [sum(1 for v in case if v > 0) for case in CASES]\n"
          "CASES = [[3, -1, 4, -1, 5], [-9, -2, -6], [], [0, 0, 0], list(range(-5, 6))]\n") * 3


def _cjk_names(data: bytes) -> list[str]:
    """data as identifiers of 20 CJK letters, 14 bits each (U+4E00 + a 14-bit number)."""
    bits = "".join(f"{b:08b}" for b in data)
    letters = [chr(0x4E00 + int(bits[i:i + 14].ljust(14, "0"), 2)) for i in range(0, len(bits), 14)]
    return ["".join(letters[i:i + 20]) for i in range(0, len(letters), 20)]


def _ascii_names(data: bytes) -> list[str]:
    """data as identifiers of 40 ASCII characters: "x" and 39 hex digits."""
    digits = data.hex()
    return ["x" + digits[i:i + 39] for i in range(0, len(digits), 39)]


def _shown(message: str, names: list[str]) -> int:
    """Characters of `names` that `message` shows."""
    import re
    return sum(len(w) for w in re.findall(r"\w+", message) if w in set(names))


def test_identifiers_carry_no_more_than_the_name_budget():
    """The walk's message quoting the learner's node names, made of the hidden tests' text: no CJK
    letter is quoted, and ASCII names only up to NAME_BUDGET characters in all."""
    want = ["SumBackward0", "MulBackward0", "AccumulateGrad"]
    for names in (_cjk_names(SOURCE.encode()), _ascii_names(SOURCE.encode())):
        got = {"value": names[:12]}
        message = f"bfs_nodes(x) is wrong. It gave {names[:12]}, expected {want}"
        assert _shown(message, names) >= 200, ("the attack as it was: a few hundred "
                                               "characters of names")
        shown = feedback.scrub(message, got, {"value": want})
        assert _shown(shown, names) <= feedback.NAME_BUDGET, shown
        assert shown.isascii(), shown
        assert (shown.startswith("bfs_nodes(x) is wrong. It gave [")
                and shown.endswith(f"], expected {want}"))
    cjk = _cjk_names(SOURCE.encode())
    assert feedback.scrub(f"raised {cjk[0]}; got {cjk[1:3]!r}", {"raised": tuple(cjk)}, {}) == \
        "raised <text>; got [<a string>, <a string>]", (
            "a CJK identifier is text: never quoted, bare or not")


def test_names_past_the_budget_are_replaced_in_order():
    names = [f"name{i:06d}" for i in range(10)]   # 10 characters each: the first 6 fit in 64
    shown = feedback.scrub(f"got {names}; first {names[0]}, last {names[-1]}", {"v": names}, {})
    assert (shown == f"got {names[:6]}"[:-1] + ", " + ", ".join(["<name>"] * 4)
            + "]; first <name>, last <name>"), shown
    # Names the expected values hold are free: the judge shows them anyway.
    assert feedback.scrub(f"got {names}", {"v": names}, {"w": names}) == f"got {names}"
    # Type names of Opaque values (a learner's class) count like its strings.
    from course_utils.grader import protocol
    objects = protocol.decode([{"$opaque": f"Secret{i:034d}"} for i in range(4)])
    shown = feedback.scrub(f"should be a list of floats, got {objects}", objects, [1.0])
    assert shown.count("Secret") == 1 and shown.count("<name>") == 3, shown


def test_the_lessons_messages_keep_the_names_they_quote():
    """Messages of the lessons' judges, with the learner's values they were made from: each keeps
    every name (the mutants' messages show at most 23 characters of names the learner's code
    chose)."""
    from course_utils.grader import protocol
    mro = lambda *names: {"raised": (*names, "Exception", "BaseException", "object")}
    cases = [
        ("min_microbatches(1, 0.01) raised ZeroDivisionError",
         mro("ZeroDivisionError", "ArithmeticError"), [3]),
        ("train_accumulated on 0 samples, micro_batch_size=2, accumulation_steps=2 (no samples: no "
         "step) raised UnboundLocalError", mro("UnboundLocalError", "NameError"), {"value": [0.5]}),
        ("training_memory_budget(model, 4, 'rmsprop') raised KeyError, expected ValueError",
         mro("KeyError", "LookupError"), mro("ValueError")),
        ("micro_batch_weights([5]) should be a Python float, got Fraction",
         [protocol.decode({"$opaque": "Fraction"})], [1.0]),
        ("mlp_backward(MLPScratch(12, 4, []), X of shape (5, 12), lam=0.3) raised RuntimeError",
         mro("RuntimeError"), {"value": ([1.0], [1.0])}),
        ("bfs_nodes(y) is wrong: this is depth-first order. It gave ['SumBackward0', "
         "'MulBackward0', 'AccumulateGrad', 'AddBackward0', 'AccumulateGrad'], expected "
         "['SumBackward0', 'MulBackward0', 'AddBackward0', 'AccumulateGrad', 'AccumulateGrad']",
         {"value": ["SumBackward0", "MulBackward0", "AccumulateGrad", "AddBackward0"]},
         ["SumBackward0", "MulBackward0", "AddBackward0", "AccumulateGrad"]),
        ("gradient_shapes((2, 3), (4,), 1) should have the keys ['X', 'biases', 'hidden', "
         "'weights'], got ['X', 'bias', 'hidden', 'weight']",
         {"value": {"X": (2, 3), "bias": [], "hidden": [], "weight": []}},
         {"X": (2, 3), "biases": [], "hidden": [], "weights": []}),
    ]
    for message, got, want in cases:
        assert feedback.scrub(message, got, want) == message


def test_the_protocols_own_descriptions_are_not_the_learners_words():
    """protocol names what it cannot send ("int too large"): those names stay, a learner's do
    not."""
    from course_utils.grader import protocol
    got = protocol.decode([{"$bigint": "9" * 50},
                           {"$opaque": "Tensor of dtype torch.float8_e4m3fn"},
                           {"$opaque": "Tensor of dtype SECRET"}])
    message = ("count_positive([]) should return an int, got "
               + ", ".join(type(v).__name__ for v in got))
    assert feedback.scrub(message, got, [0]) == \
        ("count_positive([]) should return an int, got int too large, Tensor of dtype "
         "torchfloat8_e4m3fn, <text>")


def test_too_many_strings_are_not_looked_through():
    """100,000 strings of the learner's in a long message: a fixed message, quickly."""
    import time
    strings = [f"s {i}" for i in range(100_000)]
    start = time.perf_counter()
    assert feedback.scrub(f"got {strings}", {"v": strings}, {}) == feedback.TOO_MANY
    names = [f"n{i}" for i in range(90_000)]   # names: looked up where the message shows a word
    shown = feedback.scrub(f"got {names}", {"v": names}, {})
    assert time.perf_counter() - start < 5.0 and shown.count("<name>") > 89_000


def test_a_message_quoting_the_hidden_tests_is_withheld_and_long_ones_cut():
    hidden = ["CASES = [(1.5, -2.0), (0.0, 3.0)]", "x = 1"]
    assert "not shown" in feedback.redact("got CASES = [(1.5, -2.0), (0.0, 3.0)] back", hidden)
    assert feedback.redact("x = 1 is fine", hidden) == "x = 1 is fine", (
        "short lines are too common to match")
    assert feedback.redact("y" * 700, hidden) == "y" * feedback.MAX_MESSAGE + " ..."


def test_the_page_shows_scores_and_messages_escaped():
    result = Result("ada", "99-fixture", {"fx_scale_test": Outcome(0.0, 2.0, "scale(1, 2) is <3>"),
                                          "fx_count_test": Outcome(1.0, 1.0, "")},
                    ["a note & more"])
    page = feedback.page(result)
    assert ("1 / 3" in page and "scale(1, 2) is &lt;3&gt;" in page and "passed" in page
            and "a note &amp; more" in page)


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
                low, high = (int(digits) * 10 ** (width - len(digits)),
                             (int(digits) + 1) * 10 ** (width - len(digits)) - 1)
                a, b = low.to_bytes(8, "big")[1:], min(high, 2 ** 56 - 1).to_bytes(8, "big")[1:]
                same = next((i for i in range(7) if a[i] != b[i]), 7)
                got += same
                break
    return got


def test_numbers_in_a_message_carry_at_most_a_few_dozen_bytes():
    """60 integers of 7 bytes of the hidden tests each, echoed as a judge echoes a learner's result:
    before, every number the first 600 characters held came through whole (about 200 bytes of
    the source); now at most MAX_NUMBERS numbers of at most MAX_DIGITS digits, NUMBER_BUDGET in
    all."""
    chunks = _chunks(SECRET.encode())[:60]
    assert len(chunks) == 60
    got = [int.from_bytes(c, "big") for c in chunks]
    message = f"count_positive([3, -1, 4, -1, 5]) is {got}, expected 3"
    whole = message[:feedback.MAX_MESSAGE]
    assert _recovered(whole, chunks) >= 150, ("the attack as it was: the numbers of one "
                                              "message, whole")
    shown = feedback.redact(message, [])
    assert _recovered(shown, chunks) <= 40, shown
    digits = sum(ch.isdigit() for ch in shown)
    assert digits <= feedback.NUMBER_BUDGET + 3 and digits * 0.415 <= 64, (
        "at most ~64 bytes, whatever the encoding")
    assert (shown.startswith("count_positive([3, -1, 4, -1, 5]) is [")
            and shown.endswith(", …], expected 3"))


def test_numbers_are_shortened_and_bounded_but_the_lessons_messages_keep_theirs():
    assert feedback.redact("got 0.30000000000000004, expected 0.3",
                           []) == "got 0.3000000000…, expected 0.3"
    assert feedback.redact("x is 12345678901234567 and 1.2345678901234567e-05", []) == \
        "x is 1234567890… and 1.2345678…e-05"
    assert feedback.redact("node x12345678901234567890y", []) == "node x1234567890…y", (
        "digits in a name are cut too")
    assert (feedback.redact(f"f() is {list(range(100, 140))}, expected 7", []).count("1")
            <= 2 * feedback.MAX_NUMBERS)
    # messages of the lessons' judges, with every number they show (15 numbers, 52 digits at most)
    for message in [
        "second_circuit_grads(3.0, -4.0, 2.0, -1.0) is (-4, 3, 1, 0), expected (-8, 6, 2, 0): the "
        "factor 2 of the last gate is missing: every gradient must be multiplied by it.",
        "neuron_grads([2.0, -3.0, -3.0], [-1.0, -2.0]): dw is (-0.731059, -1.46212, 0.731059), "
        "expected (-0.196612, -0.393224, 0.196612): the sigmoid's local gradient is "
        "s(1 - s), not s.",
        "mlp_backward(MLPScratch(10, 3, [8, 6]), X of shape (7, 10), lam=0.1): weight_grads[0] "
        "differs from the expected values (largest difference 1.51): the cross-entropy part is "
        "exactly n = 7 times too large",
        "gradient_shapes((2, 3, 2, 2), (7,), 4) raised TypeError",
        "should be a tuple of ints, got torch.Size([8, 1, 4, 4])",
        "plan_accumulation(256, 2064, 1000) returned normally, expected it to raise ValueError",
        "torch.float64 takes 8; MulBackward0 and AddBackward0; version 1.5. Done 3.",
    ]:
        assert feedback.redact(message, []) == message


def test_a_huge_message_is_handled_quickly():
    import time
    start = time.perf_counter()
    shown = feedback.redact("9" * 5_000_000 + " x" * 1_000_000,
                            ["CASES = [(1.5, -2.0), (0.0, 3.0)]"])
    assert time.perf_counter() - start < 1.0 and len(shown) <= feedback.MAX_MESSAGE + 4


UNSAFE = "a\udcff b\x00c\x1b[31m d\r\n e\u202eevil f\x7f\x85 \ud800\tg"


def _safe(text: str) -> bool:
    text.encode("utf-8")  # raises on a lone surrogate
    return not any((ord(ch) < 32 and ch != "\n") or 0x7f <= ord(ch) <= 0x9f or ch in "\u202e"
                   for ch in text)


def test_any_string_comes_out_safe_to_write():
    """A lone surrogate quoted by a judge crashed the folder grader writing UTF-8; controls could
    rewrite a terminal or the CSV. redact, scrub and page return text that encodes as UTF-8 and
    holds no control character but newlines."""
    assert (_safe(feedback.redact(UNSAFE, []))
            and feedback.redact(UNSAFE, []).startswith("a\ufffd b\ufffdc"))
    assert "\n" in feedback.redact(UNSAFE, []), "newlines stay"
    assert _safe(feedback.scrub(f"f() is {UNSAFE!r} and {UNSAFE}", {"v": UNSAFE}, {}))
    assert _safe(feedback.scrub(f"raised ValueError{UNSAFE[1:4]}", {"raised": ("ValueError",)}, {}))
    assert _safe(feedback.safe_text("\udcff" * 10)) and feedback.safe_text(b"\xff") == "b'\\xff'"
    result = Result("ada\udcff", "99-fixture\x00",
                    {"fx_scale_test\udcff": Outcome(0.0, 2.0, UNSAFE),
                     "fx_count_test": Outcome(1.0, 1.0, "")}, [UNSAFE, "\udcff"])
    page = feedback.page(result)
    assert _safe(page.replace("\n", "")) and "1 / 3" in page


def test_a_string_shown_escaped_in_a_repr_is_scrubbed_too():
    """A key with a newline, a tab or both quotes shows in a message only escaped (in its repr, or a
    list's): it is found in that form and replaced, not quoted back."""
    from course_utils.grader.feedback import scrub
    for secret in ("uryyb jbeyq: cevag(n)\n", "a\tb 'c' \"d\" hidden text", "x = 1\\n y"):
        got = {secret: 1.0}
        message = f"should have the keys ['a', 'b'], got {sorted(got)}"
        cleaned = scrub(message, got, {"a": 1.0, "b": 2.0})
        assert repr(secret)[1:-1] not in cleaned and secret not in cleaned, cleaned
        assert "should have the keys ['a', 'b']" in cleaned
