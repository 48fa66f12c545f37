"""Run the site's one strict build; used by `nox -s docs`, the tests and the benchmark alike.

Why a script: the same command must build the site for users, prove it offline in the tests, and
be timed by the benchmark. On failure it leaves nothing that looks finished: the output directory
is moved to ``<out>-failed`` (and the ``forget_failed_builds`` extension has already dropped
Sphinx's saved environment, so the next build reads every page again).

    python docs/_ext/build_site.py [--offline] [--source DIR] [--out DIR] [-- extra sphinx args]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


# Pages are read (and their notebooks executed) by this many processes at once. Each page runs in
# its own Jupyter kernel, and much of a page's time goes to starting the kernel and importing
# torch, part of it spent waiting, so one reader more than there are cores pays: on two cores a
# cold build took 84 s with one reader, 55 s with two and 50 s with three. Sphinx forks the readers
# after sphinx-gallery has run torch in the main process; that is safe here because the forked
# readers and writers never compute with torch (kernels are fresh processes). Capped, so that a
# large machine does not start dozens of torch kernels at once.
PARALLEL = str(min((os.cpu_count() or 1) + 1, 4))


def sphinx_command(source: Path, out: Path, extra: list[str]) -> list[str]:
    doctrees = out.parent / "doctrees"
    return [
        sys.executable,
        "-m",
        "sphinx",
        "-W",
        "--keep-going",
        "-j",
        PARALLEL,
        "-b",
        "html",
        "-d",
        str(doctrees),
        *extra,
        str(source),
        str(out),
    ]


def offline(command: list[str]) -> list[str]:
    """Wrap a command in a private network namespace with only loopback up (Jupyter needs it)."""
    return ["unshare", "--net", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", *command]


def can_isolate_network() -> bool:
    return bool(shutil.which("unshare") and shutil.which("ip") and os.geteuid() == 0)


def build(source: Path, out: Path, extra: list[str], *, no_network: bool = False) -> int:
    command = sphinx_command(source, out, extra)
    if no_network:
        command = offline(command)
    code = subprocess.call(command, cwd=source)
    if code != 0:
        failed = out.with_name(out.name + "-failed")
        shutil.rmtree(failed, ignore_errors=True)
        if out.exists():
            out.rename(failed)
        print(
            f"\nThe site did not build: the warnings above name each file and line. Fix them and "
            f"build again. The incomplete output was moved to {failed}.",
            file=sys.stderr,
        )
    return code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--offline", action="store_true", help="build with no network (needs root)")
    parser.add_argument("--source", type=Path, default=REPO)
    parser.add_argument("--out", type=Path, default=None, help="default: SOURCE/_build/html")
    parser.add_argument("extra", nargs="*", help="extra sphinx-build arguments (after --)")
    args = parser.parse_args()
    source = args.source.resolve()
    out = (args.out or source / "_build" / "html").resolve()
    if args.offline and not can_isolate_network():
        parser.error("--offline needs root, `unshare` and `ip` (util-linux, iproute2)")
    return build(source, out, args.extra, no_network=args.offline)


if __name__ == "__main__":
    sys.exit(main())
