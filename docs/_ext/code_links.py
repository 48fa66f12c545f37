"""Link torch names inside MyST-NB code cells to their official documentation.

Why: sphinx-gallery links the names in gallery code to the API docs; myst-nb does not, yet every
torch name on the site should lead to its official page. After Pygments has highlighted a code
cell, dotted names such as ``torch.autograd.grad`` (and ``nn.Linear`` / ``F.mse_loss`` where a page
imports those aliases) are looked up in the vendored intersphinx inventory and wrapped in a link.
Calls of the autograd methods of a tensor (``y.backward()``, ``y.retain_grad()``, ...) link to
``torch.Tensor``'s page. Names that are not in the inventory are left alone.

Each name is linked where it first appears on a page, not at every use (as an encyclopedia links a
term once): on the longest pages, repeated links were a tenth of the HTML and added nothing a
reader could not find one cell above.
"""

from __future__ import annotations

import re

from sphinx.application import Sphinx

CELL_CODE = re.compile(
    r'(<div class="highlight-ipython3 notranslate"><div class="highlight"><pre>)(.*?)(</pre>)', re.S
)
NAME = r'<span class="n[nc]?">(\w+)</span>'
DOT = r'<span class="o">\.</span>'
DOTTED = re.compile(NAME + f"(?:{DOT}{NAME})+")
SPAN_NAMES = re.compile(NAME)
METHOD = re.compile(f'({DOT})(<span class="n">(\\w+)</span>)')
ALIASES = {"nn": "torch.nn", "F": "torch.nn.functional"}
TENSOR_METHODS = {"backward", "grad", "retain_grad", "register_hook", "detach", "detach_",
                  "requires_grad_", "retains_grad", "is_leaf", "zero_",
                  "register_post_accumulate_grad_hook"}  # fmt: skip


def _torch_targets(app: Sphinx) -> dict[str, str]:
    """Every torch name of the inventory, mapped to its URL."""
    inventory = getattr(app.env, "intersphinx_named_inventory", {}).get("torch", {})
    targets = {}
    for objects in inventory.values():
        for name, item in objects.items():
            targets[name] = item.uri if hasattr(item, "uri") else item[2]
    return targets


def link_code(html: str, targets: dict[str, str], aliases: dict[str, str]) -> str:
    linked: set[str] = set()

    def first_use(name: str) -> bool:
        new = name not in linked
        linked.add(name)
        return new

    def dotted(match: re.Match) -> str:
        text = match.group(0)
        parts = SPAN_NAMES.findall(text)
        if parts[0] in aliases:
            parts = aliases[parts[0]].split(".") + parts[1:]
        elif parts[0] != "torch":
            return _tensor_method(text)
        for end in range(len(parts), 1, -1):
            name = ".".join(parts[:end])
            if name in targets:
                if not first_use(name):
                    return text
                return _wrap_prefix(
                    text, end - (len(parts) - len(SPAN_NAMES.findall(text))), name, targets[name]
                )
        return text

    def _tensor_method(text: str) -> str:
        def method(match: re.Match) -> str:
            name = f"torch.Tensor.{match.group(3)}"
            if match.group(3) in TENSOR_METHODS and name in targets and first_use(name):
                return match.group(1) + _anchor(match.group(2), name, targets[name])
            return match.group(0)

        return METHOD.sub(method, text)

    def cell(match: re.Match) -> str:
        return match.group(1) + DOTTED.sub(dotted, match.group(2)) + match.group(3)

    return CELL_CODE.sub(cell, html)


def _anchor(html: str, name: str, url: str) -> str:
    return f'<a class="code-link" href="{url}" title="{name}">{html}</a>'


def _wrap_prefix(text: str, count: int, name: str, url: str) -> str:
    """Wrap the first ``count`` name spans (with the dots between them) of ``text`` in a link."""
    spans = list(SPAN_NAMES.finditer(text))
    cut = spans[count - 1].end()
    return _anchor(text[:cut], name, url) + text[cut:]


def _page_aliases(body: str) -> dict[str, str]:
    """The aliases a page defines (``import torch.nn as nn``, ``... functional as F``)."""
    plain = re.sub(r"<[^>]+>", "", body)
    return {
        alias: module
        for alias, module in ALIASES.items()
        if re.search(rf"import {re.escape(module)} as {alias}\b", plain)
    }


def _link_page(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    body = context.get("body")
    if body and "highlight-ipython3" in body:
        context["body"] = link_code(body, _torch_targets(app), _page_aliases(body))


def setup(app: Sphinx) -> dict:
    app.connect("html-page-context", _link_page)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
