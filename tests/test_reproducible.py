"""Guarantees 3 and 4: deterministic, offline and cached.

A second, independent build (``second_build`` in conftest.py, shared with the search tests) runs
from a copy of the repository in another directory, cold (no caches) and with no network when the
machine allows it (CI requires it). Its pages must equal the main build's; then an unchanged
rebuild must execute nothing, and editing one page and one script must re-execute exactly those
two, and write the edited titles into every page's sidebar and every minigallery.

A small project with the site's configuration (``small_site``) shows what a copy of the
repository cannot: a new torch re-executes every page and script, and a removed script leaves
nothing behind that breaks the next build.
"""

from __future__ import annotations

import os
import re
from datetime import date
from importlib.metadata import version

import pytest
from bs4 import BeautifulSoup
from conftest import BUILD_FILES, PAGE_HEADER, RETITLED, ROOT, copy_tree, run_build
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


def _thumbnail_titles(path) -> list[str]:
    page = BeautifulSoup(path.read_text(), "html.parser")
    return [div.get_text() for div in page.select(".sphx-glr-thumbnail-title")]


def test_a_retitled_script_shows_its_new_title_in_every_minigallery(second_build):
    """A page's minigallery shows each script's title: the pages listing the edited script are
    read again (not executed: they depend on the script), and show its new title."""
    html, _ = second_build.builds["one-page edit rebuild"]
    script = second_build.script.as_posix()
    listing = [
        page.relative_to(ROOT).with_suffix(".html")
        for page in [ROOT / "index.md", *sorted((ROOT / "docs").glob("*.md"))]
        if re.search(rf"^\s*{re.escape(script)}\s*$", page.read_text(), re.M)
    ]
    assert listing, f"no page lists {script} in its minigallery"
    new, old = f"{second_build.script_title} {RETITLED}", second_build.script_title
    assert old in _thumbnail_titles(second_build.builds["cold build"][0] / listing[0])
    stale = [str(page) for page in listing if new not in _thumbnail_titles(html / page)]
    assert not stale, f"minigalleries still showing the old title of {script}: {stale}"


# --- A small project: a new torch, a removed script --------------------------------------------

# A new patch release: the same minor version, so the torch documentation's URL and with it
# intersphinx_mapping (which alone would make Sphinx read every page again) stay the same.
NEW_TORCH = "{}.{}.99".format(*version("torch").split(".")[:2])
SCRIPT = '''"""
{title}
{underline}

A script of the small project.
"""

# %%
print("{name} ran")
'''


# A page whose label another page links to (by the title of the section it marks).
OTHER = "# Other\n\n(moved)=\n## First\n\nText.\n\n## Second\n\nText.\n"


def _script(name: str) -> str:
    title = f"The {name} script"
    return SCRIPT.format(title=title, underline="=" * len(title), name=name)


@pytest.fixture(scope="module")
def small_site(tmp_path_factory):
    """A page (importing a helper module) and two scripts built with the site's configuration:
    cold; then after a torch
    upgrade (the installed torch's metadata says NEW_TORCH: a ``torch-<version>.dist-info`` first
    on PYTHONPATH, and ``constraints.txt`` pins it, as after ``nox -s lock``); then after one
    script is removed; after a label moved; after the helper module changed. Returns the project
    and each build's (return code, log)."""
    tmp = tmp_path_factory.mktemp("small")
    project = copy_tree(tmp / "site", BUILD_FILES)
    (project / "index.md").write_text(
        "# Home\n\n```{toctree}\ndocs/page\ndocs/other\nauto_examples/index\n```\n"
    )
    (project / "docs" / "other.md").write_text(OTHER)
    (project / "docs" / "page.md").write_text(
        PAGE_HEADER + "# A page\n\nSee {ref}`moved`.\n\n"
        '```{code-cell} ipython3\nfrom helper import VALUE\n\nprint("the page ran", VALUE)\n```\n'
    )
    (project / "docs" / "helper.py").write_text('VALUE = "first"\n')
    (project / "gallery").mkdir()
    (project / "gallery" / "README.rst").write_text("Examples\n========\n\nTwo scripts.\n")
    for name in ("kept", "removed"):
        (project / "gallery" / f"plot_{name}.py").write_text(_script(name))
    builds = {}

    def build(kind: str, env=None) -> None:
        result = run_build(project, env=env)
        builds[kind] = (result.returncode, result.stdout + result.stderr)

    build("cold build")
    metadata = tmp / "new-torch" / f"torch-{NEW_TORCH}.dist-info" / "METADATA"
    metadata.parent.mkdir(parents=True)
    metadata.write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {NEW_TORCH}\n")
    constraints = project / "constraints.txt"
    constraints.write_text(
        re.sub(r"^torch==\S+", f"torch=={NEW_TORCH}", constraints.read_text(), flags=re.M)
    )
    path = os.pathsep.join(
        filter(None, [str(metadata.parent.parent), os.environ.get("PYTHONPATH")])
    )
    upgraded = {**os.environ, "PYTHONPATH": path}
    build("new torch", upgraded)
    (project / "gallery" / "plot_removed.py").unlink()
    build("script removed", upgraded)
    moved = OTHER.replace("(moved)=\n", "").replace("## Second", "(moved)=\n## Second")
    (project / "docs" / "other.md").write_text(moved)
    build("label moved", upgraded)
    (project / "docs" / "helper.py").write_text('VALUE = "second"\n')
    build("helper edited", upgraded)
    return project, builds


def test_a_new_torch_re_executes_every_page_and_script(small_site):
    project, builds = small_site
    for kind in ("cold build", "new torch"):
        code, log = builds[kind]
        assert code == 0, f"{kind} failed:\n{log[-5000:]}"
        assert _executed(project, log) == ({"docs/page"}, 2), f"{kind}: {_executed(project, log)}"
    # and each executed page and script names the torch that produced its outputs
    html = project / "_build" / "html"
    for page in (
        html / "docs" / "page.html",
        *sorted((html / "auto_examples").glob("plot_*.html")),
    ):
        stamp = BeautifulSoup(page.read_text(), "html.parser").select_one(".executed-with-torch")
        assert stamp is not None, f"{page.relative_to(html)} names no torch version"
        assert stamp.get_text() == f"torch {NEW_TORCH}", page


def test_a_removed_script_leaves_nothing_behind(small_site):
    """sphinx-gallery never deletes what it generated for a script; its orphan page failed the
    next build under -W ("document isn't included in any toctree")."""
    project, builds = small_site
    code, log = builds["script removed"]
    assert code == 0, f"the build after removing a script failed:\n{log[-5000:]}"
    assert _executed(project, log) == (set(), 0)
    left = [str(p) for p in (project / "auto_examples").rglob("*plot_removed*")]
    left += [str(p) for p in (project / "_build" / "html").rglob("*plot_removed*")]
    assert not left, f"files of the removed script are left: {left}"
    assert (project / "_build" / "html" / "auto_examples" / "plot_kept.html").is_file()


def test_a_moved_label_updates_the_pages_that_link_to_it(small_site):
    """Only the page that moved a label is read again, and no title changed; a page that links
    to the label (and is not its toctree parent, which Sphinx writes again anyway) is written
    again all the same, with its new section's title."""
    project, builds = small_site
    code, log = builds["label moved"]
    assert code == 0, f"the build after moving a label failed:\n{log[-5000:]}"
    page = (project / "_build" / "html" / "docs" / "page.html").read_text()
    link = BeautifulSoup(page, "html.parser").select_one('a[href="other.html#moved"]')
    assert link is not None and link.get_text() == "Second", link


def test_editing_a_helper_module_re_executes_the_pages_that_import_it(small_site):
    project, builds = small_site
    code, log = builds["helper edited"]
    assert code == 0, f"the build after editing docs/helper.py failed:\n{log[-5000:]}"
    assert _executed(project, log) == ({"docs/page"}, 0), _executed(project, log)
    page = (project / "_build" / "html" / "docs" / "page.html").read_text()
    assert "the page ran second" in page, "the page shows the helper's old value"
