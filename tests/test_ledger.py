"""The misconceptions ledger is complete, counted right, and proved by executed cells.

Each source text has a page (``PAGES``) with one section per claim: a label ``(ledger-000-5)=``,
a heading ``## 000-5: <claim>``, a verdict badge, and code cells that ran when the page was built
and ``assert`` the verdict. ``docs/ledger.md`` sums the verdicts up and lists every claim. These
tests read the pages' Markdown (no build needed): they recount the verdicts and fail when the
summary, the claims table, the overview's opening sentence, a page's own stated counts or any
page's ``html_meta`` description disagree with the sections.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest
from conftest import ROOT

DOCS = ROOT / "docs"
PAGES = {
    "000": "ledger-explainer",
    "001": "ledger-forum-thread",
    "002": "ledger-retain-grad-article",
    "003": "ledger-neural-style-qa",
}
VERDICTS = {  # verdict -> sphinx-design badge colour (the scale in docs/ledger.md)
    "correct": "success",
    "incomplete": "info",
    "misleading": "warning",
    "outdated": "secondary",
    "wrong": "danger",
}
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


def intro(source):
    text = (DOCS / f"{PAGES[source]}.md").read_text(encoding="utf-8")
    return LABEL.split(text)[0]


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
            c for c in cells if "raises-exception" not in c and re.search(r"^\s*assert ", c, re.M)
        ]
        assert asserting, f"{claim_id}: no executed code cell with an assert"
        for cell in cells:
            assert "skip-execution" not in cell and "remove-cell" not in cell, (
                f"{claim_id}: a proof cell must run and be shown"
            )


@pytest.mark.parametrize("source", PAGES)
def test_the_page_states_its_own_counts(source):
    opening = intro(source)
    total = re.search(r"\*\*(\d+) technical claims\*\*", opening)
    assert total and int(total.group(1)) == len(ALL[source]), (
        f"{PAGES[source]}: says {total and total.group(1)} claims, has {len(ALL[source])}"
    )
    stated = {
        verdict: int(n) for n, _, verdict in re.findall(r"(\d+) \{bdg-(\w+)\}`(\w+)`", opening)
    }
    assert stated == {v: n for v, n in COUNTS[source].items() if n}, (
        f"{PAGES[source]}: the opening states {stated}, the sections give {dict(COUNTS[source])}"
    )


def _ledger():
    return (DOCS / "ledger.md").read_text(encoding="utf-8")


def test_the_summary_table_matches_the_pages():
    for source, page in PAGES.items():
        row = re.search(rf"^\| \{{doc}}`{source} <{page}>` \|(.*)\|\s*$", _ledger(), re.M)
        assert row, f"ledger.md has no summary row for {source}"
        numbers = [int(cell.strip().strip("*")) for cell in row.group(1).split("|")]
        expected = [COUNTS[source][v] for v in VERDICTS] + [len(ALL[source])]
        assert numbers == expected, f"ledger.md, row {source}: {numbers}, the page gives {expected}"
    row = re.search(r"^\| \*\*all\*\* \|(.*)\|\s*$", _ledger(), re.M)
    assert row, "ledger.md has no row of totals"
    numbers = [int(cell.strip().strip("*")) for cell in row.group(1).split("|")]
    totals = [sum(COUNTS[s][v] for s in PAGES) for v in VERDICTS]
    assert numbers == totals + [sum(len(rows) for rows in ALL.values())], numbers


# How the opening of docs/ledger.md words each verdict's count ("28 hold, 10 are true but ...").
PROSE = {
    "correct": "hold",
    "incomplete": "are true but incomplete",
    "misleading": "are misleading",
    "outdated": "describe an older PyTorch",
    "wrong": "are wrong",
}


def test_the_ledger_opening_states_the_counts():
    opening = " ".join(_ledger().split("## Summary")[0].split())
    total = re.search(r"\*\*(\d+) technical claims\*\*", opening)
    assert total, "ledger.md's opening does not state '**N technical claims**'"
    assert int(total.group(1)) == sum(len(rows) for rows in ALL.values()), (
        f"ledger.md's opening says {total.group(1)} claims"
    )
    for verdict, words in PROSE.items():
        stated = re.search(rf"(\d+) {words}\b", opening)
        expected = sum(COUNTS[s][verdict] for s in PAGES)
        assert stated and int(stated.group(1)) == expected, (
            f"ledger.md's opening: '{stated and stated.group(0)}', the pages give {expected} {words}"
        )


def _description(path):
    found = re.search(r'^\s+description: "(.*)"\s*$', path.read_text(encoding="utf-8"), re.M)
    assert found, f"{path.name} has no html_meta description"
    return found.group(1)


def test_the_meta_descriptions_state_the_counts():
    total = sum(len(rows) for rows in ALL.values())
    overview = _description(DOCS / "ledger.md")
    assert f"({total} in all)" in overview, f"ledger.md's description: {overview!r}, total {total}"
    assert [int(n) for n in re.findall(r"\d+", overview)] == [total], overview
    for source, page in PAGES.items():
        described, claims = _description(DOCS / f"{page}.md"), len(ALL[source])
        assert f"All {claims} technical claims" in described, f"{page}: {described!r}, {claims}"
        numbers = [int(n) for n in re.findall(r"\d+", described)]
        assert numbers == [claims], f"{page}'s description states {numbers}, the page has {claims}"
        if "most are wrong" in described:
            assert 2 * COUNTS[source]["wrong"] > claims, f"{page}: 'most are wrong' no longer holds"


def test_the_claims_table_lists_every_claim_with_its_verdict():
    listed = re.findall(
        r"^\| \{ref\}`(\d{3})‑(\d+) <ledger-(\d{3}-\d+)>` \| \{bdg-\w+\}`(\w+)` \| (.+) \|\s*$",
        _ledger(),
        re.M,
    )
    rows = {label: (f"{a}-{b}", verdict, title) for a, b, label, verdict, title in listed}
    expected = {cid: (cid, verdict, title) for s in PAGES for cid, title, verdict, _ in ALL[s]}
    assert set(rows) == set(expected), set(rows) ^ set(expected)
    for label, row in rows.items():
        assert row == expected[label], f"ledger.md lists {row}, the page has {expected[label]}"


def test_the_pages_are_listed():
    index = (ROOT / "index.md").read_text(encoding="utf-8")
    assert "docs/ledger\n" in index
    for page in PAGES.values():
        assert f"\n{page}\n" in _ledger(), f"{page} is not in the ledger's toctree"
