"""Run every download of the built site alone on several torch releases (`nox -s versions`).

Why: the site is executed on one torch (``constraints.txt``), but readers run its downloads on
others. This runs each download the site offers (``_build/html/_downloads``: page notebooks,
gallery scripts, helper modules; a gallery notebook is its script's code, checked by the tests)
with the project's one download runner, ``measure/run_alone.py``, which
``tests/test_downloads_run_alone.py`` uses too: alone in an empty folder, a notebook past its first
failure with every declared error checked, a script with ``python -W error``. Once per release; it
writes the results block of ``docs/torch_releases.py`` (per download: pass or fail, the cells that
failed with what, the cells that did not run), which ``docs/which-torch.md`` shows. Too heavy for
CI (a wheel of torch per release).

Releases: one ``requirements/versions/torch-X.txt`` each; its lines replace those packages in
``requirements/examples.txt`` and ``constraints.txt``, everything else keeps the site's pins. Each
release gets a cached virtualenv ``.nox/torch-releases/torch-X`` (``$TORCH_RELEASES`` elsewhere)
whose ``pip freeze`` is committed as ``requirements/versions/torch-X.freeze.txt``. A page whose
download needs more (``requirements/<page>.txt``) runs in a copy of that virtualenv with those
installed; if they do not install on a release, the page is recorded as "extras", not as failing.

Resumable: each result is kept in the release's virtualenv with a digest of the download, so an
interrupted run, or a run after one page changed, runs only what has no result yet (``--only``
runs the named downloads again). A download that fails is run once more at the end, alone: if it
then passes, it is recorded as "flaky", with the first error (a timeout on a busy machine).

    python measure/run_versions.py [--release X ...] [--only NAME ...] [--fresh] [--jobs N]
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from run_alone import describe, run_alone

ROOT = Path(__file__).resolve().parents[1]
DOWNLOADS = ROOT / "_build" / "html" / "_downloads"
PINS = ROOT / "requirements" / "versions"
VENVS = Path(os.environ.get("TORCH_RELEASES", ROOT / ".nox" / "torch-releases"))
RESULTS = ROOT / "docs" / "torch_releases.py"  # its results block is rewritten here
BEGIN, END = "# --- results: written by measure/run_versions.py ---", "# --- end of results ---"


def name_of(line: str) -> str:
    return re.split(r"[=<>~! \[;]", line.strip(), maxsplit=1)[0].lower().replace("_", "-")


def requirement_lines(path: Path) -> list[str]:
    return [ln.strip() for ln in path.read_text().splitlines() if ln.strip() and ln[0] != "#"]


def pins_for(release: str) -> tuple[list[str], list[str]]:
    """(requirements, constraints) of a release: the site's, with the release's lines instead."""
    own = requirement_lines(PINS / f"torch-{release}.txt")
    names = {name_of(line) for line in own}
    keep = [ln for ln in requirement_lines(ROOT / "constraints.txt") if name_of(ln) not in names]
    wanted = [name_of(ln) for ln in requirement_lines(ROOT / "requirements" / "examples.txt")]
    return [n for n in wanted if n not in names] + own, keep + own


def pip(python: Path, *args: str) -> subprocess.CompletedProcess:
    command = [str(python), "-m", "pip", "--disable-pip-version-check", *args]
    return subprocess.run(command, capture_output=True, text=True)


def install(venv: Path, release: str, requirements: list[str], base: Path | None = None) -> str:
    """Create (or copy from ``base``) and fill ``venv`` once; '' or pip's error. Cached by a stamp."""
    _, constraints = pins_for(release)
    stamp = hashlib.sha256(repr((requirements, constraints)).encode()).hexdigest()
    if (venv / "installed").is_file() and (venv / "installed").read_text() == stamp:
        return ""
    if base is not None:  # hard links: cheap; pip unlinks a file before it writes one
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run(["cp", "-al", str(base), str(venv)], check=True)
        for own in ("installed", "constraints.txt", "requirements.txt", "results.json"):
            (venv / own).unlink(missing_ok=True)  # written here: must not write through to base
    elif not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    (venv / "constraints.txt").write_text("\n".join(constraints) + "\n")
    (venv / "requirements.txt").write_text("\n".join(requirements) + "\n")
    done = pip(venv / "bin" / "python", "install", "-q", "-r", str(venv / "requirements.txt"),
               "-c", str(venv / "constraints.txt"))  # fmt: skip
    if done.returncode != 0:
        lines = (done.stdout + done.stderr).strip().splitlines()
        return next((ln for ln in lines if ln.startswith("ERROR: ")), lines[-1])
    (venv / "installed").write_text(stamp)
    return ""


def run_release(release: str, downloads: list[Path], fresh: bool, jobs: int, forced: bool) -> None:
    venv = VENVS / f"torch-{release}"
    requirements, _ = pins_for(release)
    print(f"torch {release}: virtualenv {venv}", flush=True)
    if problem := install(venv, release, requirements):
        sys.exit(f"torch {release}: the pins do not install: {problem}")
    frozen = pip(venv / "bin" / "python", "freeze", "--exclude-editable").stdout
    (PINS / f"torch-{release}.freeze.txt").write_text(frozen)
    store = venv / "results.json"
    results = {} if fresh or not store.is_file() else json.loads(store.read_text())

    def one(download: Path, again: bool = False) -> None:
        digest = hashlib.sha256(download.read_bytes()).hexdigest()
        known = results.get(download.name, {})
        if known.get("digest") == digest and "cells" in known and not (forced or again):
            return  # ("cells": a result of this runner, not of the one before it)
        python, extras = venv / "bin" / "python", ROOT / "requirements" / f"{download.stem}.txt"
        result = None
        if download.suffix == ".ipynb" and extras.is_file():
            more = VENVS / f"torch-{release}+{download.stem}"
            if problem := install(more, release, requirement_lines(extras), base=venv):
                result = {"outcome": "extras", "cells": 0, "failed": [], "not_run": [],
                          "error": problem}  # fmt: skip
            python = more / "bin" / "python"
        log = venv / "logs" / f"{download.name}.log"
        result = result or run_alone(download, python, log=log)
        result.pop("differs", None)  # outputs differ between releases: only the tests compare them
        if again:  # a failure run once more, alone: "flaky" if it passes, with the first error
            if result["outcome"] != "pass":
                return
            result = results[download.name] | {"outcome": "flaky"}
        results[download.name] = result | {"digest": digest}
        ran.add(download.name)
        store.write_text(json.dumps(results, indent=1, sort_keys=True))
        print("  " + describe(download.name, result).replace("\n", "\n  "), flush=True)

    started, ran = time.monotonic(), set()
    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(one, downloads))
    for download in downloads:  # then each new failure once more, with nothing else running
        if download.name in ran and results[download.name]["outcome"] == "fail":
            one(download, again=True)
    print(f"torch {release}: done in {(time.monotonic() - started) / 60:.1f} min", flush=True)


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()


def write_results(releases: list[str], downloads: list[Path]) -> None:
    """docs/torch_releases.py: every release's result for every download offered now."""
    changed = git("status", "--porcelain", "--", "docs", "gallery", "index.md", "conf.py")
    changed = [ln for ln in changed.splitlines() if not ln.endswith(RESULTS.name)]
    today = datetime.datetime.now(datetime.UTC).date()
    run = {
        "date": f"{today.day} {today:%B %Y}",  # spelt out: see torch_releases.summary
        "commit": git("rev-parse", "--short", "HEAD")
        + (" (with uncommitted changes)" * bool(changed)),
        "site_torch": requirement_lines(ROOT / "requirements" / "examples.txt")[0].split("==")[1],
        "runner": "measure/run_alone.py",  # every cell judged, declared errors checked
    }
    rows, numpy = [], {}
    for release in releases:
        store = VENVS / f"torch-{release}" / "results.json"
        if not store.is_file():
            continue  # never run here: the page names only the releases that ran
        found = json.loads(store.read_text())
        freeze = (PINS / f"torch-{release}.freeze.txt").read_text() if found else ""
        numpy[release] = next(
            (ln.split("==")[1] for ln in freeze.splitlines() if ln.startswith("numpy==")), ""
        )
        for d in downloads:
            r, digest = found.get(d.name), hashlib.sha256(d.read_bytes()).hexdigest()
            if r is None or "cells" not in r or r.get("digest") != digest:  # none, or of an older
                r = {"outcome": "not run", "cells": 0, "failed": [], "not_run": [], "error": ""}
            row = [release, d.name, r["outcome"], r["cells"], r["failed"], r["not_run"], r["error"]]
            text = json.dumps(row, ensure_ascii=False).replace(str(VENVS), "$TORCH_RELEASES")
            rows.append(f"    ({text[1:-1]}),")  # no machine path
    block = "\n".join([
        BEGIN,
        "# fmt: off",
        f"RUN = {json.dumps(run)}",
        f"NUMPY = {json.dumps(numpy)}  # the numpy each release ran with",
        "# (release, download, outcome, cells, failed, not_run, error), by measure/run_alone.py:",
        "# outcome: pass, fail, flaky (failed, then passed when run again), extras (the page's extra",
        "# requirements do not install on this release), not run; cells: a notebook's code cells or",
        "# a script's # %% blocks; failed: [cell, problem, the line it points at] for each cell that",
        "# raised what it should not, or not what it declares; not_run: cells that never ran; error:",
        "# what stopped the whole run (extras: pip's error)",
        "RESULTS = [",
        *rows,
        "]",
        "# fmt: on",
        END,
    ])  # fmt: skip
    text = RESULTS.read_text()
    text = text[: text.index(BEGIN)] + block + text[text.index(END) + len(END) :]
    RESULTS.write_text(text)
    print(f"wrote {RESULTS.relative_to(ROOT)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    every = sorted((p.name[6:-4] for p in PINS.glob("torch-*.txt") if "freeze" not in p.name),
                   key=lambda v: tuple(int(x) for x in v.split(".")))  # fmt: skip
    parser.add_argument("--release", nargs="+", choices=every, default=every)
    parser.add_argument("--only", nargs="+", help="run these downloads (file names) again")
    parser.add_argument("--fresh", action="store_true", help="forget earlier results")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    downloads = sorted((p for p in DOWNLOADS.rglob("*") if p.suffix in {".ipynb", ".py"}
                        and not (p.suffix == ".ipynb" and p.stem.startswith("plot_"))),
                       key=lambda p: p.name)  # a gallery notebook is its script's code  # fmt: skip
    if not downloads:
        sys.exit(f"no downloads in {DOWNLOADS}: build the site first (nox -s docs)")
    chosen = [d for d in downloads if not args.only or d.name in args.only]
    VENVS.mkdir(parents=True, exist_ok=True)
    for release in args.release:
        run_release(release, chosen, args.fresh, args.jobs, bool(args.only))
    write_results(every, downloads)


if __name__ == "__main__":
    main()
