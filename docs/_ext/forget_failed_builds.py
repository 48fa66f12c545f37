"""After a build with warnings or an error, forget Sphinx's saved environment.

Why: Sphinx re-reads only changed pages, so an unchanged run after a failed one would report
success; without the saved environment the next run reads every page (results stay cached).
Upstream: sphinx-doc/sphinx#725 (warnings of unchanged files are not shown again; open). Sphinx
has no public count of warnings, so this reads the private ``app._warncount``.
"""

from __future__ import annotations

from pathlib import Path

from sphinx.application import ENV_PICKLE_FILENAME, Sphinx


def _forget_if_failed(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app._warncount > 0:
        Path(app.doctreedir, ENV_PICKLE_FILENAME).unlink(missing_ok=True)


def setup(app: Sphinx) -> dict:
    app.connect("build-finished", _forget_if_failed, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
