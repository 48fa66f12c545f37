"""Highlight code without a ``<span>`` around tokens that look like plain text anyway.

Why: Pygments wraps every token in ``<span class="...">``, and on this site's longest pages those
spans were close to half of the HTML. Punctuation, for one, has exactly the colour of plain code
text in both code styles (``github-light`` and ``github-dark``), so its spans change nothing on
screen, yet they made up about a tenth of a long page. The formatter below leaves out the span of
every token type that is drawn like plain text in the light *and* the dark style (and of
whitespace, which is not drawn), so the page looks the same with fewer bytes to load. The token
types are worked out from the configured styles, not listed by hand.

sphinx-gallery lexes its example code itself (to link names in it) and makes one node per token;
its token-node helper gets the same rule.
"""

from __future__ import annotations

from pygments.formatters import HtmlFormatter
from pygments.styles import get_style_by_name
from pygments.token import STANDARD_TYPES, Text, Whitespace
from sphinx.application import Sphinx

LOOKS = ("color", "bgcolor", "bold", "italic", "underline", "border")


def plain_token_types(style_names: list[str]) -> frozenset:
    """Token types drawn exactly like plain text in every one of the styles (whitespace too, when
    it has no background, underline or border)."""
    plain = set()
    for ttype in STANDARD_TYPES:
        looks_plain = True
        for name in style_names:
            style = get_style_by_name(name)
            own, text = style.style_for_token(ttype), style.style_for_token(Text)
            if ttype in Whitespace:
                looks_plain &= not (own["bgcolor"] or own["underline"] or own["border"])
            else:
                looks_plain &= all(own[key] == text[key] for key in LOOKS)
        if looks_plain:
            plain.add(ttype)
    return frozenset(plain)


class CompactHtmlFormatter(HtmlFormatter):
    """Pygments' HTML formatter, minus the spans of :data:`plain_types` (set from the config)."""

    plain_types: frozenset = frozenset()

    def _get_css_classes(self, ttype):
        if ttype in self.plain_types:
            return ""
        return super()._get_css_classes(ttype)


def _use_compact_formatter(app: Sphinx) -> None:
    # furo registers ``pygments_dark_style`` with the theme, so the styles are known only now,
    # after the builder has made its highlighter.
    highlighter = getattr(app.builder, "highlighter", None)
    if app.builder.format != "html" or highlighter is None:
        return
    names = [app.config.pygments_style or "sphinx"]
    if getattr(app.config, "pygments_dark_style", None):
        names.append(app.config.pygments_dark_style)
    CompactHtmlFormatter.plain_types = plain_token_types(names)
    highlighter.formatter = CompactHtmlFormatter
    _compact_gallery_tokens(CompactHtmlFormatter.plain_types)


def _compact_gallery_tokens(plain_types: frozenset) -> None:
    from docutils import nodes
    from sphinx_gallery import _doctree_links

    token_node = getattr(_doctree_links, "_original_token_node", _doctree_links._token_node)

    def compact_token_node(ttype, text):
        return nodes.Text(text) if ttype in plain_types else token_node(ttype, text)

    _doctree_links._original_token_node = token_node
    _doctree_links._token_node = compact_token_node


def setup(app: Sphinx) -> dict:
    app.connect("builder-inited", _use_compact_formatter)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
