"""Draw an autograd graph from the live ``grad_fn`` objects, before and after ``backward()``.

Why this exists: pictures of "the graph" in tutorials are drawn by hand, so they cannot show what
PyTorch really keeps. This module walks ``tensor.grad_fn`` and ``next_functions`` of a real graph,
reads every ``_saved_*`` attribute of every node (a saved tensor raises ``RuntimeError`` when read
after backward freed it, marked "freed", or after an in-place operation changed it, marked "changed
in place"), and draws the result with matplotlib as inline SVG. The same walk
also writes the figure's text alternative, so the picture and its description cannot disagree.

Legible on a phone: each snapshot is its own SVG, shown at its natural size (9 pt text is 12 CSS
px), side by side where the page is wide enough and one under the other where it is not. Box text
comes in short lines (a node's label and a leaf's shape on lines of their own), so that a small
graph fits a phone's 328 px column; a wider one scrolls sideways instead of shrinking its text.
Colours as everywhere on the site: saved blue, freed or changed in place orange (dashed), leaf green.

Usage (pages execute with ``docs/`` as the working directory)::

    from autograd_graph import draw, snapshot

    before = snapshot(loss, "before backward")
    loss.backward()
    after = snapshot(loss, "after backward")
    draw(before, after)          # displays as SVG in a notebook; .description is the text
"""

from __future__ import annotations

import html
import io
import itertools
import re
from dataclasses import dataclass

import matplotlib.pyplot as plt
import torch

__all__ = ["Graph", "Node", "Saved", "Snapshot", "draw", "snapshot"]

PREFIX = "_saved_"
_FIGURES = itertools.count(1)  # numbers the drawings of one page, so their SVG ids differ


@dataclass(frozen=True)
class Saved:
    """One ``_saved_*`` attribute of a node, as it could be read when the snapshot was taken."""

    name: str  # without the "_saved_" prefix, e.g. "self", "other", "result"
    kind: str  # "tensor", "freed", "changed" (in place), "none" (slot not used) or "value"
    text: str  # e.g. "(3,) float32, 12 bytes", "freed", "changed in place", "none", "(3,)"

    @property
    def freed(self) -> bool:
        return self.kind == "freed"

    @property
    def unusable(self) -> bool:
        """Backward through this node would fail: the tensor was freed or changed in place."""
        return self.kind in ("freed", "changed")

    def __str__(self) -> str:
        return f"{self.name} = {self.text}" if self.kind == "value" else f"{self.name}: {self.text}"


@dataclass(frozen=True)
class Node:
    name: str  # class name of the grad_fn, e.g. "MulBackward0", plus " (label)" if one was given
    depth: int  # longest path from the root
    saved: tuple[Saved, ...]
    children: tuple[int, ...]  # indices into Snapshot.nodes (next_functions, None dropped)
    leaf: str = ""  # for AccumulateGrad: the leaf's shape and dtype


@dataclass(frozen=True)
class Snapshot:
    title: str
    nodes: tuple[Node, ...]  # nodes[0] is the root

    @property
    def description(self) -> str:
        """A sentence per node, generated from the same walk as the drawing."""
        parts = []
        for node in self.nodes:
            if node.leaf:
                what = f"adds into the .grad of a leaf {node.leaf}"
            elif node.saved:
                what = "saved " + ", ".join(str(s) for s in node.saved)
            else:
                what = "saved nothing"
            nxt = ", ".join(self.nodes[i].name for i in node.children)
            parts.append(f"{node.name} {what}" + (f"; next: {nxt}" if nxt else ""))
        return f"{self.title}: " + ". ".join(parts) + "."


def _kind_and_text(value: object) -> tuple[str, str]:
    if isinstance(value, torch.Tensor):
        size = value.numel() * value.element_size()
        return "tensor", f"{_shape_dtype(value)}, {size} bytes"
    if value is None:
        return "none", "none"
    text = repr(value)
    return "value", text if len(text) <= 16 else text[:13] + "..."


def _shape_dtype(tensor: torch.Tensor) -> str:
    return f"{tuple(tensor.shape)} {str(tensor.dtype).removeprefix('torch.')}"


def _read_saved(fn: object) -> tuple[Saved, ...]:
    saved = []
    for attr in sorted(a for a in dir(fn) if a.startswith(PREFIX)):
        name = attr.removeprefix(PREFIX)
        try:
            value = getattr(fn, attr)
        except RuntimeError as error:
            if "has been modified by an inplace operation" in str(error):
                saved.append(Saved(name, "changed", "changed in place"))
            elif str(error).startswith("Trying to backward through the graph a second time"):
                saved.append(Saved(name, "freed", "freed"))  # released by backward()
            else:
                raise
        else:
            saved.append(Saved(name, *_kind_and_text(value)))
    return tuple(saved)


def snapshot(
    tensor: torch.Tensor, title: str = "", names: dict[str, torch.Tensor] | None = None
) -> Snapshot:
    """Walk the graph behind ``tensor`` and record every node and what it saved, right now.

    ``names`` labels nodes: a leaf's AccumulateGrad, or the grad_fn of a named non-leaf tensor.
    """
    if tensor.grad_fn is None:
        raise ValueError("this tensor has no grad_fn: it is a leaf or does not require grad")
    order = [tensor.grad_fn]  # grad_fn objects in discovery order, root first
    index = {id(tensor.grad_fn): 0}  # id(grad_fn) -> position in `order` (never shown)
    edges: list[list[int]] = [[]]
    stack = [tensor.grad_fn]
    while stack:
        fn = stack.pop()
        for child, _ in fn.next_functions:
            if child is None:  # an input that does not require grad
                continue
            if id(child) not in index:
                index[id(child)] = len(order)
                order.append(child)
                edges.append([])
                stack.append(child)
            if index[id(child)] not in edges[index[id(fn)]]:
                edges[index[id(fn)]].append(index[id(child)])
    depth = [0] * len(order)
    for _ in order:  # longest-path relaxation; the graph is a small DAG
        for parent, children in enumerate(edges):
            for child in children:
                depth[child] = max(depth[child], depth[parent] + 1)
    nodes = []
    for i, fn in enumerate(order):
        leaf = getattr(fn, "variable", None)  # AccumulateGrad holds the leaf it writes .grad into
        label = [k for k, t in (names or {}).items() if t is leaf or t.grad_fn is fn]
        name = type(fn).__name__ + (f" ({label[0]})" if label else "")
        shape = _shape_dtype(leaf) if leaf is not None else ""
        nodes.append(Node(name, depth[i], _read_saved(fn), tuple(edges[i]), shape))
    return Snapshot(title, tuple(nodes))


class Graph:
    """One or two snapshots, each an inline SVG with its own text alternative."""

    def __init__(self, svgs: list[str], descriptions: list[str]) -> None:
        self.svgs = svgs
        self.descriptions = descriptions
        self.description = " ".join(descriptions)

    def _repr_html_(self) -> str:
        figures = []
        for svg, description in zip(self.svgs, self.descriptions, strict=True):
            label = html.escape(description, quote=True)
            body = svg[svg.index("<svg") :]
            opening_end = body.index(">") + 1
            opening = body[:opening_end].replace("<svg", f'<svg role="img" aria-label="{label}"', 1)
            alt = (
                "<title>Autograd graph</title>"  # aria-label is the text; a <desc> would repeat it
            )
            figures.append(f"{opening}{alt}{body[opening_end:]}")
        # site.css: side by side when they fit, stacked when not; each at its natural size.
        return f'<div class="autograd-graphs">{"".join(figures)}</div>'

    def __repr__(self) -> str:
        return self.description


FONT = 9  # points: 12 CSS px at the drawing's natural size; boxes are sized from this
# The site's colours (docs/matplotlibrc): saved, freed, leaf; ink for text and arrows.
SAVED, FREED, LEAF, INK = "#2f80ed", "#e0542c", "#1a9c6b", "#24292f"


def _box_lines(node: Node) -> list[str]:
    """The text of a node's box, in short lines: a phone shows two leaves side by side."""
    kind, _, label = node.name.partition(" (")
    saved = [str(s).replace(" bytes", " B") for s in node.saved]
    if node.leaf:
        return [kind, f"leaf {label[:-1]}", node.leaf] if label else [kind, f"leaf {node.leaf}"]
    return [kind, f"({label}", *saved] if label else [kind, *saved]


def _layout(snap: Snapshot) -> tuple[dict[int, tuple[float, float]], float]:
    """Layers by depth (x in inches); in a layer, nodes follow the mean position of their parents.

    Returns the centre of every box and the width the widest layer needs.
    """
    parents: dict[int, list[int]] = {i: [] for i in range(len(snap.nodes))}
    for i, node in enumerate(snap.nodes):
        for child in node.children:
            parents[child].append(i)
    width = {
        i: max(map(len, _box_lines(n))) * FONT * 0.6 / 72 + 0.2 for i, n in enumerate(snap.nodes)
    }
    where: dict[int, tuple[float, float]] = {}
    needed = 0.0
    for depth in range(max(node.depth for node in snap.nodes) + 1):
        members = [i for i, node in enumerate(snap.nodes) if node.depth == depth]
        members.sort(key=lambda i: sum(where[p][0] for p in parents[i]) / max(len(parents[i]), 1))
        total = sum(width[i] for i in members) + 0.15 * (len(members) - 1)
        left = -total / 2
        for i in members:
            where[i] = (left + width[i] / 2, -depth)
            left += width[i] + 0.15
        needed = max(needed, total)
    return where, needed


def _draw_panel(ax: plt.Axes, snap: Snapshot, where: dict, width: float) -> None:
    boxes = {}
    for i, node in enumerate(snap.nodes):
        freed = any(s.unusable for s in node.saved)
        edge = FREED if freed else LEAF if node.leaf else SAVED if node.saved else "#808080"
        boxes[i] = ax.text(
            *where[i],
            "\n".join(_box_lines(node)),
            ha="center",
            va="center",
            fontsize=FONT,
            zorder=2,
            color=INK,
            bbox={
                "boxstyle": "round,pad=0.4",
                "fc": "none",
                "ec": edge,
                "lw": 2.5 if freed else 1.5,
                "ls": "--" if freed else "-",
            },
        )
    for i, node in enumerate(snap.nodes):
        for child in node.children:
            (x0, y0), (x1, y1) = where[i], where[child]
            bend = 0.0 if y0 - y1 < 1.5 else (0.4 if x1 <= x0 else -0.4)  # skip layers in an arc
            ax.annotate(
                "",
                xy=(x1, y1),
                xytext=(x0, y0),
                zorder=3,
                arrowprops={
                    "arrowstyle": "-|>",
                    "color": "#57606a",
                    "connectionstyle": f"arc3,rad={bend}",
                    "patchA": boxes[i].get_bbox_patch(),
                    "patchB": boxes[child].get_bbox_patch(),
                },
            )
    ax.set_xlim(-width / 2, width / 2)
    ax.set_ylim(min(y for _, y in where.values()) - 0.5, 0.5)
    ax.set_title(snap.title, fontsize=FONT, color=INK)
    ax.axis("off")


def draw(*snaps: Snapshot, height: float | None = None) -> Graph:
    """Draw one or two snapshots, each as its own SVG; returns a Graph (inline SVG + description).

    ``height`` (inches) defaults to what the deepest graph needs.
    """
    if not 1 <= len(snaps) <= 2:
        raise ValueError("draw() takes one or two snapshots")
    layouts = [_layout(snap) for snap in snaps]
    depth = max(max(node.depth for node in snap.nodes) for snap in snaps)
    lines = max(len(_box_lines(node)) for snap in snaps for node in snap.nodes)
    height = height or 0.7 + (depth + 1) * (0.25 + lines * FONT * 1.3 / 72)
    settings = {
        "svg.hashsalt": "autograd-graph",  # stable ids: the same SVG on every build
        "svg.fonttype": "none",  # text stays text (selectable, searchable)
    }
    svgs = []
    for snap, (where, needed) in zip(snaps, layouts, strict=True):
        width = max(needed + 0.3, 2.5)
        buffer = io.StringIO()
        with plt.rc_context(settings):
            fig, ax = plt.subplots(figsize=(width, height))
            _draw_panel(ax, snap, where, width)
            fig.subplots_adjust(left=0, right=1, bottom=0.02, top=1 - 0.3 / height)
            # no metadata: matplotlib then writes no RDF block (invalid inline in HTML) and no date
            no_metadata = dict.fromkeys(("Creator", "Date", "Format", "Type"))
            fig.savefig(buffer, format="svg", metadata=no_metadata, transparent=True)
            plt.close(fig)
        # matplotlib numbers ids from 1 in every SVG ("figure_1", "patch_1"): prefix them, and the
        # references to them, so that several drawings inline on one page keep unique ids.
        prefix = f"autograd-graph-{next(_FIGURES)}-"
        svg = re.sub(r'\bid="', f'id="{prefix}', buffer.getvalue())
        svgs.append(svg.replace("url(#", f"url(#{prefix}").replace('href="#', f'href="#{prefix}'))
    return Graph(svgs, [snap.description for snap in snaps])
