"""Run one download of the site alone, as a reader would: the one runner of the project.

``tests/test_downloads_run_alone.py`` (on the site's torch) and ``measure/run_versions.py``
(``nox -s versions``, on other torch releases) both call :func:`run_alone`. It copies the download
alone into an empty folder (a helper module with the helper modules it imports: its page offers
them together) and runs it with the given Python, ``ATEN_CPU_CAPABILITY=default`` (as the build):

* a **notebook** with nbclient, **past its first failure** (``allow_errors``; a cell that hangs is
  interrupted after ``TIMEOUT`` s and the next one runs), so that each cell has its own result.
  Each code cell is then judged by the build's own rule, ``nb_expectations.check_cell``: a cell
  tagged ``raises-exception`` must raise what its ``expect-error`` declares (one of its wordings),
  any other cell must raise nothing. Cells the kernel never reached (it died) did not run.
* a **script** with ``python -W error``: it stops at its first error, in one ``# %%`` block; the
  blocks after it did not run.

The result (a dict, JSON-ready) says exactly what ran::

    {"outcome": "pass" | "fail",
     "cells": 17,                     # code cells (helper-module cells left out) or # %% blocks
     "failed": [[12, "raised AssertionError: step 1: ...", "assert ok, outcome"], ...],
     "not_run": [13, 14],             # cells or blocks that never ran
     "error": "",                     # what stopped the whole run (timeout, dead kernel), if any
     "differs": [[5, "page: ...", "here: ..."], ...]}   # notebooks: outputs unlike the page's

Cells are numbered as the build numbers them in its warnings ("code cell 12": the page's code
cells, from 1); a script's blocks are its ``# %%`` blocks, the text before the first being block
1. ``at`` (the third item of a failure) is the line of the download the error points at.
``differs`` compares what each cell printed with what the same cell printed when the site was
built (the download *is* the executed page): a download must print what its page printed
(CONTRIBUTING.md, "Random state"), its words exactly and its numbers to float32 rounding. It is
meaningful on the site's own torch only.

    python measure/run_alone.py DOWNLOAD [--python PYTHON]   # prints the result as JSON
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))  # nb_expectations: the build's rule for a cell
TIMEOUT = 900  # seconds a cell may run (a script: the whole script)
HELPER_TAG = "helper-module"  # cells the build adds to write a helper module (nb_execution.py)
ANSI = re.compile(r"\x1b\[[0-9;]*m")
SITE_PACKAGES = re.compile(r"\S*/site-packages/")  # a warning's path differs between virtualenvs
ARROW = re.compile(r"^-+> *\d+ (.*)")  # IPython's "---> 10 assert ..."
ERROR = re.compile(r"^(?:[\w.]+\.)?\w*(?:Error|Exception|Warning|Interrupt)\b(?::.*)?$")

# Runs in the download's Python (which has nbclient): every cell, whatever raises; cells the
# kernel never reaches keep no execution count. The executed notebook is written back.
RUN_NOTEBOOK = """\
import sys, nbformat, nbclient
path, timeout = sys.argv[1], int(sys.argv[2])
nb = nbformat.read(path, as_version=4)
for cell in nb.cells:
    if cell.cell_type == "code":
        cell.outputs, cell.execution_count = [], None
client = nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                                 interrupt_on_timeout=True)
try:
    client.execute()
except Exception as error:  # the kernel died, or did not start: the rest did not run
    print(f"{type(error).__name__}: {str(error).strip().splitlines()[-1][:300]}")
    code = 3
else:
    code = 0
nbformat.write(nb, path)
sys.exit(code)
"""


def helpers_beside(download: Path) -> list[Path]:
    """For a helper module (a ``.py`` download that is not a gallery script): the other helper
    modules among the site's downloads that it imports, which its page offers with it."""
    if download.suffix != ".py" or download.stem.startswith("plot_"):
        return []
    names = re.findall(r"^\s*(?:from|import) (\w+)", download.read_text(), re.M)
    downloads = download.parents[1]  # _build/html/_downloads/<hash>/<name>
    return [found for name in names for found in downloads.glob(f"*/{name}.py")]


def environment(python: str | Path, folder: Path) -> dict[str, str]:
    """What a reader's shell would pass: a few variables, the download's Python first on PATH."""
    keep = ("HOME", "LANG", "TMPDIR", "PATH")
    env = {key: os.environ[key] for key in keep if key in os.environ}
    env |= {"ATEN_CPU_CAPABILITY": "default", "IPYTHONDIR": str(folder / ".ipython")}
    # inductor's cache of its own, as on a reader's new machine: code the build's kernels cached
    # for this CPU's vector ISA failed to compile under ATEN_CPU_CAPABILITY=default ('at::vec'
    # has not been declared; hooks.ipynb's inductor column, seen 2026-12-07)
    env["TORCHINDUCTOR_CACHE_DIR"] = str(folder / ".inductor")
    env["PATH"] = os.pathsep.join([str(Path(python).parent), env.get("PATH", "")])
    return env


def run_alone(download: Path, python: str | Path, *, log: Path | None = None) -> dict:
    """Run ``download`` alone in an empty folder with ``python``; the result described above.
    ``log``: where to keep the run's output (stdout and stderr)."""
    python = os.path.abspath(python)  # not resolved: a virtualenv's python is a symbolic link
    with tempfile.TemporaryDirectory(prefix="run-alone-") as tmp:
        folder = Path(tmp)
        shutil.copy(download, folder / download.name)
        for helper in helpers_beside(download):
            shutil.copy(helper, folder / helper.name)
        if download.suffix == ".ipynb":
            command = [str(python), "-c", RUN_NOTEBOOK, download.name, str(TIMEOUT)]
            limit = None  # each cell has its own limit; a dead kernel ends the run
        else:
            command = [str(python), "-W", "error", download.name]
            limit = TIMEOUT
        try:
            done = subprocess.run(command, cwd=folder, env=environment(python, folder),
                                  capture_output=True, text=True, timeout=limit)  # fmt: skip
            output, code = ANSI.sub("", done.stdout + done.stderr), done.returncode
        except subprocess.TimeoutExpired as expired:
            output = ANSI.sub(
                "", (expired.stdout or b"").decode() + (expired.stderr or b"").decode()
            )
            code = None
        if log is not None:
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text(output)
        if download.suffix == ".ipynb":
            return notebook_result(download, folder / download.name, output, code)
        return script_result(download, output, code)


def _code_cells(notebook: dict) -> list[dict]:
    """The page's code cells: those the build added to write helper modules left out."""
    return [
        cell for cell in notebook["cells"]
        if cell["cell_type"] == "code" and HELPER_TAG not in cell.get("metadata", {}).get("tags", [])
    ]  # fmt: skip


def notebook_result(original: Path, executed: Path, output: str, code: int | None) -> dict:
    import nbformat
    from nb_expectations import check_cell

    before = _code_cells(json.loads(original.read_text()))
    after = nbformat.read(executed, as_version=4)
    helpers = [c for c in after.cells if HELPER_TAG in c.metadata.get("tags", [])]
    cells = _code_cells(after)
    failed, not_run, differs = [], [], []
    for number, (cell, old) in enumerate(zip(cells, before, strict=True), 1):
        if not cell.source.strip():
            continue
        if cell.execution_count is None:
            not_run.append(number)
            continue
        if problem := check_cell(cell):
            failed.append([number, problem[:600], _failing_line(cell)])
        page, here = " ".join(output_texts(old)), " ".join(output_texts(cell))
        if not same_text(page, here):
            at = next((i for i, (a, b) in enumerate(zip(page, here)) if a != b), None)
            at = min(len(page), len(here)) if at is None else at
            start = max(0, at - 60)
            differs.append([number, f"page: ...{page[start : at + 100]}",
                            f"here: ...{here[start : at + 100]}"])  # fmt: skip
    error = ""
    for helper in helpers:  # a helper module that could not be written: nothing else means much
        if helper.execution_count is None or any(o.output_type == "error" for o in helper.outputs):
            error = f"the cell writing a helper module failed: {helper.source.splitlines()[0]}"
    if code is None or code not in (0, 3) or (code == 3 and not error):
        error = error or (output.strip().splitlines() or ["(no output)"])[-1][:300]
        if code is None:
            error = f"still running after {TIMEOUT} s"
    outcome = "pass" if not failed and not not_run and not error else "fail"
    return {"outcome": outcome, "cells": len(cells), "failed": failed, "not_run": not_run,
            "error": error, "differs": differs}  # fmt: skip


NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


def same_text(page: str, here: str) -> bool:
    """The same words, and numbers equal to float32 rounding (|a - b| <= 1e-6 + 1e-4 |a|): the
    build's kernels and threads may round the last digits of a sum otherwise than a reader's."""
    if NUMBER.sub("#", page) != NUMBER.sub("#", here):
        return False
    pairs = zip(NUMBER.findall(page), NUMBER.findall(here), strict=True)
    return all(abs(float(a) - float(b)) <= 1e-6 + 1e-4 * abs(float(a)) for a, b in pairs)


def output_texts(cell) -> list[str]:
    """What a cell printed, as text: its streams, plain-text results and errors (type and
    message), whitespace collapsed; rich outputs (figures) are not compared."""
    texts = []
    for out in cell.get("outputs", []):
        kind = out["output_type"]
        if kind == "stream":
            text = out["text"] if isinstance(out["text"], str) else "".join(out["text"])
        elif kind == "error":
            text = f"{out['ename']}: {out['evalue']}"
        elif kind in ("execute_result", "display_data") and "text/plain" in out.get("data", {}):
            plain = out["data"]["text/plain"]
            text = plain if isinstance(plain, str) else "".join(plain)
            if len(out["data"]) > 1:  # a figure's repr, or an object's with an address
                continue
        else:
            continue
        text = " ".join(SITE_PACKAGES.sub("", ANSI.sub("", text)).split())
        if text:
            texts.append(text)
    return texts


def _failing_line(cell) -> str:
    """The line of the cell an error's traceback points at (IPython's ``--->`` arrow)."""
    errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    lines = ANSI.sub("", "\n".join(errors[0].get("traceback", []))).splitlines() if errors else []
    arrows = [m.group(1).strip() for line in lines if (m := ARROW.match(line))]
    # the first arrow after the cell's own frame header ("Cell In[12], line 3")
    for index, line in enumerate(lines):
        if line.startswith("Cell In["):
            after = [m.group(1).strip() for ln in lines[index + 1 :] if (m := ARROW.match(ln))]
            return after[0][:200] if after else ""
    return arrows[0][:200] if arrows else ""


def blocks(text: str) -> list[int]:
    """The first line of each ``# %%`` block of a script (block 1 starts at line 1)."""
    starts = [1]
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("# %%") and number > 1:
            starts.append(number)
    return starts


def script_result(script: Path, output: str, code: int | None) -> dict:
    starts = blocks(script.read_text())
    if code == 0:
        return {"outcome": "pass", "cells": len(starts), "failed": [], "not_run": [], "error": "",
                "differs": []}  # fmt: skip
    lines = [line.rstrip() for line in output.splitlines()]
    where, at = None, ""
    for index, line in enumerate(lines):
        if line.startswith(f'  File "{script.name}", line '):  # the script's innermost frame
            where = int(line.split("line ")[1].split(",")[0])
            at = lines[index + 1].strip() if index + 1 < len(lines) else ""
    errors = [line for line in lines if ERROR.match(line)]
    problem = errors[-1] if errors else (lines[-1] if lines else "(no output)")
    if code is None:
        problem = f"still running after {TIMEOUT} s"
    if where is None:  # not in the script's own lines (an import, a timeout): the run failed
        return {"outcome": "fail", "cells": len(starts), "failed": [], "not_run": [],
                "error": problem[:300], "differs": []}  # fmt: skip
    block = sum(start <= where for start in starts)
    return {"outcome": "fail", "cells": len(starts), "failed": [[block, f"raised {problem}"[:300], at[:200]]],
            "not_run": list(range(block + 1, len(starts) + 1)), "error": "", "differs": []}  # fmt: skip


def describe(name: str, result: dict) -> str:
    """A result in a few lines, for a test's message or a log."""
    lines = [f"{name}: {result['outcome']}, {result['cells']} cells"]
    if result["error"]:
        lines.append(f"  the run failed: {result['error']}")
    for number, problem, at in result["failed"]:
        lines.append(f"  cell {number} {problem}" + (f"\n    at: {at}" if at else ""))
    if result["not_run"]:
        lines.append(f"  did not run: cells {', '.join(map(str, result['not_run']))}")
    return "\n".join(lines)


def main() -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("download", type=Path)
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    result = run_alone(args.download.resolve(), args.python)
    print(json.dumps(result, indent=1))
    print(describe(args.download.name, result), file=sys.stderr)
    return 0 if result["outcome"] == "pass" else 1


if __name__ == "__main__":
    sys.exit(main())
