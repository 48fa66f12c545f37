"""Execute one page or gallery script on its own, in seconds, and check it as the build would.

Why: a full build executes every page; while writing one page you want only that page's verdict.
For a MyST page this runs its notebook in a fresh kernel (the site's IPython start-up: seeds, short
tracebacks) and applies the build's own rule for expected errors (``nb_expectations``); for a
gallery script it runs ``python gallery/plot_x.py`` as a reader would after downloading it.

    python tools/check_page.py docs/errors.md [gallery/plot_gan_step.py ...] [--show]

``--show`` prints every cell's output. Exit status 0 when every file passed. The full build
(``nox -s docs``) is still the judge: it also renders, links and checks warnings.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "docs" / "_ext"))


def check_myst_page(page: Path, show: bool) -> list[str]:
    import nbformat
    from myst_nb.core.read import read_myst_markdown_notebook
    from nb_expectations import check_notebook
    from nbclient import NotebookClient

    notebook = read_myst_markdown_notebook(page.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as ipython_dir:
        shutil.copytree(REPO / "docs" / "_ipython", ipython_dir, dirs_exist_ok=True)
        os.environ["IPYTHONDIR"] = ipython_dir
        client = NotebookClient(
            notebook,
            timeout=300,
            kernel_name="python3",
            allow_errors=True,
            resources={"metadata": {"path": str(page.parent)}},
        )
        client.execute()
    problems = []
    code_cells = [i for i, c in enumerate(notebook.cells) if c.cell_type == "code"]
    for index, cell in enumerate(notebook.cells):
        if show and cell.cell_type == "code":
            print(f"--- cell {code_cells.index(index) + 1}")
            for out in cell.get("outputs", []):
                if out.output_type == "stream":
                    print(out.text, end="")
                elif out.output_type == "error":
                    print(f"{out.ename}: {out.evalue}")
                elif "text/plain" in out.get("data", {}):
                    print(out["data"]["text/plain"])
    for index, problem in check_notebook(nbformat.from_dict(notebook)):
        problems.append(f"{page}: code cell {code_cells.index(index) + 1} {problem}")
    return problems


def check_script(script: Path, show: bool) -> list[str]:
    env = {**os.environ, "MPLBACKEND": "Agg", "PYTHONWARNINGS": "error"}
    result = subprocess.run(
        [sys.executable, str(script)], cwd=script.parent, capture_output=True, text=True, env=env
    )
    if show or result.returncode:
        print(result.stdout + result.stderr)
    return [] if result.returncode == 0 else [f"{script}: exited {result.returncode}"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--show", action="store_true", help="print every cell's output")
    args = parser.parse_args()
    problems = []
    for path in args.files:
        path = path.resolve()
        check = check_script if path.suffix == ".py" else check_myst_page
        found = check(path, args.show)
        print(f"{'FAIL' if found else 'ok  '} {path.relative_to(REPO)}")
        problems += found
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
