"""Downloaded gallery scripts run on their own, needing nothing but torch, numpy and matplotlib.

Each script is checked for what it imports (the standard library and those three packages only)
and then run as a reader would run the downloaded file: `python plot_x.py`, from an empty folder.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import pytest
from conftest import gallery_scripts

ALLOWED = {"torch", "numpy", "matplotlib"} | set(sys.stdlib_module_names)


@pytest.mark.parametrize("script", gallery_scripts(), ids=lambda p: p.name)
def test_imports_only_torch_numpy_matplotlib(script):
    tree = ast.parse(script.read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            imported.add(node.module.split(".")[0])
    assert imported <= ALLOWED, f"{script.name} imports {sorted(imported - ALLOWED)}"


@pytest.mark.parametrize("script", gallery_scripts(), ids=lambda p: p.name)
def test_runs_standalone(script, tmp_path):
    copy = tmp_path / script.name
    copy.write_text(script.read_text())
    env = {**os.environ, "MPLBACKEND": "Agg", "PYTHONPATH": ""}
    result = subprocess.run(
        [sys.executable, "-W", "error", copy.name],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, f"{script.name} failed on its own:\n{result.stderr[-3000:]}"
