"""Unit tests of the small build helpers in docs/_ext whose failures would be silent."""

from __future__ import annotations

import zipfile

import nbformat
from code_links import link_code
from nb_execution import join_stream_chunks, local_modules
from reproducible_output import normalise


def _stream(name, text):
    return nbformat.v4.new_output("stream", name=name, text=text)


def test_stream_chunks_are_joined_exactly():
    """A chunk boundary inside a line must not become a line break (myst-nb's merge adds one)."""
    outputs = [_stream("stdout", "heads  "), _stream("stdout", "trunk\n"), _stream("stderr", "w\n")]
    joined = join_stream_chunks(outputs)
    assert [o["text"] for o in joined] == ["heads  trunk\n", "w\n"]


def test_local_modules_are_found_only_next_to_the_page(tmp_path):
    (tmp_path / "autograd_graph.py").write_text("")
    code = "import torch\nfrom autograd_graph import draw\nimport numpy as np\n"
    assert local_modules(code, tmp_path) == [tmp_path / "autograd_graph.py"]


def test_zips_are_normalised_to_fixed_timestamps(tmp_path):
    path = tmp_path / "a.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("b.py", "print(2)")
        archive.writestr("a.py", "print(1)")
    normalise(path)
    first = path.read_bytes()
    normalise(path)
    assert path.read_bytes() == first
    with zipfile.ZipFile(path) as archive:
        assert [i.filename for i in archive.infolist()] == ["a.py", "b.py"]
        assert {i.date_time for i in archive.infolist()} == {(1980, 1, 1, 0, 0, 0)}


def test_code_links_resolve_names_aliases_and_tensor_methods_once_per_page():
    span = '<span class="n">{}</span>'
    dot = '<span class="o">.</span>'
    code = (
        span.format("torch")
        + dot
        + span.format("autograd")
        + dot
        + span.format("grad")
        + "\n"
        + span.format("nn")
        + dot
        + span.format("Linear")
        + "\n"
        + span.format("y")
        + dot
        + span.format("backward")
        + "\n"
        + span.format("y")
        + dot
        + span.format("unknown")
        + "\n"
        + span.format("z")
        + dot
        + span.format("backward")
        + "\n"
    )
    html = f'<div class="highlight-ipython3 notranslate"><div class="highlight"><pre>{code}</pre>'
    targets = {
        "torch.autograd.grad": "u/grad",
        "torch.nn.Linear": "u/linear",
        "torch.Tensor.backward": "u/backward",
    }
    linked = link_code(html, targets, {"nn": "torch.nn"})
    for url in ("u/grad", "u/linear", "u/backward"):
        assert f'href="{url}"' in linked
    assert linked.count("<a ") == 3  # y.unknown is not linked, nor a second .backward()
    assert linked.index('href="u/backward"') < linked.index(span.format("z"))
