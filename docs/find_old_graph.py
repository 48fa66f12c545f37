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
  graph reaches weights that still train), **detach** it (a constant for the step, or samples
  kept for later), or treat it as **state** (detach it at each step's or window's start; reset
  it, as a new tensor, between independent batches). It cannot know what you mean the value to
  be: it states the rule and its best guess, with the reason;
* tensors reset in place (``zero_()``, ``fill_()``, ``copy_()``): the old graph stays behind the
  new value;
* the nodes through which this loss enters an earlier step's graph, with the line that made
  each when the earlier step ran under ``torch.autograd.set_detect_anomaly(True)``.

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
and in the ``except`` of a failing pass, the nodes that pass freed look old as well.

How it looks, and where it stops:

* It reads ``__dict__``, ``__slots__``, containers (list, tuple, dict, set, deque, namedtuple),
  dataclasses, closures (cells, ``__defaults__``, ``__kwdefaults__``), bound methods'
  ``__self__``, ``functools.partial``, modules' parameters, buffers and submodules, class
  attributes of classes outside torch and the standard library, and a leaf's ``.grad``. It never
  reads a property or calls your code (a property or ``lazy_property`` not yet computed is not
  seen), and it changes nothing. Module objects (``import x``) are searched only when passed by
  name. Generators, frames, weak references and NumPy arrays are not searched.
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
import functools
import re
import sys
import sysconfig
import types
import warnings
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
# Saved tensors show their unpack hook and data from torch 2.10 (pytorch/pytorch#164358; 2.9 not):
# without them, looking at a hooked saved tensor means unpacking it.
UNPACKS_TO_LOOK = not hasattr(torch._C._autograd.SavedTensor, "unpack_hook")
_ATOMS = (str, bytes, int, float, complex, bool, type(None), range, torch.dtype, torch.device)
_RESETS = {"ZeroBackward0", "FillBackward0", "FillBackward1", "FillBackward2"}  # zero_(), fill_()
_WRITES = {
    "CopyBackwards",
    "CopySlices",
    "IndexPutBackward0",
    "MaskedFillBackward0",
}  # copy_(), x[i] = v
_MARK: int | None = None  # the sequence number autograd gives the first node of this step


def mark_step() -> None:
    """Call at the top of each training step: nodes made before this call count as old."""
    global _MARK
    _MARK = torch.autograd._get_sequence_nr()  # the next node's number, read, nothing made


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
            notebook = self.filename.startswith("<") or "ipykernel_" in self.filename
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
    verdict: str  # "recompute", "detach", "state" or "reset"
    reason: str
    fix: str
    count: int = 1  # tensors the path stands for (a range of list items)

    def __str__(self) -> str:
        return f"{self.path}: {self.kind} ({self.node})\n    -> {self.verdict}: {self.reason}. Fix: {self.fix}"


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

    def __bool__(self) -> bool:
        return bool(self.freed or self.carriers or self.twice)

    def __str__(self) -> str:
        lines = []
        if self.carriers:
            lines.append("Carrying an earlier step's graph:")
            alike = collections.defaultdict(
                list
            )  # one line for places of one kind (a cache's layers)
            for carrier in self.carriers:
                alike[carrier.kind, carrier.node, carrier.verdict].append(carrier)
            for group in alike.values():
                paths = [c.path for c in group]
                if len(paths) > 3:
                    paths = [*paths[:2], f"{len(paths) - 2} more places like them"]
                lines.append(f"  {', '.join(paths)}: {str(group[0]).partition(': ')[2]}")
        if self.culprits:
            lines.append(
                f"This loss enters an earlier step's graph ({len(self.freed)} of its "
                f"{self.nodes} nodes are old) at:"
            )
            counts = collections.Counter(str(c) for c in self.culprits)
            lines += [
                f"  {text}" + (f"\n      ({n} such nodes)" if n > 1 else "")
                for text, n in counts.items()
            ]
            if not any(c.held_by for c in self.culprits) and not self.carriers:
                lines.append(
                    "  held by none of the objects given: pass the ones your loop keeps, or **locals()"
                    if self.searched
                    else "  pass the objects your loop keeps (model=model, or **globals()) to name the place"
                )
        if not lines:
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
                + (f"; stopped at BUDGET={BUDGET}, not all searched" if self.budget_reached else "")
            )
        lines += [f"Note: {note}" for note in self.notes]
        return "\n".join(lines)


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
    directly, so there a checkpointed forward runs again.
    """
    if isinstance(fn, torch.autograd.function.BackwardCFunction):  # a custom autograd.Function
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
    freed, alive = [], False
    for attr in attrs:
        raw = getattr(fn, attr)
        items = [
            item for item in (raw if isinstance(raw, (list, tuple)) else [raw]) if item is not None
        ]
        if not UNPACKS_TO_LOOK and any(
            i.unpack_hook is not None or i.data is not None for i in items
        ):
            alive = True  # a hooked tensor is not unpacked here
            continue
        name = attr.removeprefix("_raw_saved_")
        try:
            value = getattr(fn, f"_saved_{name}")  # raises if freed (runs a hook where hidden)
        except RuntimeError as error:  # the error backward() would raise, raised early
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
    """``obj.__dict__`` when it is the ordinary one (a property named ``__dict__`` is not read)."""
    descriptor = _static(obj, "__dict__")
    if isinstance(descriptor, types.GetSetDescriptorType):
        try:
            found = descriptor.__get__(obj)
        except (AttributeError, TypeError):
            return None
        return found if isinstance(found, dict) else None
    return None


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
    """(suffix, child) pairs: what ``obj`` refers to, read without running its code."""
    if isinstance(obj, torch.Tensor):
        if obj.is_leaf and obj.grad is not None:  # a gradient kept with create_graph=True
            yield ".grad", obj.grad
        return
    if isinstance(obj, _ATOMS):
        return
    if isinstance(obj, (types.GeneratorType, types.CoroutineType, types.FrameType)):
        return
    if isinstance(obj, types.ModuleType):
        file = getattr(obj, "__file__", None)  # none: a built-in module such as sys
        if top and file and _kind(file) == "yours":
            for name, value in vars(obj).items():
                if not name.startswith("__") and not isinstance(value, types.ModuleType):
                    yield f".{name}", value
        return
    if isinstance(obj, torch.nn.Module):
        for slot in ("_parameters", "_buffers", "_modules"):
            for name, value in vars(obj).get(slot, {}).items():
                if value is not None:
                    yield f".{name}", value
        for name, value in vars(obj).items():
            if name not in ("_parameters", "_buffers", "_modules"):
                yield f".{name}", value
        return
    if isinstance(obj, tuple) and hasattr(type(obj), "_fields"):  # a namedtuple
        yield from ((f".{n}", v) for n, v in zip(type(obj)._fields, obj))
        return
    if isinstance(obj, (list, tuple, collections.deque)):
        yield from ((f"[{i}]", v) for i, v in enumerate(obj))
        return
    if isinstance(obj, (set, frozenset)):
        yield from ((f"{{item {i}}}", v) for i, v in enumerate(obj))
        return
    if isinstance(obj, dict):
        for key, value in obj.items():
            if isinstance(key, torch.Tensor):
                yield f"[{_key(key, names)}](key)", key
            yield f"[{_key(key, names)}]", value
        return
    if isinstance(obj, types.CellType):
        try:
            yield "", obj.cell_contents
        except ValueError:  # an empty cell
            pass
        return
    if isinstance(obj, types.FunctionType):
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
    if isinstance(obj, types.MethodType):
        yield ".__self__", obj.__self__
        yield ".__func__", obj.__func__
        return
    if isinstance(obj, functools.partial):
        yield ".func", obj.func
        yield from ((f".args[{i}]", v) for i, v in enumerate(obj.args))
        yield from ((f".keywords[{k!r}]", v) for k, v in obj.keywords.items())
        return
    if isinstance(obj, (staticmethod, classmethod)):
        yield "", obj.__func__
        return
    if isinstance(obj, (property, types.BuiltinFunctionType, types.WrapperDescriptorType)):
        return  # a property is code: not read
    if isinstance(obj, type):
        if _user_class(obj):
            for name, value in vars(obj).items():
                if not name.startswith("__"):
                    yield f".{name}", value
        return
    if type(obj).__module__ == "numpy" or isinstance(obj, torch.Size):
        return
    if _user_class(type(obj)):  # class attributes the instance shares (history = [] in a class)
        for klass in type(obj).__mro__:
            if klass is not object and _user_class(klass):
                yield f"={klass.__name__}", klass  # an absolute path: Sampler.history
    own = _own_dict(obj)
    if own is not None:
        yield from ((f".{n}", v) for n, v in own.items())
    for klass in type(obj).__mro__:
        slots = vars(klass).get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            descriptor = vars(klass).get(name)
            if isinstance(descriptor, types.MemberDescriptorType):
                try:
                    yield f".{name}", descriptor.__get__(obj)
                except AttributeError:  # an unset slot
                    pass


def _walk(objects: dict[str, object], budget: int):
    """Every tensor reachable from ``objects``: ({id: path}, [tensors], visited, budget_reached,
    params of optimizers found, params of modules found)."""
    names: dict[int, str] = {}
    tensors: list[torch.Tensor] = []
    pinned, seen = [], set()
    opt_params, module_params = set(), set()
    queue = collections.deque((name, value, True) for name, value in objects.items())
    visited = 0
    while queue:
        path, obj, top = queue.popleft()
        if id(obj) in seen:
            continue
        visited += 1
        if visited > budget:
            return names, tensors, visited - 1, True, opt_params, module_params
        seen.add(id(obj))
        pinned.append(obj)
        if isinstance(obj, torch.Tensor):
            names[id(obj)] = path
            tensors.append(obj)
        elif isinstance(obj, torch.optim.Optimizer):
            for group in obj.param_groups:
                opt_params.update(id(p) for p in group["params"] if p.requires_grad)
        elif isinstance(obj, torch.nn.Module):
            module_params.update(id(p) for p in obj._parameters.values() if p is not None)
        for suffix, child in _children(obj, names, top):
            if isinstance(child, _ATOMS):  # a number, a string: counted, nothing inside
                visited += 1
                if visited > budget:
                    return names, tensors, visited - 1, True, opt_params, module_params
            elif id(child) not in seen:
                where = suffix[1:] if suffix.startswith("=") else f"{path}{suffix}"
                queue.append((where, child, False))
    return names, tensors, visited, False, opt_params, module_params


# ---- the graph walk ----------------------------------------------------------------------------


def _old_state(fn: object, mark: int | None, twice: list) -> tuple[tuple[str, ...] | None, bool]:
    """The freed saved tensors of ``fn`` (old), ``()`` if made before the mark, ``None`` if new;
    and whether a saved tensor of it is alive (or freed by this step's own earlier backward).
    A node made after the mark whose tensors are freed goes to ``twice``: this step's own graph,
    run by an earlier backward in this step."""
    names, alive = _saved_status(fn)
    before = mark is not None and type(fn).__name__ != "AccumulateGrad" and fn._sequence_nr() < mark
    if names and (mark is None or before):
        return names, alive
    if names:
        twice.append(type(fn).__name__)
    return (() if before else None), alive or names != ()


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


def _reset_below(fn: object, kids: dict, old) -> str | None:
    """The name of a reset node (``zero_()``, ``fill_()``, ``copy_()``) at or below ``fn``, among
    new nodes, whose input is old: a tensor reset in place keeps its history behind the value."""
    seen, stack = {fn}, [fn]
    while stack:
        node = stack.pop()
        children = kids[node]
        name = type(node).__name__
        if name in _RESETS | _WRITES and any(old(c) for c in children):
            return {"ZeroBackward0": "zero_()", "CopyBackwards": "copy_()"}.get(
                name, "fill_()" if name in _RESETS else "x[i] = v"
            )
        for child in children:
            if child not in seen and (not old(child) or type(child).__name__ in _RESETS | _WRITES):
                seen.add(child)
                stack.append(child)
    return None


def _collapse(paths: list[str]) -> tuple[str, int]:
    """``["h[0]", "h[1]", "h[2]"]`` -> ``("h[0..2]", 3)``."""
    if len(paths) == 1:
        return paths[0], 1
    match = [re.fullmatch(r"(.*)\[(\d+)\]", p) for p in paths]
    if all(match) and len({m[1] for m in match}) == 1:
        numbers = sorted(int(m[2]) for m in match)
        return f"{match[0][1]}[{numbers[0]}..{numbers[-1]}]", len(paths)
    return ", ".join(paths), len(paths)


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
    objects = {  # not __builtins__ and the like from **globals()
        name: value
        for name, value in objects.items()
        if not (len(name) > 4 and name.startswith("__") and name.endswith("__"))
    }
    names, tensors, visited, budget_reached, opt_params, module_params = _walk(objects, BUDGET)
    if opt_params:
        trains = lambda t: id(t) in opt_params  # noqa: E731
        trains_what = "an optimizer's parameter", "optimizer parameters"
    elif module_params:
        trains = lambda t: id(t) in module_params and t.requires_grad  # noqa: E731
        trains_what = "a parameter of the modules given", "parameters of the modules given"
    else:
        trains = lambda t: t.requires_grad  # noqa: E731
        trains_what = "a leaf that requires grad", "leaves that require grad"
    mark, twice = _MARK, []
    root = None if loss is None else loss.grad_fn
    by_node: dict = collections.defaultdict(list)  # grad_fn -> places that hold its tensor
    for t in tensors:
        if t.grad_fn is not None:
            by_node[t.grad_fn].append(names[id(t)])

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
                state[fn], alive[fn] = _old_state(fn, mark, twice)
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
    # a node that saved nothing has no freed tensor to show its age: it is new if a new node
    # with saved tensors lies below it (it was made after that one), old if made before a known
    # old node, or if only old nodes lie below it
    known_old = {fn for fn, names_ in state.items() if names_ is not None}
    newest_old = max(
        (f._sequence_nr() for f in known_old if type(f).__name__ != "AccumulateGrad"), default=-1
    )
    new_below = _below(list(state), kids, lambda f: alive[f] and f not in known_old, stop=known_old)
    reaches_old = _below(list(state), kids, lambda f: f in known_old)

    def old(fn) -> bool:  # for the places that hold a tensor: was that tensor made earlier?
        if fn in known_old:
            return True
        if not reaches_old.get(fn) or type(fn).__name__ == "AccumulateGrad":
            return False
        return fn._sequence_nr() < newest_old or not new_below.get(fn)

    fresh, todo = set(), [root] if root is not None and root not in known_old else []
    while todo:  # the part of the loss's graph reached without passing through an old node
        fn = todo.pop()
        fresh.add(fn)
        todo.extend(c for c in kids[fn] if c not in known_old and c not in fresh)
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
        if state.get(fn):
            return "its graph was freed by an earlier backward()"
        if state.get(fn) == ():
            return "made before mark_step()"
        return "made in an earlier step (what its graph saved was freed)"

    carriers, holding = [], []
    groups: dict = collections.defaultdict(list)  # old tensors kept side by side: a history
    for fn, paths in by_node.items():
        if fn is root and not any(old(c) for c in kids[fn]):
            continue  # the loss itself, unless it adds to an earlier value (a running total)
        if not reaches_old.get(fn):
            holding += paths
            continue
        for path in paths:
            container = re.fullmatch(r"(.*)\[(\d+)\]", path)
            groups[container[1] if container and old(fn) else path].append((path, fn))
    for group, members in groups.items():
        paths = [p for p, _ in members]
        fn = members[0][1]
        shown, count = _collapse(paths)
        reset = _reset_below(fn, kids, old)
        leaves = _leaves_below(fn, kids, trains)
        leaf_names = ", ".join(names.get(id(v), f"a leaf {tuple(v.shape)}") for v in leaves)
        here = paths[0]
        if here.endswith(".grad"):
            kind, verdict = "a gradient kept with its graph (backward(create_graph=True))", "reset"
            reason = "the next backward() adds to it, through its graph"
            fix = "optimizer.zero_grad() (set_to_none=True, the default) before each backward()"
        elif reset in ("zero_()", "fill_()"):
            kind, verdict = (
                f"reset in place ({reset}), the old graph kept behind the new value",
                "reset",
            )
            reason = "zero_() or fill_() on a tensor with history keeps that history"
            fix = (
                f"reset it as a new tensor, {here} = torch.zeros_like({here}), or detach it "
                f"first: {here} = {here}.detach().zero_()"
            )
        elif reset:
            kind, verdict = (
                f"written in place ({reset}) into a tensor that carries an earlier step's graph",
                "state",
            )
            reason = (
                "a write into a tensor with history keeps that history below the new values; "
                "state (a cache, a buffer) carried from step to step"
            )
            fix = (
                f"{here} = {here}.detach() at the start of each step, before writing into it; "
                "a statistic: update it under torch.no_grad()"
            )
        elif not old(fn):
            kind, verdict = "rebuilt this step from its value of an earlier step", "state"
            reason = "state carried from step to step"
            fix = (
                f"within one sequence, {here} = {here}.detach() at the start of each step or "
                "window; between independent batches, reset it as a new tensor; a statistic "
                "(a running mean): update it under torch.no_grad()"
            )
        elif group != here and count > 1:
            kind = f"{count} tensors of earlier steps kept in {group}"
            verdict = "detach"
            reason = "samples kept for later (a history, pool, queue, replay buffer)"
            fix = f"store detached copies: {group}.append(x.detach())"
            if reaches_trained.get(fn):
                reason += f"; if they are values built from {leaf_names}, which still trains, recompute them instead"
        elif reaches_trained.get(fn):
            kind, verdict = old_kind(fn), "recompute"
            what, verb = (
                (trains_what[1], "train") if len(leaves) > 1 else (trains_what[0], "trains")
            )
            reason = (
                f"its graph reaches {leaf_names} ({what}), which still {verb}; detached, it "
                "would not train them through this value"
            )
            fix = "compute it inside the step; if it is meant as a constant (a target, a teacher's output, a sample kept for later), detach it"
        else:
            kind, verdict = old_kind(fn), "detach"
            reason = f"a constant for this step: its graph reaches no {trains_what[0]}"
            fix = f"{here} = {here}.detach(), or compute it under torch.no_grad()"
        carriers.append(Carrier(shown, kind, type(fn).__name__, verdict, reason, fix, count))

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
    error = sys.exc_info()[1]  # called in the except of the failing backward()?
    in_except = isinstance(error, RuntimeError) and _FREED in str(error)
    if in_except and mark is None:
        notes.append(
            "called in the except of the failing backward() without mark_step(): that pass freed "
            "this step's nodes too, so they look old here (the places and lines above may be this "
            "step's); call mark_step() at the top of each step, or call this before backward()"
        )
    if twice and in_except and known_old:
        twice.clear()  # freed by the failing pass itself, which then met the old part
    if twice:
        notes.append(
            f"{len(twice)} nodes made in this step ({', '.join(sorted(set(twice))[:3])}) were freed "
            "by an earlier backward() in this step: the same graph is run twice (sum the losses and "
            "call backward() once, or retain_graph=True on the earlier call)"
        )
    if (freed or carriers) and not any(f.lineno for f in freed) and root is not None:
        notes.append(
            "for lines, turn on torch.autograd.set_detect_anomaly(True) before the loop (slow)"
        )
    if not freed and not carriers and mark is None:
        notes.append(
            "with retain_graph=True nothing is freed: call mark_step() at the top of each step so "
            "that nodes made before it count as old"
        )
    return Report(
        len(order), tuple(freed), tuple(culprits), tuple(carriers), tuple(holding),
        tuple(objects), visited, budget_reached, tuple(notes), tuple(twice),
    )  # fmt: skip
