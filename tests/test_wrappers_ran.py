"""The DDP and torch.compile cells of docs/wrappers.md really ran in this build, on the machine
that built it, and were not skipped, cached from elsewhere or left without output.

Why: those cells depend on more than torch's autograd (a gloo process group on the loopback
interface, a spawned second process, TorchDynamo and AOTAutograd). If any of it were unavailable,
a page that merely skipped them would still look complete. These tests read the built HTML and the
executed notebook offered for download, and look for what only a real run prints: the backend
and world size of the process group, the per-scenario results that two ranks sent back, the
compiled graph's node and operations, and the errors that only the compiled backward and DDP's
reducer raise.
"""

from __future__ import annotations

import json

import pytest
from conftest import ROOT, html_for, soup

PAGE = ROOT / "docs" / "wrappers.md"
LOST_LEAF = ROOT / "docs" / "lost-leaf.md"


def _outputs(page) -> list[str]:
    """The text shown under each code cell of the built page (not its source), in order."""
    texts = []
    for cell in soup(html_for(page)).select("div.cell"):
        output = cell.select_one("div.cell_output")
        texts.append(" ".join(output.get_text().split()) if output else "")
    return texts


def _output_containing(outputs: list[str], fragment: str) -> str:
    matching = [text for text in outputs if fragment in text]
    assert matching, f"no cell output of {PAGE.name} contains {fragment!r}"
    return matching[0]


@pytest.fixture(scope="module")
def outputs(site):
    return _outputs(PAGE)


def test_the_process_group_was_real(outputs):
    text = _output_containing(outputs, "backend: gloo")
    assert "world size: 1" in text
    text = _output_containing(outputs, "process group destroyed:")
    assert "process group destroyed: True" in text


def test_ddp_errors_came_from_the_reducer(outputs):
    finished = _output_containing(outputs, "Expected to have finished reduction")
    assert "Parameter indices which did not receive grad for rank 0: 4 5" in finished
    twice = [text for text in outputs if "Expected to mark a variable ready only once" in text]
    assert len(twice) >= 2, "both 'marked ready twice' cells must show the reducer's error"
    assert any("has been marked as ready twice" in text for text in twice)


def test_two_ranks_reported_every_scenario(outputs):
    table = _output_containing(outputs, "all-reduces ranks agree equals the average")
    expected_rows = {
        "one backward of the sum 1 True True",
        "two backward calls 1 False False",
        "two backward calls, static_graph 1 False False",
        "accumulate, no no_sync 2 True True",
        "accumulate with no_sync 1 True True",
    }
    for row in expected_rows:
        assert row in table, f"DDP table lacks the row {row!r}: {table[:400]}"
    _output_containing(outputs, "rank r's gradient = average of the first loss")


def test_compile_cells_ran_with_aot_eager(outputs):
    text = _output_containing(outputs, "backend: aot_eager")
    assert "CompiledFunctionBackward" in text
    assert "compiled gradient equals eager up to rounding: True" in text
    _output_containing(outputs, "non-empty donated buffers")
    text = _output_containing(outputs, "retain_graph=True on the first backward of a fresh compile")
    assert text.count("True") >= 2
    _output_containing(outputs, "compiled GAN step, gradients equal eager up to rounding: True")
    text = _output_containing(outputs, "graphs compiled:")
    assert "[['linear', 'tanh']]" in text and "hidden.grad == 2 * hidden: True" in text
    _output_containing(outputs, "Tensor.retain_grad() with AOTDispatcher")
    _output_containing(outputs, "does not currently support double backward")


def test_the_download_is_the_same_run(site):
    """The executed notebook offered for download holds the same DDP and compile outputs."""
    executed = site.parent / "jupyter_execute" / "docs" / "wrappers.ipynb"
    notebook = json.loads(executed.read_text())
    code = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
    code = [cell for cell in code if "helper-module" not in cell["metadata"].get("tags", [])]
    assert all(cell.get("execution_count") for cell in code)
    text = json.dumps([cell["outputs"] for cell in code])
    for fragment in ("backend: gloo", "backend: aot_eager", "accumulate with no_sync"):
        assert fragment in text, f"the downloaded notebook lacks {fragment!r}"


def test_lost_leaf_ran(site):
    outputs = _outputs(LOST_LEAF)
    text = " ".join(outputs)
    assert '.to("meta") (a device move) is_leaf=False grad_fn=ToCopyBackward0' in text
    assert "ValueError: can't optimize a non-leaf Tensor" in text
    assert "'parametrizations.weight.original0', 'parametrizations.weight.original1'" in text
