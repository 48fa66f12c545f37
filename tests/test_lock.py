"""constraints.txt is exactly what `nox -s lock` writes, and nothing is installed without it.

`nox -s lock` installs every requirements/*.txt into one environment under the current pins and
writes its `pip freeze` (noxfile.lock_text). The tests session installs the same files under the
same pins, so the freeze of the environment running these tests, passed through the same writer,
must give the committed file byte for byte: a hand-edited pin, a pin out of order, a package the
requirements pull in that no pin covers, or a pin of a package nothing installs, all fail here.
No network: it reads only the installed environment.
"""

from __future__ import annotations

import ast
import difflib
import re
import subprocess
import sys

import pytest
from conftest import ROOT

CONSTRAINTS = ROOT / "constraints.txt"


def noxfile():
    sys.path.insert(0, str(ROOT))
    try:
        import noxfile
    except ImportError as error:
        pytest.fail(f"cannot import noxfile.py ({error}): run these tests with `nox -s tests`")
    return noxfile


def test_the_lock_is_what_nox_s_lock_writes():
    frozen = subprocess.run(
        [sys.executable, "-m", "pip", "freeze", "--exclude-editable"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    written = noxfile().lock_text(frozen)
    committed = CONSTRAINTS.read_text()
    diff = "".join(
        difflib.unified_diff(
            committed.splitlines(keepends=True), written.splitlines(keepends=True),
            "constraints.txt (committed)", "what `nox -s lock` writes from this environment",
        )
    )  # fmt: skip
    assert written == committed, (
        "constraints.txt is not the lock of this environment (every requirements/*.txt installed "
        "under its pins). Run `nox -s lock`; if this environment holds packages the requirements "
        f"no longer name, recreate it (`nox -s tests --reuse-venv=no`).\n{diff}"
    )


def test_every_requirement_is_pinned():
    pins = {
        re.sub(r"[-_.]+", "-", line.split("==")[0]).lower()
        for line in CONSTRAINTS.read_text().splitlines()
        if "==" in line and not line.startswith("#")
    }
    for req in sorted((ROOT / "requirements").glob("*.txt")):
        for line in req.read_text().splitlines():
            line = line.split("#")[0].strip()
            if not line or line.startswith("-r"):
                continue
            name = re.sub(r"[-_.]+", "-", re.split(r"[=<>\[ ;]", line)[0]).lower()
            assert name in pins, f"{req.name}: {name} is not pinned in constraints.txt"


def test_the_torch_pin_is_the_one_the_downloads_name():
    """requirements/examples.txt names the torch the site is executed on (the downloads' first
    requirement, and the release table's "site torch"); constraints.txt pins the same."""
    named = re.search(r"^torch==(\S+)$", (ROOT / "requirements" / "examples.txt").read_text(), re.M)
    assert named, "requirements/examples.txt must name torch==<version>"
    pinned = re.search(r"^torch==(\S+)$", CONSTRAINTS.read_text(), re.M)
    assert pinned and pinned.group(1) == named.group(1), (
        f"constraints.txt pins torch {pinned and pinned.group(1)}, requirements/examples.txt names "
        f"{named.group(1)}: run `nox -s lock` after moving the pin"
    )


def unpinned_installs_in_python(path) -> list[str]:
    """pip installs in a Python file that pass no constraints: ``session.install(...)`` calls,
    and any call or list holding the strings "pip" and "install", without ``-c``/CONSTRAINTS."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            parts = [*node.args, *(k.value for k in node.keywords)]
            is_install = isinstance(node.func, ast.Attribute) and node.func.attr == "install"
            is_install = is_install and getattr(node.func.value, "id", "") == "session"
        elif isinstance(node, ast.List):
            parts, is_install = node.elts, False
        else:
            continue
        values = [p.value if isinstance(p, ast.Starred) else p for p in parts]
        strings = [v.value for v in values if isinstance(v, ast.Constant)]
        names = {v.id for v in values if isinstance(v, ast.Name)}
        if is_install or ("pip" in strings and "install" in strings):
            if "-c" not in strings and "CONSTRAINTS" not in names:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_every_install_uses_the_constraints():
    """Every pip install, in the nox sessions, the tests, the tools, .ci/run, the workflows and
    Read the Docs, passes `-c constraints.txt`."""
    unpinned = []
    for path in [ROOT / "noxfile.py", ROOT / "conf.py", *sorted(ROOT.glob("tests/*.py")),
                 *sorted(ROOT.glob("tools/*.py")), *sorted(ROOT.glob("docs/_ext/*.py"))]:  # fmt: skip
        unpinned += unpinned_installs_in_python(path)
    configs = [ROOT / ".ci" / "run", ROOT / ".readthedocs.yaml"]
    configs += sorted((ROOT / ".github" / "workflows").glob("*.yml"))
    for config in configs:
        for number, line in enumerate(config.read_text().splitlines(), 1):
            if re.search(r"\bpip3? install\b", line) and "-c constraints.txt" not in line:
                unpinned.append(f"{config.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not unpinned, "installs without -c constraints.txt:\n" + "\n".join(unpinned)
    # nox itself is installed from requirements/nox.txt, pinned, wherever a configuration runs it
    for config in configs:
        text = config.read_text()
        commands = "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("#"))
        if re.search(r"\bnox -s\b", commands):
            assert "-r requirements/nox.txt -c constraints.txt" in text, (
                f"{config.relative_to(ROOT)} runs nox without installing it from "
                "requirements/nox.txt under constraints.txt"
            )
