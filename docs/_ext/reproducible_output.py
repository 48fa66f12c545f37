"""Make two builds of the same sources give byte-identical output.

Why: two things differed between a cold build and a rebuild.
* sphinx-gallery zips the examples with each file's modification time; the zips are rewritten with
  a fixed timestamp.
* myst-nb copies its stylesheet only when the build finishes, so on a cold build the pages are
  written before it exists and Sphinx omits its ``?v=`` checksum; on a rebuild it adds it. The
  stylesheet is copied before pages are written instead.

Upstream reproductions (both with the pinned versions):
* sphinx-gallery 0.22.1: build a gallery twice from two copies of the same sources made at
  different times: ``auto_examples/auto_examples_python.zip`` differs (``zipfile.ZipInfo`` of each
  entry carries the source file's modification time).
* myst-nb 1.4.0: in a fresh project with one notebook page, ``sphinx-build -b html . out`` writes
  ``<link href="_static/mystnb.<hash>.css">`` without ``?v=``; a second, unchanged build adds
  ``?v=<checksum>``, because the stylesheet is copied in ``build-finished``.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from sphinx.application import Sphinx

EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip entry can carry


def normalise(path: Path) -> None:
    with zipfile.ZipFile(path) as archive:
        entries = sorted((info.filename, archive.read(info)) for info in archive.infolist())
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in entries:
            info = zipfile.ZipInfo(name, date_time=EPOCH)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)


def _normalise_downloads(app: Sphinx, exception: Exception | None) -> None:
    if exception is None and app.builder.format == "html":
        for path in sorted(Path(app.outdir, "_downloads").rglob("*.zip")):
            normalise(path)


def _copy_mystnb_css_early(app: Sphinx) -> None:
    from myst_nb.sphinx_ext import add_global_html_resources

    if app.builder.format == "html":
        Path(app.outdir, "_static").mkdir(parents=True, exist_ok=True)
        add_global_html_resources(app, None)


def setup(app: Sphinx) -> dict:
    app.connect("builder-inited", _copy_mystnb_css_early)
    app.connect("build-finished", _normalise_downloads)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
