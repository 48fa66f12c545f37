"""The misconceptions ledger is complete and proved by executed cells, and its overview counts it.

Each source text has a page (``PAGES``) with one section per claim: a label ``(ledger-000-5)=``,
a heading ``## 000-5: <claim>``, one verdict badge, and code cells that ran when the page was
built and ``assert`` the verdict. ``docs/ledger.md`` sums the verdicts up and lists every claim;
the build computes both from the sections (``docs/_ext/ledger_summary.py``). These tests read the
pages' Markdown with a parser of their own: they fail when a section lacks its badge or its
proof, and when the built overview's counts or claim tables disagree with the sections.
"""

from __future__ import annotations

import re
from collections import Counter

import ledger_summary  # docs/_ext
import pytest
from conftest import HTML, ROOT, soup

DOCS = ROOT / "docs"
PAGES = {
    "000": "ledger-explainer",
    "001": "ledger-forum-thread",
    "002": "ledger-retain-grad-article",
    "003": "ledger-neural-style-qa",
}
# verdict -> sphinx-design badge colour: the scale is defined once, by the extension (its parsing of
# the pages is not reused: these tests read the sections with a parser of their own)
VERDICTS = {verdict: colour for verdict, (colour, _) in ledger_summary.VERDICTS.items()}
LABEL = re.compile(r"^\(ledger-(\d{3}-\d+)\)=\n", re.M)
CELL = re.compile(r"^```\{code-cell\} ipython3\n(.*?)^```", re.M | re.S)
BADGE = re.compile(r"\{bdg-(\w+)\}`(\w+)`")


def sections(source):
    """(claim id, heading text, verdict, body) for every claim section of a text's page."""
    text = (DOCS / f"{PAGES[source]}.md").read_text(encoding="utf-8")
    parts = LABEL.split(text)
    found = []
    for claim_id, body in zip(parts[1::2], parts[2::2], strict=True):
        heading = re.match(rf"## {claim_id}: (.+)\n\n\{{bdg-(\w+)\}}`(\w+)`", body)
        assert heading, (
            f"{claim_id}: the label must be followed by '## {claim_id}: ...' and a badge"
        )
        title, colour, verdict = heading.groups()
        assert verdict in VERDICTS, f"{claim_id}: unknown verdict {verdict!r}"
        assert VERDICTS[verdict] == colour, (
            f"{claim_id}: {verdict} needs the {VERDICTS[verdict]} badge"
        )
        found.append((claim_id, title, verdict, body))
    return found


ALL = {source: sections(source) for source in PAGES}
COUNTS = {source: Counter(verdict for _, _, verdict, _ in rows) for source, rows in ALL.items()}


@pytest.mark.parametrize("source", PAGES)
def test_claim_ids_are_numbered_one_to_n(source):
    ids = [claim_id for claim_id, *_ in ALL[source]]
    assert ids == [f"{source}-{n}" for n in range(1, len(ids) + 1)], ids
    assert len(ids) >= 3


@pytest.mark.parametrize("source", PAGES)
def test_every_claim_is_proved_by_an_asserting_cell(source):
    for claim_id, _, _, body in ALL[source]:
        cells = CELL.findall(body)
        asserting = [
            c
            for c in cells
            if "raises-exception" not in c
            and re.search(r"^\s*(assert |with (watch|checked)\()", c, re.M)
        ]
        assert asserting, f"{claim_id}: no executed code cell with an assert"
        for cell in cells:
            assert "skip-execution" not in cell and "remove-cell" not in cell, (
                f"{claim_id}: a proof cell must run and be shown"
            )


@pytest.mark.parametrize("source", PAGES)
def test_every_claim_has_one_verdict_badge(source):
    for claim_id, _, _, body in ALL[source]:
        badges = [verdict for _, verdict in BADGE.findall(body) if verdict in VERDICTS]
        assert len(badges) == 1, f"{claim_id}: {len(badges)} verdict badges, one expected"


def _ledger():
    return (DOCS / "ledger.md").read_text(encoding="utf-8")


def _built_overview():
    return soup(HTML / "docs" / "ledger.html")


def test_the_built_summary_counts_the_sections(site):
    anchor = _built_overview().find(id="ledger-summary")
    section = anchor if anchor.name == "section" else anchor.find_parent("section")
    tables = section.select("table")
    assert tables, "the built ledger.html has no summary table"
    rows = {}
    for row in tables[0].select("tbody tr"):
        cells = [cell.get_text(" ", strip=True) for cell in row.select("td")]
        rows[cells[0]] = [int(cell) for cell in cells[1:]]
    for source in PAGES:
        expected = [COUNTS[source][v] for v in VERDICTS] + [len(ALL[source])]
        assert rows.get(source) == expected, f"row {source}: {rows.get(source)}, pages {expected}"
    totals = [sum(COUNTS[s][v] for s in PAGES) for v in VERDICTS]
    claims = sum(len(rows_) for rows_ in ALL.values())
    assert rows.get("all") == totals + [claims], rows.get("all")
    opening = " ".join(tables[0].find_previous("p").get_text(" ").split())
    assert f"{claims} technical claims" in opening, opening


def test_the_built_claim_tables_list_every_claim_with_its_verdict(site):
    listed = {}
    for row in _built_overview().select("table tbody tr"):
        link = row.select_one('a[href*="#ledger-"]')
        if link and len(row.select("td")) == 3:
            verdict, claim = (cell.get_text(" ", strip=True) for cell in row.select("td")[1:])
            listed[link["href"].split("#ledger-")[1]] = (verdict, " ".join(claim.split()))
    held = set()  # the claims that hold are linked by number in the line under each table
    for line in _built_overview().select("p"):
        if line.get_text(" ", strip=True).startswith("Hold"):
            held |= {a["href"].split("#ledger-")[1] for a in line.select('a[href*="#ledger-"]')}
    for source in PAGES:
        for claim_id, title, verdict, _ in ALL[source]:
            if verdict == "correct":
                assert claim_id in held and claim_id not in listed, f"{claim_id}: not in 'Hold'"
                continue
            assert claim_id in listed, f"the built ledger.html does not list {claim_id}"
            assert listed[claim_id][0] == verdict, f"{claim_id}: listed {listed[claim_id][0]}"
    assert len(listed) + len(held) == sum(len(rows) for rows in ALL.values()), sorted(listed)


def test_the_pages_are_listed():
    index = (ROOT / "index.md").read_text(encoding="utf-8")
    assert "docs/ledger\n" in index or "<docs/ledger>\n" in index
    for page in PAGES.values():
        listed = f"\n{page}\n" in _ledger() or f"<{page}>\n" in _ledger()
        assert listed, f"{page} is not in the ledger's toctree"
