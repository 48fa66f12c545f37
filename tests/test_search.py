"""The site's search puts the right page first, for the queries readers type (issue 18).

The queries and the pages that answer them are in ``tests/search_queries.toml``. Each one runs on
the real search page of the built site, in Chromium (the page's own ``searchtools.js`` with the
site's ranking, ``docs/_static/search_scorer.js``): the share of queries whose first result is a
right page, the share with a right page within the first three, and, of the queries that name the
section holding the fix, the share with the right page first linked to that section, must each
reach its target (``measure/search_quality.py`` has the targets: what the search achieves since
the held-out sets of real reports joined the queries, rounded down). The same holds from a local
server and from the site opened from disk, with no request to another origin, and after an unchanged
rebuild and a one-page edit (Sphinx drops index entries from ``searchindex.js`` of pages it does not
write, sphinx-doc/sphinx#12599; ``docs/_ext/freshness.py`` carries them over). Those
builds are the second build that the reproducibility tests use (``second_build`` in conftest.py),
whose cold build gives the index entries to keep; its pages equal the main site's
(test_reproducible.py), so its ranking is the main site's, measured once. An unchanged rebuild whose
search files are byte for byte the cold build's ranks the same by construction; only if they differ
are the queries run on it.

A page added later fails here until it has search terms: an ``{index}`` line right after its H1
title (gallery scripts: an ``.. index::`` line in the docstring), and at least one query in
``tests/search_queries.toml`` that it answers (CONTRIBUTING.md, "A page"). A section is found, and
linked, by its heading and by an ``{index}`` line right under it.
"""

from __future__ import annotations

import json
from urllib.parse import quote, urlsplit

import pytest
from browser import serve
from conftest import EDIT_WORD, ROOT
from search_quality import (
    HELDOUT,
    QUERIES,
    RIGHT_FIRST_TARGET,
    SECTION_FIRST_TARGET,
    TOP,
    TOP_TARGET,
    docname_of,
    index_entries_by_page,
    load_queries,
    measure,
    report_lines,
    run_queries,
    search,
    search_index,
    site_docnames,
    split_queries,
    summary,
)

QUERIES_FILE = QUERIES.relative_to(ROOT)
MIN_QUERIES = 60
# What the search page runs: equal files give equal results.
SEARCH_FILES = [
    "searchindex.js",
    "search.html",
    "_static/searchtools.js",
    "_static/search_scorer.js",
    "_static/documentation_options.js",
    "_static/language_data.js",
]


def source_of(docname: str) -> str:
    """Where a built page's search terms go."""
    if docname == "auto_examples/index":
        return "gallery/README.rst (an `.. index::` line under the title)"
    if docname.startswith("auto_examples/"):
        name = docname.removeprefix("auto_examples/")
        return f"gallery/{name}.py (an `.. index::` line in the docstring, after the summary)"
    return f"{docname}.md (an {{index}} line right after the H1 title)"


def placed_entries(site) -> dict[str, set[tuple[str, str]]]:
    """docname -> its index entries in searchindex.js, each with the anchor it links to."""
    index = search_index(site)
    found: dict[str, set[tuple[str, str]]] = {name: set() for name in index["docnames"]}
    for entry, places in index["indexentries"].items():
        for file, anchor, _main in places:
            found[index["docnames"][file]].add((entry, anchor))
    return found


def pages_without_entries(site) -> list[str]:
    entries = index_entries_by_page(site)
    return sorted(name for name in site_docnames(site) if not entries.get(name))


def assert_targets(outcomes, label: str) -> None:
    figures = summary(outcomes)
    report = "\n".join(report_lines(outcomes))
    not_in_top = [o for o in outcomes if o.rank is None or o.rank > TOP]
    assert figures["top3"] >= TOP_TARGET, (
        f"{label}: {len(not_in_top)} queries have no right page within the first {TOP} results, "
        f"{1 - figures['top3']:.1%} (at most {1 - TOP_TARGET:.0%}: add the words readers type to "
        "the expected section's index line, or to a heading):\n"
        + "\n".join(o.describe() for o in not_in_top)
        + f"\n\n{report}"
    )
    assert figures["right_first"] >= RIGHT_FIRST_TARGET, (
        f"{label}: right page first for only {figures['right_first']:.1%} of the queries "
        f"(target {RIGHT_FIRST_TARGET:.0%}):\n{report}"
    )
    if figures["with_section"]:  # (a query file may name no section)
        assert figures["section_first"] >= SECTION_FIRST_TARGET, (
            f"{label}: right page first and linked to the section that holds the fix for only "
            f"{figures['section_first']:.1%} of the {figures['with_section']} queries naming one "
            f"(target {SECTION_FIRST_TARGET:.0%}; an `{{index}}` line under the section's heading "
            f"with the reader's words links its hits there):\n{report}"
        )


def watch_requests(page, allowed) -> list[str]:
    """Record console errors, page errors and requests that ``allowed(url)`` refuses (aborted)."""
    problems: list[str] = []
    page.on("console", lambda m: m.type == "error" and problems.append(f"console: {m.text}"))
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))

    def route(request_route):
        url = request_route.request.url
        if allowed(url) or url.startswith(("data:", "blob:")):
            return request_route.continue_()
        problems.append(f"request to another origin: {url}")
        return request_route.abort()

    page.route("**/*", route)
    return problems


# --- The query set and the pages (no browser needed) --------------------------------------------


def test_the_query_set_is_large_and_names_real_pages(site):
    queries = load_queries()
    assert len(queries) >= MIN_QUERIES, f"{QUERIES_FILE} has {len(queries)} queries"
    _, problems = split_queries(queries, site_docnames(site))
    assert not problems, (
        f"{QUERIES_FILE}: queries name pages that are not built "
        "(a typo, or a page removed?):\n" + "\n".join(problems)
    )


def test_every_page_answers_some_query(site):
    queries = load_queries()
    expected = {page for query in queries for page in query.pages}
    orphans = sorted(site_docnames(site) - expected)
    assert not orphans, (
        f"pages that no query in {QUERIES_FILE} expects: {orphans}. For each, add two or three "
        "[[query]] blocks with what a reader would type to find it (its error messages pasted in "
        "full, its API names, its situation in the reader's words) and its docname in `pages`."
    )


def test_every_page_has_index_entries(site):
    missing = pages_without_entries(site)
    assert not missing, "pages with no index entries in searchindex.js:\n" + "\n".join(
        f"  {name}: add search terms to {source_of(name)}" for name in missing
    )


def test_each_index_entry_links_to_the_section_holding_it(site):
    """To its section's heading (its anchor in searchindex.js), or "" for the page's top: the
    search counts a heading and the `{index}` line under it as one section (freshness.py)."""
    index = search_index(site)
    headings = {(file, anchor) for places in index["alltitles"].values() for file, anchor in places}
    elsewhere = sorted(
        f"{index['docnames'][file]}: {entry!r} -> #{anchor}"
        for entry, places in index["indexentries"].items()
        for file, anchor, _main in places
        if anchor and (file, anchor) not in headings
    )
    assert not elsewhere, "index entries not linked to a heading:\n" + "\n".join(elsewhere)


# --- The ranking, in the browser ----------------------------------------------------------------


@pytest.fixture(scope="module")
def served(site, browser):
    outcomes, problems = measure(site, browser=browser)
    assert not problems, problems
    return outcomes


def test_the_right_page_comes_first(served):
    print("\n".join(report_lines(served)))
    assert_targets(served, "search on the local server")


def test_each_page_is_listed_once(site, browser):
    """Sphinx's own search lists a page once per matching title, index entry and text; here a
    page is one result (linked to its best-matching section)."""
    page = browser.new_page()
    with serve(site) as base:
        page.goto(f"{base}/search.html?q={quote('retain_graph backward graph')}")
        page.wait_for_selector("#search-results p.search-summary:not(:empty)", timeout=20000)
        hrefs = page.eval_on_selector_all(
            "#search-results ul.search li > a", "els => els.map(e => e.href)"
        )
    page.close()
    names = [docname_of(href, f"{base}/search.html") for href in hrefs]
    assert len(names) >= 5, names
    assert len(names) == len(set(names)), f"pages listed more than once: {names}"


def test_searching_makes_no_request_to_another_origin(site, browser):
    """From the local server, with result summaries (each fetched from the site itself)."""
    page = browser.new_page()
    with serve(site) as base:
        problems = watch_requests(page, lambda url: urlsplit(url).netloc == urlsplit(base).netloc)
        page.goto(f"{base}/search.html?q={quote('Trying to backward through the graph')}")
        page.wait_for_selector("#search-results p.search-summary:not(:empty)", timeout=20000)
        page.wait_for_load_state("networkidle")
        summaries = page.locator("#search-results ul.search li p.context").count()
    page.close()
    assert summaries > 0, "no result summary was shown"
    assert not problems, problems


def test_search_from_disk_gives_the_same_results(site, browser, served):
    """Opened as files (file://): the same pages in the same order as from the server, no error
    (summaries, which would fetch each page, are off there) and no request that is not a file.
    Every third query of the set: what differs from disk is how the index loads, not a query's
    words, and the whole set would add a minute to the fast tier."""
    outcomes = served[::3]
    page = browser.new_page()
    problems = watch_requests(page, lambda url: url.startswith("file:"))
    from_disk = run_queries(
        page, (site / "search.html").as_uri(), [(o.query, o.expected) for o in outcomes]
    )
    page.close()
    different = [
        f"{disk.query.short()!r}: server {server.results[:3]}, disk {disk.results[:3]}"
        for disk, server in zip(from_disk, outcomes, strict=True)
        if disk.results != server.results
    ]
    assert not different, "from disk the results differ:\n" + "\n".join(different)
    assert not problems, problems


# --- After an unchanged rebuild and a one-page edit ---------------------------------------------

REBUILDS = ("unchanged rebuild", "one-page edit rebuild")


def same_search_files(one, other) -> bool:
    return all((one / f).read_bytes() == (other / f).read_bytes() for f in SEARCH_FILES)


@pytest.fixture(scope="module")
def builds(second_build, browser):
    """After each rebuild of the second build: the query set's outcomes (None: its search files
    are the cold build's, byte for byte), the index entries in searchindex.js and the pages
    without any; the cold build's entries; and what the edited page's new word finds."""
    cold, _ = second_build.builds["cold build"]
    results = {"cold entries": placed_entries(cold)}
    for kind in REBUILDS:
        site, _ = second_build.builds[kind]
        outcomes = None
        if kind != "unchanged rebuild" or not same_search_files(site, cold):
            outcomes, problems = measure(site, browser=browser)
            assert not problems, problems
        results[kind] = (outcomes, placed_entries(site), pages_without_entries(site))
    page = browser.new_page()
    with serve(site) as base:
        results["edited word"] = search(page, f"{base}/search.html", EDIT_WORD)
    page.close()
    return results


@pytest.mark.parametrize("kind", REBUILDS)
def test_every_rebuild_keeps_the_ranking(builds, served, kind):
    """Against the main site's ranking (``served``): the same lists after an unchanged rebuild,
    the same ranks of the right pages after a one-page edit; no index entry lost or linked to
    another section (pages not read again keep theirs)."""
    outcomes, entries, missing = builds[kind]
    assert not missing, f"{kind}: pages with no index entries in searchindex.js: {missing}"
    cold_entries = builds["cold entries"]
    lost = {
        name: sorted(cold_entries[name] - entries.get(name, set()))
        for name in cold_entries
        if cold_entries[name] - entries.get(name, set())
    }
    assert not lost, (
        f"{kind}: index entries lost or moved since the cold build (sphinx#12599): {lost}"
    )
    if outcomes is None:  # the cold build's search files, byte for byte: its ranking
        return
    assert_targets(outcomes, kind)
    main = {o.query.q: o for o in served}
    if kind == "unchanged rebuild":  # the same index: the same lists
        changed = [o.query.short() for o in outcomes if o.results != main[o.query.q].results]
    else:  # one more word on one page: the right pages keep their ranks
        changed = [o.query.short() for o in outcomes if o.rank != main[o.query.q].rank]
    assert not changed, f"{kind}: results differ from the main site's for {changed}"


def test_the_edited_page_is_indexed_again(builds, second_build):
    edited = second_build.page.with_suffix("").as_posix()
    found = builds["edited word"]
    assert found[:1] == [edited], f"{EDIT_WORD!r} should find {edited} first; found {found}"


# --- Scoring another query file (nox -s audit -- --queries FILE) --------------------------------


def test_the_audit_scores_a_given_query_file(site, browser, served, tmp_path):
    """The path `nox -s audit -- --queries FILE` takes, on three queries of the tests' own file
    (never on the held-out set): the same outcomes as the full run gives them."""
    chosen = served[:3]
    lines = [f"[[query]]\nq = {json.dumps(o.query.q)}\npages = {json.dumps(o.query.pages)}\n"
             for o in chosen]  # fmt: skip
    (tmp_path / "some.toml").write_text("\n".join(lines))
    outcomes, problems = measure(site, browser=browser, queries_path=tmp_path / "some.toml")
    assert not problems
    assert [o.results for o in outcomes] == [o.results for o in chosen]
    assert report_lines(outcomes)[0].startswith("search: right page first for ")


def test_the_held_out_queries_are_refused(monkeypatch):
    monkeypatch.delenv("HELDOUT_QUERIES", raising=False)
    held_out = sorted(HELDOUT.parent.glob("heldout_*.toml"))
    assert len(held_out) >= 2, held_out
    for held in held_out:
        with pytest.raises(SystemExit, match="held out"):
            load_queries(held)
