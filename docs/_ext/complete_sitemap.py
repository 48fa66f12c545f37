"""List every page in sitemap.xml, in a fixed order, on every build.

Why: sphinx-sitemap lists only the pages written by the current build, so an incremental build
(one page changed) would publish a sitemap with one page in it; and it lists them in the order they
were written, which differs between builds. Before it writes the file, the pages it did not see
are added, and the list is sorted.
"""

from __future__ import annotations

import queue

from sphinx.application import Sphinx


def _complete(app: Sphinx, exception: Exception | None) -> None:
    links_queue = getattr(app.env.app, "sitemap_links", None)
    if exception is not None or links_queue is None or app.builder.format != "html":
        return
    links: dict[str, str | None] = {}
    while True:
        try:
            link, last_updated = links_queue.get_nowait()
        except queue.Empty:
            break
        links[link] = last_updated
    for docname in app.env.found_docs:
        links.setdefault(docname + app.builder.out_suffix, None)
    excluded = set(app.config.sitemap_excludes)
    for link in sorted(links):
        if link not in excluded:
            links_queue.put((link, links[link]))


def setup(app: Sphinx) -> dict:
    app.connect("build-finished", _complete, priority=400)  # before sphinx-sitemap writes (500)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
