"""Every download runs alone: each page's notebook and each gallery script (.py and .ipynb), as the
site offers it, is copied alone into an empty folder and run there by a Python that holds only
torch, numpy and matplotlib, plus ipykernel and nbclient to run a notebook (requirements/
examples.txt; `nox -s tests` creates that environment and names its python in $STANDALONE_PYTHON).

They run with ATEN_CPU_CAPABILITY=default (the build runs the default kernels), so an exact
assertion that holds only with one CPU's vector kernels fails here. Notebooks run with nbclient,
which lets a cell tagged ``raises-exception`` raise; scripts run with ``python -W error``, as the
build runs them. Two run at a time.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import ANSI, HTML, IN_CI, gallery_scripts, myst_pages

PYTHON = os.environ.get("STANDALONE_PYTHON")
TIMEOUT = 900
RUN_NOTEBOOK = (
    "import sys, nbformat, nbclient; nb = nbformat.read(sys.argv[1], as_version=4); "
    f"nbclient.NotebookClient(nb, timeout={TIMEOUT}, kernel_name='python3').execute()"
)
DOWNLOADS = sorted(
    [f"{page.stem}.ipynb" for page in myst_pages() if page.parent.name == "docs"]
    + [f"{script.stem}{suffix}" for script in gallery_scripts() for suffix in (".py", ".ipynb")]
)


def run_alone(name: str, folder: Path) -> str | None:
    """Run the download called ``name`` alone in ``folder``; the error text, or None if it ran."""
    found = sorted((HTML / "_downloads").rglob(name))
    if not found:
        return f"the site offers no download named {name}"
    shutil.copy(found[0], folder / name)
    keep = ("HOME", "LANG", "TMPDIR", "PATH")
    env = {key: os.environ[key] for key in keep if key in os.environ}
    env |= {"ATEN_CPU_CAPABILITY": "default", "IPYTHONDIR": str(folder / ".ipython")}
    env["PATH"] = os.pathsep.join([str(Path(PYTHON).parent), env.get("PATH", "")])
    if name.endswith(".py"):
        command = [PYTHON, "-W", "error", name]
    else:
        command = [PYTHON, "-c", RUN_NOTEBOOK, name]
    try:
        done = subprocess.run(
            command, cwd=folder, env=env, capture_output=True, text=True, timeout=TIMEOUT + 60
        )
    except subprocess.TimeoutExpired:
        return f"still running after {TIMEOUT + 60} s"
    return None if done.returncode == 0 else ANSI.sub("", done.stdout + done.stderr)[-3000:]


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
