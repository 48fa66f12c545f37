"""Figures of measured time, kept out of what must be identical between builds.

Why: a few cells time code and draw what they measured. The drawing is real and belongs on the
page, but it differs from run to run, and two builds must give identical page text and identical
download files. A code cell tagged ``varies-per-run``:

* has its figures written under a name from the page and the cell's place
  (``<page>-cell<i>-<j>.svg``), not from a hash of the image bytes as myst-nb does, so the page's
  HTML is the same whatever was measured;
* has its outputs replaced, in the executed notebook offered for download, by one line saying that
  the figure was measured on the build machine and is left out; running the cell draws the
  reader's own;
* may only draw: a printed or returned text output would put the measurement into the page text,
  and is reported as a warning (the build fails).
"""

from __future__ import annotations

from binascii import a2b_base64
from pathlib import Path

import nbformat
from myst_nb.core.render import NbElementRenderer
from sphinx.application import Sphinx
from sphinx.util import logging

TAG = "varies-per-run"
DOWNLOAD_NOTE = (
    "[Left out of this download: this cell draws times measured on the machine that built the "
    "site, which differ from run to run. Run the cell to draw your own.]"
)
logger = logging.getLogger(__name__)

_render_image = NbElementRenderer.render_image


def _tagged(metadata: dict) -> bool:
    return TAG in metadata.get("tags", [])


FORMATS = {"image/png": ("png", a2b_base64), "image/svg+xml": ("svg", str.encode)}


def _render_image_named_by_place(self: NbElementRenderer, data) -> list:
    image_nodes = _render_image(self, data)
    if not _tagged(data.cell_metadata) or data.mime_type not in FORMATS:
        return image_nodes
    docname = self.renderer.sphinx_env.docname.replace("/", "-")
    suffix, decode = FORMATS[data.mime_type]
    name = f"{docname}-cell{data.cell_index}-{data.output_index}.{suffix}"
    image_nodes[0]["uri"] = self.write_file([name], decode(data.content), overwrite=True)
    return image_nodes


def _leave_measurements_out_of_the_download(app: Sphinx, doctree) -> None:
    from nb_expectations import executed_notebook_path

    path: Path = executed_notebook_path(app, app.env.docname)
    if not path.exists():
        return
    notebook = nbformat.read(path, as_version=4)
    tagged = [cell for cell in notebook.cells if _tagged(cell.get("metadata", {}))]
    if not tagged:
        return
    lines = notebook.metadata.get("source_map", [])
    for cell in tagged:
        texts = [
            output
            for output in cell.get("outputs", [])
            if output.get("output_type") == "stream"
            or (
                output.get("output_type") in ("execute_result", "display_data")
                and not FORMATS.keys() & output.get("data", {}).keys()
            )
        ]
        if texts:
            index = notebook.cells.index(cell)
            logger.warning(
                "a cell tagged %r shows text; measured values would differ between builds, so "
                "draw them (or end the cell with ';' to drop a returned value)",
                TAG,
                location=(app.env.docname, lines[index] if index < len(lines) else None),
                type="varying_outputs",
            )
        cell.outputs = [nbformat.v4.new_output("display_data", data={"text/plain": DOWNLOAD_NOTE})]
    nbformat.write(notebook, path)


def setup(app: Sphinx) -> dict:
    NbElementRenderer.render_image = _render_image_named_by_place
    # after nb_expectations (priority 500) has checked the notebook as it was executed
    app.connect("doctree-read", _leave_measurements_out_of_the_download, priority=600)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
