"""The ledger's counts and claim tables, computed from the claim sections when the site is built.

Why: each ledger page (``docs/ledger-*.md``, titled ``# Ledger 000: ...``) has one section per
claim: a label ``(ledger-000-5)=``, the heading ``## 000-5: <the claim in our words>`` and, on the
next line, its verdict badge. The overview, ``docs/ledger.md``, sums the verdicts up and lists
every claim. Typed by hand, those numbers and rows stood in five places and needed four tests to
stay in sync; here they are derived from the sections, so a claim's section is the one place to
change. (A code cell could not do it: a page's notebook download runs alone, without the other
pages' Markdown.)

When Sphinx reads ``docs/ledger.md`` (``source-read``), two kinds of fenced placeholders in it are
replaced by Markdown:

* ```` ```{ledger-summary} ```` : a sentence with the totals and the table of verdicts per text;
* ```` ```{ledger-claims} 000 ```` : text 000's claims (link, verdict badge, heading).

Without this extension the placeholders are unknown directives, which fail the strict build. A
malformed section (a label without its heading and badge, an unknown verdict, a badge of the
wrong colour, claim numbers with a gap) fails the build too, naming the page and the claim. The
overview is read again whenever a ledger page changes (``env.note_dependency``).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError

OVERVIEW = "docs/ledger"
# The verdict scale of docs/ledger.md: verdict -> (sphinx-design badge colour, words for a count).
VERDICTS = {
    "correct": ("success", "hold"),
    "incomplete": ("info", "are true but incomplete"),
    "misleading": ("warning", "are misleading"),
    "outdated": ("secondary", "describe an older PyTorch"),
    "wrong": ("danger", "are wrong"),
}
TITLE = re.compile(r"^# Ledger (\d{3}):", re.M)
LABEL = re.compile(r"^\(ledger-(\d{3}-\d+)\)=\n", re.M)
SECTION = re.compile(
    r"## (?P<id>\d{3}-\d+): (?P<claim>.+)\n\n\{bdg-(?P<colour>\w+)\}`(?P<verdict>\w+)`"
)
PLACEHOLDER = re.compile(r"^```\{ledger-(summary|claims)\}[ \t]*(\d{3})?[ \t]*\n```[ \t]*$", re.M)


def badge(verdict: str) -> str:
    return f"{{bdg-{VERDICTS[verdict][0]}}}`{verdict}`"


def read_texts(docs: Path) -> dict[str, tuple[str, list[tuple[str, str, str]]]]:
    """{text number: (page name, [(claim id, claim, verdict), ...])} from the ledger pages."""
    texts = {}
    for path in sorted(docs.glob("ledger-*.md")):
        markdown = path.read_text(encoding="utf-8")
        number = TITLE.search(markdown)
        if not number:
            raise ExtensionError(f"{path.name}: a ledger page needs the title '# Ledger NNN: ...'")
        parts = LABEL.split(markdown)
        claims = []
        for label, body in zip(parts[1::2], parts[2::2], strict=True):
            section = SECTION.match(body)
            if not section or section["id"] != label:
                raise ExtensionError(
                    f"{path.name}, (ledger-{label})=: the label must be followed by "
                    f"'## {label}: <claim>', an empty line and a verdict badge"
                )
            verdict, colour = section["verdict"], section["colour"]
            if verdict not in VERDICTS or VERDICTS[verdict][0] != colour:
                raise ExtensionError(
                    f"{path.name}, {label}: {{bdg-{colour}}}`{verdict}` is not on the verdict "
                    f"scale ({', '.join(badge(v) for v in VERDICTS)})"
                )
            claims.append((label, section["claim"], verdict))
        ids = [label for label, _, _ in claims]
        expected = [f"{number[1]}-{n}" for n in range(1, len(ids) + 1)]
        if not ids or ids != expected:
            raise ExtensionError(f"{path.name}: claims must be numbered {number[1]}-1 to N: {ids}")
        texts[number[1]] = (path.stem, claims)
    return dict(sorted(texts.items()))


def summary(texts) -> str:
    """The totals in a sentence, then a table of the verdicts per text."""
    counts = {number: Counter(v for _, _, v in claims) for number, (_, claims) in texts.items()}
    total = Counter()
    for count in counts.values():
        total.update(count)
    claims = sum(len(c) for _, c in texts.values())
    said = [f"{total[v]} {words}" for v, (_, words) in VERDICTS.items()]
    lines = [
        f"Between them the texts make **{claims} technical claims**: "
        f"{', '.join(said[:-1])} and {said[-1]}.",
        "",
        "| text | " + " | ".join(badge(v) for v in VERDICTS) + " | claims |",
        "| --- " * (len(VERDICTS) + 2) + "|",
    ]
    for number, (page, claims_of_text) in texts.items():
        cells = [str(counts[number][v]) for v in VERDICTS]
        lines.append(
            f"| {{doc}}`{number} <{page}>` | {' | '.join(cells)} | {len(claims_of_text)} |"
        )
    cells = [str(total[v]) for v in VERDICTS]
    lines.append(f"| **all** | {' | '.join(cells)} | **{claims}** |")
    return "\n".join(lines)


def claims_table(texts, number: str) -> str:
    if number not in texts:
        raise ExtensionError(f"ledger.md: {{ledger-claims}} {number}: no page '# Ledger {number}'")
    lines = ["| claim | verdict | what the text says, in our words |", "| --- | --- | --- |"]
    for label, claim, verdict in texts[number][1]:
        shown = label.replace("-", "\N{NON-BREAKING HYPHEN}")  # the id never breaks in a cell
        lines.append(f"| {{ref}}`{shown} <ledger-{label}>` | {badge(verdict)} | {claim} |")
    return "\n".join(lines)


def fill_in(app: Sphinx, docname: str, source: list[str]) -> None:
    if docname != OVERVIEW:
        return
    docs = Path(app.srcdir) / "docs"
    for path in sorted(docs.glob("ledger-*.md")):
        app.env.note_dependency(str(path))
    texts = read_texts(docs)

    def replace(match: re.Match) -> str:
        if match[1] == "summary":
            return summary(texts)
        return claims_table(texts, match[2] or "")

    source[0] = PLACEHOLDER.sub(replace, source[0])


def setup(app: Sphinx) -> dict:
    app.connect("source-read", fill_in)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
