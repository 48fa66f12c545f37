"""Reset global state around every gallery example (sphinx-gallery ``reset_modules``), and save
the examples' figures as SVG (``SVGFigures``).

Why: examples run one after another in the build's process; one's random state, figures, warning
filters or torch thread count would change the next one's output. Before each: fixed seeds, and
warnings become errors, so a warning an example does not show on purpose fails the build.
"""

from __future__ import annotations

import random
import warnings

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
