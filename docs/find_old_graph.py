"""Where is the old graph? Name what carries an earlier step's graph into this step, and its fix.

"Trying to backward through the graph a second time" says *that* a backward pass reached a part
of the graph that an earlier pass freed, not *which* part, nor what keeps it. A tensor survives
from one step into the next only through a reference that survives the step: an attribute of an
object (a module, an optimizer, a scheduler, a sampler, a cache, a metric), an element of a
container, a closure's cell, a default argument, a module-level name. This module follows those
references from the objects you pass, and the loss's graph (``grad_fn``, ``next_functions``),
and reports:

* each place (an attribute path such as ``sampler.history[2]``) that holds a tensor whose graph
  reaches an earlier step's part, and what to do with it: **recompute** it every step (its old
  graph reaches weights that still train, some through it alone), **detach** it (a constant for the step, or samples
  kept for later), or treat it as **state** (detach it at each step's or window's start; reset
  it, as a new tensor, between independent batches; one that starts from a leaf that trains
  (with no optimizer: one given that requires grad), reached only through its earlier value (a learned
  ``h0``, or a value computed from weights), is named with it, as a condition: detach only what
  the previous step carried, or start each sequence again as its first step does). "Still trains" means an optimizer given or
  found holds the leaf; with no optimizer it says it cannot tell, unless the leaves reached are
  unchanged since made (``Tensor._version``) while others were updated: then a constant (labels
  made from ``requires_grad`` tensors), but a layer's weight (``nn.Parameter``: a framework's
  optimizer, not torch's, trains the others) gets the recompute first. Items of a ``deque(maxlen=...)``, or of a container that
  holds, under any name, this step's tensor too, are a bank or history (detach), unless the loss
  itself lives there (``history.append(history[-1] + loss)``): then the item it is made from is
  detached there. A value rebuilt from its earlier value that reaches trained weights only
  through it (``scale = sigmoid(temp) * 0.99 ** k``) is recomputed from them, not detached.
  A value that is its earlier value with new rows added (``torch.cat([old, new])[-n:]``, a replay
  buffer: only cat, stack, slices, views, or ``F.pad`` parts added without overlap in between,
  the new rows made without its own earlier value, from other carried values or none: a
  cache's every layer) is stored samples, not state, and so are rows written in place into a
  ring buffer (``buf[i % n] = v``, or after ``torch.roll``) when made without the old rows.
  Samples whose graph reaches weights that still train (a list or such a buffer, whatever the
  line order) get **samples**: the fix by what they are for (constants stored detached, or a
  buffer detached at each step's start; terms of one update, REINFORCE's, emptied after it;
  terms later updates train through computed anew from stored inputs); else detach. A tuple
  stored again whose items reach what the same items held at the call before (an LSTM's
  ``(h, c)``, before or after backward) is **state**, detached as a tuple. One tensor kept from earlier weights that this step's own terms train
  too (made before the loop, a closure cell, a default argument) is **recompute or record**,
  with the question only you can answer: to follow the weights, compute it inside the step; a record the
  loss compares against (PPO's old log-probs), detach it. A value kept, not rebuilt, that this
  loss does not use (any shape), or items appended to a list (any number of them), only holds
  memory: no error, listed apart, and ``bool(report)`` leaves it out; but items whose saved
  tensors are still alive (their graph is alive, saved activations kept: validation outputs
  appended without ``no_grad``, or losses after ``backward(retain_graph=True)``) grow memory at
  each step: ``bool(report)`` counts them, with the fix to append them detached (``loss.item()``),
  or, for values not trained through, to compute them under ``torch.no_grad()``. A running max or average of the loss gets a
  float's fix by its op (``best = max(best, loss.item())``).
  Other objects' copies of an attribute found to be state (cameras in a list, each rebuilt from
  its own pose) are state too, not samples. A value rebuilt from itself whose history starts at a
  leaf that requires grad and that no optimizer given or found holds is **state** with both
  fixes, by purpose:
  a recurrent state is detached at each step's start; fast weights copied from a module
  (``load_state_dict``: no graph link) and moved functionally are made anew from it (nothing in
  the graph tells the two apart, a value neither). With no optimizer given or found, every
  leaf would look free: a state then gets the first fix, and a note to pass ``opt=...`` if it
  may be fast weights. A module's parameter slot holding a tensor with a graph (written by a
  differentiable optimizer's step: torchopt's ``MetaSGD``, your own functional SGD) is an inner
  optimization's **state**, with the state with a graph of the one object given with a
  ``step()`` that steps them on evidence (it holds a slot's tensor, or a tensor of its own that a
  slot's value is made from, or it is optimizer-like and reaches the slots; one reaching them
  only through a module it holds, a trainer, is none): its state; else by purpose. Both purposes,
  in this order: reset the slots (a loop past four) and that state at each outer step's start
  (MAML, ANIL), or detach both (weights that carry on), each module holding slots named;
  torchopt's calls only where torchopt is loaded. It cannot know what you mean the value to be: it
  states the rule and its best guess, with the reason;
* the loss itself, when it is an earlier step's tensor handed back (a cache such as
  ``Transform(cache_size=1)``): the place that holds it, and that the cache must go (dated by
  ``mark_step()`` only), or, held by none, the loss given; the loss is state (a running total)
  only when it enters an old node made by its own op from the same kinds of input, else its old
  term is one no place given holds, and it says so; a term that a torch or library object keeps in an attribute named as a
  cache (``_cached_x_y``) gets the same fix (a transform's emptied as ``(None, None)``);
* not as carriers, in one note: tensors made this step from a carried value (an output, a loss
  term), and numbers replaced at each step rather than added to. Telling these apart needs
  ``mark_step()`` and a call in the step before: each call remembers which node each place held
  (ids, sequence numbers, weak references to the objects); a place is state when its graph
  reaches the node it held then (not only through what other places held then), and made from
  others when it enters the old part only through what other places hold or held (a place is an attribute of that very object, whatever name the
  loop gives it; a name given at the top is its name; a tuple's item, by its path: a new tuple
  each step). A state under two names
  (``h = f(tracker.h)``, then ``tracker.h = h``) is named once, by the name or attribute the
  loop reads it back from, not by an item of a list it is also appended to (a log), but its fix
  detaches it there too (``states.append(h.detach())``: ``h = f(states[-1])`` looks the same);
  the other name is made from it. A tensor an object keeps that a name given also holds (a
  returned warm start) is named by the object's place, the name beside; the fix detaches both.
  Without that record (no call in the step before: the ``except`` form), a tensor made this
  step is made from others too when it enters the old part only through old nodes another place
  is rebuilt from (made by its op: its earlier values; an output beside an LSTM's ``(h, c)``),
  unless it enters such a node of its own op too. Else, or when these leave no
  carrier to name, a tensor made this step that reaches an earlier step's graph is listed as
  state, and so is a tensor made in the step before (dated by ``mark_step()``) that this step's
  graph runs the op that made it on again, with weights that made it: the ops from that op
  down to it are found again below it, their other inputs reaching the same weights
  (``h = tanh(cell(x) + model.h)``, then ``model.h = h``; not ``z - z_prev`` after
  ``z = h - h.mean()``, nor ``cur + 0.5 * prev_loss``: "recompute or record");
* tensors reset in place (``zero_()``, ``fill_()``, ``copy_()``): the old graph stays behind the
  new value (the fix writes the same value: ``fill_()``'s node keeps none, so ``v`` stands for it;
  ``torch.full_like`` only where ``v`` is a number);
* this step's own graph run by an earlier pass in this step (``backward()`` or
  ``torch.autograd.grad``, a library's too; with ``mark_step()``): the
  same loss backwarded twice (nothing but a positive scaling above the part run: keep one
  call), or another loss sharing a part (sum them for one update; recompute the part for a loss
  with its own optimizer or after a step: a GAN), or, above ops that save nothing or a negative
  or unknown scaling (``-d_loss``, another loss for a second optimizer), either, with a line to
  paste for a while that prints the callers of each (a grad call's fix: ``retain_graph=True``);
* the nodes through which this loss enters an earlier step's graph, with the line that made
  each when the earlier step ran under ``torch.autograd.set_detect_anomaly(True)``;
* when nothing is old: the nodes whose saved value was changed in place after they saved it
  (read where no unpack hook is set; with ``mark_step()`` only, since without it an in-place op
  of this step and an optimizer's step after an earlier step's ``retain_graph=True`` backward
  look alike: a note says so), or, in the ``except`` of a backward that raised "modified by an
  inplace operation", that error's tensor, first: the version-counter error, with its fixes by
  what changed the value (it names the op that saved it, not the line that changed it).

Use (torch only). Call it before ``backward()``, or in the ``except`` of the failing one::

    from find_old_graph import find_old_graph, mark_step
    torch.autograd.set_detect_anomaly(True)  # optional, slow: lines; on from before the loop
    for x, y in loader:
        mark_step()                          # optional: needed with retain_graph=True
        loss = ...
        print(find_old_graph(loss, model=model, opt=opt, sched=sched))   # or **globals()
        loss.backward()

"From an earlier step": a node is from an earlier step when an earlier backward pass freed its
saved tensors, or, after ``mark_step()`` at the top of each step, when autograd made it before
that call (its sequence number, ``Node._sequence_nr()``, is lower; torch documents no public way
to tell a node's age, and ``Node.metadata`` holds nothing unless written when the node is made).
Without ``mark_step()``, a graph kept with ``retain_graph=True`` has nothing freed and looks new,
and in the ``except`` of a failing pass, the nodes that pass freed look old as well. With it, in
that ``except`` and no loss given, when nothing made before the mark is old, nodes made after it
whose saved tensors are freed are old too: a library's loop ran backward earlier in this step,
calling your code at each pass; only a sum kept on your module is named (made anew at each call
first), other places are listed as held.

How it looks, and where it stops:

* It reads ``__dict__`` (``types.SimpleNamespace``'s too), ``__slots__``, containers (list, tuple, dict, set, deque, namedtuple),
  dataclasses, closures (cells, ``__defaults__``, ``__kwdefaults__``), bound methods'
  ``__self__``, ``functools.partial``, modules' parameters, buffers and submodules, class
  attributes of classes outside torch and the standard library, and a leaf's ``.grad``. It never
  reads a property or calls your code (a property or ``lazy_property`` not yet computed is not
  seen), and it changes nothing. Your own modules (``import x``) are searched only when passed by
  name, a library's never. Generators, iterators (``itertools.cycle``), frames, weak references,
  caches kept by code (``functools.lru_cache``'s results) and NumPy arrays are not searched.
* It stops after ``BUDGET`` objects and items (cycles are visited once) and says so.
* Saved tensors are looked at without unpacking them where torch shows a saved tensor's hook
  (pytorch/pytorch#164358: torch 2.10 and newer). On 2.9 and older, looking means unpacking:
  a checkpointed block runs again per saved tensor, updating BatchNorm's statistics. It then
  says so in the report and with a warning: use it in a debugging run there.
* A built-in node that saved nothing cannot be told apart from a new one (and never raises the
  error). A custom ``autograd.Function``'s node that a backward ran refuses ``ctx.saved_tensors``
  whether or not it saved any; it fails again only if its ``backward`` reads them. Tensors a
  Function keeps on ``ctx`` directly are invisible to autograd and to this module.
* Lines: the innermost frame outside torch of the stack that made the node, which may be a
  library's (then your calling line is given too); for a ``torch.compile``\\d function, the
  function and the line that called it. Sequence numbers count per thread: mark the step in the
  thread that runs the forward pass.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import itertools
import re
import sys
import sysconfig
import types
import warnings
import weakref
from dataclasses import dataclass, field
from pathlib import Path

import torch

__all__ = ["BUDGET", "Carrier", "FreedNode", "Report", "find_old_graph", "mark_step"]

BUDGET = 500_000  # objects and container items the object walk visits, at most
_TORCH_DIR = str(Path(torch.__file__).resolve().parent)
_THIS_FILE = str(Path(__file__).resolve())
_STDLIB = str(Path(sysconfig.get_paths()["stdlib"]).resolve())
_FRAME = re.compile(
    r'File "(?P<file>.+)", line (?P<line>\d+), in (?P<func>.+)\n(?:\s+(?P<code>.*)\n)?'
)
_FREED = "Trying to backward through the graph a second time"
_CHANGED = "modified by an inplace operation"  # unpacking a saved tensor changed since

# ---- private torch APIs (MAINTAINING.md lists them). Each is read through a guard; where one is
# missing, the report says so in one sentence (``_gap``) and this module does what that sentence says.
# - torch._C._autograd.SavedTensor .unpack_hook/.data (2.10+, pytorch/pytorch#164358): a saved
#   tensor seen without unpacking it; missing: looking unpacks it (UNPACKS_TO_LOOK, a warning),
#   and one changed in place since it was saved (a parameter after opt.step()) refuses to be
#   unpacked: it counts as held, as its packed data shows on 2.10+.
# - Node._raw_saved_<name>, Node._saved_<name>: a node's saved tensors, freed or not; missing: no
#   node shows its age, only mark_step() dates nodes.
# - torch.autograd._get_sequence_nr(), Node._sequence_nr(): the number autograd gives a node;
#   missing: mark_step() marks nothing, only nodes freed by a backward count as old.
# - Node.metadata["traceback_"] (anomaly mode): the stack that made a node; missing: no lines.
# - torch.autograd.function.BackwardCFunction: a custom Function's node; missing: read as built-in.
# - Tensor._version: whether a leaf was changed in place since made (updated by hand).
# - Node._input_metadata (shapes): F.pad-and-add rows told apart from mixing; missing: state.
# - a node keeps its Python object (one object, one id, at every read: _NODE_OBJECT_KEPT); not
#   on 2.4: a node is told again at a later call by its kind and _sequence_nr() (_node_key).
_SAVED_TENSOR = getattr(getattr(torch._C, "_autograd", None), "SavedTensor", None)
UNPACKS_TO_LOOK = not hasattr(_SAVED_TENSOR, "unpack_hook")
_FUNCTION_NODE = getattr(torch.autograd.function, "BackwardCFunction", ())
with torch.enable_grad():  # one node, made at import, to see which private attributes torch has
    _PROBE = (torch.ones(1, requires_grad=True) * torch.ones(1)).grad_fn
_RAW_SAVED = any(a.startswith("_raw_saved_") for a in dir(_PROBE))
# whether a node holds its Python object (the same object at each read): a reference beside
# the one getrefcount takes (torch 2.4 holds none)
_NODE_OBJECT_KEPT = sys.getrefcount(_PROBE.next_functions[0][0]) > 1
_BY_KIND = (
    "a node is told again at a later call by its kind and sequence number (nodes made in two "
    "threads may be taken for one)"
)
_GAPS: list[str] = []  # sentences for the private APIs found missing


def _gap(api: str, fallback: str) -> None:
    """Say once, in every later report and as a warning, that a private torch API is missing."""
    text = f"this torch ({torch.__version__}) has no {api}: {fallback}"
    if text not in _GAPS:
        _GAPS.append(text)
        warnings.warn(text, stacklevel=3)


def _seq(fn: object) -> int | None:
    """``fn._sequence_nr()``, or None where torch lacks it (then said once)."""
    number = getattr(fn, "_sequence_nr", None)
    if number is None:
        _gap("Node._sequence_nr()", "no node counts as made before mark_step()")
        return None
    return number()


def _node_key(fn: object) -> tuple:
    """What tells a node again at a later call: its Python object and number where torch keeps
    that object alive with the node (2.13); where it does not (2.4: each read may make a new one,
    at another address), its kind and number (autograd numbers the nodes a thread makes)."""
    if _NODE_OBJECT_KEPT:
        return id(fn), _seq(fn)
    _gap("Python object kept with each node", _BY_KIND)
    return type(fn).__name__, _seq(fn)


_ATOMS = (str, bytes, int, float, complex, bool, type(None), range, torch.dtype, torch.device)
_RESETS = {"ZeroBackward0", *(f"FillBackward{i}" for i in range(8))}  # zero_(), fill_() overloads
_WRITES = {
    "CopyBackwards",
    "CopySlices",
    "IndexPutBackward0",
    "MaskedFillBackward0",
}  # copy_(), x[i] = v
_MARK: int | None = None  # the sequence number autograd gives the first node of this step
_PREVIOUS: int | None = None  # the mark before it: the step whose call's record is used


def mark_step() -> None:
    """Call at the top of each training step: nodes made before this call count as old."""
    global _MARK, _PREVIOUS
    read = getattr(torch.autograd, "_get_sequence_nr", None)
    if read is None:
        _gap(
            "torch.autograd._get_sequence_nr()",
            "mark_step() marks nothing; only nodes freed by a backward count as old",
        )
        return
    number = read()  # the next node's number, read, nothing made
    if number != _MARK:  # (no node made since the last call: the same step)
        _PREVIOUS, _MARK = _MARK, number


@dataclass(frozen=True)
class FreedNode:
    """A node of the loss's graph from an earlier step (freed by a backward, or made before
    ``mark_step()``); ``report.culprits`` are those the new graph enters directly."""

    node: str  # the grad_fn's class name, e.g. "MmBackward0"
    saved: tuple[str, ...]  # names of its freed saved tensors, e.g. ("mat2", "self"); () if alive
    filename: str | None = None  # where the code that made it ran (anomaly mode only)
    lineno: int | None = None
    line: str | None = None  # that line of source, stripped
    via: tuple[str, ...] = ()  # other lines on the way from the loss to this node, loss first
    held_by: tuple[str, ...] = ()  # places in the objects given that hold this very tensor
    caller: str | None = None  # your line that called the library or compiled code, if any
    how: str = "freed"  # "freed" (by an earlier backward) or "before mark" (mark_step)

    def __str__(self) -> str:
        if self.saved == ("ctx.saved_tensors",) and self.node.startswith("CompiledFunction"):
            what = "a torch.compile'd region run by an earlier backward"
        elif self.saved == ("ctx.saved_tensors",):
            what = (
                "a custom Function run by an earlier backward; fails if it reads ctx.saved_tensors"
            )
        elif self.saved:
            what = f"freed: {', '.join(self.saved)}"
        else:
            what = "made before mark_step()"
        text = f"{self.node} ({what})"
        if self.lineno:
            notebook = self.filename.startswith("<") or "ipykernel" in self.filename
            text += ", made by " + ("" if notebook else f"{Path(self.filename).name} ")
            text += f"line {self.lineno}" + (f": {self.line}" if self.line else "")
            text += f"\n      called from your {self.caller}" if self.caller else ""
            text += "".join(f"\n      reached via {step}" for step in self.via)
        if self.held_by:
            text += f"\n      held by {', '.join(self.held_by)}"
        return text


OldNode = FreedNode


@dataclass(frozen=True)
class Carrier:
    """A place in the objects given whose tensor reaches an earlier step's graph."""

    path: str  # e.g. "sampler.history[2]"; several list items are shown as one range
    kind: str  # "old tensor", "rebuilt from an old value", "reset in place", "samples"
    node: str  # the tensor's grad_fn
    verdict: str  # "recompute", "detach", "samples", "state", "reset", two by purpose ("recompute or record"), or "unknown" (a rule of this tool failed)
    reason: str
    fix: str
    count: int = 1  # tensors the path stands for (a range of list items)
    enters: bool = False  # whether this loss's graph passes through it (else: kept, not used now)
    memory_only: bool = False  # no error, no growth: a freed graph kept (bool(report) skips it)
    alike: str = field(default="", compare=False)  # printed for places on one line (_alike)

    def __str__(self) -> str:
        uses = "; this loss uses it" if self.enters else ""
        return f"{self.path}: {self.kind} ({self.node}){uses}\n    -> {self.verdict}: {self.reason}. Fix: {self.fix}"


def _alike(carrier: Carrier) -> tuple:
    """The places a report prints on one line (a cache's layers): one kind, node and verdict,
    and one kind of place: one that takes an assignment (an attribute) is not merged with one that
    does not (a closure cell), whose fix is written where the value is made."""
    writable = f"{carrier.path} = " in carrier.fix
    return (
        carrier.kind,
        carrier.node,
        carrier.verdict,
        carrier.enters,
        carrier.memory_only,
        writable,
    )


def _one_line(group: list, reach: list, names: dict) -> str:
    """The text of places printed on one line: the reach over all of them, and a fix that names
    every place (the first's, then "the same for" the others)."""
    first = group[0]
    reason = first.reason
    found = re.search(r"reach(?:es)? (.+?) \((optimizers' parameters|a parameter)", reason)
    if found and reach:
        everything = _named(reach, names)
        reason = reason.replace(found[1], everything, 1)
        if len(reach) > 1:
            reason = reason.replace("which still trains", "which still train")
    others = [c.path for c in group[1:]]
    if len(others) > 3:  # a cache's layers: by attribute, items collapsed
        others = list(dict.fromkeys(_group(p) for p in [first.path, *others]))
        listed = f"every place on this line ({len(group)}: {', '.join(others)})"
    else:
        listed = ", ".join(others)
    fix, line = first.fix, f"{first.path} = {first.path}.detach()"
    if first.path not in fix and all(c.fix == fix for c in group):
        pass  # one line for all (hidden = tuple(x.detach() for x in hidden)), or no place named
    elif ", and so for each place like it" in fix:  # a cache's line: name the places
        fix = fix.replace(", and so for each place like it", f", and so for {listed}", 1)
    elif line in fix:  # at the end of the clause of the line it repeats
        end = fix.find(";", fix.index(line))
        end = len(fix) if end < 0 else end
        fix = f"{fix[:end]} (and so for {listed}){fix[end:]}"
    else:
        fix += f"; the same for {listed}"
    return (
        f"{first.path}: {first.kind} ({first.node})"
        + ("; this loss uses it" if first.enters else "")
        + f"\n    -> {first.verdict}: {reason}. Fix: {fix}"
    )


_AGAIN = {  # the headline when this step's graph was already run by a backward() in this step
    "loss": "This step's graph was already backwarded in this step: {n} of this loss's {nodes} "
    "nodes were run by an earlier backward pass {by}, and above them it adds nothing but a "
    "multiplication or division by a positive number: the same loss (or a positive multiple of "
    "it) is backwarded twice. Fix: keep one backward() of it (retain_graph=True would add its "
    "gradient twice)",
    "either": "This step's graph was already backwarded in this step: {n} of this loss's {nodes} "
    "nodes were run by an earlier backward pass {by}; above them it adds only ops that save nothing or a "
    "scaling whose sign is negative or unknown, so this cannot tell the same loss from another "
    "loss made from that part after its backward (a generator's loss on D(fake) after the "
    "critic's; a negated or rescaled loss used by a second optimizer is another loss). Fix: the "
    "same loss: keep one backward() of it (retain_graph=True would add its gradient twice); "
    "another: {other}",
    "part": "This step's graph was already backwarded in this step: {n} of this loss's {nodes} "
    "nodes were run by an earlier backward pass {by} on another loss that shares them. Fix: {other}",
}
_OTHER = (  # another loss sharing the part run: the fix depends on whether a step lies between
    "if it has its own optimizer or a step comes between the two calls (a GAN), compute the "
    "shared part again for it after that step (the generator's D(fake) after the critic's step; "
    "the critic's loss on fake.detach()); if both losses feed one update, sum them and call "
    "backward() once (retain_graph=True on the first call is the same); if the first was a "
    "torch.autograd.grad (an attack's gradient, an inner optimizer's step), give that call "
    "retain_graph=True, and create_graph=True to train through its result (a library may set "
    "them by an option: higher's track_higher_grads=True sets both)"
)
_BY = (  # which calls count as an earlier pass: the reader's grad call, a library's
    "(backward() or torch.autograd.grad, also inside a library call, such as a differentiable "
    "optimizer's step)"
)
_TRAIN_IT = (
    "if they should train: compute it inside the step, in a layer of the model the optimizer trains"
)
_BY_PURPOSE = (  # stored samples whose graph reaches weights that still train: the reader's purpose
    "by what they are for: constants (old log-probs in a ratio, a memory or queue): store "
    "detached copies (x.detach()) where they are added{cache}; terms of one update only (an "
    "episode's log-probs in REINFORCE): {empty} after each update; terms later updates train "
    "through again: store their inputs and compute them anew with the current weights"
)
_CACHE = (  # a buffer (cat or written in place, by your code or a library's): the line you write
    " (a cache whose new rows train this step: {detach} at each step's start, before rows are "
    "{added}, and so for each place like it)"
)
_SCALING = {"DivBackward0", "DivBackward1", "MulBackward0", "MulBackward1"}


def _scales_up(fn: object) -> bool:
    """Whether ``fn`` multiplies or divides by a constant that is positive (its one saved operand,
    read without running a hook): a negative or unknown sign makes another loss (a minimax GAN's
    ``-d_loss``)."""
    if type(fn).__name__ not in _SCALING:
        return False
    values = []
    for name in ("self", "other"):
        raw = getattr(fn, f"_raw_saved_{name}", None)
        if raw is None:
            continue
        if UNPACKS_TO_LOOK:
            try:
                value = getattr(fn, f"_saved_{name}")
            except RuntimeError:
                return False
        elif raw.unpack_hook is not None:
            return False  # looking would run its hook
        else:
            value = raw.data
        if value is not None:
            values.append(value)
    return len(values) == 1 and isinstance(values[0], torch.Tensor) and bool((values[0] > 0).all())


_WHO_CALLS = (  # one line to paste at the top (temporary: remove it once found); changes no result
    "import torch, traceback; _ag = torch.autograd; _ag._first = getattr(_ag, '_first', "
    "(_ag.backward, _ag.grad)); _ag.backward, _ag.grad = [lambda *a, _f=f, **k: "
    "(traceback.print_stack(limit=6), _f(*a, **k))[1] for f in _ag._first]  "
    "# prints the callers of each backward() and torch.autograd.grad (a library's too: paste it "
    "above your imports); safe to run again; undo: "
    "torch.autograd.backward, torch.autograd.grad = torch.autograd._first"
)
_KEPT = "Only holding an earlier step's freed graph (no error: bool(report) leaves these out):"
_PLACE_NOTES = ("replaced at each step", "made in this step")  # notes that name places


@dataclass(frozen=True)
class Report:
    """What ``find_old_graph`` found; ``print(report)`` shows it, with what was searched."""

    nodes: int  # nodes of the loss's graph visited
    freed: tuple[FreedNode, ...] = field(default=())  # every old node of the loss's graph
    culprits: tuple[FreedNode, ...] = field(default=())  # the old nodes the new graph enters
    carriers: tuple[Carrier, ...] = field(default=())  # places that carry an earlier step's graph
    holding: tuple[str, ...] = field(default=())  # places holding this step's graph (no old part)
    searched: tuple[str, ...] = field(default=())  # the names of the objects given
    objects: int = 0  # objects and items visited
    budget_reached: bool = False
    notes: tuple[str, ...] = field(default=())
    twice: tuple[str, ...] = field(default=())  # this step's nodes freed by a backward in this step
    unfinished: tuple[str, ...] = field(default=())  # objects given whose walk BUDGET stopped
    unread: tuple[str, ...] = field(default=())  # places whose own code raised when read
    again: str = ""  # "loss": this loss was already backwarded in this step; "part": a part of it
    changed: tuple[str, ...] = field(
        default=()
    )  # this step's ops whose saved value changed in place
    inplace: str = ""  # the in-place error of the backward this is called in the except of
    dated: bool = False  # mark_step() dated this step's nodes

    def __bool__(self) -> bool:  # an error to fix, or growth; a graph only kept is no error
        return bool(
            self.freed
            or self.twice
            or self.changed
            or self.inplace
            or any(not c.memory_only for c in self.carriers)
        )

    def __str__(self) -> str:
        lines = []
        for kept, heading in ((False, "Carrying an earlier step's graph:"), (True, _KEPT)):
            # one line for places of one kind (a cache's layers)
            alike = collections.defaultdict(list)
            for carrier in self.carriers:
                if carrier.memory_only == kept:
                    alike[_alike(carrier)].append(carrier)
            lines += [heading] if alike else []
            for group in alike.values():
                paths = [c.path for c in group]
                if len(paths) > 3:
                    paths = [*paths[:2], f"{len(paths) - 2} more places like them"]
                text = group[0].alike if len(group) > 1 and group[0].alike else str(group[0])
                lines.append(f"  {', '.join(paths)}: {text.partition(': ')[2]}")
        if self.culprits:
            lines.append(
                f"This loss enters an earlier step's graph ({len(self.freed)} of its "
                f"{self.nodes} nodes are old) at:"
            )
            counts = collections.Counter(str(c) for c in self.culprits)
            if self.carriers:  # the places are named above: the nodes' own list would repeat them
                counts = collections.Counter(
                    str(dataclasses.replace(c, held_by=())) for c in self.culprits
                )
            lines += [
                f"  {text}" + (f"\n      ({n} such nodes)" if n > 1 else "")
                for text, n in counts.items()
            ]
            if not any(c.held_by for c in self.culprits) and not self.carriers:
                lines.append(
                    "  pass the objects your loop keeps (model=model, or **globals()) to name the place"
                    if not self.searched
                    else f"  not found in {', '.join(self.unfinished)}: the search stopped (BUDGET)"
                    if self.unfinished
                    else "  held by none of the objects given: pass the ones your loop keeps (or "
                    "**globals(); in a function, **locals() where the loss is made), or it sits where "
                    "this cannot look (find_old_graph.py's docstring lists where)"
                )
        if self.twice and not lines:
            lines.append(
                _AGAIN[self.again or "part"].format(
                    n=len(self.twice), nodes=self.nodes, other=_OTHER, by=_BY
                )
            )
            lines.append(f"  who called it first: {_WHO_CALLS}")
            if self.holding:
                lines.append(f"  holding this step's graph: {', '.join(self.holding[:5])}")
        kept_only = not self and self.carriers  # places only holding a freed graph
        if kept_only or not lines and any(n.startswith(_PLACE_NOTES) for n in self.notes):
            lines.insert(
                0,
                f"This loss uses nothing from an earlier step: none of its {self.nodes} nodes is old",
            )
        elif not lines and (self.changed or self.inplace):
            lines += _in_place_lines(self.changed, self.inplace)
        elif self.inplace and not self.dated:  # the nodes this failing pass freed look old
            lines[:0] = _in_place_lines((), self.inplace) + [
                "  The old nodes below may be ones this failing backward freed (without "
                "mark_step() they cannot be told apart): call mark_step() at the top of each step"
            ]
        elif not lines:
            lines.append(
                f"Nothing from an earlier step: none of the loss's {self.nodes} nodes is old"
                + (", and no object given holds an old graph" if self.searched else "")
            )
            if self.holding:
                shown = ", ".join(self.holding[:5]) + (" ..." if len(self.holding) > 5 else "")
                lines.append(f"  holding this step's graph (old if the next step uses it): {shown}")
        searched = (
            ", ".join(self.searched[:8]) if self.searched else "no objects (pass model=..., ...)"
        )
        searched += f" ... ({len(self.searched)} names)" if len(self.searched) > 8 else ""
        if self.searched or not (self.freed or self.carriers):
            lines.append(
                f"Searched: the loss's graph ({self.nodes} nodes); {searched} "
                f"({self.objects} objects and items)"
                + (
                    f"; stopped at BUDGET={BUDGET}, not all searched: {', '.join(self.unfinished)}"
                    if self.unfinished else ""
                )
            )  # fmt: skip
        if self.unread:
            shown = ", ".join(self.unread[:3]) + (" ..." if len(self.unread) > 3 else "")
            lines.append(f"Not read (its own code raised when read): {shown}")
        lines += [f"Note: {note}" for note in self.notes]
        return "\n".join(lines)


_IN_PLACE_FIX = (
    "  Fix, by what changed it: an optimizer.step() between the forward that saved it and this "
    "backward: step after backward(), or run the forward again after the step; a graph an "
    "earlier step kept (retain_graph=True) through a carried value, its weights stepped since: "
    "detach that value at each step's start (with mark_step() at the top of each step, this "
    "report names it); an in-place op of yours: write it out of place (y = y * 2 for y.mul_(2), "
    "out = out + r for out += r, nn.ReLU() without inplace=True), or read a .clone() where the "
    "value is used first; a module that writes its own weight or buffers in forward "
    "(nn.Embedding(max_norm=...) renormalises the rows it looks up; a power iteration updates its "
    "vectors): read weight.clone() in your own ops, and call it once before backward (one call "
    "on torch.cat of the inputs), not twice. retain_graph=True cannot fix this"
)


def _in_place_lines(changed: tuple[str, ...], error: str) -> list[str]:
    """The report when nothing is old but this step changed a value a node saved: that is the
    version-counter error, not a freed graph (trial 17: find_old_graph said only "nothing")."""
    found = re.search(
        r"\[torch\.\w+ \[([\d, ]*)\]\].*?is at version (\d+); expected version (\d+)", error
    )
    what = (
        f" (a [{found[1]}] tensor at version {found[2]}, saved at version {found[3]})"
        if found
        else ""
    )
    ops = ", ".join(dict.fromkeys(changed))
    message = (
        "'one of the variables needed for gradient computation has been modified by an inplace "
        "operation'"
    )
    changed_text = "a value the loss's graph saved was changed in place after it was saved"
    return [
        f"backward() raised {message}: {changed_text}{what}"
        if error
        else f"No freed graph, but {changed_text}: saved by {ops}. backward() raises {message} "
        "for that",
        _IN_PLACE_FIX,
        "  Where: torch.autograd.set_detect_anomaly(True) before the forward names the line of "
        "the op that saved it; print the tensor's ._version before and after the lines that "
        "follow it to find the change",
    ]


def _changed_in_place(fn: object) -> bool:
    """Whether ``fn`` saved a tensor that was changed in place since (reading ``_saved_<name>``
    checks the version; ``_raw_saved_*`` does not). Read only where no unpack hook is set:
    reading would run it (a checkpoint's recomputation)."""
    if isinstance(fn, _FUNCTION_NODE):
        return False
    attrs = _SAVED_ATTRS.get(type(fn))
    if attrs is None:
        attrs = _SAVED_ATTRS[type(fn)] = tuple(
            sorted(a for a in dir(fn) if a.startswith("_raw_saved_"))
        )
    for attr in attrs:
        try:
            raw = getattr(fn, attr)
        except RuntimeError:  # freed: an old graph's business, reported elsewhere
            continue
        items = raw if isinstance(raw, (list, tuple)) else [raw]
        if not any(i is not None for i in items) or any(
            i is not None and getattr(i, "unpack_hook", None) is not None for i in items
        ):
            continue
        try:
            getattr(fn, "_saved_" + attr.removeprefix("_raw_saved_"))
        except RuntimeError as error:
            if _CHANGED in str(error):
                return True
    return False


# ---- saved tensors and lines -------------------------------------------------------------------

_SAVED_ATTRS: dict[type, tuple[str, ...]] = {}


def _freed_names(fn: object) -> tuple[str, ...]:
    """Names of the saved tensors of ``fn`` that can no longer be read, found without unpacking."""
    return _saved_status(fn)[0]


def _saved_status(fn: object) -> tuple[tuple[str, ...], bool]:
    """(names of ``fn``'s freed saved tensors, whether one of them is alive), without unpacking.

    Unpacking runs a saved tensor's unpack hook: under non-reentrant checkpointing that re-runs
    the checkpointed forward (and updates BatchNorm's running statistics). So each saved tensor is
    looked at through ``_raw_saved_*``: a hook or packed data means it is alive; only when both are
    gone is the ordinary attribute read, which then runs no hook and raises if it was freed.
    Releases whose saved tensors lack ``unpack_hook`` (2.9 and older) are read
    directly, so there a checkpointed forward runs again. A node that saved a list of tensors
    (``x[idx]``'s ``IndexBackward0``, ``index_put``) refuses even ``_raw_saved_*`` once freed.
    """
    if isinstance(fn, _FUNCTION_NODE):  # a custom autograd.Function
        try:
            return (), bool(fn._raw_saved_tensors)  # refused after release, saved or not
        except RuntimeError as error:
            if _FREED in str(error):
                return ("ctx.saved_tensors",), False
            raise
    attrs = _SAVED_ATTRS.get(type(fn))
    if attrs is None:
        attrs = tuple(sorted(a for a in dir(fn) if a.startswith("_raw_saved_")))
        _SAVED_ATTRS[type(fn)] = attrs
        if not _RAW_SAVED:
            _gap("Node._raw_saved_<name>", "no node shows its age; only mark_step() dates nodes")
    freed, alive = [], False
    for attr in attrs:
        name = attr.removeprefix("_raw_saved_")
        try:
            raw = getattr(fn, attr)
        except RuntimeError as error:  # a freed list of saved tensors refuses to be read
            if _FREED not in str(error):
                raise
            freed.append(name)
            continue
        items = [
            item for item in (raw if isinstance(raw, (list, tuple)) else [raw]) if item is not None
        ]
        if not UNPACKS_TO_LOOK and any(
            i.unpack_hook is not None or i.data is not None for i in items
        ):
            alive = True  # a hooked tensor is not unpacked here
            continue
        try:
            value = getattr(fn, f"_saved_{name}")  # raises if freed (runs a hook where hidden)
        except RuntimeError as error:  # the error backward() would raise, raised early
            if _CHANGED in str(error):  # changed in place since saved (an optimizer's step on a
                alive = True  # parameter): unpacking checks its version; it is still held
                continue
            if _FREED not in str(error):
                raise
            freed.append(name)
        else:
            alive = alive or isinstance(value, torch.Tensor) or bool(value)
    return tuple(freed), alive


def _frames(fn: object) -> list[tuple[str, int, str, str]]:
    """(file, line, function, code) of the stack that made ``fn`` (anomaly mode), outer first."""
    stack = fn.metadata.get("traceback_") if hasattr(fn, "metadata") else None
    found = []
    for entry in stack or ():
        match = _FRAME.search(entry)
        if match is not None:
            code = (match["code"] or "").strip()
            found.append((match["file"], int(match["line"]), match["func"], code))
    return found


def _kind(filename: str) -> str:
    """'torch', 'this', 'library' (site-packages, the standard library) or 'yours'."""
    if filename.startswith("<"):
        return "yours"  # a notebook cell, <stdin>, <string>
    resolved = str(Path(filename).resolve())
    if resolved.startswith(_TORCH_DIR):
        return "torch"
    if resolved == _THIS_FILE:
        return "this"
    if "site-packages" in resolved or "dist-packages" in resolved or resolved.startswith(_STDLIB):
        return "library"
    return "yours"


def _yours(fn: object) -> str | None:
    """The innermost line of your code (outside torch and libraries) on the stack that made fn."""
    for file, line, _, code in reversed(_frames(fn)):
        if _kind(file) == "yours":
            return f"line {line}: {code}"
    return None


def _where(fn: object) -> tuple[str | None, int | None, str | None, str | None]:
    """The innermost frame outside torch that made ``fn``, and your calling line when that frame
    is a library's, or a ``torch.compile``d function's (whose frame torch's compiler enters)."""
    frames = _frames(fn)
    kinds = [_kind(f[0]) for f in frames]
    for i in range(len(frames) - 1, -1, -1):
        if kinds[i] in ("torch", "this"):
            continue
        file, line, func, code = frames[i]
        caller = None
        compiled = i > 0 and "_dynamo" in frames[i - 1][0] and kinds[i - 1] == "torch"
        if compiled or kinds[i] == "library":
            for j in range(i - 1, -1, -1):
                if kinds[j] == "yours" and not (compiled and j == i):
                    caller = f"line {frames[j][1]}: {frames[j][3]}"
                    break
            if compiled:
                code = f"(the compiled function {func}) {code}"
        return file, line, code or None, caller
    return None, None, None, None


# ---- the object walk ---------------------------------------------------------------------------


def _static(obj: object, name: str) -> object:
    """``type(obj)``'s own attribute ``name`` from its MRO, without running any descriptor."""
    for klass in type(obj).__mro__:
        if name in vars(klass):
            return vars(klass)[name]
    return None


def _own_dict(obj: object) -> dict | None:
    """``obj.__dict__`` when it is the ordinary one, a C-level descriptor (``types.SimpleNamespace``
    keeps it in a member slot); a property named ``__dict__`` is not read."""
    descriptor = _static(obj, "__dict__")
    if isinstance(descriptor, (types.GetSetDescriptorType, types.MemberDescriptorType)):
        try:
            found = descriptor.__get__(obj)
        except (AttributeError, TypeError):
            return None
        return found if isinstance(found, dict) else None
    return None


def _own_attributes(obj: object) -> dict:
    """``obj``'s own attributes, read without running its code: its ordinary ``__dict__`` and the
    member slots its classes declare (``__slots__``, ``@dataclass(slots=True)``); an unset slot
    is left out."""
    found = dict(_own_dict(obj) or {})
    for klass in type(obj).__mro__:
        slots = vars(klass).get("__slots__", ())
        for name in (slots,) if issubclass(type(slots), str) else slots:
            descriptor = vars(klass).get(name)
            if issubclass(type(descriptor), types.MemberDescriptorType):
                try:
                    found.setdefault(name, descriptor.__get__(obj))
                except AttributeError:  # an unset slot
                    pass
    return found


_USER_CLASS: dict[type, bool] = {}


def _user_class(klass: type) -> bool:
    """Whether ``klass`` is defined outside torch and the standard library (a file, not built in)."""
    if klass not in _USER_CLASS:
        module = sys.modules.get(getattr(klass, "__module__", "") or "")
        file = getattr(module, "__file__", None)
        if getattr(klass, "__module__", None) == "__main__":
            file = file or "<notebook>"  # a class defined in a notebook or script
        _USER_CLASS[klass] = (
            bool(file)
            and _kind(file) in ("yours", "library")
            and not str(Path(file).resolve()).startswith(_STDLIB)
        )
    return _USER_CLASS[klass]


def _key(key: object, names: dict[int, str]) -> str:
    if isinstance(key, (str, int, float, bool)) or key is None:
        return repr(key)
    if isinstance(key, torch.Tensor):
        return names.get(id(key), f"<tensor {tuple(key.shape)}>")
    return f"<{type(key).__name__}>"


def _children(obj: object, names: dict[int, str], top: bool):
    """(suffix, child) pairs: what ``obj`` refers to, read without running its code: types are
    tested with ``issubclass(type(obj), ...)`` (``isinstance`` may read ``__class__``), and a
    container subclass is read through its base type's methods (``dict.items(obj)``), not its own."""
    kind = type(obj)
    if issubclass(kind, torch.Tensor):
        if obj.is_leaf and obj.grad is not None:  # a gradient kept with create_graph=True
            yield ".grad", obj.grad
        own = _own_dict(obj)  # attributes set on a tensor (w.cached = ...)
        yield from ((f".{n}", v) for n, v in (own or {}).items())
        return
    if issubclass(kind, _ATOMS):
        return
    if issubclass(kind, (types.GeneratorType, types.CoroutineType, types.FrameType)):
        return
    if issubclass(kind, types.ModuleType):
        file = getattr(obj, "__file__", None)  # none: a built-in module such as sys
        if top and file and _kind(file) == "yours":
            for name, value in dict.items(vars(obj)):
                if not name.startswith("__") and not issubclass(type(value), types.ModuleType):
                    yield f".{name}", value
        return
    if issubclass(kind, torch.nn.Module):
        own = _own_dict(obj) or {}
        for slot in ("_parameters", "_buffers", "_modules"):
            for name, value in dict.items(own.get(slot) or {}):
                if value is not None:  # Sequential's "1" is net[1] in Python, not net.1
                    yield _attribute(name), value
        for name, value in dict.items(own):
            if name not in ("_parameters", "_buffers", "_modules"):
                yield f".{name}", value
        yield from _class_attributes(kind)
        return
    if issubclass(kind, tuple) and hasattr(kind, "_fields"):  # a namedtuple
        yield from ((f".{n}", v) for n, v in zip(kind._fields, tuple.__iter__(obj)))
        return
    for base in (list, tuple, collections.deque):
        if issubclass(kind, base):
            yield from ((f"[{i}]", v) for i, v in enumerate(base.__iter__(obj)))
            return
    for base in (set, frozenset):
        if issubclass(kind, base):
            yield from ((f"{{item {i}}}", v) for i, v in enumerate(base.__iter__(obj)))
            return
    if issubclass(kind, dict):
        for key, value in dict.items(obj):
            if issubclass(type(key), torch.Tensor):
                yield f"[{_key(key, names)}](key)", key
            yield f"[{_key(key, names)}]", value
        return
    if kind is types.CellType:
        try:
            yield "", obj.cell_contents
        except ValueError:  # an empty cell
            pass
        return
    if kind is types.FunctionType:
        for name, cell in zip(obj.__code__.co_freevars, obj.__closure__ or ()):
            yield f".<closure {name}>", cell
        code = obj.__code__
        args = code.co_varnames[: code.co_argcount]
        for name, value in zip(
            args[len(args) - len(obj.__defaults__ or ()) :], obj.__defaults__ or ()
        ):
            yield f".<default {name}>", value
        for name, value in (obj.__kwdefaults__ or {}).items():
            yield f".<default {name}>", value
        yield from ((f".{n}", v) for n, v in (vars(obj) or {}).items())
        return
    if kind is types.MethodType:
        yield ".__self__", obj.__self__
        yield ".__func__", obj.__func__
        return
    if issubclass(kind, functools.partial):
        yield ".func", obj.func
        yield from ((f".args[{i}]", v) for i, v in enumerate(obj.args))
        yield from ((f".keywords[{k!r}]", v) for k, v in obj.keywords.items())
        return
    if issubclass(kind, (staticmethod, classmethod)):
        yield "", obj.__func__
        return
    if issubclass(kind, (property, types.BuiltinFunctionType, types.WrapperDescriptorType)):
        return  # a property is code: not read
    if issubclass(kind, type):
        if _user_class(obj):
            for name, value in type.__dict__["__dict__"].__get__(obj).items():  # a mappingproxy
                if not name.startswith("__"):
                    yield f".{name}", value
        return
    if kind.__module__ == "numpy" or issubclass(kind, torch.Size):
        return
    yield from _class_attributes(kind)
    yield from ((f".{n}", v) for n, v in _own_attributes(obj).items())


def _attribute(name: str) -> str:
    """A submodule's or parameter's path suffix as Python writes it: ``.lin``, ``[1]``, ``['a-b']``."""
    if name.isidentifier():
        return f".{name}"
    return f"[{name}]" if name.isdigit() else f"[{name!r}]"


def _class_attributes(kind: type):
    """The classes of ``kind``'s MRO defined outside torch and the standard library: their
    attributes are shared by every instance (``history = []`` in a class body)."""
    for klass in kind.__mro__:
        if klass is not object and _user_class(klass):
            yield f"={klass.__name__}", klass  # an absolute path: Sampler.history


_IPYTHON = re.compile(
    r"_+|_\d+|_i+|_i\d+|_[iod]h|In|Out|get_ipython|exit|quit"
)  # history, not yours


def _indirect(path: str) -> bool:
    """Whether ``path`` reaches a tensor through an optimizer's bookkeeping (a state key, a param
    group): a name for it found elsewhere (the module's attribute) reads better."""
    return "(key)" in path or "param_groups[" in path


def _rename(walk, obj: object, path: str, holder: object = None, suffix: str = "") -> None:
    """Name a tensor first met through an optimizer's bookkeeping by the path met now, if direct."""
    if id(obj) not in walk.names:
        return
    aliases = walk.aliases.setdefault(id(obj), [])
    if len(aliases) < 8 and path not in aliases:  # other places holding this very tensor
        aliases.append(path)
        walk.alias_at.setdefault(id(obj), []).append((path, holder, suffix))
    if _indirect(walk.names[id(obj)]) and not _indirect(path):
        walk.names[id(obj)] = path


def _walk(objects: dict[str, object], budget: int):
    """Every tensor reachable from ``objects``: a ``_Walk``. Each object given is walked breadth
    first, in turns (one large object, a replay buffer, does not use up the budget before the
    others are reached); an object whose reading raises is listed in ``unread``."""
    walk = _Walk()
    seen: set[int] = set()
    turns = [
        (name, collections.deque([(name, value, True, None, "")]))
        for name, value in objects.items()
    ]
    while turns:
        for _name, queue in turns:
            for _ in range(min(len(queue), 64)):
                path, obj, top, holder, suffix_ = queue.popleft()
                if id(obj) in seen:
                    _rename(walk, obj, path, holder, suffix_)
                    continue
                walk.visited += 1
                if walk.visited > budget:
                    walk.visited -= 1
                    walk.unfinished = tuple(n for n, q in turns if q)
                    return walk
                seen.add(id(obj))
                walk.pinned.append(obj)
                walk.holders[id(obj)] = holder
                walk.slot[id(obj)] = (
                    (id(holder), type(holder).__name__, suffix_) if holder is not None else None
                )
                kind = type(obj)
                if issubclass(kind, torch.Tensor):
                    walk.names[id(obj)] = path
                    walk.tensors.append(obj)
                elif issubclass(kind, torch.optim.Optimizer):
                    for group in obj.param_groups:
                        walk.opt_params.update(id(p) for p in group["params"] if p.requires_grad)
                slots = set()
                if issubclass(kind, torch.nn.Module):
                    slots = {
                        id(p)
                        for p in (_own_dict(obj) or {}).get("_parameters", {}).values()
                        if p is not None
                    }
                    walk.module_params.update(slots)
                try:
                    for suffix, child in _children(obj, walk.names, top):
                        if issubclass(
                            type(child), _ATOMS
                        ):  # a number, a string: counted, nothing inside
                            walk.visited += 1
                            if walk.visited > budget:
                                walk.visited -= 1
                                walk.unfinished = tuple(n for n, q in turns if q or n == _name)
                                return walk
                        else:
                            where = suffix[1:] if suffix.startswith("=") else f"{path}{suffix}"
                            if id(child) in slots:  # a module's slot: named by its module
                                walk.slot_paths.setdefault(id(child), (where, obj, suffix))
                            if id(child) not in seen:
                                queue.append((where, child, False, obj, suffix))
                            else:
                                _rename(walk, child, where, obj, suffix)
                except Exception:  # noqa: BLE001 - its own code raised when read: say so, go on
                    walk.unread.append(path)
        turns = [turn for turn in turns if turn[1]]  # (by length: a deque's == compares items)
    return walk


@dataclass
class _Walk:
    """What the object walk found."""

    names: dict = field(default_factory=dict)  # id -> path of each tensor
    aliases: dict = field(default_factory=dict)  # id -> other paths met to the same tensor
    alias_at: dict = field(default_factory=dict)  # id -> (path, holder, suffix) of each alias
    also: dict = field(default_factory=dict)  # id -> other places to fix with it (a name too)
    slot: dict = field(default_factory=dict)  # id -> (id of its holder, the attribute or item)
    tensors: list = field(default_factory=list)
    holders: dict = field(default_factory=dict)  # id -> the object that refers to it (None: given)
    pinned: list = field(default_factory=list)  # keeps every visited object alive (ids stay unique)
    opt_params: set = field(default_factory=set)  # ids of the parameters of the optimizers found
    module_params: set = field(default_factory=set)  # ids of the parameters of the modules found
    slot_paths: dict = field(
        default_factory=dict
    )  # id -> (path, module, suffix) of a module's slot
    visited: int = 0
    unfinished: tuple = ()  # the objects given whose walk the budget stopped
    unread: list = field(default_factory=list)  # paths whose reading raised


# ---- the graph walk ----------------------------------------------------------------------------


def _old_state(fn: object, mark: int | None, twice: list) -> tuple[tuple[str, ...] | None, bool]:
    """The freed saved tensors of ``fn`` (old), ``()`` if made before the mark, ``None`` if new;
    and whether a saved tensor of it is alive (or freed by this step's own earlier backward).
    A node made after the mark whose tensors are freed goes to ``twice``: this step's own graph,
    run by an earlier backward in this step."""
    names, alive = _saved_status(fn)
    number = _seq(fn) if mark is not None and type(fn).__name__ != "AccumulateGrad" else None
    before = number is not None and number < mark
    if names and (mark is None or before):
        return names, alive
    if names:
        twice.append(fn)
    return (() if before else None), alive or names != ()


_RECORD: dict = {}  # mark -> {place: ((id, sequence number) of its tensor's grad_fn, holder's
# weak reference or None)}, two marks kept; a place is (id of the object, its type, the attribute
# or item), or ("name", path) for a name given at the top, and ("tuple", path) for a tuple's item


# ops that move elements without mixing them (cat, stack, slicing, indexing, views, padding)
_MOVES = re.compile(
    r"(Cat|Stack|Slice|Select|Index|IndexSelect|View|UnsafeView|Unsqueeze|Squeeze|Transpose|"
    r"Permute|T|Clone|Alias|Expand|ConstantPadNd|ToCopy|Unbind|Split|SplitWithSizes|Roll)Backward\d+"
)


def _rows_added(fn: object, kids: dict, old_nodes: set, reaches_old: dict) -> bool:
    """Whether ``fn``'s value is its earlier value with new rows added (a buffer: torch.cat([old,
    new])[-capacity:]): every path from ``fn`` to its earlier value passes only ops that move
    elements, a cat or stack on them takes new rows, and no new row reaches that earlier value.
    A new row may be made from other carried values (a cache's second layer: keys of this step's
    tokens, which attended over the first layer's earlier keys). A recurrent state (tanh(W h + U
    x), 0.9 * ema + x, total + loss, a window whose new row is made from its old rows) mixes its
    earlier value through other ops."""
    added, own, rows, seen, todo = False, set(), [], {fn}, [fn]
    while todo:
        node = todo.pop()
        name = type(node).__name__
        if not _MOVES.fullmatch(name) and not _padded_rows(node):
            return False
        for child, _ in node.next_functions:
            if child is None or not (child in old_nodes or reaches_old.get(child)):
                added |= name.startswith(("CatBackward", "StackBackward", "AddBackward"))
            elif child in old_nodes:
                own.add(child)  # its earlier value, reached by moves only
            elif not _MOVES.fullmatch(type(child).__name__) and not _padded_rows(child):
                rows.append(child)  # a new row made from carried values: whose? (below)
            elif child not in seen:
                seen.add(child)
                todo.append(child)
    if rows and not own:  # its earlier value is reached only through mixing ops: a state
        return False
    return (added or bool(rows)) and all(own.isdisjoint(_all_below(row, kids)) for row in rows)


_INPUT_METADATA = "_input_metadata"  # Node's (private) shapes of its forward outputs


def _padded_rows(node: object) -> bool:
    """Whether ``node`` adds zero-padded parts whose padded rows do not overlap
    (``F.pad(w[1:], (0, 0, 0, 1)) + F.pad(new, (0, 0, 2, 0))``): a cat written with pad and add.
    The sizes come from ``Node._input_metadata`` (private; without it, not recognised)."""
    if type(node).__name__ != "AddBackward0" or getattr(node, "_saved_alpha", None) != 1:
        return False
    spans = []
    for child, _ in node.next_functions:
        if child is None or type(child).__name__ != "ConstantPadNdBackward0":
            return False
        meta = getattr(child, _INPUT_METADATA, None)
        pad = getattr(child, "_saved_pad", None)
        if meta is None:
            _gap("Node._input_metadata", "a window written with F.pad and + counts as a state")
        if not meta or pad is None:
            return False
        shape = list(meta[0].shape)
        dims = [len(shape) - 1 - i // 2 for i in range(len(pad))]  # pad's pairs: last dim first
        span = {}
        for i in range(0, len(pad), 2):
            if pad[i] or pad[i + 1]:
                span[dims[i]] = (pad[i], shape[dims[i]] - pad[i + 1])
        if len(span) != 1:
            return False
        spans.append(span)
    if len(spans) != 2 or spans[0].keys() != spans[1].keys():
        return False
    ((a, b),), ((c, d),) = spans[0].values(), spans[1].values()
    return b <= c or d <= a  # the rows each fills do not overlap


def _old_reached(fn: object, kids: dict, old_nodes: set, held: set) -> tuple[set, set]:
    """(the old nodes reached from ``fn`` on paths that pass through no node in ``held``, the
    nodes in ``held`` met): the old part ``fn``'s own graph enters, not through another place."""
    found, met, seen, todo = set(), set(), {fn}, [fn]
    while todo:
        node = todo.pop()
        for child in kids.get(node, ()):
            if child in seen:
                continue
            seen.add(child)
            if child in held:
                met.add(child)
            elif child in old_nodes:
                found.add(child)
            else:
                todo.append(child)
    return found, met


def _all_below(fn: object, kids: dict, stop=frozenset()) -> set:
    seen, todo = {fn}, [fn]
    while todo:
        for child in kids.get(todo.pop(), ()):
            if child not in seen and child not in stop:
                seen.add(child)
                todo.append(child)
    return seen


def _below(roots: list, kids: dict, keep, stop=frozenset()) -> dict:
    """For each node reachable from ``roots``: whether ``keep`` holds for it or a node below it,
    not looking below nodes in ``stop`` (iterative post-order: long sequences make deep graphs).
    ``kids``: each node's children, read once from ``next_functions``."""
    result: dict = {}
    for root in roots:
        if root is None or root in result:
            continue
        stack = [(root, False)]
        while stack:
            fn, expanded = stack.pop()
            children = () if fn in stop else kids[fn]
            if expanded:
                result[fn] = keep(fn) or any(result[c] for c in children)
            elif fn not in result:
                result[fn] = False  # provisional: marks the node as on the stack
                stack.append((fn, True))
                stack.extend((c, False) for c in children if c not in result)
    return result


def _leaves_below(fn: object, kids: dict, wanted, limit: int = 2) -> list:
    """Up to ``limit`` leaves (``AccumulateGrad.variable``) below ``fn`` for which ``wanted``."""
    found, seen, stack = [], {fn}, [fn]
    while stack and len(found) < limit:
        node = stack.pop()
        variable = getattr(node, "variable", None) if not kids[node] else None
        if (
            isinstance(variable, torch.Tensor)
            and wanted(variable)
            and all(v is not variable for v in found)
        ):
            found.append(variable)
        for child in kids[node]:
            if child not in seen:
                seen.add(child)
                stack.append(child)
    return found


_ALL = 10_000  # leaves counted for a carrier's reason (two named, the rest counted)


def _own_leaves(fn: object, stop: object, floor: int) -> set:
    """The ids of the leaves below ``fn``, not passing ``stop`` or a node made before ``floor``."""
    found, seen, todo = set(), {fn, stop}, [fn]
    while todo:
        node = todo.pop()
        if node is None:
            continue
        variable = getattr(node, "variable", None)
        if isinstance(variable, torch.Tensor) and not node.next_functions:
            found.add(id(variable))
        elif node is fn or (_seq(node) or 0) >= floor:
            todo.extend(c for c, _ in node.next_functions if c not in seen and not seen.add(c))
    return found


def _mirrors(again: object, fn: object, mark: int, previous: int) -> bool:
    """Whether ``again`` (made this step) applies to ``fn`` (made in the step before) the op that
    made ``fn``: the path of node types and input positions from ``again`` down to ``fn`` is also
    found below ``fn`` (down to what ``fn`` was made from), and the other inputs along it are
    nodes of the same types that reach the same leaves, the same weights (h = tanh(cell(x) + h));
    not an op of the same type that only uses it (z - z_prev after z = h - h.mean())."""
    up, todo = {again: None}, [again]
    while todo and fn not in up:  # the shortest path from again down to fn
        node = todo.pop(0)
        for i, (child, _) in enumerate(node.next_functions):
            if (
                child is not None
                and child not in up
                and (child is fn or (_seq(child) or 0) >= mark)
            ):
                up[child] = (node, i)
                todo.append(child)
    if fn not in up:
        return False
    path, node = [], fn
    while up[node] is not None:
        node, i = up[node]
        path.insert(0, (node, i))
    pairs, mirror = [], fn
    for node, i in path:
        if type(mirror) is not type(node) or len(mirror.next_functions) != len(node.next_functions):
            return False
        pairs.append((node, mirror, i))
        mirror = mirror.next_functions[i][0]
    return all(
        type(a) is type(b)
        and (a is None or _own_leaves(a, fn, mark) == _own_leaves(b, mirror, previous))
        for node, twin, i in pairs
        for j, ((a, _), (b, _)) in enumerate(zip(node.next_functions, twin.next_functions))
        if j != i
    )


def _stepped_from(fn: object) -> torch.Tensor | None:
    """The leaf a value was stepped from by ``p + u`` or ``p - u`` steps (a differentiable
    optimizer's), down the first input of each; None if it was made otherwise."""
    while type(fn).__name__ in ("AddBackward0", "SubBackward0"):
        fn = fn.next_functions[0][0]
    variable = getattr(fn, "variable", None)
    return variable if isinstance(variable, torch.Tensor) else None


def _owners(fast: list) -> list[str]:
    """The modules that hold the slots, as code: per object given, the longest path every slot
    under it shares (``net[2]`` for ANIL's head; ``actor`` and ``critic``, two unrelated ones)."""
    by_top: dict = {}
    for p in fast:
        parts = re.findall(r"\.?[^.\[]+|\[[^\]]*\]", _module_code(p.rpartition(".")[0]))
        by_top.setdefault(parts[0] if parts else "", []).append(parts)
    owners = []
    for paths in by_top.values():
        common = []
        for part in zip(*paths):
            if len(set(part)) > 1:
                break
            common.append(part[0])
        owners.append("".join(common).lstrip("."))
    return owners


_OWN_ITEMS = 200_000  # the items _own_tensors reads of one object, at most


def _own_tensors(obj: object, depth: int = 6) -> list:
    """The tensors ``obj`` holds itself: in its attributes (``__dict__`` and ``__slots__``) and the
    lists, tuples (namedtuples too), sets and dicts in them (``depth`` deep: torchopt's list of
    tuples of a module's ``_parameters`` dicts), not inside another object (a module it holds);
    types are tested with ``issubclass(type(v), ...)``: no property, ``__class__`` neither, is
    read. Breadth first (the nearest first), ``_OWN_ITEMS`` items read at most."""
    found, seen = [], set()
    todo = collections.deque((v, 1) for v in _own_attributes(obj).values())
    budget = _OWN_ITEMS
    while todo and budget > 0 and len(found) < 10_000:
        value, level = todo.popleft()
        budget -= 1
        kind = type(value)
        if issubclass(kind, torch.Tensor):
            found.append(value)
        elif (
            level < depth
            and issubclass(kind, (list, tuple, set, frozenset, dict))
            and id(value) not in seen
        ):
            seen.add(id(value))
            base = next(b for b in (dict, list, tuple, set, frozenset) if issubclass(kind, b))
            items = dict.values(value) if base is dict else base.__iter__(value)  # not its own
            room = max(budget - len(todo), 0)  # what is queued is never more than can be read
            todo.extend((v, level + 1) for v in itertools.islice(items, room))
    return found


def _inner_optimizer(steppers: list, objects: dict, slots: list) -> list:
    """The objects given with ``step()`` that may step the fast weights, on evidence (one: the
    inner optimizer; several: which one cannot be told): it holds a slot's tensor itself, or a tensor of its own
    feeds a slot's value (``p - lr * buf``: three nodes down), or it is optimizer-like
    (``param_groups``, or a ``state`` dict holding tensors) and its references reach the slots.
    One that reaches the slots only through a module it holds (a trainer) is no evidence."""
    ids, near, todo = {id(t) for t in slots}, set(), [(t.grad_fn, 0) for t in slots]
    while todo:  # the nodes at most three below a slot's value
        fn, level = todo.pop()
        if fn is None or fn in near:
            continue
        near.add(fn)
        if level < 3:
            todo.extend((c, level + 1) for c, _ in getattr(fn, "next_functions", ()))
    found = []
    for n in steppers:
        obj, own = objects[n], _own_tensors(objects[n])
        attributes = _own_attributes(obj)
        state = attributes.get("state")
        optimizer_like = (
            _static(obj, "param_groups") is not None
            or "param_groups" in attributes
            or (issubclass(type(state), dict) and any(_own_tensors(types.SimpleNamespace(s=state))))
        )
        if (
            ids & {id(t) for t in own}
            or any(t.grad_fn in near for t in own if t.grad_fn is not None)
            or (optimizer_like and ids & {id(t) for t in _walk({n: obj}, BUDGET).tensors})
        ):
            found.append(n)
    return found


def _fast_fix(
    fast: list, state: list, objects: dict, tensor_at: dict, names: dict, trains, inner=None
) -> str:
    """The fix of fast weights (a module's slots holding tensors with a graph) and the inner
    optimizer's ``state`` carried with them: both purposes, in a fixed order, each complete.
    ``inner``: the name of the object given that steps them (found on evidence), if known."""
    order = {name: i for i, name in enumerate(objects)}  # the modules in the order given
    owners = sorted(
        (o for o in _owners(fast) if o),
        key=lambda o: order.get(re.split(r"[.\[]", o, maxsplit=1)[0], len(order)),
    ) or ["the module"]
    one = len(owners) == 1
    module = owners[0]
    listed = owners[0] if one else f"{', '.join(owners[:-1])} and {owners[-1]}"
    slots = f"{module}'s slots" if one else f"the slots of {listed}"
    each = f"[{module}]" if one else f"({', '.join(owners)})"  # the modules, as code to loop over
    metas = [
        n
        for n, o in objects.items()
        if any(
            k.__name__ == "MetaOptimizer" and k.__module__.startswith("torchopt")
            for k in type(o).__mro__
        )
    ]
    opt = (
        metas[0] if metas
        else inner or (re.split(r"[.\[]", state[0], maxsplit=1)[0] if state else None)
    )  # fmt: skip
    back = []
    for p in fast:
        v = _stepped_from(tensor_at[p].grad_fn)
        if v is None or id(v) not in names or not trains(v):
            back = []
            break
        back.append(
            f"{_module_code(p.rpartition('.')[0])}._parameters[{p.rpartition('.')[2]!r}] = "
            f"{names[id(v)]}"
        )
    plain = (
        "; ".join(back)
        if back and len(back) <= 4 and not any("(key)" in b for b in back)  # not code: a loop
        else (  # any number of slots: the leaves taken before the loop, written back in a loop
            f"start = [(m.get_submodule(n.rpartition('.')[0]), n.rpartition('.')[2], p) for m in "
            f"{each} for n, p in m.named_parameters(remove_duplicate=False)] taken before the "
            "loop, then for m, n, p in start: m._parameters[n] = p"  # a tied weight: each slot
        )
        if back
        else f"write the tensors the outer optimizer holds back into {slots}"
    )  # fmt: skip
    held = list(dict.fromkeys(_coded(_group(p).replace("[*]", "")) for p in state))
    torchopt = "torchopt" in sys.modules or metas
    name = opt or "inner_opt"
    recover = (
        f"torchopt.recover_state_dict({module}, net_state)" if one
        else f"torchopt.recover_state_dict(m, s) for m, s in zip({each}, net_states)"
    )  # fmt: skip
    extract = (
        f"net_state = torchopt.extract_state_dict({module})" if one
        else f"net_states = [torchopt.extract_state_dict(m) for m in {each}]"
    )  # fmt: skip
    reset = (
        (
            f"{recover} and torchopt.recover_state_dict({name}, opt_state), {extract} and "
            f"opt_state = torchopt.extract_state_dict({name}) taken before the loop; in plain "
            "torch: "
            if torchopt
            else ""
        )
        + plain
        + (f", and make {opt} anew (its state with it)" if opt else ", and start any state your inner optimizer keeps anew")
    )  # fmt: skip
    parameters = (
        f"{module}.parameters()" if one else f"[{', '.join(f'*{o}.parameters()' for o in owners)}]"
    )
    stop = (
        f"torchopt.stop_gradient({module})" if one else f"torchopt.stop_gradient(m) for m in {each}"
    )
    detach = (
        (f"{stop} and torchopt.stop_gradient({name}); in plain torch: " if torchopt else "")
        + f"for p in {parameters}: p.detach_().requires_grad_(), and .detach_() each "
        + (f"tensor of {', '.join(held)}" if held else "tensor of the inner optimizer's state, if it keeps one")
    )  # fmt: skip
    return (
        "by purpose: 1. each outer step adapts the same start (MAML, ANIL, Reptile-style inner "
        f"loops): at each outer step's start reset both {slots} and the inner "
        f"optimizer's state: {reset}; 2. inner weights meant to carry on across outer steps (a "
        "meta-gradient that stops at each, as meta-gradient RL): at each outer step's start "
        f"detach the slots and the inner optimizer's state: {detach}"
    )


def _module_code(path: str) -> str:
    """A module's path as code: ``net.0.conv`` is ``net[0].conv``."""
    return re.sub(r"\.(\d+)(?=\.|$)", r"[\1]", path)


def _named(leaves: list, names: dict) -> str:
    """``a, b and 3 more``: two leaves by name, the others counted (``_ALL`` at most)."""
    shown = ", ".join(names.get(id(v), f"a leaf {tuple(v.shape)}") for v in leaves[:2])
    more = len(leaves) - 2
    return shown + (f" and {more}{'+' if len(leaves) >= _ALL else ''} more" if more > 0 else "")


def _reset_below(fn: object, kids: dict, old) -> str | None:
    """The name of a reset node (``zero_()``, ``fill_()``, ``copy_()``) at or below ``fn``, among
    new nodes, whose input is old: a tensor reset in place keeps its history behind the value."""
    seen, stack = {fn}, [fn]
    while stack:
        node = stack.pop()
        children = kids[node]
        name = type(node).__name__
        if name in _RESETS | _WRITES and any(old(c) for c in children):
            if name.startswith("FillBackward") and len(node.next_functions) > 1:
                return "fill_(a tensor)"  # the Tensor overload: its value is a tensor, not a number
            return {"ZeroBackward0": "zero_()", "CopyBackwards": "copy_() or x[...] = v"}.get(
                name, "fill_()" if name in _RESETS else "x[i] = v, index_put_ or masked_fill_"
            )
        for child in children:
            if child not in seen and (not old(child) or type(child).__name__ in _RESETS | _WRITES):
                seen.add(child)
                stack.append(child)
    return None


def _rows_written(fn: object, kids: dict, old, reaches_old: dict) -> bool:
    """Whether the write at or below ``fn`` into a tensor reaching the old part
    (``buf[i % n] = v``, ``torch.roll(buf, -1, 0).clone()`` then a write) writes values made
    without the old part (a ring buffer's rows) into rows only moved (cat, roll, clone, views),
    not mixed (``h[t] = tanh(W h[t - 1])``, a decayed buffer)."""
    seen, stack = {fn}, [fn]
    while stack:
        node = stack.pop()
        children = [c for c, _ in node.next_functions]
        if type(node).__name__ in _WRITES and children and children[0] is not None:
            base = children[0]
            if old(base) or reaches_old.get(base):
                moved, todo = True, [] if old(base) else [base]
                while todo and moved:
                    step = todo.pop()
                    moved = bool(_MOVES.fullmatch(type(step).__name__))
                    todo += [
                        c
                        for c, _ in step.next_functions
                        if c is not None and not old(c) and reaches_old.get(c)
                    ]
                return moved and not any(
                    c is not None and (old(c) or reaches_old.get(c)) for c in children[1:]
                )
        for child in kids[node]:
            if child not in seen and not old(child):
                seen.add(child)
                stack.append(child)
    return False


def _emptied(store: str) -> str:
    """How to empty a cache: torch.distributions' ``Transform._cached_x_y`` is a pair that the
    transform unpacks (``()`` or ``[]`` break it), so it gets ``(None, None)``, its empty value."""
    if store.endswith("._cached_x_y"):
        return f"empty it, {store} = (None, None),"
    return f"empty {store}"


def _group(path: str) -> str:
    """``h[2].x`` -> ``h[*].x``: the items of one container, side by side."""
    item = re.fullmatch(r"(.*)\[(\d+)\](.*)", path)
    return f"{item[1]}[*]{item[3]}" if item else path


def _collapse(paths: list[str]) -> tuple[str, int]:
    """``["h[0]", "h[1]", "h[2]"]`` -> ``("h[0..2]", 3)``; ``q[0].x, q[3].x`` -> ``q[0..3].x``."""
    if len(paths) == 1:
        return paths[0], 1
    match = [re.fullmatch(r"(.*)\[(\d+)\](.*)", p) for p in paths]
    if all(match) and len({(m[1], m[3]) for m in match}) == 1:
        numbers = sorted(int(m[2]) for m in match)
        return f"{match[0][1]}[{numbers[0]}..{numbers[-1]}]{match[0][3]}", len(paths)
    return ", ".join(paths), len(paths)


def _coded(path: str) -> str:
    """``path`` up to its first key that is no code (``buf[<tuple>]``: ``buf``)."""
    return path.partition("[<")[0]


def _detach(path: str, tensor: torch.Tensor, holders: dict) -> str:
    """``path = path.detach()``, or what works where that assignment cannot: a tuple rebuilt, a
    namedtuple's field replaced; in a closure cell or a default argument, detached where made; a
    dict's key that is no code (a tuple, an object): a loop over the dict."""
    odd = re.fullmatch(r"([^<]*?)\[<[^>]*>\]([^<]*)", path)
    if odd and "(key)" not in path:
        k = next((n for n in ("k", "key", "name") if not re.search(rf"\b{n}\b", odd[1])), "k_")
        each = _detach(f"{odd[1]}[{k}]{odd[2]}", tensor, holders)
        return each if each.startswith("detach it") else f"for {k} in {odd[1]}: {each}"
    holder = holders.get(id(tensor))
    frozen = _frozen(path, holder)
    inner = re.fullmatch(r"(.*)\.<(closure|default) (\w+)>(.+)", path)
    if frozen is None and inner:  # in a container a closure refers to: written in its own code
        where = (
            f"{inner[1]}'s {'closure variable' if inner[2] == 'closure' else 'default argument'}"
        )
        return f"{inner[3]}{inner[4]} = {inner[3]}{inner[4]}.detach() ({inner[3]}: {where})"
    if frozen is None:
        return f"{path} = {path}.detach()"
    item = re.fullmatch(r"(.*)\[\d+\]", path)
    field_ = re.fullmatch(r"(.*)\.(\w+)", path)
    if frozen == "a tuple" and item and _frozen(item[1], holders.get(id(holder))) is None:
        name = next(n for n in ("x", "item", "value") if not re.match(rf"{n}\b", item[1]))
        return f"{item[1]} = tuple({name}.detach() for {name} in {item[1]})"
    if frozen == "a namedtuple" and field_ and _frozen(field_[1], holders.get(id(holder))) is None:
        return f"{field_[1]} = {field_[1]}._replace({field_[2]}={path}.detach())"
    return f"detach it where it is made (it sits in {frozen}, which cannot be assigned into)"


def _frozen(path: str, holder: object) -> str | None:
    """What holds the tensor at ``path`` if it cannot be assigned into (a tuple, a closure cell,
    a default argument, a set): then ``path = value`` is no fix to print."""
    kind = type(holder)
    if issubclass(kind, tuple):
        return "a namedtuple" if hasattr(kind, "_fields") else "a tuple"
    if issubclass(kind, (set, frozenset, types.MappingProxyType)):
        return f"a {kind.__name__}"
    if re.search(r"\.<(closure|default) [^>]*>$", path) or kind is types.CellType:
        return "a closure cell or a default argument"
    return None


_CONTAINERS = (list, collections.deque, tuple, dict, set, frozenset)


def _container(tensor: torch.Tensor, holders: dict) -> tuple[object, object]:
    """The nearest container (not a namedtuple: a record) that holds ``tensor``, and its holder."""
    for obj in _chain(holders.get(id(tensor)), holders):
        if issubclass(type(obj), _CONTAINERS) and not hasattr(type(obj), "_fields"):
            return obj, holders.get(id(obj))
    return None, None


def _chain(obj: object, holders: dict):
    """``obj`` and the objects holding it, outward, each once: a chain of holders can loop (a
    tensor attribute that points back to its module), and a walk along it must end."""
    seen = set()
    while obj is not None and id(obj) not in seen:
        seen.add(id(obj))
        yield obj
        obj = holders.get(id(obj))


def _grows(container: object) -> bool:
    """A list, or a deque without ``maxlen``: it grows with every item added (a bank has a bound)."""
    kind = type(container)
    return issubclass(kind, list) or (
        issubclass(kind, collections.deque) and collections.deque.maxlen.__get__(container) is None
    )


def _bounded(container: object) -> bool:
    """A deque with ``maxlen``: a bank or queue of samples by construction, even with one item."""
    return issubclass(type(container), collections.deque) and (
        collections.deque.maxlen.__get__(container) is not None
    )


def _beside(container: object, owner: object, store: str, objects: dict) -> list[str]:
    """The other lists kept beside ``container`` (``rewards`` beside saved log-probs): a list or
    deque of the same length, an attribute of the same object, or given by name beside it."""
    if owner is None:
        near = objects.items()
        path = lambda name: name  # noqa: E731
    else:
        near = (
            dict.items(owner) if issubclass(type(owner), dict) else (_own_dict(owner) or {}).items()
        )
        prefix = re.fullmatch(r"(.*?)(\.\w+|\[[^\]]*\])", store)
        if prefix is None:
            return []
        path = (  # noqa: E731
            (lambda name: f"{prefix[1]}[{name!r}]")
            if issubclass(type(owner), dict)
            else (lambda name: f"{prefix[1]}.{name}")
        )
    if container is None:
        return []
    length = len(container)
    return [
        path(name)
        for name, value in near
        if value is not container
        and issubclass(type(value), (list, collections.deque))
        and len(value) == length
    ][:3]


def _library_cache(path: str, tensor: torch.Tensor, holders: dict) -> bool:
    """Whether a torch or library object keeps ``tensor`` in an attribute named as a cache
    (``Transform._cached_x_y``): it hands back a stored result, with its graph, when called again."""
    kept = any(
        _kind(_file_of(type(obj))) in ("torch", "library")
        for obj in _chain(holders.get(id(tensor)), holders)
    )
    return kept and re.search(r"[.\[].*cache", path, re.IGNORECASE) is not None


def _higher_held(obj: object, holders: dict) -> bool:
    """Whether ``obj`` or an object holding it is of the ``higher`` library's own classes (its
    functional model, its differentiable optimizer): the class's module, not its shape."""
    return any(
        (getattr(type(o), "__module__", None) or "").startswith("higher.")
        for o in _chain(obj, holders)
    )


def _named_slot(slot: tuple) -> bool:
    """Whether ``(holder's type, suffix)`` is an attribute or a dict's named key (``.pose``,
    ``['h']``), which objects of one kind share; a list's or tuple's item number (``[0]``) is not:
    two lists' first items are no "same attribute"."""
    return slot[0] is not None and slot[1].startswith((".", "['", '["'))


def _file_of(klass: type) -> str:
    """The file that defines ``klass`` ('<notebook>' for ``__main__`` without one)."""
    module = sys.modules.get(getattr(klass, "__module__", "") or "")
    return getattr(module, "__file__", None) or "<notebook>"


def find_old_graph(loss: torch.Tensor | None, /, **objects: object) -> Report:
    """Report what carries an earlier step's graph into ``loss``'s graph, and where.

    ``loss``: the tensor you call ``backward()`` on (``None`` to search the objects only).
    ``objects``: what your program keeps, by name (``model=model, opt=opt``, or ``**globals()``,
    ``**locals()``). Call it before ``loss.backward()``, or in the ``except`` of the failing one
    (there, with ``mark_step()`` at the top of each step). It changes nothing; on torch 2.9 and
    older see the module's notes on unpacking.
    """
    if loss is not None and not isinstance(loss, torch.Tensor):
        raise TypeError(
            f"find_old_graph: loss must be the tensor you call backward() on, not a "
            f"{type(loss).__name__} (pass the other objects by name: find_old_graph(loss, model=model))"
        )
    if loss is not None and loss.grad_fn is None:
        raise ValueError(
            "find_old_graph: loss has no grad_fn: it does not require grad, so there is no graph to "
            "search (it was computed under no_grad or inference_mode, from detached values, or is a leaf)"
        )
    if loss is None and not objects:
        raise ValueError("find_old_graph: give a loss, or objects to search by name (model=model)")
    notes = []
    if UNPACKS_TO_LOOK:
        text = (
            f"torch {torch.__version__} shows no saved tensor's hook: looking at each saved tensor "
            "unpacks it, so a checkpointed block runs again (BatchNorm statistics change); run this "
            "in a debugging run only"
        )
        warnings.warn(text, stacklevel=2)
        notes.append(text)
    objects = {  # not __builtins__ and the like from **globals(), nor IPython's history (_, Out)
        name: value
        for name, value in objects.items()
        if not (len(name) > 4 and name.startswith("__") and name.endswith("__"))
        and not _IPYTHON.fullmatch(name)
    }
    walk = _walk(objects, BUDGET)
    names = walk.names
    for key, (path, module, suffix) in walk.slot_paths.items():  # a slot met first elsewhere (a
        if (
            names.get(key, path) != path
        ):  # logger's reference): named by its module, the other apart
            walk.aliases.setdefault(key, []).insert(0, names[key])
            names[key] = path
            walk.holders[key] = module
            walk.slot[key] = (id(module), type(module).__name__, suffix)
    for t in walk.tensors:  # a tensor under a name given (x_hat, from **globals()) that an
        # object keeps too (a warm start it reads back at its next call): named by the object's
        # place, which a detach of the name alone leaves holding the graph; each place is fixed
        key, name = id(t), names[id(t)]
        if t.grad_fn is None or t is loss or re.search(r"[.\[<]", name):
            continue
        kept = [  # an object's attribute or key, not a list's item (a log) nor bookkeeping
            (p, h, s)
            for p, h, s in walk.alias_at.get(key, ())
            if h is not None
            and not _indirect(p)
            and not issubclass(type(h), (list, collections.deque))
        ]
        if kept:
            (path, holder, suffix), others = (
                kept[0],
                [p for p, h, _ in kept[1:3] if type(h) is not tuple],
            )
            walk.aliases[key] = [name, *(p for p in walk.aliases[key] if p != path)]
            names[key], walk.holders[key] = path, holder
            walk.slot[key] = (id(holder), type(holder).__name__, suffix)
            walk.also[key] = [*others, name]
    held = walk.opt_params  # what is known to train: an optimizer given or found holds it
    trains = lambda t: id(t) in held and t.requires_grad  # noqa: E731
    trains_what = "optimizers' parameters"
    # without an optimizer, a bare leaf that requires grad may train by hand or be a constant (a
    # target made from requires_grad tensors): its version counter shows whether anything changed it
    updated = [
        t
        for t in walk.tensors
        if t.is_leaf and t.requires_grad and not t.is_inference() and t._version > 0
    ]
    mark, twice, later = _MARK, [], []  # later: the objects' nodes freed after the mark
    root = None if loss is None else loss.grad_fn
    by_node: dict = collections.defaultdict(list)  # grad_fn -> places that hold its tensor
    tensor_at: dict = {}  # path -> tensor
    for t in walk.tensors:
        if t.grad_fn is not None:
            by_node[t.grad_fn].append(names[id(t)])
            tensor_at[names[id(t)]] = t
    every = lambda t: [names[id(t)], *walk.aliases.get(id(t), [])] if id(t) in names else []  # noqa: E731

    # every node of the loss's graph (breadth first, nearest the loss first) and of the objects'
    state, alive, parent, order, kids = {}, {}, {}, [], {}
    parents = collections.defaultdict(list)
    frontier = [root] if root is not None else []
    if root is not None:
        parent[root] = None
    for start in [None, *by_node]:
        if start is not None:
            if start in parent:
                continue
            parent[start], frontier = None, [start]
        while frontier:
            nxt = []
            for fn in frontier:
                # this step's nodes freed by a backward count only if this loss reaches them
                state[fn], alive[fn] = _old_state(fn, mark, twice if start is None else later)
                kids[fn] = [c for c, _ in fn.next_functions if c is not None]
                if start is None:
                    order.append(fn)
                for child in kids[fn]:
                    if start is None:
                        parents[child].append(fn)
                    if child not in parent:
                        parent[child] = fn
                        nxt.append(child)
            frontier = nxt
    error = sys.exc_info()[1]  # called in the except of the failing backward()?
    in_except = isinstance(error, RuntimeError) and _FREED in str(error)
    # nothing made before the mark is old, yet the objects' graphs hold nodes made after it whose
    # saved tensors are freed: a backward earlier in this step freed them (a library's loop that
    # calls your code and backwards at each pass: mark_step() cannot mark its passes); they are
    # old, and so is a node that saved nothing made before the newest of them that reaches one
    in_call = set()
    if later and root is None and all(v is None for v in state.values()):
        in_call = set(later)
        newest = max(_seq(f) or 0 for f in later)
        below = _below(list(state), kids, lambda f: f in in_call)
        # before the failing backward (review 38 N4), a node above only freed ones is of a pass
        # before (its graph was run); one above a node whose saved tensors are alive is new. A
        # place whose own node is freed (a GAN's fake after D's backward) stays only held below
        new = {} if in_except else _below(list(state), kids, lambda f: alive[f] and f not in later)
        for f in list(state):
            if f in in_call:
                state[f] = _freed_names(f)
            elif (
                not alive[f]
                and type(f).__name__ != "AccumulateGrad"
                and below.get(f)
                and ((_seq(f) or newest) < newest or not in_except and not new.get(f))
            ):
                state[f] = ()
                in_call.add(f)
    # a node that saved nothing has no freed tensor to show its age: it is new if a new node
    # with saved tensors lies below it (it was made after that one), old if made before a known
    # old node, or if only old nodes lie below it
    known_old = {fn for fn, names_ in state.items() if names_ is not None}
    newest_old = max(
        (
            n
            for f in known_old
            if type(f).__name__ != "AccumulateGrad" and (n := _seq(f)) is not None
        ),
        default=-1,
    )
    new_below = _below(list(state), kids, lambda f: alive[f] and f not in known_old, stop=known_old)
    reaches_old = _below(list(state), kids, lambda f: f in known_old)

    def old(fn) -> bool:  # for the places that hold a tensor: was that tensor made earlier?
        if fn in known_old:
            return True
        if not reaches_old.get(fn) or type(fn).__name__ == "AccumulateGrad":
            return False
        number = _seq(fn)
        if mark is not None and number is not None:  # dated by mark_step(): made this step
            return number < mark
        return (number is not None and number < newest_old) or not new_below.get(fn)

    fresh, todo = set(), [root] if root is not None and root not in known_old else []
    while todo:  # the part of the loss's graph reached without passing through an old node
        fn = todo.pop()
        fresh.add(fn)
        todo.extend(c for c in kids[fn] if c not in known_old and c not in fresh)
    trained_now = {  # the leaves this step's own part of the loss trains
        id(f.variable)
        for f in fresh
        if not kids[f] and isinstance(getattr(f, "variable", None), torch.Tensor)
    }
    entries = {  # where the loss's graph enters an old part: an old node with a fresh parent
        fn
        for fn in order
        if fn in known_old and (fn is root or any(p in fresh for p in parents[fn]))
    }
    if root is not None and root in known_old and mark is None:
        notes.append(
            "the loss's own graph was already run by a backward (you called this after backward(), "
            "or in its except): the nodes that pass freed look old too; call mark_step() at the top "
            "of each step, or call this before backward()"
        )
    reaches_trained = _below(
        list(by_node),
        kids,
        lambda f: (
            not kids[f]
            and isinstance(getattr(f, "variable", None), torch.Tensor)
            and trains(f.variable)
        ),
    )

    def old_kind(fn) -> str:
        if fn in in_call:
            return "its graph was freed by a backward earlier in this step"
        if state.get(fn):
            return "its graph was freed by an earlier backward pass"
        if state.get(fn) == ():
            return "made before mark_step()"
        return "made in an earlier step (what its graph saved was freed)"

    in_loss = set(order)
    carriers, holding, derived, overwritten = [], [], [], []
    old_held = {f for f in by_node if f in known_old or old(f)}
    slot_of = {names[id(t)]: walk.slot.get(id(t)) for t in walk.tensors}
    place = lambda path: slot_of.get(path) or ("name", path)  # noqa: E731
    # the record of a call in the step before this one (mark_step() dates the calls), kept only
    # for the places whose object is the very one held then (an id alone may be reused)
    objects_now = {id(h): h for h in walk.holders.values() if h is not None}
    record = {
        key: held
        for key, (held, ref) in _RECORD.get(_PREVIOUS if mark is not None else None, {}).items()
        if key[0] in ("name", "tuple")
        or (key[0] in objects_now and (ref is None or ref() is objects_now[key[0]]))
    }
    recorded = {_node_key(f): f for f in state if f in known_old}
    new_held = [f for f in by_node if f not in old_held]  # this step's tensors that places hold

    def _made_from_others(path: str, fn) -> bool:
        """Whether a tensor made this step is computed from carried values (an output, a loss
        term), not rebuilt from its own earlier value: the place held, at a call in an earlier
        step (mark_step() dates the calls), a node its graph does not reach; or its graph enters
        the old part only through what other places hold now or held at such a call, or, not
        rebuilt itself, through the old nodes another place is rebuilt from."""
        key = place(path)  # the same attribute of the same object, whatever names it now
        mine = {key}
        if len(key) == 3 and key[1] == "tuple":  # a tuple's item: a new tuple each step, so its
            mine.add(("tuple", path))  # record is by path, not another place's (model.hidden)
            key = ("tuple", path) if ("tuple", path) in record else key
        others = {recorded[r] for q, r in record.items() if q not in mine and r in recorded}
        if key in record:  # not reached, or reached only through what other places hold now or
            # held then (h = f(tracker.h); tracker.h = h: the loop reads tracker.h, h is made from it)
            stop = others | {f for f in old_held - {fn} if _read_slot(f)}
            return record[key] not in {_node_key(f) for f in _all_below(fn, kids, stop)}
        entered, met = _old_reached(fn, kids, known_old, (old_held | others) - {fn})
        if entered and not _rebuilt(fn):  # also through the earlier values another place is
            # rebuilt from (an output beside an LSTM's (h, c)), unless it enters its own (h, c)
            theirs = {
                e for g in new_held if g is not fn and reaches_old.get(g) for e in _rebuilt_from(g)
            }
            entered, met = _old_reached(fn, kids, known_old, (old_held | others | theirs) - {fn})
        return bool(met) and not entered and not _own_history(fn, met)

    def _passed_on(path: str, fn) -> bool:
        """An earlier step's tensor that carries a state: its graph reaches what this place held
        at the call in the step before (tracker.h = h after each step), or another place held this
        very node then and this step's value of that place is made from it (h, then tracker.h)."""
        key, mine = place(path), _node_key(fn)
        if not _read_slot(fn):  # an item appended to a list is a log of the state, not its carrier
            return False
        then = record.get(key)
        if then is not None and then != mine:
            if then in {_node_key(f) for f in _all_below(fn, kids) - {fn}}:
                return True
        return any(
            q != key and r == mine and any(fn in _all_below(g, kids) - {g} for g in new_held)
            for q, r in record.items()
        )

    def _passed_in_tuple(path: str, fn) -> bool:
        """An item of a tuple stored again at each step ((h, c) = cell(x, model.h); model.h =
        (h, c)): its graph reaches what the same path held at the call in the step before."""
        then = record.get(("tuple", path))
        return (
            then is not None
            and then != _node_key(fn)
            and then in {_node_key(f) for f in _all_below(fn, kids) - {fn}}
        )

    def _read_slot(fn) -> bool:
        """Whether a place holding ``fn``'s tensor is one a loop reads a state back from (a name,
        an attribute), not an item of a list that grows (a log of earlier values)."""
        return any(
            not (p.endswith("]") and _grows(_container(tensor_at[p], walk.holders)[0]))
            for p in by_node.get(fn, ())
        )

    def _own_history(fn, met) -> bool:
        """Whether an old node met holds an earlier value of ``fn``'s own tensor, kept in a
        container that holds this one too (a total also appended to a list at each step)."""
        mine = {_group(p) for q in by_node.get(fn, ()) for p in every(tensor_at[q])}
        mine |= {_group(p) for p in every(loss)} if fn is root else set()
        return any(
            "[*]" in _group(p) and _group(p) in mine
            for m in met
            for q in by_node.get(m, ())
            for p in every(tensor_at[q])
        )

    state_slots: dict = {}  # (class, attribute) of a place rebuilt from its own value -> its path
    reach_of: dict = {}  # a carrier's path -> the leaves that train its graph reaches
    carrier_slots: list = []  # (class, attribute) of each carrier's places
    derived_slots: dict = {}  # (class, attribute) of a place made this step from carried values
    loss_old = root is not None and mark is not None and old(root)
    old_groups = {_group(p) for t in walk.tensors if t.grad_fn and old(t.grad_fn) for p in every(t)}
    if loss_old:  # the loss itself is an earlier step's tensor (dated by mark_step())
        places = every(loss)
        kept = [p for p in places if re.search(r"[.\[]", p)] or places  # an object's, not a name's
        for here in kept[:2] or ["the loss given"]:
            store = re.fullmatch(r"(.+?)(\[[^\]]+\])?", here)[1]
            if re.search(r"[.\[]", here):  # an object hands the same tensor back (a cache)
                kind = "this loss itself, an earlier step's tensor handed back again"
                reason = (
                    "what holds it returns a stored result (a cache) instead of computing it anew"
                )
                fix = (
                    "compute it anew each step: turn the cache off (cache_size=0, or its option) or "
                    f"{_emptied(store)} at each step's start"
                )
            else:
                kind = "this loss itself, made before this step"
                reason = "the same loss is backwarded again: it was made before the loop or in an earlier step"
                fix = "compute it inside the step" + (
                    "" if places else " (if a cache hands it back: turn it off)"
                )
            reason += "; the loss needs its graph, so detaching is no fix"
            carriers.append(
                Carrier(here, kind, type(root).__name__, "recompute", reason, fix, 1, True)
            )
            carrier_slots.append(set())
    groups: dict = collections.defaultdict(list)  # a container's items, side by side
    this_step: set = set()  # groups that also hold a tensor of this step: a bank longer than a step

    def _starts_at_free_leaf(fn) -> bool:
        """A value rebuilt from itself whose history starts at a leaf that requires grad and that
        no optimizer holds: a recurrent state started from such a leaf, or weights copied from a
        module (load_state_dict, copy_: no graph link) and moved functionally. Nothing in the graph
        tells the two apart (a value match fires on a state equal to a norm's ones and misses a
        copy that drifted), so both fixes are printed, by purpose."""
        if not held:  # no optimizer known: every parameter would look free (plain state then)
            return False
        return bool(_leaves_below(fn, kids, lambda t: t.requires_grad and not trains(t), 1))

    def _this_steps_leaves(fn) -> list:
        """The leaf tensors this step's part of ``fn``'s graph reaches (down to the old nodes)."""
        seen, todo, found = {fn}, [fn], []
        while todo:
            for child in kids.get(todo.pop(), ()):
                if child in seen or child in known_old or old(child):
                    continue
                seen.add(child)
                variable = getattr(child, "variable", None)
                if not kids.get(child) and isinstance(variable, torch.Tensor):
                    found.append(variable)
                todo.append(child)
        return found

    def _starts_from_trained(fn, leaves: list) -> list:
        """Of ``leaves`` (below ``fn``, held by an optimizer), those this step's part of ``fn``'s
        graph does not reach: reached only through its earlier value, where its chain starts (a
        learned initial state, ``h = rnn.h0``), not a weight of the cell applied each step."""
        now = {id(v) for v in _this_steps_leaves(fn)}
        return [v for v in leaves if id(v) not in now]

    def _starts_from_learned(fn, leaves: list) -> list:
        """The leaves ``fn``'s chain may start from (a learned ``h0``): with an optimizer, those of
        ``leaves`` it holds; without one, a leaf of the objects given that requires grad (it may
        train: said as a condition), so a zeros or constant start, which reaches none, names none."""
        if not held:
            leaves = _leaves_below(fn, kids, lambda t: t.requires_grad and id(t) in names, _ALL)
        return _starts_from_trained(fn, leaves)

    def _learned_start(fn, start: list, cut: str, stored: str) -> str:
        """The fix of a state whose chain starts from ``start`` (a learned h0, or a value computed
        from weights, an encoder's output: an op other than a view or copy on them alone), by
        purpose: the graph shows it only below the earlier value."""
        first = _named(start, names)
        ids = {id(v) for v in start}
        leaf = lambda f: isinstance(getattr(f, "variable", None), torch.Tensor)  # noqa: E731
        theirs = _below([fn], kids, lambda f: leaf(f) and id(f.variable) in ids)
        others = _below([fn], kids, lambda f: leaf(f) and id(f.variable) not in ids)
        computed = any(
            theirs[f] and not others[f] and not leaf(f) and not _MOVES.fullmatch(type(f).__name__)
            for f in theirs
        )
        what, again = (
            (f"a value computed from {first}", f"computing that value from {first} again")
            if computed
            else (first, f"from {first}")
        )
        start_value = "value" if computed else first
        return (
            f"if it starts from {what} (a learned initial state, which trains): detach only what "
            f"is carried from the previous step ({cut} from the second step on, not the first "
            f"step's {start_value}"
            + (f"; and, from the first step on, {stored}" if stored else "")
            + f"), or start each sequence again as its first step does, {again} (not a new "
            f"tensor); otherwise ({first} only ran on an earlier step): {cut}"
            + (f", and {stored}" if stored else "")
        )

    def _applied_again(fn) -> list | None:
        """For ``fn``, an earlier step's node this loss enters: the leaves it may start from (a
        learned h0), if this step's part of the graph applies the op that made it again, to it,
        with weights that made it (h = tanh(cell(x) + model.h); model.h = h after backward):
        a recurrence, so a state, not a value kept once; else None. Only a tensor made in the
        step before this one, dated by mark_step() (a value made before the loop is kept once)."""
        if mark is None or _PREVIOUS is None or fn not in in_loss or not kids.get(fn):
            return None  # (without two marks, a value made before the loop looks the same)
        number = _seq(fn)
        if number is None or number < _PREVIOUS:
            return None
        mine = {id(v): v for v in _leaves_below(fn, kids, lambda t: t.requires_grad, _ALL)}
        for again in fresh:
            if type(again) is type(fn) and again is not fn and _mirrors(again, fn, mark, _PREVIOUS):
                now = {id(v) for v in _this_steps_leaves(again)}
                if now and now <= mine.keys():
                    learned = [v for i, v in mine.items() if i not in now]
                    return [v for v in learned if trains(v) or not held and id(v) in names]
        return None

    def _through_others(fn) -> bool:  # enters the old part only through what other places hold
        entered, met = _old_reached(fn, kids, known_old, old_held - {fn})
        return bool(met) and not entered and not _own_history(fn, met)

    @functools.cache
    def _rebuilt_from(fn) -> frozenset:  # its earlier values: old nodes made by the same op
        mine = {type(k) for k in kids[fn]}  # from the same kinds of input (a total + a term)
        return frozenset(
            e
            for e in _old_reached(fn, kids, known_old, set())[0]
            if type(e) is type(fn) and mine - {type(e)} <= {type(k) for k in kids.get(e, ())}
        )

    def _rebuilt(fn) -> bool:  # enters its own earlier value
        return bool(_rebuilt_from(fn))

    def _summed_onto_itself(fn) -> bool:
        """total = total + term: adds only, down to its earlier value (not w - lr * g: a step)."""
        if type(fn).__name__ != "AddBackward0":
            return False
        earlier, seen, todo = _rebuilt_from(fn), {fn}, [fn]
        while todo:
            for child in kids.get(todo.pop(), ()):
                if child in earlier:
                    return True
                if type(child) is type(fn) and child not in known_old and child not in seen:
                    seen.add(child)
                    todo.append(child)
        return False

    def _trains_only_through_old(fn) -> bool:
        """This step's part of ``fn``'s graph (down to the old nodes) reaches no leaf that trains:
        what trains it is reached only through its earlier value (sigmoid(temp) * 0.99 ** k)."""
        return not any(trains(v) for v in _this_steps_leaves(fn))

    for t in walk.tensors:  # a container holding this step's tensor under any name: a bank
        if t.grad_fn and not old(t.grad_fn):
            this_step.update(_group(p) for p in every(t))
    for fn, paths in by_node.items():
        if fn is root and (
            loss_old
            or not (any(old(c) for c in kids[fn]) or _rebuilt(fn))  # (0.9 * total + ...)
            or _through_others(fn)
        ):  # the loss itself, unless it adds to an earlier value no other place holds (a total)
            continue
        for path in paths:
            item = re.fullmatch(r"(.*)\[(\d+)\](.*)", path)
            key = f"{item[1]}[*]{item[3]}" if item else path
            if (
                not reaches_old.get(fn)
                or in_call
                and (fn in in_call or not _summed_onto_itself(fn))
            ):
                # dated by the passes inside one call: only a sum onto its earlier value is known
                # to be carried; its own node freed: maybe by the failing pass itself
                holding.append(path)
            else:
                slot = id(tensor_at[path]) in walk.module_params  # a module's slot: its own
                groups[key if item and old(fn) and not slot else path].append((path, fn))
    # the loss is named by the place that carries it: an object's, not a history's item or a name
    # (the loss's own, rebound each step); every other place holding it is named beside
    shown_root = sorted(
        every(loss), key=lambda p: (_group(p) in old_groups, not re.search(r"[.\[]", p))
    )
    from_loss = len(carriers)  # the loss itself, handed back (above)
    fast = [p for p, t in tensor_at.items() if id(t) in walk.module_params]  # fast weights
    steppers = [  # objects given with a step() (no module): an optimizer, inner or outer
        n
        for n, o in objects.items()
        if fast and not issubclass(type(o), torch.nn.Module)
        and (callable(_static(o, "step")) or callable((_own_dict(o) or {}).get("step")))
    ]  # fmt: skip
    try:
        several = _inner_optimizer(steppers, objects, [tensor_at[p] for p in fast])
    except Exception:  # noqa: BLE001 - a rule of this tool failed: the inner optimizer is not known
        several = []
    inner = several if len(several) == 1 else []
    inner_state = [  # what it holds with a graph, not on a module: its state (momentum, second moments)
        p
        for p, t in tensor_at.items()
        if p not in fast and re.split(r"[.\[]", p, maxsplit=1)[0] in (inner or steppers)
        and not issubclass(type(walk.holders.get(id(t))), torch.nn.Module)
    ]  # fmt: skip

    def fast_fix() -> str:  # made where used: inside the rules' guard
        state_ = inner_state if inner else []
        return _fast_fix(fast, state_, objects, tensor_at, names, trains, *inner[:1])

    for use_record in (True, False):  # without the record when it leaves no carrier to name
        del carriers[from_loss:], carrier_slots[from_loss:]
        for found in (derived, overwritten, state_slots, derived_slots):
            found.clear()
        for group, members in groups.items():
            try:
                paths = [p for p, _ in members]
                fn = members[0][1]
                shown, count = _collapse(paths)
                here, tensor = paths[0], tensor_at[paths[0]]
                reset = _reset_below(fn, kids, old)
                leaves = _leaves_below(fn, kids, trains, limit=_ALL)
                leaf_names = _named(leaves, names)
                if fn is root and shown_root:
                    here_shown = shown_root[0]
                    others = [p for p in shown_root[1:] if _group(p) not in old_groups][:2]
                    shown = here_shown + (f" (also {', '.join(others)})" if others else "")
                else:
                    here_shown = here
                memory_only = False  # no error: a graph kept, freed, not rebuilt (only memory)
                detach = _detach(here_shown, tensor, walk.holders)  # "here = here.detach()"
                frozen = not detach.startswith(f"{here_shown} = ")
                if (also := walk.also.get(id(tensor))) and count == 1:  # one tensor, every place
                    shown += f" (also {', '.join(also)})"
                    detach = (
                        " and ".join([detach, *(_detach(p, tensor, {}) for p in also)])
                        + " (the same tensor)"
                    )
                if (
                    fn is root and shown_root and _group(here_shown) in old_groups
                ):  # a history's item
                    shown, frozen = (
                        "the loss given",
                        True,
                    )  # the name it is rebuilt from is not given
                    detach = "detach the value it adds to (not given: pass **locals())"
                container, owner = _container(tensor, walk.holders)
                enters = any(f in in_loss for _, f in members)
                if here.endswith(".grad"):
                    kind, verdict = "a gradient kept with its graph (create_graph=True)", "reset"
                    reason = (
                        "no error: each backward() adds to it, through its graph (memory grows)"
                    )
                    fix = "optimizer.zero_grad() (set_to_none=True, the default) before each backward()"
                elif (
                    any(p in inner_state for p in paths) and inner
                ):  # the state of the fast weights' optimizer
                    kind, verdict = "an inner optimizer's state with a graph", "state"
                    reason = f"the state of the optimizer that steps the fast weights ({fast[0]})"
                    fix = f"with the fast weights: the fix of {fast[0]}, which names this state"
                    state_slots[(slot_of.get(here) or (None, None, None))[1:]] = here
                elif any(p in inner_state for p in paths) and len(several) > 1:
                    kind, verdict = "the state with a graph of an object with step()", "state"
                    reason = (  # either evidence (_inner_optimizer): true of each one named
                        f"{', '.join(several[:-1])} and {several[-1]} may each step the fast "
                        "weights (each holds a slot's tensor or feeds its value)"
                    )
                    fix = (
                        "each one that steps fast weights (an inner optimizer): make it anew at "
                        f"each outer step's start, with the fix of {fast[0]}; any other: {detach} at "
                        "each step's start"
                    )
                    state_slots[(slot_of.get(here) or (None, None, None))[1:]] = here
                elif any(p in inner_state for p in paths):  # no object given reaches the slots
                    kind, verdict = "the state with a graph of an object with step()", "state"
                    reason = (
                        "none of the objects given was shown to step the fast weights, so whether "
                        "it does cannot be told"
                    )
                    fix = (
                        f"if it steps the fast weights (the inner optimizer): the fix of {fast[0]}, which "
                        f"names this state; if not: {detach} at each step's start"
                    )
                    state_slots[(slot_of.get(here) or (None, None, None))[1:]] = here
                elif _higher_held(tensor, walk.holders) and (
                    id(tensor) in walk.module_params or "_fast_params" in here
                ):  # higher's own record of fast weights (fmodel's slots, its history of them)
                    made = [n for n, o in objects.items() if _higher_held(o, {})] or ["fmodel"]
                    both = ", ".join(made[:-1]) + " and " + made[-1] if len(made) > 1 else made[0]
                    kind, verdict = (
                        "fast weights kept by higher's own objects, with a graph",
                        "state",
                    )
                    reason = (
                        "higher's functional model keeps its fast weights and their history: "
                        "carried across outer steps"
                    )
                    fix = (
                        f"make {both} anew at each outer step's start (higher.innerloop_ctx inside "
                        "the outer loop); these are higher's, not yours to edit"
                    )
                    state_slots[(slot_of.get(here) or (None, None, None))[1:]] = here
                elif reset in ("zero_()", "fill_()", "fill_(a tensor)"):
                    kind = f"reset in place ({reset}), the old graph kept behind the new value"
                    verdict, reason = "reset", "zero_() or fill_() on a tensor keeps its history"
                    new = (  # the value written: fill_'s node keeps none, so v stands for it
                        (
                            "torch.zeros_like(...)",
                            f"torch.zeros_like({here})",
                            f"{here}.detach().zero_()",
                        )
                        if reset == "zero_()"
                        else (
                            "torch.full_like(..., v)",
                            f"{here}.detach().fill_(v)",
                            f"torch.full_like({here}, v)",
                        )
                        if reset
                        == "fill_()"  # full_like takes a number only: not for fill_(a tensor)
                        else ("x.detach().fill_(v)", f"{here}.detach().fill_(v)", None)
                    )
                    fix = (
                        f"reset it as a new tensor ({new[0]}) where it is made" if frozen
                        else f"reset it as a new tensor, {here} = {new[1]}" + (f", or {here} = {new[2]}" if new[2] else "")
                    ) + ("" if reset == "zero_()" else " (v: the value your fill_() writes)")  # fmt: skip
                elif reset and old(
                    fn
                ):  # the last write is an earlier step's (or made before the loop)
                    kind = f"written in place ({reset}) before this step"
                    verdict = "recompute"
                    reason = "a write made once, outside the step, keeps that write's graph"
                    fix = (
                        "make it and write into it inside the step (a new tensor each step); if each "
                        f"step writes into it: {detach} at each step's start, before writing"
                    )
                elif reset:
                    kind = f"written in place ({reset}) into a tensor that carries an earlier step's graph"
                    verdict = "state"
                    reason = "a write into a tensor keeps its history below the new values"
                    fix = f"{detach} at each step's start, before writing; a statistic: write under torch.no_grad()"
                    if reaches_trained.get(fn) and _rows_written(fn, kids, old, reaches_old):
                        verdict = (
                            "samples"  # a ring buffer: rows written, made without the old ones
                        )
                        reason = f"stored samples written in place (a ring buffer), not a state; their graph reaches {leaf_names} ({trains_what}), which still train"
                        cache = _CACHE.format(detach=detach, added="written")
                        fix = _BY_PURPOSE.format(
                            cache="" if frozen else cache, empty=_emptied(here_shown)
                        )
                elif (
                    root is not None
                    and not enters
                    and (
                        tensor.dim() == 0
                        or (count == 1 or _grows(container) and group.endswith("[*]"))
                        and old(fn)
                        and not (group in this_step and group != here or _bounded(container))
                    )
                ):  # a number, one tensor kept (prev = out), or a list's items, this loss does not use
                    if use_record and not old(fn) and _made_from_others(here, fn):
                        derived.append(
                            shown
                        )  # a loss term of this step (meta-learning's inner loss)
                        continue
                    held_then = record.get(place(here))
                    kept = held_then == _node_key(fn)  # the very node it held then: not rebuilt
                    grows = not kept and (
                        not old(fn)
                        or held_then in {_node_key(f) for f in _all_below(fn, kids) - {fn}}
                    )
                    if held_then is not None and not grows and not kept:
                        overwritten.append(shown)
                        continue
                    appended = _grows(container)  # losses.append(loss)
                    # "freed" only where it shows: a saved tensor below still alive means its graph is
                    # alive (no backward, or backward(retain_graph=True): validation outputs, no no_grad)
                    below = [f for _, m in members for f in _all_below(m, kids)]
                    saved_alive = any(alive.get(f) and not state.get(f) for f in below)
                    graph = (
                        "graph (alive: saved activations kept)"
                        if saved_alive
                        else "graph, freed by a backward pass (backward() or torch.autograd.grad),"
                        if any(state.get(f) for f in below)
                        else "graph"
                    )
                    kind = (
                        "a number kept across steps that this loss does not use"
                        if tensor.dim() == 0 and count == 1
                        else "a tensor kept from an earlier step that this loss does not use"
                        if count == 1
                        else f"{count} tensors of earlier steps kept in {group} that this loss does not use"
                    )
                    verdict = "detach"
                    op = type(fn).__name__
                    reason = (
                        "a running total or a log adds to itself: it keeps every earlier step's graph "
                        "alive (memory grows)"
                        if grows
                        else "kept in a list that grows by append; each item's graph is alive (saved "
                        "activations kept): memory grows"
                        if appended and saved_alive
                        else f"kept in a list that grows by append: no error; each item's {graph} only holds memory"
                        if appended
                        else f"kept, not rebuilt: no error; its {graph} only holds memory"
                        if old(fn) and (kept or tensor.dim() or "Add" not in op)
                        else "it keeps an earlier step's graph alive until it is replaced; memory grows "
                        "only if it adds to itself (a running total)"
                    )
                    # no error (bool(report) leaves it out); a sum first seen may be a running total
                    memory_only = (
                        old(fn)
                        and not grows
                        and not (appended and saved_alive)
                        and (kept or appended or tensor.dim() > 0 or "Add" not in op)
                    )
                    run = here_shown
                    running = (  # the fix by the op: a max or an average keeps a float, not a sum
                        f"keep it as a float: {run} = max({run}, loss.item())"
                        if re.match(r"(Maximum|Max|Amax)Backward", op)
                        else f"keep it as a float: {run} = min({run}, loss.item())"
                        if re.match(r"(Minimum|Min|Amin)Backward", op)
                        else f"keep it as a float: {run} = 0.9 * {run} + 0.1 * loss.item() (your factor)"
                        if op.startswith("LerpBackward")
                        else "add loss.item() (a float) to it, or loss.detach()"
                        if "Add" in op
                        else "keep it as a float (loss.item() in it), or use loss.detach() in it"
                    )
                    fix = (  # a loss backwarded with retain_graph=True must keep its graph: no no_grad
                        f"append {'loss.item() (a float) or loss.detach()' if tensor.dim() == 0 else 'x.detach() (x: what you append)'} "
                        "instead; values not trained through (validation outputs): compute them under "
                        "torch.no_grad()"
                        if appended and saved_alive
                        else running
                        if not memory_only
                        else "none needed; to free that memory, append loss.item() (a float) or "
                        "loss.detach() instead"
                        if appended and tensor.dim() == 0
                        else "none needed; to free that memory, append x.detach() instead (x: what "
                        "you append)"
                        if appended
                        else "none needed; to free that memory, store loss.detach() or loss.item() "
                        "there and call backward() on loss"
                        if tensor.dim() == 0
                        else f"none needed; to free that memory, keep a detached copy there ({detach})"
                    )
                elif count > 1 or group in this_step and group != here or _bounded(container):
                    what = (
                        f"{count} tensor{'s' if count > 1 else ''} of earlier steps kept in {group}"
                    )
                    kind = what + (", beside this step's" if group in this_step else "")
                    if (
                        use_record
                        and type(container) is tuple
                        and all(_passed_in_tuple(p, f) for p, f in members)
                    ):  # an LSTM's (h, c) stored back after backward(): one state, not samples
                        kind, verdict = (
                            "a state passed on from step to step, made from its earlier value",
                            "state",
                        )
                        reason = (
                            "the loop reads it and stores the value made from it back in it: the "
                            "carrier of a state"
                        )
                        fix = (
                            f"within one sequence, {detach} at each step's start; between "
                            "independent batches, reset it as a new tensor"
                        )
                    elif _grows(container) and _kind(_file_of(type(owner))) == "library":
                        verdict = "state"
                        reason = f"a history that {type(owner).__name__} adds to at every call"
                        fix = (
                            f"to start each step from the object's state before it, step a copy "
                            f"(copy.deepcopy) or reset it (a new {type(owner).__name__}, or its reset); "
                            "to keep the history, keep it detached"
                        )
                    elif (
                        enters
                        and group in {_group(p) for p in every(loss)}
                        and not any(
                            re.search(r"[.\[]", p) and _group(p) != group for p in every(loss)
                        )
                    ):  # the loss lives in it (no object holds it elsewhere): detached copies cut it
                        store = group[:-3] if group.endswith("[*]") else group
                        verdict = "state"
                        reason = "the loss itself is kept in it, made from an earlier item"
                        fix = (
                            f"detach the earlier item where the next is made from it ({store}[-1]"
                            ".detach() + ...), not the items stored: the loss is one"
                        )
                    else:
                        verdict = "detach"
                        reason = "samples kept for later (a history, pool, bank, queue)" + (
                            "; it holds more than one step's items" if group in this_step else ""
                        )
                        fix = "store detached copies (x.detach()) where they are added"
                        if reaches_trained.get(fn) and group not in {
                            _group(p) for p in every(loss)
                        }:
                            store = group[:-3] if group.endswith("[*]") else group
                            beside = _beside(container, owner, store, objects)
                            verdict = "samples"
                            reason += f"; their graph reaches {leaf_names} ({trains_what}), which still train"
                            fix = _BY_PURPOSE.format(
                                cache="",
                                empty=f"{_emptied(store)} and "
                                + (", ".join(beside) if beside else "any list filled beside it"),
                            )
                elif use_record and not old(fn) and _made_from_others(here, fn):
                    derived.append(shown)
                    derived_slots[(slot_of.get(here) or (None, None, None))[1:]] = here
                    continue
                elif fn is root and not old(fn) and not _rebuilt(fn):
                    continue  # the loss, from an old term no place given holds: not its own value
                elif (
                    not old(fn) and fn is not root and _rows_added(fn, kids, known_old, reaches_old)
                ):
                    kind = "its earlier value with new rows added (cat, stack, or pad and add)"
                    reason = "stored samples (a buffer), not a state"
                    verdict, fix = (
                        "detach",
                        "store detached copies (x.detach()) where they are added",
                    )
                    if reaches_trained.get(fn):  # whether or not this loss reads them now
                        cache = _CACHE.format(detach=detach, added="added")
                        verdict, fix = (
                            "samples",
                            _BY_PURPOSE.format(
                                cache="" if frozen else cache, empty=_emptied(here_shown)
                            ),
                        )
                        reason += (
                            f"; their graph reaches {leaf_names} ({trains_what}), which still train"
                        )
                elif fn is not root and id(tensor) in walk.module_params and tensor.grad_fn:
                    # a module's parameter slot holding a tensor with a graph: a differentiable
                    # optimizer (torchopt's MetaSGD, higher) or a functional step wrote it there
                    kind, verdict = "a module's parameter replaced by a value with a graph", "state"
                    reason = (
                        "a module's parameter slot holds a tensor with a graph: an inner "
                        "optimization's weights (fast weights), carried across outer steps"
                    )
                    fix = (
                        fast_fix()
                    )  # nothing in the graph tells the purposes apart: both, in order
                    state_slots[(slot_of.get(here) or (None, None, None))[1:]] = here
                elif in_call and not old(fn) and fn is not root and _summed_onto_itself(fn):
                    # only where the passes inside one call dated it: across steps, a sum onto its
                    # earlier value is as often a recurrent state (h = h + f(x, h)) or a statistic
                    kind, verdict = "a sum onto its own earlier value", "state"
                    reason = (
                        "kept across the calls of one step (your code, called at each of a library's "
                        "backward passes: mark_step() cannot mark them)"
                    )
                    fix = (
                        f"a sum of one call's terms: make it anew at each call (a local variable, or "
                        f"a new tensor in {here_shown} at the call's start); a total carried on: "
                        f"{detach} at each call's start"
                    )
                    state_slots[(slot_of.get(here) or (None, None, None))[1:]] = here
                elif (
                    not old(fn)
                    and fn is not root
                    and reaches_trained.get(fn)
                    and _trains_only_through_old(fn)
                ):
                    kind, verdict = (
                        "rebuilt this step from its value of an earlier step",
                        "recompute",
                    )
                    reason = (
                        f"its graph reaches {leaf_names} ({trains_what}) only through its earlier "
                        "value, so detaching it stops that training"
                    )
                    fix = (
                        f"compute it from {leaf_names} at each step (keep the start, apply the "
                        "step's factor, e.g. 0.99 ** k), not from its earlier value"
                    )
                elif not old(fn) and _starts_at_free_leaf(fn):
                    kind, verdict = "rebuilt this step from its value of an earlier step", "state"
                    holder = walk.holders.get(id(tensor))
                    owner = re.split(r"[.\[]", here, maxsplit=1)[0]
                    anew = (  # what can be done with what holds it: a module is built again and loaded
                        f"build {owner} again, then {owner}.load_state_dict(m.state_dict()), m the module it "
                        "copies; loading into the old one keeps its graph"
                        if isinstance(holder, torch.nn.Module)
                        else f"{here_shown} = p.clone(), p the parameter it copies; "
                        "p.detach().clone().requires_grad_() if p must not train through it"
                    )
                    reason = (
                        "its history starts at a leaf that requires grad and that no optimizer holds: "
                        "a state, or weights copied from a module (nothing in the graph tells which)"
                    )
                    fix = (
                        f"by what it is: a state carried between steps (a recurrent state): {detach} "
                        "at each step's start; weights moved functionally from a module (fast weights, "
                        f"a meta-model): make them anew from the module at each step's start ({anew}), "
                        "not detach (that breaks autograd.grad through them)"
                    )
                elif not old(fn):
                    kind, verdict = "rebuilt this step from its value of an earlier step", "state"
                    reason = "state carried from step to step"
                    logs = sorted(  # a growing list holding its earlier value: read back from it?
                        {
                            re.sub(r"\[\d+\]$", "", p)
                            for e in _old_reached(fn, kids, known_old, set())[0]
                            for p in by_node.get(e, ())
                            if p != here
                            and re.search(r"\[\d+\]$", p)
                            and _grows(_container(tensor_at[p], walk.holders)[0])
                        }
                    )
                    cut = f"{detach} at each step's or window's start"
                    stored = (  # h = f(states[-1]); states.append(h) looks the same
                        f"{logs[0]}.append({here_shown}.detach()) where it is stored (the loop may "
                        f"read it back from {logs[0]}: the graph cannot tell)"
                        if logs and fn is not root
                        else ""
                    )
                    at_start = cut + (f", and {stored}" if stored else "")
                    fix = (
                        f"within one sequence, {at_start}; between "
                        "independent batches, reset it as a new tensor; a statistic: update it under "
                        "torch.no_grad()"
                    )
                    if fn is not root and (start := _starts_from_learned(fn, leaves)):
                        fix = _learned_start(fn, start, cut, stored)
                    if not held and _leaves_below(fn, kids, lambda t: t.requires_grad, 1):
                        fix += (  # every parameter looks free without one: no two-purpose test
                            " (weights moved functionally from a module instead? pass your optimizer, "
                            "opt=..., for that branch)"
                        )
                    holder = walk.holders.get(id(tensor))
                    if (
                        reaches_trained.get(fn)
                        and fn is not root
                        and tensor.dim()
                        and holder is not None
                        and not isinstance(holder, (torch.nn.Module, *_CONTAINERS))
                    ):  # a record object's (a camera's pose), not a total, a layer's or a sequence's state
                        fix += (
                            "; if each visit should apply a trained change to a fixed start (a pose, a "
                            "weight), keep the start and compute the value from it each step"
                        )
                    state_slots[(slot_of.get(here) or (None, None, None))[1:]] = here
                elif use_record and old(fn) and _passed_on(here, fn):
                    kind, verdict = (
                        "a state passed on from step to step, made from its earlier value",
                        "state",
                    )
                    reason = (
                        "the loop reads it and stores the value made from it back in it (or in the name "
                        "it was made under): the carrier of a state"
                    )
                    cut = f"{detach} at each step's start (this name: the one the loop reads)"
                    fix = f"within one sequence, {cut}; between independent batches, reset it as a new tensor"
                    learned = lambda t: trains(t) or not held and t.requires_grad and id(t) in names  # noqa: E731
                    if start := [  # below its earlier values only: a learned h0
                        v
                        for v in _leaves_below(fn, kids, learned, _ALL)
                        if id(v) not in trained_now
                    ]:
                        fix = _learned_start(fn, start, cut, "")
                elif old(fn) and (start := _applied_again(fn)) is not None:
                    kind, verdict = old_kind(fn), "state"
                    reason = (
                        "this step applies the op that made it, with the same weights, to it again: "
                        "state carried from step to step"
                    )
                    cut = f"{detach} at each step's start"
                    fix = (
                        f"within one sequence, {cut}; between independent batches, reset it as a new tensor"
                        if not start
                        else _learned_start(fn, start, cut, "")
                    )
                    state_slots[(slot_of.get(here) or (None, None, None))[1:]] = here
                elif reaches_trained.get(fn):
                    kind, verdict = old_kind(fn), "recompute"
                    verb = "train" if len(leaves) > 1 else "trains"
                    reason = f"its graph reaches {leaf_names} ({trains_what}), which still {verb}"
                    fix = f"compute it inside the step; a constant (a target, a teacher's output): {detach}"
                    cache = _library_cache(here, tensor, walk.holders)
                    if not cache and all(id(v) in trained_now for v in leaves):
                        # a term to follow the weights (the common case: errors-outside-loop) or a
                        # record the loss compares against (PPO's old log-probs): only you know
                        verdict = "recompute or record"  # PPO's reader takes the second: by purpose
                        reason += ", and this step's own terms train them too; it cannot tell what it is for"
                        fix = (
                            "should it follow the weights as they train (features, an embedding, "
                            "anything computed from the model)? compute it inside the step; is it a "
                            "record of earlier values the loss compares against (PPO's old log-probs, "
                            f"a target, an EMA teacher)? {detach}"
                        )
                    if cache:
                        store = re.fullmatch(r"(.+?)(\[[^\]]+\])?", here)[1]
                        reason += "; a cache hands it back instead of computing it anew"
                        fix = (
                            "turn the cache off (cache_size=0, or its option) or "
                            f"{_emptied(store)} at each step's start"
                        )
                elif mine := _leaves_below(
                    fn, kids, lambda t: id(t) in walk.module_params and t.requires_grad, _ALL
                ):
                    kind, verdict = old_kind(fn), "recompute"
                    mine_names = _named(mine, names)
                    if walk.opt_params:
                        verdict = "detach"
                        reason = f"its graph reaches {mine_names}, a parameter of the modules given that no optimizer given or found holds"
                        fix = f"{detach}; if something else trains it (a framework's optimizer), compute it inside the step"
                    else:
                        verdict = "recompute or detach"
                        reason = (
                            f"its graph reaches {mine_names}, a parameter of the modules given; no optimizer "
                            "was given or found, so whether it still trains cannot be told"
                        )
                        fix = f"if it trains, compute it inside the step; if not (frozen, pretrained): {detach}"
                elif needs := _leaves_below(fn, kids, lambda t: t.requires_grad, _ALL):
                    kind, verdict = old_kind(fn), "detach"
                    needing = _named(needs, names)
                    unchanged = not any(v._version for v in needs)
                    if held:
                        reason = (
                            f"its graph reaches {needing}, which requires grad but which none of the objects given "
                            "trains: a constant for this step, unless something else trains it (then recompute it)"
                        )
                        fix = f"{detach}, or compute it under torch.no_grad(); {_TRAIN_IT}"
                    elif (
                        unchanged
                        and updated
                        and (weights := [v for v in needs if isinstance(v, torch.nn.Parameter)])
                    ):  # a layer's weight nothing updates (a framework's optimizer: not torch's)
                        verdict = "recompute or detach"  # made to train: the recompute first
                        moved = ", ".join(names[id(v)] for v in updated[:2])
                        one = len(weights) == 1
                        reason = (
                            f"its graph reaches {_named(weights, names)}, {'a weight' if one else 'weights'} "
                            f"(nn.Parameter) that no torch optimizer found holds and nothing has changed since "
                            f"made, while {moved} were updated: {'it does' if one else 'they do'} not train now"
                        )
                        fix = (
                            "if it should train: compute it inside the step, in a layer of the model the "
                            f"optimizer trains (its forward or call); a constant: {detach}"
                        )
                    elif unchanged and updated:
                        moved = ", ".join(names[id(v)] for v in updated[:2])
                        reason = (
                            f"its graph reaches {needing}, which require grad, but no optimizer holds them and "
                            f"nothing has changed them since they were made, while {moved} were updated: a "
                            "constant (a target, a label, data), unless something else trains them"
                        )
                        fix = f"{detach}, or compute it under torch.no_grad(); {_TRAIN_IT}"
                    else:
                        verdict = "recompute or detach"
                        reason = (
                            f"its graph reaches {needing}, which {'require' if len(needs) > 1 else 'requires'} "
                            "grad; no optimizer was given or found, so whether it still trains cannot be told"
                            + (
                                ""
                                if unchanged
                                else " (changed in place since made: a hand-written update does that)"
                            )
                        )
                        fix = f"if they train, compute it inside the step; a constant (a target, a label, data): {detach}"
                else:
                    kind, verdict = old_kind(fn), "detach"
                    reason = (
                        "a constant for this step: its graph reaches no leaf that requires grad"
                    )
                    fix = f"{detach}, or compute it under torch.no_grad()"
                carriers.append(
                    Carrier(
                        shown,
                        kind,
                        type(fn).__name__,
                        verdict,
                        reason,
                        fix,
                        count,
                        enters,
                        memory_only,
                    )
                )
                reach_of[shown] = leaves
                carrier_slots.append({(slot_of.get(p) or (None, None, None))[1:] for p in paths})
            except Exception as error:  # noqa: BLE001 - a rule of this tool failed: say so, go on
                paths = [p for p, _ in members]
                carriers.append(
                    Carrier(
                        ", ".join(paths[:3]) + (" ..." if len(paths) > 3 else ""),
                        "a tensor with an earlier step's graph",
                        type(members[0][1]).__name__,
                        "unknown",
                        f"this tool failed on it ({type(error).__name__}: {error}); please report it",
                        "none (this place was not classified)",
                        len(paths),
                    )
                )
                carrier_slots.append(set())
        if carriers or not derived:
            break  # else: made "from the carried values above" with none above: state, as unrecorded
    for i, carrier in enumerate(carriers):  # other objects' copy of an attribute found to be state
        like = [state_slots[k] for k in carrier_slots[i] if k in state_slots and _named_slot(k)]
        if carrier.verdict in ("detach", "samples") and "kept in" in carrier.kind and like:
            carriers[i] = dataclasses.replace(
                carrier, verdict="state",
                reason=f"the same attribute of other objects of the kind whose {like[0]} is rebuilt "
                "from its own earlier value: not samples; each fails when its object is used again",
                fix=f"as for {like[0]}: at each step's start detach it, or keep a fixed start and "
                "compute it from that start",
            )  # fmt: skip
        made = [derived_slots[k] for k in carrier_slots[i] if k in derived_slots and _named_slot(k)]
        if (
            carrier.verdict in ("detach", "samples")
            and "kept in" in carrier.kind
            and made
            and state_slots
        ):
            carriers[i] = dataclasses.replace(
                carrier, verdict="state",
                reason=f"the same attribute of other objects of the kind whose {made[0]} is made "
                "at each visit from the state above: not samples",
                fix="fix the state above; then these are made anew at each visit",
            )  # fmt: skip
    carriers.sort(key=lambda c: not c.enters)  # those this loss uses first
    lines_of = collections.defaultdict(list)  # places printed on one line: one reach, one fix
    for carrier in carriers:
        lines_of[_alike(carrier)].append(carrier)
    for group in lines_of.values():
        if len(group) > 1:
            reach = list({id(v): v for c in group for v in reach_of.get(c.path, ())}.values())
            text = _one_line(group, reach, names)
            carriers[:] = [
                dataclasses.replace(c, alike=text) if any(c is g for g in group) else c
                for c in carriers
            ]
    if mark is not None:  # what each place holds now, for the calls of later steps
        for t in walk.tensors:  # by (object, attribute), or by name for a name given: a name
            if t.grad_fn:  # rebound to another object (a loop variable) mixes no two objects
                holder = walk.holders.get(id(t))
                try:
                    ref = None if holder is None else weakref.ref(holder)
                except TypeError:  # a list, a dict: no weak reference; its id is kept alone
                    ref = None
                held_now = (_node_key(t.grad_fn), ref)
                _RECORD.setdefault(mark, {})[place(names[id(t)])] = held_now
                if type(holder) is tuple:  # a new tuple each step: by its path too
                    _RECORD[mark][("tuple", names[id(t)])] = held_now
        for stale in sorted(_RECORD)[:-2]:
            del _RECORD[stale]
    if overwritten:
        notes.append(
            "replaced at each step, not added to (no error, no growth; each holds one earlier "
            f"step's graph until replaced): {', '.join(overwritten[:4])}"
        )
    if derived:
        notes.append(
            "made in this step from the carried values above (an output, a loss term: no fix of "
            f"their own): {', '.join(derived[:4])}" + (" ..." if len(derived) > 4 else "")
        )

    freed, culprits = [], []
    for fn in order:
        if fn not in known_old:
            continue
        filename, lineno, line, caller = _where(fn)
        via = []
        if fn in entries and lineno is not None:
            own = f"line {lineno}: {line}" if _kind(filename) == "yours" else caller
            step = parent[fn]
            while step is not None:  # from the culprit back up to the loss: your lines only
                text = _yours(step)
                if text is not None and text != own and text not in via:
                    via.append(text)
                step = parent[step]
        how = "freed" if state[fn] else "before mark"
        found = FreedNode(
            type(fn).__name__, state[fn] or (), filename, lineno, line, tuple(reversed(via)),
            tuple(by_node.get(fn, ())), caller, how,
        )  # fmt: skip
        freed.append(found)
        if fn in entries:
            culprits.append(found)
    if in_except and mark is None:
        notes.append(
            "called in the except of the failing backward() without mark_step(): that pass freed "
            "this step's nodes too, so they look old here (the places and lines above may be this "
            "step's); call mark_step() at the top of each step, or call this before backward()"
        )
    if twice and in_except and known_old:
        twice.clear()  # freed by the failing pass itself, which then met the old part
    again = ""
    if twice:  # the loss itself: above the part run before lies no leaf and no op but a scaling
        run, top, todo = set(twice), set(), [root]
        while todo:
            fn = todo.pop()
            if fn not in run and fn not in top:
                top.add(fn)
                todo += kids[fn]
        # above the part run before: a leaf or an op that saved a tensor (so did not run) but a
        # scaling: another loss; nothing but positive scalings: the same loss; ops that save
        # nothing (a mean: run or not, nothing shows) or a scaling by a negative or unknown sign
        # (-d_loss): either (a GAN's -D(fake).mean() after the critic's)
        names = [type(fn).__name__ for fn in top]
        again = "part" if any(
            n == "AccumulateGrad" or (alive[fn] and n not in _SCALING) for fn, n in zip(top, names)
        ) else "loss" if all(_scales_up(fn) for fn in top) else "either"  # fmt: skip
        if freed or carriers:  # the headline is the earlier step's: this one in a note
            notes.append(
                _AGAIN[again].format(n=len(twice), nodes=len(order), other=_OTHER, by=_BY)
                + f"; {_WHO_CALLS}"
            )
    errors = freed or any(not c.memory_only for c in carriers)
    if errors and not any(f.lineno for f in freed) and root is not None:
        notes.append(
            "for lines, turn on torch.autograd.set_detect_anomaly(True) before the loop (slow)"
        )
    if not freed and not carriers and mark is None:
        notes.append(
            "with retain_graph=True nothing is freed: call mark_step() at the top of each step so "
            "that nodes made before it count as old"
        )
    if (
        torch.is_anomaly_enabled()
        and freed
        and not any("traceback_" in (getattr(f, "metadata", None) or {}) for f in known_old)
    ):
        notes.append(  # a private key: made before anomaly mode was on, or torch moved it
            'anomaly mode is on, but no old node holds its stack (Node.metadata["traceback_"]): '
            "turn it on before the loop; if it was, this torch keeps the stack elsewhere: no lines"
        )
    notes += _GAPS
    changed = tuple(  # nodes whose saved value was changed in place (trial 17)
        type(fn).__name__ for fn in order if fn not in known_old and _changed_in_place(fn)
    )
    error = sys.exc_info()[1]  # in the except of a backward that raised the in-place error?
    inplace = str(error) if isinstance(error, RuntimeError) and _CHANGED in str(error) else ""
    if changed and mark is None and not inplace:  # this step's op, or a step after a kept graph
        notes[:] = [n for n in notes if not n.startswith("with retain_graph=True nothing")]
        notes.append(  # (review 48 F3)
            f"{', '.join(dict.fromkeys(changed))} saved a value that was changed in place since: "
            "backward() will raise 'modified by an inplace operation'. Without mark_step() it "
            "cannot be told whether an in-place op of this step or an optimizer's step after an "
            "earlier step's retain_graph=True backward changed it: call mark_step() at the top of "
            "each step"
        )
    if mark is None:
        changed = ()
    return Report(
        len(order), tuple(freed), tuple(culprits), tuple(carriers), tuple(holding),
        tuple(objects), walk.visited, bool(walk.unfinished), tuple(notes),
        tuple(type(fn).__name__ for fn in twice), walk.unfinished, tuple(walk.unread), again,
        changed, inplace, mark is not None,
    )  # fmt: skip
