"""Fixes around myst-nb's execution cache (myst-nb 1.4.0, jupyter-cache 1.0.1); private APIs.

1. Complete downloads: on a cache hit, myst-nb replaces its notebook with jupyter-cache's merged
   copy but writes the *original*, output-less notebook to ``_build/jupyter_execute`` (the page's
   download). The cached outputs are copied into the page's notebook instead.
2. Reproducible downloads: cells get ids from their position (nbformat's are random), and the
   stream chunks the kernel splits printed text into are joined exactly (``nb_merge_streams`` adds
   a newline at each chunk boundary).
3. No stale pages: the cache key is the cells' code only. A digest of what else the outputs depend
   on goes into cell metadata: each helper module a page imports (``docs/autograd_graph.py``), the
   kernel start-up (``docs/_ipython``), and the torch and Python versions and the figure style
   (``site_context.execution_key``), so a new torch re-executes every page. The files are noted as
   the page's dependencies.
4. Parallel readers: the main process creates and trims jupyter-cache's database before they fork
   (two creating it fail; a trim deletes another's records). Kernels get as long to start as a
   cell to run (nbclient's 60 s failed a busy cold build), and one more start (``_execute``).
5. Downloads run alone: each executed notebook gets, before its first code cell, one collapsed
   cell per helper module it imports (``%%writefile <module>.py`` and the module's text, tagged
   ``helper-module``), so it writes the module next to itself. The page on the site is unchanged.
   This is done while the page is read: a notebook rewritten later is newer than the page, which
   its ``{nb-download}`` depends on, and Sphinx would read the page again on every build.

Upstream: 1-4 are not reported to MyST-NB or jupyter-cache yet (searched 2026-11); the reports we
would file are in README.md, "Private APIs".
"""

from __future__ import annotations

import functools
import hashlib
import re
from pathlib import Path

import jupyter_cache.executors.utils as execution
import nbclient
import nbformat
from jupyter_cache.cache.main import JupyterCacheBase
from myst_nb.core.execute.cache import NotebookClientCache
from site_context import execution_key
from sphinx.application import Sphinx

IMPORT = re.compile(r"^\s*(?:from|import)\s+([A-Za-z_]\w*)", re.M)


def local_modules(code: str, folder: Path) -> list[Path]:
    """The modules in ``folder`` that ``code`` imports."""
    modules = {folder / f"{name}.py" for name in IMPORT.findall(code)}
    return sorted(module for module in modules if module.is_file())


_original_start_client = NotebookClientCache.start_client
DOCS = Path(__file__).resolve().parents[1]


def kernel_setup_digest() -> str:
    """A digest of what every page's kernel starts with: IPython start-up, and the torch and
    Python versions and the figure style."""
    digest = hashlib.sha256(execution_key().encode())
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
        previous = joined[-1] if joined else {}
        if output.get("output_type") == previous.get("output_type") == "stream" and previous.get(
            "name"
        ) == output.get("name"):
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
    return sorted((DOCS / "_ipython").rglob("*.py"))


def _note_local_modules(app: Sphinx, docname: str, source: list[str]) -> None:
    folder = Path(app.env.doc2path(docname)).parent
    scripts = re.findall(r"^\s*(gallery/plot_\w+\.py)\s*$", source[0], re.M)  # its minigallery
    for path in [*local_modules(source[0], folder), *(Path(app.srcdir, s) for s in scripts)]:
        app.env.note_dependency(str(path))  # its thumbnails show the scripts' titles
    if "kernelspec:" in source[0].split("\n---", 1)[0]:  # a notebook page: it runs in a kernel
        for path in kernel_setup_files():
            app.env.note_dependency(str(path))


_truncate_caches = JupyterCacheBase.truncate_caches


def _prepare_cache(app: Sphinx) -> None:
    if app.config.nb_execution_mode == "cache":
        from jupyter_cache import get_cache

        # myst-nb's default place when nb_execution_cache_path is empty
        path = app.config.nb_execution_cache_path or Path(app.outdir).parent / ".jupyter_cache"
        cache = get_cache(path)  # creates the database
        _truncate_caches(cache)
        cache.db.dispose()
        timeout = app.config.nb_execution_timeout
        execution.executenb = functools.partial(_execute, startup_timeout=timeout)


def _execute(nb, **kwargs):
    """nbclient.execute, once more if the kernel died at start: another reader's kernel can bind
    a port picked as free first ("ZMQError: Address already in use"). No cell had run."""
    try:
        return nbclient.execute(nb, **kwargs)
    except RuntimeError as error:
        if "Kernel died before replying to kernel_info" not in str(error):
            raise
        return nbclient.execute(nb, **kwargs)


HELPER_TAG = "helper-module"


def carry_helper_modules(app: Sphinx, doctree) -> None:
    """Put the helper modules the page's executed notebook imports into it (``%%writefile``)."""
    docname = app.env.docname
    path = Path(app.outdir).parent / "jupyter_execute" / f"{docname}.ipynb"
    if "kernelspec" not in app.env.metadata[docname] or not path.is_file():
        return
    notebook = nbformat.read(path, as_version=4)
    cells = [c for c in notebook.cells if HELPER_TAG not in c.metadata.get("tags", [])]
    code = "\n".join(c.source for c in cells if c.cell_type == "code")
    helpers = [
        nbformat.v4.new_code_cell(
            f"%%writefile {module.name}\n{module.read_text()}",
            id=f"{HELPER_TAG}-{module.stem}",
            metadata={"tags": [HELPER_TAG], "jupyter": {"source_hidden": True}},
        )
        for module in local_modules(code, Path(app.env.doc2path(docname)).parent)
    ]
    if helpers:
        first = next((i for i, c in enumerate(cells) if c.cell_type == "code"), len(cells))
        notebook.cells = cells[:first] + helpers + cells[first:]
        nbformat.write(notebook, path)


def setup(app: Sphinx) -> dict:
    NotebookClientCache.start_client = _start_client_keeping_source
    JupyterCacheBase.truncate_caches = lambda self: None  # done once, by _prepare_cache
    app.connect("builder-inited", _prepare_cache)
    app.connect("source-read", _note_local_modules)
    app.connect("doctree-read", carry_helper_modules, priority=600)  # after nb_expectations
    return {"parallel_read_safe": True, "parallel_write_safe": True}
