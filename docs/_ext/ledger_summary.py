"""The ledger's counts and claim tables (the claims that do not hold, with the numbers of those that
do), computed from the claim sections when ``docs/ledger.md`` is
read (a code cell cannot: a download runs without the other pages). A claim is a label
``(ledger-000-5)=``, a heading ``## 000-5: <claim>``, an empty line and its verdict badge; anything
else after such a label, or a placeholder left unreplaced, fails the build.
"""

import re
from collections import Counter
from pathlib import Path

from sphinx.errors import ExtensionError

# The verdict scale of docs/ledger.md: verdict -> (sphinx-design badge colour, words for a count).
VERDICTS = {
    "correct": ("success", "hold"),
    "incomplete": ("info", "are true but incomplete"),
    "misleading": ("warning", "are misleading"),
    "outdated": ("secondary", "describe an older PyTorch"),
    "wrong": ("danger", "are wrong"),
}
CLAIM = re.compile(r"^\(ledger-(\d{3})-(\d+)\)=\n(?:## \1-\2: (.+)\n\n\{bdg-\w+\}`(\w+)`)?", re.M)
PLACEHOLDER = re.compile(r"^```\{ledger-(summary|claims)\}[ \t]*(\d{3})?[ \t]*\n```[ \t]*$", re.M)
HYPHEN = "\N{NON-BREAKING HYPHEN}"  # a claim id never breaks in a table cell
BADGE = {verdict: f"{{bdg-{colour}}}`{verdict}`" for verdict, (colour, _) in VERDICTS.items()}


def read_claims(docs: Path) -> dict[str, list[tuple[str, str, str, str]]]:
    """{text number: [(page, claim id, claim, verdict), ...]} from the ledger pages."""
    texts = {}
    for path in sorted(docs.glob("ledger-*.md")):
        for text, n, claim, verdict in CLAIM.findall(path.read_text(encoding="utf-8")):
            if verdict not in VERDICTS:
                raise ExtensionError(
                    f"{path.name}, (ledger-{text}-{n})=: the label must be followed by "
                    f"'## {text}-{n}: <claim>', an empty line and a badge: {', '.join(VERDICTS)}"
                )
            texts.setdefault(text, []).append((path.stem, f"{text}-{n}", claim, verdict))
    return dict(sorted(texts.items()))


def table(head: list, rows: list) -> str:
    return "\n".join(
        "| " + " | ".join(map(str, cells)) + " |" for cells in [head, ["---"] * len(head), *rows]
    )


def summary(texts) -> str:
    counts = {text: Counter(claim[3] for claim in claims) for text, claims in texts.items()}
    total = sum(counts.values(), Counter())
    said = [f"{total[v]} {words}" for v, (_, words) in VERDICTS.items()]
    rows = [
        [f"{{doc}}`{text} <{claims[0][0]}>`", *(counts[text][v] for v in VERDICTS), len(claims)]
        for text, claims in texts.items()
    ]
    rows.append(["**all**", *(total[v] for v in VERDICTS), f"**{total.total()}**"])
    return (
        f"Between them the texts make **{total.total()} technical claims**: "
        f"{', '.join(said[:-1])} and {said[-1]}.\n\n"
        + table(["text", *BADGE.values(), "claims"], rows)
    )


def fill_in(app, docname: str, source: list[str]) -> None:
    if docname != "docs/ledger":
        return
    docs = Path(app.srcdir) / "docs"
    for path in [*docs.glob("ledger-*.md"), Path(__file__)]:  # this code writes the tables too
        app.env.note_dependency(str(path))
    texts = read_claims(docs)

    def replace(match: re.Match) -> str:
        if match[1] == "summary":
            return summary(texts)
        if match[2] not in texts:
            raise ExtensionError(f"ledger.md: {{ledger-claims}} {match[2]}: no such text")
        link = "{{ref}}`{} <ledger-{}>`".format  # a claim that holds: its number only, below
        rows = [[link(i.replace("-", HYPHEN), i), BADGE[v], c] for _, i, c, v in texts[match[2]]]
        held = [row[0] for row in rows if row[1] == BADGE["correct"]]
        rows = [row for row in rows if row[1] != BADGE["correct"]]
        said = f"\n\nHold ({BADGE['correct']}): {', '.join(held)}." if held else ""
        return table(["claim", "verdict", "what the text says, in our words"], rows) + said

    source[0] = PLACEHOLDER.sub(replace, source[0])


def setup(app) -> dict:
    app.connect("source-read", fill_in)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
