"""Make each page's downloadable executed notebook complete and reproducible.

Why, 1: in ``nb_execution_mode = "cache"``, myst-nb 1.4.0 replaces its notebook with a merged copy
from jupyter-cache on a cache hit, but then writes the *original* (output-less) notebook to
``_build/jupyter_execute``: the "download executed notebook" file would have no outputs, and the
cell metadata (``expect-error``) would come from the cached copy, not from the page as it is now.
This copies the cached outputs and execution counts into the page's notebook instead. The tests
check that every downloadable notebook has its outputs, so a myst-nb that changes this is noticed.

Why, 2: nbformat gives every cell a random id when myst-nb reads a Markdown page, and the kernel
splits printed text into stream chunks as timing allows, so two builds would offer different
notebook files. Cells get ids from their position, and consecutive stream chunks are merged (as
``nb_merge_streams`` already does for the page itself).
"""

from __future__ import annotations

from myst_nb.core.execute.cache import NotebookClientCache
from myst_nb.core.utils import coalesce_streams
from sphinx.application import Sphinx

_original_start_client = NotebookClientCache.start_client


def _start_client_keeping_source(self: NotebookClientCache) -> None:
    source = self._notebook
    for index, cell in enumerate(source.cells):
        cell.id = f"cell-{index}"
    _original_start_client(self)
    merged = self._notebook
    if merged is not source:
        _copy_cached_outputs(source, merged)
        self._notebook = source
    for cell in source.cells:
        if cell.cell_type == "code":
            cell.outputs = coalesce_streams(cell.get("outputs", []))


def _copy_cached_outputs(source, merged) -> None:
    cached_cells = [cell for cell in merged.cells if cell.cell_type == "code"]
    page_cells = [cell for cell in source.cells if cell.cell_type == "code"]
    for page_cell, cached_cell in zip(page_cells, cached_cells, strict=True):
        page_cell.outputs = cached_cell.get("outputs", [])
        page_cell.execution_count = cached_cell.get("execution_count")
    for key in ("kernelspec", "language_info"):
        if key in merged.metadata:
            source.metadata[key] = merged.metadata[key]


def setup(app: Sphinx) -> dict:
    NotebookClientCache.start_client = _start_client_keeping_source
    return {"parallel_read_safe": True, "parallel_write_safe": True}
