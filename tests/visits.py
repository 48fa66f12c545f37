"""One visit per page, in the test session's one browser: everything the browser tests read.

``conftest.py`` starts one headless Chromium and one local server for the whole session; the
``visit`` fixture loads each page once, on first use, and records what ``test_browser.py``
(console, requests, copy buttons), ``test_quality.py`` (axe in both themes, page weight) and
``test_figures.py`` (figure text size at two widths, contrast in both themes) assert. A page is
loaded at 1280 x 900 px; its figures are measured there, axe runs in each theme, then the figures
are measured at 360 px wide, where each theme's screenshots are taken; the copy buttons last.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import site_audit as audit
from browser import THEMES, set_theme

FIGURES = (
    "div.cell_output img, div.cell_output svg, img.sphx-glr-single-img, img.sphx-glr-multi-img"
)
WIDTHS = (1280, 360)  # desktop, then a phone: the page is loaded at the first
HEIGHT = 900
CODE = "div.cell_input div.highlight pre, div.highlight-Python div.highlight pre"


@dataclass
class Visit:
    path: str
    status: int = 0
    problems: list[str] = field(default_factory=list)  # console and page errors, other origins
    urls: set[str] = field(default_factory=set)  # every URL the page loaded
    axe: dict[str, list[dict]] | None = None  # theme -> violations; None without axe-core
    copy: dict = field(default_factory=dict)  # the copy buttons, as counted and clicked
    figures: int = 0  # how many elements the figure selector matches
    figure_text: dict[int, list[dict]] = field(default_factory=dict)  # width -> MEASURE's result
    figure_contrast: dict[str, list[str]] = field(default_factory=dict)  # theme -> problems


# For every figure: the smallest rendered font size of its text, in CSS px (null: not measurable).
MEASURE = """
async (selector) => {
  const results = [];
  for (const [index, element] of [...document.querySelectorAll(selector)].entries()) {
    let svg = element, holder = null;
    if (element.tagName.toLowerCase() === 'img') {
      if (!element.currentSrc.split('?')[0].endsWith('.svg')) {
        results.push({index, src: element.currentSrc, raster: true});
        continue;
      }
      // An SVG shown by <img>: put a copy into the page at the size the <img> is drawn, so that
      // the browser itself resolves every font size, style and transform of its text.
      const text = await (await fetch(element.currentSrc)).text();
      const parsed = new DOMParser().parseFromString(text, 'image/svg+xml').documentElement;
      const box = element.getBoundingClientRect();
      svg = document.importNode(parsed, true);
      svg.setAttribute('width', box.width);
      svg.setAttribute('height', box.height);
      holder = document.createElement('div');
      holder.style.cssText = 'position:absolute;left:0;top:0;visibility:hidden;';
      holder.appendChild(svg);
      document.body.appendChild(holder);
    }
    let smallest = Infinity, texts = 0;
    for (const t of svg.querySelectorAll('text')) {
      if (!t.textContent.trim()) continue;
      texts += 1;
      // the font size times the length of the text's x axis on screen (rotated text too)
      const m = t.getScreenCTM();
      const size = parseFloat(getComputedStyle(t).fontSize) * Math.hypot(m.a, m.b);
      smallest = Math.min(smallest, size);
    }
    if (holder) holder.remove();
    results.push({index, src: element.currentSrc || 'inline svg', texts,
                  smallest: texts ? smallest : null});
  }
  return results;
}
"""

# For every figure: the distinct fill colours of its text, and the CSS filter the page puts on it.
TEXT_COLOURS = """
async (selector) => {
  const results = [];
  for (const element of document.querySelectorAll(selector)) {
    let svg = element, holder = null;
    if (element.tagName.toLowerCase() === 'img') {
      if (!element.currentSrc.split('?')[0].endsWith('.svg')) { results.push(null); continue; }
      const text = await (await fetch(element.currentSrc)).text();
      svg = document.importNode(
        new DOMParser().parseFromString(text, 'image/svg+xml').documentElement, true);
      holder = document.createElement('div');
      holder.style.cssText = 'position:absolute;left:0;top:0;visibility:hidden;';
      holder.appendChild(svg);
      document.body.appendChild(holder);
    }
    const fills = new Set();
    for (const t of svg.querySelectorAll('text')) {
      if (t.textContent.trim()) fills.add(getComputedStyle(t).fill);
    }
    if (holder) holder.remove();
    results.push({filter: getComputedStyle(element).filter, fills: [...fills]});
  }
  return results;
}
"""

# A swatch of one colour, drawn through a filter on the page's background: what the reader sees.
SWATCH = """
([colour, filter]) => {
  const box = document.createElement('div');
  box.id = 'figure-test-swatch';
  box.style.cssText = 'position:fixed;left:0;top:0;width:40px;height:40px;z-index:2147483647;' +
                      'background:' + getComputedStyle(document.body).backgroundColor;
  const swatch = document.createElement('div');
  swatch.style.cssText = 'width:40px;height:40px;background:' + colour + ';filter:' + filter;
  box.appendChild(swatch);
  document.body.appendChild(box);
}
"""
BACKGROUND = "() => getComputedStyle(document.body).backgroundColor.match(/\\d+/g).map(Number)"


def luminance(rgb) -> float:
    def channel(c: float) -> float:
        c /= 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(c) for c in rgb[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a, b) -> float:
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def swatch_pixel(page, colour: str, css_filter: str):
    """The colour a reader sees for ``colour`` drawn through ``css_filter`` on the page."""
    from PIL import Image

    page.evaluate(SWATCH, [colour, css_filter])
    shot = page.screenshot(clip={"x": 20, "y": 20, "width": 1, "height": 1})
    page.evaluate("() => document.getElementById('figure-test-swatch').remove()")
    return Image.open(io.BytesIO(shot)).convert("RGB").getpixel((0, 0))


def figure_contrast_problems(page) -> list[str]:
    """In the current theme: each figure's background is the page's, its strongest ink and every
    colour its text is drawn in (through the theme's filter) reach 4.5:1 against the page."""
    from PIL import Image

    background = page.evaluate(BACKGROUND)
    problems = []
    for index, element in enumerate(page.query_selector_all(FIGURES)):
        element.scroll_into_view_if_needed()
        shot = Image.open(io.BytesIO(element.screenshot())).convert("RGB")
        colours = shot.getcolors(shot.width * shot.height)
        common = max(colours)[1]
        if contrast(common, background) > 1.25:
            problems.append(f"figure {index}: its background {common} is not the page's")
        strongest = max(contrast(colour, background) for _, colour in colours)
        if strongest < 4.5:
            problems.append(f"figure {index}: strongest ink only {strongest:.2f}:1")
    seen = {}
    for index, figure in enumerate(page.evaluate(TEXT_COLOURS, FIGURES)):
        for fill in figure["fills"] if figure else []:
            key = (fill, figure["filter"])
            if key not in seen:
                seen[key] = contrast(swatch_pixel(page, *key), background)
            if seen[key] < 4.5:
                problems.append(f"figure {index}: text in {fill} shows at {seen[key]:.2f}:1")
    return problems


def copy_buttons(page) -> dict:
    """The copy buttons as a reader meets them; the first visible block's button is clicked."""
    found = {
        "on_outputs": page.locator(
            "div.cell_output button.copybtn, div.sphx-glr-script-out button.copybtn"
        ).count(),
        "code": page.locator(CODE).count(),
        "buttons": page.locator(
            "div.cell_input button.copybtn, div.highlight-Python button.copybtn"
        ).count(),
        "anywhere": page.locator("button.copybtn").count(),
    }
    visible = page.locator(", ".join(f"{s}:visible" for s in CODE.split(", ")))
    found["visible"] = visible.count()
    if found["visible"]:
        first = visible.first
        first.hover()
        first.locator("xpath=..").locator("button.copybtn").click()
        found["copied"] = page.evaluate("navigator.clipboard.readText()")
        found["first_text"] = first.inner_text()
    return found


def visit_page(browser, base: str, path: str) -> Visit:
    """Load one page once and record everything the browser tests assert."""
    result = Visit(path)
    context = browser.new_context(viewport={"width": WIDTHS[0], "height": HEIGHT})
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base)
    page = context.new_page()
    page.on("console", lambda m: m.type == "error" and result.problems.append(f"console: {m.text}"))
    page.on("pageerror", lambda exc: result.problems.append(f"page error: {exc}"))
    page.on("response", lambda response: result.urls.add(response.url))

    def watch(route):
        url = route.request.url
        if urlsplit(url).netloc != urlsplit(base).netloc and not url.startswith(("data:", "blob:")):
            result.problems.append(f"request to another origin: {url}")
            return route.abort()
        return route.continue_()

    page.route("**/*", watch)
    try:
        response = page.goto(f"{base}/{path}", wait_until="networkidle")
        result.status = response.status if response else 0
        # lazy images count for the weight: load them all
        page.evaluate(
            "() => document.querySelectorAll('img[loading=lazy]').forEach(i => i.loading = 'eager')"
        )
        page.wait_for_load_state("networkidle")
        result.figures = page.locator(FIGURES).count()
        with_figures = result.figures > 0
        if with_figures:
            result.figure_text[WIDTHS[0]] = page.evaluate(MEASURE, FIGURES)
        if audit.AXE_JS.exists():
            result.axe = {}
            for theme in THEMES:
                set_theme(page, theme)
                assert page.evaluate("document.body.dataset.theme") == theme
                result.axe[theme] = audit.axe_violations(page)
        if with_figures:
            page.set_viewport_size({"width": WIDTHS[1], "height": HEIGHT})
            result.figure_text[WIDTHS[1]] = page.evaluate(MEASURE, FIGURES)
            for theme in THEMES:
                set_theme(page, theme)
                result.figure_contrast[theme] = figure_contrast_problems(page)
            page.set_viewport_size({"width": WIDTHS[0], "height": HEIGHT})
        result.copy = copy_buttons(page)  # last: a clicked button shows a tooltip for a while
    finally:
        context.close()
    return result
