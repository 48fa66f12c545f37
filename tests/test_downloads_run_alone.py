"""Every download runs alone: each page's notebook and each gallery script (.py and .ipynb), as the
site offers it, is copied alone into an empty folder and run there by a Python that holds only
torch, numpy and matplotlib, plus ipykernel and nbclient to run a notebook (requirements/
examples.txt; `nox -s tests` creates that environment and names its python in $STANDALONE_PYTHON).

They run with ATEN_CPU_CAPABILITY=default (the build runs the default kernels), so an exact
assertion that holds only with one CPU's vector kernels fails here. Notebooks run with nbclient,
which lets a cell tagged ``raises-exception`` raise; scripts run with ``python -W error``, as the
build runs them. Two run at a time.

A page that runs more libraries lists them in ``requirements/<page>.txt`` (frameworks: Lightning,
Accelerate, Transformers, vector-quantize-pytorch). Its notebook must name them, at their
``constraints.txt`` pins, in its first cell; they are installed for that notebook alone (pip
``--prefix`` into its folder, on its PYTHONPATH), never into $STANDALONE_PYTHON's environment.
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
    f"nbclient.NotebookClient(nb, timeout={TIMEOUT}, kernel_name='python3').execute()"
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


def install_extras(name: str, folder: Path) -> tuple[str | None, str]:
    """Install the notebook's extra packages into ``folder``; (error text or None, PYTHONPATH)."""
    pins = extra_packages(name)
    if not pins:
        return None, ""
    first_cell = "".join(json.loads((folder / name).read_text())["cells"][0]["source"])
    unnamed = [pin for pin in pins if pin not in first_cell]
    if unnamed:
        return f"{name}'s first cell does not name {unnamed} (constraints.txt)", ""
    prefix = folder / ".extra"
    install = [PYTHON, "-m", "pip", "install", "--quiet", "--prefix", str(prefix), *pins]
    done = subprocess.run([*install, "-c", str(ROOT / "constraints.txt")], capture_output=True,
                          text=True)  # fmt: skip
    if done.returncode:
        return f"installing {pins} failed:\n{done.stdout}{done.stderr}"[-3000:], ""
    where = "import sys, sysconfig; v = {'base': sys.argv[1], 'platbase': sys.argv[1]}; "
    where += "print(sysconfig.get_path('purelib', vars=v), sysconfig.get_path('platlib', vars=v))"
    paths = subprocess.run([PYTHON, "-c", where, str(prefix)], capture_output=True, text=True)
    return None, os.pathsep.join(dict.fromkeys(paths.stdout.split()))


def run_alone(name: str, folder: Path) -> str | None:
    """Run the download called ``name`` alone in ``folder``; the error text, or None if it ran."""
    found = sorted((HTML / "_downloads").rglob(name))
    if not found:
        return f"the site offers no download named {name}"
    shutil.copy(found[0], folder / name)
    error, extra_path = install_extras(name, folder)
    if error:
        return error
    keep = ("HOME", "LANG", "TMPDIR", "PATH")
    env = {key: os.environ[key] for key in keep if key in os.environ}
    if extra_path:
        env["PYTHONPATH"] = extra_path
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
