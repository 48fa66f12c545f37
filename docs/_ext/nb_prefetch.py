"""Execute the pages' notebooks before Sphinx reads them: all at once, longest first, while the
gallery runs; Sphinx's readers then find every page in the execution cache.

Why: myst-nb executes a page while a reader parses it, and Sphinx hands each parallel reader a
fixed chunk of about ten pages in alphabetical order, so one chunk that holds two slow pages
finished long after the others, and nothing executed while sphinx-gallery ran its scripts (which
it does before reading, in the main process). Here a helper process executes every notebook page
through myst-nb's own cache client (so each cache key is exactly the one the reader computes),
with as many kernels at a time as there are cores, the largest pages first. It starts before the
gallery and is waited for just before reading.

Nothing depends on it for correctness: a page it did not execute (failed, timed out, or was
added later) is executed by its reader as before, and a failure is reported there, with the
page's name, as before. Its output goes to ``_build/nb_prefetch.log``.

Only pages Sphinx will read again are executed, and only then is the zygote of
``forking_kernel`` started (so an unchanged rebuild starts no kernel process at all).

Order: its ``builder-inited`` handler must run after myst-nb's (which creates the parser
configuration) and before sphinx-gallery's, so conf.py lists it right after ``myst_nb``.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import forking_kernel
from sphinx.util import logging

logger = logging.getLogger(__name__)
WORKERS = min(os.cpu_count() or 1, 4)
# the log's verdicts; the build log repeats the log's lines that carry them
DONE = ("Executing notebook ahead of reading", "found in the cache")


class _Quiet:
    """myst-nb's client logs through a document logger; here its notices are kept (to tell an
    execution from a cache hit) and failures go to the log file."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.notices: list[str] = []

    def info(self, message, *args, **kwargs) -> None:
        self.notices.append(str(message))

    debug = info

    def warning(self, message, *args, **kwargs) -> None:
        print(f"{self.name}: {message}", file=sys.stderr, flush=True)

    error = warning


def execute(path: Path, md_config, nb_config) -> str:
    """Run one page through myst-nb's cache client, as its reader would."""
    import re

    from myst_nb.core.execute.cache import NotebookClientCache
    from myst_nb.core.read import create_nb_reader

    text = path.read_text(encoding="utf-8")
    reader = create_nb_reader(str(path), md_config, nb_config, text)
    if reader is None:
        return f"{path}: not a notebook"
    notebook = reader.read(text)
    name = notebook.metadata.get("kernelspec", {}).get("name")
    for pattern, alias in nb_config.kernel_rgx_aliases.items():
        if name is not None and re.fullmatch(pattern, name):
            notebook.metadata["kernelspec"]["name"] = alias
            break
    start = time.perf_counter()
    quiet = _Quiet(str(path))
    client = NotebookClientCache(notebook, path, nb_config, quiet, read_fmt=reader.read_fmt)
    client.start_client()
    if not any(notice.startswith("Executing notebook") for notice in quiet.notices):
        return f"{path}: {DONE[1]}"
    if not client.exec_metadata["succeeded"]:
        return f"{path}: failed here; its reader executes it again and reports"
    seconds = client.exec_metadata["runtime"] or 0
    return f"{path}: {DONE[0]} in {seconds:.1f} s ({time.perf_counter() - start:.1f} s here)"


def main(job: Path) -> None:
    import nb_execution  # the same fixes as in the readers (cache key, ids, outputs)

    nb_execution.NotebookClientCache.start_client = nb_execution._start_client_keeping_source
    md_config, nb_config, paths = pickle.loads(job.read_bytes())
    paths = sorted(paths, key=lambda p: Path(p).stat().st_size, reverse=True)
    with ThreadPoolExecutor(WORKERS) as pool:
        for line in pool.map(lambda p: execute(Path(p), md_config, nb_config), paths):
            print(line, flush=True)


# --- Sphinx side ------------------------------------------------------------------------------


def start(app) -> None:
    config = getattr(app.env, "mystnb_config", None)
    if config is None:
        raise RuntimeError("nb_prefetch: list it after myst_nb in conf.py's extensions")
    if config.execution_mode != "cache" or not config.execution_cache_path:
        return
    from jupyter_cache import get_cache

    # Create jupyter-cache's database once, here, before anything uses it: parallel readers (or
    # the prefetch's threads) creating it at once failed with "table nbproject already exists".
    get_cache(config.execution_cache_path).db.dispose()
    excluded = [*app.config.exclude_patterns, *app.config.templates_path]
    names = app.project.discover(excluded, app.config.include_patterns)  # Sphinx repeats it later
    notebooks = [
        str(path)
        for path, name in ((app.project.doc2path(n, absolute=True), n) for n in sorted(names))
        if path.suffix == ".md" and _is_notebook(path) and _will_be_read(app.env, name)
    ]
    if not notebooks:
        return
    forking_kernel.start_zygote(app)
    build = Path(app.doctreedir).parent
    job = build / "nb_prefetch.pickle"
    job.write_bytes(pickle.dumps((app.env.myst_config, config, notebooks)))
    log = (build / "nb_prefetch.log").open("w")
    command = [sys.executable, __file__, str(job)]
    app._nb_prefetch = (
        subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT),
        log,
        time.perf_counter(),
    )


def _will_be_read(env, docname: str) -> bool:
    """Sphinx's own test of whether it will read a page again (new, edited, a dependency edited,
    or the configuration changed); when unsure, yes: a page executed here is only looked up in
    the cache by its reader."""
    try:
        from sphinx.environment import CONFIG_OK, _has_doc_changed  # private, pinned Sphinx
    except ImportError:
        return True
    if env.config_status != CONFIG_OK or docname not in env.all_docs:
        return True
    return _has_doc_changed(
        docname,
        filename=env.doc2path(docname),
        reread_always=env.reread_always,
        doctreedir=env.doctreedir,
        all_docs=env.all_docs,
        dependencies=env.dependencies,
    )


def _is_notebook(path: Path) -> bool:
    """A MyST notebook page names a kernel in its front matter."""
    text = path.read_text(encoding="utf-8")
    return text.startswith("---") and "kernelspec:" in text.split("\n---", 1)[0]


def wait(app, env, docnames) -> None:
    running = getattr(app, "_nb_prefetch", None)
    if running is None:
        return
    process, log, started = running
    del app._nb_prefetch
    process.wait()
    log.close()
    for line in Path(log.name).read_text(encoding="utf-8").splitlines():
        if line.rpartition(": ")[2].startswith(DONE):
            logger.info(line)
    logger.info(
        f"nb_prefetch: pages executed ahead of reading in {time.perf_counter() - started:.1f} s "
        f"({WORKERS} at a time; exit {process.returncode}; see {log.name})"
    )


def setup(app):
    app.connect("builder-inited", start)
    app.connect("env-before-read-docs", wait)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main(Path(sys.argv[1]))
