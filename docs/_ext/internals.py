"""The one door to myst-nb's and jupyter-cache's internals; refuses to load on other versions than
``VERSIONS``: re-check these four uses first (upstream reports: MAINTAINING.md).

1. ``NotebookClientCache.start_client`` wrapped: on a cache hit myst-nb renders the cached notebook
   (``_notebook``) but writes the output-less page as its download, so the outputs are copied in.
   Also: cell ids by position (nbformat's are random), stream chunks joined exactly
   (``nb_merge_streams`` adds line breaks), and helper modules' digests in the hashed metadata.
2. ``JupyterCacheBase.truncate_caches``, a no-op: parallel readers deleted each other's new records
   (``records_to_delete`` reads in two queries); the main process trims once, before they fork.
3. ``myst_nb.sphinx_ext.add_global_html_resources`` called first: myst-nb copies its stylesheet at
   the end, so a cold build's pages lacked the ``?v=`` a rebuild adds.
4. A page's executed notebook is ``_build/jupyter_execute/<doc>.ipynb``.
"""

from __future__ import annotations

import hashlib
from importlib.metadata import version
from pathlib import Path

from sphinx.errors import ExtensionError

VERSIONS = {"myst-nb": "1.4.0", "jupyter-cache": "1.0.1"}
if (found := {name: version(name) for name in VERSIONS}) != VERSIONS:
    raise ExtensionError(
        f"docs/_ext/internals.py was written for {VERSIONS}, but {found} is installed: re-check "
        "its four uses of their internals (its docstring), then update VERSIONS there."
    )

from freshness import local_modules  # noqa: E402
from jupyter_cache import get_cache  # noqa: E402
from jupyter_cache.cache.main import JupyterCacheBase  # noqa: E402
from myst_nb.core.execute.cache import NotebookClientCache  # noqa: E402
from myst_nb.sphinx_ext import add_global_html_resources  # noqa: E402

_start_client, _truncate_caches = NotebookClientCache.start_client, JupyterCacheBase.truncate_caches


def start_client(self: NotebookClientCache) -> None:
    page = self._notebook
    for index, cell in enumerate(page.cells):
        cell.id = f"cell-{index}"
    code = [cell for cell in page.cells if cell.cell_type == "code"]
    if code and self.path is not None:
        modules = local_modules("\n".join(cell.source for cell in code), Path(self.path).parent)
        if modules:
            code[0].metadata["local_modules"] = {
                m.name: hashlib.sha256(m.read_bytes()).hexdigest()[:16] for m in modules
            }
    _start_client(self)
    if self._notebook is not page:  # a cache hit
        cached = [cell for cell in self._notebook.cells if cell.cell_type == "code"]
        for cell, hit in zip(code, cached, strict=True):
            cell.outputs, cell.execution_count = hit.get("outputs", []), hit.get("execution_count")
        for key in set(self._notebook.metadata) & {"kernelspec", "language_info"}:
            page.metadata[key] = self._notebook.metadata[key]
        self._notebook = page
    for cell in code:
        cell.outputs = join_stream_chunks(cell.get("outputs", []))


def join_stream_chunks(outputs: list) -> list:
    """Join consecutive outputs of the same stream (stdout/stderr) into one, text unchanged."""
    joined: list = []
    for output in outputs:
        last = joined[-1] if joined else {}
        # only stream outputs have a name
        if output.get("output_type") == "stream" and last.get("name", 0) == output.get("name"):
            last["text"] += output["text"]
        else:
            joined.append(output)
    return joined


def prepare(app) -> None:
    cache = get_cache(app.config.nb_execution_cache_path)  # creates the database
    _truncate_caches(cache)
    cache.db.dispose()
    if app.builder.format == "html":
        Path(app.outdir, "_static").mkdir(parents=True, exist_ok=True)
        add_global_html_resources(app, None)


def executed_notebook(app, docname: str) -> Path:
    return Path(app.outdir).parent / "jupyter_execute" / f"{docname}.ipynb"


def setup(app) -> dict:
    NotebookClientCache.start_client = start_client
    JupyterCacheBase.truncate_caches = lambda self: None  # prepare trims, once
    app.connect("builder-inited", prepare, priority=450)  # after freshness may empty the cache
    return {"parallel_read_safe": True, "parallel_write_safe": True}
