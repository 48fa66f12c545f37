"""The misconceptions ledger (docs/ledger.md) is complete and every verdict still holds.

The rows live in docs/ledger_claims.py. These tests need no built site: they import the rows and
run every proof again, so a torch that behaves differently fails here as well as in the build.
"""

from __future__ import annotations

import inspect
import re
import sys
import warnings
from collections import Counter

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "docs"))
import ledger_claims  # noqa: E402  (docs/ is on sys.path only from the line above)

ROWS = ledger_claims.CLAIMS
IDS = [row.id for row in ROWS]


def test_ids_are_unique_and_name_their_source():
    assert len(set(IDS)) == len(IDS), [i for i, n in Counter(IDS).items() if n > 1]
    for row in ROWS:
        assert re.fullmatch(r"\d{3}-\d+", row.id), row.id
        assert row.id.startswith(row.source + "-"), f"{row.id} is filed under {row.source}"


def test_every_source_has_at_least_three_rows():
    counts = Counter(row.source for row in ROWS)
    for source in ledger_claims.SOURCES:
        assert counts[source] >= 3, f"source {source} has only {counts[source]} row(s)"


def test_the_sources_are_the_shared_texts():
    assert set(ledger_claims.SOURCES) == {"000", "001", "002", "003"}


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_row_is_well_formed(row):
    assert row.source in ledger_claims.SOURCES, f"{row.id}: unknown source {row.source!r}"
    assert row.verdict in ledger_claims.VERDICTS, f"{row.id}: unknown verdict {row.verdict!r}"
    assert row.claim.strip() and row.finding.strip(), f"{row.id}: empty claim or finding"
    assert callable(row.proof), f"{row.id}: no proof"
    assert inspect.signature(row.proof).parameters == {}, f"{row.id}: proof takes arguments"
    assert "assert" in ledger_claims.proof_code(row), f"{row.id}: the proof asserts nothing"


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_row_links_to_a_page_that_exists(row):
    if row.page.startswith("/auto_examples/"):
        target = ROOT / "gallery" / (row.page.rsplit("/", 1)[1] + ".py")
    else:
        target = ROOT / "docs" / (row.page + ".md")
    assert target.is_file(), f"{row.id}: links to {row.page}, but {target} does not exist"


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_proof_still_holds(row):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a proof that warns would print stray text on the page
        evidence = row.proof()
    assert isinstance(evidence, str) and evidence.strip(), (
        f"{row.id}: the proof returned no evidence"
    )


def test_proofs_are_deterministic():
    assert ledger_claims.run_all() == ledger_claims.run_all()


def test_the_pages_are_listed_and_each_text_has_its_own():
    index = (ROOT / "index.md").read_text(encoding="utf-8")
    assert "docs/ledger\n" in index
    ledger = (ROOT / "docs" / "ledger.md").read_text(encoding="utf-8")
    assert "ledger.run_all()" in ledger  # the summary page runs every proof
    assert set(ledger_claims.SOURCE_PAGES) == set(ledger_claims.SOURCES)
    for source, name in ledger_claims.SOURCE_PAGES.items():
        assert f"\n{name}\n" in ledger, f"{name} is not in the ledger's toctree"
        page = (ROOT / "docs" / f"{name}.md").read_text(encoding="utf-8")
        assert f'ledger.run_source("{source}")' in page
        assert f'ledger.source_markdown("{source}", evidence)' in page
