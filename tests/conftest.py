"""Shared fixtures: the built site, its pages, the sources they were built from, and the session's
one browser.

The tests check the site as built by `nox -s tests` (which builds `_build/html` first), the way a
reader and a maintainer meet it: pages, downloads, links, and a browser.

Two tiers. Tests marked ``slow`` build the site again (``second_build``, ``small_site``,
``broken_build``), run every download alone, or run the mutations; every other test reads the one
built site and is marked ``fast`` here, at collection: ``nox -s tests -- -m fast`` runs those.
"""

from __future__ import annotations

import ast
import functools
import os
import re
import shutil
import sys
import types
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
IN_CI = os.environ.get("CI") == "true"
sys.path.insert(0, str(ROOT / "docs" / "_ext"))  # the site's own extensions (nb_expectations, ...)
sys.path.insert(0, str(ROOT / "tools"))  # the build script (build_site)
sys.path.insert(0, str(ROOT / "measure"))  # the tools that measure the site (site_audit, ...)
from build_site import can_isolate_network  # noqa: E402,F401  (one copy of the check)
from builds import (  # noqa: E402,F401  (shared with the tools in measure/)
    ANSI,
    copy_tree,
    gallery_scripts,
    myst_pages,
    read_notebook,
    run_build,
)


def html_for(source: Path) -> Path:
    rel = source.relative_to(ROOT)
    if rel.parts[0] == "gallery":
        return HTML / "auto_examples" / (source.stem + ".html")
    return HTML / rel.with_suffix(".html")


@functools.cache
def soup(path: Path) -> BeautifulSoup:
    return BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")


def built_pages() -> list[Path]:
    """Every HTML page of the site."""
    return sorted(p for p in HTML.rglob("*.html") if "_static" not in p.parts)


def prints_something(source: str) -> bool:
    """Whether a code cell/block must show output: it calls print()/display() at top level, ends
    with a bare non-call expression (its repr is shown), or draws a figure (plt./fig./ax. calls)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return True  # IPython syntax (magics): be strict
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call):
                func = sub.func
                if isinstance(func, ast.Name) and func.id in {"print", "display"}:
                    return True
                if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                    if func.value.id == "plt" and func.attr in {"subplots", "figure", "show"}:
                        return True
    last = tree.body[-1] if tree.body else None
    return isinstance(last, ast.Expr) and not isinstance(last.value, (ast.Call, ast.Constant))


# What a small project needs to be built with the site's real configuration and extensions.
BUILD_FILES = [
    "conf.py",
    "constraints.txt",
    "docs/_ext",
    "docs/_templates",
    "docs/_static",
    "docs/_ipython",
    "docs/_inventories",
    "docs/_extra",
    "docs/matplotlibrc",
    "tools/forking_kernel.py",
]
PAGE_HEADER = """\
---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---

"""


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "slow: builds again, runs downloads or mutations (the full tier only)"
    )
    config.addinivalue_line("markers", "fast: reads the one built site (added to every other test)")


def pytest_terminal_summary(terminalreporter, config):
    """The mutation tests' count (tests/test_mutations.py), when they ran."""
    lines = getattr(config, "mutation_summary", None)
    if lines:
        terminalreporter.section("mutations")
        for line in lines:
            terminalreporter.write_line(line)


# A test that needs one of these fixtures builds the site again: it is slow, marked or not.
BUILDING = {"second_build", "small_site", "broken_build"}


@pytest.hookimpl(tryfirst=True)  # before -m deselects
def pytest_collection_modifyitems(items):
    for item in items:
        if BUILDING & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
        if item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.fast)


@pytest.fixture(scope="session")
def site() -> Path:
    if not (HTML / "index.html").exists():
        pytest.fail("No built site in _build/html: run `nox -s tests` (it builds the site first).")
    return HTML


@pytest.fixture(scope="session")
def browser():
    """The session's one headless Chromium (Debian's). Without it the browser tests skip loudly;
    with CI=true they are required."""
    from browser import CHROMIUM, chromium

    if CHROMIUM is None:
        message = "browser tests need Debian's Chromium (`apt-get install -y chromium`)"
        pytest.fail(f"CI=true but {message}") if IN_CI else pytest.skip(f"LOUD SKIP: {message}")
    with chromium() as launched:
        yield launched


@pytest.fixture(scope="session")
def server(site):
    """The built site on a local server, for the whole session."""
    from browser import serve

    with serve(site) as base:
        yield base


@pytest.fixture(scope="session")
def visit(browser, server):
    """``visit(path)``: the page's one visit in the browser (tests/visits.py), made on first use."""
    from visits import visit_page

    done = {}

    def get(path: str):
        if path not in done:
            done[path] = visit_page(browser, server, path)
        return done[path]

    return get


SECOND_BUILDS = ("cold build", "unchanged rebuild", "one-page edit rebuild")
EDIT_WORD = "quokkaverification"  # on no page: after the edit, search must find the edited page
RETITLED = "(retitled)"  # added to the edited gallery script's title


@pytest.fixture(scope="session")
def second_build(tmp_path_factory):
    """One independent build, shared by the reproducibility and the search tests: a copy of the
    repository built cold (with no network where the machine allows it; CI requires it), then
    again unchanged, then after editing one page (its title, a word, a new cell) and one gallery
    script (its title and a new cell). ``builds[kind]`` is a copy of the site after each build,
    with the build's log."""
    offline = can_isolate_network()
    if IN_CI and not offline:
        pytest.fail(
            "CI must prove that the build works offline, but no network namespace can be made"
        )
    tmp = tmp_path_factory.mktemp("second")
    project = copy_tree(tmp / "site")
    named = " ".join(p.read_text() for p in [ROOT / "index.md", *(ROOT / "docs").glob("*.md")])
    shown = [
        p for p in myst_pages() if f"{p.stem}>" not in named
    ]  # no label of its own in a toctree
    page, script = shown[-1].relative_to(ROOT), gallery_scripts()[0].relative_to(ROOT)
    title = re.search(r"^# (.+)$", (project / page).read_text(), re.M).group(1)
    script_text = (project / script).read_text()
    script_title = re.search(r'^"""\n(.+)\n=+$', script_text, re.M).group(1)  # its RST title
    builds = {}
    for kind in SECOND_BUILDS:
        if kind == "one-page edit rebuild":
            text = (project / page).read_text().replace(f"# {title}", f"# {title} (edited)", 1)
            heading = re.search(r"^(?:\([\w-]+\)=\n)?## ", text, re.M)  # a label stays with it
            at = heading.start() if heading else len(text)
            text = text[:at] + f"{EDIT_WORD}\n\n" + text[at:]
            (project / page).write_text(text + '\n```{code-cell} ipython3\nprint("an edit")\n```\n')
            new = f"{script_title} {RETITLED}"
            code = script_text.replace(
                f'"""\n{script_title}\n{"=" * len(script_title)}\n',
                f'"""\n{new}\n{"=" * len(new)}\n',
                1,
            )
            (project / script).write_text(code + '\n# %%\n# An edit.\n\nprint("an edit")\n')
        result = run_build(project, offline=offline)
        log = result.stdout + result.stderr
        assert result.returncode == 0, f"the second build's {kind} failed:\n{log[-5000:]}"
        html = shutil.copytree(project / "_build" / "html", tmp / kind.replace(" ", "-"))
        builds[kind] = (html, log)
    return types.SimpleNamespace(
        project=project,
        page=page,
        script=script,
        title=title,
        script_title=script_title,
        builds=builds,
    )


def expected_pages() -> list[str]:
    """Every HTML page the site must have, known from its sources (not from _build): each page of
    ``index.md`` and ``docs/*.md``, each gallery script, the gallery index, search, genindex and
    404. Tests parametrized with it fail one by one without a built site, instead of collecting
    nothing; ``test_links`` checks that the built site has exactly these pages."""
    sources = [ROOT / "index.md", *sorted((ROOT / "docs").glob("*.md")), *gallery_scripts()]
    pages = {html_for(source).relative_to(HTML).as_posix() for source in sources}
    return sorted(pages | {"auto_examples/index.html", "search.html", "genindex.html", "404.html"})
