"""Every download runs alone: each page's notebook and each gallery script (.py and .ipynb), as the
site offers it, is copied alone into an empty folder and run there by a Python that holds only
torch, numpy and matplotlib, plus ipykernel and nbclient to run a notebook (requirements/
examples.txt; `nox -s tests` creates that environment and names its python in $STANDALONE_PYTHON).

They run with ATEN_CPU_CAPABILITY=default (the build runs the default kernels), so an exact
assertion that holds only with one CPU's vector kernels fails here. Notebooks run with nbclient,
which lets a cell tagged ``raises-exception`` raise; then, as the build does
(docs/_ext/nb_expectations.py), each such cell must have raised exactly the error its
``expect-error`` declares. Scripts run with ``python -W error``, as the build runs them. Two run at
a time.

A page that runs more libraries lists them in ``requirements/<page>.txt`` (frameworks: Lightning,
Accelerate, Transformers, vector-quantize-pytorch). Its notebook must name them, at their
``constraints.txt`` pins, in its first cell; it runs in ``.nox/standalone-<page>`` (next to
$STANDALONE_PYTHON's environment), which holds requirements/examples.txt and exactly those, and
which `nox -s tests` installs before the tests: nothing is installed here, and nothing needs the
network.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import ANSI, HTML, IN_CI, ROOT, gallery_scripts, myst_pages

PYTHON = os.environ.get("STANDALONE_PYTHON")
TIMEOUT = 900
RUN_NOTEBOOK = (
    "import sys, nbformat, nbclient; nb = nbformat.read(sys.argv[1], as_version=4); "
    f"nbclient.NotebookClient(nb, timeout={TIMEOUT}, kernel_name='python3').execute(); "
    "nbformat.write(nb, sys.argv[1])"  # the executed notebook, for its declared errors
)
DOWNLOADS = sorted(
    [f"{page.stem}.ipynb" for page in myst_pages() if page.parent.name == "docs"]
    + [f"{script.stem}{suffix}" for script in gallery_scripts() for suffix in (".py", ".ipynb")]
)


PAGES = {page.stem for page in myst_pages() if page.parent.name == "docs"}


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


def page_python(name: str, folder: Path) -> tuple[str | None, str]:
    """The Python to run the download in (error text or None, python): $STANDALONE_PYTHON, or for
    a page with requirements/<page>.txt, that of ``.nox/standalone-<page>``, whose packages the
    notebook's first cell must name."""
    pins = extra_packages(name)
    if not pins:
        return None, PYTHON
    first_cell = "".join(json.loads((folder / name).read_text())["cells"][0]["source"])
    unnamed = [pin for pin in pins if pin not in first_cell]
    if unnamed:
        return f"{name}'s first cell does not name {unnamed} (constraints.txt)", ""
    env = Path(PYTHON).parents[1]
    python = env.with_name(f"{env.name}-{Path(name).stem}") / Path(PYTHON).relative_to(env)
    if not python.exists():
        return f"{python} is missing: `nox -s tests` installs it with {pins}", ""
    return None, str(python)


def declared_errors(path: Path) -> str | None:
    """What differs, in the executed notebook at ``path``, from the errors its cells declare."""
    import nbformat
    from nb_expectations import check_notebook

    problems = check_notebook(nbformat.read(path, as_version=4))
    return "\n".join(f"cell {index}: {problem}" for index, problem in problems) or None


def run_alone(name: str, folder: Path) -> str | None:
    """Run the download called ``name`` alone in ``folder``; the error text, or None if it ran."""
    found = sorted((HTML / "_downloads").rglob(name))
    if not found:
        return f"the site offers no download named {name}"
    shutil.copy(found[0], folder / name)
    error, python = page_python(name, folder)
    if error:
        return error
    keep = ("HOME", "LANG", "TMPDIR", "PATH")
    env = {key: os.environ[key] for key in keep if key in os.environ}
    env |= {"ATEN_CPU_CAPABILITY": "default", "IPYTHONDIR": str(folder / ".ipython")}
    env["PATH"] = os.pathsep.join([str(Path(python).parent), env.get("PATH", "")])
    if name.endswith(".py"):
        command = [python, "-W", "error", name]
    else:
        command = [python, "-c", RUN_NOTEBOOK, name]
    try:
        done = subprocess.run(
            command, cwd=folder, env=env, capture_output=True, text=True, timeout=TIMEOUT + 60
        )
    except subprocess.TimeoutExpired:
        return f"still running after {TIMEOUT + 60} s"
    if done.returncode:
        return ANSI.sub("", done.stdout + done.stderr)[-3000:]
    return declared_errors(folder / name) if name.endswith(".ipynb") else None


@pytest.fixture(scope="module")
def results(request, tmp_path_factory):
    """Run the selected downloads, two at a time, once for the whole module."""
    if not PYTHON:
        message = "no $STANDALONE_PYTHON (an environment with only requirements/examples.txt)"
        pytest.fail(message) if IN_CI else pytest.skip(message)
    names = [i.callspec.params["name"] for i in request.session.items if "name" in getattr(
        getattr(i, "callspec", None), "params", {})]  # fmt: skip
    with ThreadPoolExecutor(2) as pool:
        runs = {n: pool.submit(run_alone, n, tmp_path_factory.mktemp(n)) for n in names}
    return {name: run.result() for name, run in runs.items()}


@pytest.mark.parametrize("name", DOWNLOADS)
def test_download_runs_alone(site, results, name):
    assert results[name] is None, f"{name}, run alone in an empty folder, failed:\n{results[name]}"
