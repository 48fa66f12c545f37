"""Unit tests of the small build helpers in docs/_ext whose failures would be silent."""

from __future__ import annotations

import hashlib
import json
import re
import zipfile
from types import SimpleNamespace

import nbformat
from freshness import local_modules
from html_output import link_code
from internals import join_stream_chunks
from site_context import normalise


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


def test_the_sitemap_lists_every_page_sorted(tmp_path):
    """sphinx-sitemap listed only the pages written in the last build, in the order written."""
    from site_context import write_listings

    app = SimpleNamespace(
        outdir=str(tmp_path),
        config=SimpleNamespace(html_baseurl="https://x/"),
        env=SimpleNamespace(found_docs={"b", "index", "a/c"}),
        builder=SimpleNamespace(format="html", get_target_uri=lambda docname: f"{docname}.html"),
    )
    write_listings(app, None)
    locs = re.findall(r"<loc>(.*?)</loc>", (tmp_path / "sitemap.xml").read_text())
    assert locs == ["https://x/a/c.html", "https://x/b.html", "https://x/index.html"]


def test_pages_not_written_keep_their_index_entries(tmp_path, monkeypatch):
    """Sphinx drops the index entries of the pages it did not write (sphinx-doc/sphinx#12599).
    Each entry links to the section holding it, also on pages written without being read."""
    import freshness as ro

    def index(docnames, entries):
        data = {"docnames": docnames, "indexentries": entries, "titles": docnames}
        (tmp_path / "searchindex.js").write_text(f"Search.setIndex({json.dumps(data)})")

    sections = {"c": {"index-1": "s"}, "d": {"index-0": "", "index-2": "t", "index-3": "t"}}
    app = SimpleNamespace(outdir=str(tmp_path), env=SimpleNamespace(site_index_sections=sections))
    index(["a", "b", "c"], {"x": [[0, "", False], [1, "", False]], "y": [[2, "index-1", True]]})
    ro.remember_index_entries(app)
    monkeypatch.setattr(ro, "_read", {"b"})  # b was read (and lost its entry), a and c were not
    written = {"z": [[3, "index-0", False]], "w": [[3, "index-2", False], [3, "index-3", False]]}
    index(["a", "b", "c", "d"], written)
    ro.complete_index_entries(app, None)
    text = (tmp_path / "searchindex.js").read_text()
    got = json.loads(text[len("Search.setIndex(") : -1])["indexentries"]
    assert got == {
        "x": [[0, "", False]],
        "y": [[2, "s", True]],
        "z": [[3, "", False]],
        "w": [[3, "t", False]],
    }


def test_each_index_entry_is_placed_in_the_section_holding_it():
    """The section's first id (what Sphinx lists for its heading), "" for the page's top."""
    from docutils import nodes
    from freshness import note_index_sections
    from sphinx import addnodes

    def section(ids, title, *children):
        return nodes.section("", nodes.title("", title), *children, ids=ids)

    def entry(anchor):
        return addnodes.index(entries=[("single", anchor, anchor, "", None)])

    doctree = nodes.document(None, None)
    doctree += section(
        ["page"],
        "Page",
        entry("index-0"),
        section(
            ["label", "slug"],
            "Part",
            nodes.paragraph(),
            entry("index-1"),
            section(["inner"], "Inner", entry("index-2")),
        ),
        section([], "No id", entry("index-3")),
    )
    env = SimpleNamespace(docname="p", site_index_sections={})
    note_index_sections(SimpleNamespace(env=env), doctree)
    assert env.site_index_sections == {
        "p": {"index-0": "", "index-1": "label", "index-2": "inner", "index-3": ""}
    }


def test_each_subsection_names_its_enclosing_section():
    """First ids, as the search index lists headings; sections right under the page's title and
    sections without an id are not listed (an id-less section's subsections name the one above)."""
    from docutils import nodes
    from freshness import note_section_parents

    def section(ids, title, *children):
        return nodes.section("", nodes.title("", title), *children, ids=ids)

    doctree = nodes.document(None, None)
    doctree += section(
        ["page"],
        "Page",
        section(["label", "slug"], "Part", section(["inner"], "Inner", section(["deep"], "Deep"))),
        section(["other"], "Other", section([], "No id", section(["below"], "Below"))),
    )
    env = SimpleNamespace(docname="p", site_section_parents={})
    note_section_parents(SimpleNamespace(env=env), doctree)
    assert env.site_section_parents == {"p": {"inner": "label", "deep": "inner", "below": "other"}}


def test_a_removed_script_takes_its_generated_files_along(tmp_path, monkeypatch):
    """sphinx-gallery's files for a script that is gone are deleted (not those of a script whose
    name starts the same), and those of a script edited since it ran; a new torch or Python
    deletes every .md5, so every script runs again."""
    import freshness

    gallery, out = tmp_path / "gallery", tmp_path / "auto_examples"
    (out / "images" / "thumb").mkdir(parents=True)
    gallery.mkdir()
    (gallery / "plot_a_b.py").write_text("")
    for stem in ("plot_a", "plot_a_b"):
        for suffix in (".py", ".py.md5", ".rst", ".ipynb", ".zip", ".codeobj.json"):
            (out / f"{stem}{suffix}").write_text("")
        (out / "images" / f"sphx_glr_{stem}_001.svg").write_text("")
        (out / "images" / "thumb" / f"sphx_glr_{stem}_thumb.svg").write_text("")
    (out / "plot_a_b.py.md5").write_text(hashlib.md5(b"").hexdigest())  # ran as it is
    conf = {"examples_dirs": "gallery", "gallery_dirs": "auto_examples"}
    cache = tmp_path / ".jupyter_cache"
    config = SimpleNamespace(sphinx_gallery_conf=conf, nb_execution_cache_path=str(cache))
    app = SimpleNamespace(srcdir=str(tmp_path), config=config, doctreedir=str(tmp_path / "dt"))
    monkeypatch.setattr(freshness, "execution_key", lambda: "torch 1, Python 3")
    (out / ".executed-with").write_text("torch 1, Python 3")
    cache.mkdir()
    freshness.empty_stale_caches(app)
    left = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert [p for p in left if "plot_a." in p or "plot_a_0" in p or "plot_a_t" in p] == []
    assert "plot_a_b.py.md5" in left and "images/sphx_glr_plot_a_b_001.svg" in left
    assert cache.is_dir()
    (gallery / "plot_a_b.py").write_text("print(1)")  # edited: it runs again, and may draw less
    freshness.empty_stale_caches(app)
    assert not list(out.rglob("sphx_glr_plot_a_b_*")), "an edited script keeps its old images"
    monkeypatch.setattr(freshness, "execution_key", lambda: "torch 2, Python 3")
    freshness.empty_stale_caches(app)
    assert not list(out.rglob("*.md5")) and not cache.exists()
    assert (out / ".executed-with").read_text() == "torch 2, Python 3"


def test_the_execution_key_changes_with_the_figure_style(tmp_path, monkeypatch):
    """Gallery scripts draw with docs/matplotlibrc too, and sphinx-gallery's cache looks only at
    each script: a new style must run them again, as a new torch does."""
    import freshness

    (tmp_path / "_ipython").mkdir()
    (tmp_path / "_ipython" / "kernel_config.py").write_text("c = get_config()\n")
    (tmp_path / "matplotlibrc").write_text("font.size: 12\n")
    monkeypatch.setattr(freshness, "DOCS", tmp_path)
    before = freshness.execution_key()
    (tmp_path / "matplotlibrc").write_text("font.size: 14\n")
    assert (styled := freshness.execution_key()) != before
    (tmp_path / "_ipython" / "kernel_config.py").write_text("c = get_config()  # edited\n")
    assert freshness.execution_key() != styled  # the kernel settings too
