"""What is stale: the one rule for what a change executes, reads and writes again.

==========================  ===================  ==========================  ==================
what changed                executed again       read again                  written again
==========================  ===================  ==========================  ==================
a page                      that page            that page                   the pages read (1)
a helper module in docs/    pages importing it   the same                    the same (1)
a gallery script            that script          its page (2)                the same (1)
the execution key (3)       everything           every page                  every page
conf.py, docs/_*/**         nothing              nothing (4)                 every page
a page or script removed    nothing              nothing                     every page (5)
==========================  ===================  ==========================  ==================

(1) and every page if a title, heading, label or toctree changed. (2) and the pages listing it, if
its docstring changed. (3) torch, Python, docs/matplotlibrc, docs/_ipython; it empties both caches.
(4) every page if a setting's value changed. (5) its files are deleted. More: MAINTAINING.md.
"""

from __future__ import annotations

import ast
import hashlib
import json
import platform
import re
import shutil
from pathlib import Path

from docutils import nodes
from site_context import torch_version
from sphinx import addnodes

DOCS = Path(__file__).resolve().parents[1]
IMPORT = re.compile(r"^\s*(?:from|import)\s+([A-Za-z_]\w*)", re.M)
_read: list[str] = []  # the documents read in this build
_old_entries: dict[str, list] = {}  # docname -> index entries in the previous searchindex.js


def execution_key() -> str:
    setup = [DOCS / "matplotlibrc", *sorted((DOCS / "_ipython").rglob("*.py"))]
    digest = hashlib.sha256(b"".join(p.name.encode() + p.read_bytes() for p in setup))
    return f"torch {torch_version()}, Python {platform.python_version()}, {digest.hexdigest()[:12]}"


def local_modules(code: str, folder: Path) -> list[Path]:
    """The modules in ``folder`` that ``code`` imports, and those they import in turn."""
    found, texts = set(), [code]
    while texts:
        for name in IMPORT.findall(texts.pop()):
            if (module := folder / f"{name}.py").is_file() and module not in found:
                found.add(module)
                texts.append(module.read_text())
    return sorted(found)


def empty_stale_caches(app) -> None:
    """Before sphinx-gallery runs (it keeps what a removed script made; ``.md5`` files: its
    documented way to run a script again). Also the cards: what a minigallery shows of a script,
    its docstring, rewritten only when it changes, so a code edit reads no page listing it."""
    conf = app.config.sphinx_gallery_conf
    scripts, out = Path(app.srcdir, conf["examples_dirs"]), Path(app.srcdir, conf["gallery_dirs"])
    (cards := Path(app.doctreedir).parent / "gallery-cards").mkdir(parents=True, exist_ok=True)
    shown = {
        s.stem: ast.get_docstring(ast.parse(s.read_text())) or "" for s in scripts.glob("*.py")
    }
    for card in cards.iterdir():
        if card.stem not in shown or card.read_text() != shown[card.stem]:
            card.unlink()
    for stem, text in shown.items():
        if not (card := cards / f"{stem}.txt").is_file():
            card.write_text(text)
    out.mkdir(parents=True, exist_ok=True)
    ran = {s.name: hashlib.md5(s.read_bytes()).hexdigest() for s in scripts.glob("*.py")}
    for copy in out.glob("*.py"):  # sphinx-gallery's copy of each script it rendered (and .md5)
        if not (md5 := out / f"{copy.name}.md5").is_file() or md5.read_text() != ran.get(copy.name):
            made = re.compile(rf"({copy.stem}|sphx_glr_{copy.stem}_(\d+|thumb))\..+")  # removed,
            for path in [p for p in out.rglob("*") if made.fullmatch(p.name)]:  # or to run again
                path.unlink()  # (images it no longer draws must not become its thumbnail)
    if not (stamp := out / ".executed-with").is_file() or stamp.read_text() != execution_key():
        shutil.rmtree(app.config.nb_execution_cache_path, ignore_errors=True)
        for md5 in out.rglob("*.md5"):
            md5.unlink()
        stamp.write_text(execution_key())


def note_dependencies(app, docname: str, source: list[str]) -> None:
    """Helper modules the page imports; the cards of the scripts its minigallery lists."""
    cards = Path(app.doctreedir).parent / "gallery-cards"
    scripts = re.findall(r"^\s*gallery/(plot_\w+)\.py\s*$", source[0], re.M)
    modules = local_modules(source[0], Path(app.env.doc2path(docname)).parent)
    for path in [*modules, *(cards / f"{script}.txt" for script in scripts)]:
        app.env.note_dependency(str(path))


def note_navigation(app, doctree: nodes.document) -> None:
    """What other pages show of this one: section titles and anchors, toctrees, labels."""
    sections = [(str(section[0]), section["ids"]) for section in doctree.findall(nodes.section)]
    toctrees = [repr(sorted(node.attributes.items())) for node in doctree.findall(addnodes.toctree)]
    app.env.site_navigation[app.env.docname] = (sections, toctrees, sorted(doctree.nameids.items()))


def note_index_sections(app, doctree: nodes.document) -> None:
    """Which section each index entry's anchor (``index-N``) stands in: the id Sphinx gives that
    section's title in ``searchindex.js`` (its first id; "" for the page's top, whose title has
    none). ``complete_index_entries`` links each entry there, so the search counts a heading and
    the ``{index}`` line under it as one section and links both to the heading. Kept in the
    environment, so it holds for pages that are written again without being read."""
    title = next(doctree.findall(nodes.title), None)
    found = {}
    for node in doctree.findall(addnodes.index):
        section = node.parent
        while section is not None and not isinstance(section, nodes.section):
            section = section.parent
        top = section is None or section is getattr(title, "parent", None) or not section["ids"]
        for _type, _value, anchor, _main, _key in node["entries"]:
            found[anchor] = "" if top else section["ids"][0]
    app.env.site_index_sections[app.env.docname] = found


def note_section_parents(app, doctree: nodes.document) -> None:
    """Each subsection's enclosing section (first ids, as in ``searchindex.js``), for sections
    below a section of the page: the search then links a query that contains a section's
    heading (a pasted message) to the subsection holding the reader's situation."""
    title = next(doctree.findall(nodes.title), None)
    parents = {}
    for section in doctree.findall(nodes.section):
        up = section.parent
        while up is not None and not (isinstance(up, nodes.section) and up["ids"]):
            up = up.parent
        if section["ids"] and up is not None and up is not getattr(title, "parent", None):
            parents[section["ids"][0]] = up["ids"][0]
    app.env.site_section_parents[app.env.docname] = parents


def before_reading(app, env, docnames: list[str]) -> None:
    env.site_navigation = getattr(env, "site_navigation", {})
    env.site_index_sections = getattr(env, "site_index_sections", {})
    env.site_section_parents = getattr(env, "site_section_parents", {})
    _read[:] = docnames


def merge_info(app, env, docnames: list[str], other) -> None:  # from parallel readers
    env.site_navigation.update((d, other.site_navigation.get(d)) for d in docnames)
    env.site_index_sections.update((d, other.site_index_sections.get(d, {})) for d in docnames)
    env.site_section_parents.update((d, other.site_section_parents.get(d, {})) for d in docnames)


def pages_to_write(app, env) -> list[str]:
    env.site_navigation = {d: env.site_navigation.get(d) for d in sorted(env.found_docs)}
    env.site_index_sections = {d: env.site_index_sections.get(d, {}) for d in env.found_docs}
    env.site_section_parents = {d: env.site_section_parents.get(d, {}) for d in env.found_docs}
    digest = hashlib.sha256(repr(sorted(env.site_navigation.items())).encode())
    for path in [Path(app.confdir, "conf.py"), *sorted(DOCS.glob("_*/**/*"))]:
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(path.as_posix().encode() + b"\0" + path.read_bytes())
    changed = digest.hexdigest() != getattr(env, "site_navigation_digest", None)
    env.site_navigation_digest = digest.hexdigest()
    return sorted(env.found_docs) if changed else []


def delete_removed(app, env, added, changed, removed) -> list[str]:
    """Sphinx keeps what a removed document made; every page is written again (its toctree)."""
    for docname in removed:
        Path(app.outdir, app.builder.get_target_uri(docname)).unlink(missing_ok=True)
    for folder in ("_images", "_downloads", "_sources") if removed else ():
        shutil.rmtree(Path(app.outdir, folder), ignore_errors=True)
    return []


def index_entries(app) -> tuple[Path, dict, dict[str, list]]:  # searchindex.js, by page
    path, index, by_page = Path(app.outdir, "searchindex.js"), {}, {}
    if path.is_file():
        text = path.read_text(encoding="utf-8")
        index = json.loads(text[text.index("(") + 1 : text.rindex(")")])
    for entry, places in index.get("indexentries", {}).items():
        for file, anchor, main in places:
            by_page.setdefault(index["docnames"][file], []).append((entry, anchor, main))
    return path, index, by_page


def remember_index_entries(app) -> None:
    _old_entries.update(index_entries(app)[2])


def complete_index_entries(app, exception: Exception | None) -> None:
    path, index, by_page = index_entries(app)
    if exception is not None or not index:
        return
    number = {name: i for i, name in enumerate(index["docnames"])}
    for docname, kept in _old_entries.items():
        if docname in number and docname not in by_page and docname not in _read:
            by_page[docname] = kept
    entries: dict[str, list] = {}
    for docname, kept in by_page.items():
        section = getattr(app.env, "site_index_sections", {}).get(docname, {})
        for entry, anchor, main in kept:
            place = [number[docname], section.get(anchor, anchor), main]
            if place not in entries.setdefault(entry, []):
                entries[entry].append(place)
    index["indexentries"] = {entry: sorted(places) for entry, places in entries.items()}
    parents = getattr(app.env, "site_section_parents", {})
    index["sectionparents"] = {d: parents[d] for d in index["docnames"] if parents.get(d)}
    text = json.dumps(index, separators=(",", ":"), sort_keys=True)
    path.write_text(f"Search.setIndex({text})", encoding="utf-8")


def setup(app) -> dict:
    app.add_config_value("execution_key", execution_key(), "env")  # new: every page read again
    app.connect("builder-inited", empty_stale_caches, priority=400)  # sphinx-gallery runs at 500
    app.connect("builder-inited", remember_index_entries)
    app.connect("source-read", note_dependencies)
    app.connect("env-get-outdated", delete_removed)
    app.connect("env-before-read-docs", before_reading)
    app.connect("doctree-read", note_navigation)
    app.connect("doctree-read", note_index_sections)
    app.connect("doctree-read", note_section_parents)
    app.connect("env-merge-info", merge_info)
    app.connect("env-get-updated", pages_to_write)
    app.connect("build-finished", complete_index_entries)
    # env_version: what note_navigation, note_index_sections and note_section_parents keep
    # changed, so every page is read again once.
    return {"parallel_read_safe": True, "parallel_write_safe": True, "env_version": 5}
