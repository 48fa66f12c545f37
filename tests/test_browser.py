"""Guarantee 5: the built site, served on localhost, in a real browser (Debian's Chromium, headless).

Every page loads with no console error and no request to another origin; the theme toggle works;
copy buttons sit on code, never on outputs, and copy code without prompts. Each page is loaded once
for all the browser tests (the ``visit`` fixture, tests/visits.py). Without Chromium these tests
skip with a loud reason; with CI=true they are required.
"""

from __future__ import annotations

import pytest
from conftest import (
    HTML,
    ROOT,
    expected_pages,
    gallery_scripts,
    html_for,
    myst_pages,
    read_notebook,
)

PAGES = expected_pages()  # from the sources: without a built site each test fails, none is empty


@pytest.mark.parametrize("path", PAGES)
def test_page_loads_cleanly(visit, path):
    seen = visit(path)
    assert 200 <= seen.status < 300, f"{path}: HTTP {seen.status}"
    assert seen.problems == [], seen.problems


def test_theme_toggle_cycles_the_theme(browser, server):
    page = browser.new_page()
    page.goto(f"{server}/index.html", wait_until="networkidle")
    seen = [page.evaluate("document.body.dataset.theme")]
    for _ in range(3):
        page.locator("button.theme-toggle:visible").first.click()
        seen.append(page.evaluate("document.body.dataset.theme"))
    assert {"light", "dark"} <= set(seen), seen
    page.reload(wait_until="networkidle")
    remembered = page.evaluate("document.body.dataset.theme")
    page.close()
    assert remembered == seen[-1], "the choice is not remembered"


def code_blocks(source) -> tuple[int, int]:
    """(code blocks the page shows, of which visible unfolded), counted from the page's source."""
    if source.suffix == ".py":
        from sphinx_gallery.py_source_parser import split_code_and_text_blocks

        blocks = split_code_and_text_blocks(str(source))[1]
        count = sum(1 for label, text, _ in blocks if label == "code" and text.strip())
        return count, count
    if source not in myst_pages():
        return 0, 0  # a Markdown page without a kernel: no code cells
    tags = [
        c.metadata.get("tags", []) for c in read_notebook(source).cells if c.cell_type == "code"
    ]
    shown = [t for t in tags if not {"remove-cell", "remove-input"} & set(t)]
    return len(shown), sum(1 for t in shown if "hide-input" not in t)


SOURCES = [ROOT / "index.md", *sorted((ROOT / "docs").glob("*.md")), *gallery_scripts()]


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_copy_buttons_sit_on_code_not_outputs(visit, source):
    """Every code block has a copy button, no output has one, and the first visible block's button
    copies exactly its code, without prompts. A page with no code (from its source) has none."""
    path = html_for(source).relative_to(HTML).as_posix()
    found = visit(path).copy
    assert found["on_outputs"] == 0
    count, visible_count = code_blocks(source)
    assert found["code"] == count, f"{count} code blocks in the source, {found['code']} on the page"
    assert found["buttons"] == count
    assert found["visible"] == visible_count
    if count == 0:
        assert found["anywhere"] == 0, "copy buttons on a page with no code"
        return
    assert visible_count, f"{path}: every code cell is folded (hide-input); show one"
    assert found["copied"].strip() == found["first_text"].strip()
    assert not found["copied"].lstrip().startswith((">>>", "In ["))
