"""Reset global state around every gallery example (sphinx-gallery ``reset_modules``).

Why: examples run one after another in the build's own process. Without a reset, one example's
random state, open figures or warning filters would change the next one's output, and two builds
would not agree (an example may also change torch's thread count; it is restored). Before each example: fixed seeds, and warnings become errors, so a warning that an
example does not catch and show on purpose fails the build instead of slipping into the page.
"""

from __future__ import annotations

import random
import warnings

_saved_filters: list = []
_saved_threads: list[int] = []


def reset_before_example(gallery_conf: dict, fname: str, when: str) -> None:
    import matplotlib.pyplot as plt
    import numpy as np
    import torch

    plt.close("all")
    if when == "before":
        torch.manual_seed(0)
        random.seed(0)
        np.random.seed(0)
        _saved_filters[:] = warnings.filters[:]
        _saved_threads[:] = [torch.get_num_threads()]
        warnings.simplefilter("error")
    else:
        warnings.filters[:] = _saved_filters
        torch.set_num_threads(_saved_threads[0])
        torch.set_grad_enabled(True)
