"""List every page in sitemap.xml, whichever pages this build happened to write.

Why: sphinx-sitemap 2.9 collects the pages that are written during *this* build and writes
sitemap.xml from them alone. After an incremental build (the usual case: an unchanged rebuild writes
only the index, search and 404 pages) the sitemap lost every other page. Just before it writes the
file, the pages this build did not write are added, and the list is put in a fixed order (documents
sorted by name, then the extra pages), so full and incremental builds give the same sitemap. The
order matters too: with parallel writers (``-j``) sphinx-sitemap lists pages in the order the
writer processes happened to finish, so two clean builds gave different files.

Upstream: jdillard/sphinx-sitemap#13 (open since 2018; #100 is a duplicate). Reproduction with
sphinx-sitemap 2.9.0: a project with ``html_baseurl`` set and two pages; ``sphinx-build -b html .
out``, then touch one page and build again: ``out/sitemap.xml`` lists only that page. Deployed
builds start clean, so they are complete without this; local and CI rebuilds are not.
"""

from __future__ import annotations

import queue

from sphinx.application import Sphinx


def _complete_sitemap(app: Sphinx, exception: Exception | None) -> None:
    links = getattr(app.env.app, "sitemap_links", None)
    if exception is not None or links is None or app.builder.format != "html":
        return
    from sphinx_sitemap import is_excluded

    written: list[tuple[str, str | None]] = []
    while True:
        try:
            written.append(links.get_nowait())
        except queue.Empty:
            break
    suffix = app.config.html_file_suffix or ".html"
    documents = sorted(
        docname + suffix
        for docname in app.env.found_docs
        if not is_excluded(docname + suffix, app.config.sitemap_excludes)
    )
    seen = set(documents)
    for link in documents:
        links.put((link, None))
    for link, last_updated in written:
        if link not in seen:
            seen.add(link)
            links.put((link, last_updated))


def setup(app: Sphinx) -> dict:
    app.setup_extension("sphinx_sitemap")
    app.connect("build-finished", _complete_sitemap, priority=400)  # sphinx-sitemap writes at 500
    return {"parallel_read_safe": True, "parallel_write_safe": True}
