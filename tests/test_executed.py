"""Guarantees 1 and 2: every page and script ran, and shows the outputs and errors its code made.

Like pytorch/tutorials' validate_tutorials_built, these read the built HTML: a code cell that
prints, displays or draws must show an output right under it, and every page shows the notebook the
build executed.
"""

from __future__ import annotations

import json
import re

import pytest
from conftest import (
    ANSI,
    HTML,
    ROOT,
    gallery_scripts,
    html_for,
    myst_pages,
    prints_something,
    read_notebook,
    soup,
)

MYST = myst_pages()
GALLERY = gallery_scripts()


def helper(cell: dict) -> bool:
    """A cell the build adds to a download to write a helper module (docs/_ext/nb_execution.py)."""
    return "helper-module" in cell.get("metadata", {}).get("tags", [])


def test_there_is_something_to_check():
    assert MYST, "no MyST-NB pages found"
    assert GALLERY, "no gallery scripts found"


def _visible_code_cells(page):
    notebook = read_notebook(page)
    lines = notebook.metadata.get("source_map", [])
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        tags = cell.metadata.get("tags", [])
        if "remove-cell" in tags:
            continue
        yield lines[index], cell


def _text(node) -> str:
    return " ".join(node.get_text().split())


def _output_texts(cell: dict) -> list[str]:
    """The text a notebook cell's outputs show: streams, plain-text results, error lines."""
    texts = []
    for output in cell.get("outputs", []):
        if output["output_type"] == "stream":
            texts.append("".join(output["text"]))
        elif output["output_type"] == "error":
            texts.append(f"{output['ename']}: {output['evalue']}")
        elif set(output.get("data", {})) == {"text/plain"}:  # rich outputs render otherwise
            texts.append("".join(output["data"]["text/plain"]))
    return [" ".join(ANSI.sub("", text).split()) for text in texts if text.strip()]


@pytest.mark.parametrize("page", MYST, ids=lambda p: p.name)
def test_myst_page_shows_its_executed_notebook(site, page):
    """The page shows, cell for cell, the notebook the build executed, which is also the notebook
    it offers for download: the same code as the source, every cell executed, an output under each
    cell that prints or draws, an output wherever the notebook has one and none where it has none,
    and the text of every output. (That each cell raised exactly what it declares is checked by the
    build itself, docs/_ext/nb_expectations.py, and again when the download runs alone.)"""
    links = [a["href"] for a in soup(html_for(page)).select("a.reference.download")]
    offered = [h for h in links if h.endswith(f"/{page.stem}.ipynb")]
    if page.parent.name == "docs":
        assert offered, (
            f"{page.name}: offer the executed notebook with {{nb-download}}`{page.stem}.ipynb`"
        )
        download = (html_for(page).parent / offered[0]).resolve()
    else:  # the home page offers no download; its executed copy is still checked
        download = site.parent / "jupyter_execute" / f"{page.stem}.ipynb"
    assert download.exists(), f"{download} missing"
    notebook = json.loads(download.read_text())
    code = [c for c in notebook["cells"] if c["cell_type"] == "code" and not helper(c)]
    code = [c for c in code if "remove-cell" not in c.get("metadata", {}).get("tags", [])]
    assert all(c.get("execution_count") for c in code), f"{page.name}: unexecuted cells in download"
    source = list(_visible_code_cells(page))
    rendered = soup(html_for(page)).select("div.cell")
    assert len(source) == len(code) == len(rendered), (
        f"{page.name}: {len(source)} code cells in the source, {len(code)} in the executed "
        f"notebook, {len(rendered)} on the page"
    )
    for number, ((line, cell), executed, html) in enumerate(zip(source, code, rendered), 1):
        where = f"{page.relative_to(ROOT)}:{line}, code cell {number}"
        assert cell.source.strip() == "".join(executed["source"]).strip(), (
            f"{where}: the executed notebook's code is not the page's source"
        )
        shown_code = html.select_one("div.cell_input")
        if shown_code is not None:
            assert _text(shown_code) == " ".join(cell.source.split()), (
                f"{where}: the page shows other code than its source"
            )
        shown = html.select_one("div.cell_output")
        assert bool(shown) == bool(executed["outputs"]), (
            f"{where}: the page {'shows' if shown else 'shows no'} output, the notebook "
            f"{'has' if executed['outputs'] else 'has none'}"
        )
        tags = cell.metadata.get("tags", [])
        if prints_something(cell.source) and "remove-output" not in tags:
            assert shown is not None and (shown.get_text(strip=True) or shown.find("img")), (
                f"{where}: this cell prints or draws, but the page shows no output under it"
            )
        page_text = _text(shown) if shown else ""
        for text in _output_texts(executed):
            assert text in page_text, f"{where}: the output {text[:200]!r} is not shown"


TIMERS = re.compile(r"\b(?:perf_counter|process_time|monotonic|timeit)\b|\btime\.time\(")


def test_times_are_measured_only_in_gallery_scripts(site):
    """A page's text and its executed-notebook download must be the same in every build, so no
    page times code. Timing lives in gallery scripts, whose figures are named by script and place
    and whose downloads are code; a page shows such a figure with a ``{figure}`` of the gallery's
    image (how-this-site-works, "A measured time is drawn by a gallery script")."""
    for page in MYST:
        code = "\n".join(c.source for c in read_notebook(page).cells if c.cell_type == "code")
        assert not TIMERS.search(code), (
            f"{page.name} times code: move the timing to a gallery script"
        )
    borrowed = 0
    for page in MYST:
        for img in soup(html_for(page)).select('figure img[src*="sphx_glr_"]'):
            assert "sphx-glr-single-img" in img["class"], f"{page.name}: {img} (dark theme)"
            assert (html_for(page).parent / img["src"]).stat().st_size > 1000, img["src"]
            assert len(img["alt"]) > 40, f"{page.name}: {img['src']} needs alt text"
            borrowed += 1
    assert borrowed >= 3, "what-it-costs, several-losses and how-this-site-works show timings"


@pytest.mark.parametrize("script", GALLERY, ids=lambda p: p.name)
def test_gallery_blocks_show_their_outputs(site, script):
    from sphinx_gallery.py_source_parser import split_code_and_text_blocks

    _, blocks = split_code_and_text_blocks(str(script))[:2]
    code_blocks = [(lineno, text) for label, text, lineno in blocks if label == "code"]
    page = soup(html_for(script))
    rendered = page.select("div.highlight-Python")
    assert len(rendered) == len(code_blocks), (
        f"{script.name}: code blocks and rendered blocks differ"
    )
    for (lineno, text), html in zip(code_blocks, rendered, strict=True):
        if not prints_something(text):
            continue
        following = html.find_next_sibling()
        classes = following.get("class", []) if following else []
        shown = following is not None and (
            "sphx-glr-script-out" in classes
            or following.name == "img"
            or "sphx-glr-horizontal" in classes
        )
        assert shown, (
            f"gallery/{script.name}:{lineno}: this block prints or draws, but no output follows"
        )
    assert "BROKEN" not in page.get_text(), f"{script.name}: marked as broken"


def test_gallery_offers_downloads(site):
    for script in GALLERY:
        links = [a["href"] for a in soup(html_for(script)).select("a.reference.download")]
        for suffix in (".py", ".ipynb", ".zip"):
            matching = [h for h in links if h.endswith(script.stem + suffix)]
            assert matching, f"{script.name}: no {suffix} download"
            assert (html_for(script).parent / matching[0]).exists()
    index_links = [
        a["href"]
        for a in soup(HTML / "auto_examples" / "index.html").select("a.reference.download")
    ]
    assert any(h.endswith("auto_examples_python.zip") for h in index_links)
    assert any(h.endswith("auto_examples_jupyter.zip") for h in index_links)


def test_the_in_place_error_is_demonstrated_in_few_places(site):
    """One fact, one place: "modified by an inplace operation" (an optimizer step or an in-place op
    between two passes) is demonstrated in its canonical section (neighbouring-errors, label
    errors-inplace) and in at most three other places that need it as a verdict; every other page
    links there. Twelve pages once ran the same demonstration, and their copies drifted apart."""
    showing = sorted(
        str(page.relative_to(HTML))
        for page in HTML.rglob("*.html")
        if any(
            "modified by an inplace operation" in output.get_text()
            for output in soup(page).select("div.cell_output, .sphx-glr-script-out")
        )
    )
    assert "docs/neighbouring-errors.html" in showing, "the canonical demonstration is missing"
    assert len(showing) <= 4, f"the in-place error is executed on {len(showing)} pages: {showing}"
