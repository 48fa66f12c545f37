"""Mutation tests (slow tier): each outcome check fails on the wrong variants declared for it.

``tests/mutations/<file>.toml`` declares, for each ``checked`` block of a page or gallery script,
wrong variants of the fix it certifies (format: ``tests/mutations.py``). Each variant runs from the
top of its source down to the check, two at a time; it is *caught* only when the check's own
assertion stops it there, not when the code crashes first or an earlier cell fails. Each source
also runs once unmutated, which must pass. The count (caught/total) is printed at the end of the
test session.
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor

import mutations
import pytest

pytestmark = pytest.mark.slow
DECLARED = mutations.declared()


def label(mutation) -> str:
    return f"{mutation.source} | {mutation.check} | {mutation.name or '(unmutated)'}"


@pytest.fixture(scope="module")
def verdicts(request):
    chosen = [i.callspec.params["mutation"] for i in request.session.items
              if i.module is request.module and hasattr(i, "callspec")]  # fmt: skip
    with ThreadPoolExecutor(2) as pool:
        found = dict(zip(chosen, pool.map(lambda m: mutations.run(m, sys.executable), chosen)))
    wrong = [m for m in found if m.name]
    caught = sum(found[m][0] == "caught" for m in wrong)
    broken = sum(found[m][0] != "ran" for m in found if not m.name)
    lines = [f"{verdict:>7}  {label(m)}" for m, (verdict, _) in found.items()]
    request.config.mutation_summary = [
        *lines,
        f"caught {caught} of {len(wrong)} mutations in {len({m.source for m in found})} sources; "
        f"{broken} unmutated source(s) broken",
    ]
    return found


def test_mutations_are_declared():
    assert DECLARED, "no tests/mutations/*.toml: every outcome check needs its wrong variants"


@pytest.mark.parametrize("mutation", DECLARED, ids=label)
def test_each_wrong_variant_is_caught_by_its_check(verdicts, mutation):
    verdict, detail = verdicts[mutation]
    if not mutation.name:
        assert verdict == "ran", f"{mutation.source}, unmutated, does not run: {detail}"
    else:
        assert verdict == "caught", f"{label(mutation)}: {verdict}" + (
            f" ({detail})" if detail else " (ran to the end: the check did not fail)"
        )
