"""The tools in ``measure/`` import each other in one direction only (no import circle)."""

from __future__ import annotations

import ast

from conftest import ROOT

MEASURE = ROOT / "measure"


def local_imports(path) -> set[str]:
    """The modules of measure/ that ``path`` imports, at the top or inside a function."""
    local = {p.stem for p in MEASURE.glob("*.py")}
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return (found & local) - {path.stem}


def test_measure_has_no_import_circle():
    graph = {p.stem: local_imports(p) for p in sorted(MEASURE.glob("*.py"))}

    def circle(start, node, seen):
        for nxt in graph[node]:
            if nxt == start:
                return [*seen, nxt]
            if nxt not in seen and (found := circle(start, nxt, [*seen, nxt])):
                return found
        return None

    circles = [c for name in graph if (c := circle(name, name, [name]))]
    assert not circles, f"measure/ imports in a circle: {' -> '.join(circles[0])}"
