"""The vendored intersphinx inventories (docs/_inventories) are what their provenance says they
are, and every API link on the site names an object that exists.

The official inventories cannot be fetched where this site is usually built, so the files there may
be synthesized. docs/_inventories/provenance.json says, for each file, which it is ("official":
written by `nox -s inventories` from the URL it names; "synthesized": made here), with its SHA-256,
so a file edited by hand no longer matches its record. A file called official must look like a real
Sphinx inventory of the whole documentation (tens of thousands of objects and a ``std:doc`` entry per page), which a synthesized
file does not. Whatever the inventories are, every link to docs.pytorch.org and docs.python.org on
the built site must name, in its fragment, an object that exists in the installed torch or Python:
it is imported here. (That a page of that name exists on the documentation host is checked only by
`nox -s linkcheck`, which needs the network.)
"""

from __future__ import annotations

import builtins
import hashlib
import importlib
import json
import re
import sys
from importlib.metadata import version
from urllib.parse import urlsplit

import pytest
from conftest import ROOT, built_pages, soup

INVENTORIES = ROOT / "docs" / "_inventories"
PROVENANCE = INVENTORIES / "provenance.json"
TORCH_MINOR = ".".join(version("torch").split(".")[:2])
PYTHON_MINOR = "{}.{}".format(*sys.version_info[:2])
BASES = {
    "torch": f"https://docs.pytorch.org/docs/{TORCH_MINOR}/",
    "python": f"https://docs.python.org/{PYTHON_MINOR}/",
}
# A Sphinx build's own inventory lists every object of the documentation and one std:doc entry per
# page; PyTorch's and Python's list tens of thousands of objects.
OFFICIAL_AT_LEAST = 10_000


def inventory(name: str):
    import sphobjinv as soi

    return soi.Inventory(INVENTORIES / f"{name}.inv")


def claimed(name: str) -> str:
    """What provenance.json calls ``<name>.inv``: official or synthesized."""
    assert PROVENANCE.exists(), f"{PROVENANCE.relative_to(ROOT)} is missing"
    return json.loads(PROVENANCE.read_text())[f"{name}.inv"]["kind"]


@pytest.mark.parametrize("name", BASES)
def test_an_inventory_called_official_looks_official(name):
    inv = inventory(name)
    docs = [o for o in inv.objects if o.domain == "std" and o.role == "doc"]
    if claimed(name) == "official":
        assert inv.count >= OFFICIAL_AT_LEAST and docs, (
            f"provenance.json calls docs/_inventories/{name}.inv official, but it lists "
            f"{inv.count:,} objects and {len(docs)} std:doc entries; the real inventory lists tens "
            "of thousands and one std:doc per page. Say it is synthesized, or run "
            "`nox -s inventories`."
        )


@pytest.mark.parametrize("name", BASES)
def test_each_inventory_is_what_its_provenance_says(name):
    assert PROVENANCE.exists(), f"{PROVENANCE.relative_to(ROOT)} is missing"
    record = json.loads(PROVENANCE.read_text())[f"{name}.inv"]
    path = INVENTORIES / f"{name}.inv"
    assert record["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest(), (
        f"{path.name} differs from the file its provenance describes (edited by hand?)"
    )
    inv = inventory(name)
    assert record["objects"] == inv.count
    if record["kind"] == "official":
        assert record["source"] == BASES[name] + "objects.inv"
        assert inv.count >= OFFICIAL_AT_LEAST
    else:
        assert record["kind"] == "synthesized" and record["source"], record


def test_vendored_inventories_match_the_installed_torch():
    """docs/_inventories must be vendored again (`nox -s inventories`) when the torch pin changes."""
    vendored = inventory("torch").version
    assert vendored.startswith(TORCH_MINOR), (
        f"docs/_inventories/torch.inv is for torch {vendored}, the pin is {version('torch')}: "
        "run `nox -s inventories`"
    )


def exists(name: str) -> bool:
    """Whether the dotted ``name`` is an importable module or an attribute reached from one (or a
    builtin)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:end]))
            break
        except ImportError:
            continue
    else:
        obj, end = builtins, 0
    for part in parts[end:]:
        if not hasattr(obj, part):
            return False
        obj = getattr(obj, part)
    return True


def api_links() -> dict[str, set[str]]:
    """Every link into the torch or Python API docs on the built site: URL -> pages using it."""
    links: dict[str, set[str]] = {}
    for page in built_pages():
        for a in soup(page).find_all("a", href=True):
            href = a["href"]
            if any(href.startswith(base) for base in BASES.values()):
                links.setdefault(href, set()).add(page.name)
    return links


def test_every_api_link_names_an_object_that_exists(site):
    links = api_links()
    assert len(links) > 50, f"only {len(links)} API links found"
    wrong = []
    for href, pages in sorted(links.items()):
        fragment = urlsplit(href).fragment
        name = re.sub(r"^module-", "", fragment)
        page = urlsplit(href).path.rsplit("/", 1)[-1].removesuffix(".html")
        if not name or not exists(name):
            wrong.append(f"{href} (on {', '.join(sorted(pages))}): no object {name!r}")
        elif "/generated/" in href and name != page and not name.startswith(page + "."):
            wrong.append(f"{href} (on {', '.join(sorted(pages))}): {name} is not on {page}'s page")
    assert not wrong, "links to objects that do not exist:\n" + "\n".join(wrong)
