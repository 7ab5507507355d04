"""What of the grader's findings a learner may see: judges' messages cleaned, and the feedback page.

A judge's message is built from the learner's values and the expected ones. The learner's process
chose those values, so they could spell anything, the visible part of the test cell included (its
code is in that process's linecache). Two steps keep feedback to what the grader says:
- scrub(), in the reference worker, right after a judge failed: strings the learner's process sent
  that are neither expected values nor short names are replaced by a placeholder;
- redact(), in the grader: a message quoting a line of the hidden tests is withheld, and every
  message is cut to 600 characters.
Numbers stay (feedback says what a call returned); README "Grading untrusted code" says what that leaves.
"""

import html
import re

MAX_MESSAGE = 600
MAX_NAME = 40   # a name (an exception's, a dict key, an autograd node's) may be shown, as type names are


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
    return message


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
    more) of the hidden tests, cut to MAX_MESSAGE characters."""
    message = message.strip()
    for line in hidden_lines:
        text = line.strip()
        if len(text) >= 16 and text in message:
            return "wrong answer (the message quoted the hidden tests, so it is not shown)"
    return message if len(message) <= MAX_MESSAGE else message[:MAX_MESSAGE] + " ..."


def page(result) -> str:
    """A learner's feedback page (a course_utils.hardened.Result): the score of each test and what
    was wrong, no test code."""
    rows = "\n".join(
        f"<tr><td>{html.escape(gid)}</td><td>{o.score:g} / {o.points:g}</td>"
        f"<td>{html.escape(o.message) if o.message else 'passed'}</td></tr>" for gid, o in result.outcomes.items())
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in result.notes)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(result.lesson)}: feedback</title>"
            f"<style>body{{font-family:sans-serif;max-width:60em}}td{{padding:.3em .8em;vertical-align:top}}</style></head>"
            f"<body><h1>{html.escape(result.lesson)}</h1><p>Score: <b>{result.score:g} / {result.points:g}</b></p>"
            f"<table><tr><th>test</th><th>points</th><th>feedback</th></tr>{rows}</table>"
            + (f"<h2>Notes</h2><ul>{notes}</ul>" if notes else "") + "</body></html>\n")
