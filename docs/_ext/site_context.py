"""The site around the pages: canonical URL (GitHub Pages; ``$SITE_URL`` for a fork), the
sitemap and robots.txt (sphinx-sitemap listed only the pages written), download zips with a fixed
time, and a clean start for each gallery script (style, warnings as errors; state restored after).
"""

from __future__ import annotations

import os
import warnings
import zipfile
from html import escape
from importlib.metadata import version
from pathlib import Path
from urllib.parse import urlparse

from sphinx_gallery.scrapers import matplotlib_scraper

DEFAULT_SITE_URL = "https://retain-graph-explained.github.io/retain-graph-explained/"
ROOT = Path(__file__).resolve().parents[2]
STYLE = ROOT / "docs" / "matplotlibrc"
EPOCH, NO_DATE = (1980, 1, 1, 0, 0, 0), {"Date": None}  # the earliest time a zip entry can carry


def site_url(path_only: bool = False) -> str:
    """The canonical URL; or, with ``path_only``, the path this build is served from (the 404
    page's links must stay on the host that serves it: on Read the Docs, ``/en/latest/``)."""
    url = os.environ.get("SITE_URL") or DEFAULT_SITE_URL
    if path_only:
        url = os.environ.get("READTHEDOCS_CANONICAL_URL") or url
    url = url if url.endswith("/") else url + "/"
    return urlparse(url).path if path_only else url


def torch_version() -> str:
    """From torch's metadata: importing torch would cost every rebuild 2 s."""
    return version("torch")


def write_listings(app, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    pages = sorted(app.builder.get_target_uri(docname) for docname in app.env.found_docs)
    base = app.config.html_baseurl
    urls = "".join(f"<url><loc>{escape(base + page)}</loc></url>" for page in pages)
    xmlns = "http://www.sitemaps.org/schemas/sitemap/0.9"
    sitemap = f"<?xml version='1.0' encoding='utf-8'?>\n<urlset xmlns=\"{xmlns}\">{urls}</urlset>"
    Path(app.outdir, "sitemap.xml").write_text(sitemap, encoding="utf-8")
    robots = f"User-agent: *\nAllow: /\n\nSitemap: {base}sitemap.xml\n"
    Path(app.outdir, "robots.txt").write_text(robots, encoding="utf-8")
    for path in sorted(Path(app.outdir, "_downloads").rglob("*.zip")):
        normalise(path)


def normalise(path: Path) -> None:
    with zipfile.ZipFile(path) as archive:
        files = sorted((info.filename, archive.read(info)) for info in archive.infolist())
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files:
            info = zipfile.ZipInfo(name, date_time=EPOCH)
            info.external_attr = 0o644 << 16
            archive.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED)


_saved: dict = {}


def reset_before_example(gallery_conf: dict, fname: str, when: str) -> None:
    import matplotlib
    import matplotlib.pyplot as plt
    import torch

    plt.close("all")
    if when == "before":
        matplotlib.rc_file(STYLE)  # matplotlib's defaults, then the site's style
        _saved.update(filters=warnings.filters[:], threads=torch.get_num_threads())
        warnings.simplefilter("error")
        # matplotlib warns when placing a legend at loc="best" took long: on a busy build machine
        # that depends on the load, not on the script, so it must not fail the build.
        warnings.filterwarnings("ignore", message="Creating legend with loc=")
    else:
        warnings.filters[:] = _saved["filters"]
        torch.set_num_threads(_saved["threads"])
        torch.set_grad_enabled(True)


class SVGFigures:
    """SVG figures without a date; a class in a module, so that the configuration pickles."""

    def __repr__(self) -> str:
        return "SVGFigures"

    def __call__(self, block, block_vars, gallery_conf):
        return matplotlib_scraper(block, block_vars, gallery_conf, format="svg", metadata=NO_DATE)


def setup(app) -> dict:
    app.connect("build-finished", write_listings)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
