"""Find the old graph in a loss, and the line of your code that built it, BEFORE ``backward()``.

Why this exists: "Trying to backward through the graph a second time" says *that* a backward pass
reached a part of the graph which an earlier backward pass had already freed, but not *which*
part. The usual culprit is a tensor carried over from an earlier iteration: a hidden state, a
running loss total, something computed before the loop, or kept on a module attribute. This
module walks the loss's graph (``grad_fn`` and ``next_functions``), checks every saved tensor of
every node without unpacking it (reading a freed one raises the very same ``RuntimeError``), and
reports the nodes whose saved tensors are gone. When the forward pass ran under
``torch.autograd.set_detect_anomaly(True)``, autograd stored the Python stack that created each
node in ``node.metadata["traceback_"]``, and the report names the line of your code that built
the old part of the graph.

Usage, with the forward pass that fails (torch, nothing else)::

    import torch
    from find_old_graph import find_old_graph

    with torch.autograd.set_detect_anomaly(True):   # only to learn the lines; optional
        loss = model(x).pow(2).mean()               # ... your forward pass ...
    report = find_old_graph(loss)                   # call it BEFORE loss.backward()
    print(report)
    loss.backward()

``report.culprits`` are the freed nodes through which the new graph enters the old one (the first
freed node on each path from the loss); ``report.freed`` lists every freed node. Each has
``node``, ``saved`` (the names of its freed saved tensors) and, with anomaly mode on,
``filename``, ``lineno`` and ``line``: your innermost frame on the stack that created it; a
culprit also has ``via``, the other lines of your code on the way from the loss to it.

Limits: a built-in node that saved nothing cannot be told apart from a new one (and never causes
this error); a graph kept with ``retain_graph=True`` has nothing freed, so nothing is reported.
A custom ``autograd.Function``'s node that a backward ran refuses ``ctx.saved_tensors`` whether or
not it saved anything; it is reported with ``saved=("ctx.saved_tensors",)`` and fails a second
pass only if its ``backward`` reads ``ctx.saved_tensors`` (the finder cannot see which). Tensors a
Function keeps on ``ctx`` directly are invisible to autograd and to this module. Saved tensors
are not unpacked, so their unpack hooks (checkpointing, offloading) do not run, where torch shows
a saved tensor's hook (2.13 and 2.14 do; 2.4 and 2.8 do not, 2.9 to 2.12 not run). Where it does
not, each is unpacked: a checkpointed block runs again per saved tensor, updating BatchNorm's
statistics. On those releases run the finder in a debugging run only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import torch

__all__ = ["FreedNode", "Report", "find_old_graph"]

_TORCH_DIR = str(Path(torch.__file__).resolve().parent)
_THIS_FILE = str(Path(__file__).resolve())
_FRAME = re.compile(
    r'File "(?P<file>.+)", line (?P<line>\d+), in (?P<func>.+)\n(?:\s+(?P<code>.*)\n)?'
)
_FREED = "Trying to backward through the graph a second time"
# Saved tensors show their unpack hook and data (pytorch/pytorch#164358; 2.13 and 2.14 do, 2.8 not):
# without them, looking at a hooked saved tensor means unpacking it.
UNPACKS_TO_LOOK = not hasattr(torch._C._autograd.SavedTensor, "unpack_hook")


@dataclass(frozen=True)
class FreedNode:
    """A node of the loss's graph whose saved tensors an earlier backward pass freed."""

    node: str  # the grad_fn's class name, e.g. "MmBackward0"
    saved: tuple[str, ...]  # names of its freed saved tensors, e.g. ("mat2", "self")
    filename: str | None = None  # where your code created it (anomaly mode only)
    lineno: int | None = None
    line: str | None = None  # that line of source, stripped
    via: tuple[str, ...] = ()  # other lines on the way from the loss to this node, loss first

    def __str__(self) -> str:
        what = f"freed: {', '.join(self.saved)}"
        if self.saved == ("ctx.saved_tensors",):
            what = (
                "a custom Function run by an earlier backward; fails if it reads ctx.saved_tensors"
            )
        if not self.lineno:
            return f"{self.node} ({what}); no anomaly-mode record"
        text = f"{self.node} ({what}), made by line {self.lineno}: {self.line}"
        return text + "".join(f"\n      reached via {step}" for step in self.via)


@dataclass(frozen=True)
class Report:
    """What ``find_old_graph`` found; ``str(report)`` is a short summary for printing."""

    nodes: int  # how many nodes the walk visited
    freed: tuple[FreedNode, ...] = field(default=())  # every freed node, nearest to the loss first
    culprits: tuple[FreedNode, ...] = field(default=())  # first freed node on each path

    def __bool__(self) -> bool:
        return bool(self.freed)

    def __str__(self) -> str:
        if not self.freed:
            return f"no freed saved tensor in any of the {self.nodes} nodes"
        lines = [
            f"{len(self.freed)} of {self.nodes} nodes were freed by an earlier backward(); "
            f"the new graph enters the old one at:"
        ]
        lines += [f"  {culprit}" for culprit in self.culprits]
        return "\n".join(lines)


def _freed_names(fn: object) -> tuple[str, ...]:
    """Names of the saved tensors of ``fn`` that can no longer be read, found without unpacking.

    Unpacking runs a saved tensor's unpack hook: under non-reentrant checkpointing that re-runs
    the checkpointed forward (and updates BatchNorm's running statistics). So each saved tensor is
    looked at through ``_raw_saved_*``: a hook or packed data means it is alive; only when both are
    gone is the ordinary attribute read, which then runs no hook and raises if it was freed.
    Releases whose saved tensors lack ``unpack_hook`` (2.8 and older, of those run) are read
    directly, so there a checkpointed forward runs again.
    """
    if isinstance(fn, torch.autograd.function.BackwardCFunction):  # a custom autograd.Function
        try:
            _ = fn._raw_saved_tensors  # refused after release, saved or not
        except RuntimeError as error:
            if _FREED in str(error):
                return ("ctx.saved_tensors",)
        return ()
    freed = []
    for attr in sorted(a for a in dir(fn) if a.startswith("_raw_saved_")):
        raw = getattr(fn, attr)
        items = raw if isinstance(raw, (list, tuple)) else [raw]
        if UNPACKS_TO_LOOK:
            pass  # no way to look without unpacking: read it (this runs a hook)
        elif any(item.unpack_hook is not None or item.data is not None for item in items):
            continue  # alive (a hooked tensor is not unpacked here)
        name = attr.removeprefix("_raw_saved_")
        try:
            getattr(fn, f"_saved_{name}")  # raises if freed (may run a hook where hidden)
        except RuntimeError as error:  # the error backward() would raise, raised early
            if _FREED in str(error):
                freed.append(name)
    return tuple(freed)


def _where(fn: object) -> tuple[str | None, int | None, str | None]:
    """Innermost frame outside torch (and this module) of the stack that created ``fn``."""
    stack = getattr(fn, "metadata", {}).get("traceback_")
    if not stack:
        return None, None, None
    for entry in reversed(stack):
        match = _FRAME.search(entry)
        if match is None:
            continue
        filename = match["file"]
        resolved = str(Path(filename).resolve()) if not filename.startswith("<") else filename
        if resolved.startswith(_TORCH_DIR) or resolved == _THIS_FILE:
            continue
        return filename, int(match["line"]), (match["code"] or "").strip() or None
    return None, None, None


def find_old_graph(loss: torch.Tensor) -> Report:
    """Walk ``loss.grad_fn``'s graph and report the nodes an earlier backward pass freed.

    Call it before ``loss.backward()``. Where torch shows saved tensors' hooks it unpacks none
    (no checkpointed block is re-run), so the backward pass afterwards behaves as it would have;
    on torch 2.4 and 2.8 see the module's limits.
    """
    if loss.grad_fn is None:
        raise ValueError("loss has no grad_fn: it does not require grad (no graph to search)")
    order, parent, culprit_ids = [], {loss.grad_fn: None}, set()
    frontier = [(loss.grad_fn, False)]  # (node, whether an earlier node on this path was freed)
    while frontier:  # breadth first, so the nodes nearest to the loss come first
        next_frontier = []
        for fn, behind_freed in frontier:
            names = _freed_names(fn)
            order.append((fn, names))
            if names and not behind_freed:
                culprit_ids.add(id(fn))
            for child, _ in fn.next_functions:
                if child is not None and child not in parent:
                    parent[child] = fn
                    next_frontier.append((child, behind_freed or bool(names)))
        frontier = next_frontier
    freed, culprits = [], []
    for fn, names in order:
        if not names:
            continue
        filename, lineno, line = _where(fn)
        via = []
        if id(fn) in culprit_ids and lineno is not None:
            step = parent[fn]
            while step is not None:  # from the culprit back up to the loss
                step_file, step_lineno, step_line = _where(step)
                text = f"line {step_lineno}: {step_line}"
                here = (step_file, step_lineno) == (filename, lineno)
                if step_lineno is not None and not here and text not in via:
                    via.append(text)
                step = parent[step]
        found = FreedNode(type(fn).__name__, names, filename, lineno, line, tuple(reversed(via)))
        freed.append(found)
        if id(fn) in culprit_ids:
            culprits.append(found)
    return Report(len(order), tuple(freed), tuple(culprits))
