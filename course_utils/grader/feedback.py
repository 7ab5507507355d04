"""What of the grader's findings a learner may see: judges' messages cleaned, and the feedback page.

A judge's message is built from the learner's values and the expected ones. The learner's process
chose those values, so they could spell anything, the visible part of the test cell included (its
code is in that process's linecache). Two steps keep feedback to what the grader says:
- scrub(), in the reference worker, right after a judge failed: strings the learner's process sent
  that are neither expected values nor short names are replaced by a placeholder;
- redact(), in the grader: a message quoting a line of the hidden tests is withheld; numbers are
  bounded (at most MAX_DIGITS significant digits each, MAX_NUMBERS of them and NUMBER_BUDGET digits
  in all, the rest shown as "…"), so that the numbers of one message carry at most a few dozen
  bytes of whatever the learner's code encoded in them; every message is cut to 600 characters.
Both, and page(), return text that is safe to write anywhere: valid UTF-8 (no lone surrogates), no
control characters but newlines, no bidirectional overrides.
README "Grading untrusted code" says what is left.
"""

import html
import re

MAX_MESSAGE = 600
MAX_NAME = 40   # a name (an exception's, a dict key, an autograd node's) may be shown, as type names are
MAX_DIGITS = 10        # significant digits shown of one number (its exponent counts too)
MAX_NUMBERS = 16       # numbers shown in one message (the lessons' messages show up to 15)
NUMBER_BUDGET = 80     # digits and minus signs shown in one message, all its numbers together (lessons: up to 52)
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
    """message with every string found in `got` (the learner's decoded values) that is not among
    `want`'s strings and is not a short identifier replaced: quoted, by "<a string of N characters>";
    bare (8 characters or more, at word boundaries), by "<text>"."""
    allowed: set[str] = set()
    theirs: set[str] = set()
    _strings(want, allowed)
    _strings(got, theirs)
    for text in sorted(theirs - allowed, key=len, reverse=True):
        if not text or (text.isidentifier() and len(text) <= MAX_NAME):
            continue
        message = message.replace(repr(text), f"<a string of {len(text)} characters>")
        if len(text) >= 8:
            message = re.sub(r"(?<!\w)" + re.escape(text) + r"(?!\w)", "<text>", message)
    return safe_text(message)


def _strings(value, into: set, depth: int = 0) -> None:
    if depth > 40 or len(into) > 100_000:
        return
    t = type(value)
    if t is str:
        into.add(value)
    elif t in (list, tuple):
        for v in value:
            _strings(v, into, depth + 1)
    elif t is dict:
        for k, v in value.items():
            _strings(k, into, depth + 1)
            _strings(v, into, depth + 1)


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
    """A learner's feedback page (a course_utils.grader.grade.Result): the score of each test and what
    was wrong, no test code; the written answers as the learner wrote them, to be graded by hand."""
    def text(value) -> str:
        return html.escape(safe_text(value))

    rows = "\n".join(
        f"<tr><td>{text(gid)}</td><td>{o.score:g} / {o.points:g}</td>"
        f"<td>{text(o.message) if o.message else 'passed'}</td></tr>" for gid, o in result.outcomes.items())
    notes = "".join(f"<li>{text(n)}</li>" for n in result.notes)
    written = "".join(f"<h3>{text(gid)}</h3><pre style='white-space:pre-wrap'>{text(answer)}</pre>"
                      for gid, answer in result.written.items())
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{text(result.lesson)}: feedback</title>"
            f"<style>body{{font-family:sans-serif;max-width:60em}}td{{padding:.3em .8em;vertical-align:top}}</style></head>"
            f"<body><h1>{text(result.lesson)}</h1><p>Score: <b>{result.score:g} / {result.points:g}</b></p>"
            f"<table><tr><th>test</th><th>points</th><th>feedback</th></tr>{rows}</table>"
            + (f"<h2>Notes</h2><ul>{notes}</ul>" if notes else "")
            + (f"<h2>Written answers</h2><p>Graded by hand by your instructor, not part of the score above.</p>{written}"
               if written else "") + "</body></html>\n")
