"""Shared fixtures: the built site, its pages, and the sources they were built from.

The tests check the site as built by `nox -s tests` (which builds `_build/html` first), the way a
reader and a maintainer meet it: pages, downloads, links, and a browser.
"""

from __future__ import annotations

import ast
import functools
import os
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
BUILD_SITE = ROOT / "tools" / "build_site.py"
IN_CI = os.environ.get("CI") == "true"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
sys.path.insert(0, str(ROOT / "docs" / "_ext"))  # the site's own extensions (nb_expectations, ...)
sys.path.insert(0, str(ROOT / "tools"))  # the build script (build_site)
from build_site import can_isolate_network  # noqa: E402,F401  (one copy of the check)


def myst_pages() -> list[Path]:
    """MyST-NB notebook pages (Markdown files with a kernelspec)."""
    pages = [ROOT / "index.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [p for p in pages if "kernelspec:" in p.read_text().split("\n---", 1)[0]]


def gallery_scripts() -> list[Path]:
    return sorted((ROOT / "gallery").glob("plot_*.py"))


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


def read_notebook(page: Path):
    """The notebook myst-nb reads from a MyST page (cells with their metadata and source lines)."""
    from myst_nb.core.read import read_myst_markdown_notebook

    return read_myst_markdown_notebook(page.read_text(encoding="utf-8"), add_source_map=True)


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


def copy_tree(dest: Path, paths: list[str] | None = None) -> Path:
    """Copy the repository's files (as git sees them: tracked and untracked-but-not-ignored) to
    dest, or only the given repository paths."""
    if paths is None:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split("\0")
        paths = [p for p in listed if p and (ROOT / p).is_file()]
    for rel in paths:
        src = ROOT / rel
        target = dest / rel
        if src.is_dir():
            shutil.copytree(
                src, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__")
            )
        elif src.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
    return dest


def run_build(
    source: Path, *, offline: bool = False, extra: tuple[str, ...] = ()
) -> subprocess.CompletedProcess:
    """Run the site's build script on a copy of the project (plain-text log, no colours)."""
    command = [sys.executable, str(BUILD_SITE), "--source", str(source)]
    if offline:
        command.append("--offline")
    command += ["--", "--no-color", *extra]
    result = subprocess.run(command, capture_output=True, text=True, cwd=source)
    result.stdout, result.stderr = ANSI.sub("", result.stdout), ANSI.sub("", result.stderr)
    return result


@pytest.fixture(scope="session")
def site() -> Path:
    if not (HTML / "index.html").exists():
        pytest.fail("No built site in _build/html: run `nox -s tests` (it builds the site first).")
    return HTML


SECOND_BUILDS = ("cold build", "unchanged rebuild", "one-page edit rebuild")
EDIT_WORD = "quokkaverification"  # on no page: after the edit, search must find the edited page


@pytest.fixture(scope="session")
def second_build(tmp_path_factory):
    """One independent build, shared by the reproducibility and the search tests: a copy of the
    repository built cold (with no network where the machine allows it; CI requires it), then
    again unchanged, then after editing one page (its title, a word, a new cell) and one gallery
    script. ``builds[kind]`` is a copy of the site after each build, with the build's log."""
    offline = can_isolate_network()
    if IN_CI and not offline:
        pytest.fail(
            "CI must prove that the build works offline, but no network namespace can be made"
        )
    tmp = tmp_path_factory.mktemp("second")
    project = copy_tree(tmp / "site")
    page, script = myst_pages()[-1].relative_to(ROOT), gallery_scripts()[0].relative_to(ROOT)
    title = re.search(r"^# (.+)$", (project / page).read_text(), re.M).group(1)
    builds = {}
    for kind in SECOND_BUILDS:
        if kind == "one-page edit rebuild":
            text = (project / page).read_text().replace(f"# {title}", f"# {title} (edited)", 1)
            heading = re.search(r"^(?:\([\w-]+\)=\n)?## ", text, re.M)  # a label stays with it
            at = heading.start() if heading else len(text)
            text = text[:at] + f"{EDIT_WORD}\n\n" + text[at:]
            (project / page).write_text(text + '\n```{code-cell} ipython3\nprint("an edit")\n```\n')
            with open(project / script, "a") as f:
                f.write('\n# %%\n# An edit.\n\nprint("an edit")\n')
        result = run_build(project, offline=offline)
        log = result.stdout + result.stderr
        assert result.returncode == 0, f"the second build's {kind} failed:\n{log[-5000:]}"
        html = shutil.copytree(project / "_build" / "html", tmp / kind.replace(" ", "-"))
        builds[kind] = (html, log)
    return types.SimpleNamespace(
        project=project, page=page, script=script, title=title, builds=builds
    )


def expected_pages() -> list[str]:
    """Every HTML page the site must have, known from its sources (not from _build): each page of
    ``index.md`` and ``docs/*.md``, each gallery script, the gallery index, search, genindex and
    404. Tests parametrized with it fail one by one without a built site, instead of collecting
    nothing; ``test_links`` checks that the built site has exactly these pages."""
    sources = [ROOT / "index.md", *sorted((ROOT / "docs").glob("*.md")), *gallery_scripts()]
    pages = {html_for(source).relative_to(HTML).as_posix() for source in sources}
    return sorted(pages | {"auto_examples/index.html", "search.html", "genindex.html", "404.html"})
