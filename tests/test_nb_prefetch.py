"""The build executed every notebook page ahead of reading (docs/_ext/nb_prefetch.py): its log
names each page with the seconds it took, and reports no failure, so no reader had to execute a
page itself (a reader still would, and would report the failure with the page's name)."""

from __future__ import annotations

import re

from conftest import HTML, ROOT, myst_pages


def test_every_page_was_executed_ahead_of_reading(site):
    log = (HTML.parent / "nb_prefetch.log").read_text(encoding="utf-8")
    done = set(
        re.findall(
            r"^(\S+\.md): (?:Executing notebook ahead of reading in [\d.]+ s|found in the cache)",
            log,
            re.M,
        )
    )
    expected = {str(ROOT / page) for page in myst_pages()}
    assert expected <= done, f"not executed ahead: {sorted(expected - done)}\n{log}"
    assert "failed" not in log.lower(), log
