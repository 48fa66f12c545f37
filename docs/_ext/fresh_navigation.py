"""Rewrite every page when the site's navigation changed, so no page keeps an old sidebar.

Why: each page carries the whole navigation (furo's sidebar, previous/next links). Sphinx rewrites
only the pages whose sources changed, so an incremental build after, say, a retitled page or a
new page in a toctree left the other pages with the old sidebar, and differed from a clean build. After reading,
this compares the toctrees and titles with those of the previous build; when they differ, every
page is written again (writing is quick; nothing is re-executed).

Upstream: sphinx-doc/sphinx#5506 (open). Reproduction with Sphinx 9.0.4 and any theme with a
global sidebar (furo): build a project whose ``index`` toctree lists ``a`` and ``b``; swap them in
the toctree and build again: ``index.html`` shows the new order, ``a.html`` and ``b.html`` the old.
"""

from __future__ import annotations

import hashlib
import json

from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment

KEY = "site_navigation_digest"


def navigation_digest(env: BuildEnvironment) -> str:
    """A digest of what the sidebar and the previous/next links are made of."""
    navigation = {
        "toctrees": {doc: list(children) for doc, children in sorted(env.toctree_includes.items())},
        "titles": {doc: title.astext() for doc, title in sorted(env.titles.items())},
    }
    return hashlib.sha256(json.dumps(navigation, sort_keys=True).encode()).hexdigest()


def _rewrite_all_if_navigation_changed(app: Sphinx, env: BuildEnvironment) -> list[str]:
    digest = navigation_digest(env)
    previous = getattr(env, KEY, None)
    setattr(env, KEY, digest)
    if previous is not None and previous != digest:
        return sorted(env.found_docs)
    return []


def setup(app: Sphinx) -> dict:
    app.connect("env-updated", _rewrite_all_if_navigation_changed)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "env_version": 1}
