"""Every rendered page passes through here (Sphinx's documented ``template_bridge`` setting): its
context gets the torch that ran it and its source file; torch names in its code cells link to
their documentation at their first use (repeated links were a tenth of the longest pages); and the
rewrites below make it valid HTML without axe violations, where no setting does (MAINTAINING.md).
"""

from __future__ import annotations

import platform
import re

from site_context import torch_version
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
P = '<p class="{} admonition-title">(.*?)</p>'
SPAN = r'<span class="{} admonition-title">\{}</span>'
REWRITES = [
    ('<p class="caption" role="heading">', '<p class="caption" role="heading" aria-level="2">'),
    (r'<summary aria-label="Toggle hidden content">\s*' + P.format("collapsed") + r"\s*"
     + P.format("expanded") + r"\s*</summary>",
     "<summary>" + SPAN.format("collapsed", 1) + SPAN.format("expanded", 2) + "</summary>"),
    (r'(<div class="sphx-glr-thumbcontainer"[^>]*?) tooltip="', r'\1 data-tooltip="'),
    (r'(<div class="highlight"><pre)>', r'\1 tabindex="0">'),
    ('<div class="table-wrapper', '<div tabindex="0" class="table-wrapper'),  # wide tables scroll
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
        # the torch that ran the page, and the file it is made from (gallery pages: their script)
        pagename, suffix = context.get("pagename", ""), context.get("page_source_suffix")
        script, source = pagename.removeprefix("auto_examples/"), suffix and pagename + suffix
        if script != pagename:
            source = "gallery/README.rst" if script == "index" else f"gallery/{script}.py"
        python = platform.python_version()
        context.update(torch_version=torch_version(), python_version=python, source_path=source)
        if "highlight-ipython3" in (body := context.get("body") or ""):
            plain = re.sub(r"<[^>]+>", "", body)
            aliases = {
                a: m for a, m in ALIASES.items() if re.search(rf"import {m} as {a}\b", plain)
            }
            # env.intersphinx_named_inventory: undocumented (MAINTAINING.md, "Private internals")
            inventory = self.builder.env.intersphinx_named_inventory.get("torch", {})
            names = {name: item.uri for items in inventory.values() for name, item in items.items()}
            context["body"] = link_code(body, names, aliases)
        html = super().render(template, context)
        for pattern, replacement in REWRITES:
            html = re.sub(pattern, replacement, html, flags=re.S)
        return html
