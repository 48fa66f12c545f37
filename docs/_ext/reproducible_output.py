"""Make every build of the same sources give the same output, whatever the previous build was,
while an edit rewrites only the pages it changes.

Why: an incremental build differed from a cold one in six ways, and two cold builds in two.
* Sphinx writes only the pages whose sources changed, so the other pages kept an old sidebar, old
  next/previous links or an old cross-reference text after a page was retitled or moved
  (sphinx-doc/sphinx#5506), and old links after the intersphinx inventories or the extensions
  changed. Every page is written again when what pages show of each other changed: any page's
  title, section headings, labels (a link to a moved or removed label must change or fail) or
  toctrees, or the files every page is made with (``conf.py``, ``docs/_ext``, templates, static
  files, inventories). Otherwise only the pages read (and their toctree parents) are written.
* The search index keeps a page's index entries only if the page was written in this build (its
  entries live in the environment, which Sphinx saves before writing; sphinx-doc/sphinx#12599):
  the entries of the pages not written are carried over from the previous ``searchindex.js``.
* sphinx-sitemap lists only the pages written (jdillard/sphinx-sitemap#13), in the order parallel
  writers finished: the sitemap is written here instead, every page, sorted.
* Sphinx never deletes the page of a document that is gone (a removed or renamed gallery script,
  a deleted page), nor its source copy, images and downloads, so the site kept publishing them.
  Its HTML is deleted, and ``_images``, ``_downloads`` and ``_sources`` are emptied: the toctree
  changed, so every page is written, which copies them again.
* sphinx-gallery zips the examples with each file's modification time; the zips are rewritten with
  a fixed timestamp.
* myst-nb copies its stylesheet only when the build finishes, so on a cold build the pages are
  written before it exists and Sphinx omits its ``?v=`` checksum; on a rebuild it adds it. The
  stylesheet is copied before pages are written instead.
The last one calls a private function of myst-nb (``add_global_html_resources``); the report we
would file is in README.md, "Private APIs".
"""

from __future__ import annotations

import hashlib
import json
import shutil
import zipfile
from html import escape
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx

EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip entry can carry
_read: set[str] = set()  # the documents read in this build (main process)
_old_entries: dict[str, list] = {}  # docname -> index entries in the previous searchindex.js


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


# --- Which pages to write --------------------------------------------------------------------


def _note_navigation(app: Sphinx, doctree: nodes.document) -> None:
    """What other pages show of this one: its section titles (the first is its title) with their
    anchors, its toctrees, and the targets other pages link to (labels). Kept in the environment,
    as Sphinx keeps a page's title."""
    sections = [(str(section[0]), section["ids"]) for section in doctree.findall(nodes.section)]
    toctrees = [repr(sorted(node.attributes.items())) for node in doctree.findall(addnodes.toctree)]
    targets = sorted(doctree.nameids.items())
    app.env.site_navigation[app.env.docname] = (sections, toctrees, targets)


def _merge_navigation(app: Sphinx, env, docnames, other) -> None:
    env.site_navigation.update((d, other.site_navigation.get(d)) for d in docnames)


def _before_reading(app: Sphinx, env, docnames: list[str]) -> None:
    if not hasattr(env, "site_navigation"):
        env.site_navigation = {}
    _read.clear()
    _read.update(docnames)


def site_files(app: Sphinx) -> list[Path]:
    """The files every page is made with: conf.py, and docs/_* (extensions, templates, static
    files, inventories, kernel start-up)."""
    files = Path(__file__).parents[1].glob("_*/**/*")
    files = [f for f in files if f.is_file() and "__pycache__" not in f.parts]
    return sorted([Path(app.confdir, "conf.py"), *files])


def _pages_to_write(app: Sphinx, env) -> list[str]:
    env.site_navigation = {d: env.site_navigation.get(d) for d in sorted(env.found_docs)}
    digest = hashlib.sha256(repr(sorted(env.site_navigation.items())).encode())
    for path in site_files(app):
        digest.update(path.as_posix().encode() + b"\0" + path.read_bytes())
    changed = digest.hexdigest() != getattr(env, "site_navigation_digest", None)
    env.site_navigation_digest = digest.hexdigest()
    return sorted(env.found_docs) if changed else []


# --- What lists every page: the search index's entries, the sitemap ---------------------------


def _read_index(path: Path) -> dict | None:
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8")
    return json.loads(text[text.index("(") + 1 : text.rindex(")")])


def _entries(index: dict) -> dict[str, list]:
    by_page: dict[str, list] = {}
    for entry, places in index["indexentries"].items():
        for file, anchor, main in places:
            by_page.setdefault(index["docnames"][file], []).append((entry, anchor, main))
    return by_page


def _remember_index_entries(app: Sphinx) -> None:
    old = _read_index(Path(app.outdir, "searchindex.js"))
    _old_entries.clear()
    _old_entries.update(_entries(old) if old else {})


def _complete_index_entries(app: Sphinx, exception: Exception | None) -> None:
    path = Path(app.outdir, "searchindex.js")
    index = _read_index(path)
    if exception is not None or index is None:
        return
    by_page, number = _entries(index), {name: i for i, name in enumerate(index["docnames"])}
    for docname, entries in _old_entries.items():
        if docname in number and docname not in by_page and docname not in _read:
            by_page[docname] = entries
    index["indexentries"] = {}
    for docname, entries in by_page.items():
        for entry, anchor, main in entries:
            index["indexentries"].setdefault(entry, []).append([number[docname], anchor, main])
    for places in index["indexentries"].values():
        places.sort()
    text = json.dumps(index, separators=(",", ":"), sort_keys=True)
    path.write_text(f"Search.setIndex({text})", encoding="utf-8")


def _write_sitemap(app: Sphinx, exception: Exception | None) -> None:
    if exception is None and app.builder.format == "html":
        pages = sorted(app.builder.get_target_uri(docname) for docname in app.env.found_docs)
        urls = "".join(
            f"<url><loc>{escape(app.config.html_baseurl + p)}</loc></url>" for p in pages
        )
        Path(app.outdir, "sitemap.xml").write_text(
            "<?xml version='1.0' encoding='utf-8'?>\n"
            f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>',
            encoding="utf-8",
        )


def _delete_removed_pages(app: Sphinx, env, added, changed, removed) -> list[str]:
    for docname in removed:
        Path(app.outdir, app.builder.get_target_uri(docname)).unlink(missing_ok=True)
    for folder in ("_images", "_downloads", "_sources") if removed else ():
        shutil.rmtree(Path(app.outdir, folder), ignore_errors=True)
    return []


def _copy_mystnb_css_early(app: Sphinx) -> None:
    from myst_nb.sphinx_ext import add_global_html_resources

    if app.builder.format == "html":
        Path(app.outdir, "_static").mkdir(parents=True, exist_ok=True)
        add_global_html_resources(app, None)


def setup(app: Sphinx) -> dict:
    app.connect("builder-inited", _copy_mystnb_css_early)
    app.connect("builder-inited", _remember_index_entries)
    app.connect("env-get-outdated", _delete_removed_pages)
    app.connect("env-before-read-docs", _before_reading)
    app.connect("doctree-read", _note_navigation)
    app.connect("env-merge-info", _merge_navigation)
    app.connect("env-get-updated", _pages_to_write)
    app.connect("build-finished", _complete_index_entries)
    app.connect("build-finished", _write_sitemap)
    app.connect("build-finished", _normalise_downloads)
    # env_version: what _note_navigation keeps changed, so every page is read again once.
    return {"parallel_read_safe": True, "parallel_write_safe": True, "env_version": 2}
