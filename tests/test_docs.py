"""README.md and docs/ point at what exists: every relative link resolves (a file, and a heading
for a #fragment), and every repository path they name in backquotes (`course_utils/grader/grade.py`)
is there."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
PATH = re.compile(r"`((?:[\w.-]+/)*[\w.-]+\.(?:py|md|sh|json|csv|ipynb|toml|yml|txt|j2))`")
TOP = {p.name for p in ROOT.iterdir()}
# `solutions/LESSON/LESSON.ipynb` is a pattern, not a path
PLACEHOLDERS = ("LESSON", "NN", "test_X", "/X.")


def anchors(page: Path) -> set[str]:
    """GitHub's ids of a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    heads = re.findall(r"^#+\s+(.*)$", page.read_text(), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_resolve(page):
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):   # http(s), mailto: not followed (no network)
            continue
        path, _, fragment = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        assert file.exists(), f"{page.name} links to {target}: no such file"
        if fragment and file.suffix == ".md":
            assert fragment in anchors(file), f"{page.name} links to {target}: no such heading"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_named_repository_paths_exist(page):
    for path in PATH.findall(page.read_text()):
        if any(p in path for p in PLACEHOLDERS):
            continue
        if path.split("/")[0] in TOP and "/" in path or path in TOP:
            assert (ROOT / path).exists(), f"{page.name} names `{path}`: not in the repository"


def test_instructors_guide_names_every_limit():
    """docs/instructors.md names every field of the grader's Limits (a new limit is documented)."""
    from dataclasses import fields

    from course_utils.grader.worker import Limits
    text = (ROOT / "docs" / "instructors.md").read_text()
    missing = [f.name for f in fields(Limits) if f"`{f.name}`" not in text]
    assert not missing, f"docs/instructors.md does not name Limits' {missing}"
