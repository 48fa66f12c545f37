"""After a build with warnings or an error, forget Sphinx's saved environment.

Why: Sphinx re-reads only pages whose files changed. After a build that failed on a page (an
unexpected error, a wrong expected error), an unchanged second run would skip that page, emit no
warning, and report success. Dropping the saved environment makes the next run read every page
again; executed results stay cached (jupyter-cache, sphinx-gallery's MD5), so that costs little.
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
