"""Mutation tests of the outcome checks: does each check fail when the fix it certifies is wrong?

Each ``tests/mutations/<name>.toml`` names one page (``docs/x.md``) or gallery script and, for each
outcome check in it (a ``checked`` block that certifies a fix), wrong variants of the code:

    source = "docs/errors.md"

    [[check]]
    name = "PINN, create_graph=True"        # what the check certifies
    until = "pinn(create_graph=True)"       # a line of the cell (page) or block (script) that runs it

    [[check.mutation]]
    name = "retain_graph instead of create_graph"
    old = "pinn(create_graph=True)"         # occurs exactly once in the source
    new = "pinn(retain_graph=True)"

A mutated copy runs from the top down to the end of the cell or ``# %%`` block that holds
``until``: a page as a notebook (nbclient; cells tagged ``raises-exception`` may raise), a script
with ``python -W error``, alone in a temporary folder beside the helper modules of ``docs/``. A
mutation counts as **caught** only when that cell or block stops on the check's own assertion
(an ``AssertionError`` worded as ``checked`` words them), not when the code crashes first or an
earlier cell fails. Each source also runs once unmutated, which must pass.

    python tests/mutations.py docs/errors.md gallery/plot_gan_step.py   # report, caught/total
    pytest tests/test_mutations.py                                        # the slow tier

A script's mutation counts as caught only if the assertion stops the script in the block that
holds ``until`` (not in an earlier check).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DECLARED = ROOT / "tests" / "mutations"
TIMEOUT = 900
# the messages of docs/outcome.py's checked (and of its copies in the gallery), nothing else
CHECK_FAILED = re.compile(
    r"AssertionError: (step \d+: (.+ got no gradient|wrong gradient of .+)"
    r"|\d+ steps ran; a fix is checked over \d+|.+ never moved"
    r"|.+ is not in the optimizer: it never trains)\s*$"
)


@dataclass(frozen=True)
class Mutation:
    source: str  # repository path of the page or script
    check: str  # the check's name
    until: str
    name: str  # the mutation's name (empty: the unmutated run)
    old: str = ""
    new: str = ""


def declared(paths: list[str] | None = None) -> list[Mutation]:
    """Every declared mutation (of the given sources only, if any), plus one unmutated run per
    source (``name == ""``), which runs down to its last check."""
    found = []
    for file in sorted(DECLARED.glob("*.toml")):
        spec = tomllib.loads(file.read_text(encoding="utf-8"))
        source = spec["source"]
        if paths and source not in paths:
            continue
        checks = spec.get("check", [])
        if not checks:
            raise ValueError(f"{file.name}: no [[check]]")
        text = (ROOT / source).read_text(encoding="utf-8")
        last = max(checks, key=lambda c: text.index(c["until"]) if c["until"] in text else -1)
        found.append(Mutation(source, last["name"], last["until"], ""))
        for check in checks:
            for m in check.get("mutation", []):
                found.append(
                    Mutation(source, check["name"], check["until"], m["name"], m["old"], m["new"])
                )
    return found


def _mutated(mutation: Mutation) -> str:
    text = (ROOT / mutation.source).read_text(encoding="utf-8")
    if not mutation.name:
        return text
    count = text.count(mutation.old)
    if count != 1:
        raise ValueError(
            f"{mutation.source}, {mutation.name}: `old` occurs {count} times, not once"
        )
    return text.replace(mutation.old, mutation.new)


def _parts(text: str, page: bool) -> list:
    """A page's code cells (nbformat cells), or a script's ``# %%`` blocks (strings)."""
    if not page:
        return re.split(r"(?m)^(?=# %%)", text)
    import nbformat
    from myst_nb.core.read import read_myst_markdown_notebook

    cells = read_myst_markdown_notebook(text).cells
    return [nbformat.v4.new_code_cell(c.source, metadata=dict(c.metadata))
            for c in cells if c.cell_type == "code"]  # fmt: skip


def _until(original: str, until: str, page: bool) -> int:
    """How many cells or blocks run: down to the one of the *unmutated* source holding ``until``
    (a mutation may change that line)."""
    for index, part in enumerate(_parts(original, page)):
        if until in (part.source if page else part):
            return index + 1
    raise ValueError(f"no {'code cell' if page else '# %% block'} holds {until!r}")


def _folder() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="mutation-"))
    for helper in (ROOT / "docs").glob("*.py"):
        shutil.copy(helper, folder / helper.name)
    return folder


def run(mutation: Mutation, python: str = sys.executable) -> tuple[str, str]:
    """``(verdict, detail)``: verdict is "caught", "missed" (ran to the end), "other" (stopped
    on something else than the check: a crash, an earlier cell), or for the unmutated run "ran"
    or "broken"."""
    folder = _folder()
    env = {k: os.environ[k] for k in ("HOME", "LANG", "PATH", "TMPDIR") if k in os.environ}
    env |= {"MPLBACKEND": "Agg", "IPYTHONDIR": str(folder / ".ipython"), "PYTHONHASHSEED": "0"}
    try:
        page = mutation.source.endswith(".md")
        original = (ROOT / mutation.source).read_text(encoding="utf-8")
        parts = _parts(_mutated(mutation), page)[: _until(original, mutation.until, page)]
        run_part = _run_page if page else _run_script
        verdict, detail = run_part(parts, folder, python, env)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if not mutation.name:
        return ("ran", "") if verdict == "missed" else ("broken", detail)
    return verdict, detail


RUN_NOTEBOOK = """
import sys, nbformat, nbclient
for attempt in (1, 2):  # a kernel that did not start (a loaded machine) gets one more try
    nb = nbformat.read(sys.argv[1], as_version=4)
    try:
        nbclient.NotebookClient(
            nb, timeout={timeout}, startup_timeout=300, kernel_name="python3"
        ).execute()
        break
    except nbclient.exceptions.CellExecutionError as error:
        last = [i for i, c in enumerate(nb.cells) if c.get("execution_count") is not None][-1]
        print(f"CELL {{last}} OF {{len(nb.cells)}}")
        print(f"{{error.ename}}: {{error.evalue}}")
        sys.exit(1)
    except Exception as error:  # the kernel itself: retry only if no cell ran
        if attempt == 2 or any(c.get("execution_count") for c in nb.cells):
            raise
        print(f"kernel failed to start ({{error!r}}); retrying once", file=sys.stderr)
"""


def _run_page(cells, folder, python, env):
    import nbformat

    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(notebook, folder / "page.ipynb")
    done = _subprocess(
        [python, "-c", RUN_NOTEBOOK.format(timeout=TIMEOUT), "page.ipynb"], folder, env
    )
    if done is None:
        return "other", f"timed out after {TIMEOUT} s"
    if done.returncode == 0:
        return "missed", ""
    out = done.stdout.strip().splitlines()
    where = next((line for line in out if line.startswith("CELL ")), "")
    message = out[-1] if out else done.stderr[-500:]
    at_end = bool(where) and where.split()[1] == str(len(cells) - 1)
    if at_end and CHECK_FAILED.match(message):
        return "caught", message
    return "other", f"{where or 'no cell'}: {message}"[-500:]


def _run_script(blocks, folder, python, env):
    (folder / "script.py").write_text("".join(blocks), encoding="utf-8")
    done = _subprocess([python, "-W", "error", "script.py"], folder, env)
    if done is None:
        return "other", f"timed out after {TIMEOUT} s"
    if done.returncode == 0:
        return "missed", ""
    lines = done.stderr.strip().splitlines()
    message = lines[-1] if lines else ""
    # the outermost frame in the script: the top-level statement that was running
    frames = [
        int(m.group(1)) for ln in lines if (m := re.match(r'  File ".*script\.py", line (\d+)', ln))
    ]
    last_block_starts = len("".join(blocks[:-1]).splitlines()) + 1
    in_last_block = bool(frames) and frames[0] >= last_block_starts
    if CHECK_FAILED.match(message) and in_last_block:
        return "caught", message
    where = f"line {frames[0]} (the check's block starts at {last_block_starts})" if frames else ""
    return "other", f"{where}: {message}"[-500:]


def _subprocess(command, folder, env):
    try:
        return subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True,
                              timeout=TIMEOUT + 60)  # fmt: skip
    except subprocess.TimeoutExpired:
        return None


def main(argv: list[str]) -> int:
    mutations = declared(argv or None)
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(run, mutations))
    caught = total = broken = 0
    for mutation, (verdict, detail) in zip(mutations, results):
        label = f"{mutation.source} | {mutation.check} | {mutation.name or '(unmutated)'}"
        print(f"{verdict:>7}  {label}" + (f"\n         {detail}" if detail else ""))
        if mutation.name:
            total += 1
            caught += verdict == "caught"
        else:
            broken += verdict != "ran"
    print(f"\ncaught {caught} of {total} mutations; {broken} unmutated source(s) broken")
    return 0 if caught == total and not broken else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
