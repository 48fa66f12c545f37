"""Run the site's one strict build; used by `nox -s docs`, the tests and the benchmark alike.

Why a script: the same command must build the site for users, prove it offline in the tests, and
be timed by the benchmark. The whole log (Sphinx, kernels, gallery) is shown and kept in
``<out>.log``. On failure it leaves nothing that looks finished: the output directory is moved to
``<out>-failed`` and its log to ``<out>-failed.log``. While ``<out>-failed`` exists the build reads
every page again (``-E``): Sphinx reads only changed pages, so an unchanged run after a failed one
would not show the failing page's warnings again and would report success (sphinx-doc/sphinx#725).

    python tools/build_site.py [--offline] [--if-stale] [--source DIR] [--out DIR] [-- sphinx args]

``--if-stale`` skips the build when ``<out>`` was built, by this script and successfully, from
exactly the files there are now (tracked and untracked-but-not-ignored, by content) with the same
torch and the same ``--offline``: test runs that only read the built site then start at once.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


# Pages are read (and executed, each in its own kernel) by this many processes at once: one more
# than there are cores pays, since a page's kernel also waits (on two cores a cold build took 84 s
# with one reader, 55 s with two, 50 s with three). Readers fork after sphinx-gallery ran torch in
# the main process; they never compute with torch. Capped, so a large machine starts few kernels.
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
    """True when this machine lets us build in a private network namespace (root, unshare, ip).
    The one copy of this check: noxfile.py and the tests import it from here."""
    return bool(shutil.which("unshare") and shutil.which("ip") and os.geteuid() == 0)


def source_digest(source: Path, extra: list[str], no_network: bool) -> str | None:
    """A digest of every file git would take (by content), the torch version, and the options;
    None outside a git checkout (a copied project is then always built)."""
    git = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=source, capture_output=True, text=True,
    )  # fmt: skip
    if git.returncode != 0 or not (source / ".git").exists():
        return None
    listed = git.stdout.split("\0")
    digest = hashlib.sha256(repr((sys.version, extra, no_network)).encode())
    from importlib.metadata import version

    digest.update(version("torch").encode())
    for rel in sorted(p for p in listed if p and (source / p).is_file()):
        digest.update(rel.encode() + b"\0" + (source / rel).read_bytes() + b"\0")
    return digest.hexdigest()


def stamp_for(out: Path) -> Path:
    """Beside the output folder (not published with it): the digest of what it was built from."""
    return out.with_name(out.name + ".built-from")


def build(source: Path, out: Path, extra: list[str], *, no_network: bool = False) -> int:
    failed = out.with_name(out.name + "-failed")
    command = sphinx_command(source, out, ["-E", *extra] if failed.exists() else extra)
    if no_network:
        command = offline(command)
    stamp_for(out).unlink(missing_ok=True)
    log = out.with_name(out.name + ".log")
    log.parent.mkdir(parents=True, exist_ok=True)
    with (
        log.open("wb", buffering=0) as kept,  # unbuffered: the log is whole even if killed
        subprocess.Popen(
            command, cwd=source, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        ) as sphinx,
    ):
        for line in sphinx.stdout:
            sys.stdout.buffer.write(line)
            sys.stdout.flush()
            kept.write(line)
    code = sphinx.returncode
    if code == 0:
        digest = source_digest(source, extra, no_network)
        if digest is not None:
            stamp_for(out).write_text(digest)
        shutil.rmtree(failed, ignore_errors=True)  # fixed: its evidence goes
        failed.with_name(failed.name + ".log").unlink(missing_ok=True)
    else:
        shutil.rmtree(failed, ignore_errors=True)
        if out.exists():
            out.rename(failed)
        log.replace(failed.with_name(failed.name + ".log"))
        print(
            f"\nThe site did not build: the warnings above name each file and line. Fix them and "
            f"build again. The incomplete output was moved to {failed}, the full log to "
            f"{failed}.log.",
            file=sys.stderr,
        )
    return code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--offline", action="store_true", help="build with no network (needs root)")
    parser.add_argument("--if-stale", action="store_true", help="skip when the site is current")
    parser.add_argument("--source", type=Path, default=REPO)
    parser.add_argument("--out", type=Path, default=None, help="default: SOURCE/_build/html")
    parser.add_argument("extra", nargs="*", help="extra sphinx-build arguments (after --)")
    args = parser.parse_args()
    source = args.source.resolve()
    out = (args.out or source / "_build" / "html").resolve()
    if args.offline and not can_isolate_network():
        parser.error("--offline needs root, `unshare` and `ip` (util-linux, iproute2)")
    stamp = stamp_for(out)
    if args.if_stale and stamp.is_file():
        current = source_digest(source, args.extra, args.offline)
        if current is not None and stamp.read_text() == current:
            print(f"{out} is current (built from these very files): not rebuilt.")
            return 0
    return build(source, out, args.extra, no_network=args.offline)


if __name__ == "__main__":
    sys.exit(main())
