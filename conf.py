"""Sphinx configuration for *retain_graph, explained*.

The source directory is the repository root: MyST-NB pages live in ``docs/``, sphinx-gallery
scripts in ``gallery/`` (rendered into ``auto_examples/``), and ``index.md`` is the home page.
Every page and script is executed during the build; MAINTAINING.md says what each setting below
enforces. Settings only: what must happen when a build starts is done by the extensions in
docs/_ext, in the order listed at ``extensions`` below.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path[:0] = [str(ROOT / "docs" / "_ext"), str(ROOT / "tools")]  # extensions; forking_kernel

# --- Fail early and clearly where Sphinx's own message would not -----------------------------------
# A missing Sphinx extension is named by Sphinx itself. These are not extensions: without them the
# build fails late (a kernel that cannot start, a traceback deep in a page), so name them here.
_NOT_EXTENSIONS = {
    "torch": "torch",
    "numpy": "numpy",
    "matplotlib": "matplotlib",
    "ipykernel": "ipykernel",
    "jupyter_cache": "jupyter-cache",
    # docs/frameworks.md runs these libraries (requirements/frameworks.txt):
    "lightning": "lightning",
    "accelerate": "accelerate",
    "transformers": "transformers",
    "vector_quantize_pytorch": "vector-quantize-pytorch",
}
_missing = [pkg for mod, pkg in _NOT_EXTENSIONS.items() if importlib.util.find_spec(mod) is None]
if _missing:
    raise SystemExit(
        f"conf.py: missing build dependencies: {', '.join(_missing)}. Build with `nox -s docs` "
        "(it installs the pinned versions), or: "
        "python -m pip install -r requirements/docs.txt -c constraints.txt"
    )

import site_context  # noqa: E402

# --- Project ------------------------------------------------------------------------------------
project = "retain_graph, explained"
author = "the retain_graph, explained authors"
# Fixed year: builds must be reproducible. Furo prints this in every page's footer, so the footer
# names the licences (README.md, "Licence"): code in LICENSE, text in LICENSE-TEXT.
copyright = "2026, the retain_graph, explained authors. Code: BSD-3-Clause; text: CC-BY-4.0"

REPOSITORY = "https://github.com/retain-graph-explained/retain-graph-explained"
BRANCH = "main"
TORCH_MINOR = ".".join(site_context.torch_version().split(".")[:2])
TORCH_DOCS = f"https://docs.pytorch.org/docs/{TORCH_MINOR}/"
PYTHON_DOCS = "https://docs.python.org/{}.{}/".format(*sys.version_info[:2])

extensions = [
    "myst_nb",
    "sphinx_gallery.gen_gallery",
    "sphinx.ext.intersphinx",
    "sphinx_copybutton",
    "sphinx_design",
    "sphinxext.opengraph",
    "notfound.extension",
    # Local extensions (docs/_ext). When a build starts (builder-inited): freshness empties the
    # execution caches on a new execution key and drops the files of removed scripts (priority
    # 400), execution writes the kernelspec and starts the zygote (400), internals creates and
    # trims the page cache and copies myst-nb's stylesheet (450), sphinx-gallery runs the scripts
    # (500). While a page is read: freshness notes its dependencies (source-read),
    # ledger_summary fills in the ledger, myst-nb executes it (or takes it from the cache,
    # internals), execution checks and completes its notebook (doctree-read). Then freshness
    # picks the pages to write (env-get-updated); html_output gives each page its context, links
    # its code and rewrites it (template_bridge); then site_context writes the sitemap and
    # robots.txt and freshness completes the search index (build-finished).
    "freshness",
    "site_context",
    "internals",
    "execution",
    "ledger_summary",
]
# Every rendered page gets links in its code and the rewrites that make it valid HTML and free of
# axe violations (docs/_ext/html_output.py says which, and why each has no setting).
template_bridge = "html_output.SiteTemplates"

root_doc = "index"
templates_path = ["docs/_templates"]
exclude_patterns = [
    "_build",
    ".*",  # .nox, .git, .github, .ci, .pytest_cache, .venv, ...
    "README.md",
    "CONTRIBUTING.md",
    "MAINTAINING.md",
    "tests",
    "requirements",
    "gallery",
    "docs/_ext",
    "docs/_templates",
    "docs/_ipython",
    "docs/_inventories",
    "node_modules",
    # sphinx-gallery writes notebooks next to its rst; myst-nb must not read (and re-execute) them.
    "auto_examples/*.ipynb",
    "auto_examples/**/*.ipynb",
    "auto_examples/*.py",
    "auto_examples/**/*.py",
]
nitpicky = True  # a role that resolves to nothing fails the build instead of rendering unlinked
# accessible-pygments (a furo dependency): colours that meet WCAG AA contrast on their background.
pygments_style = "github-light"
pygments_dark_style = "github-dark"

# --- MyST-NB: every page is executed; a cell may only raise when it says which error ----------
myst_enable_extensions = ["colon_fence", "deflist", "attrs_inline"]
myst_heading_anchors = 3
nb_execution_mode = "cache"  # re-execute a page only when its code changes (docs/_ext/freshness.py)
nb_execution_cache_path = str(ROOT / "_build" / ".jupyter_cache")
# Per cell. Cells take seconds, but a busy 2-core machine stretches them many times over (the
# longest page took 67 s on a machine with a load of 12); this only catches a cell that hangs.
nb_execution_timeout = 600
# nb_execution_raise_on_error stays False: with it, tracebacks are not logged (MyST-NB #616); -W
# fails the build instead, and nb_expectations names the cell.
nb_execution_show_tb = True
nb_output_stderr = "warn"  # an unexpected warning printed by a cell fails the build under -W
nb_merge_streams = True  # one output block per stream, however the kernel chunked it
nb_kernel_rgx_aliases = {".*": "python3"}
nb_render_markdown_format = "gfm"  # Markdown produced by cells (tables built from results) renders

# --- sphinx-gallery ----------------------------------------------------------------------------
sphinx_gallery_conf = {
    "examples_dirs": "gallery",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",  # every plot_*.py is executed
    "reset_modules": ("site_context.reset_before_example",),
    "reset_modules_order": "both",
    "image_scrapers": (site_context.SVGFigures(),),
    "remove_config_comments": True,
    "write_computation_times": False,  # timings differ between builds; the benchmark reports them
    "min_reported_time": float("inf"),
    "show_signature": False,
    "inspect_global_variables": False,
    # Sorted by file name: the default (by number of code lines) reorders the gallery on an edit.
    "within_subsection_order": "FileNameSortKey",
    # The {minigallery} blocks at the end of the pages list example files by path; sphinx-gallery
    # wants a backreferences directory for that. Keep it under _build, out of the source tree.
    "backreferences_dir": "_build/backreferences",
}

# --- Intersphinx, offline: vendored inventories (what they are: docs/_inventories/provenance.json)
intersphinx_mapping = {
    "torch": (TORCH_DOCS, str(ROOT / "docs" / "_inventories" / "torch.inv")),
    "python": (PYTHON_DOCS, str(ROOT / "docs" / "_inventories" / "python.inv")),
}

# --- HTML --------------------------------------------------------------------------------------
html_theme = "furo"
html_title = project
html_static_path = ["docs/_static"]
html_css_files = ["site.css"]
# The site's search ranking (see its header): pasted errors and readers' words find the page that
# explains them. It relies on each page's index entries, which searchindex.js holds for every page
# after any kind of build (docs/_ext/freshness.py carries over those of pages not written).
html_search_scorer = str(ROOT / "docs" / "_static" / "search_scorer.js")
html_favicon = "docs/_static/favicon.svg"
html_show_sourcelink = False
html_show_sphinx = False  # the footer keeps the licences, without the "Made with" credit
html_baseurl = site_context.site_url()
html_extra_path = ["docs/_extra"]  # robots.txt and sitemap.xml: docs/_ext/site_context.py
html_theme_options = {
    "source_repository": REPOSITORY,
    "source_branch": BRANCH,
    "source_directory": "",
    "top_of_page_buttons": ["view", "edit"],
    "navigation_with_keys": True,
}
html_context = {"repository": REPOSITORY, "branch": BRANCH}

# Copy buttons on code, never on outputs (myst-nb wraps outputs in div.output, sphinx-gallery in
# div.sphx-glr-script-out); prompts are stripped from what is copied.
copybutton_selector = "div:not(.output):not(.sphx-glr-script-out) > div.highlight > pre"
copybutton_exclude = ".linenos, .gp, .go"
copybutton_prompt_text = r">>> |\.\.\. |\$ |In \[\d*\]: | {2,5}\.\.\.: "
copybutton_prompt_is_regexp = True

ogp_site_url = site_context.site_url()
ogp_site_name = project
# One card for every page, committed in docs/_extra (the site root): 1200 x 630, no version on it.
ogp_social_cards = {"enable": False}
ogp_image = "social-card.png"
ogp_image_alt = (
    "retain_graph, explained: why PyTorch says that it is trying to backward through the graph "
    "a second time, and what to do instead."
)
ogp_custom_meta_tags = [
    '<meta property="og:image:width" content="1200" />',
    '<meta property="og:image:height" content="630" />',
    '<meta name="twitter:card" content="summary_large_image" />',
]
ogp_enable_meta_description = True
notfound_urls_prefix = site_context.site_url(path_only=True)
