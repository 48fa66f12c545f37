"""Sessions for building, testing and measuring the site. See README.md for what each is for.

Every session installs from ``requirements/*.txt`` under ``-c constraints.txt`` (the one lock file),
so nothing here can pull an unpinned torch.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import zlib
from pathlib import Path

import nox

sys.path.insert(0, str(Path(__file__).resolve().parent / "tools"))
from build_site import can_isolate_network  # noqa: E402

nox.options.sessions = ["docs"]
nox.options.reuse_venv = "yes"
nox.options.default_venv_backend = "venv"  # pip/venv: uv does not see the local torch wheel

ROOT = Path(__file__).resolve().parent
BUILD = ROOT / "_build"
HTML = BUILD / "html"
CONSTRAINTS = ["-c", "constraints.txt"]
BUILD_SITE = ["python", "tools/build_site.py"]
NODE_TOOLS = ROOT / ".ci" / "node"  # vnu-jar, axe-core, lighthouse, pinned by its package-lock.json


def install(session: nox.Session, name: str) -> None:
    """Install requirements/<name>.txt, pinned by constraints.txt."""
    session.install("-r", f"requirements/{name}.txt", *CONSTRAINTS)


@nox.session
def docs(session: nox.Session) -> None:
    """Build the site into _build/html, executing every page and gallery script."""
    install(session, "docs")
    session.run(*BUILD_SITE, "--", *session.posargs)
    session.log(f"Built: open {HTML / 'index.html'}")


@nox.session
def tests(session: nox.Session) -> None:
    """Build the site with no network, then test it (browser tests need Chromium; CI requires it).
    Every test: the full tier (.ci/run). `nox -s tests -- -m fast`: the fast tier, the tests that
    read the one built site (no second build, no download run alone, no mutation).
    `nox -s tests -- tests/test_links.py`: one file. Other arguments go to pytest."""
    # Every requirements/*.txt, so that this environment is the lock's (tests/test_lock.py compares
    # its `pip freeze` with constraints.txt); tests.txt alone would do for the other tests.
    session.install(*requirement_args(), *CONSTRAINTS)
    if shutil.which("npm"):
        install_node_tools(session)  # the pinned Nu checker and axe-core for tests/test_quality.py
    offline = can_isolate_network()
    if not offline:
        if os.environ.get("CI") == "true":
            session.error(
                "CI must prove the build works offline, but unshare/ip/root are unavailable."
            )
        session.warn("SKIPPING the offline proof: this machine cannot create a network namespace.")
    session.run(*BUILD_SITE, *(["--offline"] if offline else []))
    args = list(session.posargs)
    if not any((ROOT / arg.split("::")[0]).exists() for arg in args if not arg.startswith("-")):
        args.append("tests")  # `-- -m fast`, `-- -k name`: the whole folder, selected
    fast = "fast" in args and "-m" in args
    env = (
        {} if fast else {"STANDALONE_PYTHON": standalone_python(session)}
    )  # the fast tier runs none
    session.run("pytest", "--color=no", "--durations=10", *args, env=env)


def requirement_args() -> list[str]:
    """``-r requirements/<name>.txt`` for every requirements file: what the lock pins."""
    files = sorted((ROOT / "requirements").glob("*.txt"))
    return [arg for path in files for arg in ("-r", path.relative_to(ROOT).as_posix())]


def standalone_python(session: nox.Session) -> str:
    """Virtualenvs in which tests/test_downloads_run_alone.py runs every download as a reader
    would, with no network: ``.nox/standalone`` holds only requirements/examples.txt (torch, numpy,
    matplotlib and a kernel). A page that runs more libraries names them, pinned, in its download's
    first cell and lists them in ``requirements/<page>.txt``; the download of that page alone runs
    in ``.nox/standalone-<page>``, which holds requirements/examples.txt and exactly those. Both
    are installed here, before the tests, with the pins of constraints.txt. Returns the python of
    ``.nox/standalone``; the test finds ``standalone-<page>`` next to it."""
    pages = sorted(
        path.stem for path in (ROOT / "requirements").glob("*.txt")
        if (ROOT / "docs" / f"{path.stem}.md").exists()
    )  # fmt: skip
    for page in [None, *pages]:
        folder = ROOT / ".nox" / ("standalone" if page is None else f"standalone-{page}")
        python = folder / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
        if not python.exists():
            session.run("python", "-m", "venv", str(folder))
        extra = [] if page is None else ["-r", f"requirements/{page}.txt"]
        session.run(str(python), "-m", "pip", "install", "--quiet", "-r", "requirements/examples.txt",
                    *extra, *CONSTRAINTS, external=True)  # fmt: skip
    return str(ROOT / ".nox" / "standalone" / python.relative_to(folder))


@nox.session
def versions(session: nox.Session) -> None:
    """Run every download alone on each torch release in requirements/versions (a cached
    virtualenv each; resumable) with the tests' runner (measure/run_alone.py), and write the
    per-cell results into docs/torch_releases.py. Heavy: not part of tests.
    `nox -s versions -- --release 2.4.1 --only wrappers.ipynb` runs a part."""
    install(session, "docs")
    # the results are about to be rewritten: old unexplained failures must not stop this build
    session.run(*BUILD_SITE, env={"TORCH_RELEASES_RERUN": "1"})
    session.run("python", "measure/run_versions.py", *session.posargs)


@nox.session
def serve(session: nox.Session) -> None:
    """Live preview with sphinx-autobuild (rebuilds on save; executed results stay cached)."""
    install(session, "docs")
    session.install("-r", "requirements/dev.txt", *CONSTRAINTS)
    session.run(
        "sphinx-autobuild",
        "-b",
        "html",
        "-d",
        str(BUILD / "doctrees"),
        "--ignore",
        "*/auto_examples/*",
        "--ignore",
        "*/_build/*",
        "--watch",
        "gallery",
        ".",
        str(HTML),
        *session.posargs,
    )


# The pages' code cells are linted (tests/lint_pages.py) and every violation is printed; while this
# is False, they do not fail `nox -s lint`. Set it True once the pages are clean: from then on a
# page violation fails lint (and .ci/run) like any other.
PAGES_MUST_LINT = True


@nox.session
def lint(session: nox.Session) -> None:
    """ruff (code style and errors) on the Python files and on the pages' code cells (through
    jupytext: tests/lint_pages.py), and sphinx-lint (reStructuredText in the gallery)."""
    session.install("-r", "requirements/dev.txt", *CONSTRAINTS)
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("python", "tests/lint_pages.py", *(["--strict"] if PAGES_MUST_LINT else []))
    session.run("sphinx-lint", "gallery", "docs")


@nox.session
def linkcheck(session: nox.Session) -> None:
    """Check external links, including every intersphinx target (needs network; not in tests)."""
    install(session, "docs")
    session.run(
        "sphinx-build",
        "-W",
        "--keep-going",
        "-b",
        "linkcheck",
        "-d",
        str(BUILD / "doctrees"),
        ".",
        str(BUILD / "linkcheck"),
    )


INVENTORIES = ROOT / "docs" / "_inventories"


def record_inventory(name: str, kind: str, source: str) -> None:
    """Record in docs/_inventories/provenance.json what ``<name>.inv`` is (official or
    synthesized), where it came from, its object count and its SHA-256 (tests/test_inventories.py
    checks them, so a file edited by hand no longer matches its record)."""
    path = INVENTORIES / f"{name}.inv"
    data = path.read_bytes()
    header_end = 0
    for _ in range(4):  # "# Sphinx inventory version 2", project, version, "...zlib."
        header_end = data.index(b"\n", header_end) + 1
    body = zlib.decompress(data[header_end:]).decode()
    provenance = INVENTORIES / "provenance.json"
    records = json.loads(provenance.read_text()) if provenance.exists() else {}
    records[path.name] = {
        "kind": kind,
        "source": source,
        "objects": sum(1 for line in body.splitlines() if line.strip()),
        "sha256": hashlib.sha256(data).hexdigest(),
    }
    provenance.write_text(json.dumps(records, indent=2, sort_keys=True) + "\n")


@nox.session
def inventories(session: nox.Session) -> None:
    """Replace docs/_inventories with the official intersphinx inventories of the pinned torch and
    of this Python, and record them as official in docs/_inventories/provenance.json. Needs the
    documentation hosts (not only the package index); run it after a torch pin change, then change
    the README's row for docs/_inventories from "synthesized" to "official"."""
    install(session, "docs")
    session.install("sphobjinv", *CONSTRAINTS)
    torch_minor = session.run(
        "python", "-c", "import torch; print(*torch.__version__.split('.')[:2], sep='.')",
        silent=True,
    ).strip()  # fmt: skip
    python_minor = "{}.{}".format(*sys.version_info[:2])
    for name, url in (
        ("torch", f"https://docs.pytorch.org/docs/{torch_minor}/objects.inv"),
        ("python", f"https://docs.python.org/{python_minor}/objects.inv"),
    ):
        session.run(
            "sphobjinv", "convert", "zlib", "-q", "-u", url, f"docs/_inventories/{name}.inv"
        )
        record_inventory(name, "official", url)


LOCK_HEADER = """\
# The one lock file: every package any nox session installs, pinned. Written by `nox -s lock`
# (every requirements/*.txt installed under these pins, then `pip freeze`); never edit it by hand.
"""


def lock_text(freeze: str) -> str:
    """constraints.txt as `nox -s lock` writes it from the `pip freeze` of an environment holding
    every requirements/*.txt: the header, then ``name==version`` lines sorted by name (as pip
    freeze sorts them), without local version labels (``torch==2.13.0+cpu`` is pinned as
    ``torch==2.13.0``, which the CPU build and PyPI's build both satisfy). tests/test_lock.py
    compares the committed file with this."""
    pins = []
    for line in freeze.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, equals, version = line.partition("==")
        if not equals or not re.fullmatch(r"[A-Za-z0-9._-]+", name):
            raise ValueError(
                f"pip freeze gave {line!r}, not name==version: install it from an index"
            )
        pins.append(f"{name}=={version.split('+')[0]}")
    pins = sorted(set(pins), key=lambda pin: pin.partition("==")[0].lower())  # pip freeze's order
    return LOCK_HEADER + "".join(f"{pin}\n" for pin in pins)


@nox.session(reuse_venv="never")
def lock(session: nox.Session) -> None:
    """Rewrite constraints.txt: install every requirements/*.txt into a fresh environment under the
    current pins, then write its `pip freeze` (lock_text). Every pinned package keeps its version,
    so the same inputs give the same file; a package no pin covers (a new requirement or a new
    dependency) gets its newest release. To move a pin, delete its line first. (A machine-wide pip
    constraint, such as a cap on torch, can only narrow what is installed; it is never written.)"""
    session.install(*requirement_args(), *CONSTRAINTS)
    frozen = session.run("python", "-m", "pip", "freeze", "--exclude-editable", silent=True)
    (ROOT / "constraints.txt").write_text(lock_text(frozen))


def install_node_tools(session: nox.Session) -> None:
    """`npm ci` the pinned audit tools into .ci/node/node_modules (no install scripts: vnu-jar's
    would download a JDK; the system Java runs vnu.jar)."""
    if not (NODE_TOOLS / "node_modules" / ".package-lock.json").exists():
        session.run(
            "npm",
            "ci",
            "--ignore-scripts",
            "--no-audit",
            "--no-fund",
            "--prefix",
            str(NODE_TOOLS),
            external=True,
        )


@nox.session
def audit(session: nox.Session) -> None:
    """Print the site's quality figures: Nu HTML errors, axe violations (light and dark), page
    weight, Lighthouse (mobile) on the home page and the largest pages, search ranking. Never
    fails on a figure. `nox -s audit -- --queries FILE` scores another query file (the held-out
    set only once the lead releases it: measure/search_quality.py)."""
    install(session, "tests")
    install_node_tools(session)
    session.run(*BUILD_SITE)
    session.run("python", "measure/site_audit.py", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """Print build timings: cold, unchanged rebuild, one-example edit, per-example execution.
    `nox -s bench -- --stress N`: N cold builds in a row beside a CPU load, and how many passed."""
    install(session, "tests")
    session.run("python", "measure/bench_build.py", *session.posargs)
