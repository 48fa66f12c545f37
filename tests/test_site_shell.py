"""The site shell: what every page carries (torch version, description, source links, favicon),
its one canonical URL, and the licences in the footer. (Pins: test_lock.py; API links:
test_inventories.py.)"""

from __future__ import annotations

from importlib.metadata import version
from urllib.parse import urlsplit

import pytest
from conftest import HTML, ROOT, gallery_scripts, html_for, myst_pages, soup

# Each content page once (index.md is a MyST page: its index.html is already in the list).
CONTENT = [html_for(p) for p in [*myst_pages(), *gallery_scripts()]]
assert len(set(CONTENT)) == len(CONTENT) and HTML / "index.html" in CONTENT


@pytest.mark.parametrize("page", CONTENT, ids=lambda p: str(p.relative_to(HTML)))
def test_every_page_states_the_torch_version_it_ran_with(site, page):
    line = soup(page).select_one(".executed-with-torch")
    assert line is not None, "the torch version line is missing"
    assert line.get_text(strip=True) == f"torch {version('torch')}"


def test_the_social_card_is_a_1200_by_630_png(site):
    card = HTML / "social-card.png"  # committed in docs/_extra; names no version, so it stays true
    header = card.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    size = (int.from_bytes(header[16:20], "big"), int.from_bytes(header[20:24], "big"))
    assert size == (1200, 630)


@pytest.mark.parametrize(
    "page",
    [*CONTENT, HTML / "auto_examples" / "index.html"],
    ids=lambda p: str(p.relative_to(HTML)),
)
def test_every_page_head_describes_it(site, page):
    """One pass over each page's head: a description and the favicon (content pages); link
    previews with the site's card (an absolute URL, alt text, the large Twitter-style layout); and
    one canonical URL, on GitHub Pages (``<link rel="canonical">`` and ``og:url``), wherever the
    page was built, Read the Docs included."""
    from site_context import site_url

    head = soup(page)
    url = site_url() + page.relative_to(HTML).as_posix()
    assert [link["href"] for link in head.select('link[rel="canonical"]')] == [url]
    assert head.select_one('meta[property="og:url"]')["content"] == url
    if page not in CONTENT:
        return
    description = head.select_one('meta[name="description"]')
    assert description is not None and len(description["content"]) > 40
    icon = head.select_one('link[rel="icon"], link[rel="shortcut icon"]')
    assert icon["href"].endswith("favicon.svg")
    tags = {
        meta.get("property") or meta.get("name"): meta["content"]
        for meta in head.select("meta[property^='og:'], meta[name^='twitter:']")
    }
    assert "og:title" in tags
    assert tags.get("og:image") == site_url().rstrip("/") + "/social-card.png"
    assert len(tags.get("og:image:alt", "")) > 40
    assert tags.get("twitter:card") == "summary_large_image"


def test_read_the_docs_names_the_canonical_host_too(monkeypatch):
    """On Read the Docs (which sets $READTHEDOCS_CANONICAL_URL) the pages still name GitHub Pages
    as canonical; only the 404 page's links follow the path Read the Docs serves the site from."""
    import site_context

    monkeypatch.delenv("SITE_URL", raising=False)
    monkeypatch.setenv(
        "READTHEDOCS_CANONICAL_URL", "https://retain-graph.readthedocs.io/en/latest/"
    )
    assert site_context.site_url() == site_context.DEFAULT_SITE_URL
    assert urlsplit(site_context.DEFAULT_SITE_URL).hostname.endswith(".github.io")
    assert site_context.site_url(path_only=True) == "/en/latest/"


def test_every_page_names_the_licences(site):
    """The footer says under which licences the code (LICENSE) and the text (LICENSE-TEXT) are."""
    assert (ROOT / "LICENSE").read_text().startswith("BSD 3-Clause License\n")
    assert (
        "Creative Commons Attribution 4.0 International Public License"
        in (ROOT / "LICENSE-TEXT").read_text()
    )
    for page in [*CONTENT, HTML / "404.html", HTML / "search.html"]:
        footer = " ".join(soup(page).select_one("footer .copyright").get_text().split())
        assert "Code: BSD-3-Clause; text: CC-BY-4.0" in footer, (page.relative_to(HTML), footer)


def test_gallery_source_links_point_at_the_scripts(site):
    for script in gallery_scripts():
        page = soup(html_for(script))
        for selector, verb in ((".view-this-page a", "blob"), (".edit-this-page a", "edit")):
            href = page.select_one(selector)["href"]
            assert href.endswith(f"/{verb}/main/gallery/{script.name}"), href


def test_page_source_links_point_at_the_markdown(site):
    for source in myst_pages():
        rel = source.relative_to(ROOT).as_posix()
        href = soup(html_for(source)).select_one(".edit-this-page a")["href"]
        assert href.endswith(f"/edit/main/{rel}"), href


def test_not_found_page(site):
    not_found = soup(site / "404.html")
    assert "not found" in not_found.get_text().lower()


def test_torch_names_link_to_the_official_docs(site):
    """Intersphinx resolves offline: API names in prose and gallery code link to docs.pytorch.org."""
    major_minor = ".".join(version("torch").split(".")[:2])
    base = f"https://docs.pytorch.org/docs/{major_minor}/"
    gallery = soup(html_for(ROOT / "gallery" / "plot_how_examples_are_checked.py"))
    hrefs = {a["href"] for a in gallery.find_all("a", href=True)}
    assert f"{base}generated/torch.Tensor.backward.html#torch.Tensor.backward" in hrefs  # prose
    assert f"{base}generated/torch.tensor.html#torch.tensor" in hrefs  # a name in gallery code
    page = soup(html_for(ROOT / "docs" / "how-this-site-works.md"))
    code_links = {a["href"] for a in page.select("div.cell_input a.code-link")}
    assert f"{base}generated/torch.tensor.html#torch.tensor" in code_links  # a name in a MyST cell
    assert (
        f"{base}generated/torch.Tensor.backward.html#torch.Tensor.backward" in code_links
    )  # y.backward()
