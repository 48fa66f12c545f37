"""The site's one strict build (`nox -s docs`, the tests, the benchmark):

    python tools/build_site.py [--offline] [--source DIR] [-- sphinx args]

A failed build moves its output to ``_build/html-failed`` (log: ``html-failed.log``), and the
next reads every page (``-E``) while that exists: Sphinx would not read the failing page again
(sphinx-doc/sphinx#725). ``--offline``: a network namespace with only loopback up.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

# Pages are read (and executed) by this many processes: one more than the cores pays, as a page's
# kernel also waits (2 cores, cold build: 84 s with one reader, 55 s with two, 50 s with three).
PARALLEL = str(min((os.cpu_count() or 1) + 1, 4))


def can_isolate_network() -> bool:
    """Whether this machine can build in a network namespace: root, unshare, ip (the one copy of
    this check: noxfile.py and the tests import it)."""
    return bool(shutil.which("unshare") and shutil.which("ip") and os.geteuid() == 0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--offline", action="store_true", help="build with no network (needs root)")
    parser.add_argument("--source", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("extra", nargs="*", help="extra sphinx-build arguments (after --)")
    args = parser.parse_args()
    if args.offline and not can_isolate_network():
        parser.error("--offline needs root, `unshare` and `ip` (util-linux, iproute2)")
    source = args.source.resolve()
    out = source / "_build" / "html"
    failed, log = out.with_name("html-failed"), out.with_name("html.log")
    command = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-j", PARALLEL, "-b", "html"]
    command += ["-d", str(out.with_name("doctrees")), *(["-E"] if failed.exists() else [])]
    command += [*args.extra, str(source), str(out)]
    if args.offline:
        command = ["unshare", "--net", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", *command]
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb", buffering=0) as kept:  # unbuffered: the log is whole even if killed
        pipe = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT}
        sphinx = subprocess.Popen(command, cwd=source, **pipe)
        for line in sphinx.stdout:
            sys.stdout.buffer.write(line)
            sys.stdout.flush()
            kept.write(line)
    shutil.rmtree(failed, ignore_errors=True)
    failed.with_name("html-failed.log").unlink(missing_ok=True)
    if sphinx.wait() != 0:
        if out.exists():
            out.rename(failed)
        log.replace(failed.with_name("html-failed.log"))
        print(
            "\nThe site did not build: the warnings above name each file and line. Fix them and "
            f"build again. The incomplete output was moved to {failed}, the full log to "
            f"{failed}.log.",
            file=sys.stderr,
        )
    return sphinx.returncode


if __name__ == "__main__":
    sys.exit(main())
