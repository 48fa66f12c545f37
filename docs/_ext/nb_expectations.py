"""The rule for an executed notebook: every cell ran, and a cell raises only the error it declares,
``:expect-error: "RuntimeError: fragment"`` with the ``raises-exception`` tag (a list of such
strings accepts any: releases word errors differently). The type must match, the fragment be in
the message. ``execution.py`` applies it to every page, the tests and ``nox -s versions`` to every
download.
"""

from __future__ import annotations

import nbformat

TAG = "raises-exception"
KEY = "expect-error"


def parse_expectation(value: object) -> tuple[str, str]:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"`{KEY}` must be a string like 'RuntimeError: part of the message'")
    ename, _, fragment = value.partition(":")
    ename = ename.strip()
    if not ename.isidentifier():
        raise ValueError(f"`{KEY}: {value}` must start with an exception class name and a colon")
    return ename, fragment.strip()


def check_cell(cell: nbformat.NotebookNode) -> str | None:
    tags, expected = cell.metadata.get("tags", []), cell.metadata.get(KEY)
    errors = [out for out in cell.get("outputs", []) if out.output_type == "error"]
    if "skip-execution" in tags:
        return "cells must not skip execution on this site"
    if cell.get("execution_count") is None:
        return "cell was not executed (an earlier cell probably failed)"
    if TAG not in tags:
        if expected is not None:
            return f"has `{KEY}` but lacks the `{TAG}` tag, so it cannot raise"
        return f"raised {errors[0].ename}: {errors[0].evalue}" if errors else None
    if expected is None:
        return f"is tagged `{TAG}` but does not say which error: add `:{KEY}: Type: fragment`"
    values = expected if isinstance(expected, (list, tuple)) and expected else [expected]
    try:
        wordings = [parse_expectation(value) for value in values]
    except ValueError as exc:
        return str(exc)
    wanted = " or ".join(f"{ename} containing {fragment!r}" for ename, fragment in wordings)
    if not errors:
        return f"was expected to raise {wanted} but raised nothing"
    if not any(errors[0].ename == e and f in errors[0].evalue for e, f in wordings):
        return f"was expected to raise {wanted}, got {errors[0].ename}: {errors[0].evalue}"
    return None


def check_notebook(notebook: nbformat.NotebookNode) -> list[tuple[int, str]]:
    """Return ``(cell_index, problem)`` for every cell that breaks the rules above."""
    cells = [
        (i, c) for i, c in enumerate(notebook.cells) if c.cell_type == "code" and c.source.strip()
    ]
    return [(index, problem) for index, cell in cells if (problem := check_cell(cell))]
