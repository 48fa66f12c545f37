"""A local server for a built site and a headless Chromium: what the tests and the audit share.

``measure/site_audit.py`` (``nox -s audit``), ``measure/search_quality.py`` and the tests'
session-wide browser (``tests/conftest.py``) all use these; this module imports none of them.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import shutil
import socketserver
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
THEMES = ("light", "dark")


COMPRESSIBLE = (".html", ".css", ".js", ".svg", ".json", ".txt", ".xml")


@contextlib.contextmanager
def serve(site: Path = HTML, *, gzip: bool = False) -> Iterator[str]:
    """Serve the site on an ephemeral localhost port; yield its base URL. With ``gzip``, text files
    are sent gzip-compressed to clients that accept it, as GitHub Pages and Read the Docs do (for
    Lighthouse, whose timings follow the bytes transferred)."""

    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    from site_context import site_url

    prefix = site_url(path_only=True)  # "/retain-graph-explained/" on GitHub Pages

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def translate_path(self, path):
            """Serve the site at its root and at its canonical path, which the 404 page links to."""
            if prefix != "/" and path.startswith(prefix):
                path = "/" + path[len(prefix) :]
            return super().translate_path(path)

        def do_GET(self):
            path = Path(self.translate_path(self.path))
            if path.is_dir():
                path = path / "index.html"
            accepts = "gzip" in self.headers.get("Accept-Encoding", "")
            if not (gzip and accepts and path.is_file() and path.suffix in COMPRESSIBLE):
                return super().do_GET()
            import gzip as gzip_module

            body = gzip_module.compress(path.read_bytes(), mtime=0)
            self.send_response(200)
            self.send_header("Content-Type", self.guess_type(str(path)))
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    handler = functools.partial(Handler, directory=str(site))
    httpd = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


NO_TRANSITIONS = (
    "*, *::before, *::after { transition: none !important; animation: none !important; }"
)


def set_theme(page, theme: str) -> None:
    """Switch furo's theme the way its toggle does (body data attribute + remembered choice).
    Transitions are switched off first, so that axe reads final colours, never intermediate ones."""
    if not page.evaluate("!!document.getElementById('audit-no-transitions')"):
        page.add_style_tag(content=NO_TRANSITIONS)
        page.evaluate("document.head.lastElementChild.id = 'audit-no-transitions'")
    page.evaluate(
        "theme => { localStorage.setItem('theme', theme); document.body.dataset.theme = theme; }",
        theme,
    )
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


def open_page(browser_page, base: str, rel: str) -> set[str]:
    """Load a page and wait until it is idle; return the URLs it loaded (HTML, CSS, JS, images)."""
    urls: set[str] = set()
    listener = lambda response: urls.add(response.url)  # noqa: E731
    browser_page.on("response", listener)
    try:
        browser_page.goto(f"{base}/{rel}", wait_until="networkidle")
        # Lazy images count too: scroll through the page so that all of them load.
        browser_page.evaluate(
            "() => document.querySelectorAll('img[loading=lazy]').forEach(i => i.loading = 'eager')"
        )
        browser_page.wait_for_load_state("networkidle")
    finally:
        browser_page.remove_listener("response", listener)
    return urls


@contextlib.contextmanager
def chromium():
    """Debian's Chromium, headless, with the flags above (one per test session: conftest.py)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        try:
            yield browser
        finally:
            browser.close()
