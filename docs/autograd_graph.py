"""Draw an autograd graph from the live ``grad_fn`` objects, before and after ``backward()``.

Why this exists: pictures of "the graph" in tutorials are drawn by hand, so they cannot show what
PyTorch really keeps. This module walks ``tensor.grad_fn`` and ``next_functions`` of a real graph,
reads every ``_saved_*`` attribute of every node (a freed saved tensor raises ``RuntimeError`` when
read, and is marked "freed"), and draws the result with matplotlib as inline SVG. The same walk
also writes the figure's text alternative, so the picture and its description cannot disagree.

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
    kind: str  # "tensor", "freed", "none" (slot not used) or "value" (a number, sizes, ...)
    text: str  # e.g. "(3,) float32, 12 bytes", "freed", "none", "(3,)"

    @property
    def freed(self) -> bool:
        return self.kind == "freed"

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
        except RuntimeError:  # the saved tensor was released by backward()
            saved.append(Saved(name, "freed", "freed"))
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
    """One or two snapshots drawn side by side; shows as inline SVG with a text alternative."""

    def __init__(self, svg: str, description: str) -> None:
        self.svg = svg
        self.description = description

    def _repr_html_(self) -> str:
        label = html.escape(self.description, quote=True)
        body = self.svg[self.svg.index("<svg") :]
        opening_end = body.index(">") + 1
        opening = body[:opening_end].replace(
            "<svg", f'<svg role="img" aria-label="{label}" style="max-width: 100%; height: auto"', 1
        )
        alt = f"<title>Autograd graph</title><desc>{html.escape(self.description)}</desc>"
        return f"<div>{opening}{alt}{body[opening_end:]}</div>"

    def __repr__(self) -> str:
        return self.description


FONT = 6.5  # points; boxes are sized from an estimate of the text width at this size


def _box_lines(node: Node) -> list[str]:
    lines = [node.name] + ([f"leaf {node.leaf}"] if node.leaf else [])
    return lines + [str(s).replace(" bytes", " B") for s in node.saved]


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
        freed = any(s.freed for s in node.saved)
        boxes[i] = ax.text(
            *where[i],
            "\n".join(_box_lines(node)),
            ha="center",
            va="center",
            fontsize=FONT,
            zorder=2,
            color="#8b0000" if freed else "black",
            bbox={
                "boxstyle": "round,pad=0.4",
                "fc": "#fde8e8" if freed else "#eef3fb",
                "ec": "0.4",
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
                    "color": "0.35",
                    "connectionstyle": f"arc3,rad={bend}",
                    "patchA": boxes[i].get_bbox_patch(),
                    "patchB": boxes[child].get_bbox_patch(),
                },
            )
    ax.set_xlim(-width / 2, width / 2)
    ax.set_ylim(min(y for _, y in where.values()) - 0.5, 0.5)
    ax.set_title(snap.title, fontsize=9)
    ax.axis("off")


def draw(*snaps: Snapshot, height: float = 3.0) -> Graph:
    """Draw one or two snapshots side by side; returns a Graph (inline SVG + description)."""
    if not 1 <= len(snaps) <= 2:
        raise ValueError("draw() takes one or two snapshots")
    layouts = [_layout(snap) for snap in snaps]
    widths = [max(needed + 0.3, 3.0) for _, needed in layouts]
    settings = {
        "svg.hashsalt": "autograd-graph",  # stable ids: the same SVG on every build
        "svg.fonttype": "none",  # text stays text (selectable, searchable)
    }
    buffer = io.StringIO()
    with plt.rc_context(settings):
        fig, axes = plt.subplots(
            1, len(snaps), figsize=(sum(widths), height), width_ratios=widths, squeeze=False
        )
        for ax, snap, (where, _), width in zip(axes[0], snaps, layouts, widths, strict=True):
            _draw_panel(ax, snap, where, width)
        fig.suptitle("Autograd graph (arrows: direction of backward)", fontsize=9)
        fig.subplots_adjust(left=0, right=1, bottom=0.02, top=1 - 0.45 / height, wspace=0)
        fig.savefig(buffer, format="svg", metadata={"Date": None})
        plt.close(fig)
    # matplotlib numbers ids from 1 in every SVG ("figure_1", "patch_1"): prefix them, and the
    # references to them, so that several drawings inline on one page keep unique ids.
    prefix = f"autograd-graph-{next(_FIGURES)}-"
    svg = re.sub(r'\bid="', f'id="{prefix}', buffer.getvalue())
    svg = svg.replace("url(#", f"url(#{prefix}").replace('href="#', f'href="#{prefix}')
    return Graph(svg, " ".join(s.description for s in snaps))
