"""Guarantee 6: no broken internal link or anchor anywhere in the built site.

Crawls every HTML page: each relative href/src must name a file that exists, and each #fragment
must name an id (or name) on the target page.
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

from conftest import built_pages, expected_pages, soup
from site_context import site_url

PREFIX = site_url(path_only=True)  # the canonical URL's path: "/retain-graph-explained/"


def _ids(page):
    return {tag.get("id") for tag in soup(page).find_all(id=True)} | {
        tag.get("name") for tag in soup(page).find_all("a", attrs={"name": True})
    }


def test_every_internal_link_and_anchor_resolves(site):
    broken = []
    for page in built_pages():
        for tag, attr in (("a", "href"), ("link", "href"), ("img", "src"), ("script", "src")):
            for element in soup(page).find_all(tag, attrs={attr: True}):
                url = urlsplit(element[attr])
                if url.scheme or url.netloc or element[attr].startswith(("mailto:", "javascript:")):
                    continue
                if url.path.startswith("/"):  # 404.html links from the path the site is served at
                    path = unquote(url.path)
                    path = path[len(PREFIX) :] if path.startswith(PREFIX) else path.lstrip("/")
                    target = site / path
                else:
                    target = (page.parent / unquote(url.path)).resolve() if url.path else page
                if target.is_dir():
                    target = target / "index.html"
                rel = page.relative_to(site)
                if not target.exists():
                    broken.append(f"{rel}: {element[attr]} (no such file)")
                elif (
                    url.fragment
                    and target.suffix == ".html"
                    and unquote(url.fragment) not in _ids(target)
                ):
                    broken.append(f"{rel}: {element[attr]} (no such anchor)")
    assert not broken, "\n".join(broken)


def test_the_crawl_saw_the_whole_site(site):
    """The crawl (and the page lists of test_quality and test_browser) cover exactly the built
    site: one page per source, plus the gallery index, search, genindex and 404."""
    pages = {p.relative_to(site).as_posix() for p in built_pages()}
    assert pages == set(expected_pages())
