"""Check every executed MyST-NB page: all cells ran, and each expected error is exactly that error.

Why: myst-nb lets a cell tagged ``raises-exception`` raise *anything* and carries on. This site's
promise is stronger: a cell may raise only if it names the error it shows, as cell metadata

    ```{code-cell} ipython3
    :tags: [raises-exception]
    :expect-error: "RuntimeError: Trying to backward through the graph a second time"
    y.backward()
    ```

and the build checks the exception type (exactly) and the message fragment (``in`` the message)
against what the kernel really raised. Where torch releases word the error differently, the value
is a list of such strings, one per wording, and the error must match one of them. Any other exception, a cell tagged without
``expect-error``, an expected error that did not happen, or a cell left unexecuted is a warning with
the page and line, and ``-W`` turns it into a failed build.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)

TAG = "raises-exception"
KEY = "expect-error"


def parse_expectation(value: object) -> tuple[str, str]:
    """Split ``"RuntimeError: message fragment"`` into ``("RuntimeError", "message fragment")``."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"`{KEY}` must be a string like 'RuntimeError: part of the message'")
    ename, _, fragment = value.partition(":")
    ename = ename.strip()
    if not ename.isidentifier():
        raise ValueError(f"`{KEY}: {value}` must start with an exception class name and a colon")
    return ename, fragment.strip()


def check_cell(cell: nbformat.NotebookNode) -> str | None:
    """What is wrong with one executed code cell under the rules above, or None."""
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
    try:
        wordings = [parse_expectation(value) for value in _as_list(expected)]
    except ValueError as exc:
        return str(exc)
    wanted = " or ".join(f"{ename} containing {fragment!r}" for ename, fragment in wordings)
    if not errors:
        return f"was expected to raise {wanted} but raised nothing"
    if not any(errors[0].ename == e and f in errors[0].evalue for e, f in wordings):
        return f"was expected to raise {wanted}, got {errors[0].ename}: {errors[0].evalue}"
    return None


def _as_list(expected: object) -> list:
    """One wording, or a list of them (a release that words the error differently)."""
    return list(expected) if isinstance(expected, (list, tuple)) and expected else [expected]


def check_notebook(notebook: nbformat.NotebookNode) -> list[tuple[int, str]]:
    """Return ``(cell_index, problem)`` for every cell that breaks the rules above."""
    problems = []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "code" and cell.source.strip() and (problem := check_cell(cell)):
            problems.append((index, problem))
    return problems


def executed_notebook_path(app: Sphinx, docname: str) -> Path:
    """Where myst-nb writes the executed copy of a page (also offered as the page's download)."""
    return Path(app.outdir).parent / "jupyter_execute" / f"{docname}.ipynb"


def _check_doc(app: Sphinx, doctree) -> None:
    docname = app.env.docname
    if "kernelspec" not in app.env.metadata[docname]:
        return  # not a notebook page
    path = executed_notebook_path(app, docname)
    if not path.exists():
        logger.warning(
            "executed notebook missing: %s", path, location=docname, type="nb_expectations"
        )
        return
    notebook = nbformat.read(path, as_version=4)
    lines = notebook.metadata.get("source_map", [])
    code_cells = [i for i, cell in enumerate(notebook.cells) if cell.cell_type == "code"]
    for index, problem in check_notebook(notebook):
        line = lines[index] if index < len(lines) else None
        number = code_cells.index(index) + 1
        logger.warning(
            "code cell %d %s", number, problem, location=(docname, line), type="nb_expectations"
        )


def setup(app: Sphinx) -> dict:
    app.connect("doctree-read", _check_doc)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
