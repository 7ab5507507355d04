"""What of the grader's findings a learner may see: judges' messages cleaned, and the feedback page.

A judge's message is built from the learner's values and the expected ones. The learner's process
chose those values, so they could spell anything, the visible part of the test cell included (its
code is in that process's linecache). Two steps keep feedback to what the grader says:
- scrub(), in the reference worker, right after a judge failed: of the strings the learner's process
  sent (its values' strings and dict keys, and the type names of its Opaque values) that are not
  among the expected values' strings, only names are quoted: ASCII identifiers (str.isascii() and
  str.isidentifier()) of at most MAX_NAME characters, NAME_BUDGET characters of them in all per
  message, counted at every place the message shows one; any other such string (non-ASCII text,
  CJK identifiers included, longer or not a name) and every name past the budget is replaced by a
  placeholder ("<a string>" quoted, "<text>" bare, "<name>" for a name);
- redact(), in the grader: a message quoting a line of the hidden tests is withheld; numbers are
  bounded (at most MAX_DIGITS significant digits each, MAX_NUMBERS of them and NUMBER_BUDGET digits
  in all, the rest shown as "…"), so that the numbers of one message carry at most a few dozen
  bytes of whatever the learner's code encoded in them; every message is cut to 600 characters.
So the names and numbers of one failed test's message carry at most about 50 + 60 bytes of what the
learner's code chose (64 characters of 63 kinds, and NUMBER_BUDGET digits), besides which of the
expected strings it repeats where, and where placeholders stand. The lessons' messages quote names
the learner's code chose (an exception it raised, "raised ValueError"; its values' type or dict
keys) and keep them all: in the mutants' messages (tests/mutants/*.json) at most 23 such characters
("raised ZeroDivisionError": the probe's key "raised" and the exception's name); NAME_BUDGET leaves
room for the longest built-in exception name (25) and a type name (40, protocol's limit) in one
message. Names the expected values hold (autograd nodes like MulBackward0, the keys of a right
answer) are free: the judge shows them anyway. Both, and page(), return text that is safe to write
anywhere: valid UTF-8 (no lone surrogates), no control characters but newlines, no bidirectional
overrides.
docs/grading-design.md says what is left.
"""

import functools
import html
import re
import sys

MAX_MESSAGE = 600
MAX_NAME = 40          # a name (an exception's, a dict key, an autograd node's) the learner's code
                       # chose may be shown...
NAME_BUDGET = 64       # ...this many characters of them in one message, all its names together
                       # (mutants: up to 23)
MAX_STRINGS = 100_000  # distinct strings of the learner's values looked at; past that nothing of
                       # theirs is quoted
MAX_FOUND = 200        # strings of theirs, not names, that one message may quote (each is replaced)
MAX_WORK = 10 ** 8     # (strings of theirs, not names) x (characters of the message): the search's
                       # cost
TOO_MANY = "wrong answer (your code's values hold too many strings to be quoted in feedback)"
MAX_DIGITS = 10        # significant digits shown of one number (its exponent counts too)
MAX_NUMBERS = 16       # numbers shown in one message (the lessons' messages show up to 15)
NUMBER_BUDGET = 80     # digits and minus signs shown in one message, all its numbers together
                       # (lessons: up to 52)
MAX_SCANNED = 100_000  # characters of a message looked at; the rest is never shown anyway
CUT = "\u2026"         # "…": what stands for digits or numbers left out

# Characters that must not reach a file or a page: controls but newline, lone surrogates (not UTF-8
# at all), and the bidirectional controls that make text read as other than it is.
_UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\ud800-\udfff\u202a-\u202e\u2066-\u2069\ufeff]")
# A number as Python prints one: digits, a fraction, an exponent; not inside a word (float64,
# MulBackward0) and not after a dot (torch.float16.5 is no number).
_NUMBER = re.compile(r"(?<![\w.])(-?)(\d+(?:\.\d+)?|\.\d+)([eE][-+]?\d+)?(?!\w)")
_DIGIT_RUN = re.compile(r"\d{%d,}" % (MAX_DIGITS + 1))
_CUTS = re.compile(r"(?<![\w.])-?%s(?:,\s*-?%s)+" % (CUT, CUT))


def safe_text(text) -> str:
    """text as something every file, page and terminal takes: lone surrogates, control characters
    (newline kept, tab made a space) and bidirectional controls replaced by U+FFFD."""
    if type(text) is not str:
        text = str(text) if isinstance(text, str) else repr(text)
    return _UNSAFE.sub(lambda m: " " if m.group() == "\t" else "\ufffd", text)


def scrub(message: str, got, want) -> str:
    """message with what the learner's values (`got`, decoded) could spell in it bounded. Their
    strings (dict keys and the type names of Opaque values too) that are not among `want`'s strings:
    - a name (an ASCII identifier of at most MAX_NAME characters) is kept, quoted or bare, wherever
      the message shows it, as long as the names kept so far in this message take NAME_BUDGET
      characters or fewer; past that each is "<name>";
    - any other string is "<a string>" where the message quotes it (as repr() does), and "<text>"
      where it stands bare (at word boundaries) if it is 8 characters or more, not ASCII, or holds a
      letter (short runs of digits and signs are left to bound_numbers).
    protocol's own descriptions of values it cannot send ("int too large") are no strings of theirs.
    A message about values with more than MAX_STRINGS distinct strings, or one that would take long
    to clean (more than MAX_FOUND strings to replace, or MAX_WORK characters to search), is
    TOO_MANY: the lessons' messages quote a few dozen at most, and a judge must not keep the
    reference busy."""
    allowed: set[str] = set()
    theirs: set[str] = set()
    _strings(want, allowed)
    if not _strings(got, theirs) or len(theirs) > MAX_STRINGS:
        return TOO_MANY
    theirs -= allowed
    names = {text for text in theirs if _is_name(text)}  # found by one pass over the message, below
    texts = [text for text in theirs if text and text not in names]
    if len(texts) * len(message) > MAX_WORK:   # each is looked for in the whole message
        return TOO_MANY
    # a string shows as itself (str(), an f-string) or escaped inside its repr (a list's, a dict's
    # keys)
    found = [text for text in texts if text in message or repr(text)[1:-1] in message]
    if len(found) > MAX_FOUND:
        return TOO_MANY
    for text in sorted(found, key=len, reverse=True):
        message = message.replace(repr(text), "<a string>")
        if len(text) >= 8 or not text.isascii() or _LETTER.search(text):
            for shown in dict.fromkeys((text, repr(text)[1:-1])):
                message = re.sub(r"(?<![A-Za-z0-9_])" + re.escape(shown) + r"(?![A-Za-z0-9_])",
                                 "<text>", message)
    if names:
        spent = 0

        def one(m: re.Match) -> str:
            nonlocal spent
            if m.group(2) not in names:
                return m.group()
            if spent + len(m.group(2)) > NAME_BUDGET:
                return "<name>"
            spent += len(m.group(2))
            return m.group()

        message = _NAME.sub(one, message)
    return safe_text(message)


def _is_name(text: str) -> bool:
    return len(text) <= MAX_NAME and text.isascii() and text.isidentifier()


# A name where a message shows it: bare, or quoted as repr() quotes it (the quotes go with it); its
# bounds are ASCII ones, so that no letter of another script next to it hides it.
_NAME = re.compile(r"(['\"]?)(?<![A-Za-z0-9_])([A-Za-z_][A-Za-z0-9_]*)(?![A-Za-z0-9_])\1")
_LETTER = re.compile(r"[A-Za-z_]")


def _strings(value, into: set, depth: int = 0) -> bool:
    """Add value's strings, dict keys and Opaque type names to `into`; False if some were left out
    (nested deeper than protocol allows, or more than MAX_STRINGS)."""
    if depth > 40 or len(into) > MAX_STRINGS:
        return False
    t = type(value)
    if t is str:
        into.add(value)
    elif t in (list, tuple):
        return all(_strings(v, into, depth + 1) for v in value)
    elif t is dict:
        return all(_strings(k, into, depth + 1) and _strings(v, into, depth + 1)
                   for k, v in value.items())
    else:
        # loaded wherever an Opaque was decoded
        protocol = sys.modules.get("course_utils.grader.protocol")
        if (protocol is not None and isinstance(value, protocol.Opaque)
                and not _described(t.__name__)):
            # as the judge may show it: repr() "<name object>", or judging.name_of (no spaces)
            name = t.__name__
            into.update((name, name.replace(" ", "")))
    return True


@functools.lru_cache(maxsize=1024)
def _described(name: str) -> bool:
    """Whether an Opaque's type name is one of protocol's own descriptions of a value it does not
    send ("int too large", "Tensor of dtype torchfloat8_e4m3fn"): no words of the learner's."""
    if name in ("int too large", "dict with nonstring keys", "object"):   # as protocol cleans them
        return True
    torch = sys.modules.get("torch")
    return (name.startswith("Tensor of dtype ") and torch is not None
            and any(name[16:] == re.sub(r"[^A-Za-z0-9_ ]", "", str(d)) for d in vars(torch).values()
                    if isinstance(d, torch.dtype)))


def redact(message: str, hidden_lines: list[str]) -> str:
    """A judge's message as the grader hands it on: withheld if it quotes a line (16 characters or
    more) of the hidden tests; its numbers bounded (see bound_numbers); cut to MAX_MESSAGE
    characters; safe to write (safe_text)."""
    original = safe_text(message[:MAX_SCANNED] if type(message) is str else "").strip()
    shown = bound_numbers(original)
    for line in hidden_lines:
        text = line.strip()
        if len(text) >= 16 and (text in original or text in shown):
            return "wrong answer (the message quoted the hidden tests, so it is not shown)"
    return shown if len(shown) <= MAX_MESSAGE else shown[:MAX_MESSAGE] + " ..."


def bound_numbers(message: str) -> str:
    """message with what its numbers can carry bounded: each number shows at most MAX_DIGITS
    significant digits (then "…"); a number that would take the message past MAX_NUMBERS numbers
    or NUMBER_BUDGET digits (and minus signs) is "…" (a run of them, ", "-separated, one "…").
    Digit runs inside words are cut to MAX_DIGITS too. So the numbers of one message carry at most
    NUMBER_BUDGET decimal digits, their signs, points and exponents: about 60 bytes at most. The
    lessons' messages keep all their numbers (at most 15 numbers, 52 digits)."""
    shown = [0, 0]  # numbers, digits

    def one(m: re.Match) -> str:
        sign, mantissa, exponent = m.group(1), m.group(2), m.group(3) or ""
        exponent_digits = sum(ch.isdigit() for ch in exponent)
        mantissa = _significant(mantissa, max(1, MAX_DIGITS - exponent_digits))
        cost = len(sign) + exponent_digits + sum(ch.isdigit() for ch in mantissa)
        if shown[0] >= MAX_NUMBERS or shown[1] + cost > NUMBER_BUDGET:
            return CUT
        shown[0] += 1
        shown[1] += cost
        return sign + mantissa + exponent

    message = _DIGIT_RUN.sub(lambda m: m.group()[:MAX_DIGITS] + CUT, _NUMBER.sub(one, message))
    return _CUTS.sub(CUT, message)


def _significant(mantissa: str, keep: int) -> str:
    """mantissa ("0.30000000000000004", "12345678901234567") cut after `keep` significant digits,
    with "…" where digits were left out."""
    seen, started = 0, False
    for i, ch in enumerate(mantissa):
        if ch.isdigit():
            started = started or ch != "0"
            seen += started
            if seen > keep:
                return mantissa[:i] + CUT
    return mantissa


def page(result) -> str:
    """A learner's feedback page (a course_utils.grader.grade.Result): the score of each test and
    what was wrong, no test code; the written answers as the learner wrote them, to be graded by
    hand."""
    def text(value) -> str:
        return html.escape(safe_text(value))

    rows = "\n".join(
        f"<tr><td>{text(gid)}</td><td>{o.score:g} / {o.points:g}</td>"
        f"<td>{text(o.message) if o.message else 'passed'}</td></tr>"
        for gid, o in result.outcomes.items())
    notes = "".join(f"<li>{text(n)}</li>" for n in result.notes)
    written = "".join(f"<h3>{text(gid)}</h3><pre style='white-space:pre-wrap'>{text(answer)}</pre>"
                      for gid, answer in result.written.items())
    return ("<!doctype html><html><head><meta charset='utf-8'>"
            f"<title>{text(result.lesson)}: feedback</title>"
            "<style>body{font-family:sans-serif;max-width:60em}"
            "td{padding:.3em .8em;vertical-align:top}</style></head>"
            f"<body><h1>{text(result.lesson)}</h1>"
            f"<p>Score: <b>{result.score:g} / {result.points:g}</b></p>"
            f"<table><tr><th>test</th><th>points</th><th>feedback</th></tr>{rows}</table>"
            + (f"<h2>Notes</h2><ul>{notes}</ul>" if notes else "")
            + ("<h2>Written answers</h2>"
               f"<p>Graded by hand by your instructor, not part of the score above.</p>{written}"
               if written else "") + "</body></html>\n")
