"""Make every page valid HTML (W3C Nu checker), free of axe-core violations, and light.

Why: the site's quality gates (``nox -s audit``, ``tests/test_quality.py``) demand 0 Nu errors and
0 axe violations on every page, and a median page under 250 KB. The markup that broke them comes
from Sphinx and the extensions, not from our pages, and none of it has a setting:

* Sphinx writes toctree captions as ``<p role="heading">`` without the ``aria-level`` that role
  requires: ``aria-level="2"`` is added.
* myst-nb puts ``<p>`` elements (not allowed there) in the ``<summary>`` of hidden cells, with an
  ``aria-label`` that differs from the visible text: they become ``<span>`` (styled like the
  paragraphs in ``site.css``) and the label goes, so the visible text names the control.
* sphinx-gallery gives thumbnails a non-standard ``tooltip`` attribute: it becomes ``data-tooltip``
  (``site.css`` shows it as sphinx-gallery's stylesheet did).
* matplotlib's inline SVG carries RDF ``<metadata>`` that is not valid in HTML: it is dropped.
* Code blocks that scroll sideways must be reachable by keyboard: ``<pre>`` gets ``tabindex="0"``.
* furo's two ``<aside>`` landmarks get distinct labels.
* Stylesheets and scripts that a page does not use (sphinx-design, sphinx-gallery, myst-nb,
  copy buttons) are not linked from it; every page used to load all of them. Pages with notebook
  cells link myst-nb's stylesheet without its 256-colour ANSI palette (35 of its 43 KB).
* Figures (matplotlib PNGs, RGBA) are stored with a 256-colour palette: a quarter of the bytes, no
  visible change for line plots and colour maps. The result depends only on the input, so two
  builds still give the same files.

Each rewrite matches the exact markup the pinned versions write; a change upstream shows up as a
failing quality test, not as silently broken pages.
"""

from __future__ import annotations

import re
from pathlib import Path

from sphinx.application import Sphinx

CAPTION = re.compile(r'<p class="caption" role="heading">')
SUMMARY = re.compile(
    r'<summary aria-label="Toggle hidden content">\s*'
    r'<p class="collapsed admonition-title">(.*?)</p>\s*'
    r'<p class="expanded admonition-title">(.*?)</p>\s*</summary>',
    re.S,
)
TOOLTIP = re.compile(r'(<div class="sphx-glr-thumbcontainer"[^>]*?) tooltip="')
SVG_METADATA = re.compile(r"\s*<metadata>\s*<rdf:RDF\b.*?</metadata>", re.S)
CODE = re.compile(r'(<div class="highlight"><pre)>')
ASIDES = {
    '<aside class="sidebar-drawer">': '<aside class="sidebar-drawer" aria-label="Site navigation">',
    '<aside class="toc-drawer': '<aside aria-label="On this page" class="toc-drawer',
}


def fix_html(html: str) -> str:
    """Apply the rewrites listed in the module docstring to one rendered page."""
    html = CAPTION.sub('<p class="caption" role="heading" aria-level="2">', html)
    html = SUMMARY.sub(
        r'<summary><span class="collapsed admonition-title">\1</span>'
        r'<span class="expanded admonition-title">\2</span></summary>',
        html,
    )
    html = TOOLTIP.sub(r'\1 data-tooltip="', html)
    html = SVG_METADATA.sub("", html)
    html = CODE.sub(r'\1 tabindex="0">', html)
    for old, new in ASIDES.items():
        html = html.replace(old, new)
    return html


# A page keeps an extension's assets only when its body uses that extension's markup (first
# matching file-name prefix wins).
ASSETS = [
    (("sphinx-design.", "design-tabs.js"), re.compile(r'class="[^"]*\bsd-')),
    (("sg_gallery-binder",), re.compile(r"binder-badge|sphx-glr-binder")),
    (("sg_gallery-dataframe",), re.compile(r'class="dataframe')),
    (("sg_gallery-rendered-html",), re.compile(r"rendered_html")),
    (("sg-tags.js",), re.compile(r"sphx-glr-tag")),
    (("sg_gallery",), re.compile(r"sphx-glr")),
    (("mystnb.",), re.compile(r'class="cell[ _"]')),
    (("copybutton", "clipboard.min.js"), re.compile(r'<div class="highlight"><pre')),
]
# myst-nb's stylesheet is 43 KB, 35 KB of which colour the 256-colour ANSI palette (classes -C16 to
# -C255 and -BGC16 to -BGC255) in outputs. Pages link a copy without those rules; the 16 basic ANSI
# colours, bold and the rest stay.
MYSTNB_CORE = "_static/mystnb-core.css"
ANSI_256 = re.compile(
    r"div\.highlight \.-Color\[class\*=-B?G?C(?:1[6-9]|[2-9]\d|1\d\d|2[0-5]\d)\] \{[^}]*\}\s*"
)


def unused_asset(filename: str, body: str) -> bool:
    name = filename.rsplit("/", 1)[-1]
    for prefixes, used in ASSETS:
        if name.startswith(prefixes):
            return not used.search(body)
    return False


def _prune_assets(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    from sphinx.builders.html._assets import _CascadingStyleSheet

    body = context.get("body", "")
    for key in ("css_files", "script_files"):
        if key not in context:
            continue
        kept = []
        for asset in context[key]:
            filename = str(getattr(asset, "filename", asset))
            if unused_asset(filename, body):
                continue
            if filename.startswith("_static/mystnb.") and filename.endswith(".css"):
                attributes = dict(asset.attributes)
                asset = _CascadingStyleSheet(MYSTNB_CORE, priority=asset.priority, **attributes)
            kept.append(asset)
        context[key] = kept


def _write_mystnb_core(app: Sphinx) -> None:
    from importlib.resources import files

    if app.builder.format != "html":
        return
    css = files("myst_nb.static").joinpath("mystnb.css").read_text(encoding="utf-8")
    path = Path(app.outdir, MYSTNB_CORE)
    path.parent.mkdir(parents=True, exist_ok=True)
    trimmed = ANSI_256.sub("", css)
    if not path.exists() or path.read_text(encoding="utf-8") != trimmed:
        path.write_text(trimmed, encoding="utf-8")


def _wrap_renderer(app: Sphinx) -> None:
    templates = getattr(app.builder, "templates", None)
    if templates is None or app.builder.format != "html":
        return
    render = templates.render

    def render_fixed(template: str, context: dict) -> str:
        return fix_html(render(template, context))

    templates.render = render_fixed


def palette_png(path: Path) -> bool:
    """Store a PNG with a 256-colour palette when that makes it smaller; True if rewritten."""
    import io

    from PIL import Image

    with Image.open(path) as image:
        if image.mode == "P":
            return False
        quantized = image.convert("RGBA").quantize(256, method=Image.Quantize.FASTOCTREE)
    buffer = io.BytesIO()
    quantized.save(buffer, "PNG", optimize=True)
    if buffer.tell() >= path.stat().st_size:
        return False
    path.write_bytes(buffer.getvalue())
    return True


def _shrink_figures(app: Sphinx, exception: Exception | None) -> None:
    if exception is None and app.builder.format == "html":
        for path in sorted(Path(app.outdir, "_images").glob("*.png")):
            palette_png(path)


def setup(app: Sphinx) -> dict:
    app.connect("build-finished", _shrink_figures)
    app.connect("builder-inited", _wrap_renderer)
    app.connect("builder-inited", _write_mystnb_core)
    app.connect("html-page-context", _prune_assets, priority=900)
    # Bump env_version when a rewrite changes: Sphinx then reads and writes every page again.
    return {"env_version": 1, "parallel_read_safe": True, "parallel_write_safe": True}
