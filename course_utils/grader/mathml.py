"""The math on the pages nbgrader makes (feedback, the Formgrader's submission view), drawn with no
script and no download: MathML, made where the page is made.

    html = markdown_html(exporter, context, source,
                         clean=safe_html)   # markdown -> HTML, math as MathML

nbgrader's feedback and formgrade templates load MathJax from a CDN (nbconvert's `mathjax()` macro),
so without internet the lessons' math shows as raw TeX; a feedback page opened in JupyterLab's HTML
viewer runs no script at all. Here each `$...$`, `$$...$$` and `\\begin{env}...\\end{env}` that
nbconvert's markdown parser finds becomes MathML (latex2mathml), which browsers draw themselves, and
templates/NAME/mathjax.html.j2 replaces the CDN script with nothing on both pages (PAGE_TEMPLATES).

Learners write math in their written answers too, so the math is cut out of the markdown before the
HTML is cleaned (`clean`, course_utils.grader.reports.safe_html) and put back after, into text only
(inside a tag, such as a heading's anchor link or a learner's raw HTML attribute, it goes back as
the escaped TeX): the MathML keeps only MathML's presentation elements (MATH_TAGS) and a few
attributes with short plain values (MATH_ATTRIBUTES, _PLAIN), never a link, a style or an event
handler. TeX that does not convert, or converts to anything else, shows as the TeX it is (escaped,
between its delimiters), as before.
"""

from __future__ import annotations

import hashlib
import html
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import nbgrader
from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath

# The pages' mathjax() macro, without MathJax: templates/NAME/mathjax.html.j2 for nbgrader's
# templates formgrade and feedback. nbgrader_config.py sets HTMLExporter.extra_template_basedirs to
# PAGE_TEMPLATES: nbconvert then looks in our NAME folder, then in nbgrader's (as nbgrader's own
# setting does), then in the base templates.
TEMPLATES = Path(__file__).resolve().parent / "templates"
NBGRADER_TEMPLATES = (Path(nbgrader.__file__).resolve().parent / "server_extensions" / "formgrader"
                      / "templates")
PAGE_TEMPLATES = [str(TEMPLATES), str(NBGRADER_TEMPLATES)]

NAMESPACE = "http://www.w3.org/1998/Math/MathML"
MATH_TAGS = frozenset({
    "math", "mrow", "mi", "mn", "mo", "ms", "mtext", "mspace", "mfrac", "msqrt", "mroot", "mstyle",
    "merror", "mpadded", "mphantom", "msub", "msup", "msubsup", "munder", "mover", "munderover",
    "mmultiscripts", "mprescripts", "none", "mtable", "mtr", "mtd", "mlabeledtr", "menclose",
    "mfenced", "semantics", "annotation"})
MATH_ATTRIBUTES = frozenset({
    "display", "displaystyle", "scriptlevel", "mathvariant", "mathsize", "mathcolor",
    "mathbackground", "stretchy", "fence", "separator", "separators", "lspace", "rspace", "minsize",
    "maxsize", "movablelimits", "largeop", "symmetric", "form", "accent", "accentunder",
    "linethickness", "width", "height", "depth", "voffset", "columnalign", "columnspacing",
    "columnlines", "rowalign", "rowspacing", "rowlines", "frame", "framespacing", "equalrows",
    "equalcolumns", "notation", "open", "close", "align", "encoding"})
# an attribute's value: a word, a number, a length, a colour
_PLAIN = re.compile(r"[A-Za-z0-9 .,%#+-]{0,60}\Z")
_TAG = re.compile(r'<[^<>"]*(?:"[^"]*"[^<>"]*)*>')   # a tag as clean() writes it (markdown_html)


def to_mathml(tex: str, display: bool) -> str | None:
    """The MathML of `tex` (display: a block of its own), or None when it does not convert or the
    result holds anything but MATH_TAGS with MATH_ATTRIBUTES of plain values."""
    from latex2mathml.converter import convert   # only the pages with math need it

    try:
        root = ET.fromstring(convert(tex, display="block" if display else "inline"))
    except Exception:   # latex2mathml raises many kinds on TeX it does not know
        return None
    return _element(root)


def _element(el: ET.Element) -> str | None:
    ns, _, tag = el.tag.rpartition("}")
    if ns.lstrip("{") != NAMESPACE or tag not in MATH_TAGS:
        return None
    attributes = ""
    for name, value in el.attrib.items():
        if name == "xmlns":
            continue
        if name not in MATH_ATTRIBUTES or not _PLAIN.match(value):
            return None
        attributes += f' {name}="{html.escape(value)}"'
    inner = [html.escape(el.text or "", quote=True)]
    for child in el:
        made = _element(child)
        if made is None:
            return None
        inner += [made, html.escape(child.tail or "", quote=True)]
    if tag == "math":
        attributes = f' xmlns="{NAMESPACE}"' + attributes
    return f"<{tag}{attributes}>{''.join(inner)}</{tag}>"


class _MathRenderer(IPythonRenderer):
    """nbconvert's markdown renderer, each piece of math replaced by a placeholder (`mark`, then its
    number)."""

    def __init__(self, mark: str, **kwargs):
        super().__init__(**kwargs)
        self.mark, self.math = mark, []   # math: (tex as the page showed it before, tex, display)

    def _hold(self, shown: str, tex: str, display: bool) -> str:
        self.math.append((shown, tex, display))
        return f"{self.mark}{len(self.math) - 1}Z"

    def inline_math(self, body: str) -> str:
        return self._hold(f"${body}$", body, False)

    def block_math(self, body: str) -> str:
        return self._hold(f"$${body}$$", body, True)

    def latex_environment(self, name: str, body: str) -> str:
        tex = f"\\begin{{{name}}}{body}\\end{{{name}}}"
        return self._hold(tex, tex, True)


def math_in(source: str) -> list[tuple[str, bool]]:
    """The pieces of math that markdown_html finds in `source`: (TeX, display)."""
    renderer = _MathRenderer("M", escape=False)
    MarkdownWithMath(renderer=renderer).render(source)
    return [(tex, display) for _, tex, display in renderer.math]


def markdown_html(exporter, context, source: str, clean) -> str:
    """`source` (markdown) as nbconvert's HTMLExporter.markdown2html renders it (exporter: that
    exporter, for its settings; context: the template's), passed through clean(), with each piece of
    math as MathML (or, where to_mathml gives None, its TeX as text)."""
    cell = context.get("cell", {})
    # The placeholder is letters and digits, which clean() keeps as they are, in text and in
    # attribute values alike; it names the source's own hash, so no source can hold one of its own.
    mark = "MATHML" + hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()[:16] + "N"
    renderer = _MathRenderer(mark, escape=False, attachments=cell.get("attachments", {}),
                             embed_images=exporter.embed_images,
                             path=context.get("resources", {}).get("metadata", {}).get("path", ""),
                             anchor_link_text=exporter.anchor_link_text,
                             exclude_anchor_links=exporter.exclude_anchor_links,
                             **exporter.lexer_options)
    cleaned = clean(MarkdownWithMath(renderer=renderer).render(source))
    placeholder = re.compile(re.escape(mark) + r"(\d+)Z")

    def tex(found: re.Match) -> str:   # in a tag: the TeX, escaped for an attribute value
        k = int(found.group(1))
        return (html.escape(renderer.math[k][0], quote=True) if k < len(renderer.math)
                else found.group(0))

    def math(found: re.Match) -> str:  # in text: the MathML, or the TeX as text
        k = int(found.group(1))
        if k >= len(renderer.math):
            return found.group(0)
        shown, body, display = renderer.math[k]
        return to_mathml(body, display) or html.escape(shown, quote=True)

    # MathML goes into text only, never into a tag: nbconvert puts a heading's text (math included)
    # in its anchor link's href, and a learner's raw HTML can hold a placeholder in an attribute.
    # clean() (bleach) writes every attribute value in double quotes, with " and < escaped, and < in
    # text as &lt;, so each < starts a tag and _TAG finds where it ends; where that does not hold,
    # every piece stays TeX.
    tags = list(_TAG.finditer(cleaned))
    if len(tags) != cleaned.count("<"):
        return placeholder.sub(tex, cleaned)
    out, last = [], 0
    for tag in tags:
        out += [placeholder.sub(math, cleaned[last:tag.start()]),
                placeholder.sub(tex, tag.group(0))]
        last = tag.end()
    return "".join(out + [placeholder.sub(math, cleaned[last:])])
