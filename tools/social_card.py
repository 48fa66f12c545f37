"""Draw the picture that link previews show (``og:image``): ``docs/_extra/social-card.png``.

Why: a link to the site pasted in a chat or a post gets a preview card from the page's Open Graph
and Twitter metadata; without ``og:image`` it is a bare line of text. sphinxext-opengraph can draw
one card per page, but that costs about a third of a second per page on every cold build. One card
for the whole site, drawn here with matplotlib (1200 x 630, the size the large card layouts use),
is enough: the title and description of each page travel in its own ``og:`` tags. The drawing
names the torch version the site was built with, and its bytes depend only on the pinned
matplotlib (no date or software tag is written into the PNG), so drawing it twice gives the same
file. It is drawn once and committed, not on every build: ``python tools/social_card.py`` redraws
it, and ``tests/test_site_shell.py`` fails when the committed card is not what this script draws
with the pinned torch and matplotlib (a new torch pin, say).
"""

from __future__ import annotations

from pathlib import Path

NAME = "social-card.png"
SIZE = (1200, 630)  # pixels
ALT = (
    "retain_graph, explained: why PyTorch says that it is trying to backward through the graph "
    "a second time, and what to do instead."
)
INK, PAPER, ACCENT, MUTED = "#e6edf3", "#0d1117", "#ff7b72", "#8b949e"


def freed_chain() -> list[tuple[str, str]]:
    """The nodes of ``(a * b).tanh().sum()``'s graph, input side first, each with the names of
    the tensors it saved; asserts that backward() frees every one of them."""
    import torch

    a, b = torch.ones(3, requires_grad=True), torch.full((3,), 0.5, requires_grad=True)
    loss = (a * b).tanh().sum()
    nodes, node = [], loss.grad_fn
    while node is not None:
        nodes.append(node)
        node = next((n for n, _ in node.next_functions if n is not None and n.next_functions), None)
    saved = {
        node: [
            n for n in dir(node) if n.startswith("_saved_") and torch.is_tensor(getattr(node, n))
        ]
        for node in nodes
    }
    loss.backward()
    for node, names in saved.items():
        for name in names:
            try:
                getattr(node, name)
            except RuntimeError:
                continue
            raise AssertionError(f"{type(node).__name__}.{name} outlived backward()")
    return [
        (type(node).__name__, ", ".join(n.removeprefix("_saved_") for n in saved[node]))
        for node in reversed(nodes)
    ]


def draw(path: Path, torch_version: str) -> Path:
    """Draw the card to ``path`` (PNG) and return the path. The graph on it is a live one."""
    import matplotlib

    matplotlib.use("agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    dpi = 100
    fig = plt.figure(figsize=(SIZE[0] / dpi, SIZE[1] / dpi), dpi=dpi, facecolor=PAPER)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set(xlim=(0, SIZE[0]), ylim=(0, SIZE[1]))
    ax.axis("off")
    ax.text(70, 520, "retain_graph, explained", color=INK, fontsize=54, weight="bold")
    ax.text(
        72,
        455,
        "RuntimeError: Trying to backward through the graph a second time",
        color=ACCENT,
        fontsize=21,
        family="monospace",
    )
    ax.text(
        72,
        400,
        "What backward() frees, why, and the fix that is right for your code.",
        color=INK,
        fontsize=22,
    )
    # A live graph whose saved values are struck through: what backward() freed.
    chain = freed_chain()
    centres = [(190 + 310 * i, 230) for i in range(len(chain))]
    for (x, y), (label, saved) in zip(centres, chain):
        ax.add_patch(
            FancyBboxPatch(
                (x - 125, y - 38), 250, 76, boxstyle="round,pad=4", fc="#161b22", ec=INK, lw=2
            )
        )
        ax.text(x, y, label, color=INK, fontsize=18, family="monospace", ha="center", va="center")
        if saved:
            note = f"saved: {saved}"
            ax.text(x, y - 78, note, color=MUTED, fontsize=16, ha="center", va="center")
            half = 6.2 * len(note)  # about half the width of the note at this size
            ax.plot([x - half, x + half], [y - 80, y - 80], color=ACCENT, lw=2.5)
    for (x0, y), (x1, _) in zip(centres, centres[1:]):
        ax.add_patch(
            FancyArrowPatch(
                (x1 - 135, y), (x0 + 135, y), arrowstyle="-|>", mutation_scale=22, color=INK, lw=2
            )
        )
    ax.text(
        72,
        60,
        f"Every output on the site comes from code run at build time on torch {torch_version}.",
        color=MUTED,
        fontsize=18,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi, facecolor=PAPER, metadata={"Software": None})
    plt.close(fig)
    return path


CARD = Path(__file__).resolve().parents[1] / "docs" / "_extra" / NAME


def main() -> None:
    import torch

    print(draw(CARD, torch.__version__.split("+")[0]))


if __name__ == "__main__":
    main()
