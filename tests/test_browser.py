"""Guarantee 5: the built site, served on localhost, in a real browser (Debian's Chromium, headless).

Every page loads with no console error and no request to another origin; search finds the home
page; the theme toggle works; copy buttons sit on code, never on outputs, and copy code without
prompts. Without Chromium these tests skip with a loud reason; with CI=true they are required.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from conftest import (
    HTML,
    IN_CI,
    ROOT,
    expected_pages,
    gallery_scripts,
    html_for,
    myst_pages,
    read_notebook,
)
from site_audit import CHROMIUM, CHROMIUM_FLAGS, serve

if CHROMIUM is None:
    if IN_CI:
        raise RuntimeError(
            "CI=true but Chromium is missing: .ci/run must `apt-get install -y chromium`"
        )
    pytest.skip(
        "LOUD SKIP: browser tests need Debian's Chromium (`apt-get install -y chromium`); "
        "they are required on CI",
        allow_module_level=True,
    )


@pytest.fixture(scope="module")
def server(site):
    with serve(site) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser, server):
    context = browser.new_context()
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server)
    page = context.new_page()
    page.problems = []
    page.on(
        "console", lambda msg: msg.type == "error" and page.problems.append(f"console: {msg.text}")
    )
    page.on("pageerror", lambda exc: page.problems.append(f"page error: {exc}"))

    def watch(route):
        url = route.request.url
        if urlsplit(url).netloc != urlsplit(server).netloc and not url.startswith(
            ("data:", "blob:")
        ):
            page.problems.append(f"request to another origin: {url}")
            return route.abort()
        return route.continue_()

    page.route("**/*", watch)
    yield page
    context.close()


PAGES = expected_pages()  # from the sources: without a built site each test fails, none is empty


@pytest.mark.parametrize("path", PAGES)
def test_page_loads_cleanly(page, server, path):
    response = page.goto(f"{server}/{path}", wait_until="networkidle")
    assert response.ok
    assert page.problems == [], page.problems


def test_theme_toggle_cycles_the_theme(page, server):
    page.goto(f"{server}/index.html", wait_until="networkidle")
    seen = [page.evaluate("document.body.dataset.theme")]
    for _ in range(3):
        page.locator("button.theme-toggle:visible").first.click()
        seen.append(page.evaluate("document.body.dataset.theme"))
    assert {"light", "dark"} <= set(seen), seen
    page.reload(wait_until="networkidle")
    assert page.evaluate("document.body.dataset.theme") == seen[-1], "the choice is not remembered"


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
def test_copy_buttons_sit_on_code_not_outputs(page, server, source):
    """Every code block has a copy button, no output has one, and the first visible block's button
    copies exactly its code, without prompts. A page with no code (from its source) has none."""
    path = html_for(source).relative_to(HTML).as_posix()
    page.goto(f"{server}/{path}", wait_until="networkidle")
    on_outputs = page.locator(
        "div.cell_output button.copybtn, div.sphx-glr-script-out button.copybtn"
    ).count()
    assert on_outputs == 0
    count, visible_count = code_blocks(source)
    code = page.locator("div.cell_input div.highlight pre, div.highlight-Python div.highlight pre")
    assert code.count() == count, f"{count} code blocks in the source, {code.count()} on the page"
    buttons = page.locator("div.cell_input button.copybtn, div.highlight-Python button.copybtn")
    assert buttons.count() == count
    visible = page.locator(
        "div.cell_input div.highlight pre:visible, div.highlight-Python div.highlight pre:visible"
    )
    assert visible.count() == visible_count
    if count == 0:
        assert page.locator("button.copybtn").count() == 0, "copy buttons on a page with no code"
        return
    assert visible_count, f"{path}: every code cell is folded (hide-input); show one"
    first = visible.first
    first.hover()
    first.locator("xpath=..").locator("button.copybtn").click()
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied.strip() == first.inner_text().strip()
    assert not copied.lstrip().startswith((">>>", "In ["))
