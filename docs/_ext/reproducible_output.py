"""Make every build of the same sources give the same output, whatever the previous build was.

Why: an incremental build differed from a cold one in four ways, and two cold builds in two.
* Sphinx writes only the pages whose sources changed, so the other pages kept an old sidebar after
  a page was retitled or moved (sphinx-doc/sphinx#5506), the search index lost the index entries of
  the pages not written (sphinx-doc/sphinx#12599), and sphinx-sitemap listed only the pages written
  (jdillard/sphinx-sitemap#13). Every build writes every page (``env-get-updated``; writing is a
  few seconds, nothing is re-executed), which fixes all three.
* With parallel writers, sphinx-sitemap lists pages in the order the writers finished: it is
  sorted before it is written.
* sphinx-gallery zips the examples with each file's modification time; the zips are rewritten with
  a fixed timestamp.
* myst-nb copies its stylesheet only when the build finishes, so on a cold build the pages are
  written before it exists and Sphinx omits its ``?v=`` checksum; on a rebuild it adds it. The
  stylesheet is copied before pages are written instead.
The last three use private names (sphinx-sitemap's ``sitemap_links``, myst-nb's
``add_global_html_resources``) and are not reported upstream yet (searched 2026-11).
"""

from __future__ import annotations

import queue
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


def _sort_sitemap(app: Sphinx, exception: Exception | None) -> None:
    links = getattr(app.env.app, "sitemap_links", None)  # sphinx-sitemap's queue of written pages
    if exception is None and links is not None:
        written = []
        while True:
            try:
                written.append(links.get_nowait())
            except queue.Empty:
                break
        for link in sorted(written, key=lambda item: item[0]):
            links.put(link)


def _copy_mystnb_css_early(app: Sphinx) -> None:
    from myst_nb.sphinx_ext import add_global_html_resources

    if app.builder.format == "html":
        Path(app.outdir, "_static").mkdir(parents=True, exist_ok=True)
        add_global_html_resources(app, None)


def setup(app: Sphinx) -> dict:
    app.setup_extension("sphinx_sitemap")
    app.connect("builder-inited", _copy_mystnb_css_early)
    app.connect("env-get-updated", lambda app, env: sorted(env.found_docs))
    app.connect("build-finished", _sort_sitemap, priority=400)  # sphinx-sitemap writes at 500
    app.connect("build-finished", _normalise_downloads)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
