"""Reset global state around every gallery example (sphinx-gallery ``reset_modules``), save the
examples' figures as SVG (``SVGFigures``), and keep the gallery's cache honest (the extension).

Why: examples run one after another in the build's process; one's random state, figures, warning
filters or torch thread count would change the next one's output. Before each: fixed seeds, and
warnings become errors, so a warning an example does not show on purpose fails the build.
sphinx-gallery re-runs an example only when its ``.md5`` differs from the script's; it never deletes
what it generated for a script that is gone, and under ``-W`` that orphan page fails the next build
("document isn't included in any toctree"). Before it runs, the files of removed scripts are
deleted, and when torch, Python or the figure style changed (``site_context.execution_key``),
every ``.md5``: the documented way to make it run an example again (sphinx-gallery, "Rerunning
stale examples").
"""

from __future__ import annotations

import random
import re
import warnings
from pathlib import Path

from site_context import execution_key

_saved_filters: list = []
_saved_threads: list[int] = []


def reset_before_example(gallery_conf: dict, fname: str, when: str) -> None:
    import matplotlib
    import matplotlib.pyplot as plt
    import numpy as np
    import torch

    plt.close("all")
    if when == "before":
        matplotlib.rc_file_defaults()  # the site's style (docs/matplotlibrc), whatever came before
        torch.manual_seed(0)
        random.seed(0)
        np.random.seed(0)
        _saved_filters[:] = warnings.filters[:]
        _saved_threads[:] = [torch.get_num_threads()]
        warnings.simplefilter("error")
        # matplotlib warns when placing a legend at loc="best" took long: on a busy build machine
        # that depends on the load, not on the example, so it must not fail the build.
        warnings.filterwarnings("ignore", message="Creating legend with loc=")
    else:
        warnings.filters[:] = _saved_filters
        torch.set_num_threads(_saved_threads[0])
        torch.set_grad_enabled(True)


class SVGFigures:
    """sphinx-gallery's matplotlib scraper, writing SVG without a date (legible at any width, and
    the same file on every build). A class, not a lambda, so the configuration can be pickled
    (it must live in a module, not in conf.py, for parallel builds)."""

    def __repr__(self) -> str:
        return "SVGFigures"

    def __call__(self, block, block_vars, gallery_conf):
        from sphinx_gallery.scrapers import matplotlib_scraper

        return matplotlib_scraper(
            block, block_vars, gallery_conf, format="svg", metadata={"Date": None}
        )


def keep_gallery_current(app) -> None:
    conf = app.config.sphinx_gallery_conf
    scripts, out = Path(app.srcdir, conf["examples_dirs"]), Path(app.srcdir, conf["gallery_dirs"])
    out.mkdir(parents=True, exist_ok=True)
    for copy in out.glob("*.py"):  # sphinx-gallery's copy of each script it rendered
        if not (scripts / copy.name).exists():
            generated = re.compile(rf"({copy.stem}|sphx_glr_{copy.stem}_(\d+|thumb))\..+")
            for path in [p for p in out.rglob("*") if generated.fullmatch(p.name)]:
                path.unlink()
    stamp = out / ".executed-with"
    if not stamp.is_file() or stamp.read_text() != execution_key():
        for md5 in out.rglob("*.md5"):
            md5.unlink()
        stamp.write_text(execution_key())


def setup(app) -> dict:
    app.connect("builder-inited", keep_gallery_current, priority=400)  # sphinx-gallery runs at 500
    return {"parallel_read_safe": True, "parallel_write_safe": True}
