"""One outcome check: every gallery script that checks a fix carries ``checked`` exactly as
``docs/outcome.py`` defines it (CONTRIBUTING.md, "An outcome check").

A gallery download must run alone with torch, numpy and matplotlib, so a script cannot import
``docs/outcome.py``: it copies the lines from the ``# --- checked`` marker comment through
``# --- end of checked``. A script that defines ``checked`` must hold that block once, line for
line; the message names the script and the first line that differs.
"""

from __future__ import annotations

import pytest
from conftest import ROOT, gallery_scripts

CORE = ROOT / "docs" / "outcome.py"
START, END = "# --- checked", "# --- end of checked"


def block(path) -> tuple[int, list[str]]:
    """(first line number, the lines) of the marked block of ``path``; (0, []) if it has none."""
    lines = path.read_text(encoding="utf-8").splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(START)]
    ends = [i for i, line in enumerate(lines) if line.rstrip() == END]
    assert len(starts) <= 1 and len(ends) <= 1, (
        f"{path.relative_to(ROOT)}: {len(starts)} '{START}' and {len(ends)} '{END}' lines; one each"
    )
    if not starts:
        return 0, []
    assert ends and ends[0] > starts[0], f"{path.relative_to(ROOT)}: no '{END}' after '{START}'"
    return starts[0] + 1, lines[starts[0] : ends[0] + 1]


def test_the_core_is_marked():
    start, lines = block(CORE)
    assert start and any(line.startswith("def checked(") for line in lines), (
        f"docs/outcome.py must define checked between '{START}' and '{END}'"
    )


CHECKING = [s for s in gallery_scripts() if "def checked(" in s.read_text(encoding="utf-8")]


@pytest.mark.parametrize("script", CHECKING, ids=lambda p: p.name)
def test_the_gallery_copy_of_checked_is_the_core(script):
    core_start, core = block(CORE)
    start, copy = block(script)
    name = f"gallery/{script.name}"
    assert copy, (
        f"{name} defines checked but has no '{START}' ... '{END}' block: copy the lines of "
        "docs/outcome.py between those markers, unchanged"
    )
    text = script.read_text(encoding="utf-8")
    assert text.count("def checked(") == 1, f"{name} defines checked more than once"
    for offset, (want, got) in enumerate(zip(core, copy)):
        assert got == want, (
            f"{name}:{start + offset} differs from docs/outcome.py:{core_start + offset}, the "
            f"first line that differs:\n  outcome.py: {want!r}\n  {script.name}: {got!r}\n"
            "Copy the block again from docs/outcome.py."
        )
    assert len(copy) == len(core), (
        f"{name}: its block has {len(copy)} lines, docs/outcome.py's {len(core)}; from line "
        f"{start + min(len(copy), len(core))} on they differ"
    )
