"""Guarantees 3 and 4: deterministic, offline and cached.

A second, independent build (``second_build`` in conftest.py, shared with the search tests) runs
from a copy of the repository in another directory, cold (no caches) and with no network when the
machine allows it (CI requires it). Its pages must equal the main build's; then an unchanged
rebuild must execute nothing, and editing one page and one script must re-execute exactly those
two, and write the edited title into every page's sidebar.
"""

from __future__ import annotations

import os
import re
from datetime import date

from bs4 import BeautifulSoup
from conftest import ROOT
from site_audit import build_differences


def _executed(project, log: str) -> tuple[set[str], int]:
    """(MyST pages executed, number of gallery scripts executed) according to a build log."""
    pages = set(re.findall(re.escape(str(project)) + r"/(\S+)\.md: Executing notebook", log))
    match = re.search(r"successfully executed (\d+) out of", log)
    assert match, "sphinx-gallery's summary line is missing from the log"
    return pages, int(match.group(1))


def _pages(root):
    return {p.relative_to(root): p for p in root.rglob("*.html") if "_static" not in p.parts}


def test_two_builds_give_the_same_page_text(site, second_build):
    """Byte for byte. Figures of measured time come from gallery scripts, named by script and
    place, not by a hash of what was measured, so the pages showing them are identical too."""
    cold, _ = second_build.builds["cold build"]
    different = build_differences(site, cold)["pages"]
    assert not different, f"pages differ between two builds: {different}"


def test_two_builds_give_the_same_downloads(site, second_build):
    """Byte for byte: scripts, notebooks (executed ones included) and zips."""
    cold, _ = second_build.builds["cold build"]
    different = build_differences(site, cold)["downloads"]
    assert not different, f"downloads differ between two builds: {different}"
    # A page's own figures are named by a hash of their bytes, so equal names mean equal figures
    # (the gallery's are named by script and place). (Compared as referenced by pages: Sphinx never
    # deletes an image a page stopped using, so an incremental build's _images may hold old ones.)
    assert _referenced_images(site) == _referenced_images(cold)


IMAGE = re.compile(r'_images/([^"?#]+)')


def _referenced_images(root) -> set[str]:
    return {name for page in _pages(root).values() for name in IMAGE.findall(page.read_text())}


def test_pages_name_no_paths_or_dates_of_the_build_machine(site, second_build):
    forbidden = [
        str(ROOT),
        str(second_build.project),
        "/tmp/",
        "ipykernel_",
        os.path.expanduser("~") + "/",
        date.today().isoformat(),
        " at 0x",  # an object's repr with its memory address (end a drawing cell with ";")
    ]
    for path in [*site.rglob("*.html"), *site.rglob("*.ipynb"), *site.rglob("*.txt")]:
        text = path.read_text(encoding="utf-8", errors="replace")
        for needle in forbidden:
            assert needle not in text, f"{path.relative_to(site)} contains {needle!r}"


def test_an_unchanged_rebuild_executes_nothing(second_build):
    _, log = second_build.builds["unchanged rebuild"]
    pages, scripts = _executed(second_build.project, log)
    assert pages == set() and scripts == 0, f"re-executed pages {pages} and {scripts} scripts"


def test_editing_one_example_re_executes_only_it(second_build):
    html, log = second_build.builds["one-page edit rebuild"]
    page = second_build.page
    pages, scripts = _executed(second_build.project, log)
    assert pages == {str(page.with_suffix(""))}, pages
    assert scripts == 1
    assert "an edit" in (html / page.with_suffix(".html")).read_text()
    # The new title is in every page's sidebar, not only in the edited page's.
    sidebars = {
        rel: [
            a.get_text()
            for a in BeautifulSoup(path.read_text(), "html.parser").select(".sidebar-tree a")
        ]
        for rel, path in _pages(html).items()
    }
    shown = f"{second_build.title} (edited)".replace("`", "")  # the sidebar drops the markup
    stale = [str(rel) for rel, texts in sidebars.items() if shown not in texts]
    assert not stale, f"pages left with the old navigation after a title change: {stale}"
