"""Make every page valid HTML (W3C Nu checker) and free of axe-core violations.

Why: the site's quality gates (``nox -s audit``, ``tests/test_quality.py``) demand 0 Nu errors and
0 axe violations on every page. The markup that broke them comes from Sphinx and the extensions,
not from our pages, and none of it has a setting:

* Sphinx writes toctree captions as ``<p role="heading">`` without the ``aria-level`` that role
  requires: ``aria-level="2"`` is added.
* myst-nb puts ``<p>`` elements (not allowed there) in the ``<summary>`` of hidden cells, with an
  ``aria-label`` that differs from the visible text: they become ``<span>`` (styled like the
  paragraphs in ``site.css``) and the label goes, so the visible text names the control.
* sphinx-gallery gives thumbnails a non-standard ``tooltip`` attribute: it becomes ``data-tooltip``
  (``site.css`` shows it as sphinx-gallery's stylesheet did).
* Code blocks that scroll sideways must be reachable by keyboard: ``<pre>`` gets ``tabindex="0"``.
* furo's two ``<aside>`` landmarks get distinct labels.

Each rewrite matches the exact markup the pinned versions write; a change upstream shows up as a
failing quality test, not as silently broken pages. They apply to every rendered page through
Sphinx's documented ``template_bridge`` setting (``conf.py``): Sphinx's own bridge, whose output is
rewritten. (matplotlib's inline SVG carried RDF ``<metadata>``, invalid in HTML: the kernels' figure
settings in ``docs/_ipython`` set its keys to ``None``, so matplotlib writes none.)
"""

from __future__ import annotations

import re

from sphinx.jinja2glue import BuiltinTemplateLoader

CAPTION = re.compile(r'<p class="caption" role="heading">')
SUMMARY = re.compile(
    r'<summary aria-label="Toggle hidden content">\s*'
    r'<p class="collapsed admonition-title">(.*?)</p>\s*'
    r'<p class="expanded admonition-title">(.*?)</p>\s*</summary>',
    re.S,
)
TOOLTIP = re.compile(r'(<div class="sphx-glr-thumbcontainer"[^>]*?) tooltip="')
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
    html = CODE.sub(r'\1 tabindex="0">', html)
    for old, new in ASIDES.items():
        html = html.replace(old, new)
    return html


class QualityTemplates(BuiltinTemplateLoader):
    """Sphinx's template bridge, with the rewrites above applied to every page it renders."""

    def render(self, template: str, context: dict) -> str:
        return fix_html(super().render(template, context))
