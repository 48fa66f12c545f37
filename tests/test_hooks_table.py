"""The hooks table of ``docs/hooks.md`` has a row for every hook the installed torch has.

The list comes from the installed torch by introspection, as the page says: every public
``register_…hook`` method of ``torch.nn.Module``, ``torch.Tensor`` and
``torch.autograd.graph.Node``, every ``register_module_…hook`` function of
``torch.nn.modules.module``, and every public hook of ``torch.autograd.graph`` (a name holding
"hook", or a subclass of ``saved_tensors_hooks`` such as ``save_on_cpu``). A torch release that
adds a hook fails this test, naming it, until the page's table runs it under every condition.
"""

from __future__ import annotations

import re

import torch
import torch.autograd.graph as graph
import torch.nn.modules.module as module_hooks
from conftest import soup


def hook_methods() -> list[str]:
    """The names a row of the table must start with (``Module.register_forward_hook``, ...)."""
    owners = {"Module": torch.nn.Module, "Tensor": torch.Tensor, "Node": graph.Node}
    found = [
        f"{owner}.{name}"
        for owner, cls in owners.items()
        for name in dir(cls)
        if re.fullmatch(r"register_\w*hook", name)
    ]
    found += [name for name in dir(module_hooks) if re.fullmatch(r"register_module_\w*hook", name)]
    found += [
        name
        for name, value in vars(graph).items()
        if not name.startswith("_")
        and (
            "hook" in name
            or (isinstance(value, type) and issubclass(value, graph.saved_tensors_hooks))
        )
    ]
    return sorted(set(found))


def table_rows(site) -> set[str]:
    """The first word of the first cell of every row of the built page's tables."""
    page = soup(site / "docs" / "hooks.html")
    rows = set()
    for table in page.find_all("table"):
        for tr in table.find_all("tr"):
            cells = tr.find_all("td")
            if cells and cells[0].get_text(strip=True):
                rows.add(cells[0].get_text(" ", strip=True).split()[0])
    return rows


def test_the_listing_finds_the_known_hooks():
    """The introspection itself works: it finds hooks every torch of the site's range has."""
    found = hook_methods()
    for name in (
        "Module.register_forward_hook",
        "Module.register_full_backward_hook",
        "Tensor.register_hook",
        "Node.register_prehook",
        "register_module_forward_hook",
        "register_multi_grad_hook",
        "saved_tensors_hooks",
        "save_on_cpu",
    ):
        assert name in found, f"the listing missed {name}: fix hook_methods()"


def test_every_hook_has_a_row(site):
    rows = table_rows(site)
    missing = [name for name in hook_methods() if name not in rows]
    assert not missing, (
        "docs/hooks.md's hooks table has no row for "
        + ", ".join(missing)
        + f" (torch {torch.__version__}): add each to ROWS (a hook a pass runs) or OTHER"
    )
