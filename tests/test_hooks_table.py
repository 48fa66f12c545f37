"""The hooks table of ``docs/hooks.md`` has a row for every hook the installed torch has.

The list comes from the installed torch, by a rule of its own, wider than the page's
(``docs/hooks_table.py``'s ``hook_methods()``, which keeps ``register_…hook`` names): every public
name holding "hook" on ``torch.nn.Module``, ``torch.Tensor`` and ``torch.autograd.graph.Node`` and
among the functions of ``torch.nn.modules.module``, and every name ``torch.autograd.graph``
exports (``__all__``). Each must have a row, be named in the page's "What the table leaves out",
or be one of ``NOT_HOOKS`` here (exported names that register nothing). A torch release that adds
a hook, or exports a new name from ``torch.autograd.graph``, fails this test, naming it, until
the page runs it under every condition or says why it does not.
"""

from __future__ import annotations

import inspect

import torch
import torch.autograd.graph as graph
import torch.nn.modules.module as module_hooks
from conftest import soup

# Exported by torch.autograd.graph, and not a hook: each takes no function to run at some moment.
NOT_HOOKS = {
    "Node": "the class whose hook methods are rows",
    "GradientEdge": "a (node, output number) pair",
    "get_gradient_edge": "returns a GradientEdge",
    "increment_version": "bumps a tensor's version counter",
    "region_activation_memory_budget": "a memory budget for compiled regions",
    "set_warn_on_accumulate_grad_stream_mismatch": "a warning switch",
    "set_override_stale_capture_stream": "a stream setting",
}
# Hooks that behave differently by what they are registered on: at least this many rows.
ROWS_AT_LEAST = {
    "Tensor.register_hook": 2,  # on a leaf (a parameter) and on a non-leaf (an output)
    "register_multi_grad_hook": 2,  # mode="all" (the default) and mode="any"
}


def hooks_of_torch() -> list[str]:
    """The names a row of the table must start with, or that the page must leave out by name."""
    owners = {"Module": torch.nn.Module, "Tensor": torch.Tensor, "Node": graph.Node}
    found = [
        f"{owner}.{name}"
        for owner, cls in owners.items()
        for name in dir(cls)
        if "hook" in name.lower() and not name.startswith("_")
    ]
    found += [
        name
        for name, value in vars(module_hooks).items()
        if "hook" in name.lower()
        and not name.startswith("_")
        and inspect.isfunction(value)
        and value.__module__ == module_hooks.__name__
    ]
    found += [name for name in graph.__all__ if name not in NOT_HOOKS]
    return sorted(set(found))


def table_rows(site) -> list[str]:
    """The first word of the first cell of every row of the built page's tables."""
    page = soup(site / "docs" / "hooks.html")
    rows = []
    for table in page.find_all("table"):
        for tr in table.find_all("tr"):
            cells = tr.find_all("td")
            if cells and cells[0].get_text(strip=True):
                rows.append(cells[0].get_text(" ", strip=True).split()[0])
    return rows


def left_out(site) -> set[str]:
    """The names in code in the page's paragraph "What the table leaves out"."""
    paragraph = soup(site / "docs" / "hooks.html").find(id="hooks-table-limits")
    assert paragraph is not None, "docs/hooks.md lost its label hooks-table-limits"
    return {code.get_text(strip=True) for code in paragraph.find_all("code")}


def test_the_listing_finds_the_known_hooks():
    """The introspection itself works: it finds hooks every torch of the site's range has."""
    found = hooks_of_torch()
    for name in (
        "Module.register_forward_hook",
        "Module.register_full_backward_hook",
        "Tensor.register_hook",
        "Node.register_prehook",
        "register_module_forward_hook",
        "register_multi_grad_hook",
        "saved_tensors_hooks",
        "save_on_cpu",
        "allow_mutation_on_saved_tensors",
    ):
        assert name in found, f"the listing missed {name}: fix hooks_of_torch()"
    assert "Node" not in found and "BackwardHook" not in found


def test_every_hook_has_a_row(site):
    rows, skipped = table_rows(site), left_out(site)
    missing = [name for name in hooks_of_torch() if name not in rows and name not in skipped]
    assert not missing, (
        "docs/hooks.md's hooks table has no row for "
        + ", ".join(missing)
        + f" (torch {torch.__version__}): add each to ROWS (a hook a pass runs) or OTHER of "
        "docs/hooks_table.py, or name it in the page's 'What the table leaves out' (or, in "
        "tests/test_hooks_table.py, in NOT_HOOKS if it registers nothing)"
    )
    few = {name: rows.count(name) for name, n in ROWS_AT_LEAST.items() if rows.count(name) < n}
    assert not few, f"docs/hooks.md's hooks table has too few rows for {few}: {ROWS_AT_LEAST}"
