"""README.md, docs/ and the CHANGELOG render as written: parsed as CommonMark (markdown-it-py, as code hosts and
package indexes render them), every code block is closed, every heading is a heading, and every
link inside the repository leads to a file and a heading that exist."""

from __future__ import annotations

import functools
import itertools
import re
from pathlib import Path
from urllib.parse import unquote

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

from tests.doc_examples import ROOT, documents

DOCUMENTS = [*documents(), ROOT / "CHANGELOG.md"]
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")


def _ids(path: Path) -> str:
    return str(path.relative_to(ROOT))


_PARSER = MarkdownIt("commonmark").enable("table")


def _tokens(text: str) -> list[Token]:
    return _PARSER.parse(text)


@functools.cache
def _page(path: Path) -> tuple[str, list[Token]]:
    text = path.read_text()
    return text, _tokens(text)


def _scanned_headings(text: str) -> list[tuple[int, str]]:
    """The `#` lines outside code blocks, as a writer means them: a block opens at a fence line and
    closes at the next line that ends with its fence, even one glued to the last line of output."""
    headings, fence = [], ""
    for number, line in enumerate(text.splitlines()):
        if fence:
            if line.rstrip().endswith(fence):
                fence = ""
        elif opened := _FENCE.match(line):
            fence = opened.group(1)
        elif heading := _HEADING.match(line):
            headings.append((number, "#" * len(heading.group(1))))
    return headings


def _parsed_headings(tokens: list[Token]) -> list[tuple[int, str]]:
    return [(t.map[0], t.markup) for t in tokens if t.type == "heading_open" and t.map and t.markup.startswith("#")]


def _unclosed_fences(text: str, tokens: list[Token]) -> list[int]:
    lines = text.splitlines()
    unclosed = []
    for token in tokens:
        if token.type == "fence" and token.map:
            last = lines[token.map[1] - 1].strip() if token.map[1] - 1 > token.map[0] else ""
            if not (last.startswith(token.markup[0] * len(token.markup)) and set(last) <= {token.markup[0]}):
                unclosed.append(token.map[0] + 1)
    return unclosed


@pytest.mark.parametrize("path", DOCUMENTS, ids=_ids)
def test_every_code_block_is_closed_and_every_heading_renders(path: Path) -> None:
    text, tokens = _page(path)
    assert _unclosed_fences(text, tokens) == [], "a code block runs on: its closing fence is missing or glued"
    assert _parsed_headings(tokens) == _scanned_headings(text), "a heading does not render as one"


def _slug(title: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


@functools.cache
def _anchors(path: Path) -> frozenset[str]:
    _, tokens = _page(path)
    anchors: set[str] = set()
    for opened, inline in itertools.pairwise(tokens):
        if opened.type == "heading_open":
            title = "".join(child.content for child in inline.children or [])
            slug = _slug(title)
            anchors.update({slug, *(f"{slug}-{n}" for n in range(1, 5))})  # repeated titles get -1, -2, …
    return frozenset(anchors)


def _links(tokens: list[Token]) -> list[str]:
    found = []
    for token in tokens:
        for child in token.children or []:
            if child.type == "link_open":
                found.append(str(child.attrs["href"]))
            elif child.type == "image":
                found.append(str(child.attrs["src"]))
    return found


@pytest.mark.parametrize("path", DOCUMENTS, ids=_ids)
def test_every_link_inside_the_repository_leads_somewhere(path: Path) -> None:
    broken = []
    for href in _links(_page(path)[1]):
        if re.match(r"^[a-z][a-z0-9+.-]*:", href):  # http:, https:, mailto:
            continue
        target, _, anchor = unquote(href).partition("#")
        destination = (path.parent / target).resolve() if target else path
        inside = destination.exists() and (destination == ROOT or ROOT in destination.parents)
        if not inside or (anchor and destination.suffix == ".md" and anchor not in _anchors(destination)):
            broken.append(href)
    assert broken == []


def test_a_glued_fence_and_a_broken_link_are_found(tmp_path: Path) -> None:
    """The checks can fail: the shape that broke the README (a fence glued to the last output line)
    loses the headings after it, and a link to a missing heading is reported."""
    text = "# Title\n\n```\n$ gpudiag x\noutput```\n\n## Next\n\ntext\n"
    tokens = _tokens(text)
    assert _unclosed_fences(text, tokens) == [3]
    assert _parsed_headings(tokens) != _scanned_headings(text)
    fixed = text.replace("output```", "output\n```")
    assert _unclosed_fences(fixed, _tokens(fixed)) == []
    assert _parsed_headings(_tokens(fixed)) == _scanned_headings(fixed)
    page = tmp_path / "page.md"
    page.write_text(fixed)
    assert "next" in _anchors(page) and "nowhere" not in _anchors(page)
