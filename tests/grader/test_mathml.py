"""course_utils.grader.mathml: the math of feedback pages and the Formgrader as MathML, with no
script.

Every piece of math in the lessons converts; the MathML holds only MathML's presentation elements
and plain attributes, whatever TeX a learner writes in a written answer; math inside a tag (a
heading's anchor link, a learner's raw HTML) goes back as escaped TeX; what does not convert shows
as the TeX it is; code keeps its dollars; both pages take a mathjax() macro without MathJax.
(The pages as nbgrader writes them: tests/grader/test_grade.py's feedback; in Chromium, with nothing
fetched: tests/browser/test_formgrader.py.)
"""

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import nbformat
import pytest
from nbconvert import HTMLExporter

from course_utils.grader import mathml
from course_utils.grader.reports import SafeMarkdown

ROOT = Path(__file__).resolve().parents[2]


def lesson_math() -> list[tuple[str, str, bool]]:
    return [(path.parent.name, tex, display)
            for path in sorted((ROOT / "solutions").glob("*/*.ipynb"))
            for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "markdown"
            for tex, display in mathml.math_in(cell.source)]


def render(source: str) -> str:
    return SafeMarkdown(parent=HTMLExporter())({}, source)


def elements(markup: str) -> list[ET.Element]:
    return list(ET.fromstring(f"<root>{markup}</root>").iter())[1:]


def test_every_piece_of_the_lessons_math_becomes_mathml():
    math = lesson_math()
    assert len(math) > 500, f"only {len(math)} pieces of math found in the lessons"
    failed = [(lesson, tex[:80]) for lesson, tex, display in math
              if mathml.to_mathml(tex, display) is None]
    assert not failed, f"math that would show as raw TeX on feedback pages: {failed[:10]}"


def test_mathml_holds_only_mathml_elements_and_plain_attributes():
    for _, tex, display in lesson_math()[::7]:
        made = mathml.to_mathml(tex, display)
        for el in ET.fromstring(made).iter():
            tag = el.tag.rpartition("}")[2]
            assert tag in mathml.MATH_TAGS, (tex, tag)
            assert set(el.attrib) <= mathml.MATH_ATTRIBUTES | {"xmlns"}, (tex, el.attrib)


@pytest.mark.parametrize("tex", [
    # a link: latex2mathml makes an href attribute
    r"\href{javascript:alert(1)}{x}",
    r"\color{javascript:alert(1)}{x}",                 # an attribute value that is not a plain word
    r"\color{red\" onmouseover=\"alert(1)}{x}",
    r"\frac{",                                         # TeX that does not convert
])
def test_tex_that_would_bring_a_link_or_odd_attribute_or_does_not_convert_shows_as_tex(tex):
    assert mathml.to_mathml(tex, False) is None
    page = render(f"see ${tex}$ here")
    assert re.findall(r"<(\w+)", page) == ["p"], f"only the paragraph is markup: {page}"
    assert "$" in page, "shown as the TeX it is, between its dollars"


def test_a_written_answers_math_is_mathml_and_its_html_is_still_text():
    page = render("The gradient is $\\frac{\\partial f}{\\partial x} = z$.\n\n$$a^2$$\n\n"
                  "$$\\text{<img src=x onerror=alert(1)>}$$\n\nand `$HOME` in code\n\n"
                  "<script>alert(1)</script>\n")
    math = [e for e in elements(page.replace("&lt;", "").replace("&gt;", ""))
            if e.tag.endswith("math")]
    assert [m.get("display") for m in math] == ["inline", "block"], page
    assert "<script>" not in page and "<img" not in page, page
    # latex2mathml copies \text{} into <mtext> unescaped: not XML, so the TeX shows as text
    assert "$$\\text{&lt;img src=x onerror=alert(1)&gt;}$$" in page, page
    assert "<code>$HOME</code>" in page, "a dollar in code is not math"


def parsed(page: str) -> list[tuple[str, dict]]:
    """(tag, attributes) of every start tag, as an HTML parser reads the page."""
    from html.parser import HTMLParser
    found = []

    class Parser(HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.append((tag, dict(attrs)))

    Parser().feed(page)
    return found


@pytest.mark.parametrize("source", [
    # a heading's text goes into its anchor link's href: math there must not close the attribute
    '# Notes $\\href{x}{y}" autofocus onfocus="document.title=`pwned`" x="$',
    '# Notes $x^2$ and $\\sqrt{n}$',
    # a learner's raw HTML around a paragraph of math: the math lands inside a title attribute
    "<div><a href=\"#\" title='\n\n$x^2$ and $\\href{a}{b}\" onmouseover=\"alert(1)$\n\n"
    "'<b>z</b></a></div>",
])
def test_math_inside_a_tag_goes_back_as_escaped_tex_and_never_opens_an_attribute(source):
    page = render(source)
    tags = parsed(page)
    assert not [(t, a) for t, a in tags
                if any(k.startswith("on") or k in ("autofocus", "style") for k in a)], page
    assert {t for t, _ in tags} <= {"h1", "p", "a", "div", "b", *mathml.MATH_TAGS}, page
    for tag, attributes in tags:
        if tag not in mathml.MATH_TAGS:
            assert not any("<math" in v for v in attributes.values()), (
                f"MathML inside an attribute: {page}")


def test_a_heading_with_math_shows_it_once_and_its_link_works():
    page = render("## 5. The $\\sqrt{n}$ rule, measured")
    assert page.count("<math") == 1 and "<msqrt>" in page, page
    (link,) = [a for t, a in parsed(page) if t == "a"]
    assert link["href"] == "#5.-The-$\\sqrt{n}$-rule,-measured", link
    assert page.endswith("</a></h2>"), page


def test_nbgrader_pages_take_the_macro_without_mathjax_with_the_courses_config():
    """As nbgrader configures each page's exporter: the Formgrader sets template_name and
    extra_template_basedirs, then reads the course's nbgrader_config.py (which wins);
    generate_feedback reads it first and keeps its basedirs. Either way mathjax() comes from
    templates/NAME/."""
    from nbgrader.server_extensions.formgrader.handlers import template_path
    from traitlets.config import Config
    from traitlets.config.loader import PyFileConfigLoader

    course = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()
    macro = mathml.TEMPLATES / "formgrade" / "mathjax.html.j2"
    assert "<script" not in macro.read_text()
    assert (mathml.TEMPLATES / "feedback" / "mathjax.html.j2").read_text() == macro.read_text()
    for name in ("formgrade", "feedback"):
        config = Config(
            {"HTMLExporter": {"template_name": name, "extra_template_basedirs": [template_path]}})
        config.merge(course)
        exporter = HTMLExporter(config=config)
        found = Path(exporter.environment.get_template("mathjax.html.j2").filename)
        assert found.parent == mathml.TEMPLATES / name, f"{name}: mathjax() comes from {found}"
        assert (Path(exporter.environment.get_template("index.html.j2").filename).parent
                == Path(template_path) / name)
