"""Every rendered page passes through here (Sphinx's documented ``template_bridge`` setting).

Code links: torch names in highlighted code cells (``torch.x``, ``nn.x``/``F.x`` where the page
imports those aliases, a tensor's autograd methods such as ``y.backward()``) link to their page in
the intersphinx inventory, at their first use on a page (repeated links were a tenth of the longest
pages). Rewrites for valid HTML and no axe violations, none of which has a setting: toctree
captions get ``aria-level``; myst-nb's ``<p>`` in ``<summary>`` become ``<span>`` without a
mismatching ``aria-label``; sphinx-gallery's ``tooltip`` becomes ``data-tooltip``; scrolling code
gets ``tabindex``; furo's two ``<aside>`` get labels. Each matches the pinned versions' markup: a
change upstream fails ``tests/test_quality.py``.
"""

from __future__ import annotations

import re

from sphinx.jinja2glue import BuiltinTemplateLoader

CELL = re.compile(
    r'(<div class="highlight-ipython3 notranslate"><div class="highlight"><pre>)(.*?)(</pre>)', re.S
)
NAME, DOT = r'<span class="n[nc]?">(\w+)</span>', r'<span class="o">\.</span>'
DOTTED, SPANS = re.compile(NAME + f"(?:{DOT}{NAME})+"), re.compile(NAME)
METHOD = re.compile(f'({DOT})(<span class="n">(\\w+)</span>)')
ALIASES = {"nn": "torch.nn", "F": "torch.nn.functional"}
TENSOR_METHODS = {"backward", "grad", "retain_grad", "register_hook", "detach", "detach_",
                  "requires_grad_", "retains_grad", "is_leaf", "zero_",
                  "register_post_accumulate_grad_hook"}  # fmt: skip
P, SPAN = (
    '<p class="{} admonition-title">(.*?)</p>',
    r'<span class="{} admonition-title">\{}</span>',
)
REWRITES = [
    ('<p class="caption" role="heading">', '<p class="caption" role="heading" aria-level="2">'),
    (r'<summary aria-label="Toggle hidden content">\s*' + P.format("collapsed") + r"\s*"
     + P.format("expanded") + r"\s*</summary>",
     "<summary>" + SPAN.format("collapsed", 1) + SPAN.format("expanded", 2) + "</summary>"),
    (r'(<div class="sphx-glr-thumbcontainer"[^>]*?) tooltip="', r'\1 data-tooltip="'),
    (r'(<div class="highlight"><pre)>', r'\1 tabindex="0">'),
    ('<aside class="sidebar-drawer">', '<aside class="sidebar-drawer" aria-label="Site navigation">'),
    ('<aside class="toc-drawer', '<aside aria-label="On this page" class="toc-drawer'),
]  # fmt: skip


def link_code(html: str, targets: dict[str, str], aliases: dict[str, str]) -> str:
    linked: set[str] = set()

    def link(text: str, name: str, spans: int) -> str:
        """Wrap the first ``spans`` names of ``text`` (and the dots between) in a link to name."""
        if name in linked:
            return text
        linked.add(name)
        cut = list(SPANS.finditer(text))[spans - 1].end()
        anchor = f'<a class="code-link" href="{targets[name]}" title="{name}">'
        return f"{anchor}{text[:cut]}</a>{text[cut:]}"

    def method(match: re.Match) -> str:
        name = f"torch.Tensor.{match.group(3)}"
        if match.group(3) in TENSOR_METHODS and name in targets:
            return match.group(1) + link(match.group(2), name, 1)
        return match.group(0)

    def dotted(match: re.Match) -> str:
        text, parts = match.group(0), SPANS.findall(match.group(0))
        prefix = aliases.get(parts[0], parts[0]).split(".")
        if prefix[0] != "torch":
            return METHOD.sub(method, text)
        names, shift = prefix + parts[1:], len(prefix) - 1
        for end in range(len(names), max(shift, 1), -1):
            if (name := ".".join(names[:end])) in targets:
                return link(text, name, end - shift)
        return text

    return CELL.sub(lambda m: m.group(1) + DOTTED.sub(dotted, m.group(2)) + m.group(3), html)


class SiteTemplates(BuiltinTemplateLoader):
    """Sphinx's template bridge, with the page's code linked and the rewrites above applied."""

    def init(self, builder, *args, **kwargs) -> None:
        super().init(builder, *args, **kwargs)
        self.builder = builder

    def render(self, template: str, context: dict) -> str:
        body = context.get("body") or ""
        if "highlight-ipython3" in body:
            plain = re.sub(r"<[^>]+>", "", body)
            aliases = {
                a: m for a, m in ALIASES.items() if re.search(rf"import {m} as {a}\b", plain)
            }
            context["body"] = link_code(body, self.torch_names(), aliases)
        html = super().render(template, context)
        for pattern, replacement in REWRITES:
            html = re.sub(pattern, replacement, html, flags=re.S)
        return html

    def torch_names(self) -> dict[str, str]:
        """Every torch name of the intersphinx inventory, and its URL (an undocumented attribute
        of Sphinx, whose items changed shape between releases)."""
        inventory = getattr(self.builder.env, "intersphinx_named_inventory", {}).get("torch", {})
        return {
            name: item.uri if hasattr(item, "uri") else item[2]
            for objects in inventory.values()
            for name, item in objects.items()
        }
