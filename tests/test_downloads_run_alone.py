"""Every download runs alone and prints what its page printed (the runs: slow tier).

Each page's notebook, each gallery script and each helper module the pages offer is run by the
project's one download runner, ``measure/run_alone.py`` (also behind ``nox -s versions``): copied
alone into an empty folder and run by a Python that holds only torch, numpy and matplotlib, plus
ipykernel and nbclient (requirements/examples.txt; `nox -s tests` creates that environment and
names its python in $STANDALONE_PYTHON), two at a time. A notebook runs past its first failure and
each cell is judged by the build's rule (a tagged cell raises exactly its declared error, no other
cell raises); a script runs with ``python -W error``. A gallery notebook is the same code as its
script: it is checked cell for cell against the script's blocks instead of being run again.

A notebook must also print, cell for cell, what its page printed when the site was built (the
download is the executed page): a page that draws random numbers without seeding them in its first
cell prints other numbers, or another step's error, when a reader runs it (CONTRIBUTING.md, "Random
state"). ``tests/test_random_state.py`` checks the seeding rule itself, without running anything.

A page that runs more libraries lists them in ``requirements/<page>.txt`` (frameworks: Lightning,
Accelerate, Transformers, vector-quantize-pytorch). Its notebook must name them, at their
``constraints.txt`` pins, in its first cell; it runs in ``.nox/standalone-<page>`` (next to
$STANDALONE_PYTHON's environment), which `nox -s tests` installs: nothing is installed here, and
nothing needs the network.
"""

from __future__ import annotations

import json
import os
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import HTML, IN_CI, ROOT, gallery_scripts, myst_pages
from run_alone import describe, run_alone

PYTHON = os.environ.get("STANDALONE_PYTHON")
PAGES = sorted(page.stem for page in myst_pages())  # index.md's notebook is offered too
NOTEBOOKS = [f"{page}.ipynb" for page in PAGES]
HELPERS = sorted(  # the helper modules the pages offer with {download}
    {name for page in (ROOT / "docs").glob("*.md")
     for name in re.findall(r"\{download\}`(?:[^`<]*<)?(\w+\.py)>?`", page.read_text())}
)  # fmt: skip
SCRIPTS = [script.name for script in gallery_scripts()]
DOWNLOADS = sorted(NOTEBOOKS + SCRIPTS + HELPERS)


def offered(name: str) -> Path:
    found = sorted((HTML / "_downloads").rglob(name))
    if not found:
        pytest.fail(f"the site offers no download named {name}")
    return found[0]


def extra_packages(name: str) -> list[str]:
    """The pins (``name==version``, from constraints.txt) of requirements/<page>.txt, if any."""
    listed = ROOT / "requirements" / f"{Path(name).stem}.txt"
    if not name.endswith(".ipynb") or Path(name).stem not in PAGES or not listed.exists():
        return []
    canonical = lambda text: re.sub(r"[-_.]+", "-", text.strip()).lower()  # noqa: E731
    constraints = (ROOT / "constraints.txt").read_text().splitlines()
    pins = {canonical(line.split("==")[0]): line.strip() for line in constraints if "==" in line}
    wanted = [line.split("#")[0] for line in listed.read_text().splitlines()]
    return [pins[canonical(package)] for package in wanted if package.strip()]


def page_python(name: str, download: Path) -> tuple[str | None, str]:
    """The Python to run the download in (error text or None, python): $STANDALONE_PYTHON, or for
    a page with requirements/<page>.txt, that of ``.nox/standalone-<page>``, whose packages the
    notebook's first page cell must name."""
    pins = extra_packages(name)
    if not pins:
        return None, PYTHON
    cells = json.loads(download.read_text())["cells"]
    first = next(c for c in cells if c["cell_type"] == "code" and "helper-module" not in
                 c.get("metadata", {}).get("tags", []))  # fmt: skip
    unnamed = [pin for pin in pins if pin not in "".join(first["source"])]
    if unnamed:
        return f"{name}'s first cell does not name {unnamed} (constraints.txt)", ""
    env = Path(PYTHON).parents[1]
    python = env.with_name(f"{env.name}-{Path(name).stem}") / Path(PYTHON).relative_to(env)
    if not python.exists():
        return f"{python} is missing: `nox -s tests` installs it with {pins}", ""
    return None, str(python)


def run(name: str) -> dict | str:
    """The runner's result for one download, or the reason it could not run."""
    download = offered(name)
    error, python = page_python(name, download)
    return error or run_alone(download, python)


@pytest.fixture(scope="module")
def results(request, site):
    """Run the downloads this module's selected tests need, two at a time, once."""
    if not PYTHON:
        message = "no $STANDALONE_PYTHON (an environment with only requirements/examples.txt)"
        pytest.fail(message) if IN_CI else pytest.skip(message)
    names = sorted({
        item.callspec.params["download"] for item in request.session.items
        if item.module is request.module and hasattr(item, "callspec")
        and "download" in item.callspec.params
    })  # fmt: skip
    with ThreadPoolExecutor(2) as pool:
        runs = {name: pool.submit(run, name) for name in names}
    return {name: run.result() for name, run in runs.items()}


@pytest.mark.slow
@pytest.mark.parametrize("download", DOWNLOADS)
def test_download_runs_alone(results, download):
    result = results[download]
    assert not isinstance(result, str), result
    assert result["outcome"] == "pass", (
        f"{download}, run alone in an empty folder, failed:\n{describe(download, result)}"
    )


@pytest.mark.slow
@pytest.mark.parametrize("download", NOTEBOOKS)
def test_download_prints_what_its_page_printed(results, download):
    result = results[download]
    assert not isinstance(result, str), result
    differs = "\n".join(f"cell {n}:\n  {page}\n  {here}" for n, page, here in result["differs"])
    assert not differs, (
        f"{download}, run alone, printed other outputs than its page (seed everything the page "
        f"draws in its first cell, CONTRIBUTING.md):\n{differs}"
    )


def test_the_site_offers_exactly_these_downloads(site):
    offered_now = {
        p.name for p in (site / "_downloads").rglob("*") if p.suffix in {".py", ".ipynb"}
    }
    gallery_notebooks = {f"{Path(script).stem}.ipynb" for script in SCRIPTS}
    assert offered_now == set(DOWNLOADS) | gallery_notebooks


@pytest.mark.parametrize("script", SCRIPTS)
def test_gallery_notebook_is_its_script(site, script):
    """The ``.ipynb`` sphinx-gallery offers holds exactly the script's code blocks, in order, and
    the ``.py`` offered is the script: running the script stands for both."""
    from sphinx_gallery.py_source_parser import split_code_and_text_blocks

    source = ROOT / "gallery" / script
    assert offered(script).read_bytes() == source.read_bytes(), f"{script}: the download differs"
    blocks = [text for label, text, _ in split_code_and_text_blocks(str(source))[1]
              if label == "code" and text.strip()]  # fmt: skip
    # sphinx-gallery leaves its own configuration comments out of the notebook
    blocks = ["\n".join(ln for ln in b.splitlines() if not ln.startswith("# sphinx_gallery_"))
              .strip() for b in blocks]  # fmt: skip
    notebook = json.loads(offered(script.replace(".py", ".ipynb")).read_text())
    cells = ["".join(c["source"]).strip() for c in notebook["cells"] if c["cell_type"] == "code"]
    assert cells == blocks, f"{script}: the notebook's code cells are not the script's blocks"
