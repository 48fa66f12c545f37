"""How well the site's search answers what readers type: the query set, run on the real search page.

``tests/search_queries.toml`` lists the queries and the pages that answer each one. This module
runs them on ``search.html`` of a built site, in Chromium, exactly as a reader would (the page's own
``searchtools.js`` and scorer), and measures the share of queries whose first result is a right
page, the share with a right page within the first three, and the mean reciprocal rank (MRR: the
mean of 1/rank of the first right page, 0 when none is listed).

Section level: a query may name the section that holds its fix (``section``: the label, as in
``(label)=``). Each result links to one place on its page (``page.html#anchor``); the link is in
the right section when the anchor's element lies inside the labelled section (or is it), as the
built HTML nests them. Two figures: the right page first *and* linked to the right section (the
reader's first click lands on the fix), and, of the queries whose right page is listed, the share
whose link goes to the right section.

Two file formats are read: the tests' (``q``, ``pages``, optional ``section``) and that of the
collected query sets (``text``, ``page``, ``label``, plus ``source`` and ``why``, which are not
used). ``tests/test_search.py`` asserts the targets; ``nox -s audit`` prints the figures, for this
query set or another file (``--queries FILE``, either format).

``measure/heldout_*.toml`` are held-out sets of real queries: ``heldout_queries.toml`` (set 12,
scored, then joined to the tuning set), ``_13`` and ``_14`` (each scored once, then joined),
``_15`` (each scored once, then joined), ``_16`` (scored once after the change that joined
``_15``). None
is run against the search until the lead releases it
(``HELDOUT_QUERIES=run``), so that the ranking is never tuned on it. Every entry point here refuses
a ``measure/heldout_*`` file before that.

    python measure/search_quality.py [--site _build/html] [--file] [--verbose] [--queries FILE]

A page renamed since a query file was written is scored under its new name (``RENAMED``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

ROOT = Path(__file__).resolve().parents[1]
QUERIES = ROOT / "tests" / "search_queries.toml"
HELDOUT = ROOT / "measure" / "heldout_queries.toml"
# The targets are what the search achieves, rounded down. Since held-out sets 16 and 17 (88 real
# reports, 66.7 % and 57.5 % right first when each was scored once) joined the queries on
# 2026-12-07, with index entries in their words at six sections (logged values and meters, no_grad
# in a loss, deepcopy of a module holding a graph, MAML's clone, autocast's cached casts,
# autograd.grad writing no .grad): 73.9 % right first of 1197, 87.8 % in the first three, MRR
# 0.819, 52.4 % page and section (the two sets joining alone: 73.4 %, 87.2 %, 0.815, 51.5 %;
# before them, 74.3 %, 87.9 %, 0.822 and 51.2 % on 1109). The first target fell from 0.75 to
# 0.74 and now 0.73 because harder queries joined, not because a query was dropped. Raise them
# with the figures; never drop queries.
RIGHT_FIRST_TARGET = 0.73  # share of queries whose first result is a right page
TOP = 3  # a right page among this many first results ...
TOP_TARGET = 0.87  # ... for this share of the queries
# Of the queries that name a section: the right page first and linked to that section (29.5 %
# before section-level links).
SECTION_FIRST_TARGET = 0.50
# Built pages that are not content (nothing to find on them).
NOT_CONTENT = {"search", "genindex", "404", "py-modindex"}
# Pages merged or renamed since query files were written (old docname -> the page holding it now).
RENAMED = {
    "auto_examples/plot_lstm_tbptt": "auto_examples/plot_truncated_bptt",
    "auto_examples/plot_several_losses_time": "auto_examples/plot_multitask_losses",
}


@dataclass
class Query:
    q: str
    pages: list[str]
    section: str = ""  # the label of the section holding the fix ("": not named)

    def short(self, width: int = 70) -> str:
        text = " ".join(self.q.split())
        return text if len(text) <= width else text[: width - 1] + "…"


@dataclass
class Outcome:
    query: Query
    expected: list[str]  # the expected pages that exist in the site searched
    results: list[str] = field(default_factory=list)  # docnames, in the order shown, each once
    anchors: list[str] = field(default_factory=list)  # the anchor each result links to ("": top)
    # whether the first right page's link lies in the query's section (None: no section named)
    in_section: bool | None = None

    @property
    def rank(self) -> int | None:
        for position, docname in enumerate(self.results, start=1):
            if docname in self.expected:
                return position
        return None

    @property
    def link(self) -> str:
        """The first right page's link (``docs/x#anchor``), or ""."""
        if self.rank is None:
            return ""
        anchor = self.anchors[self.rank - 1]
        return self.results[self.rank - 1] + (f"#{anchor}" if anchor else "")

    def describe(self) -> str:
        shown = ", ".join(f"{i}. {d}" for i, d in enumerate(self.results[:5], start=1)) or "nothing"
        where = f"rank {self.rank}" if self.rank else "not listed"
        expected = " or ".join(self.expected)
        section = ""
        if self.in_section is not None:
            mark = "right section" if self.in_section else "WRONG SECTION"
            section = f" [{mark}: wants #{self.query.section}, links {self.link or '-'}]"
        return f"{self.query.short()!r}: expected {expected} ({where}){section}; got {shown}"


def load_queries(path: Path = QUERIES) -> list[Query]:
    held = Path(path).resolve()
    if (
        held.parent == HELDOUT.parent.resolve()
        and held.name.startswith("heldout_")
        and os.environ.get("HELDOUT_QUERIES") != "run"
    ):
        raise SystemExit(
            f"{held.relative_to(ROOT)} is held out: it is not run against the search until the "
            "lead releases it (then HELDOUT_QUERIES=run)."
        )
    data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    queries = []
    for entry in data["query"]:
        if "text" in entry:  # a collected set: text, page, label (source, why)
            query = Query(entry["text"], [entry["page"]], entry.get("label", ""))
        else:
            query = Query(entry["q"], list(entry["pages"]), entry.get("section", ""))
        query.pages = [RENAMED.get(p, p) for p in query.pages]
        queries.append(query)
    return queries


def site_docnames(site: Path) -> set[str]:
    """The content pages of a built site, as docnames (``docs/errors``, ``auto_examples/index``)."""
    return {
        p.relative_to(site).with_suffix("").as_posix()
        for p in site.rglob("*.html")
        if "_static" not in p.parts
        and "_sources" not in p.parts
        and p.relative_to(site).with_suffix("").as_posix() not in NOT_CONTENT
    }


def split_queries(
    queries: list[Query], existing: set[str]
) -> tuple[list[tuple[Query, list[str]]], list[str]]:
    """(queries to run with their existing expected pages, problems: a query naming a page that
    is not built)."""
    runnable, problems = [], []
    for query in queries:
        unknown = [p for p in query.pages if p not in existing]
        if unknown:
            problems.append(f"{query.short()!r} names pages that are not built: {unknown}")
        expected = [p for p in query.pages if p in existing]
        if expected:
            runnable.append((query, expected))
    return runnable, problems


def docname_of(href: str, base: str) -> str:
    """The docname a search result links to (``docs/errors.html#x`` -> ``docs/errors``)."""
    path = unquote(urlsplit(href).path)
    base_path = unquote(urlsplit(base).path).rsplit("/", 1)[0] + "/"
    if path.startswith(base_path):
        path = path[len(base_path) :]
    path = path.lstrip("/")
    if path.endswith(".html"):
        path = path[: -len(".html")]
    return path.removesuffix("/index") if path.endswith("/index/") else path


def search_index(site: Path) -> dict:
    """The data of a built site's ``searchindex.js`` (``Search.setIndex({...})``)."""
    text = (site / "searchindex.js").read_text(encoding="utf-8")
    return json.loads(text[text.index("(") + 1 : text.rindex(")")])


def index_entries_by_page(site: Path) -> dict[str, set[str]]:
    """docname -> the index entries ``searchindex.js`` lists for that page."""
    index = search_index(site)
    found: dict[str, set[str]] = {name: set() for name in index["docnames"]}
    for entry, places in index["indexentries"].items():
        for file, *_ in places:
            found[index["docnames"][file]].add(entry)
    return found


class Sections:
    """Where each id of a built page lies: the ``<section>`` elements around it (itself included
    when it is one), read from the HTML as built (one pass over its tags, per page, cached)."""

    TAG = re.compile(r"<(/?)(section)\b[^>]*>|\bid=\"([^\"]+)\"")

    def __init__(self, site: Path):
        self.site = site
        self.pages: dict[str, dict[str, tuple[str, ...]]] = {}

    def of(self, docname: str) -> dict[str, tuple[str, ...]]:
        """id -> the ids of the sections that hold it, outermost first; "" -> the page's top."""
        if docname not in self.pages:
            html = (self.site / f"{docname}.html").read_text(encoding="utf-8")
            start = html.find('<article role="main"')  # the page's content, not its navigation
            html = html[max(start, 0) :]
            places: dict[str, tuple[str, ...]] = {}
            stack: list[str] = []
            for match in self.TAG.finditer(html):
                closing, section, ident = match.groups()
                if section and closing:
                    stack and stack.pop()
                elif section:
                    found = re.search(r'\bid="([^"]+)"', match.group(0))
                    stack.append(found.group(1) if found else "")
                    if found:
                        places.setdefault(found.group(1), tuple(stack))
                elif ident:
                    places.setdefault(ident, tuple(stack))
            top = next((ids[:1] for ids in places.values() if ids), ())
            places[""] = top
            self.pages[docname] = places
        return self.pages[docname]

    def exists(self, docname: str, label: str) -> bool:
        return label in self.of(docname)

    def holds(self, docname: str, label: str, anchor: str) -> bool:
        """Whether a link to ``anchor`` on the page lands in the section ``label`` names (the
        section that is the label, or the one the label's element lies in)."""
        places = self.of(docname)
        if label not in places or anchor not in places or not places[label]:
            return False
        return places[label][-1] in places[anchor]


SEARCH_DONE = """() => {
    const status = document.querySelector('#search-results p.search-summary');
    return status !== null && status.innerText.trim().length > 0;
}"""


def search(page, search_url: str, query: str) -> list[str]:
    """Type-free search: open the search page with ``?q=``, wait until it reports that it finished,
    and return the docnames of the results in the order shown, each page once."""
    page.goto(f"{search_url}?q={quote(query)}", wait_until="load")
    page.wait_for_function(SEARCH_DONE, timeout=20000)
    hrefs = page.eval_on_selector_all(
        "#search-results ul.search li > a", "els => els.map(e => e.href)"
    )
    seen: list[str] = []
    for href in hrefs:
        docname = docname_of(href, search_url)
        if docname not in seen:
            seen.append(docname)
    return seen


def without_summaries(page) -> None:
    """Make the search page list results without their summaries: each summary fetches and parses
    a whole page, which is most of the time a query takes; the ranking is the same."""

    def patch(route):
        response = route.fetch()
        body = response.text().replace("SHOW_SEARCH_SUMMARY: true", "SHOW_SEARCH_SUMMARY: false")
        route.fulfill(response=response, body=body)

    page.route("**/_static/documentation_options.js*", patch)


# One query on the loaded search page, by the page's own code: what loading ``search.html?q=...``
# runs (Search.performSearch), without loading the page again. Returns the result links in order.
QUERY_IN_PAGE = """async (query) => {
    const out = document.getElementById('search-results');
    out.innerHTML = '';
    Search.performSearch(query);
    await new Promise((resolve, reject) => {
        const started = Date.now();
        const check = () => {
            const status = out.querySelector('p.search-summary');
            if (status !== null && status.innerText.trim().length > 0) resolve();
            else if (Date.now() - started > 20000) reject(new Error('no search summary'));
            else setTimeout(check, 5);
        };
        check();
    });
    return [...out.querySelectorAll('ul.search li > a')].map(a => a.href);
}"""


def run_queries(page, search_url: str, runnable, sections: Sections | None = None) -> list[Outcome]:
    """Load the search page once (its index, its scorer), then run each query there as loading
    ``search.html?q=`` would (``Search.performSearch``); each result page listed once, with the
    anchor of its first link. With ``sections`` (the searched site's), queries that name a
    section are scored at section level too."""
    if search_url.startswith("http"):
        without_summaries(page)
    page.goto(search_url, wait_until="load")
    page.wait_for_function("() => Search.hasIndex()", timeout=20000)
    outcomes = []
    for query, expected in runnable:
        seen: list[str] = []
        anchors: list[str] = []
        for href in page.evaluate(QUERY_IN_PAGE, query.q):
            docname = docname_of(href, search_url)
            if docname not in seen:
                seen.append(docname)
                anchors.append(unquote(urlsplit(href).fragment))
        outcome = Outcome(query, expected, seen, anchors)
        if sections is not None and query.section:
            rank = outcome.rank
            outcome.in_section = rank is not None and sections.holds(
                seen[rank - 1], query.section, anchors[rank - 1]
            )
        outcomes.append(outcome)
    return outcomes


def summary(outcomes: list[Outcome]) -> dict[str, float]:
    n = len(outcomes)
    ranks = [o.rank for o in outcomes]
    named = [o for o in outcomes if o.in_section is not None]
    listed = [o for o in named if o.rank is not None]
    return {
        "queries": n,
        "right_first": sum(r == 1 for r in ranks) / n if n else 0.0,
        "top3": sum(r is not None and r <= TOP for r in ranks) / n if n else 0.0,
        "mrr": sum(1 / r for r in ranks if r) / n if n else 0.0,
        "with_section": len(named),
        # right page first, linked to the section holding the fix
        "section_first": sum(o.rank == 1 and o.in_section for o in named) / len(named)
        if named
        else 0.0,
        # of the queries whose right page is listed: its link goes to the right section
        "section_linked": sum(bool(o.in_section) for o in listed) / len(listed) if listed else 0.0,
    }


def report_lines(outcomes: list[Outcome], verbose: bool = False) -> list[str]:
    figures = summary(outcomes)
    lines = [
        f"search: right page first for {figures['right_first']:.1%} of {figures['queries']} "
        f"queries (target >= {RIGHT_FIRST_TARGET:.0%}); mean reciprocal rank {figures['mrr']:.3f}; "
        f"within the first {TOP}: {figures['top3']:.1%} (target >= {TOP_TARGET:.0%})"
    ]
    if figures["with_section"]:
        lines.append(
            f"sections ({figures['with_section']} queries name one): right page first and linked "
            f"to the right section {figures['section_first']:.1%} (target >= "
            f"{SECTION_FIRST_TARGET:.0%}); right section linked, of the "
            f"right pages listed: {figures['section_linked']:.1%}"
        )
    for outcome in outcomes:
        if verbose or outcome.rank != 1 or outcome.in_section is False:
            mark = "ok  " if outcome.rank == 1 and outcome.in_section is not False else "MISS"
            lines.append(f"  {mark} {outcome.describe()}")
    return lines


def measure(site: Path, *, browser=None, from_disk: bool = False, queries_path: Path = QUERIES):
    """Run the query set on a built site, from a local server (or from disk: ``file://``), in the
    given Playwright browser or a new headless Chromium; return (outcomes, problems with the
    query file)."""
    from browser import chromium, serve

    runnable, problems = split_queries(load_queries(queries_path), site_docnames(site))
    sections = Sections(site)
    for query, expected in runnable:
        if query.section and not any(sections.exists(p, query.section) for p in expected):
            problems.append(
                f"{query.short()!r}: no section #{query.section} on {' or '.join(expected)} "
                "(scored as a wrong section)"
            )
    with contextlib.ExitStack() as stack:
        if browser is None:
            browser = stack.enter_context(chromium())
        page = browser.new_page()
        stack.callback(page.close)
        if from_disk:
            url = (site / "search.html").as_uri()
        else:
            url = f"{stack.enter_context(serve(site))}/search.html"
        outcomes = run_queries(page, url, runnable, sections)
    return outcomes, problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, default=ROOT / "_build" / "html")
    parser.add_argument("--file", action="store_true", help="open the site from disk (file://)")
    parser.add_argument("--verbose", action="store_true", help="list every query, not only misses")
    parser.add_argument("--queries", type=Path, default=QUERIES, help="a query file to score")
    args = parser.parse_args()
    outcomes, problems = measure(
        args.site.resolve(), from_disk=args.file, queries_path=args.queries
    )
    print("\n".join(report_lines(outcomes, verbose=args.verbose)))
    for problem in problems:
        print(f"  problem: {problem}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
