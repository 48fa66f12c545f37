"""Per-page context for the templates: where a page's source lives, and which torch ran it.

Why: sphinx-gallery pages are generated rst, so the theme's "view/edit source" links would point at
files that are not in the repository; they must point at ``gallery/*.py``. And every page states the
torch version its outputs were executed with, read from the installed ``torch`` (never typed); the
execution caches are keyed on it (``execution_key``). It also writes ``robots.txt``, which must
name the sitemap at the same public URL.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
from importlib.metadata import version
from pathlib import Path
from urllib.parse import urlparse

from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)

# The one canonical host. GitHub Pages builds every push to main (reusing the execution caches);
# Read the Docs builds the same pages as a mirror, and its pages name these as canonical too
# (``<link rel="canonical">``, ``og:url``, the sitemap and robots.txt), so search engines index one
# copy. $SITE_URL overrides it for a fork that publishes elsewhere.
DEFAULT_SITE_URL = (
    "https://retain-graph-explained.github.io/retain-graph-explained/"  # project site
)
ROOT = Path(__file__).resolve().parents[2]


def site_url(path_only: bool = False) -> str:
    """The site's canonical URL ($SITE_URL, else the default), on every host, Read the Docs included.

    ``path_only=True`` gives instead the path this build is served from, which the 404 page's
    links start with: on Read the Docs the path of its own URL (such as ``/en/latest/``), since
    the 404 page must link within the host that serves it."""
    url = os.environ.get("SITE_URL") or DEFAULT_SITE_URL
    if path_only:
        url = os.environ.get("READTHEDOCS_CANONICAL_URL") or url
    url = url if url.endswith("/") else url + "/"
    return urlparse(url).path if path_only else url


def write_robots_txt(folder: Path) -> Path:
    """Write ``folder/robots.txt``: crawl everything, and here is the sitemap; return ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    text = f"User-agent: *\nAllow: /\n\nSitemap: {site_url()}sitemap.xml\n"
    path = folder / "robots.txt"
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return folder


def source_path(pagename: str, suffix: str | None) -> str | None:
    """The repository path of the file a page is built from (gallery pages map to gallery/*.py)."""
    if pagename == "auto_examples/index":
        return "gallery/README.rst"
    if pagename.startswith("auto_examples/"):
        return f"gallery/{pagename.removeprefix('auto_examples/')}.py"
    return None if suffix is None else pagename + suffix


def torch_version() -> str:
    """The installed torch's version (e.g. ``2.13.0+cpu``), read from its metadata: importing
    torch only for this would cost an unchanged rebuild about 2 s."""
    return version("torch")


def execution_key() -> str:
    """What every output depends on besides the code: the torch and Python versions, and the
    figure style (``docs/matplotlibrc``, read by page kernels and gallery scripts alike; the
    gallery's cache looks at each script alone). Both execution caches (pages and gallery) are
    keyed on it, so a change re-executes everything, and the stamp on each page names the torch
    that produced its outputs."""
    style = hashlib.sha256((ROOT / "docs" / "matplotlibrc").read_bytes()).hexdigest()[:12]
    return f"torch {torch_version()}, Python {platform.python_version()}, style {style}"


def _check_torch(app: Sphinx) -> None:
    pinned = re.search(r"^torch==(\S+)", (ROOT / "constraints.txt").read_text(), re.M)
    if pinned and torch_version().split("+")[0] != pinned.group(1):
        logger.warning(
            "conf.py: the site is being built with torch %s, but constraints.txt pins torch==%s; "
            "every output would describe the wrong version. Build with `nox -s docs`.",
            torch_version(),
            pinned.group(1),
            type="site",
        )


def _page_context(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    context["torch_version"] = torch_version()
    context["python_version"] = platform.python_version()
    context["source_path"] = source_path(pagename, context.get("page_source_suffix"))


def setup(app: Sphinx) -> dict:
    # A new key makes Sphinx read every page again (rebuild="env"), and so execute it again.
    app.add_config_value("execution_key", execution_key(), "env")
    app.connect("builder-inited", _check_torch)
    app.connect("html-page-context", _page_context)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
