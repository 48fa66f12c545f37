"""Fixes around myst-nb's execution cache: complete, reproducible downloads; no stale pages.

Why, 1: in ``nb_execution_mode = "cache"``, myst-nb 1.4.0 replaces its notebook with a merged copy
from jupyter-cache on a cache hit, but then writes the *original* (output-less) notebook to
``_build/jupyter_execute``: the "download executed notebook" file would have no outputs, and the
cell metadata (``expect-error``) would come from the cached copy, not from the page as it is now.
This copies the cached outputs and execution counts into the page's notebook instead. The tests
check that every downloadable notebook has its outputs, so a myst-nb that changes this is noticed.

Why, 2: nbformat gives every cell a random id when myst-nb reads a Markdown page, and the kernel
splits printed text into stream chunks as timing allows, so two builds would offer different
notebook files. Cells get ids from their position, and consecutive chunks of the same stream are
joined exactly. (myst-nb's own ``nb_merge_streams`` strips each chunk and adds a newline, which
breaks a line wherever a chunk boundary happened to fall; after this join it has one chunk per
stream, so the page is deterministic too.)

Why, 3: jupyter-cache re-executes a page only when its code changes, and Sphinx re-reads it only
when its file changes. A page that imports a helper module next to it (``docs/autograd_graph.py``)
must run again when that module changes: the module's hash goes into the importing cells'
metadata (part of the cache key), and the module is noted as a dependency of the page.

Upstream reproductions (myst-nb 1.4.0, jupyter-cache 1.0.1), for 1 and 2: a project with one page
``p.md`` (a code cell ``print("x" * 3)``), ``nb_execution_mode = "cache"``. Build, then ``touch
p.md`` and build again: the second ``_build/jupyter_execute/p.ipynb`` has no outputs (the cache hit
replaced the notebook after the outputs were copied from the original). Build the page twice from
two clean copies: the two ``p.ipynb`` differ in every cell's ``id`` (``nbformat.v4.new_code_cell``
draws a random id). For 3: myst-nb's cache key is the notebook's code only
(``NbProjectRecord`` hashes the cells), so a page whose helper module changed is served from cache.
For 4: ``-j 2`` on a cold build with two pages sometimes fails with sqlite's "table nbproject
already exists" (both readers create the cache database).

Why, 3b: likewise, a page must run again when the kernel's start-up or the figure style changes
(``docs/_ipython``, ``docs/matplotlibrc``): their digest goes into the first code cell's metadata.

Why, 4: parallel readers share jupyter-cache's database, which is unsafe in two places. Each reader
created the database when it did not exist yet, and two at once failed with sqlite's "table
nbproject already exists". And after caching a notebook, each reader trims the cache to its limit
(``truncate_caches``): ``NbCacheRecord.records_to_delete`` lists the records to keep, then, in a
second query, every record not in that list, so a record that another reader created in between
is deleted, and the build failed with "Notebook file does not exist for cache record PK: 11" (seen
once in CI, on a cold build). Both are done once, in the main process before the readers fork;
readers never trim.

Why, 5: a downloaded notebook must run alone, but five pages import a helper module from ``docs/``.
After reading, each executed notebook (the page's download) gets, before its first code cell, one
collapsed cell per module it imports: ``%%writefile <module>.py`` and the module's text, so running
the notebook first writes the module next to it. The module file stays the one source; the page on
the site is unchanged (the cell is added to the download only, tagged ``helper-module``).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import nbformat
from jupyter_cache.cache.main import JupyterCacheBase
from myst_nb.core.execute.cache import NotebookClientCache
from sphinx.application import Sphinx

IMPORT = re.compile(r"^\s*(?:from|import)\s+([A-Za-z_]\w*)", re.M)


def local_modules(code: str, folder: Path) -> list[Path]:
    """The modules in ``folder`` that ``code`` imports."""
    return sorted(
        {
            folder / f"{name}.py"
            for name in IMPORT.findall(code)
            if (folder / f"{name}.py").is_file()
        }
    )


_original_start_client = NotebookClientCache.start_client


DOCS = Path(__file__).resolve().parents[1]


def kernel_setup_digest() -> str:
    """A digest of what every page's kernel starts with: IPython start-up and figure style."""
    digest = hashlib.sha256()
    for path in kernel_setup_files():
        digest.update(path.relative_to(DOCS).as_posix().encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def _start_client_keeping_source(self: NotebookClientCache) -> None:
    source = self._notebook
    code_cells = [cell for cell in source.cells if cell.cell_type == "code"]
    if code_cells:
        code_cells[0].metadata["kernel_setup"] = kernel_setup_digest()
    for index, cell in enumerate(source.cells):
        cell.id = f"cell-{index}"
        if cell.cell_type == "code" and self.path is not None:
            for module in local_modules(cell.source, Path(self.path).parent):
                digest = hashlib.sha256(module.read_bytes()).hexdigest()[:16]
                cell.metadata.setdefault("local_modules", {})[module.name] = digest
    _original_start_client(self)
    merged = self._notebook
    if merged is not source:
        _copy_cached_outputs(source, merged)
        self._notebook = source
    for cell in source.cells:
        if cell.cell_type == "code":
            cell.outputs = join_stream_chunks(cell.get("outputs", []))


def join_stream_chunks(outputs: list) -> list:
    """Join consecutive outputs of the same stream (stdout/stderr) into one, text unchanged."""
    joined: list = []
    for output in outputs:
        previous = joined[-1] if joined else None
        if (
            output.get("output_type") == "stream"
            and previous is not None
            and previous.get("output_type") == "stream"
            and previous.get("name") == output.get("name")
        ):
            previous["text"] += output["text"]
        else:
            joined.append(output)
    return joined


def _copy_cached_outputs(source, merged) -> None:
    cached_cells = [cell for cell in merged.cells if cell.cell_type == "code"]
    page_cells = [cell for cell in source.cells if cell.cell_type == "code"]
    for page_cell, cached_cell in zip(page_cells, cached_cells, strict=True):
        page_cell.outputs = cached_cell.get("outputs", [])
        page_cell.execution_count = cached_cell.get("execution_count")
    for key in ("kernelspec", "language_info"):
        if key in merged.metadata:
            source.metadata[key] = merged.metadata[key]


def kernel_setup_files() -> list[Path]:
    return sorted((DOCS / "_ipython").rglob("*.py")) + [DOCS / "matplotlibrc"]


def _note_local_modules(app: Sphinx, docname: str, source: list[str]) -> None:
    folder = Path(app.env.doc2path(docname)).parent
    for module in local_modules(source[0], folder):
        app.env.note_dependency(str(module))
    if "kernelspec:" in source[0].split("\n---", 1)[0]:  # a notebook page: it runs in a kernel
        for path in kernel_setup_files():
            app.env.note_dependency(str(path))


_truncate_caches = JupyterCacheBase.truncate_caches


def _prepare_cache(app: Sphinx) -> None:
    config = getattr(app.env, "mystnb_config", None)  # set by myst-nb's builder-inited handler
    if config is not None and config.execution_mode == "cache" and config.execution_cache_path:
        from jupyter_cache import get_cache

        cache = get_cache(config.execution_cache_path)  # creates the database
        _truncate_caches(cache)
        cache.db.dispose()


HELPER_TAG = "helper-module"


def carry_helper_modules(app: Sphinx, env) -> None:
    """Put the helper modules each executed notebook imports into it, as ``%%writefile`` cells."""
    for docname in sorted(env.found_docs):
        path = Path(app.outdir).parent / "jupyter_execute" / f"{docname}.ipynb"
        if not path.is_file():
            continue
        notebook = nbformat.read(path, as_version=4)
        cells = [c for c in notebook.cells if HELPER_TAG not in c.metadata.get("tags", [])]
        code = "\n".join(c.source for c in cells if c.cell_type == "code")
        helpers = [
            nbformat.v4.new_code_cell(
                f"%%writefile {module.name}\n{module.read_text()}",
                id=f"{HELPER_TAG}-{module.stem}",
                metadata={"tags": [HELPER_TAG], "jupyter": {"source_hidden": True}},
            )
            for module in local_modules(code, Path(env.doc2path(docname)).parent)
        ]
        first = next((i for i, c in enumerate(cells) if c.cell_type == "code"), len(cells))
        if cells[:first] + helpers + cells[first:] != notebook.cells:
            notebook.cells = cells[:first] + helpers + cells[first:]
            nbformat.write(notebook, path)


def setup(app: Sphinx) -> dict:
    NotebookClientCache.start_client = _start_client_keeping_source
    JupyterCacheBase.truncate_caches = lambda self: None  # done once, by _prepare_cache
    app.connect("builder-inited", _prepare_cache)
    app.connect("source-read", _note_local_modules)
    app.connect("env-updated", carry_helper_modules)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
