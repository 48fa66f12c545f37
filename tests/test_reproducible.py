"""Guarantees 3 and 4: deterministic, offline and cached.

A second, independent build runs from a copy of the repository in another directory (cold: no
caches), with no network when the machine allows it. Its pages must equal the main build's; then
an unchanged rebuild must execute nothing, and editing one page and one script must re-execute
exactly those two.
"""

from __future__ import annotations

import os
import re
from datetime import date

import pytest
from bs4 import BeautifulSoup
from conftest import (
    HTML,
    IN_CI,
    ROOT,
    can_isolate_network,
    copy_tree,
    gallery_scripts,
    myst_pages,
    run_build,
)
from site_audit import build_differences


def _executed(project, log: str) -> tuple[set[str], int]:
    """(MyST pages executed, number of gallery scripts executed) according to a build log."""
    pages = set(re.findall(re.escape(str(project)) + r"/(\S+)\.md: Executing notebook", log))
    match = re.search(r"successfully executed (\d+) out of", log)
    assert match, "sphinx-gallery's summary line is missing from the log"
    return pages, int(match.group(1))


@pytest.fixture(scope="module")
def second_build(tmp_path_factory):
    offline = can_isolate_network()
    if IN_CI and not offline:
        pytest.fail(
            "CI must prove that the build works offline, but no network namespace can be made"
        )
    project = copy_tree(tmp_path_factory.mktemp("second") / "site")
    result = run_build(project, offline=offline)
    log = result.stdout + result.stderr
    assert result.returncode == 0, f"the independent build failed:\n{log[-5000:]}"
    return project, log


def test_built_offline():
    """The main build of this test run happened in a network namespace with only loopback."""
    if os.environ.get("SITE_BUILT_OFFLINE") != "1":
        if IN_CI:
            pytest.fail("on CI the site must be built offline (nox -s tests does it with unshare)")
        pytest.skip(
            "LOUD SKIP: this machine cannot build in a network namespace; offline not proven"
        )


def _pages(root):
    return {p.relative_to(root): p for p in root.rglob("*.html") if "_static" not in p.parts}


def test_two_builds_give_the_same_page_text(site, second_build):
    """Byte for byte. Figures of measured time come from gallery scripts, named by script and
    place, not by a hash of what was measured, so the pages showing them are identical too."""
    project, _ = second_build
    different = build_differences(site, project / "_build" / "html")["pages"]
    assert not different, f"pages differ between two builds: {different}"


def test_two_builds_give_the_same_downloads(site, second_build):
    """Byte for byte: scripts, notebooks (executed ones included) and zips."""
    project, _ = second_build
    root = project / "_build" / "html"
    different = build_differences(site, root)["downloads"]
    assert not different, f"downloads differ between two builds: {different}"
    # A page's own figures are named by a hash of their bytes, so equal names mean equal figures
    # (the gallery's are named by script and place). (Compared as referenced by pages: Sphinx never deletes an
    # image a page stopped using, so an incremental build's _images folder may hold old ones.)
    assert _referenced_images(site) == _referenced_images(root)


IMAGE = re.compile(r'_images/([^"?#]+)')


def _referenced_images(root) -> set[str]:
    return {name for page in _pages(root).values() for name in IMAGE.findall(page.read_text())}


def test_pages_name_no_paths_or_dates_of_the_build_machine(site, second_build):
    project, _ = second_build
    forbidden = [
        str(ROOT),
        str(project),
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
    project, _ = second_build
    result = run_build(project)
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-3000:]
    pages, scripts = _executed(project, log)
    assert pages == set() and scripts == 0, f"re-executed pages {pages} and {scripts} scripts"


def test_editing_one_example_re_executes_only_it(second_build):
    project, _ = second_build
    page = myst_pages()[-1].relative_to(ROOT)
    script = gallery_scripts()[0].relative_to(ROOT)
    text = (project / page).read_text()
    title = re.search(r"^# (.+)$", text, re.M).group(1)
    text = text.replace(f"# {title}", f"# {title} (edited)", 1)
    (project / page).write_text(text + '\n```{code-cell} ipython3\nprint("an edit")\n```\n')
    with open(project / script, "a") as f:
        f.write('\n# %%\n# An edit.\n\nprint("an edit")\n')
    result = run_build(project)
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-3000:]
    pages, scripts = _executed(project, log)
    assert pages == {str(page.with_suffix(""))}, pages
    assert scripts == 1
    assert "an edit" in (project / "_build" / "html" / page.with_suffix(".html")).read_text()
    # The new title is in every page's sidebar, not only in the edited page's.
    sidebars = {
        rel: [
            a.get_text()
            for a in BeautifulSoup(path.read_text(), "html.parser").select(".sidebar-tree a")
        ]
        for rel, path in _pages(project / "_build" / "html").items()
    }
    shown = f"{title} (edited)".replace("`", "")  # the sidebar shows the title without markup
    stale = [str(rel) for rel, texts in sidebars.items() if shown not in texts]
    assert not stale, f"pages left with the old navigation after a title change: {stale}"


def test_main_build_is_not_stale():
    """Sanity: the pages tested are those of the sources (every source page was built)."""
    for page in myst_pages():
        assert (HTML / page.relative_to(ROOT).with_suffix(".html")).exists(), page
    for script in gallery_scripts():
        assert (HTML / "auto_examples" / f"{script.stem}.html").exists(), script
