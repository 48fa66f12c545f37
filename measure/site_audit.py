"""Site quality audit (`nox -s audit`): prints figures for every page of the built site.

It measures, on ``_build/html`` as it is (build first with ``nox -s docs``):

* **HTML validity**: errors reported by the W3C Nu HTML checker (``vnu.jar``, run with Java);
* **accessibility**: axe-core violations, in the light and the dark theme, in headless Chromium;
* **page weight**: bytes transferred for the HTML and every CSS, JS, font and image file the page
  loads, text gzip-compressed as the hosts send it (`transfer_size`);
* **other origins**: every request a page makes that does not go to the site itself;
* **the site's shell**: robots.txt naming the sitemap, a sitemap listing every content page, the
  404 page, and the link-preview metadata (``og:`` tags with the social card, ``twitter:card``);
* **search**: the share of the queries of ``tests/search_queries.toml`` whose first result on the
  search page is the page that answers them, and the mean reciprocal rank (``measure/search_quality.py``);
* **reproducibility**: a second build, from a clean copy of the repository in a temporary folder,
  compared byte for byte with ``_build/html`` (pages and downloads; ``--no-second-build`` skips);
* **Lighthouse** (mobile) scores for the home page and the largest pages: performance,
  accessibility, best practices, SEO. For Lighthouse the pages are served gzip-compressed, as the
  hosts (GitHub Pages, Read the Docs) serve them.

Targets: 0 Nu errors and 0 axe violations on every page, median page weight <= 90 KB
transferred, 0 requests to other origins, a complete shell, identical builds; Lighthouse performance >= 0.95 and the three
other categories = 1.0. The audit prints and never fails on a
figure (the tests, ``tests/test_quality.py``, assert the binary targets; Lighthouse scores depend
on the machine and are only reported). The tools are pinned in ``.ci/node/package.json``; install
them with ``npm ci --ignore-scripts --prefix .ci/node`` (``.ci/run`` does).

    python measure/site_audit.py [--lighthouse N] [--no-gzip] [--no-second-build]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import unquote, urlsplit

from browser import (  # noqa: F401  (re-exported for the audit's readers)
    CHROMIUM,
    CHROMIUM_FLAGS,
    COMPRESSIBLE,
    THEMES,
    open_page,
    serve,
    set_theme,
)
from search_quality import QUERIES, load_queries, measure, report_lines

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
NODE = ROOT / ".ci" / "node" / "node_modules"
VNU_JAR = NODE / "vnu-jar" / "build" / "dist" / "vnu.jar"
AXE_JS = NODE / "axe-core" / "axe.min.js"
LIGHTHOUSE = NODE / "lighthouse" / "cli" / "index.js"
JAVA = shutil.which("java")
NODE_BIN = shutil.which("node")
WEIGHT_TARGET = 90_000  # bytes transferred (text gzip-compressed), median page
LIGHTHOUSE_TARGETS = {
    "performance": 0.95,
    "accessibility": 1.0,
    "best-practices": 1.0,
    "seo": 1.0,
}


def site_pages(site: Path = HTML) -> list[Path]:
    """Every HTML page of the site (what a reader can open), as the tests define it."""
    return sorted(p for p in site.rglob("*.html") if "_static" not in p.parts)


# --- W3C Nu HTML checker ------------------------------------------------------------------------
def vnu_messages(pages: list[Path]) -> list[dict]:
    """Run vnu.jar on the pages; return its error messages (each with ``url``, ``message``...)."""
    command = [
        JAVA,
        "-jar",
        str(VNU_JAR),
        "--errors-only",
        "--format",
        "json",
        "--exit-zero-always",
    ]
    result = subprocess.run(
        [*command, *map(str, pages)], capture_output=True, text=True, check=False
    )
    try:
        messages = json.loads(result.stderr or result.stdout)["messages"]
    except (json.JSONDecodeError, KeyError) as exc:
        raise RuntimeError(
            f"vnu.jar gave no JSON report:\n{result.stdout}\n{result.stderr}"
        ) from exc
    return [m for m in messages if m.get("type") in ("error", "non-document-error")]


def describe_vnu(message: dict, site: Path = HTML) -> str:
    path = unquote(urlsplit(message.get("url", "")).path)
    with contextlib.suppress(ValueError):
        path = str(Path(path).relative_to(site))
    return f"{path}:{message.get('lastLine', '?')}: {message.get('message')}"


def axe_violations(page) -> list[dict]:
    """Run axe-core (from the local node_modules) on the loaded page; return its violations."""
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.add_script_tag(path=str(AXE_JS))
    return page.evaluate(
        """async () => {
            const results = await axe.run(document, {resultTypes: ["violations"]});
            return results.violations.map(v => ({
                id: v.id, impact: v.impact, help: v.help,
                nodes: v.nodes.map(n => n.target.join(" ")),
            }));
        }"""
    )


def describe_axe(violation: dict) -> str:
    nodes = violation["nodes"]
    shown = ", ".join(nodes[:3]) + (f" (+{len(nodes) - 3} more)" if len(nodes) > 3 else "")
    return f"{violation['id']} ({violation['impact']}): {violation['help']} [{shown}]"


def transfer_size(path: Path) -> int:
    """Bytes a reader downloads for one file: text files gzip-compressed (level 6, what GitHub
    Pages and Read the Docs send to every browser), images and fonts as they are."""
    import gzip as gzip_module

    if path.suffix in COMPRESSIBLE:
        return len(gzip_module.compress(path.read_bytes(), compresslevel=6, mtime=0))
    return path.stat().st_size


def loaded_bytes(site: Path, base: str, urls: set[str]) -> int:
    """Bytes transferred for the same-origin files behind the URLs a page loaded (compressed)."""
    total = 0
    for url in urls:
        parts = urlsplit(url)
        if f"{parts.scheme}://{parts.netloc}" != base:
            continue
        path = site / unquote(parts.path).lstrip("/")
        if path.is_dir():
            path = path / "index.html"
        if path.is_file():
            total += transfer_size(path)
    return total


def other_origins(base: str, urls: set[str]) -> list[str]:
    """The URLs among ``urls`` that leave the site (``data:`` and ``blob:`` URLs stay in the page)."""
    return sorted(
        url
        for url in urls
        if not url.startswith(("data:", "blob:"))
        and f"{urlsplit(url).scheme}://{urlsplit(url).netloc}" != base
    )


# --- The shell: robots.txt, sitemap, 404, link previews ------------------------------------------
PREVIEW_TAGS = ("og:title", "og:description", "og:image", "og:image:alt", "twitter:card")


def shell_problems(site: Path, pages: list[Path]) -> list[str]:
    """What is missing from the files and tags every site should have."""
    problems = []
    robots = site / "robots.txt"
    if not robots.exists() or not any(
        line.startswith("Sitemap: ") for line in robots.read_text().splitlines()
    ):
        problems.append("robots.txt is missing or names no sitemap")
    sitemap = site / "sitemap.xml"
    listed = (
        set(re.findall(r"<loc>([^<]+)</loc>", sitemap.read_text())) if sitemap.exists() else set()
    )
    content = [p for p in pages if p.name not in ("search.html", "genindex.html", "404.html")]
    unlisted = [
        p.relative_to(site).as_posix()
        for p in content
        if not any(loc.endswith("/" + p.relative_to(site).as_posix()) for loc in listed)
    ]
    if unlisted:
        problems.append(f"sitemap.xml does not list {len(unlisted)} pages: {unlisted[:5]}")
    if not (site / "404.html").exists():
        problems.append("no 404.html")
    for page in content:
        html = page.read_text(encoding="utf-8")
        missing = [tag for tag in PREVIEW_TAGS if f'"{tag}" content="' not in html]
        if missing:
            problems.append(f"{page.relative_to(site)}: no {', '.join(missing)}")
    return problems


# --- Reproducibility -----------------------------------------------------------------------------
def built_files(root: Path) -> dict[str, set[Path]]:
    """The files of a built site that two builds must share byte for byte, by kind."""
    return {
        "pages": {p.relative_to(root) for p in root.rglob("*.html") if "_static" not in p.parts},
        "downloads": {p.relative_to(root) for p in (root / "_downloads").rglob("*") if p.is_file()},
    }


def build_differences(site: Path, other: Path) -> dict[str, list[str]]:
    """Per kind (pages, downloads): the files that differ between two built sites, or that only
    one of them has."""
    ours, theirs = built_files(site), built_files(other)
    return {
        kind: sorted(str(rel) for rel in ours[kind] ^ theirs[kind])
        + sorted(
            str(rel)
            for rel in ours[kind] & theirs[kind]
            if (site / rel).read_bytes() != (other / rel).read_bytes()
        )
        for kind in ours
    }


def second_build_differences(site: Path) -> tuple[dict[str, set[Path]], dict[str, list[str]]]:
    """Build a clean copy of the repository in a temporary folder and compare it with ``site``:
    return the files compared, by kind, and :func:`build_differences`."""
    from builds import copy_tree, run_build

    with tempfile.TemporaryDirectory() as tmp:
        project = copy_tree(Path(tmp) / "site")
        result = run_build(project)
        if result.returncode != 0:
            raise RuntimeError(
                f"the second build failed:\n{(result.stdout + result.stderr)[-3000:]}"
            )
        return built_files(site), build_differences(site, project / "_build" / "html")


# --- Lighthouse ---------------------------------------------------------------------------------
def lighthouse(url: str, out: Path) -> dict[str, float | None]:
    """Lighthouse (mobile, the default form factor) on one URL; return the category scores."""
    env = {**os.environ, "CHROME_PATH": CHROMIUM or ""}
    command = [
        NODE_BIN,
        str(LIGHTHOUSE),
        url,
        "--quiet",
        "--chrome-flags=--headless --no-sandbox --disable-gpu",
        "--only-categories=" + ",".join(LIGHTHOUSE_TARGETS),
        "--output=json",
        f"--output-path={out}",
    ]
    result = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if result.returncode != 0 or not out.exists():
        raise RuntimeError(f"lighthouse failed on {url}:\n{result.stderr[-3000:]}")
    report = json.loads(out.read_text())
    return {key: report["categories"][key]["score"] for key in LIGHTHOUSE_TARGETS}


def failing_audits(report_path: Path) -> list[str]:
    """The Lighthouse audits that lost points (score < 1), as 'category: audit id (score)'."""
    report = json.loads(report_path.read_text())
    lines = []
    for key, category in report["categories"].items():
        for ref in category["auditRefs"]:
            audit = report["audits"][ref["id"]]
            score = audit.get("score")
            if ref.get("weight", 0) > 0 and score is not None and score < 1:
                value = audit.get("displayValue", "")
                lines.append(f"{key}: {ref['id']} ({score:.2f}) {value}".rstrip())
    return lines


# --- The report ---------------------------------------------------------------------------------
def missing_tools() -> list[str]:
    missing = []
    if not JAVA:
        missing.append("java (for vnu.jar)")
    if not NODE_BIN:
        missing.append("node (for lighthouse)")
    if not CHROMIUM:
        missing.append("chromium")
    for path in (VNU_JAR, AXE_JS, LIGHTHOUSE):
        if not path.exists():
            missing.append(
                f"{path.relative_to(ROOT)} (run `npm ci --ignore-scripts --prefix .ci/node`)"
            )
    return missing


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--lighthouse",
        type=int,
        default=3,
        metavar="N",
        help="run Lighthouse on the home page and the N largest pages (0: none)",
    )
    parser.add_argument(
        "--no-gzip", action="store_true", help="serve uncompressed to Lighthouse (harsher timings)"
    )
    parser.add_argument(
        "--no-second-build",
        action="store_true",
        help="skip the reproducibility check (a second, clean build in a temporary folder)",
    )
    parser.add_argument("--site", type=Path, default=HTML)
    parser.add_argument(
        "--queries", type=Path, default=None, help="score this query file (default: the tests')"
    )
    args = parser.parse_args()
    queries = args.queries or QUERIES
    load_queries(queries)  # refuses the held-out set before the long audit starts
    site = args.site.resolve()
    if not (site / "index.html").exists():
        return f"audit: no built site in {site}: run `nox -s docs` first"
    if missing := missing_tools():
        return "audit: missing tools: " + "; ".join(missing)
    pages = site_pages(site)
    rels = [p.relative_to(site).as_posix() for p in pages]

    print(f"Auditing {len(pages)} pages in {site}\n")
    errors = vnu_messages(pages)
    per_page_vnu = {rel: 0 for rel in rels}
    for message in errors:
        path = unquote(urlsplit(message.get("url", "")).path)
        with contextlib.suppress(ValueError):
            per_page_vnu[Path(path).relative_to(site).as_posix()] += 1

    from playwright.sync_api import sync_playwright

    weights: dict[str, int] = {}
    leaving: dict[str, list[str]] = {}
    axe: dict[str, dict[str, list[dict]]] = {}
    with serve(site) as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        context = browser.new_context()
        page = context.new_page()
        for rel in rels:
            urls = open_page(page, base, rel)
            weights[rel] = loaded_bytes(site, base, urls)
            leaving[rel] = other_origins(base, urls)
            axe[rel] = {}
            for theme in THEMES:
                set_theme(page, theme)
                axe[rel][theme] = axe_violations(page)
        browser.close()

        width = max(map(len, rels))
        print(
            f"{'page':<{width}}  {'Nu errors':>9}  {'axe light':>9}  {'axe dark':>8}  {'bytes':>9}"
        )
        for rel in rels:
            print(
                f"{rel:<{width}}  {per_page_vnu[rel]:>9}  {len(axe[rel]['light']):>9}  "
                f"{len(axe[rel]['dark']):>8}  {weights[rel]:>9,}"
            )
        median = statistics.median(weights.values())
        total_axe = sum(len(v) for page_axe in axe.values() for v in page_axe.values())
        print(
            f"\nNu HTML checker: {len(errors)} errors (target 0)"
            f"\naxe-core: {total_axe} violations, light + dark (target 0)"
            f"\npage weight: median {median:,.0f} bytes, largest {max(weights.values()):,} "
            f"(target: median <= {WEIGHT_TARGET:,})"
        )
        total_leaving = sum(len(urls) for urls in leaving.values())
        print(f"requests to other origins: {total_leaving} (target 0)")
        for rel, urls in leaving.items():
            for url in urls:
                print(f"  other origin: {rel}: {url}")
        problems = shell_problems(site, pages)
        print(
            "robots.txt, sitemap, 404 page, link-preview tags on every page: "
            + ("complete" if not problems else f"{len(problems)} problems (target 0)")
        )
        for problem in problems:
            print(f"  shell: {problem}")
        for message in errors[:40]:
            print("  Nu:", describe_vnu(message, site))
        for rel in rels:
            for theme in THEMES:
                for violation in axe[rel][theme]:
                    print(f"  axe {theme}: {rel}: {describe_axe(violation)}")

        if args.lighthouse > 0:
            largest = sorted(weights, key=weights.get, reverse=True)
            chosen = ["index.html"] + [r for r in largest if r != "index.html"][: args.lighthouse]
            print(
                "\nLighthouse (mobile), targets: "
                + ", ".join(f"{k} >= {v}" for k, v in LIGHTHOUSE_TARGETS.items())
            )
            print(f"{'page':<{width}}  " + "  ".join(f"{k:>14}" for k in LIGHTHOUSE_TARGETS))
            with (
                tempfile.TemporaryDirectory() as tmp,
                serve(site, gzip=not args.no_gzip) as gzip_base,
            ):
                for rel in chosen:
                    out = Path(tmp) / (rel.replace("/", "_") + ".json")
                    try:
                        scores = lighthouse(f"{gzip_base}/{rel}", out)
                    except RuntimeError as exc:
                        print(f"{rel:<{width}}  FAILED: {exc}")
                        continue
                    cells = []
                    for key, target in LIGHTHOUSE_TARGETS.items():
                        score = scores[key]
                        mark = "" if score is not None and score >= target else " !"
                        cells.append(
                            f"{'n/a' if score is None else f'{score:.2f}'}{mark}".rjust(14)
                        )
                    print(f"{rel:<{width}}  " + "  ".join(cells))
                    for line in failing_audits(out):
                        print(f"    {line}")

    # Search: the query set of tests/search_queries.toml on the real search page (tests/test_search.py
    # asserts the targets).
    print(f"\nsearch, {queries}:")
    outcomes, problems = measure(site, queries_path=queries)
    print("\n" + "\n".join(report_lines(outcomes)))
    for problem in problems:
        print(f"  search: {problem}")

    if not args.no_second_build:
        print("\nReproducibility: a second build from a clean copy, compared byte for byte ...")
        compared, differences = second_build_differences(site)
        different = [rel for kind in differences.values() for rel in kind]
        print(
            f"{len(compared['pages'])} pages and {len(compared['downloads'])} downloads compared: "
            f"{len(different)} differ (target 0)"
        )
        for rel in different:
            print(f"  differs: {rel}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
