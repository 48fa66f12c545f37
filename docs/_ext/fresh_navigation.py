"""Rewrite every page when the site's navigation changed, so no page keeps an old sidebar.

Why: each page carries the whole navigation (furo's sidebar, previous/next links). Sphinx rewrites
only the pages whose sources changed, so an incremental build after, say, a retitled page or a
gallery script that sphinx-gallery now sorts elsewhere (it orders examples by their number of code
lines) left the other pages with the old sidebar, and differed from a clean build. After reading,
this compares the toctrees and titles with those of the previous build; when they differ, every
page is written again (writing is quick; nothing is re-executed).
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
