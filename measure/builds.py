"""The project's files, copies of them, and builds of a copy: shared by the tools here and by the
tests (``tests/conftest.py`` re-exports them)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD_SITE = ROOT / "tools" / "build_site.py"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def myst_pages() -> list[Path]:
    """MyST-NB notebook pages (Markdown files with a kernelspec)."""
    pages = [ROOT / "index.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [p for p in pages if "kernelspec:" in p.read_text().split("\n---", 1)[0]]


def gallery_scripts() -> list[Path]:
    return sorted((ROOT / "gallery").glob("plot_*.py"))


def read_notebook(page: Path):
    """The notebook myst-nb reads from a MyST page (cells with their metadata and source lines)."""
    from myst_nb.core.read import read_myst_markdown_notebook

    return read_myst_markdown_notebook(page.read_text(encoding="utf-8"), add_source_map=True)


def copy_tree(dest: Path, paths: list[str] | None = None) -> Path:
    """Copy the repository's files (as git sees them: tracked and untracked-but-not-ignored) to
    dest, or only the given repository paths."""
    if paths is None:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split("\0")
        paths = [p for p in listed if p and (ROOT / p).is_file()]
    for rel in paths:
        src = ROOT / rel
        target = dest / rel
        if src.is_dir():
            shutil.copytree(
                src, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__")
            )
        elif src.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
    return dest


def run_build(
    source: Path, *, offline: bool = False, extra: tuple[str, ...] = (), env: dict | None = None
) -> subprocess.CompletedProcess:
    """Run the site's build script on a copy of the project (plain-text log, no colours)."""
    command = [sys.executable, str(BUILD_SITE), "--source", str(source)]
    if offline:
        command.append("--offline")
    command += ["--", "--no-color", *extra]
    result = subprocess.run(command, capture_output=True, text=True, cwd=source, env=env)
    result.stdout, result.stderr = ANSI.sub("", result.stdout), ANSI.sub("", result.stderr)
    return result
