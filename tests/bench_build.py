"""Build benchmark (`nox -s bench`): prints figures; it is not a test and never fails on them.

In a fresh copy of the repository (dependencies installed, caches empty) it times a cold build, an
unchanged rebuild, and a rebuild after editing one gallery script, then lists how long each page
and script took to execute. Targets on 2 cores: cold <= 60 s, rebuild/cold <= 0.15, each gallery
script <= 5 s.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from conftest import copy_tree, gallery_scripts, run_build  # noqa: E402

TARGETS = {"cold": 60.0, "ratio": 0.15, "script": 5.0}


def timed_build(project: Path) -> float:
    start = time.perf_counter()
    result = run_build(project)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"bench: the build failed:\n{(result.stdout + result.stderr)[-4000:]}")
    return elapsed


def verdict(ok: bool) -> str:
    return "ok" if ok else "OVER TARGET"


def page_times(project: Path) -> dict[str, float]:
    """Execution seconds per MyST page, as recorded by jupyter-cache."""
    from jupyter_cache import get_cache

    cache = get_cache(project / "_build" / ".jupyter_cache")
    return {
        Path(record.uri).relative_to(project).as_posix(): record.data.get(
            "execution_seconds", float("nan")
        )
        for record in cache.list_cache_records()
    }


def script_times(project: Path) -> dict[str, float]:
    """Execution seconds per gallery script, from sphinx-gallery's per-example cost files."""
    times = {}
    for script in gallery_scripts():
        cost = project / "auto_examples" / f"{script.stem}.cost.json"
        if cost.exists():
            times[f"gallery/{script.name}"] = float(json.loads(cost.read_text())["time"])
        else:  # fall back to running it on its own
            start = time.perf_counter()
            subprocess.run(
                [sys.executable, str(script)],
                cwd=tempfile.gettempdir(),
                check=True,
                capture_output=True,
                env={"MPLBACKEND": "Agg", "PATH": ""},
            )
            times[f"gallery/{script.name}"] = time.perf_counter() - start
    return times


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        project = copy_tree(Path(tmp) / "site")
        cold = timed_build(project)
        warm = timed_build(project)
        script = project / "gallery" / gallery_scripts()[0].name
        script.write_text(script.read_text() + "\n# An edit for the benchmark.\n")
        edit = timed_build(project)
        pages, scripts = page_times(project), script_times(project)
        shutil.rmtree(project, ignore_errors=True)

    ratio = warm / cold
    print("\nBuild benchmark (2-core targets in brackets)")
    print(
        f"  cold build (deps installed, caches empty): {cold:6.1f} s  [<= {TARGETS['cold']:.0f} s] "
        f"{verdict(cold <= TARGETS['cold'])}"
    )
    print(f"  unchanged rebuild:                         {warm:6.1f} s")
    print(
        f"  rebuild / cold:                            {ratio:6.3f}    [<= {TARGETS['ratio']}] "
        f"{verdict(ratio <= TARGETS['ratio'])}"
    )
    print(f"  rebuild after editing one script:          {edit:6.1f} s")
    print("  execution time per page and script:")
    for name, seconds in sorted({**pages, **scripts}.items()):
        limit = TARGETS["script"] if name.startswith("gallery/") else None
        flag = "" if limit is None else f"  [<= {limit:.0f} s] {verdict(seconds <= limit)}"
        print(f"    {name:<55} {seconds:6.2f} s{flag}")


if __name__ == "__main__":
    main()
