"""Build benchmark (`nox -s bench`): prints figures; it is not a test and never fails on them.

In a fresh copy of the repository (dependencies installed, caches empty) it times a cold build, an
unchanged rebuild, a rebuild after editing one page and one after editing one gallery script. Then
it shows where the cold build's time goes, and the floor it is measured against:

* **execution in one process**: every page's code cells and every gallery script run one after
  another in this single Python process (torch imported once, no kernels, no Sphinx);
* **Sphinx executing nothing**: the same build with page execution off and the gallery not run;
* **floor** = the two added up; **cold / floor** says what kernels, parallel readers and the
  gallery's own machinery cost on top of the work itself.

Targets on 2 cores: cold <= 60 s, cold / floor <= 3, unchanged rebuild / cold <= 0.10, rebuild
after editing one page / cold <= 0.10, each gallery script <= 5 s; each instrument
(docs/find_old_graph.py, docs/why_no_grad.py) on a model of 451 modules and 9,301 nodes <= 6 of
the reader's own training steps of that model (CPU time of this process, best of three). The
ratios are measured in one run, so they hold on a busy machine too; the absolute times do not.
Timings vary with the machine's load: read them on an idle machine.

``--instruments`` measures the instruments only (seconds, not minutes). ``--stress N`` instead
runs N cold builds in a row, each in a fresh copy with fresh matplotlib and torch caches (as on a
new machine), while one busy process per core loads the machine, and reports how many succeeded;
each failed build's full log is kept in ``_build/stress/``.

    python measure/bench_build.py [--instruments | --stress N]
"""

from __future__ import annotations

import contextlib
import json
import os
import runpy
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

from builds import ROOT, copy_tree, gallery_scripts, myst_pages, read_notebook, run_build

sys.path.insert(0, str(ROOT / "tools"))  # forking_kernel

TARGETS = {
    "cold": 60.0,
    "floor_ratio": 3.0,
    "ratio": 0.10,
    "page_ratio": 0.10,
    "script": 5.0,
    "instrument_steps": 6.0,
}


def timed(function, *args) -> tuple[float, object]:
    start = time.perf_counter()
    result = function(*args)
    return time.perf_counter() - start, result


def build_or_exit(project: Path, *extra: str) -> None:
    result = run_build(project, extra=extra)
    if result.returncode != 0:
        sys.exit(f"bench: the build failed:\n{(result.stdout + result.stderr)[-4000:]}")


def sphinx_without_execution(project: Path) -> float:
    """A build of the same sources that executes nothing (pages unexecuted, gallery not run).
    Not strict: unexecuted pages warn by design."""
    out = project / "_build" / "noexec"
    command = [
        sys.executable, "-m", "sphinx", "-q", "-j", "auto", "-b", "html",
        "-d", str(out / "doctrees"),
        "-D", "nb_execution_mode=off", "-D", "plot_gallery=0",
        str(project), str(out / "html"),
    ]  # fmt: skip
    start = time.perf_counter()
    subprocess.run(command, cwd=project, capture_output=True, check=False)
    return time.perf_counter() - start


def kernel_start_seconds(forked: bool) -> float:
    """Seconds until a page kernel (the site's kernelspec and IPython start-up) has imported
    torch and matplotlib: forked from a warm zygote, or, without one, started as usual."""
    import forking_kernel
    from jupyter_client.manager import start_new_kernel

    with tempfile.TemporaryDirectory(prefix="bench-") as folder:
        path = os.path.join(folder, "zygote")
        zygote = forking_kernel.start(path) if forked else None
        jupyter = forking_kernel.write_kernelspec(Path(folder), path if forked else None)
        os.environ["JUPYTER_PATH"] = str(jupyter)
        if zygote:
            time.sleep(8)  # let it finish importing, as it does while the gallery runs
        start = time.perf_counter()
        manager, client = start_new_kernel(kernel_name="python3")
        client.execute_interactive("import torch, matplotlib.pyplot", timeout=120)
        elapsed = time.perf_counter() - start
        client.stop_channels()
        manager.shutdown_kernel(now=True)
        if zygote:
            zygote.terminate()
            zygote.wait()
    return elapsed


def execute_in_one_process(project: Path) -> tuple[float, float]:
    """Run every page's cells, then every gallery script, in this process: (pages s, gallery s)."""
    import matplotlib

    matplotlib.use("agg")
    import matplotlib.pyplot as plt
    import torch
    from IPython.display import display

    def run_page(page: Path) -> None:
        torch.manual_seed(0)
        namespace = {"__name__": "__main__", "display": display, "In": [""]}
        for cell in read_notebook(page).cells:
            if cell.cell_type != "code":
                continue
            namespace["In"].append(cell.source)  # IPython's input history; a page reads In[-1]
            try:
                exec(compile(cell.source, str(page), "exec"), namespace)
            except Exception:  # expected errors; and a few IPython-only checks fail outside it
                if "raises-exception" not in cell.metadata.get("tags", []):
                    unexpected.append(page.name)
        plt.close("all")

    def run_script(script: Path) -> None:
        torch.manual_seed(0)
        runpy.run_path(str(script), run_name="__main__")
        plt.close("all")

    times, unexpected = [], []
    for runner, files in ((run_page, myst_pages()), (run_script, gallery_scripts())):
        start = time.perf_counter()
        for path in files:
            path = project / path.relative_to(ROOT)
            sys.path.insert(0, str(path.parent))
            with contextlib.chdir(path.parent), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with contextlib.redirect_stdout(open(os.devnull, "w")):
                    runner(path)
            sys.path.remove(str(path.parent))
        times.append(time.perf_counter() - start)
    if unexpected:  # In[-1], sys.last_value, display hooks: IPython is not there
        counts = ", ".join(f"{name} {unexpected.count(name)}" for name in sorted(set(unexpected)))
        print(f"  (floor: cells that need IPython failed, and their pages went on: {counts})")
    return times[0], times[1]


def page_times(project: Path) -> dict[str, float]:
    """Execution seconds per MyST page (kernel start included), as recorded by jupyter-cache."""
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
    return times


def verdict(ok: bool) -> str:
    return "ok" if ok else "OVER TARGET"


def stress(runs: int) -> int:
    """N cold builds in a row beside a CPU load; the number that succeeded, failed logs kept."""
    kept = ROOT / "_build" / "stress"
    kept.mkdir(parents=True, exist_ok=True)
    busy = [sys.executable, "-c", "while True: pass"]
    load = [subprocess.Popen(busy) for _ in range(os.cpu_count() or 1)]
    succeeded = 0
    try:
        for run in range(1, runs + 1):
            with tempfile.TemporaryDirectory() as tmp:
                # as on a fresh machine: no matplotlib font cache, no torch compile caches
                for name in ("MPLCONFIGDIR", "XDG_CACHE_HOME", "TORCHINDUCTOR_CACHE_DIR"):
                    os.environ[name] = str(Path(tmp) / name.lower())
                seconds, result = timed(run_build, copy_tree(Path(tmp) / "site"))
            log = kept / f"cold-build-{run}.log"
            if result.returncode == 0:
                succeeded += 1
                print(f"  cold build {run}/{runs}: ok, {seconds:.0f} s", flush=True)
            else:
                log.write_text(result.stdout + result.stderr)
                print(f"  cold build {run}/{runs}: FAILED after {seconds:.0f} s, log: {log}")
    finally:
        for process in load:
            process.kill()
            process.wait()
    print(
        f"{succeeded} of {runs} cold builds succeeded beside a load of {len(load)} busy processes"
    )
    return 0 if succeeded == runs else 1


def instrument_cost() -> None:
    """Each instrument's CPU time on a large model, in the reader's own training steps of it
    (forward and backward), measured in this run: tests/test_instruments.py checks only that the
    work grows with the graph (calls, not seconds)."""
    import torch
    from torch import nn

    sys.path.insert(0, str(ROOT / "docs"))
    from find_old_graph import find_old_graph
    from why_no_grad import why_no_grad

    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Sequential(nn.Linear(8, 8), nn.Tanh()) for _ in range(150)])
    opt = torch.optim.Adam(model.parameters())

    def forward():
        x = torch.randn(2, 8)
        for _ in range(20):
            x = model(x)
        return x.sum()

    def cpu(run) -> float:  # the best of three
        times = []
        for _ in range(3):
            start = time.process_time()
            run()
            times.append(time.process_time() - start)
        return min(times)

    step = cpu(lambda: forward().backward())
    model.zero_grad(set_to_none=True)
    loss = forward()
    nodes = find_old_graph(loss).nodes
    print(f"\n  instruments on {len(list(model.modules()))} modules, {nodes} nodes "
          f"(one training step: {step:.2f} s of CPU):")  # fmt: skip
    limit = TARGETS["instrument_steps"]
    for name, run in (
        ("find_old_graph(loss, model=, opt=)", lambda: find_old_graph(loss, model=model, opt=opt)),
        ("why_no_grad(loss, model=)", lambda: why_no_grad(loss, model=model)),
    ):
        steps = cpu(run) / step
        print(f"    {name:<40} {steps:5.1f} training steps  [<= {limit:.0f}] "
              f"{verdict(steps <= limit)}", flush=True)  # fmt: skip


def main() -> None:
    if sys.argv[1:2] == ["--stress"]:
        sys.exit(stress(int(sys.argv[2])))
    if sys.argv[1:2] == ["--instruments"]:
        instrument_cost()
        return
    cores = os.cpu_count() or 1
    print(f"Build benchmark ({cores} cores; 2-core targets in brackets)", flush=True)
    instrument_cost()
    print("  load average (1, 5, 15 min): {:.1f} {:.1f} {:.1f}".format(*os.getloadavg()))
    with tempfile.TemporaryDirectory() as tmp:
        project = copy_tree(Path(tmp) / "site")
        cold, _ = timed(build_or_exit, project)
        print(f"  cold build (deps installed, caches empty): {cold:6.1f} s  [<= {TARGETS['cold']:.0f} s] "
              f"{verdict(cold <= TARGETS['cold'])}", flush=True)  # fmt: skip
        warm, _ = timed(build_or_exit, project)
        print(f"  unchanged rebuild:                         {warm:6.1f} s  ({warm / cold:.3f} of cold) "
              f"[<= {TARGETS['ratio']}] {verdict(warm / cold <= TARGETS['ratio'])}", flush=True)  # fmt: skip
        page = project / "docs" / "how-this-site-works.md"
        page.write_text(page.read_text() + "\n<!-- An edit for the benchmark. -->\n")
        page_edit, _ = timed(build_or_exit, project)
        print(f"  rebuild after editing one page:            {page_edit:6.1f} s  ({page_edit / cold:.3f} of cold) "
              f"[<= {TARGETS['page_ratio']}] {verdict(page_edit / cold <= TARGETS['page_ratio'])}", flush=True)  # fmt: skip
        script = project / "gallery" / gallery_scripts()[0].name
        script.write_text(script.read_text() + "\n# An edit for the benchmark.\n")
        script_edit, _ = timed(build_or_exit, project)
        print(f"  rebuild after editing one script:          {script_edit:6.1f} s  ({script_edit / cold:.3f} of cold)", flush=True)  # fmt: skip
        pages, scripts = page_times(project), script_times(project)
        forked, plain = kernel_start_seconds(forked=True), kernel_start_seconds(forked=False)
        sphinx_only = sphinx_without_execution(copy_tree(Path(tmp) / "noexec"))
        one_process_pages, one_process_gallery = execute_in_one_process(project)

    print("  load average (1, 5, 15 min): {:.1f} {:.1f} {:.1f}".format(*os.getloadavg()))
    floor = one_process_pages + one_process_gallery + sphinx_only
    print("\n  where the cold build's time goes (seconds of work; pages run in parallel readers):")
    print(f"    gallery scripts, run one by one before reading: {sum(scripts.values()):6.1f} s "
          f"({len(scripts)} scripts)")  # fmt: skip
    print(f"    page kernels, execution incl. start:            {sum(pages.values()):6.1f} s "
          f"({len(pages)} pages)")  # fmt: skip
    print(f"      of which starting kernels (forked, warm):     {forked * len(pages):6.1f} s "
          f"({forked:.2f} s per kernel; {plain:.1f} s for a kernel started as usual)")  # fmt: skip
    print(f"    Sphinx reading and writing, nothing executed:   {sphinx_only:6.1f} s")
    print("\n  floor:")
    print(f"    all page cells in one process:                  {one_process_pages:6.1f} s")
    print(f"    all gallery scripts in the same process:        {one_process_gallery:6.1f} s")
    print(f"    Sphinx executing nothing:                       {sphinx_only:6.1f} s")
    print(f"    floor:                                          {floor:6.1f} s")
    print(f"    cold / floor:                                   {cold / floor:6.2f}    "
          f"[<= {TARGETS['floor_ratio']:.0f}] {verdict(cold / floor <= TARGETS['floor_ratio'])}")  # fmt: skip
    print("\n  execution time per page and script:")
    for name, seconds in sorted({**pages, **scripts}.items()):
        limit = TARGETS["script"] if name.startswith("gallery/") else None
        flag = "" if limit is None else f"  [<= {limit:.0f} s] {verdict(seconds <= limit)}"
        print(f"    {name:<55} {seconds:6.2f} s{flag}")


if __name__ == "__main__":
    main()
