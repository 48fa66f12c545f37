"""Figures a reader can read: on a 360 px phone and a 1280 px desktop, in the light and dark theme.

In a real browser (Debian's Chromium), every figure of every page (matplotlib figures in pages and
gallery examples, autograd graph drawings) is measured as it is rendered, during the page's one
visit (tests/visits.py):

* **text size**: each text element of the figure's SVG, its font size times the scale at which the
  browser draws it (an ``<img>``'s SVG is copied into the page at the size the image is drawn, so
  the browser resolves every style and transform, rotated labels included), must be at least
  ``FLOOR_PX`` CSS pixels (furo's small print is 12.8 px at 16 px root size: the floor is the
  issue's "about 12 px"). Figures must be SVG so that their text can be measured (and stays
  crisp); a raster figure fails.
* **contrast**: a screenshot of the figure, in each theme. Its most common colour must be the page
  background (a transparent figure, no white panel glaring in the dark theme), and its strongest
  ink must reach 4.5:1 against that background. And every colour its text is drawn in, shown
  through the filter the theme puts on the figure (a swatch drawn by the browser), must reach
  4.5:1 against the page (WCAG AA for text).
"""

from __future__ import annotations

import re

import pytest
from browser import THEMES, set_theme
from conftest import HTML, built_pages, expected_pages
from visits import BACKGROUND, FIGURES, WIDTHS, contrast, swatch_pixel

FLOOR_PX = 12.0


# A gallery figure, or an image or SVG in a cell's output (read from the HTML text: parsing every
# page at collection took a minute); the browser counts the figures of every page and
# test_every_page_with_figures_is_checked compares.
FIGURE_HTML = re.compile(
    r"sphx-glr-(?:single|multi)-img"
    r'|class="cell_output[^"]*"(?:(?!class="cell[ "]|<p>|<section|</section>).)*?<(?:img|svg)\b',
    re.S,
)


def pages_with_figures() -> list[str]:
    """Every built page with at least one figure (what the figure selector matches)."""
    return [
        page.relative_to(HTML).as_posix()
        for page in built_pages()
        if FIGURE_HTML.search(page.read_text(encoding="utf-8"))
    ]


PAGES = pages_with_figures()


def test_there_are_figures_to_check():
    assert len(PAGES) >= 5, PAGES


def test_every_page_with_figures_is_checked(visit):
    counted = [path for path in expected_pages() if visit(path).figures]
    assert counted == [p for p in expected_pages() if p in PAGES], (
        f"pages the browser finds figures on: {counted}; checked: {PAGES}"
    )


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("path", PAGES)
def test_figure_text_is_at_least_12_px(visit, path, width):
    results = visit(path).figure_text[width]
    assert results, f"{path}: no figure found"
    problems = []
    for figure in results:
        if figure.get("raster"):
            problems.append(
                f"figure {figure['index']} is a raster image ({figure['src']}): draw SVG"
            )
        # to 0.01 px: 9 pt at its natural size is 12 px, measured as 11.999...
        elif figure["smallest"] is not None and round(figure["smallest"], 2) < FLOOR_PX:
            problems.append(
                f"figure {figure['index']} ({figure['src']}): text {figure['smallest']:.1f} px"
            )
    assert not problems, f"{path} at {width} px:\n" + "\n".join(problems)


@pytest.mark.parametrize("theme", THEMES)
@pytest.mark.parametrize("path", PAGES)
def test_figures_read_in_both_themes(visit, path, theme):
    problems = visit(path).figure_contrast[theme]
    assert not problems, f"{path} ({theme}):\n" + "\n".join(problems)


PALETTE = {  # docs/matplotlibrc, TEAM conventions: one meaning each
    "saved": "#2f80ed",
    "freed": "#e0542c",
    "retained / with retain_graph": "#8a63d2",
    "leaf / with detach": "#1a9c6b",
    "neutral": "#808080",
}


@pytest.mark.parametrize("theme", THEMES)
def test_the_figure_colours_read_in_both_themes(browser, server, theme):
    """Lines and boxes in the site's colours, drawn through the filter the theme puts on figures,
    reach 3:1 against the page (WCAG AA for graphics)."""
    page = browser.new_page(viewport={"width": 360, "height": 900})
    page.goto(f"{server}/{PAGES[0]}", wait_until="networkidle")
    set_theme(page, theme)
    background = page.evaluate(BACKGROUND)
    figure_filter = page.evaluate(
        "selector => getComputedStyle(document.querySelector(selector)).filter", FIGURES
    )
    problems = []
    for meaning, colour in PALETTE.items():
        pixel = swatch_pixel(page, colour, figure_filter)
        ratio = contrast(pixel, background)
        if ratio < 3:
            problems.append(f"{meaning} {colour} shows as {pixel}: {ratio:.2f}:1")
    page.close()
    assert not problems, f"{theme}:\n" + "\n".join(problems)
