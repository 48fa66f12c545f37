"""Every outcome check is broken on purpose: each ``checked`` block has its declared wrong variants
(CONTRIBUTING.md, "An outcome check"; format: ``tests/mutations.py``).

A ``checked`` block is a statement that calls ``checked(...)`` (``with checked(...)``, two checks
in one ``with``, or ``check = checked(...) if ... else ...``) in a page's code cell or a gallery
script's ``# %%`` block; cells tagged ``raises-exception`` are left out (they show a check failing).
Each block must be declared in ``tests/mutations/<stem>.toml`` as a ``[[check]]`` with at least
three ``[[check.mutation]]``s, matched by where its ``until`` line is (the cell or block
``tests/mutations.py`` runs down to): in the block's own cell or block, or, for a block inside a
function, in a later one that calls that function. One declared check covers one block.

This reads the sources only (no build, no run), so it is fast; whether each mutation is *caught*
is ``tests/test_mutations.py`` (slow tier).
"""

from __future__ import annotations

import ast
import re
import tomllib

import mutations
import pytest
from conftest import ROOT, gallery_scripts, myst_pages, read_notebook

MUTATIONS = ROOT / "tests" / "mutations"
AT_LEAST = 3


def parts(source) -> list[tuple[str, int, str, bool]]:
    """(where, the file's line of the code's first line, code, tagged as an expected error) for
    each code cell or ``# %%`` block, in the order ``tests/mutations.py`` counts them."""
    text = source.read_text(encoding="utf-8")
    if source.suffix == ".py":
        found, line = [], 1
        for block in mutations._parts(text, page=False):
            found.append((f"# %% block {len(found) + 1}", line, block, False))
            line += block.count("\n")
        return found
    notebook = read_notebook(source)
    found = []
    for cell, start in zip(notebook.cells, notebook.metadata["source_map"], strict=True):
        if cell.cell_type == "code":
            tagged = "raises-exception" in cell.metadata.get("tags", [])
            found.append((f"code cell {len(found) + 1}", start + 1, cell.source, tagged))
    return found


def parse(code: str) -> ast.Module:
    lines = ["" if ln.lstrip().startswith(("%", "!")) else ln for ln in code.splitlines()]
    return ast.parse("\n".join(lines))  # IPython magics blanked: the lines keep their numbers


def blocks(tree: ast.Module) -> list[tuple[int, str | None]]:
    """(line, top-level function or None) of each statement that calls ``checked``, the innermost
    statement holding the call: a ``with`` of two checks is one block."""
    parent = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = {}
    for node in ast.walk(tree):
        func = getattr(node, "func", None)
        if (
            not isinstance(node, ast.Call)
            or (getattr(func, "id", None) or getattr(func, "attr", None)) != "checked"
        ):
            continue
        statement = node
        while not isinstance(statement, ast.stmt):
            statement = parent[statement]
        outer, top = statement, None
        while outer in parent:
            outer = parent[outer]
            if isinstance(outer, ast.FunctionDef | ast.AsyncFunctionDef):
                top = outer.name
        found[statement.lineno] = top
    return sorted(found.items())


def calls(code: str, name: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(name)}\(", code) is not None


SOURCES = [*myst_pages(), *gallery_scripts()]


def declared_checks(source, toml) -> tuple[list[tuple[int, str, int]], list[str]]:
    """((index of the part that holds `until`, name, how many mutations) per declared check of
    ``source``, problems)."""
    if not toml.is_file():
        return [], []
    spec = tomllib.loads(toml.read_text(encoding="utf-8"))
    name = source.relative_to(ROOT).as_posix()
    if spec.get("source") != name:
        return [], [f"tests/mutations/{toml.name} names {spec.get('source')!r}, not {name!r}"]
    text, checks, problems = source.read_text(encoding="utf-8"), [], []
    for check in spec.get("check", []):
        try:
            index = mutations._until(text, check["until"], source.suffix == ".md") - 1
        except ValueError as error:
            problems.append(f"tests/mutations/{toml.name}, check {check['name']!r}: {error}")
            continue
        checks.append((index, check["name"], len(check.get("mutation", []))))
    return checks, problems


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_every_checked_block_has_three_declared_mutations(source):
    name, toml = source.relative_to(ROOT).as_posix(), MUTATIONS / f"{source.stem}.toml"
    checks, problems = declared_checks(source, toml)
    found = parts(source)
    running, used = set(), set()  # parts that run a checked block; declared checks matched
    for number, (where, start, code, tagged) in enumerate(found):
        for line, function in [] if tagged else blocks(parse(code)):
            runs_it = {number} | {
                i for i, (_, _, later, _) in enumerate(found)
                if function and i > number and calls(later, function)
            }  # fmt: skip
            running |= runs_it
            mine = [c for c in checks if c[0] in runs_it and c not in used]
            enough = [c for c in mine if c[2] >= AT_LEAST]
            if enough:
                used.add(enough[0])
                continue
            first = code.splitlines()[line - 1].strip()
            later = f" or of a later one that calls {function}()" if function else ""
            have = f" ({mine[0][1]!r} declares {mine[0][2]})" if mine else ""
            problems.append(
                f"{name}:{start + line - 1} ({where}) `{first[:60]}`: declare a [[check]] in "
                f"tests/mutations/{toml.name} with at least {AT_LEAST} mutations, its `until` a "
                f"line of this cell{later}{have}"
            )
    for index, check_name, _ in checks:
        if index not in running:
            problems.append(
                f"tests/mutations/{toml.name}, check {check_name!r}: its `until` is in "
                f"{found[index][0]}, which runs no checked block"
            )
    assert not problems, "\n".join(problems)
