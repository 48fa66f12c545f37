"""Run every download of the built site alone on several torch releases (`nox -s versions`).

Why: the site is executed on one torch (``constraints.txt``), but readers run its downloads on
others. This runs each download the site offers (``_build/html/_downloads``: page notebooks,
gallery scripts and notebooks, helper modules) the way ``tests/test_downloads_run_alone.py`` does
(alone in an empty folder, ``ATEN_CPU_CAPABILITY=default``, notebooks with nbclient, scripts with
``python -W error``), once per release, and writes the results block of ``docs/torch_releases.py``,
which ``docs/which-torch.md`` shows. Too heavy for CI (a CUDA wheel of torch per release, GBs).

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
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOWNLOADS = ROOT / "_build" / "html" / "_downloads"
PINS = ROOT / "requirements" / "versions"
VENVS = Path(os.environ.get("TORCH_RELEASES", ROOT / ".nox" / "torch-releases"))
RESULTS = ROOT / "docs" / "torch_releases.py"  # its results block is rewritten here
BEGIN, END = "# --- results: written by measure/run_versions.py ---", "# --- end of results ---"
TIMEOUT = 900  # as tests/test_downloads_run_alone.py
RUN_NOTEBOOK = (
    "import sys, nbformat, nbclient; nb = nbformat.read(sys.argv[1], as_version=4); "
    f"nbclient.NotebookClient(nb, timeout={TIMEOUT}, kernel_name='python3').execute()"
)
ANSI = re.compile(r"\x1b\[[0-9;]*m")
ARROW = re.compile(r"^-+> *\d+ (.*)")  # IPython's "---> 10 assert ..."
ERROR = re.compile(r"^(?:[\w.]+\.)?\w*(?:Error|Exception|Warning|Interrupt)\b(?::.*)?$")


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


def first_error(text: str, name: str) -> tuple[str, str]:
    """(the error line, the line of the download it comes from) of a failed run's traceback."""
    lines = [ln.rstrip() for ln in text.splitlines()]
    errors = [ln for ln in lines if ERROR.match(ln) and "CellExecutionError" not in ln]
    at = ""
    for i, line in enumerate(lines[:-1]):
        if line.startswith("Cell In["):  # IPython: the arrow line of the cell's frame
            arrow = next((m for ln in lines[i + 1 :] if (m := ARROW.match(ln))), None)
            at = f"{line.split(',')[0][5:]}: {arrow.group(1).strip()}" if arrow else at
        elif line.startswith(f'  File "{name}"'):  # a script's frame
            at = f"line {line.split('line ')[1].split(',')[0]}: {lines[i + 1].strip()}"
    return (errors[-1] if errors else lines[-1] if lines else "")[:200], at[:200]


def run_alone(python: Path, download: Path, log: Path) -> dict:
    """Run one download alone in an empty folder, as tests/test_downloads_run_alone.py does; a
    helper module with the helper modules it imports beside it (its page offers them together)."""
    with tempfile.TemporaryDirectory(prefix="torch-release-") as tmp:
        folder = Path(tmp)
        shutil.copy(download, folder / download.name)
        if download.suffix == ".py" and not download.stem.startswith("plot_"):
            for name in re.findall(r"^\s*(?:from|import) (\w+)", download.read_text(), re.M):
                for sibling in DOWNLOADS.glob(f"*/{name}.py"):
                    shutil.copy(sibling, folder / sibling.name)
        keep = ("HOME", "LANG", "TMPDIR", "PATH")
        env = {key: os.environ[key] for key in keep if key in os.environ}
        env |= {"ATEN_CPU_CAPABILITY": "default", "IPYTHONDIR": str(folder / ".ipython")}
        env["PATH"] = os.pathsep.join([str(python.parent), env.get("PATH", "")])
        if download.suffix == ".py":
            command = [str(python), "-W", "error", download.name]
        else:
            command = [str(python), "-c", RUN_NOTEBOOK, download.name]
        try:
            done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True,
                                  timeout=TIMEOUT + 60)  # fmt: skip
        except subprocess.TimeoutExpired:
            return {"outcome": "fail", "error": f"still running after {TIMEOUT + 60} s", "at": ""}
    log.parent.mkdir(exist_ok=True)
    log.write_text(ANSI.sub("", done.stdout + done.stderr))  # kept beside the results
    if done.returncode == 0:
        return {"outcome": "pass", "error": "", "at": ""}
    error, at = first_error(log.read_text(), download.name)
    return {"outcome": "fail", "error": error, "at": at}


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
        if results.get(download.name, {}).get("digest") == digest and not (forced or again):
            return
        python, extras = venv / "bin" / "python", ROOT / "requirements" / f"{download.stem}.txt"
        result = None
        if download.suffix == ".ipynb" and extras.is_file():
            more = VENVS / f"torch-{release}+{download.stem}"
            if problem := install(more, release, requirement_lines(extras), base=venv):
                result = {"outcome": "extras", "error": problem, "at": ""}
            python = more / "bin" / "python"
        result = result or run_alone(python, download, venv / "logs" / f"{download.name}.log")
        if again:  # a failure run once more, alone: "flaky" if it passes, with the first error
            if result["outcome"] != "pass":
                return
            result = results[download.name] | {"outcome": "flaky"}
        results[download.name] = result | {"digest": digest}
        ran.add(download.name)
        store.write_text(json.dumps(results, indent=1, sort_keys=True))
        print(f"  {result['outcome']:6} {download.name} {result['error']}", flush=True)

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
    }
    rows, numpy = [], {}
    for release in releases:
        store = VENVS / f"torch-{release}" / "results.json"
        found = json.loads(store.read_text()) if store.is_file() else {}
        freeze = (PINS / f"torch-{release}.freeze.txt").read_text() if found else ""
        numpy[release] = next(
            (ln.split("==")[1] for ln in freeze.splitlines() if ln.startswith("numpy==")), ""
        )
        for d in downloads:
            r = found.get(d.name, {"outcome": "not run", "error": "", "at": ""})
            r = r | {"error": r["error"].replace(str(VENVS), "$TORCH_RELEASES")}  # no machine path
            rows.append(f"    ({json.dumps(release)}, {json.dumps(d.name)}, {json.dumps(r['outcome'])}, "
                        f"{json.dumps(r['error'], ensure_ascii=False)}, {json.dumps(r['at'], ensure_ascii=False)}),")  # fmt: skip
    block = "\n".join([
        BEGIN,
        "# fmt: off",
        f"RUN = {json.dumps(run)}",
        f"NUMPY = {json.dumps(numpy)}  # the numpy each release ran with",
        "# (release, download, outcome, first error, the line it points at); outcome: pass, fail,",
        "# flaky (failed, then passed when run again), extras (the page's extra requirements do not",
        "# install on this release), not run",
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
    downloads = sorted((p for p in DOWNLOADS.rglob("*") if p.suffix in {".ipynb", ".py"}),
                       key=lambda p: p.name)  # fmt: skip
    if not downloads:
        sys.exit(f"no downloads in {DOWNLOADS}: build the site first (nox -s docs)")
    chosen = [d for d in downloads if not args.only or d.name in args.only]
    VENVS.mkdir(parents=True, exist_ok=True)
    for release in args.release:
        run_release(release, chosen, args.fresh, args.jobs, bool(args.only))
    write_results(every, downloads)


if __name__ == "__main__":
    main()
