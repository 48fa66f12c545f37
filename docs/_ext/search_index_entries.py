"""Keep every page's index entries in ``searchindex.js``, whatever kind of rebuild made it.

The site's search (``docs/_static/search_scorer.js``) ranks pages by the words readers type, and
the strongest of those are each page's index entries (the ``{index}`` line after its title). Sphinx
loses them on incremental builds (sphinx-doc/sphinx#12599, open in the pinned 9.0.4): it collects a
page's entries only while *writing* the page, into the build environment, but it saved that
environment to disk *before* writing. The next build starts from the saved copy, so a rebuild that
writes no page dumps a search index with no entries at all, and one that writes a single page keeps
only that page's.

This extension records each page's entries when the page is *read* (the environment is saved after
reading, so they survive), and hands the complete set to the search indexer right before it dumps
``searchindex.js``, on every build. The entries are computed exactly as Sphinx's indexer computes
them (``sphinx.search.IndexBuilder.feed``). ``tests/test_search.py`` checks a cold build, an
unchanged rebuild and a one-page edit.
"""

from __future__ import annotations

from sphinx import addnodes
from sphinx.util.index_entries import split_index_msg

ENV_KEY = "site_search_index_entries"


def page_entries(doctree) -> list[tuple[str, str, str]]:
    """(entry, target id, main) for every index entry of a page, as Sphinx's indexer lists them."""
    found: set[tuple[str, str, str]] = set()
    for node in doctree.findall(addnodes.index):
        for entry_type, value, target_id, main, _category_key in node["entries"]:
            try:
                parts = split_index_msg(entry_type, value)
            except ValueError:
                continue
            target_id = target_id or ""
            if entry_type in {"see", "seealso"}:
                found.add((parts[0], target_id, main))
            found |= {(part, target_id, main) for part in parts}
    return sorted(found)


def _recorded(env) -> dict[str, list[tuple[str, str, str]]]:
    if not hasattr(env, ENV_KEY):
        setattr(env, ENV_KEY, {})
    return getattr(env, ENV_KEY)


def record(app, doctree) -> None:
    _recorded(app.env)[app.env.docname] = page_entries(doctree)


def purge(app, env, docname) -> None:
    _recorded(env).pop(docname, None)


def merge(app, env, docnames, other) -> None:
    theirs = _recorded(other)
    _recorded(env).update({name: theirs[name] for name in docnames if name in theirs})


def restore_before_dump(app) -> None:
    """Wrap the HTML builder's dump of the search index so that it first puts back every page's
    entries (only pages the index lists: those with a title)."""
    builder = app.builder
    if not hasattr(builder, "dump_search_index"):
        return
    original = builder.dump_search_index

    def dump_search_index() -> None:
        indexer = builder.indexer
        if indexer is not None:
            recorded = _recorded(app.env)
            entries = indexer._index_entries
            entries.clear()
            listed = set(indexer._titles) & set(app.env.all_docs) & set(recorded)
            entries.update({name: recorded[name] for name in sorted(listed)})
        original()

    builder.dump_search_index = dump_search_index


def setup(app):
    app.connect("doctree-read", record)
    app.connect("env-purge-doc", purge)
    app.connect("env-merge-info", merge)
    app.connect("builder-inited", restore_before_dump)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
