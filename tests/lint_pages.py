"""Lint the Python in the pages: ruff on the code cells of ``index.md`` and ``docs/*.md``.

Most of the site's Python lives in its pages, where ``ruff check .`` does not look. jupytext reads
each MyST page as a notebook; its code cells (only those, in order, so that ruff's "cell N" is the
page's code cell N, as the build numbers them) go into a notebook in a temporary folder, and ruff
checks it with the repository's ``ruff.toml`` and the notebook rules below. Each violation is
printed with the page's own line:

    docs/errors.md:212: code cell 4: F841 Local variable `loss` is assigned to but never used

    python tests/lint_pages.py [--strict] [PAGE ...]     # `nox -s lint` runs it

Without ``--strict`` it reports and exits 0; with it, any violation fails. ``nox -s lint`` passes
``--strict`` once ``PAGES_MUST_LINT`` in noxfile.py is True (the lead sets it when the pages are
clean).

Notebook rules, on top of ``ruff.toml``: ruff already judges imports per cell (E402) and allows a
bare expression that ends a cell (it is shown). Ignored here: E731, since a reference loss is a
``lambda`` (the idiom of ``checked``, CONTRIBUTING.md), and E702/E703, since a drawing cell ends with
``;`` to hide a figure's repr, and B023 (see ``NOTEBOOK_IGNORES``).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# B023: a page's cells call each closure in the loop iteration that made it (outcome(lambda: ...),
# a hook registered and run at once), never later, where late binding would bite.
NOTEBOOK_IGNORES = ["E731", "E702", "E703", "B023"]
FENCE = re.compile(r"^```\{code-cell\}")


def pages() -> list[Path]:
    """The MyST notebook pages (those with a kernelspec)."""
    found = [ROOT / "index.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [p for p in found if "kernelspec:" in p.read_text(encoding="utf-8").split("\n---", 1)[0]]


def code_starts(text: str) -> list[int]:
    """The page line (from 1) where each code cell's code begins, after its fence and options."""
    lines = text.splitlines()
    starts = []
    for index, line in enumerate(lines):
        if not FENCE.match(line):
            continue
        at = index + 1
        if at < len(lines) and lines[at].strip() == "---":  # a YAML block of options
            at = next(i for i in range(at + 1, len(lines)) if lines[i].strip() == "---") + 1
        while at < len(lines) and lines[at].startswith(":"):  # :tags: [...], :expect-error: ...
            at += 1
        starts.append(at + 1)
    return starts


def write_notebook(page: Path, folder: Path) -> tuple[Path, list[int]]:
    import jupytext
    import nbformat

    cells = [c for c in jupytext.read(page, fmt="md:myst").cells if c.cell_type == "code"]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c.source) for c in cells])
    notebook.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Python 3"}  # fmt: skip
    notebook.metadata["language_info"] = {"name": "python"}
    path = folder / page.relative_to(ROOT).with_suffix(".ipynb")
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, path)
    starts = code_starts(page.read_text(encoding="utf-8"))
    if len(starts) != len(cells):
        raise SystemExit(f"{page}: {len(cells)} code cells read by jupytext, {len(starts)} fences")
    return path, starts


def violations(chosen: list[Path]) -> list[dict]:
    """ruff's diagnostics for the pages, each with ``page``, ``line`` (in the page) and ``cell``."""
    with tempfile.TemporaryDirectory(prefix="lint-pages-") as tmp:
        folder = Path(tmp)
        starts = {}
        for page in chosen:
            notebook, lines = write_notebook(page, folder)
            starts[notebook.resolve()] = (page, lines)
        command = [
            sys.executable, "-m", "ruff", "check", "--config", str(ROOT / "ruff.toml"),
            "--extend-ignore", ",".join(NOTEBOOK_IGNORES), "--output-format", "json",
            "--no-cache", "--exit-zero", *map(str, starts),
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, cwd=folder)
        if done.returncode:
            raise SystemExit(f"ruff failed:\n{done.stderr}")
        found = []
        for item in json.loads(done.stdout):
            page, lines = starts[Path(item["filename"]).resolve()]
            cell = item.get("cell") or 1
            line = lines[cell - 1] + item["location"]["row"] - 1
            found.append({"page": page.relative_to(ROOT).as_posix(), "line": line, "cell": cell,
                          "code": item["code"], "message": item["message"]})  # fmt: skip
        return sorted(found, key=lambda v: (v["page"], v["line"], v["code"]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pages", nargs="*", type=Path, help="default: every page")
    parser.add_argument("--strict", action="store_true", help="fail on any violation")
    args = parser.parse_args()
    chosen = [p.resolve() for p in args.pages] or pages()
    found = violations(chosen)
    for v in found:
        print(f"{v['page']}:{v['line']}: code cell {v['cell']}: {v['code']} {v['message']}")
    counts: dict[str, int] = {}
    for v in found:
        counts[v["page"]] = counts.get(v["page"], 0) + 1
    summary = ", ".join(f"{page} {n}" for page, n in sorted(counts.items()))
    print(f"page lint: {len(found)} violations in {len(counts)} of {len(chosen)} pages"
          + (f" ({summary})" if summary else ""))  # fmt: skip
    if found and not args.strict:
        print("(reported only: noxfile.py's PAGES_MUST_LINT is False)")
    return 1 if found and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
