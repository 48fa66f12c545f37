"""Why is this ``.grad`` None (or zero)? Name the rule for each tensor you expected a gradient for.

Autograd writes a leaf's ``.grad`` in one place only: the leaf's ``AccumulateGrad`` node, when a
``backward()`` pass reaches it with a gradient (a custom ``Function`` may send ``None`` instead).
A non-leaf gets one after ``retain_grad()`` (``backward(inputs=[h])`` retains ``h`` for you), from
``backward()`` or ``torch.autograd.grad``, which writes no leaf's ``.grad``. Outside autograd, code
may write one: by hand, or DDP, which averages a parameter's gradient over the ranks (a parameter
another rank used gets one). So a ``.grad`` stays ``None`` because the tensor is not a leaf, does
not require grad, is not on the loss's graph (a copy of it, or a value that entered without
history, is there instead; or it is not used), or because of *when* it is read (before
``backward()``, after ``zero_grad()``, inside a hook that runs before accumulation, after a backward
that raised before reaching it). This module checks each rule on the loss's graph and on the
tensors you name, and says which applies.

Use (torch only), one line after your ``backward()`` (before it works too)::

    from why_no_grad import why_no_grad
    loss.backward()
    print(why_no_grad(loss, model=model, opt=opt))   # modules, optimizers, tensors, dicts, by name

``loss`` may be one term of your loss (a regulariser that seems to do nothing): then it says what
that term reaches, by walking its graph to each leaf's ``AccumulateGrad`` (a parameter whose
``.grad`` came from another term is "has a gradient, but not from this loss"). A loss without a
graph gets a report saying so, not an error. With an optimizer named, it also flags a parameter
that has a gradient but that no param group holds (it never moves), and notes parameters
the loss reaches that no module named registers (layers in a plain list); with an ``nn.Embedding``
named, a ``padding_idx`` row that gets no gradient; other gradients zero in at most half their
rows (dim 0, not an embedding's) get a note counting them.

Where it stops:

* It reads the graph (``grad_fn``, ``next_functions``, each leaf's ``AccumulateGrad``) and the
  tensors' flags, ``.grad`` and hooks; it runs no backward and changes nothing. It cannot see
  code that ran before: "not on the graph" comes with the list of ways a value enters without
  history, and the one it can tell (a copy, a tensor sharing memory, a cast, a module that
  checkpoints by its ``gradient_checkpointing``/``grad_checkpointing`` flag; a bare
  ``checkpoint()`` call leaves no mark: the forward hook below tells it) named. A cut itself (``.detach()``, ``Variable(x.data)``, ``no_grad``, an argmax or
  integer cast) leaves no node, so it is not located; what the tensors show narrows it (a
  tensor named with history puts the cut between it and the loss; an inference tensor was made
  under ``inference_mode``), and for a module whose parameters are all off the graph, where a
  ``with watch_cuts():`` ran around the forward that made the loss, it says what that watch saw:
  no call read its parameters, or only with gradients off, or with them on; without a watch it gives a
  forward hook to paste, one line, that tells "not called" from "called under no_grad" from "ran
  with gradients, what it computes does not reach the loss" (not used, or cut after it: autograd
  cannot tell them apart) (silent too where a library runs a patched copy of the module: higher)
  (it adds no hook itself), and for the third the fix by purpose (freeze or drop it; to train
  it, use its output in the loss; else find the cut): which of "unused" and "cut" holds is not
  guessed, since reading sources for cuts missed some in every review (36 to 38). A parameter replaced is seen at run time (the optimizer named holds another
  ``nn.Parameter`` than the module, or the graph used another one than the module holds now; a
  plain tensor the optimizer holds and a module keeps as an attribute is said unused or cut
  first, or, with a custom Function on the graph, missed by code that collects ``parameters()``); ``forward``'s source (parsed with ``ast``, with the methods it calls on ``self``) only
  words the fix: where it assigns that attribute or an item of it (``self.layers[0] = ...``; on
  every call, or on some: under an ``if`` or a loop), "create it once in ``__init__``"; without
  source (or any source it cannot read), the same, or, replaced only once, "make the optimizer
  after the model is final". A plain tensor kept on a module is an activation (``retain_grad()``)
  where forward assigns it on every call (a lazy ``if self.w is None:`` is not) or it was made
  from a parameter, an optimizer's tensor or a tensor you named (an input); made from a leaf no
  one holds (``randn(..., requires_grad=True) * 0.1``), a value to make an ``nn.Parameter``;
  such a value kept on no module (made from plain leaves which nothing named holds: one of
  its size, or several of any size) is a weight, leaves meant to train (``a * b``) or an
  activation of an input not named: the fixes by what it is (the reader's expression is a
  placeholder, with the ops the graph shows). A copy (``.to()``) of a leaf that is held is None
  by right: read the leaf's ``.grad``. A non-leaf named that the loss's graph does not contain (a
  property's fresh view) gets the leaf it is made from, not ``retain_grad()``. A loss without
  graph made by a named object that says ``is_differentiable = False`` (a metric) names it.
  A loss that is a leaf requiring grad gets both causes, neither as certain: computed with
  gradients off then ``requires_grad_()``, or rebuilt from values (``torch.tensor`` of losses).
  One nothing can give a gradient (made under ``no_grad``, by a comparison; an integer) is a
  constant; a buffer is state or a constant (torch's own: statistics). Leaves the graph
  reaches that you did not name are called parameters (``nn.Parameter``) or leaves, by their
  shape: nothing more.
* Copies: a tensor sharing memory, or a cast (another dtype, equal values), among the leaves the
  graph reaches and, while the graph is alive (before ``backward()`` or with
  ``retain_graph=True``), among the tensors it saved; a same-dtype copy by value only where the
  candidate is no parameter of the modules named and the tensor is not constant (tensors
  initialised alike, two LayerNorms, are not copies); one kept on a module only where the graph
  saved it (an EMA buffer equal to a codebook is no stand-in). After ``backward()`` the saved
  ones are freed and not seen. The loss reaching only leaves not named, one a plain tensor of a
  parameter's shape (a matrix's, or a vector's with its values; losses are scalars): a copy of
  the weights made detached, ``copy_initial_weights=False`` first. A parameter an optimizer holds, off the graph, while another module's
  parameter of its shape (in no optimizer) is on it: values copied in; when those values equal or
  track it (within 10%: a target, EMA or teacher network), the fix is to predict with the trained
  module and keep the copy out of the graph, never to give the copy to the optimizer;
  ``functional_call`` only for a combination of several trained modules' weights.
  Plain tensors (not ``nn.Parameter``) that require grad, one of the shape of each parameter of
  a module the optimizer holds, on the graph instead of all of them, may be a detached copy (said
  as a possibility; one input of a weight's shape, ``x_adv``, does not match a module with a
  bias; beside a one-parameter module it is an "if" after the other fixes): fast weights an
  inner loop stepped (first-order MAML, ``higher`` with ``track_higher_grads=False``) keep
  their adaptation by adding their gradients to the trained parameters, their ``.grad`` cleared
  before the outer backward; predicting with the trained module drops it.
* Library code it reads from the classes named, never calling it: a method under torch's
  ``no_grad`` or ``inference_mode`` decorator (a loss without graph while gradients are on: the
  no_grad inside the call wins over the caller's ``enable_grad()``; ``inspect.unwrap`` gives the
  function without it), the lines that can switch gradients off in ``forward``, the methods it
  calls on ``self`` and those it calls on a direct submodule (``set_grad_enabled(``, ``no_grad(``, ``inference_mode(``; file:line and the line, so an option
  that drives one is seen), in the module and the modules named above it where its parameters are off
  the graph, a class that overrides ``__call__`` (its forward hooks may never fire:
  the probe wraps ``forward`` instead), a ``.sample()`` that draws without a graph (a
  torch.distributions class or object found by name, assignment or instance, not a replay
  buffer's or a DataFrame's; made from the forward's inputs or tensors, not from constants as
  reparameterisation noise is), file:line, also in the caller's own code where it is made from a
  tensor named (a distribution held there: its tensors' graphs reach it), the one the loss is
  computed from first, with its ``.rsample()`` where the class has it, and modules named in eval mode (named in a note, some
  modules take another path there; not proven the cause). An add of a value without history of
  a code's size (``x + (q - x).detach()``) may be a straight-through estimator (or an add of a
  buffer): the fix says the accidental cut first, then the straight-through purpose; where the
  forward of the module or one named above it has that form in its source (``ast``), it leads:
  what makes q is read only under the ``.detach()``, trained by a term on q, an EMA or an option.
* Zero rather than None: while the graph is alive it recognises a dead ReLU (output all zero)
  and a multiplication by an all-zero tensor (a weight of 0.0, a mask), a softmax, sigmoid or tanh
  whose saved output is all at its bounds (0 or 1; -1 or 1), a softmax over a dimension of size 1
  (always 1: sigmoid or the class dimension is the fix), a clamp, hardtanh or threshold whose
  saved input is where its derivative is zero on every element, and an MSE, L1 or BCE loss whose
  saved outputs equal its targets, on every path from the loss to the tensor (not LogSoftmax:
  whether its zero holds depends on the loss); before and after ``backward()``, step ops on the way (floor, ceil, round,
  trunc, sign: zero derivative; ``%``), by their nodes' names, with a straight-through line
  written with the op found (``x - x % 1`` as a floor) or a surrogate fix; by name too, a
  ``torch.normal`` draw and a draw in place (``h.normal_()``, ``uniform_``, ``bernoulli_``...),
  and the edge to the input of a piecewise-linear op's derivative differentiated again (ReLU,
  LeakyReLU, hardtanh, PReLU, max-pooling under ``create_graph=True``: a PINN's ``u_xx``), told
  edge by edge (while the graph is alive, a matrix product with an all-zero operand too);
  after ``backward()`` that edge is said to be on the way. After ``backward()``
  it also lists the hooks on the tensor and its module that could zero the gradient (not hooks
  on activations or nodes: torch does not list those). A mask made by a
  comparison leaves no node; it cannot recompute the derivative. While the graph is alive, zeros
  left from before (``zero_grad(set_to_none=False)``) and zeros a ``backward(retain_graph=True)``
  wrote look alike: it says both, unless an earlier call on the same loss saw a ``.grad`` that
  has changed since (it remembers what each call saw, weakly: its own memory, not the program's);
  one it saw non-zero and sees zero now was likely set to zero (a backward adds to ``.grad``;
  unless one added exactly the opposite). Zeros behind a custom ``Function`` (named): its
  computation does not read that very tensor (an ``adjoint_params`` it never uses), or the
  outputs that depend on it are unused.
* A parameter at zero: the all-zero factors it reads are those of ``x * y``, a matrix product
  (``mm``, ``bmm``, a Linear's ``addmm``), a convolution's weight and a norm's gamma, while the
  graph is alive, and a factor made from leaves at zero through views, splits and Linears
  (adaLN-Zero's gate); after ``backward()``, the leaves at zero such products read. It blocks
  what comes before it on that step: right if on purpose; in no optimizer named, or beside a
  second zero in one product (a chain of two zero Linears too) that no other path moves, it
  cannot move, and that is said.
* With ``watch_cuts``: a parameter no call read while its module ran (others read) is told per
  parameter, with whether the forward's source names it. ``self.a.b = nn.Parameter(<a value
  computed in forward>)`` is read from the source as a cut (a new leaf); the watch cannot see
  it (``nn.Parameter`` calls no torch function).
* A compiled region (``torch.compile``: a ``CompiledFunctionBackward`` node) is opaque: a
  tensor reached only through one is said to be, with the method (run it without compile).
* Saved tensors are read only where torch shows their unpack hook (torch 2.10 and newer): a
  checkpointed block is never re-run. On older releases whether a backward ran cannot be told:
  it then gives the rules that remain, together, and says so.
* Private torch APIs it reads (each guarded; a report says when one is missing and what it does
  instead): ``SavedTensor.unpack_hook``/``.data``, ``Node._raw_saved_*``/``_saved_*``,
  ``torch.autograd.function.BackwardCFunction``, ``Tensor._backward_hooks``/``_post_accumulate_grad_hooks``,
  ``Module._backward_hooks``/``_backward_pre_hooks``, ``torch.nn.modules.module._global_backward_hooks``,
  torch's backward frames (``torch.autograd.graph._engine_run_backward``),
  ``Node._input_metadata`` (an output's shape), ``Function.apply``'s frame (Python up to torch
  2.13; from 2.14 it is C, and ``watch_cuts`` tells a ``Function``'s forward by its code) and a
  node's Python object (torch 2.4 keeps none: a node is told again by its kind and number).
* A loss without graph that the caller's source assigns from a ``.grad`` (``pen =
  sum(p.grad.pow(2).sum() ...)`` after ``backward()``; or from a name made so, one step up) is
  told with that line (``.grad`` is written without history unless ``create_graph=True``), the
  fix ``torch.autograd.grad(loss, params, create_graph=True)``; read with ``ast``, never run.
* Called with gradients off and a loss without graph, it says so first, as an "if" (the loss may
  have been made elsewhere, detached, then checked in a ``no_grad`` block), and names the
  functions on the stack that torch's ``no_grad``, ``inference_mode`` or
  ``set_grad_enabled(False)`` decorator wraps (generators too), unless a switch nearer the call
  turns gradients on again: an ``enable_grad`` decorator (LBFGS wraps its closure in one) or a
  ``with`` block in torch's code (``torch.optim``'s steps run the closure in one). Else it lists
  the frames outside torch nearer the call, innermost first (three, and how many there are), as
  places to look. A ``with`` block in your code or another package's makes no frame and is not
  read: one that turns gradients on again between a decorated function and the call leaves that
  function named. A module named gives, beside its parameters, the computed tensors that stand
  in for one (``prune``'s ``weight``, old ``weight_norm``'s): their gradient goes on to those
  parameters.
* Do not call it inside a ``torch.compile``'d function: call it outside, on its result.
"""

from __future__ import annotations

import ast
import bisect
import builtins
import collections
import functools
import inspect
import io
import linecache
import os
import re
import sys
import textwrap
import tokenize
import types
import weakref
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

__all__ = ["Finding", "Report", "why_no_grad"]

_TORCH_DIR = str(Path(torch.__file__).resolve().parent)
_FREED = "Trying to backward through the graph a second time"
# private torch APIs, each read through a guard; _GAPS holds the sentence for each one missing
_SHOWS_HOOKS = hasattr(
    getattr(getattr(torch._C, "_autograd", None), "SavedTensor", None), "unpack_hook"
)
_FUNCTION_NODE = getattr(torch.autograd.function, "BackwardCFunction", ())
with torch.enable_grad():  # one node, made at import, to see which private attributes torch has
    _PROBE = (torch.ones(1, requires_grad=True) * torch.ones(1)).grad_fn
# whether a node holds its Python object (the same object at each read): a reference beside the
# one getrefcount takes (torch 2.4 holds none; then nodes are told by kind and number, _node_key)
_NODE_OBJECT_KEPT = sys.getrefcount(_PROBE.next_functions[0][0]) > 1
_GAPS = [
    f"this torch ({torch.__version__}) has no {api}: {fallback}"
    for api, fallback, present in (
        ("SavedTensor.unpack_hook (2.10+)", "saved tensors are not read, so whether a backward "
         "ran cannot be told; the rules that remain are given together", _SHOWS_HOOKS),
        ("Node._raw_saved_<name>", "saved tensors are not read", any(
            a.startswith("_raw_saved_") for a in dir(_PROBE))),
        ("torch.autograd.function.BackwardCFunction", "a custom Function's node is read as a "
         "built-in one", _FUNCTION_NODE != ()),
        ("Tensor._backward_hooks", "tensor hooks are not listed", hasattr(torch.ones(1), "_backward_hooks")),
        ("Tensor._post_accumulate_grad_hooks", "post-accumulate-grad hooks are not listed",
         hasattr(torch.ones(1), "_post_accumulate_grad_hooks")),
        ("Module._backward_hooks", "module backward hooks are not listed",
         hasattr(torch.nn.Module(), "_backward_hooks")),
        ("torch.nn.modules.module._global_backward_hooks", "global module hooks are not listed",
         hasattr(torch.nn.modules.module, "_global_backward_hooks")),
        ("torch.autograd.graph._engine_run_backward", "a read from inside a hook is not told apart",
         hasattr(torch.autograd.graph, "_engine_run_backward")),
        ("Node._input_metadata", "a straight-through form is said for any add of a value without "
         "history, whatever its size", hasattr(_PROBE, "_input_metadata")),
        ("Python object kept with each node", "watch_cuts tells the loss's node by its kind and "
         "sequence number", _NODE_OBJECT_KEPT),
    )
    if not present
]  # fmt: skip
_SAVED_ATTRS: dict[type, tuple[str, ...]] = {}
# id(tensor) -> (it, its loss, its .grad, that .grad's version, whether it changed after an
# earlier call, "nonzero" or "cleared" or None: what that .grad held), the first three weakly,
# as the last call
# while the loss's graph was alive saw them: the instrument's own memory, not the program's
_LAST: dict[int, tuple] = {}
_VIEWS = (  # ops whose output holds the same values as their (first) input
    "TransposeBackward",
    "PermuteBackward",
    "ViewBackward",
    "UnsafeViewBackward",
    "TBackward",
    "SliceBackward",
    "SelectBackward",
    "ExpandBackward",
    "UnsqueezeBackward",
    "SqueezeBackward",
    "AliasBackward",
    "AsStridedBackward",
    "ReshapeAliasBackward",
    "CloneBackward",
    "NarrowBackward",
    "UnbindBackward",
    "SplitBackward",
    "SplitWithSizesBackward",
)
_CUTS = (  # the ways a value enters a loss without history, as the reports name them
    "torch.no_grad() or inference_mode, .detach(), .data, state_dict() or Variable(x.data) (Variable(x) too "
    "makes a tensor without history), .item() or numpy, torch.tensor([...]) or torch.Tensor([...]) "
    "of results (torch.stack or torch.cat keeps the graph), an argmax "
    "or another integer result, a reentrant checkpoint whose inputs need no grad, a draw by a "
    "distribution's .sample() (.rsample() keeps the graph), gradients from torch.autograd.grad "
    "without create_graph=True"
)
_CUT_FIX = (
    "remove the cut where the value enters the loss (use the tensor itself, not its .detach(), "
    ".data or Variable(...); torch.stack or torch.cat, not torch.tensor([...]) of results; no "
    "no_grad there; a checkpoint: use_reentrant=False); an argmax or "
    "integer result has no gradient: use a differentiable surrogate (softmax, "
    "F.gumbel_softmax(hard=True)), or keep the loss from going through it; a draw by "
    "Distribution.sample(): .rsample() where the distribution has it (has_rsample)"
)
_SEVERAL = "several losses: torch.stack(losses).sum() or sum(losses)"
_COPIES = {  # grad_fn names of a copy of a leaf: the leaf gets .grad, the copy does not
    "ToCopyBackward0": "a copy made by .to(), .cuda(), .cpu(), .half(), .float() or .type()",
    "CloneBackward0": "a copy made by .clone()",
    "CopyBackwards": "a copy made by copy_()",
}


_CHECKPOINTED = "has a gradient, through a reentrant checkpoint"  # its own graph: which loss?
_FINE = ("has a gradient", "made from a parameter", _CHECKPOINTED)  # not counted as without one


@dataclass(frozen=True)
class Finding:
    """The rule that applies to one tensor you named."""

    name: str
    grad: str  # "None", "zero" or "nonzero"
    rule: str  # a short name: "not a leaf", "requires_grad off", "not on the graph", ...
    why: str
    fix: str

    def __str__(self) -> str:
        return f"{self.name}: .grad is {self.grad} [{self.rule}] {self.why}" + (
            f"\n    Fix: {self.fix}" if self.fix else ""
        )


@dataclass(frozen=True)
class Report:
    """What ``why_no_grad`` found; ``print(report)`` shows it and what it searched."""

    findings: tuple[Finding, ...] = field(default=())
    graph: str = ""  # what the loss's graph is: nodes, leaves, whether a backward ran through it
    notes: tuple[str, ...] = field(default=())

    def __bool__(self) -> bool:  # true when some tensor has no (or a zero) gradient from this loss
        return any(f.rule not in _FINE for f in self.findings)

    def __getitem__(self, name: str) -> Finding:
        for found in self.findings:
            if found.name == name:
                return found
        raise KeyError(f"why_no_grad: no tensor named {name!r} (named: {self.names()})")

    def names(self) -> str:
        return _summary([f.name for f in self.findings])

    def __str__(self) -> str:
        missing = [f for f in self.findings if f.rule not in _FINE]
        fine = [f.name for f in self.findings if f.rule == "has a gradient"]
        made = [f for f in self.findings if f.rule == "made from a parameter"]
        flagged = [  # a gradient from this loss, flagged for another reason (in no optimizer)
            f for f in missing if f.grad == "nonzero" and not f.rule.startswith("has a gradient")
        ]
        lines = [
            f"{len(missing) - len(flagged)} of {len(self.findings)} named tensors have no gradient "
            "or a zero one"
            + (
                " (or none from this loss)"
                if any(f.rule.startswith("has a gradient, but") for f in missing)
                else ""
            )
            + (
                f"; {len(flagged)} more {'has' if len(flagged) == 1 else 'have'} one, flagged below"
                if flagged
                else ""
            )
        ]
        alike = collections.defaultdict(list)  # one line for tensors under the same rule and reason
        for f in missing:
            alike[f.grad, f.rule, f.why, f.fix].append(f.name)
        for (grad, rule, why, fix), names in alike.items():
            lines.append(str(Finding(_summary(names), grad, rule, why, fix)))
        if fine:
            lines.append(f"with a gradient: {_summary(fine)}")
        lines += [str(f) for f in made]
        if ckpt := [f for f in self.findings if f.rule == _CHECKPOINTED]:
            lines.append(str(replace(ckpt[0], name=_summary([f.name for f in ckpt]))))
        if self.findings and not missing and self.graph.startswith("the loss's graph"):
            lines.append(
                "To see what one term of your loss reaches (a term that seems to change nothing), "
                "pass that term: why_no_grad(term, model=model)"
            )
        lines.append(f"Searched: {self.graph}")
        lines += [f"Note: {note}" for note in self.notes]
        return "\n".join(lines)


def _summary(names: list[str], most: int = 4) -> str:
    """Up to ``most`` names, or the modules they are under: ``m.layer.0.* (16 tensors)``."""
    if len(names) <= most:
        return ", ".join(names)
    parts = [n.split(".") for n in names]
    for depth in range(max(map(len, parts)), 0, -1):
        prefixes = list(dict.fromkeys(".".join(p[:depth]) for p in parts))
        if len(prefixes) <= most:
            counts = collections.Counter(".".join(p[:depth]) for p in parts)
            one = {".".join(p[:depth]): n for n, p in zip(names, parts)}  # a prefix's only name
            return ", ".join(
                prefix if prefix in names
                else one[prefix] if counts[prefix] == 1
                else f"{prefix}.* ({counts[prefix]} tensors)"
                for prefix in prefixes
            )  # fmt: skip
    return ", ".join(names[:most]) + f" and {len(names) - most} more"


def _named(expected: dict) -> list[tuple[str, torch.Tensor]]:
    """(name, tensor) for each tensor named, module parameter and optimizer parameter."""
    found, names, kept = [], {}, []  # kept: named last, so a tensor you name keeps your name
    optimizers_last = sorted(  # a tensor named as a or b keeps that name, not the optimizer's
        expected.items(), key=lambda kv: isinstance(kv[1], torch.optim.Optimizer)
    )
    for key, value in optimizers_last:
        if isinstance(value, torch.nn.Module):
            pairs = [(f"{key}.{n}", p) for n, p in value.named_parameters()]
            kept += [  # a computed tensor standing in for a parameter (prune, weight_norm)
                (f"{key}.{n}.{attr}".replace("..", "."), v)
                for n, m in value.named_modules()
                for attr, v in vars(m).items()
                if isinstance(v, torch.Tensor) and v.grad_fn is not None and _stands_in(m, attr)
            ]
        elif isinstance(value, torch.optim.Optimizer):
            pairs = [
                (f"{key}.param_groups[{i}]['params'][{j}]", p)
                for i, group in enumerate(value.param_groups)
                for j, p in enumerate(group["params"])
            ]
        elif isinstance(value, torch.Tensor):
            pairs = [(key, value)]
        elif isinstance(value, (list, tuple)) and all(isinstance(v, torch.Tensor) for v in value):
            pairs = [(f"{key}[{i}]", v) for i, v in enumerate(value)]
        elif isinstance(value, dict) and all(isinstance(v, torch.Tensor) for v in value.values()):
            pairs = [(f"{key}[{k!r}]", v) for k, v in value.items()]  # a state_dict()
        else:
            raise TypeError(
                f"why_no_grad: {key} must be a tensor, a module, an optimizer, or a list or dict of "
                f"tensors, not a {type(value).__name__}"
            )
        for name, tensor in pairs:
            if id(tensor) not in names:
                names[id(tensor)] = name
                found.append((name, tensor))
    for name, tensor in kept:
        if id(tensor) not in names:
            names[id(tensor)] = name
            found.append((name, tensor))
    return found


def _stands_in(module: torch.nn.Module, attr: str) -> list[str]:
    """The parameters of ``module`` that ``attr`` is computed from, in place of a parameter, at
    each forward: ``torch.nn.utils.prune`` and the old ``spectral_norm`` (``attr + '_orig'``),
    the old ``weight_norm`` (``_g``, ``_v``); none for any other attribute."""
    own = vars(module).get("_parameters", {})
    if f"{attr}_orig" in own:
        return [f"{attr}_orig"]
    return [f"{attr}_g", f"{attr}_v"] if f"{attr}_g" in own and f"{attr}_v" in own else []


def _stand_in(t: torch.Tensor, grad, g: _Context) -> tuple[str, str, str] | None:
    """(rule, why, fix) for a module's computed tensor that stands in for a parameter; None for
    any other tensor. Its gradient goes on to the parameters it is made from; ``retain_grad()``
    is not offered (the hook makes a new tensor at every forward); ``grad``: its own, if kept."""
    for name, module in g.modules:
        for attr, value in vars(module).items():
            if value is not t or not (sources := _stands_in(module, attr)):
                continue
            where = f"{name}.".lstrip(".")
            params = [getattr(module, s) for s in sources]
            grads = " and ".join(f"{g.label(p)}.grad" for p in params)
            masked = hasattr(module, f"{attr}_mask")
            why = (
                f"computed from {', '.join(where + s for s in sources)} by a hook at every forward "
                + (
                    "(a new tensor each time), so it keeps no .grad"
                    if grad is None
                    else "(a new tensor each time; this one's .grad, kept by retain_grad(), is "
                    "not what trains)"
                )
                + f"; its gradient goes on to {grads}"
                + (" (masked entries get zero through the mask)" if masked else "")
            )
            if not (none := [p for p in params if p.grad is None]):
                return "made from a parameter", why, ""
            return (
                "made from a parameter without gradient",
                why
                + (
                    f"; {g.label(none[0])}.grad is None"
                    if len(none) < len(params)
                    else (", which is None" if len(none) == 1 else ", both None")
                ),
                f"see {', '.join(g.label(p) for p in none)} above",
            )
    return None


def _saved(fn: object) -> tuple[list[torch.Tensor], bool, bool, bool]:
    """(the saved tensors of ``fn`` that are alive and can be read without running a hook,
    whether one was freed, whether one is alive, whether one is behind an unpack hook). A node that saved a list of tensors
    (``x[idx]``'s ``IndexBackward0``) refuses even ``_raw_saved_*`` once freed."""
    if isinstance(fn, _FUNCTION_NODE):
        try:
            raw = fn._raw_saved_tensors
        except RuntimeError as error:
            if _FREED in str(error):
                return [], True, False, False
            raise
        return [], False, bool(raw), False  # a custom Function's tensors are not read here
    values, freed, alive, hooked = [], False, False, False
    attrs = _SAVED_ATTRS.get(type(fn))
    if attrs is None:  # dir() is slow: once per node type
        attrs = _SAVED_ATTRS[type(fn)] = tuple(a for a in dir(fn) if a.startswith("_raw_saved_"))
    if not _SHOWS_HOOKS:
        return (
            values,
            freed,
            alive,
            hooked,
        )  # looking would unpack (run a checkpoint's forward again)
    for attr in attrs:
        try:
            raw = getattr(fn, attr)
        except RuntimeError as error:  # a freed list of saved tensors
            if _FREED not in str(error):
                raise
            freed = True
            continue
        for item in raw if isinstance(raw, (list, tuple)) else [raw]:
            if item is None:
                continue
            if item.unpack_hook is not None:
                alive = hooked = True  # hooked (checkpointing, offloading): not unpacked
            elif item.data is not None:
                alive = True
                values.append(item.data)
            else:
                try:
                    getattr(fn, attr.replace("_raw_saved_", "_saved_"))
                except RuntimeError as error:
                    if _FREED not in str(error):
                        raise
                    freed = True
    return values, freed, alive, hooked


def _in_backward() -> bool:
    """Whether this runs inside a backward pass (from a hook): torch's backward frames on the stack."""
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name in ("_engine_run_backward", "run_backward", "backward", "grad") and str(
            Path(code.co_filename).resolve()
        ).startswith(_TORCH_DIR + "/autograd"):
            return True
        frame = frame.f_back
    return False


def _same_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    try:
        return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr() and a.numel() > 0
    except (RuntimeError, NotImplementedError):  # a tensor without storage (a fake or meta one)
        return False


def _equal_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Same values (to a low precision's rounding), or the transpose's: a copy or a cast of it."""
    if a.numel() != b.numel() or a.numel() == 0 or a.is_complex() or b.is_complex():
        return False
    with torch.no_grad():
        x, y = a.detach().cpu().double(), b.detach().cpu().double()
        if not x.ne(0).any():
            return False
        if x.shape == y.shape and torch.allclose(x, y, rtol=1e-2, atol=1e-3):
            return True
        return (
            x.dim() == 2
            and x.mT.shape == y.shape
            and bool(torch.allclose(x.mT, y, rtol=1e-2, atol=1e-3))
        )


def _storage_of(t: torch.Tensor) -> int | None:
    """The address ``_same_memory`` compares (None where ``t`` has no storage): a key to find the
    tensors that share ``t``'s memory without comparing it with each."""
    try:
        return t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return None


def _fingerprint(t: torch.Tensor, g: _Context) -> tuple | None:
    """Sums of ``t``'s values (plain, absolute, squared) and its largest and smallest, read once per
    tensor (kept with it, so its id is not reused): ``_equal_values`` holds only where these are
    close (``_may_equal``). None where they are not finite or cannot be read: compare with all."""
    if id(t) not in g.prints:
        try:
            with torch.no_grad():
                x = t.detach().cpu().double().reshape(-1)
                sums = (x.sum(), x.abs().sum(), (x * x).sum(), x.max(), x.min())
                found = tuple(float(v) for v in sums)
        except Exception:  # noqa: BLE001 - unreadable here: _equal_values decides (or raises)
            found = None
        if found is not None and not all(abs(v) < float("inf") for v in found):
            found = None  # inf or nan: allclose's own rules decide
        g.prints[id(t)] = (t, found)
    return g.prints[id(t)][1]


def _may_equal(a: tuple, b: tuple, n: int) -> bool:
    """Whether fingerprints ``a`` and ``b`` of ``n`` values allow ``_equal_values(A, B)``: its
    allclose bounds each |A - B| by atol + rtol |B|, so bounds the sums' differences (the
    transpose has the same values); a margin covers the rounding of the sums."""
    s, a_abs, sq, hi, lo = a
    t_s, t_abs, t_sq, t_hi, t_lo = b
    atol, rtol = 1e-3, 1e-2
    worst = atol + rtol * max(abs(t_hi), abs(t_lo))
    tiny = 1e-6 * (a_abs + t_abs + sq + t_sq) + 1e-9
    return (
        abs(s - t_s) <= n * atol + rtol * t_abs + tiny
        and abs(sq - t_sq)
        <= n * atol * atol + 2 * atol * (1 + rtol) * t_abs + rtol * (2 + rtol) * t_sq + tiny
        and abs(hi - t_hi) <= worst + tiny
        and abs(lo - t_lo) <= worst + tiny
    )


class _Index:
    """Tensors in their order, found by storage and by size: the ones that may share a tensor's
    memory or hold its values (``_same_memory``, ``_equal_values``), so a rule asked per tensor
    compares it with those, not with all (a product). ``near`` keeps the order: the first match
    found is the one a walk over all of them finds."""

    def __init__(self, tensors, g: _Context):
        self.tensors, self.g = list(tensors), g
        self.by_storage, self.by_size, self.sorted = {}, {}, {}
        for i, v in enumerate(self.tensors):
            self.by_storage.setdefault(_storage_of(v), []).append(i)
            if v.numel() and not v.is_complex():
                self.by_size.setdefault(v.numel(), []).append(i)
        self.by_storage.pop(None, None)

    def near(self, t: torch.Tensor) -> list[int]:
        """The positions of the tensors that may share ``t``'s memory or hold its values."""
        found = set(self.by_storage.get(_storage_of(t), ()))
        n = t.numel()
        if n in self.by_size and not t.is_complex():
            found.update(self._close(t, n))
        return sorted(found)

    def _close(self, t: torch.Tensor, n: int) -> list[int]:
        """The positions of the tensors of ``n`` values whose sums allow ``t``'s values: a window
        of the sorted sums (made on the first ask for that size), then each fingerprint."""
        if n not in self.sorted:
            prints = [(_fingerprint(self.tensors[i], self.g), i) for i in self.by_size[n]]
            known = sorted((p[0], p, i) for p, i in prints if p is not None)
            margin = max((p[1] + p[2] for _, p, _ in known), default=0.0)
            wild = [i for p, i in prints if p is None]
            self.sorted[n] = ([k[0] for k in known], known, wild, margin)
        sums, known, wild, margin = self.sorted[n]
        mine = _fingerprint(t, self.g)
        if mine is None:
            return self.by_size[n]
        width = n * 1e-3 + 1e-2 * mine[1] + 1e-6 * (margin + mine[1] + mine[2]) + 1e-9
        start, stop = (
            bisect.bisect_left(sums, mine[0] - width),
            bisect.bisect_right(sums, mine[0] + width),
        )
        return wild + [i for _, p, i in known[start:stop] if _may_equal(p, mine, n)]


def _hooks(t: torch.Tensor, g: _Context) -> list[str]:
    """The hooks that run on ``t``'s gradient or on a module holding it. The modules with
    backward hooks are found once per call (asked per parameter, a walk would cost a product)."""
    found = []
    if getattr(t, "_backward_hooks", None):
        found.append(f"{len(t._backward_hooks)} tensor hook(s) (register_hook)")
    if getattr(t, "_post_accumulate_grad_hooks", None):
        found.append("a post-accumulate-grad hook")
    if g.module_hooks is None:
        g.module_hooks = [
            (name, module, kind) for name, module in g.modules
            for kind in ("_backward_hooks", "_backward_pre_hooks") if getattr(module, kind, None)
        ]  # fmt: skip
    for name, module, _ in g.module_hooks:
        if any(p is t for p in module.parameters(recurse=False)):
            found.append(f"a module backward hook on {name or 'the module'}")
    glob = torch.nn.modules.module
    if getattr(glob, "_global_backward_hooks", None) or getattr(
        glob, "_global_backward_pre_hooks", None
    ):
        found.append("a global module backward hook")
    return found


def why_no_grad(loss: torch.Tensor | None, /, **expected: object) -> Report:
    """For each tensor named in ``expected`` (modules give their parameters, optimizers theirs),
    say why its ``.grad`` is ``None`` or zero, from ``loss``'s graph (``None`` if you have no
    loss at hand: then only the tensors' own state is read). Call it after ``backward()``, or
    before it; ``loss`` may be one term of the loss. It changes nothing."""
    if loss is not None and not isinstance(loss, torch.Tensor):
        raise TypeError(
            f"why_no_grad: loss must be the tensor you call backward() on, not a {type(loss).__name__} "
            "(name the others: why_no_grad(loss, model=model))"
        )
    if not expected:
        raise ValueError(
            "why_no_grad: name what you expected gradients for: why_no_grad(loss, model=model, w=w)"
        )
    tensors = _named(expected)
    modules = [
        (f"{key}.{n}".rstrip("."), m)
        for key, value in expected.items()
        if isinstance(value, torch.nn.Module)
        for n, m in value.named_modules()
    ]
    held = {  # what the optimizers named hold, and the parameters of the modules named
        "opt": {id(p) for v in expected.values() if isinstance(v, torch.optim.Optimizer)
                for g in v.param_groups for p in g["params"]},
        "module": {id(p): f"{n}.{pn}".lstrip(".") for n, m in modules
                   for pn, p in m.named_parameters(recurse=False)},
    }  # fmt: skip
    g = _Context(loss, {id(t): n for n, t in tensors}, modules, held)
    g.tensors, g.expected = tensors, expected
    if loss is not None and loss.grad_fn is None and not loss.requires_grad:
        g.producers = _producers(sys._getframe(1), loss)
        g.grad_read, g.grad_beside = _grad_read(sys._getframe(1), loss)
        if g.grad_read and _grads_kept(sys._getframe(1), g.grad_read, tensors):
            g.grad_kept, g.grad_read, g.grad_beside = g.grad_read, "", []  # not the cut
            if "autograd.grad(" not in g.grad_kept:  # x.grad of an input (review 46 R2)
                g.grad_fix = _grad_fix(sys._getframe(1), g.grad_kept, held["module"])
        if g.grad_read:
            g.grad_fix = _grad_fix(sys._getframe(1), g.grad_read, held["module"])
    if any(t.is_leaf and t.requires_grad and t.grad is None for _, t in tensors):
        g.subclassed = _subclass_leaves(sys._getframe(1))
    if loss is not None and loss.grad_fn is None and not torch.is_grad_enabled():
        g.grad_off = _grad_off_at(sys._getframe(1))  # before anything else
    if loss is not None and loss.grad_fn is not None:
        seen, todo = {loss.grad_fn}, [loss.grad_fn]
        while todo:
            fn = todo.pop()
            g.nodes.append(fn)
            g.kids[fn] = [c for c, _ in fn.next_functions if c is not None]
            variable = getattr(fn, "variable", None) if not g.kids[fn] else None
            if isinstance(variable, torch.Tensor):
                g.leaves[id(variable)] = (variable, fn)
            values, freed, alive, hooked = _saved(fn)
            if hooked:
                g.hooked.add(fn)
            g.saved += values
            g.ran, g.alive = g.ran or freed, g.alive or alive
            for child in g.kids[fn]:
                if child not in seen:
                    seen.add(child)
                    todo.append(child)
    g.node_set = set(g.nodes)
    if loss is not None and any(  # a tensor that requires grad, off the graph: a draw may cut it
        t.requires_grad and id(t) not in g.leaves and t.grad_fn not in g.node_set
        for _, t in tensors
    ):
        g.caller_draws = _caller_draws(sys._getframe(1), g)[0]
    g.with_grad = [v for v, _ in g.leaves.values() if v.grad is not None] + [
        t for _, t in tensors if t.retains_grad and t.grad_fn in g.node_set and t.grad is not None
    ]  # leaves, and retained non-leaves (retain_grad(), backward(inputs=[h]))
    g.inside = _in_backward()
    g.dead = _dead_relus(g.nodes) if g.alive and not g.ran else set()
    if loss is None:
        graph = "no loss given (only the tensors' own state was read)"
    elif loss.grad_fn is None and not loss.requires_grad:
        graph = "the loss: it has no graph (no grad_fn, requires_grad=False)"
    elif loss.grad_fn is None:
        graph = "the loss is a leaf: it has no graph"
    else:
        state = (
            "a backward pass ran through it" if g.ran
            else "no backward pass has run through it yet, or one ran with retain_graph=True" if g.alive
            else f"whether a backward ran through it cannot be told on torch {torch.__version__}"
            if not _SHOWS_HOOKS
            else "whether a backward ran through it cannot be told (it saved no tensor)"
        )  # fmt: skip
        plural = "s" if len(g.leaves) != 1 else ""
        graph = (
            f"the loss's graph ({len(g.nodes)} nodes, {len(g.leaves)} leaf tensor{plural}; {state}); "
            f"{len(tensors)} tensor{'s' if len(tensors) != 1 else ''} named"
        )
    own = [t for _, t in tensors if t.grad_fn is None or t.retains_grad]  # .grad read: no warning
    for t in own:  # what the last call on this loss saw (the instrument's own memory)
        last, now = _LAST.get(id(t)), (t.grad, None if t.grad is None else t.grad._version)
        if last is not None and last[0]() is t and last[1]() is loss and loss is not None:
            changed = last[2]() is not now[0] or last[3] != now[1]
            g.since[id(t)] = last[4] or changed
            seen = last[5] == "nonzero" or last[5] == "cleared" and not changed
            if seen and now[0] is not None and not now[0].any():  # a backward only adds: set
                g.cleared.add(id(t))
    findings = []
    for name, t in tensors:
        grad = None if (t.grad_fn is not None and not t.retains_grad) else t.grad
        amount = "None" if grad is None else "zero" if not grad.any() else "nonzero"
        findings.append(Finding(name, amount, *_rule(t, grad, g)))
    notes = []
    rows = collections.defaultdict(list)  # (zero rows, rows) -> names, for tensors with a gradient
    for (name, t), f in zip(tensors, findings):
        if f.rule == "has a gradient" and t.grad is not None:
            counted = _zero_rows(t, t.grad, g)
            if counted:
                rows[counted].append(name)
    for (zero, total), names in rows.items():
        notes.append(
            f"{_summary(names)}: the gradient is zero in {zero} of {total} rows (dim 0): those "
            "rows do not train in this step (a mask, a dead unit, a row not used); right if they "
            "were not meant to be used"
        )
    if not held["opt"]:  # forward assigns a parameter: only an optimizer can show it is stale
        assigned = {
            where: name for (name, t), f in zip(tensors, findings)
            if f.rule == "has a gradient" and (where := _per_call(held["module"].get(id(t), ""), g))
        }  # fmt: skip
        for (where, attr), name in assigned.items():
            notes.append(
                f"{where}: name your optimizer (opt=opt) to check it holds the {attr} forward uses"
            )
    stray = [  # parameters on the graph that no module named registers, while one's are on it
        v for v, _ in g.leaves.values() if isinstance(v, torch.nn.Parameter) and v.requires_grad
        and id(v) not in g.names and id(v) not in g.held["module"] and id(v) not in g.held["opt"]
    ]  # fmt: skip
    if stray and g.held["opt"] and set(g.leaves) & set(g.held["module"]):
        notes.append(
            f"the loss also reaches {len(stray)} parameter(s) "
            f"({', '.join(g.label(v) for v in stray[:3])}) that no module named registers and no "
            "optimizer named holds: they never move (layers kept in a plain list or dict? use "
            "nn.ModuleList or nn.ModuleDict; or of a module you did not name)"
        )
    plain = _plain_tensors(g)
    if plain:
        notes.append(plain)
    idle = [  # a model fixed beside an optimizer of plain tensors: said by purpose
        name for (name, t), f in zip(tensors, findings)
        if f.rule == "has a gradient" and held["opt"] and t.is_leaf
        and id(t) not in held["opt"] and _inputs_only(t, g)
    ]  # fmt: skip
    if idle:
        notes.append(
            f"{_summary(idle)}: no optimizer named holds them (they hold plain tensors only): "
            "right if the model is fixed on purpose (an attack, input optimisation); to train "
            "them, give them to the optimizer (and call .train())"
        )
    evaluating = _in_eval(modules, tensors, findings, bool(idle))
    if evaluating:
        notes.append(
            f"{evaluating} in eval mode (training=False): some modules take another path in eval "
            "(a cache or a statistic used detached, an estimator skipped), so gradients above may "
            "be missing or partial; if it should train, call .train() on it (or the library's "
            "training-mode option); not checked as the cause"
        )
    if loss is not None and g.leaves and not set(g.leaves) & set(g.names):
        notes.append(
            "the loss's graph reaches none of the leaves named; its leaves: "
            + ", ".join(  # in the order of the ops' inputs, as the findings list them
                g.label(v)
                for v in (_leaves_below(loss.grad_fn, 4) or [v for v, _ in g.leaves.values()][:4])
            )
        )
    if loss is not None and g.alive and not g.ran:  # remembered weakly: nothing is kept alive
        if len(_LAST) > 4096:  # forget tensors that are gone
            for key in [k for k, v in _LAST.items() if v[0]() is None]:
                del _LAST[key]
        for t in own:
            _LAST[id(t)] = (
                weakref.ref(t),
                weakref.ref(loss),
                (lambda: None) if t.grad is None else weakref.ref(t.grad),
                None if t.grad is None else t.grad._version,
                g.since.get(id(t), False),
                "cleared" if id(t) in g.cleared
                else "nonzero" if t.grad is not None and t.grad.any() else None,
            )  # fmt: skip
    return Report(tuple(findings), graph, tuple(notes + _GAPS))


def _plain_tensors(g: _Context, most: int = 3) -> str:
    """A note on the float tensors that the modules named (outside torch) keep as plain
    attributes (in ``__dict__``, not a parameter or buffer of any module named), not named by the
    reader, at most ``most`` names, by purpose. Whether the loss reads one is not said: the
    graph's saved tensors cannot tell (an add saves nothing; a detached cache shares storage
    with a saved tensor), so a cache is listed too (review 37, P1)."""
    if g.loss is None or not g.nodes:
        return ""
    registered = {
        id(v) for _, m in g.modules
        for v in (*vars(m).get("_parameters", {}).values(), *vars(m).get("_buffers", {}).values())
    }  # fmt: skip
    found = {}
    for name, module in g.modules:
        if _torch_own(type(module)):
            continue
        own = vars(module).get("_parameters", {})
        for attr, v in vars(module).items():
            if (
                isinstance(v, torch.Tensor) and not isinstance(v, torch.nn.Parameter)
                and v.is_floating_point() and v.grad_fn is None and not v.requires_grad
                and v.numel() and id(v) not in registered and id(v) not in g.names
                and not {f"{attr}_orig", f"{attr}_v"} & set(own)  # a hook-made weight
            ):  # fmt: skip
                found.setdefault(id(v), (f"{name}.{attr}".lstrip("."), v))
    if not found:
        return ""
    names = [n for n, _ in found.values()]
    shown = ", ".join(names[:most]) + (
        f" and {len(names) - most} more" if len(names) > most else ""
    )
    kind = (
        "a float tensor kept as a plain attribute (not a parameter or buffer"
        if len(names) == 1
        else "float tensors kept as plain attributes (not parameters or buffers"
    )
    return (
        f"{shown}: {kind}): not trained, not in parameters() or state_dict(), not moved by .to(); "
        "if one should train: nn.Parameter(...) in __init__, before the optimizer is made; a "
        "constant: self.register_buffer(name, t, persistent=False) (state_dict unchanged); a "
        "cache: nothing to fix"
    )


def _in_eval(modules: list, tensors: list, findings: list, idle: bool = False) -> str:
    """The topmost modules named that are in eval mode (``training`` False) and hold or contain a
    parameter that requires grad, while some tensor named has no gradient or a zero one (or
    ``idle``: no optimizer holds its parameters): their names, with "is" or "are"; else ""."""
    if all(f.rule in _FINE for f in findings) and not idle:
        return ""
    found = []
    frozen = [  # modules with parameters, none requiring grad: frozen on purpose, or by mistake
        name for name, module in modules
        if list(module.parameters()) and not any(p.requires_grad for p in module.parameters())
    ]  # fmt: skip
    for name, module in modules:
        if module.training or any(name.startswith(f"{top}.") or not top for top in found):
            continue
        if any(p.requires_grad for p in module.parameters()) or (
            not list(module.parameters())  # nothing to train: only where no frozen module holds it
            and not any(name.startswith(f"{top}.") or not top for top in frozen)
        ):
            found.append(name)
    if not found:
        return ""
    shown = ", ".join(n or "the module" for n in found[:3]) + (
        f" and {len(found) - 3} more" if len(found) > 3 else ""
    )
    return shown + (" is" if len(found) == 1 else " are")


@dataclass
class _Context:
    """The loss's graph as read once: nodes, children, leaves reached, saved tensors, state."""

    loss: torch.Tensor | None
    names: dict  # id -> the name given
    modules: list  # (name, module) of the modules named, and their submodules
    held: dict  # "opt": ids the optimizers hold; "module": id -> name of the modules' parameters
    nodes: list = field(default_factory=list)
    node_set: set = field(default_factory=set)
    kids: dict = field(default_factory=dict)
    leaves: dict = field(default_factory=dict)  # id -> (tensor, its AccumulateGrad node)
    saved: list = field(default_factory=list)  # saved tensors readable without a hook
    ran: bool = False  # a backward pass freed some node's saved tensors
    alive: bool = False  # some saved tensor is alive
    with_grad: list = field(default_factory=list)
    inside: bool = False
    dead: set = field(default_factory=set)
    tensors: list = field(default_factory=list)  # (name, tensor) of each tensor named
    off_graph: set | None = None  # _off_graph_shapes, once
    fast: dict | None = None  # _fast_pairs, once
    fast_one: dict = field(default_factory=dict)  # id -> (module, its parameter): no least count
    zero: dict | None = None  # _zero_nodes, once
    hooked: set = field(default_factory=set)  # nodes with a saved tensor behind an unpack hook
    unread: set | None = None  # the nodes below them (_unread), once
    since: dict = field(default_factory=dict)  # id -> .grad changed since the last call (_LAST)
    cleared: set = field(default_factory=set)  # ids whose .grad a call saw non-zero, zero now
    expected: dict = field(default_factory=dict)  # what the reader named
    producers: list = field(default_factory=list)  # _producers of a loss without graph
    subclassed: list = field(default_factory=list)  # _subclass_leaves of the caller
    grad_off: str = ""  # gradients off at the call, with a loss without graph: where (_grad_off_at)
    caller_draws: list = field(default_factory=list)  # _caller_draws of the caller
    draws: list | None = None  # _module_draws of the modules named, once
    kept: dict | None = None  # _kept_from, once
    grad_read: str = ""  # a loss without graph assigned from a .grad: where (_grad_read)
    grad_beside: list = field(default_factory=list)  # other operands without graph (_grad_read)
    grad_kept: str = ""  # grad_read, where the gradients it reads have history (_grads_kept)
    grad_fix: str = ""  # the fix for grad_read written with the reader's own term (_grad_fix)
    stale: dict | None = None  # _stale_nodes, once
    stale_after: dict | None = None  # _stale_nodes(after=True), once (_raised_at)
    special: tuple | None = None  # _special: compiled regions and Functions, once
    embeddings: dict | None = None  # _embedding_of: id(weight) -> nn.Embedding(Bag) named, once
    module_hooks: list | None = None  # _hooks: (name, module, kind) of module backward hooks, once
    reentrant: bool | None = None  # _reentrant, once
    saved_ids: set | None = None  # _saved_ids: ids of the saved tensors, once
    saved_memory: tuple | None = None  # _saved_memory: storages of the saved tensors, once
    twice_found: set | None = None  # _twice_found: the _TWICE nodes on the graph, once
    leaf_parents: set | None = None  # _leaf_parents: the containers of the leaves' names, once
    attribute_of: dict | None = None  # _kept_on: id -> the first module attribute holding it, once
    by_name: dict | None = None  # _by_name: dict(modules), once
    first_named: dict | None = None  # _module_named: the first module of each name, once
    adds: tuple | None = (
        None  # _straight_through: the graph's adds of a value without history, once
    )
    above: dict | None = None  # _switches: id(module) -> the modules named that hold it, once
    index: dict = field(default_factory=dict)  # _memo: indexes a per-tensor rule reads, once each
    prints: dict = field(default_factory=dict)  # id -> _fingerprint of a tensor asked about, once

    def label(self, t: torch.Tensor) -> str:
        return (
            self.names.get(id(t))
            or self.held["module"].get(id(t))
            or f"{'a parameter' if isinstance(t, torch.nn.Parameter) else 'a leaf'} of shape "
            f"{tuple(t.shape)}"
        )


_STEPS = {  # ops whose derivative is zero wherever it exists: nothing flows back through them
    "FloorBackward0": "floor", "CeilBackward0": "ceil", "RoundBackward0": "round",
    "RoundBackward1": "round", "TruncBackward0": "trunc", "SignBackward0": "sign",
    "SgnBackward0": "sgn",  # also abs's derivative, differentiated again (create_graph=True)
}  # fmt: skip
_JUMPS = {"RemainderBackward0": "%", "FmodBackward0": "fmod"}  # x - x % 1 is a floor: zero
_TWICE = {  # a piecewise-linear op's derivative, differentiated again (create_graph=True): its
    # derivative to the op's input (this edge) is zero wherever defined (ReLU'' = 0); by name
    "ThresholdBackwardBackward0": ("ReLU", 1), "LeakyReluBackwardBackward0": ("LeakyReLU", 1),
    "HardtanhBackwardBackward0": ("hardtanh or ReLU6", 1), "PreluKernelBackwardBackward0": ("PReLU", 1),
    "MaxPool2DWithIndicesBackwardBackward0": ("max-pooling", 1),
    "MaxPool3DWithIndicesBackwardBackward0": ("max-pooling", 1),
    "RreluWithNoiseBackwardBackward0": ("RReLU", 1), "SoftshrinkBackwardBackward0": ("Softshrink", 1),
    "HardshrinkBackwardBackward0": ("Hardshrink", 1),
}  # fmt: skip
_NORMAL = ("NormalBackward1", "NormalBackward2", "NormalBackward3")  # torch.normal(mean, std):
# autograd's derivative to mean and std is zero (a draw, not reparameterised), also after backward
_DRAWN = {  # a draw in place over a tensor with history (h.normal_()), or of a probability or a
    # rate: autograd's derivative to what came before is zero, also after backward
    "NormalBackward0": "normal_", "UniformBackward0": "uniform_", "BernoulliBackward1": "bernoulli_",
    "BernoulliBackward2": "bernoulli_", "ExponentialBackward0": "exponential_",
    "CauchyBackward0": "cauchy_", "LogNormalBackward0": "log_normal_",
    "GeometricBackward0": "geometric_", "RandomBackward0": "random_",
    "BernoulliBackward0": "torch.bernoulli(p)", "PoissonBackward0": "torch.poisson(rate)",
}  # fmt: skip


_SATURATES = {  # result exactly at these values: the node's derivative there is exactly zero
    "SoftmaxBackward0": (0.0, 1.0, "softmax (outputs exactly 0 or 1)"),
    "SigmoidBackward0": (0.0, 1.0, "sigmoid (outputs exactly 0 or 1)"),
    "TanhBackward0": (-1.0, 1.0, "tanh (outputs exactly -1 or 1)"),
}
_AT_MINIMUM = ("MseLossBackward0", "L1LossBackward0", "BinaryCrossEntropyBackward0")
_CLAMPS = {  # node: (its name, its saved bounds); where the derivative is zero is in _clamped
    "ClampMinBackward0": ("clamp_min", ("min",)), "ClampMinBackward1": ("clamp_min", ("min",)),
    "ClampMaxBackward0": ("clamp_max", ("max",)), "ClampMaxBackward1": ("clamp_max", ("max",)),
    "ClampBackward0": ("clamp", ("min", "max")), "ClampBackward1": ("clamp", ("min", "max")),
    "HardtanhBackward0": ("hardtanh", ("min_val", "max_val")),
    "ThresholdBackward0": ("threshold", ("threshold",)),
}  # fmt: skip


def _clamped(fn) -> str | None:
    """A clamp, hardtanh or threshold node whose saved input lies where its derivative is zero on
    every element (clamp: below min or above max, or NaN; hardtanh: at or beyond a bound;
    threshold: at or below it), read through ``_raw_saved_*`` without running an unpack hook."""
    kind = _CLAMPS.get(type(fn).__name__)
    if kind is None or not _SHOWS_HOOKS:
        return None
    raw = getattr(fn, "_raw_saved_self", None)
    x = raw.data if raw is not None and raw.unpack_hook is None else None
    if x is None or not x.is_floating_point() or not x.numel():
        return None
    bounds = []
    for name in kind[1]:
        b = getattr(fn, f"_raw_saved_{name}", None)  # a tensor bound
        if b is not None:
            if b.unpack_hook is not None:
                return None
            b = b.data  # None: no bound on that side
        else:
            b = getattr(fn, f"_saved_{name}", None)  # a number, or None (no bound)
        bounds.append(b)
    if kind[0] == "hardtanh":
        zero = (x <= bounds[0]) | (x >= bounds[1])
    elif kind[0] == "threshold":
        zero = x <= bounds[0]
    else:
        low = bounds[0] if kind[0] != "clamp_max" else None
        high = bounds[-1] if kind[0] != "clamp_min" else None
        passes = torch.ones_like(x, dtype=torch.bool)
        passes = passes & (x >= low) if low is not None else passes
        passes = passes & (x <= high) if high is not None else passes
        zero = ~passes
    if not bool(zero.all()):
        return None
    shown = ", ".join(
        f"{b:g}" if isinstance(b, (int, float)) else "a tensor" for b in bounds if b is not None
    )
    return f"a clamp ({kind[0]}({shown})) that kept every value at its bound: its derivative is zero there"


_INPLACE = "modified by an inplace operation"


def _stale_nodes(g: _Context, after: bool = False) -> dict:
    """Nodes of the loss's graph whose saved tensor was changed in place after they saved it
    (h = sigmoid(z); h.bernoulli_()): backward() raises at them. Read before backward (or,
    ``after``, after a backward that raised: the node it raised at kept its saved values), by
    ``_saved_<name>`` (which checks the version; ``_raw_saved_*`` does not), and only where no
    unpack hook is set (reading would run it). Node -> the tensor op it saved for."""
    found = {}
    if not ((after or g.alive and not g.ran) and _SHOWS_HOOKS):
        return found
    for fn in g.nodes:
        if isinstance(fn, _FUNCTION_NODE):
            continue
        attrs = _SAVED_ATTRS.get(type(fn))
        if attrs is None:
            attrs = _SAVED_ATTRS[type(fn)] = tuple(
                a for a in dir(fn) if a.startswith("_raw_saved_")
            )
        for attr in attrs:
            try:
                raw = getattr(fn, attr)
            except RuntimeError:
                continue
            items = raw if isinstance(raw, (list, tuple)) else [raw]
            if not any(i is not None for i in items) or any(
                i is not None and i.unpack_hook is not None for i in items
            ):
                continue
            try:
                getattr(fn, attr.replace("_raw_saved_", "_saved_"))
            except RuntimeError as error:
                if _INPLACE in str(error):
                    found[fn] = re.sub(r"Backward\d*$", "", type(fn).__name__)
                    break
    return found


def _zero_nodes(g: _Context) -> dict:
    """Nodes of the loss's graph that pass back no gradient, with what they are: a step op (floor,
    round, sign: by name, also after backward), a dead ReLU, a multiplication by an all-zero
    tensor (a weight of 0.0, an all-zero mask; read while the graph is alive, without a hook)."""
    found = {fn: f"{_STEPS[type(fn).__name__]} (zero derivative)" for fn in g.nodes
             if type(fn).__name__ in _STEPS}  # fmt: skip
    found.update((fn, "a ReLU whose output is all zero (dead)") for fn in g.dead)
    found.update((fn, "a draw by torch.normal(mean, std) (no derivative to mean or std)")
                 for fn in g.nodes if type(fn).__name__ in _NORMAL)  # fmt: skip
    found.update((fn, f"a draw by {_DRAWN[type(fn).__name__]} (drawn anew: no derivative to what "
                  "came before)") for fn in g.nodes if type(fn).__name__ in _DRAWN)  # fmt: skip
    for fn in g.nodes:  # an edge, not the node: the other inputs (the gradient) pass non-zero
        op, i = _TWICE.get(type(fn).__name__, (None, 0))
        if op and i < len(fn.next_functions) and fn.next_functions[i][0] is not None:
            found[(fn, i)] = (
                f"{op}'s derivative differentiated again ({type(fn).__name__}): its derivative to "
                f"{op}'s input is zero wherever defined (second derivative of a piecewise-linear op)"
            )
    if g.alive and not g.ran and _SHOWS_HOOKS:
        if g.stale is None:
            g.stale = _stale_nodes(g)
        for fn in g.nodes:  # an output exactly at its bound passes back exactly zero
            bounds = _SATURATES.get(type(fn).__name__) if fn not in g.stale else None
            raw = getattr(fn, "_raw_saved_result", None) if bounds else None
            data = raw.data if raw is not None and raw.unpack_hook is None else None
            if data is not None and data.is_floating_point() and data.numel():
                dim = getattr(fn, "_saved_dim", 0) if data.dim() else 0
                dim = dim - 2**64 if dim >= 2**63 else dim  # -1 is shown as an unsigned number
                if type(fn).__name__ == "SoftmaxBackward0" and data.dim() and data.size(dim) == 1:
                    found[fn] = "a softmax over a dimension of size 1 (always 1)"
                elif bool(((data == bounds[0]) | (data == bounds[1])).all()):
                    found[fn] = f"a saturated {_SATURATES[type(fn).__name__][2]}"
        found.update((fn, c) for fn in g.nodes if (c := _clamped(fn)))  # clamp at its bound
        for fn in g.nodes:  # a loss at its minimum: predictions equal the targets exactly
            if type(fn).__name__ in _AT_MINIMUM:
                raw = [getattr(fn, f"_raw_saved_{n}", None) for n in ("self", "target")]
                data = [r.data if r is not None and r.unpack_hook is None else None for r in raw]
                if all(d is not None for d in data) and torch.equal(*data):
                    found[fn] = "a loss at its minimum (an exact fit: outputs equal the targets)"
        twice = sorted({_TWICE[type(f).__name__][0] for f in g.nodes if type(f).__name__ in _TWICE})
        twice += ["abs"] if any(type(f).__name__ == "SgnBackward0" for f in g.nodes) else []
        for fn in g.nodes:  # x * 0, or a matrix product with an all-zero operand: per edge
            names = {"MulBackward0": ("self", "other"), "MmBackward0": ("self", "mat2")}
            if type(fn).__name__ not in names:
                continue
            raw = [getattr(fn, f"_raw_saved_{n}", None) for n in names[type(fn).__name__]]
            data = [r.data if r is not None and r.unpack_hook is None else None for r in raw]
            kids = [c for c, _ in fn.next_functions]
            zero = [i for i, c in enumerate(kids[:2]) if c is not None
                    and data[1 - i] is not None and data[1 - i].is_floating_point() and not data[1 - i].any()]  # fmt: skip
            said = {i: _zero_factor(data[1 - i], g, twice, kids[1 - i]) for i in zero}
            if said.get(1) == _TIMES and _linear_weight(fn):  # F.linear(x, W): x is all zero
                said[1] = _zero_input(kids[0], g)
            if len(zero) == 2 and (
                both := _stuck({i: (data[1 - i], kids[1 - i]) for i in zero}, fn, said, g)
            ):  # two zero parameters, each the other's factor: neither ever gets a gradient
                found[fn] = both
            elif (
                zero
                and len(zero) == sum(c is not None for c in kids[:2])
                and len(set(said.values())) == 1
            ):
                found[fn] = said[zero[0]]
            else:
                found.update(((fn, i), said[i]) for i in zero)
        for fn in g.nodes:  # a layer's weight at zero: x @ W.T + b, a convolution, a norm's gamma
            factors = {}
            for edge, saved, kid in _WEIGHTED.get(type(fn).__name__, ()):
                raw = getattr(fn, f"_raw_saved_{saved}", None)
                data = raw.data if raw is not None and raw.unpack_hook is None else None
                kids = [c for c, _ in fn.next_functions]
                if (
                    edge < len(kids) and kids[edge] is not None and data is not None
                    and data.is_floating_point() and data.numel() and not data.any()
                ):  # fmt: skip
                    factors[edge] = (data, kids[kid])
                    found[(fn, edge)] = _zero_factor(data, g, twice, kids[kid])
                    if edge == _INPUT_EDGE.get(type(fn).__name__) and found[(fn, edge)] == _TIMES:
                        found[(fn, edge)] = _zero_input(kids[kid], g)
            said = {e: found[(fn, e)] for e in factors}
            if len(factors) == 2 and (both := _stuck(factors, fn, said, g)):
                found.update(((fn, e), both) for e in factors)  # two zero layers in a chain
    return found


def _stuck(factors: dict, fn, said: dict, g: _Context) -> str:
    """Two zero factors of the product ``fn`` ({edge: (the factor, the node that made it)}), each
    made by parameters at zero: "a product of two parameters at zero (...)" where neither can
    ever move: each factor stays zero while those parameters do (``_zero_by``), and every path
    from the loss to each of them passes through these two zero edges (no other path gives one a
    gradient); "" otherwise."""
    if not all(_AT_ZERO in said[e] for e in factors):
        return ""
    zeros = {id(v): v for data, kid in factors.values() for v in _zero_params(data, g, kid)}
    made = [kid for _, kid in factors.values()]
    if len(zeros) < 2 or not all(k is not None and _zero_by(k, zeros) for k in made):
        return ""
    edges = {(fn, e) for e in factors}
    if not all(
        i in g.leaves and _cut_by(edges, g.loss.grad_fn, g.leaves[i][1], g.kids) for i in zeros
    ):
        return ""
    return (
        "a product of two parameters at zero ("
        + ", ".join(dict.fromkeys(g.label(v) for v in zeros.values()))
        + ": the gradient of each passes through the other zero factor, so none ever moves)"
    )


def _zero_by(fn, zeros: dict, most: int = 200) -> bool:
    """Whether the value the node ``fn`` makes is zero whenever the leaves ``zeros`` ({id: leaf})
    are: one of them, an op that keeps a zero (``_KEEPS_ZERO``) of such a value, a product with
    one, a Linear or convolution whose factor and bias (if any) are; no for another op."""
    seen = {}

    def by(f) -> bool:
        if f is None or len(seen) > most:
            return False
        if f in seen:
            return seen[f]
        seen[f] = False  # a cycle cannot occur; a repeat is answered once
        name, kids = type(f).__name__, [c for c, _ in f.next_functions]
        v = getattr(f, "variable", None)
        if v is not None:
            out = id(v) in zeros
        elif name in _KEEPS_ALL:
            out = bool(kids) and all(c is not None and by(c) for c in kids)
        elif name in _KEEPS_ZERO:
            out = bool(kids) and by(kids[0])
        elif name in ("MulBackward0", "MmBackward0", "BmmBackward0", "MvBackward0"):
            out = any(by(c) for c in kids[:2])
        elif name == "AddmmBackward0":
            out = by(kids[0]) and (by(kids[1]) or by(kids[2]))
        elif name == "ConvolutionBackward0":
            bias = getattr(f, "_saved_bias_sym_sizes_opt", None)
            out = (by(kids[0]) or by(kids[1])) and (bias in (None, (0,)) or by(kids[2]))
        else:
            out = False
        seen[f] = out
        return out

    return by(fn)


# the edges (input index) whose gradient is a product with a saved weight (its name, its input
# index): a Linear with a bias (addmm), bmm, a convolution, a batch or layer norm's gamma
_WEIGHTED = {
    "AddmmBackward0": ((1, "mat2", 2), (2, "mat1", 1)),
    "BmmBackward0": ((0, "mat2", 1), (1, "self", 0)),
    "ConvolutionBackward0": ((0, "weight", 1),),
    "NativeBatchNormBackward0": ((0, "weight", 1),),
    "NativeLayerNormBackward0": ((0, "weight", 1),),
}
_AT_ZERO = "at zero (zero-initialised, or set to zero since)"


_FACTORS = {"MulBackward0": ("self", "other"), "MulBackward1": (), "MmBackward0": ("self", "mat2"),
            "BmmBackward0": ("self", "mat2"), "MvBackward0": ("self", "vec")}  # fmt: skip
# ops whose result is zero where all their inputs are (a sum or mean of zeros, their negation)
_SUMS_ZERO = ("AddBackward0", "SubBackward0", "NegBackward0", "SumBackward0", "SumBackward1",
              "MeanBackward0", "MeanBackward1", "CatBackward0", "StackBackward0")  # fmt: skip


def _zero_factor(data: torch.Tensor, g: _Context, twice: list, kid=None) -> str:
    """What an all-zero factor of a product is: a parameter of the graph at 0 (its storage is a
    leaf's, or the factor is made from leaves at 0 (``kid``, the node that made it: adaLN-Zero's
    gate computed by a zero-initialised Linear), named by ``_at_zero``), the zero of a
    piecewise-linear op's second derivative passed on (the factor is no leaf's and its own graph,
    from ``kid``, holds a _TWICE node: a factor made without one, such as a mask or weight of 0.0
    beside a u_xx, is not that zero), or a multiplication by zero."""
    zeros = _zero_params(data, g, kid)
    if zeros:
        return _at_zero(zeros, g, computed=not _same_storage(data, zeros[0]))
    seen, todo, found = set(), [kid] if kid is not None else [], set()
    while todo and twice:  # the second-derivative ops whose zero reaches the factor: through
        fn = todo.pop()  # ops that keep a zero and products, not past a product by a zero (a
        if fn in seen:  # weight of 0.0 times a u_x: review 46 R4)
            continue
        seen.add(fn)
        name = type(fn).__name__
        if name in _TWICE or name == "SgnBackward0":
            found.add(_TWICE[name][0] if name in _TWICE else "abs")
            continue
        if name in _FACTORS:
            raw = [getattr(fn, f"_raw_saved_{n}", None) for n in _FACTORS[name]]
            data = [r.data if r is not None and r.unpack_hook is None else None for r in raw]
            if name == "MulBackward1" and getattr(fn, "_saved_other", None) == 0:
                continue  # a multiplication by the number 0: that is the zero
            zero = [i for i, d in enumerate(data) if d is not None and d.is_floating_point()
                    and not d.any()]  # fmt: skip
            kids = [c for c, _ in fn.next_functions]
            if zero:  # follow the zero operand: one made by no op (0.0, a mask) is the zero
                todo.extend(kids[i] for i in zero if i < len(kids) and kids[i] is not None)
                continue
        elif name not in _KEEPS_ZERO and name not in _SUMS_ZERO:
            continue  # an op whose result need not be zero where its input is
        todo.extend(c for c, _ in fn.next_functions if c is not None)
    twice = [op for op in twice if op in found]
    if twice:
        return (
            f"a product with the zero of {' or '.join(twice)}'s derivative differentiated again "
            "(its second derivative, multiplied on)"
        )
    return _TIMES


_TIMES = "a multiplication by zero (a weight of 0.0, an all-zero mask, a state reset to 0)"
# the edge of a layer's weight whose gradient is a product with the layer's input (x @ W.T + b)
_INPUT_EDGE = {"AddmmBackward0": 2}


def _linear_weight(fn) -> bool:
    """``fn`` is x @ W.T (``F.linear`` without a bias): a matrix product whose second factor is
    the transpose of a leaf."""
    kid = fn.next_functions[1][0] if len(fn.next_functions) > 1 else None
    return (
        type(fn).__name__ == "MmBackward0" and type(kid).__name__ == "TBackward0"
        and hasattr(kid.next_functions[0][0], "variable")
    )  # fmt: skip


def _zero_input(kid, g: _Context) -> str:
    """A layer's weight edge whose zero factor is the layer's input (made by ``kid``): a ReLU the
    report flags as dead (``g.dead``) reached through ops that keep a zero, named; else zero
    features."""
    seen, todo = set(), [kid]
    while todo and len(seen) < 200:
        fn = todo.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        if fn in g.dead:
            return "a layer whose input is all zero: a ReLU before it is all zero (dead)"
        if type(fn).__name__ in _KEEPS_ZERO:
            todo.extend(c for c, _ in fn.next_functions)
    return "a layer whose input is all zero (a dead ReLU or zero features before it)"


_BIAS_EDGE = {"AddmmBackward0": 0, "ConvolutionBackward0": 2, "NativeBatchNormBackward0": 2,
              "NativeLayerNormBackward0": 2, "MulBackward0": -1, "MmBackward0": -1,
              "BmmBackward0": -1, "MvBackward0": -1}  # fmt: skip
# ops whose result is zero where their input is (0 to 0: sigmoid, cos, exp are not; the first
# input: a gather's or an embedding's table): what a zero factor may be made by
_KEEPS_ZERO = ("ViewBackward0", "UnsafeViewBackward0", "TBackward0", "TransposeBackward0",
               "PermuteBackward0", "ExpandBackward0", "UnsqueezeBackward0", "SqueezeBackward0",
               "SqueezeBackward1", "SplitBackward0", "SplitWithSizesBackward0", "SliceBackward0",
               "SelectBackward0", "CloneBackward0", "ReshapeAliasBackward0", "RepeatBackward0",
               "UnbindBackward0", "AsStridedBackward0", "DiagonalBackward0", "FlipBackward0",
               "RollBackward0", "ToCopyBackward0", "AliasBackward0", "IndexBackward0",
               "IndexSelectBackward0", "GatherBackward0", "EmbeddingBackward0", "NegBackward0",
               "TanhBackward0", "SinBackward0", "SinhBackward0", "AtanBackward0", "AsinBackward0",
               "AsinhBackward0", "AtanhBackward0", "ErfBackward0", "ReluBackward0",
               "GeluBackward0", "SiluBackward0", "SumBackward0", "SumBackward1", "MeanBackward0",
               "MeanBackward1", "CatBackward0", "StackBackward0")  # fmt: skip
# of those, the ops whose result is zero only where all their inputs are (a cat of zeros)
_KEEPS_ALL = ("CatBackward0", "StackBackward0")


def _zero_read_on_the_way(g: _Context, node, t: torch.Tensor) -> list:
    """After backward (the saved values freed, the leaves readable): the parameters at zero (all
    zero, floating, not ``t``) that a product on the way from the loss to ``node`` reads
    (``_BIAS_EDGE``), directly or through ops that keep a zero (``_zero_chain``); a bias edge is
    not followed: adding a zero blocks nothing. The parents of each node are found once per
    call (``_parents``): asked per parameter, a walk of every edge each time."""
    parents = _parents(g)
    above, todo = {node}, [node]
    while todo:
        for up in parents.get(todo.pop(), ()):
            if up not in above:
                above.add(up)
                todo.append(up)
    place = _memo("place", g, lambda: {fn: i for i, fn in enumerate(g.nodes)})
    ordered = sorted(above, key=lambda fn: place.get(fn, len(place)))  # the graph's order, not
    starts = [c for fn in ordered for c in _product_inputs(fn) if c not in above]  # the set's
    found = [v for c in starts for v in _making_zero(c, _zero_chain([c], above))]
    return [v for v in dict.fromkeys(found) if v is not t]


def _parents(g: _Context) -> dict:
    """Once per call: node -> the nodes whose inputs it is (``g.kids`` read the other way)."""

    def make():
        parents = {}
        for fn, kids in g.kids.items():
            for child in kids:
                parents.setdefault(child, []).append(fn)
        return parents

    return _memo("parents", g, make)


def _making_zero(fn, zeros: list) -> list:
    """``zeros`` (leaves at zero reached from ``fn``) if they make ``fn``'s value zero
    (``_zero_by``), else none: a dead ReLU's zero reached from a zero bias beside a non-zero
    weight is the ReLU's, not the bias's (review 47 S1)."""
    return zeros if zeros and _zero_by(fn, {id(v): v for v in zeros}) else []


def _zero_chain(starts: list, avoid=(), most: int = 400) -> list:
    """The leaves at zero (all zero, floating, requiring grad) reached from the nodes ``starts``
    through products and ops that keep a zero (``_KEEPS_ZERO``), not through ``avoid``, at most
    ``most`` nodes: what a zero factor may be made by (an exp or a sum of them is not zero)."""
    found, seen, todo = [], set(), list(starts)
    while todo and len(seen) < most:
        fn = todo.pop()
        if fn in seen:
            continue
        seen.add(fn)
        v = getattr(fn, "variable", None)
        if (
            isinstance(v, torch.Tensor) and v.is_floating_point() and v.numel()
            and not v.any() and v.requires_grad
        ):  # fmt: skip
            found.append(v)
        kids = [c for c, _ in fn.next_functions if c is not None]
        todo.extend(
            c for c in (kids if type(fn).__name__ in (*_KEEPS_ZERO, "AddmmBackward0")
                        else _product_inputs(fn))  # a Linear's output is zero: both zero
            if c not in avoid
        )  # fmt: skip
    return list(dict.fromkeys(found))


def _product_inputs(fn) -> list:
    """The inputs of a product ``fn`` (``_BIAS_EDGE``: x * y, a matrix product, a Linear, a
    convolution, a norm's gamma) a zero of which zeroes its other inputs' gradient: not a bias
    edge; none for another op."""
    skip = _BIAS_EDGE.get(type(fn).__name__)
    if skip is None:
        return []
    return [c for i, (c, _) in enumerate(fn.next_functions) if c is not None and i != skip]


def _same_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    try:
        return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    except RuntimeError:  # noqa: BLE001 - a tensor without storage: not a parameter's
        return False


def _zero_params(data: torch.Tensor, g: _Context, kid) -> list:
    """The parameters at zero an all-zero factor ``data`` is: the leaf whose storage it is, or
    the leaves at zero the node that made it (``kid``) is made from (``_zero_chain``)."""
    leaf = next(
        (v for v, _ in g.leaves.values() if v.requires_grad and _same_storage(data, v)), None
    )
    frozen = (  # a frozen parameter of a module named (a zero conv with requires_grad_(False))
        (p for _, m in g.modules for p in m.parameters(recurse=False) if not p.requires_grad)
        if leaf is None and kid is None
        else ()
    )
    if leaf is None:
        leaf = next((p for p in frozen if p.numel() and _same_storage(data, p)), None)
    if leaf is not None:
        return [leaf]
    return _making_zero(kid, _zero_chain([kid])) if kid is not None else []


def _at_zero(zeros: list, g: _Context, computed: bool) -> str:
    """A zero factor made by parameters at zero, named, and whether they can move: one in no
    optimizer named never does, so what it multiplies never gets a gradient."""
    names = ", ".join(dict.fromkeys(g.label(v) for v in zeros))
    frozen = [v for v in zeros if not v.requires_grad]
    zeros = [v for v in zeros if v.requires_grad]
    stuck = [v for v in zeros if g.held["opt"] and id(v) not in g.held["opt"]]
    return (
        ("a factor computed from " if computed else "a product with ")
        + f"{names}, {'parameters' if ', ' in names else 'a parameter'} {_AT_ZERO}"
        + (
            f"; {', '.join(g.label(v) for v in frozen)} is frozen (requires_grad is False): it "
            "never moves, so the zero stays"
            if frozen
            else ""
        )
        + (
            f"; {', '.join(dict.fromkeys(g.label(v) for v in stuck))} is in no optimizer named: "
            "it never moves by the optimizers named (one not named may hold it), so the zero stays"
            if stuck
            else ""
        )
    )


def _on_the_way(g: _Context, node) -> list:
    """(step ops such as floor and sign, ops such as %) by name, on some path from the loss to
    ``node``."""
    parents = collections.defaultdict(list)
    for fn, kids in g.kids.items():
        for child in kids:
            parents[child].append(fn)
    below, todo = {node}, [node]  # the nodes from which node is reached
    while todo:
        for up in parents[todo.pop()]:
            if up not in below:
                below.add(up)
                todo.append(up)
    names = {type(fn).__name__ for fn in below}
    twice = sorted({f"{_TWICE[type(fn).__name__][0]} ({type(fn).__name__})" for fn in below
                    if type(fn).__name__ in _TWICE and fn is not node})  # fmt: skip
    return (
        sorted({_STEPS[n] for n in names if n in _STEPS}),
        sorted({_JUMPS[n] for n in names if n in _JUMPS}),
        twice,
    )


_UNREAD = (
    "; on the way, values saved behind saved-tensor hooks (a checkpoint, offloading) were not "
    "read (reading them would run the hooks), so a cause among them (a clamp at its bound, a "
    "dead ReLU, a multiplication by zero) is not ruled out: to read them, call it on a loss "
    "made without the checkpoint or hooks"
)


def _unread(g: _Context, node) -> str:
    """``_UNREAD`` where some node on a path from the loss to ``node`` saved a tensor behind an
    unpack hook (``checkpoint(use_reentrant=False)``, ``saved_tensors_hooks``): the value reads
    (``_zero_nodes``, ``_dead_relus``) skip those by design."""
    if g.unread is None:  # the hooked nodes and every node below them, once per report
        g.unread, todo = set(g.hooked), list(g.hooked)
        while todo:
            for child in g.kids.get(todo.pop(), ()):
                if child not in g.unread:
                    g.unread.add(child)
                    todo.append(child)
    return _UNREAD if node is not None and node in g.unread else ""


def _dead_relus(nodes: list) -> set:
    """ReLU nodes whose saved output is all zero (read only where no unpack hook would run)."""
    dead = set()
    for fn in nodes:
        if type(fn).__name__ in ("ReluBackward0", "ThresholdBackward0") and _SHOWS_HOOKS:
            raw = getattr(fn, "_raw_saved_result", None) or getattr(fn, "_raw_saved_self", None)
            if (
                raw is not None
                and raw.unpack_hook is None
                and raw.data is not None
                and not raw.data.any()
            ):
                dead.add(fn)
    return dead


def _cut_by(dead: set, root, target, kids: dict) -> bool:
    """Whether every path from ``root`` to ``target`` passes through a node in ``dead``, or an
    edge in it (``(node, i)``: the node's ``next_functions[i]``)."""
    edges = {k for k in dead if isinstance(k, tuple)}
    seen, todo = {root}, [root] if root not in dead else []
    while todo:
        fn = todo.pop()
        if fn is target:
            return False
        out = kids.get(fn, ())
        if edges:
            out = [c for i, (c, _) in enumerate(fn.next_functions) if (fn, i) not in edges and c]
        for child in out:
            if child not in seen and child not in dead:
                seen.add(child)
                todo.append(child)
    return True


def _view_chain(t: torch.Tensor, op: str) -> str:
    """The view ops that make ``t`` from its ``_base``, first applied first (``op`` alone where
    the graph does not show them all)."""
    ops, fn = [], t.grad_fn
    base = t._base.grad_fn if t._base is not None else None
    while fn is not None and base is not None and fn is not base and len(ops) < 8:
        ops.append(type(fn).__name__.removesuffix("Backward0"))
        fn = fn.next_functions[0][0] if fn.next_functions else None
    if fn is base and ops:
        return (
            (", then ".join(reversed(ops)) + " (the order it was viewed in)")
            if len(ops) > 1
            else ops[0]
        )
    return op.removesuffix("Backward0")


def _rule(t: torch.Tensor, grad, g: _Context) -> tuple[str, str, str]:
    """(rule, why, fix) for one tensor: the first rule of autograd's that explains its .grad."""
    if t.grad_fn is not None and (found := _stand_in(t, grad, g)):
        return found
    loss = g.loss
    off = grad is None and t.grad_fn is not None and loss is not None and loss.grad_fn is not None
    if off and t.grad_fn not in g.node_set and not _kept_on(t, g):  # retain_grad() cannot help
        op, below = type(t.grad_fn).__name__, _leaves_below(t.grad_fn, most=5)
        source = ", ".join(g.label(v) for v in below[:3]) or "no leaf"
        used = [g.label(v) for v in below if id(v) in g.leaves]
        code = used[0] if used and " " not in used[0] else "leaf"
        source_fn = t.grad_fn.next_functions[0][0] if t.grad_fn.next_functions else None
        if t._base is not None and t._base.grad_fn in g.node_set:  # a view of a view of it
            source_fn = t._base.grad_fn
        if (
            op.startswith(_VIEWS)
            and source_fn in g.node_set
            and not hasattr(source_fn, "variable")  # a view of a leaf: the leaf's .grad is it
        ):  # a copy or view of an activation the loss does use: that activation's gradient
            x = g.label(t) if g.label(t).replace(".", "_").isidentifier() else "this_tensor"
            return (
                "not a leaf, and not on the graph",
                f"made by {op} from a tensor the loss's graph does use (the output of "
                f"{type(source_fn).__name__}), but this view is a side branch: the loss does not "
                "depend on it, so retain_grad() on it stays None",
                (
                    f"take the gradient of the tensor it is a view of, {x}._base: "
                    f"{x}._base.retain_grad() before backward (read {x}._base.grad after), or "
                    f"torch.autograd.grad(loss, {x}._base)"
                    if t._base is not None
                    else "take the gradient of the tensor it was made from: retain_grad() on "
                    "that tensor where the layer makes it (a forward hook on the layer: "
                    "layer.register_forward_hook(lambda m, i, o: o.retain_grad()), o[0] where it "
                    "returns a tuple; read o.grad after backward), or torch.autograd.grad(loss, "
                    "that_tensor)"
                )
                + f"; that gradient through the same {_view_chain(t, op)} has this tensor's "
                "layout",
            )
        return (
            "not a leaf, and not on the graph",
            f"made by {op} from {source}, but the loss's graph does not contain it: "
            + (
                f"it reaches {', '.join(used)} through another tensor, so this is a new tensor, not "
                "the one the forward used (a property or a fresh view makes one at each "
                "access; or a second computation)"
                if used
                else "it is not used for this loss"
            )
            + "; .grad is kept only for leaves, and retain_grad() on it would stay None",
            f"read the .grad of {used[0]}, the leaf it is made from, or hook that leaf "
            f"({code}.register_hook(fn): fn may return the gradient edited, rows set to zero)"
            if used
            else "None is right for this loss; find the tensor the loss does use",
        )
    if t.grad_fn is not None and not t.retains_grad:
        op = type(t.grad_fn).__name__
        source = ", ".join(g.label(v) for v in _leaves_below(t.grad_fn)) or "no leaf"
        where = _kept_on(t, g)
        if where and (
            _made_in_forward(where, g, every=True)
            or any(
                id(v) in g.held["module"] or id(v) in g.held["opt"] or id(v) in g.names
                for v in _leaves_below(t.grad_fn)
            )
        ):  # forward makes it on every call, or from a trained leaf or an input: an activation
            where = None  # (else from a leaf no one holds, randn(.., requires_grad=True): a weight)
        kept = f"; kept on {where} as a plain tensor, which no optimizer holds" if where else ""
        below = _leaves_below(t.grad_fn, most=5)
        free = (  # kept on no module, made from plain leaves that nothing holds: one of its
            # size (x @ W of a smaller W is an activation), or several (low-rank factors)
            not where and 0 < len(below) < 5 and all(
                not isinstance(v, torch.nn.Parameter)
                and (len(below) > 1 or v.numel() == t.numel())
                and not any(id(v) in h for h in g.held.values()) and id(v) not in g.names
                for v in below
            )
        )  # fmt: skip
        direct = any(hasattr(c, "variable") for c, _ in t.grad_fn.next_functions if c is not None)
        if op in _COPIES and (where or direct):  # a copy of a leaf itself
            return (
                "not a leaf: a copy",
                f"{_COPIES[op]} of {source}, which gets the gradient; a copy is not a leaf{kept}",
                _as_parameter(
                    where,
                    " (.cuda(), .to() or math on a Parameter returns a plain "
                    "tensor: make the value on its device first, or move the model: model.to(d))",
                )
                if where
                else f"None is right for a copy: read the .grad of {source}, the leaf it was made "
                "from (or call .retain_grad() on the copy before backward())"
                if any(  # a leaf someone holds (a parameter, an optimizer's, one named) trains
                    isinstance(v, torch.nn.Parameter)
                    or id(v) in g.names
                    or any(id(v) in h for h in g.held.values())
                    for v in below
                )
                else "make the tensor where it is used (torch.randn(..., "
                "device=d, dtype=x, requires_grad=True)), or move or cast it first, then call "
                ".requires_grad_() on the result; a weight: give that leaf to the optimizer",
            )
        if op in _COPIES and not free:  # a cast of a computed tensor: not the leaf's copy
            return (
                "not a leaf",
                f"{_COPIES[op]} of a tensor computed from {source} "
                f"({type(t.grad_fn.next_functions[0][0]).__name__}), not of a leaf: the leaf's "
                ".grad is the gradient through the ops in between, not this one's; .grad is kept "
                "only for leaves (reading it warns)",
                "call .retain_grad() on it (or on the tensor it copies) before backward(): its "
                ".grad is then this tensor's gradient",
            )
        if free:  # a weight: math on a leaf (randn(2, requires_grad=True) * 0.1); that leaf is lost
            name, many = g.names.get(id(t), "w"), len(below) > 1
            init = f"<your expression for {name}: {_ops_below(t.grad_fn)} on {source}>"
            return (  # a lost weight and an activation of an input not named look alike here
                "not a leaf",
                f"made by {op} from {source}, which nothing named holds and which "
                f"get{'' if len(below) > 1 else 's'} the gradient; .grad is kept only for leaves (reading "
                "it warns), and an optimizer refuses a non-leaf",
                f"by what it is: a weight meant to train: make the leaf itself, {name} = ({init})"
                f".requires_grad_() with no requires_grad=True inside, and give {name} to the "
                "optimizer; "
                + (
                    f"leaves meant to train ({name} = a * b, a @ b): keep "
                    "each in a name with requires_grad=True, give them to the optimizer and "
                    f"compute {name} from them in every step; an activation of what you did not "
                    "name: call .retain_grad() on it before backward() (the .grad of "
                    f"{source} is the gradient with respect to them, not to it)"
                    if many
                    else "an activation of an input you did not name (a normalised image): call "
                    ".retain_grad() on it before backward() (the input's .grad is the gradient with "
                    "respect to the input, not to it)"
                ),
            )
        return (
            "not a leaf",
            f"made by {op} from {source}; .grad is kept only for leaves (reading it warns){kept}",
            _as_parameter(
                where, " (math on a Parameter returns a plain tensor: compute the value first)"
            )
            if where
            else "call .retain_grad() on it after the forward pass that computes it, before "
            "backward() (the .grad of the leaf it was made from is the gradient with respect to "
            "that leaf, not to it)",
        )
    if not t.requires_grad:
        twin = _twin(t, g)
        if twin:
            return (
                "a detached copy",
                f"it shares its memory with {twin} but does not require grad: a detached view of it "
                "(state_dict(), .data, .detach()); autograd writes the gradient to the parameter",
                f"read the parameter's .grad ({twin}.grad; iterate model.named_parameters(), not state_dict())",
            )
        copy = _copy_on_graph(t, g)
        frozen = isinstance(t, torch.nn.Parameter)
        why = ("frozen: requires_grad is False (requires_grad_(False), or a frozen layer)" if frozen
               else "requires_grad is False: autograd records nothing for it and builds no AccumulateGrad")  # fmt: skip
        kept = _kept_on(t, g) if not frozen else None
        return (
            "requires_grad off" if not frozen else "frozen",
            why
            + (f"; {copy} is on the graph instead" if copy else "")
            + (
                f"; kept on {kept}, assigned in forward"
                if kept and _made_in_forward(kept, g)
                else f"; a plain tensor kept on {kept} (not a parameter or buffer)"
                if kept
                else ""
            ),
            (
                "if you froze it on purpose, None is right: leave it (and skip it where you read .grad "
                "or register hooks); to train it, requires_grad_() before the forward pass that builds "
                "the loss, and give it to the optimizer" + _eval_too(t, g)
            )
            if frozen
            else _requires_fix(t, g),
        )
    on_graph = id(t) in g.leaves or t is loss or (t.grad_fn is not None and t.grad_fn in g.node_set)
    if loss is not None and not on_graph:
        rule, why, fix = _drawn(t, _not_reached(t, g), g)
        fix += "" if rule.endswith("a detached copy") else _fast_hedge(t, g)
        twice = sorted({f"{_TWICE[n][0]} ({n})" for n in _twice_found(g)})
        named = g.held["module"].get(id(t), "").split(".")
        # kin: a tensor of the container that holds its module (model.4's is model; gan.G.0's is
        # gan.G, not gan: a generator beside its critic in one container is not kin of it)
        parent = ".".join(named[:-2]) or named[0]
        kin = parent and parent in _leaf_parents(g)
        ops = sorted({_TWICE[n][0] for n in _twice_found(g)})
        if twice and kin and named[-1] == "bias":  # added after the last nonlinearity: in no u_x
            why += (
                f"; the loss's graph holds {', '.join(twice)}, a derivative differentiated again "
                "(create_graph=True): a bias added after a model's last nonlinearity (an output "
                "layer's bias) is in no derivative of the output to the input, whatever the "
                f"activation; one before the last {' or '.join(ops)} can drop out through that "
                "op's zero second derivative"
            )
            fix = (
                "if it is added after the last nonlinearity and the term is a derivative of the "
                "output (a PINN residual u_xx, a gradient penalty), None is right for this term, "
                "with any activation: a term on the output itself (a boundary or data term) trains "
                f"it; if it is before the last {' or '.join(ops)}, a smooth activation (nn.Tanh, "
                "nn.Softplus, nn.SiLU, nn.GELU) in place of that op puts it on the graph; else: "
                + fix
            )
        elif twice and kin:  # a loss made from a gradient through ReLU, of a model it trains
            why += (
                f"; the loss's graph holds {', '.join(twice)}, the derivative of a piecewise-"
                "linear op differentiated again (create_graph=True): its second derivative is "
                "zero, and a tensor that reaches the loss only through it drops out of the graph "
                f"(for example a layer after the last {' or '.join(ops)}, in a second derivative "
                "such as u_xx)"
            )
            fix = (
                f"if it is after the last {' or '.join(ops)} and the loss differentiates a gradient "
                "again (a PINN residual u_xx), a smooth activation (nn.Tanh, nn.Softplus, nn.SiLU, "
                "nn.GELU) in place of that op keeps it on the graph; if the term does not depend on "
                "it (a first-order gradient penalty), None is right; else: " + fix
            )
        if grad is not None and grad.any() and _reentrant(g):
            return (
                _CHECKPOINTED,
                "the loss's graph holds a reentrant checkpoint (CheckpointFunctionBackward), whose "
                "backward recomputes what runs inside it on a graph of its own: whether this "
                "gradient came from this loss is not told",
                "nothing to fix if this tensor runs inside the checkpoint; if not, its .grad is from "
                "another loss or an earlier backward (not cleared: zero_grad())",
            )
        if grad is not None and grad.any():  # decided by the graph, not by .grad
            return (
                "has a gradient, but not from this loss",
                "its .grad comes from another term or pass (the total you called backward() on, "
                "another loss, p.grad set by hand, DDP's average); this loss: " + why,
                fix,
            )
        return rule, why, fix
    if grad is None:
        return _not_written(t, g)
    if grad.any():
        padding = _padding_row(t, grad, g)
        if padding is not None:
            return (
                "zero in one row: padding_idx",
                f"row {padding} of its gradient is zero, and always will be: nn.Embedding("
                f"padding_idx={padding}) gives that row no gradient, so the vector of index "
                f"{padding} never trains; right if {padding} only pads, wrong if it is a real "
                "index (a first class, relation or token)",
                f"padding_idx=None, or number the real indices from {padding + 1} so that "
                f"{padding} only pads",
            )
        return _trained(t, ("has a gradient", "", ""), g)
    return _zero(t, grad, g)


def _requires_fix(t: torch.Tensor, g: _Context) -> str:
    """The fix for a plain tensor without requires_grad: an input wants requires_grad_(); an
    output made without gradients (no_grad, inference_mode, an encode() or predict() wrapper)
    does not: requires_grad_() on it makes a new leaf, cut off from the model that made it."""
    as_input = "an input you want a gradient for: x.requires_grad_() before the forward pass"
    buffer, own = next(
        ((f"{n}.{k}".lstrip("."), type(m).__module__.startswith("torch."))
         for n, m in g.modules for k, b in m.named_buffers(recurse=False) if b is t),
        (None, False),
    )  # fmt: skip
    if buffer and (own or not t.is_floating_point()):  # BatchNorm's statistics, a step count
        return f"a buffer ({buffer}) is state (a statistic, a count), not trained: None is right"
    if buffer:
        return (
            f"a buffer ({buffer}) is state or a constant (a mask): None is right; to train it, make "
            "it an nn.Parameter instead of a buffer"
        )
    where = _kept_on(t, g)
    attr = (where or "").rpartition(".")[2]
    constant = "" if t.is_floating_point() or t.is_complex() else "integer"
    if where and _made_in_forward(where, g) and not constant:
        owner = _by_name(g).get(where.rpartition(".")[0])
        constant = _made_without_grad(type(owner)).get(attr, "")
    if constant == "no_grad":
        return (
            f"{where} is made under torch.no_grad() (or .detach()) in forward: None is right for a "
            f"constant; for its gradient, remove the no_grad, then self.{attr}.retain_grad() in "
            "forward (x.requires_grad_() first if no layer before it trains)"
        )
    if constant:  # nothing before it can carry a gradient
        return (
            f"a constant{f' ({where})' if where else ''}: nothing before it can carry a gradient "
            "(an integer or boolean tensor, a comparison, argmax, rounding; a mask or an index): "
            "None is right"
        )
    if where and _made_in_forward(where, g):  # an activation forward keeps (self.feat = ...)
        return (
            f"an activation forward keeps ({where}): nothing before it requires grad (frozen "
            f"layers, an input without it): x.requires_grad_() on the input before the forward "
            f"pass, and self.{where.rpartition('.')[2]}.retain_grad() in forward"
        )
    if where:  # a module's attribute: meant to be learned, or a constant
        return (
            f"to train it: {_as_parameter(where)} (requires_grad_() alone gives a .grad, but no "
            f"optimizer holds it); a constant (a mask): None is right; if it is {as_input}"
        )
    if t.is_inference():
        return f"it was made under inference_mode: {_INFERENCE_FIX}"
    as_output = (
        "a model's output made without gradients (under torch.no_grad() or inference_mode, or by a "
        "wrapper that uses them: encode(), predict(), generate()): compute it with gradients "
        "enabled (call the model's forward, not the wrapper); requires_grad_() on it would make a "
        "new leaf, cut off from the model"
    )
    untrained = [  # parameters of the modules named that require grad but are not on the graph
        p for _, m in g.modules for p in m.parameters(recurse=False)
        if p.requires_grad and id(p) not in g.leaves
    ]  # fmt: skip
    if t.is_inference() or (untrained and (g.loss is None or g.loss.grad_fn is None)):
        return f"if it is {as_output}; if it is {as_input}"
    return f"if it is {as_input}; if it is {as_output}"


def _as_parameter(where: str, made: str = "") -> str:
    """The fix for a module's attribute kept as a plain tensor (``where``: ``model.memory.keys``)."""
    return (
        f"self.{where.rpartition('.')[2]} = nn.Parameter(value) in __init__, before the optimizer "
        f"is made{made}"
    )


_INFERENCE_FIX = (
    "torch.enable_grad() does not leave inference mode; use torch.inference_mode(False) around "
    "the computation (Lightning: Trainer(inference_mode=False) with torch.enable_grad() in the "
    "step), and remake there what was made under inference mode (layers too), or .clone() it "
    "there (an input: x.clone().requires_grad_())"
)


def _made_in_forward(where: str, g: _Context, every: bool = False) -> bool:
    """Whether the module's forward (read with ``ast``; ``every``: on every call, not a lazy
    ``if self.w is None:``) assigns the attribute ``where`` names (``model.feat``): an
    activation it keeps, not a value to make a parameter. Unreadable source: False."""
    owner, _, attr = where.rpartition(".")
    module = _by_name(g).get(owner)
    found = _assigned_per_call(type(module)).get(attr) if module is not None else None
    return found is not None and (found[1] or not every)


def _by_name(g: _Context) -> dict:
    """Once per call: ``dict(g.modules)`` (name -> module, the last of a name), read per tensor."""
    if g.by_name is None:
        g.by_name = dict(g.modules)
    return g.by_name


def _module_named(owner: str, g: _Context):
    """The first module named ``owner`` in ``g.modules``, or None: a map made once per call, not
    a walk of the modules per tensor."""
    if g.first_named is None:
        g.first_named = {}
        for name, module in g.modules:
            g.first_named.setdefault(name, module)
    return g.first_named.get(owner)


def _twice_found(g: _Context) -> set:
    """Once per call: the names of the graph's nodes that ``_TWICE`` lists (asked per tensor, a
    walk of every node each)."""
    if g.twice_found is None:
        g.twice_found = {type(f).__name__ for f in g.nodes} & _TWICE.keys()
    return g.twice_found


def _leaf_parents(g: _Context) -> set:
    """Once per call: each ``p`` such that a leaf's name starts with ``p + "."`` (its name cut
    at any dot), so "a leaf under ``parent``" is one look-up, not a walk of the leaves."""
    if g.leaf_parents is None:
        g.leaf_parents = set()
        for i in g.leaves:
            name = g.held["module"].get(i, "")
            g.leaf_parents.update(name[:k] for k, c in enumerate(name) if c == ".")
    return g.leaf_parents


def _kept_on(t: torch.Tensor, g: _Context) -> str | None:
    """``model.memory.keys``: the attribute of a module named that holds ``t`` as a plain tensor
    (not in its parameters or buffers). The attributes are read once per call (asked per
    parameter, a walk of every module's would cost a product); the first one found is named."""
    if g.attribute_of is None:
        g.attribute_of = {}
        for name, module in g.modules:
            for key, value in vars(module).items():
                g.attribute_of.setdefault(id(value), (value, f"{name}.{key}"))
    value, where = g.attribute_of.get(id(t), (None, None))
    return where if value is t else None


def _embedding_of(t: torch.Tensor, g: _Context):
    """The nn.Embedding or nn.EmbeddingBag named whose weight ``t`` is, or None. The map is made
    once per call: asked for each parameter, a walk over the modules would cost their product."""
    if g.embeddings is None:
        g.embeddings = {
            id(m.weight): m for _, m in g.modules
            if isinstance(m, (torch.nn.Embedding, torch.nn.EmbeddingBag))
        }  # fmt: skip
    module = g.embeddings.get(id(t))
    return module if module is not None and module.weight is t else None


def _padding_row(t: torch.Tensor, grad: torch.Tensor, g: _Context) -> int | None:
    """The padding_idx of the nn.Embedding named whose weight ``t`` is, when that row of ``grad``
    is zero (torch gives it no gradient)."""
    module = _embedding_of(t, g)
    index = getattr(module, "padding_idx", None)
    if index is not None and grad.dim() == 2 and not grad[index].any():
        return index % grad.shape[0]
    return None


def _zero_rows(t: torch.Tensor, grad: torch.Tensor, g: _Context) -> tuple[int, int] | None:
    """(rows whose gradient is all zero, rows) for a gradient zero in at most half its rows (dim
    0): a few rows that silently do not train. None for an embedding's weight (rows of indices
    not in the batch are zero by design) and for most rows zero (a loss that reads a few outputs,
    one class's score, is ordinary)."""
    if grad.dim() < 2 or grad.shape[0] < 2:
        return None
    if _embedding_of(t, g) is not None:
        return None
    zero = int((~grad.detach().reshape(grad.shape[0], -1).ne(0).any(1)).sum())
    return (zero, grad.shape[0]) if 0 < 2 * zero <= grad.shape[0] else None  # a few rows


def _trained(t: torch.Tensor, found: tuple[str, str, str], g: _Context) -> tuple[str, str, str]:
    """A tensor with a gradient: flagged if optimizers were named and none of them holds it, or
    if forward makes it anew on every call."""
    if g.held["opt"] and t.is_leaf and id(t) not in g.held["opt"]:  # seen at run time
        if where := _per_call(g.held["module"].get(id(t), ""), g):
            return _recreated(where[0], _BY_OPT, _rewrapped(g.held["module"][id(t)], g))
    if g.held["opt"] and t.is_leaf and id(t) in _fast_pairs(g):
        module = _fast_pairs(g)[id(t)]
        return (
            "not in the optimizer: a detached copy",
            "it has a gradient, but no optimizer named holds it: a plain tensor (not an "
            f"nn.Parameter); the loss reaches such tensors of the shapes of all of {module}'s "
            "parameters and none of those: if they are weights made from them and detached (fast "
            "weights, a functional copy), see those parameters",
            _adapted_fix(g.label(t), module.partition(".")[0], _partner(g, id(t), module)),
        )
    if g.held["opt"] and t.is_leaf and id(t) not in g.held["opt"] and (source := _copy_of(t, g)):
        return (
            "not in the optimizer: a copy",
            "it has a gradient, but no optimizer named holds it, and its values equal or track "
            f"those of a parameter of {source.partition('.')[0]} that an optimizer holds but the "
            "loss does not reach: the loss uses a copy (a target, EMA or teacher network) instead "
            "of the trained module",
            f"compute the prediction with {source.partition('.')[0]} and keep this copy out of the graph "
            "(its outputs under torch.no_grad(), or requires_grad_(False) on it); do not give "
            "the copy to the optimizer",
        )
    olds = _replaced(t, g)
    if g.held["opt"] and t.is_leaf and id(t) not in g.held["opt"] and olds:  # forward unread
        return (
            "not in the optimizer",
            "it has a gradient, but the optimizer named holds another parameter of its shape "
            "that no module named holds now: the one forward uses is not the one the optimizer "
            "holds (replaced after the optimizer was made"
            + (", on more than one call)" if olds > 1 else ")"),
            "create it once in __init__ and only use it in forward (no assignment there)"
            + (
                "" if olds > 1
                else "; if it was replaced only once (load_state_dict(assign=True), a late "
                "weight_norm), make the optimizer after the model is final, or "
                "opt.add_param_group({'params': [p]})"
            ),
        )  # fmt: skip
    if g.held["opt"] and t.is_leaf and id(t) not in g.held["opt"] and _inputs_only(t, g):
        return found  # an attack or input optimisation: the model is fixed on purpose
    if g.held["opt"] and t.is_leaf and id(t) not in g.held["opt"]:
        plain = not isinstance(t, torch.nn.Parameter) and id(t) not in g.held["module"]
        return (
            "not in the optimizer",
            "it has a gradient, but no param group of the optimizers named holds it: it never moves "
            "(left out when the groups were built, or replaced or added after the optimizer was made)"
            + ("; or it is an input whose gradient you read" if plain else ""),
            (
                "if it is an input whose gradient you read (an adversarial x_adv, a saliency map), "
                "nothing is wrong; if it is a weight meant to train, "
                if plain
                else ""
            )
            + "give it to the optimizer (opt.add_param_group({'params': [p]}), or build the groups from "
            "model.parameters() after the model is final)"
            + (
                "; or, if its values are copied in from parameters the optimizer holds (.data =, "
                "copy_), that copy is the cut: see those parameters"
                if t.shape in _off_graph_shapes(g)
                else ""
            )
            + _fast_hedge(t, g),
        )
    return found


def _inputs_only(t: torch.Tensor, g: _Context) -> bool:
    """The optimizers named hold only tensors that are no parameter (no ``nn.Parameter``, none
    of a module named: an input being optimised, an attack's ``delta``), and the module holding
    ``t`` is in eval mode: a model kept fixed on purpose, not one left out of the optimizer."""
    held = [p for _, p in g.tensors if id(p) in g.held["opt"]]
    holder = next(
        (m for _, m in g.modules if any(p is t for p in m.parameters(recurse=False))), None
    )
    return (
        bool(held)
        and holder is not None
        and not holder.training
        and not any(isinstance(p, torch.nn.Parameter) or id(p) in g.held["module"] for p in held)
    )


@functools.lru_cache(maxsize=512)
def _parsed(fn) -> tuple[ast.Module, int, str, list[str]] | None:
    """(the parsed, dedented source of ``fn``, a function, method or code object; its first
    line; its file's name; its lines), read and never run; None where it cannot be read (a builtin, exec, a
    REPL, a stale file). The one reader of source for every rule here, cached: several rules read
    the same ``forward``. Callers only walk the tree, never change it."""
    try:
        fn = inspect.unwrap(fn) if callable(fn) else fn  # a decorated method: the reader's file
        lines, start = inspect.getsourcelines(fn)
        tree = ast.parse(textwrap.dedent("".join(lines)))
        return tree, start, Path(inspect.getsourcefile(fn) or "").name, lines
    except Exception:  # noqa: BLE001 - reading the reader's source must never stop the report
        return None


def _root(fn):
    """The first statement of ``fn``'s source (its ``def``), or None where it cannot be read."""
    read = _parsed(fn)
    return read[0].body[0] if read and read[0].body else None


@functools.lru_cache(maxsize=256)
def _assigned_per_call(cls: type) -> dict:
    """Attributes that ``cls.forward`` (or a method of ``cls`` it calls on ``self``) assigns
    (``self.w = nn.Parameter(...)``, ``setattr(self, "w", ...)``, ``register_parameter``/
    ``add_module``), read from the source with ``ast``, run never: {attribute: ("Class.method()",
    whether it runs on every call: under no ``if``, loop or ``try`` handler)}; empty where the
    source cannot be read. It only words a fix: a replacement is decided at run time."""
    try:  # the reader's source can be anything (a lambda, exec, partial, a C method, a stale
        # file); reading it must never stop the report: whatever fails here, no source is read
        return _read_assignments(cls)
    except Exception:  # noqa: BLE001 - any failure means "no source": the runtime rules decide
        return {}


def _read_assignments(cls: type) -> dict:
    found, todo, seen = {}, [("forward", True)], set()
    while todo:
        name, every = todo.pop()
        method = inspect.getattr_static(cls, name, None)
        module = getattr(method, "__module__", None) or ""  # None for a class made by exec()
        if name in seen or not inspect.isfunction(method) or module.startswith("torch."):
            continue
        seen.add(name)
        read = _parsed(method)
        if read is None:  # no source: a builtin, exec, a REPL
            continue
        tree = read[0]
        kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
        defs = [n for n in ast.walk(tree) if isinstance(n, kinds)]
        if method.__name__ == "<lambda>":  # getsource gives the whole line: its one lambda
            defs = [n for n in defs if isinstance(n, ast.Lambda)]
        if len(defs) != 1 and not isinstance(defs[0] if defs else None, ast.FunctionDef):
            continue  # several lambdas on the line: which one cannot be told
        root = defs[0]
        where = f"{cls.__name__}.{name}()"
        me = root.args.args[0].arg if root.args.args else "self"  # the name it gives its instance
        for node, always in _runs(root, every):
            targets = (
                node.targets if isinstance(node, ast.Assign)
                else [node.target] if isinstance(node, ast.AnnAssign)
                else []
            )  # fmt: skip
            for target in targets:
                pairs = [(target, node.value)]
                if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                    pairs = list(zip(target.elts, node.value.elts))  # self.ready, self.w = ...
                for left, right in pairs:
                    attr = _attr_of(left, me)
                    if attr and not _keeps(right, me, attr):
                        _found(found, attr, where, always)
                    inner = _attr_of(getattr(left, "value", None), me)  # self.conv.weight = ...
                    if inner and isinstance(left, ast.Attribute) and not _keeps_dotted(left, right):
                        _found(found, f"{inner}.{left.attr}", where, always)
                    item = left.value if isinstance(left, ast.Subscript) else None
                    attr = _attr_of(item, me)  # self.layers[0] = ..., self.d["k"] = ...
                    func = right.func if isinstance(right, ast.Call) else None
                    same = ast.dump(left, False) in (  # self.layers[0] = self.layers[0].to(d)
                        ast.dump(getattr(func, "value", right), False),
                        ast.dump(right, False),
                    )
                    if attr and not same:
                        _found(found, attr, where, always)
            if isinstance(node, ast.Call):
                func, args = node.func, node.args
                setting = getattr(func, "id", "") == "setattr" and args[:1]
                setting = setting and _attr_of(args[0], me, "") == ""
                registering = _attr_of(func, me) in (
                    "register_parameter",
                    "add_module",
                    "register_module",
                )
                first = args[1:2] if setting else args[:1] if registering else []
                if first and isinstance(first[0], ast.Constant) and isinstance(first[0].value, str):
                    _found(found, first[0].value, where, always)
                elif _attr_of(func, me):  # self.helper(...): read it too
                    todo.append((func.attr, always))
    return found


_NO_GRADIENT = {  # calls whose result carries no gradient: a constant (a mask, an index)
    "argmax", "argmin", "argsort", "eq", "ne", "gt", "ge", "lt", "le", "isclose", "isnan",
    "isinf", "logical_and", "logical_or", "logical_not", "logical_xor", "bool", "long", "int",
    "round", "floor", "ceil", "sign", "bernoulli", "multinomial", "randint", "nonzero",
}  # fmt: skip


@functools.lru_cache(maxsize=256)
def _made_without_grad(cls: type) -> dict:
    """Attributes that ``cls.forward`` (read with ``ast``, as ``_assigned_per_call``) only ever
    assigns without gradients: {attribute: "no_grad"} under ``torch.no_grad()``/
    ``inference_mode()`` or with ``.detach()``, {attribute: "constant"} from a comparison or a
    call in ``_NO_GRADIENT`` (``(x > 0).float()``, ``x.argmax(1)``); empty where unreadable."""
    read = _parsed(inspect.getattr_static(cls, "forward", None))
    if read is None:
        return {}
    tree = read[0]
    quiet = set()  # assignments under a with no_grad()/inference_mode()
    for node in ast.walk(tree):
        if isinstance(node, ast.With) and any(
            re.search(r"no_grad|inference_mode", ast.dump(item.context_expr)) for item in node.items
        ):
            quiet.update(id(n) for n in ast.walk(node) if isinstance(n, ast.Assign))
    kinds = collections.defaultdict(set)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign):
            continue
        names = [n.attr for n in node.targets
                 if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)]  # fmt: skip
        calls = {getattr(c.func, "attr", getattr(c.func, "id", "")) for c in ast.walk(node.value)
                 if isinstance(c, ast.Call)}  # fmt: skip
        kind = (
            "no_grad" if id(node) in quiet or "detach" in calls
            else "constant" if calls & _NO_GRADIENT
            or any(isinstance(c, ast.Compare) for c in ast.walk(node.value))
            else ""
        )  # fmt: skip
        for name in names:
            kinds[name].add(kind)
    return {name: k.pop() for name, k in kinds.items() if len(k) == 1 and "" not in k}


@functools.lru_cache(maxsize=256)
def _read(cls: type) -> bool:
    """Whether ``cls.forward``'s source can be read (torch's own modules replace nothing)."""
    try:
        method = inspect.getattr_static(cls, "forward", None)
        if (getattr(method, "__module__", None) or "").startswith("torch."):
            return True
        return inspect.isfunction(method) and bool(inspect.getsource(method))
    except Exception:  # noqa: BLE001 - any failure means "no source", as in _assigned_per_call
        return False


def _found(found: dict, attr: str, where: str, always: bool) -> None:
    old = found.get(attr)
    if old is None or always and not old[1]:
        found[attr] = (where, always)


def _keeps_dotted(left, value) -> bool:
    """``value`` is ``left`` (``self.conv.weight``) or a call on it (``.to(d)``): the same back."""
    func = value.func if isinstance(value, ast.Call) else None
    return ast.dump(left, False) in (
        ast.dump(value, False),
        ast.dump(getattr(func, "value", value), False),
    )


def _rewraps(cls: type) -> list:
    """[(attribute, ``file:line: code``, the value's source)] for each assignment in
    ``cls.forward`` (and the methods it calls on ``self``) of ``self.<a>`` or ``self.<a>.<b>`` to
    ``nn.Parameter(<a value computed in forward>)`` (a local name read inside the call:
    ``self.conv.weight = nn.Parameter(W.squeeze())``): a new leaf, which cuts what made the
    value; read with ``ast``, never run; empty where unreadable."""
    try:
        run = _methods_run(cls)
    except Exception:  # noqa: BLE001 - any failure means "no source": nothing is said
        return []
    found = []
    for _, fn, root, me, where, start in run:
        for n in ast.walk(root):
            if not isinstance(n, ast.Assign) or not isinstance(n.value, ast.Call):
                continue
            if getattr(n.value.func, "attr", getattr(n.value.func, "id", "")) != "Parameter":
                continue
            args = (*n.value.args, *(k.value for k in n.value.keywords))[:1]
            made = getattr(args[0], "func", None) if args else None
            if getattr(made, "attr", getattr(made, "id", "")) in _FRESH:
                continue  # a new tensor of a shape (torch.randn(n, d)): made, not computed
            if _detached(args[0] if args else None) or any(
                k.arg == "requires_grad" and getattr(k.value, "value", True) is False
                for k in n.value.keywords
            ):  # a value cut on purpose (.detach()), or a parameter that never trains: no cut
                continue
            local = any(
                isinstance(a, ast.Name) and a.id != me and a.id not in _LIBRARIES
                for arg in args for a in ast.walk(arg)
            )  # fmt: skip
            for t in n.targets if local else ():
                inner = _attr_of(getattr(t, "value", None), me)
                key = _attr_of(t, me) or (inner and f"{inner}.{t.attr}")
                if key:
                    line = _parsed(fn)[3][n.lineno - 1].strip()
                    at = f"{where}:{start + n.lineno - 1}: {line}"
                    found.append((key, at, ast.unparse(args[0])))
    return found


def _detached(value) -> bool:
    """``value`` is a chain of calls and attributes with ``.detach()`` in it (``h.mean(0).detach()``,
    ``h.detach().clone()``): cut on purpose."""
    while isinstance(value, (ast.Call, ast.Attribute, ast.Subscript)):
        func = value.func if isinstance(value, ast.Call) else None
        if getattr(func, "attr", "") in ("detach", "detach_"):
            return True
        value = getattr(func, "value", None) if func is not None else value.value
    return False


def _rewrapped(path: str, g: _Context, anywhere: bool = False) -> tuple[str, str]:
    """(``file:line: code``, the value's source) where a forward above the parameter at
    ``path`` assigns it ``nn.Parameter(<a value computed in forward>)`` (``_rewraps``); with
    ``anywhere``, any such assignment in the forwards of ``path``'s module and those above it
    (what ``path``'s module computes may be that value); ("", "") elsewhere."""
    modules, parts = _by_name(g), path.split(".")
    for depth in range(len(parts) - (0 if anywhere else 1), 0, -1):
        owner, key = modules.get(".".join(parts[:depth])), ".".join(parts[depth:])
        for got, at, value in _rewraps(type(owner)) if owner is not None else ():
            if anywhere or got == key:
                return at, value
    return "", ""


_LIBRARIES = ("torch", "nn", "F", "np", "numpy", "math")
_FRESH = ("randn", "rand", "zeros", "ones", "empty", "full", "eye", "arange", "linspace",
          "tensor", "Tensor", "FloatTensor", "randn_like", "rand_like", "zeros_like",
          "ones_like", "empty_like", "full_like", "new_zeros", "new_ones", "new_empty",
          "new_full", "new_tensor", "normal")  # fmt: skip


def _keeps(value, me: str, attr: str) -> bool:
    """``value`` is ``self.<attr>`` or a call on it (``self.fc.to(d)``): the same object back."""
    func = value.func if isinstance(value, ast.Call) else None
    return _attr_of(value, me) == attr or (
        isinstance(func, ast.Attribute) and _attr_of(func.value, me) == attr
    )


def _attr_of(node, me: str, attr: str | None = None) -> str | None:
    """``node`` is ``me.<attr>``: that attribute (``me`` itself, with ``attr=""``); else None."""
    if attr == "":
        return "" if isinstance(node, ast.Name) and node.id == me else None
    is_attr = isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
    return node.attr if is_attr and node.value.id == me else None


def _runs(root, every: bool = True):
    """(node, whether it runs on every call) for the nodes of a function, not in a nested def:
    a node under an ``if``, a loop, a ``try`` handler or a conditional expression runs on some
    calls only (``if self.w is None:``, ``if not self.ready:`` and its ``else`` alike)."""
    todo = [(n, every) for n in ast.iter_child_nodes(root)]
    while todo:
        node, always = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        yield node, always
        branches = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.IfExp, ast.ExceptHandler,
                    ast.BoolOp, ast.comprehension, getattr(ast, "match_case", ast.If))  # fmt: skip
        inner = always and not isinstance(node, branches)
        todo += [(n, inner) for n in ast.iter_child_nodes(node)]


def _per_call(path: str, g: _Context) -> tuple[str, str] | None:
    """(where, attribute) when the parameter at ``path`` (``model.attn.rel_h``) is assigned in
    a forward call: its module, or a module above it, assigns it (or the submodule holding it);
    ``where`` says on every call or on some (under an ``if``, a loop)."""
    modules = _by_name(g)
    parts = path.split(".")
    for depth in range(len(parts) - 1, 0, -1):
        owner = modules.get(".".join(parts[:depth]))
        key = ".".join(parts[depth:]) if len(parts) - depth == 2 else parts[depth]
        got = _assigned_per_call(type(owner)) if owner is not None else {}
        found, key = (got.get(key), key) if got.get(key) else (got.get(parts[depth]), parts[depth])
        if found:
            when = "on every call" if found[1] else "on some or all calls"
            return f"{found[0]} assigns self.{key} {when}", key
    return None


def _recreated(where: str, evidence: str, wrapped=("", "")) -> tuple[str, str, str]:
    """A replacement seen at run time (``evidence``) that forward's source makes (``where``);
    ``wrapped``: the line that wraps a value computed in forward in ``nn.Parameter``, and that
    value (``_rewrapped``)."""
    wrap, value = wrapped
    if wrap:
        key = where.split(" assigns self.")[1].split(" ")[0]
        sub, _, attr = key.rpartition(".")
        return (
            "re-created in forward",
            f"{where}, and {evidence}; {wrap}: nn.Parameter(...) makes a new leaf of a value "
            "computed in forward, a cut: what computed it gets no gradient",
            "use the value as a tensor, not a new nn.Parameter: pass it to the op that reads "
            + (
                f"{key} (torch.func.functional_call(self.{sub}, {{'{attr}': {value}}}, args))"
                if sub
                else f"self.{attr} (x @ {value}, F.linear(x, {value}))"
            )
            + "; keep the parameters made once in __init__ as they are (giving the new one to "
            "the optimizer, or copying it in under no_grad, leaves the cut)",
        )
    return (
        "re-created in forward",
        f"{where}, and {evidence}",
        "create it once in __init__ and only use it in forward (no assignment there)",
    )


_BY_OPT = "the optimizer named holds an older one, which forward no longer uses"
_BY_GRAPH = (
    "the loss's graph used an older one than the module holds now: an optimizer made before "
    "updates one forward no longer uses"
)


def _replaced(t: torch.Tensor, g: _Context) -> int:
    """How many parameters of ``t``'s shape the optimizers named hold that no module named holds
    now (``t`` being a module's, in no optimizer): ``t`` replaced them, once per parameter (two:
    on two calls); 0 where every forward above ``t`` was read (it assigns nothing there: a
    replacement outside forward)."""
    path = g.held["module"].get(id(t), "")
    if not path or id(t) in g.held["opt"]:
        return 0
    modules, parts = _by_name(g), path.split(".")
    owners = [modules.get(".".join(parts[:depth])) for depth in range(len(parts) - 1, 0, -1)]
    if all(_read(type(owner)) for owner in owners if owner is not None):
        return 0
    return sum(
        id(p) in g.held["opt"] and id(p) not in g.held["module"] and p.shape == t.shape
        for _, p in g.tensors
    )


def _off_graph_shapes(g: _Context) -> set:
    """Shapes of the named modules' parameters an optimizer named holds but the graph does not
    reach (computed once per report)."""
    if g.off_graph is None:
        g.off_graph = {
            p.shape
            for _, m in g.modules
            for p in m.parameters(recurse=False)
            if id(p) in g.held["opt"] and id(p) not in g.leaves
        }
    return g.off_graph


def _fast_pairs(g: _Context) -> dict:
    """{id of a plain leaf: the module name} for fast weights by evidence: a module named whose
    parameters an optimizer holds, none of them on the graph, while the graph reaches plain
    leaves (not ``nn.Parameter``, requiring grad, in no optimizer, held by no module) of the
    shapes of all of them, one each, and at least two such leaves in all. One input of a weight's
    shape (an adversarial ``x_adv``) matches neither a module that also has a bias nor, alone, a
    module without one. Computed once per report."""
    if g.fast is None:
        g.fast = {}
        plain = [
            v for v, _ in g.leaves.values() if v.requires_grad and v.is_leaf
            and not isinstance(v, torch.nn.Parameter) and id(v) not in g.held["opt"]
            and id(v) not in g.held["module"]
        ]  # fmt: skip
        for name, m in g.modules:
            params = list(m.parameters(recurse=False))
            if not params or any(id(p) not in g.held["opt"] or id(p) in g.leaves for p in params):
                continue
            free, matched = list(plain), []
            for p in params:
                v = next((v for v in free if v.shape == p.shape), None)
                if v is None:
                    break
                free.remove(v)
                matched.append(v)
            else:
                for v in matched:
                    g.fast.setdefault(id(v), name)
        g.fast_one = {i: (n, p) for i, n in g.fast.items() if (p := _partner(g, i, n))}
        if len(g.fast) < 2:  # one tensor of one weight's shape (an input): not enough to tell
            g.fast = {}
    return g.fast


def _partner(g: _Context, i: int, module: str) -> str:
    """The name of the parameter of ``module`` of the shape of the leaf whose id is ``i``."""
    v = g.leaves.get(i, (None,))[0]
    m = _by_name(g).get(module)
    p = next((p for p in m.parameters(recurse=False) if p.shape == v.shape), None) if m else None
    return g.held["module"].get(id(p), "") if p is not None and v is not None else ""


def _fast_hedge(t: torch.Tensor, g: _Context) -> str:
    """Where ``_fast_pairs`` matched every parameter of a module but too few leaves to say it (a
    one-parameter module): the fast-weights purpose, named as one possibility in a general text.
    ``t`` is that parameter (the loss does not reach it) or the plain leaf (the loss does)."""
    _fast_pairs(g)
    if not g.held["opt"] or g.fast or len(g.fast_one) != 1:
        return ""
    ((i, (module, param)),) = g.fast_one.items()
    leaf = g.leaves[i][0]
    if id(t) == i:
        return (
            f"; if it is a copy of {param} made for an inner loop (fast weights), do not give it "
            "to the optimizer: " + _adapted_fix(g.label(t), module.partition(".")[0], param)
        )
    if g.held["module"].get(id(t)) == param:
        return (
            f"; if {g.label(leaf)} (a plain tensor of its shape the loss reaches) is a copy of it "
            "made for an inner loop (fast weights), its detach is the cut: make the copy without "
            "it (higher: innerloop_ctx(..., copy_initial_weights=False); by hand: "
            f"{param}.clone(), not .detach()), or, first order on purpose, add the copy's .grad "
            f"to {param}.grad after backward()"
            + (f": see {g.label(leaf)}" if id(leaf) in g.names else "")
        )
    return ""


def _yours_reached(g: _Context) -> bool:
    """Once per call: whether the graph reaches a tensor named or a parameter of the modules
    named (asked per tensor, sets of every leaf and name each time)."""
    return _memo(
        "yours reached", g, lambda: bool(set(g.leaves) & (set(g.names) | set(g.held["module"])))
    )


def _unheld_by_shape(g: _Context) -> dict:
    """Once per call: shape -> the leaves on the graph that are parameters no module named holds,
    in the leaves' order (asked per tensor, a walk of the leaves each)."""
    return _memo("unheld by shape", g, lambda: _grouped(
        (v.shape, v) for v, _ in g.leaves.values()
        if isinstance(v, torch.nn.Parameter) and id(v) not in g.held["module"]
    ))  # fmt: skip


def _twin(t: torch.Tensor, g: _Context) -> str | None:
    """A parameter or leaf that requires grad and shares ``t``'s memory, ``t`` itself not
    requiring grad: ``t`` is a detached view of it (``state_dict()``, ``.data``)."""
    twins = _memo(
        "twins",
        g,
        lambda: _grouped(
            (_storage_of(v), v)
            for v in (
                *(v for v, _ in g.leaves.values()),
                *(p for _, m in g.modules for p in m.parameters(recurse=False)),
            )
            if v.requires_grad
        ),
    )  # fmt: skip  (once per call, by storage: the ones that can share t's memory, in order)
    for v in twins.get(_storage_of(t), []) if _storage_of(t) is not None else ():
        if v is not t and v.requires_grad and _same_memory(v, t) and v.shape == t.shape:
            return g.label(v)
    return None


def _says_false(obj: object, attr: str) -> bool:
    """Whether ``obj`` declares ``attr`` False: a class or instance attribute that is False, or a
    property whose getter's source is ``return False`` (read with ``ast``, never run)."""
    found = inspect.getattr_static(obj, attr, None)
    if found is False:
        return True
    root = _root(found.fget) if isinstance(found, property) and found.fget else None
    body = [  # its statements, but a docstring
        s for s in getattr(root, "body", [])
        if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
    ]  # fmt: skip
    return (
        len(body) == 1
        and isinstance(body[0], ast.Return)
        and isinstance(body[0].value, ast.Constant)
        and body[0].value.value is False
    )


def _not_reached(t: torch.Tensor, g: _Context) -> tuple[str, str, str]:
    """The loss's graph does not reach ``t``: say what stands in its place, where it can tell."""
    metrics = [  # a library's own word: torchmetrics' Metric says is_differentiable = False
        f"{n} ({type(m).__name__})"
        for n, m in g.modules
        if "." not in n and _says_false(m, "is_differentiable")
    ]  # a metric kept inside a model for monitoring is not the loss's maker
    if g.loss.grad_fn is None and not g.loss.requires_grad and metrics:
        return (
            "not on the graph: a metric without gradient",
            f"the loss has no graph, and {', '.join(metrics)} declares is_differentiable = False: "
            "it has no gradient by design (ranks, counts, thresholds), whatever mode it runs in",
            "train on a differentiable loss (BCE or cross-entropy on the same outputs, or a "
            "differentiable surrogate of the metric) and keep the metric for monitoring",
        )
    if g.loss.grad_fn is None and not g.loss.requires_grad and g.grad_read and not g.grad_beside:
        return (
            "not on the graph: the loss has no graph",
            (
                "the loss has no graph (no grad_fn, requires_grad=False) and is made from "
                f"gradients taken by torch.autograd.grad ({g.grad_read}): without "
                "create_graph=True it returns gradients without history"
                if "autograd.grad(" in g.grad_read
                else "the loss has no graph (no grad_fn, requires_grad=False) and is made from a "
                f".grad ({g.grad_read}): backward() writes .grad without history unless it ran "
                "with create_graph=True"
            )
            + ", so a term made from it changes no gradient (alone, backward() raises 'element 0 "
            "of tensors does not require grad')",
            g.grad_fix
            or "take the gradients as tensors with a graph and build the term from those: grads = "
            "torch.autograd.grad(loss, params, create_graph=True), then your term from grads in "
            "place of the .grad (for a squared norm: sum(g.pow(2).sum() for g in grads)), and "
            "backward() on loss + term (one pass)",
        )
    if g.loss.grad_fn is None and not g.loss.requires_grad and (inside := _cut_inside(g)):
        return inside
    if g.loss.grad_fn is None and not g.loss.requires_grad:
        return (
            "not on the graph: the loss has no graph",
            _off_here(g)
            + "the loss has no graph (no grad_fn, requires_grad=False), so backward() on it writes no "
            ".grad (a term like this changes no gradient; alone, backward() raises 'element 0 of "
            "tensors does not require grad'): it was computed under torch.no_grad() or "
            "inference_mode, or from values without history (.detach(), state_dict(), rebuilt "
            "from values: torch.tensor(list_of_losses), .item(), numpy; an argmax or another "
            "integer result, a distribution's .sample(): .rsample() keeps the graph; gradients "
            "from torch.autograd.grad without create_graph=True), or no input "
            "required grad (name the object that computed it, metric=metric: one that says "
            "is_differentiable = False is told; with watch_cuts(): around the forward and loss "
            "locates the cut)"
            + _where_cut(g)
            + (
                f"; the gradients it reads ({g.grad_kept}) have history (create_graph=True), "
                "so they are not the cut: it is where the term is made from them (a "
                "torch.no_grad() block there, or a .detach())"
                if g.grad_kept
                else ""
            )
            + (
                f"; it reads a .grad ({g.grad_read}), which backward() writes without history "
                "unless it ran with create_graph=True: one possible cut, beside "
                f"{', '.join(g.grad_beside)}, which "
                + ("has" if len(g.grad_beside) == 1 else "have")
                + " no graph either"
                if g.grad_read
                else ""
            ),
            _off_here_fix(g)
            + (
                "the gradients it reads are an input's, and that backward(create_graph=True) "
                "also wrote the parameters' .grad, so a term made from them with gradients on "
                "would train on those too: drop that backward() (or zero the parameters' .grad "
                "after it), and " + g.grad_fix + ", with gradients on (outside the "
                "torch.no_grad() block, no .detach()); "
                if g.grad_kept and g.grad_fix
                else "make the term from those gradients with gradients on (outside the "
                "torch.no_grad() block, no .detach()); "
                if g.grad_kept
                else ""
            )
            + (
                f"compute it with gradients enabled: {_INFERENCE_FIX}"
                if g.loss.is_inference()
                else "compute it with gradients enabled, with torch operations on the model's "
                f"outputs ({_SEVERAL}); an argmax has no gradient: use a differentiable surrogate "
                "(softmax, F.gumbel_softmax); a term made from gradients (a penalty): "
                "create_graph=True where they are taken" + _inner_no_grad(g)
            ),
        )
    if (
        g.loss.grad_fn is None
        and not isinstance(g.loss, torch.nn.Parameter)
        and not any(id(g.loss) in h for h in (g.names, *g.held.values()))
    ):  # a leaf whose requires_grad the reader set: either cause, neither certain
        return (
            "not on the graph: the loss is a leaf",
            "the loss is a leaf: it has no history. Either it was computed with gradients off "
            "(torch.no_grad(), .detach()) and requires_grad_() was set on it afterwards, or it "
            "was rebuilt from values (torch.tensor(list_of_losses), .item(), numpy)",
            "remove requires_grad_() / torch.tensor(...) and compute the loss from the model's "
            f"outputs with gradients on; {_SEVERAL}",
        )
    if g.loss.grad_fn is None:
        return (
            "not on the graph: the loss is a leaf",
            "the loss was made from values without history (torch.tensor(...) of results, .item(), "
            "numpy, .detach() then requires_grad_()), so its graph reaches nothing",
            "compute the loss with torch operations on the model's outputs, without .item(), numpy "
            "or torch.tensor(...)",
        )
    if id(t) in _saved_ids(g):
        return (
            "not on the graph: used before requires_grad_()",
            "the graph saved it as a constant: requires_grad was switched on after the forward pass "
            "that built this loss",
            "call requires_grad_() before the forward pass",
        )
    if id(t) in g.held["opt"] and id(t) not in g.held["module"]:
        for _, p in g.tensors:  # a parameter of its shape, made in forward, replaced it
            name = g.held["module"].get(id(p))
            if name and id(p) not in g.held["opt"] and p.shape == t.shape:
                if where := _per_call(name, g):
                    return _recreated(where[0], _BY_OPT, _rewrapped(name, g))
    copy = _copy_on_graph(t, g)  # a copy (deepcopy, an EMA) first: it is no replacement
    name = g.held["module"].get(id(t))
    older = [  # the graph used a parameter of its shape that no module named holds now, and
        # that the optimizer named holds (or the optimizer does not hold this one either)
        v for v in _unheld_by_shape(g).get(t.shape, [])
        if id(v) in g.held["opt"] or id(t) not in g.held["opt"]
    ]  # fmt: skip
    if name and older and not copy and (where := _per_call(name, g)):
        return _recreated(where[0], _BY_GRAPH, _rewrapped(name, g))
    if not _yours_reached(g):  # none of yours reached
        leaves = [v for v, _ in g.leaves.values()]
        shaped = next((v for v in leaves if _copy_shaped(v, t, g)), None)
        mine = g.held["module"].get(id(t), "").rpartition(".")[0]
        if shaped is not None and not (  # one of each of its module's shapes: _adapted says it
            id(t) in g.held["opt"] and _fast_pairs(g).get(id(shaped)) == mine
        ):
            shown = ", ".join(g.label(v) for v in leaves[:3]) + (
                f" and {len(leaves) - 3} more" if len(leaves) > 3 else ""
            )
            return _detached_copy(t, shaped, shown, g)  # a weight's shape: no losses rewrapped
    if copy:
        return (
            "not on the graph: a copy is",
            f"{copy} is on the loss's graph instead of it",
            _copy_fix(copy),
        )
    kept = _copy_kept(t, g)
    if kept:
        return (
            "not on the graph: a copy is kept",
            f"{kept}, kept on the module, has no history: the forward pass uses it instead of the parameter",
            _copy_fix(kept),
        )
    owner = g.held["module"].get(id(t), "").rpartition(".")[0]
    module = _module_named(owner, g) if owner else None
    for key, sibling in module.named_parameters(recurse=False) if module is not None else ():
        name = f"{owner}.{key}"  # a sibling found copied: the module was copied
        if sibling is not t:
            copy = _copy_on_graph(sibling, g)
            if copy and "copy with its values" in copy:
                return (
                    "not on the graph: a copy is",
                    f"{name} of the same module has a copy on the graph ({copy.split(', a copy')[0]}): the "
                    "module was copied (deepcopy, load into a new module) and the copy is used; this "
                    "tensor's own copy cannot be matched by value (one value, or all values equal)",
                    _copy_fix(copy),
                )
    kept = _kept_on(t, g)  # a plain tensor attribute: never in module.parameters()
    if kept and id(t) in g.held["opt"] and not isinstance(t, torch.nn.Parameter):
        return _not_a_parameter(t, kept, g)
    if (
        id(t) in g.held["opt"]
        and id(t) not in g.held["module"]
        and g.held["module"]
        and isinstance(t, torch.nn.Parameter)  # a plain tensor never was a module's parameter
    ):
        olds = max((_replaced(p, g) for _, p in g.tensors if p.shape == t.shape), default=0)
        return (
            "not on the graph: replaced",
            "the optimizer holds it, but it is no longer a parameter of the modules named: a new "
            "nn.Parameter (load_state_dict(assign=True), weight_norm, tying) replaced it after the "
            "optimizer was made",
            "replaced on more than one call: create it once in __init__ and only use it in "
            "forward (no assignment there)"
            if olds > 1  # the optimizer holds several replaced ones, forward unread: it makes them
            else ("create it once in __init__ and only use it in forward (no assignment there); "
                  "if it was replaced only once (load_state_dict(assign=True), a late weight_norm), "
                  if olds else "")  # as the module's parameter's entry: forward unread
            + "make the optimizer after the model is final, or assign into the parameter (with "
            "torch.no_grad(): p.copy_(new)) instead of replacing it",
        )  # fmt: skip
    fast_of = _memo(
        "fast by owner",
        g,
        lambda: _grouped((_fast_pairs(g).get(id(v)), v) for v, _ in g.leaves.values()),
    )
    fast = next((v for v in fast_of.get(owner, []) if v.shape == t.shape), None) if owner else None
    if fast is not None and id(t) in g.held["opt"]:
        named = id(fast) in g.names or id(fast) in g.held["module"]
        return _adapted(
            g.label(fast) if named else "a plain leaf of its shape",
            owner.partition(".")[0],
            owner,
            g.label(t),
        )
    foreign = _memo(  # once per call: the leaves reached that are neither named nor held
        "foreign",
        g,
        lambda: [
            v
            for v, _ in g.leaves.values()
            if id(v) not in g.names and id(v) not in g.held["module"]
        ],
    )
    if foreign and not _yours_reached(g):
        shown = ", ".join(g.label(v) for v in foreign[:3])
        if all(isinstance(v, torch.nn.Parameter) for v in foreign):
            return (
                "not on the graph: the loss reaches only parameters you did not name",
                f"the loss's graph reaches only {shown} (nn.Parameter, of a module you did not "
                f"name), none of yours: your tensors' values enter it without history ({_CUTS}), "
                "or are not used; name that module too to see which of yours it reaches",
                _CUT_FIX + _probe_owner(t, g),
            )
        return (
            "not on the graph: the loss reaches only leaves you did not name",
            f"the loss's graph reaches only {shown} (leaves you did not name, not nn.Parameter), "
            "none of yours: a new leaf made from values (torch.tensor([...], "
            "requires_grad=True) of losses, Variable(x.data, requires_grad=True), "
            ".detach().requires_grad_(), numpy) stands between your model and the loss, or "
            "these are inputs or tensors of yours you did not name and yours are cut or not used",
            "a new leaf: combine losses with torch operations (torch.stack(losses).sum(), l1 + l2), "
            "not torch.tensor([...]); use the tensor itself where a rewrap of it is used"
            + _probe_owner(t, g),
        )
    if not g.ran and _reentrant(g):
        return (
            "not told before backward: a reentrant checkpoint is on the graph",
            "the loss's graph holds a reentrant checkpoint (CheckpointFunctionBackward): what runs "
            "inside it joins the graph only when backward() recomputes it, so before that a "
            "tensor off the graph may be inside it, or not used",
            "read .grad after backward(); if it is None then, call why_no_grad there",
        )
    checkpointed = _checkpointing(owner, g)
    if checkpointed:
        return (
            "not on the graph: checkpointed",
            f"{checkpointed}: a reentrant checkpoint whose inputs need no grad (frozen embeddings, "
            "inputs without grad) returns an output without history, so nothing inside gets a "
            "gradient (torch warns 'None of the inputs have requires_grad=True')",
            "checkpoint with use_reentrant=False (transformers: gradient_checkpointing_kwargs="
            "{'use_reentrant': False}), or make its input require grad (transformers: "
            "model.enable_input_require_grads())",
        )
    by_owner = _memo(
        "by owner",
        g,
        lambda: _grouped((n.rpartition(".")[0], i) for i, n in g.held["module"].items()),
    )
    siblings = [i for i in by_owner.get(owner, []) if i != id(t)]
    held_reached = _memo("held reached", g, lambda: set(g.leaves) & set(g.held["module"]))
    if owner and not any(i in g.leaves for i in siblings) and held_reached:
        copied = _copied_into(t, g)
        if copied and not isinstance(g.leaves[copied[1]][0], torch.nn.Parameter):
            return _adapted(copied[0], owner.partition(".")[0], param=g.label(t))
        if copied and _tracks(g.leaves[copied[1]][0], t):
            other = copied[0].partition(".")[0]  # the object named: the whole network
            return (
                "not on the graph: the loss uses a copy of it",
                f"{copied[0]} (same shape, values equal to or tracking this one's: a target, EMA or "
                "teacher network, copied by load_state_dict, copy_ or an EMA update) is on the "
                "loss's graph instead; a copy has no history, so this one gets no gradient",
                f"compute the prediction with the trained module ({owner.partition('.')[0]}), and keep the copy out "
                f"of the graph: its outputs under torch.no_grad(), or {other}.requires_grad_(False); "
                "functional_call only for a real combination of several trained modules' weights",
            )
        if copied:
            copied = copied[0]
            return (
                "not on the graph: its values are copied into another module",
                f"{copied} (same shape) is on the loss's graph but in no optimizer named, while the "
                "optimizer holds this one: its values reach the loss copied (.data =, copy_, "
                "load_state_dict), and a copy has no history, so the copy is the cut",
                "compute the combination inside the forward pass: torch.func.functional_call(module, "
                "{name: w * a_p + (1 - w) * b_p, ...}, x) with the combined tensors, not .data or copy_",
            )
        if bypass := _bypassed(owner, g):
            above, child, attrs, at, seen = bypass
            last, short = above.rpartition(".")[2], child.rpartition(".")[2]
            fix = (
                f"wrap or target {above} itself"
                + (
                    f" (peft: target_modules=['{last}'])"
                    if "." in above and not last.isdigit()
                    else ""
                )
                + f", or use a layer whose forward calls {short}(...)"
            )
            reads = (
                f"{above} ({type(_by_name(g)[above]).__name__}) reads .{short}."
                + " and .".join(attrs)
                + (f" ({at})" if at else "")
                + f" and never calls {short}"
            )
            if not seen:  # nothing of the parent on the graph (frozen): it may not run at all
                return (
                    "not on the graph: its module is bypassed, or its parent is not called",
                    f"{reads}; nothing of {above} is on the graph (frozen), so whether it runs "
                    f"is not seen: if it runs, {short}'s forward, and what wraps it (an adapter: "
                    "peft's LoRA; a hook), never runs",
                    f"to see which: {_probe(above, _by_name(g)[above])}; printed: {fix}; "
                    f"nothing printed: {above} is not called (a branch not taken): None is right "
                    "if it is not meant to run",
                )
            return (
                "not on the graph: its module is bypassed",
                f"{reads}: its forward, and what wraps it (an adapter: peft's LoRA; a hook), "
                "never runs",
                fix,
            )
        if zipped := _zipped(owner, g):
            holder, item, at, ran, total, first = zipped
            path = re.sub(r"\.(\d+)(?=\.|$)", r"[\1]", holder)
            both = inspect.getattr_static(_by_name(g)[holder], "train_inputs", None)
            why = (
                f"{holder} pairs its sub-models with other values by zip ({at}); {ran} of {total} "
                "sub-models ran"
            )
            if first:
                return (
                    "not on the graph: its sub-model is not paired",
                    why + ": given one input, only the first runs (zip stops at the shorter)",
                    f"pass one input per sub-model: {path}(x1, x2, ...)"
                    + (
                        f"; gpytorch, botorch: {path}(*{path}.train_inputs)"
                        if both is not None
                        else ""
                    ),
                )
            return (
                "not on the graph: its sub-model did not run",
                why + ": fewer items than sub-models were paired (zip stops at the shorter), or "
                "its branch was not taken",
                "None is right if it was meant to idle (a task without labels, an expert without "
                "tokens); to train it, pair it with an item",
            )
        if _straight_through(g, t) and (line := _straight_lines(owner, g)):
            return _read_under_detach(owner, line, module)
        if kept_cut := _kept_cut(t, g):
            return kept_cut
        unused = _unused_fix(owner, g, t)
        switches = _switches(owner, g)
        if seen := _watched_use(t, g):
            return _watched_rule(seen, owner, g, t, unused, switches)
        wrap, value = _rewrapped(g.held["module"].get(id(t), ""), g, anywhere=True)
        return (
            "not on the graph: its module is not used or is cut",
            "no parameter of its module is on the graph, while other modules' are: the module is not "
            "called for this loss (a branch not taken, a layer defined but unused), it runs but the "
            f"loss does not use its output, or its output is cut before the loss ({_CUTS})"
            + (
                f"; {wrap}: nn.Parameter(...) makes a new leaf of a value computed in forward, a "
                "cut: if this module computes that value, that line is the cut"
                if wrap
                else ""
            ),
            (
                f"if it is that line: use {value} as a tensor where the parameter is read, not a "
                "new nn.Parameter; else "
                if wrap
                else ""
            )
            + "to see which, before the step: "
            + _probe(owner, module)
            + "; nothing printed: "
            + _silent(module)
            + ": None is right if it is not meant to train (skip parameters whose .grad is "
            "None where you read them), or call the layer, or DDP(find_unused_parameters=True); "
            "if its values reach the loss copied into another module (.data =, copy_, "
            "load_state_dict), the copy is the cut: compute the combination inside the forward "
            "(torch.func.functional_call with the combined weights); "
            + _PATCHED
            + "; False: it runs under torch.no_grad(), inference_mode (an encode() or "
            "predict() wrapper, a with block): call it outside ("
            + (
                f"the switches in its forward or the forwards above it: {switches}; in a library, "
                "an option may drive one: set that option"
                if switches
                else "in a library, the forward that calls it may switch it by an option, "
                "set_grad_enabled(not <option>): set that option"
            )
            + "), or inside a reentrant checkpoint "
            "(use_reentrant=True): use_reentrant=False; True: what it computes from its parameters does "
            "not reach the loss: "
            + f"{unused}; else "
            + "it is cut after it (or inside its forward): "
            + _cut_fix(g, t),
        )
    if kept_cut := _kept_cut(t, g):
        return kept_cut
    if (seen := _watched_use(t, g)) in (
        "unread",
        "read off",
        "compared",
        "compared in",
    ):  # its module ran, others read
        rule, why, fix = _watched_rule(seen, owner, g, t, "", "; ".join(_all_switches(g)[:3]))
        key = g.held["module"].get(id(t), "").rpartition(".")[2]
        unnamed = _never_named(type(module), key) if module is not None and key else ""
        return rule, why + (f"; {unnamed}" if unnamed else ""), fix
    if seen == "tensor compared":  # (x > thr) outside a module: its only read (review 46 R8)
        return (
            "not on the graph: read only by a comparison",
            "inside the with watch_cuts() block that made the loss, it was read with gradients "
            "on only by a comparison or another op whose result has no gradient by nature (x > "
            "thr, torch.where's condition, an argmax, torch.isfinite): such a result passes no "
            "gradient back to it; if that read is a check (torch.isnan), the code that should "
            "use it does not (a line that reads another tensor where it means this one)",
            "None is right if it is not meant to train; to train it, if the comparison is how "
            "it is used (a threshold, a mask), replace it by a soft surrogate that has a gradient "
            "(mask = torch.sigmoid((x - thr) / t), a temperature t; a straight-through estimator: "
            "hard + soft - soft.detach()); if it is only checked, make the code that should use it "
            "read it",
        )
    if seen in ("tensor unread", "tensor read off"):  # a tensor of no module named
        return (
            "not on the graph: no call read it",
            "inside the with watch_cuts() block that made the loss, no torch call read this "
            "tensor with gradients on"
            + (" (only with gradients off)" if seen == "tensor read off" else "")
            + ": the loss is computed without it, or from a copy of it (.detach(), .data, "
            ".item(), torch.tensor(...)), or it was read outside the block",
            "None is right if the loss is not meant to use it; to train it, compute the loss "
            "from the tensor itself, with gradients on",
        )
    derived = any("BackwardBackward" in type(fn).__name__ for fn in g.nodes)  # create_graph=True
    switches = "; ".join(_all_switches(g)[:3])
    # a copy the graph may read unsaved (an add's operand); none where gradients are turned off
    # in the forward: a teacher's copy read there on purpose is no cause
    kept = _kept_equal(t, g)
    equal = None if switches else kept
    return (
        "not on the graph",
        (
            f"the loss's graph does not reach it; {equal} holds its values: if the forward uses "
            f"{equal} in its place (not as a teacher's or EMA copy), that copy is the cut; else "
            "its value entered without history "
            if equal
            else "the loss's graph does not reach it"
            + ("" if kept else ", nor a copy of it")
            + ": its value entered without history "
        )
        + f"({_CUTS}, requires_grad_() after the forward pass), or it is not used for this loss (a "
        "branch not taken, a layer not called)"
        + (f"; the modules named turn gradients off at {switches}" if switches else "")
        + (
            ", or, this loss being made from a gradient (autograd.grad with create_graph=True), "
            "that derivative does not depend on it (a bias under a gradient penalty: d/dx of "
            "x @ W + b has no b)"
            if derived
            else ""
        ),
        (
            "if its value passes a line named above, run that part with gradients on "
            "(torch.enable_grad() there, or the option that drives it); "
            if switches
            else ""
        )
        + (f"if the forward uses {equal} in its place: {_copy_fix('copy')}; else " if equal else "")
        + "find where its value enters the loss; "
        + _cut_fix(g, t)
        + "; not used: None is right if your "
        "model is not meant to use it; if it is (a mask or adapter a library inserts), the "
        "forward does not reach it: find the path that skips it"
        + (
            "; a derivative without it: None is right, this loss does not train it"
            if derived
            else ""
        )
        + _probe_owner(t, g)
        + _subclass_note(t, g),
    )


_CUT_CALLS = ("detach", "item", "numpy", "tolist")
# a tensor's facts, not its values: reading them carries no value into the result
_FACTS = ("shape", "ndim", "dtype", "device", "requires_grad", "is_cuda", "layout", "is_leaf")
_FACT_CALLS = ("size", "dim", "numel", "nelement", "stride", "get_device", "is_contiguous",
               "is_floating_point", "is_complex", "data_ptr", "element_size", "ndimension")  # fmt: skip


def _copiers() -> tuple:
    """The constructors that copy values into a new tensor or number without history."""
    made = (torch.tensor, torch.Tensor, torch.FloatTensor, torch.DoubleTensor, float, int)
    np = sys.modules.get("numpy")
    return made + ((np.array, np.asarray) if np is not None else ())


def _looked_up(func, space: dict):
    """What ``func`` (``name`` or ``module.name``) names in ``space`` (a function's globals, then
    builtins), looked up, never run; None otherwise."""
    if isinstance(func, ast.Name):
        return space.get(func.id, vars(builtins).get(func.id))
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        held = space.get(func.value.id)
        return vars(held).get(func.attr) if isinstance(held, types.ModuleType) else None
    return None


def _copied(n, space: dict) -> list | None:
    """The expressions ``n`` copies without history (``x.detach()``, ``.item()``, ``.numpy()``,
    ``.tolist()``, ``x.data``; ``torch.tensor(...)``, ``torch.Tensor(...)``, ``np.array(...)``,
    ``float(...)``, ``int(...)``), or None where ``n`` is no such copy."""
    if isinstance(n, ast.Attribute) and n.attr == "data" and isinstance(n.ctx, ast.Load):
        return [n.value]
    if not isinstance(n, ast.Call):
        return None
    if isinstance(n.func, ast.Attribute) and n.func.attr in _CUT_CALLS:
        return [n.func.value]
    made = _looked_up(n.func, space)
    return list(n.args) if made is not None and any(made is c for c in _copiers()) else None


def _read_names(expr, me: str | None, attrs: frozenset, space: dict, but=None) -> set:
    """The names whose values ``expr`` (outside the node ``but``) carries, and ``.attr`` for each
    ``me.attr`` among ``attrs``: not through a copy without history (``_copied``), nor through a
    tensor's facts (``x.shape``, ``x.size(0)``, ``len(x)``)."""
    found, todo = set(), [expr]
    while todo:
        n = todo.pop()
        if n is but or _copied(n, space) is not None or isinstance(n, (ast.Lambda, ast.Compare)):
            continue
        if isinstance(n, ast.Attribute) and n.attr in _FACTS:
            continue
        if isinstance(n, ast.Call):
            if isinstance(n.func, ast.Attribute) and n.func.attr in _FACT_CALLS:
                todo += [*n.args, *(k.value for k in n.keywords)]
                continue
            if isinstance(n.func, ast.Name) and n.func.id in _NO_CALL:
                continue
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            found.add(n.id)
        elif me and (attr := _attr_of(n, me)) in attrs and isinstance(n.ctx, ast.Load):
            found.add("." + attr)
            continue
        todo += list(ast.iter_child_nodes(n))
    return found


def _reads(expr, taint: dict, me: str | None, attrs: frozenset, space: dict, but=None) -> set:
    """The sources (parameters; ``.attr`` for ``me.attr``) whose values ``expr`` carries
    (``_read_names``), through the names made from them (``taint``, from ``_flows``)."""
    names = _read_names(expr, me, attrs, space, but)
    return set().union(*(taint.get(k, (k,) if k[0] == "." else ()) for k in names))


def _bound(target) -> list[str]:
    """The plain names an assignment target binds (``a``, ``a, (b, *c)``; not ``x.y``, ``d[k]``)."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Starred):
        return _bound(target.value)
    if isinstance(target, (ast.Tuple, ast.List)):
        return [name for e in target.elts for name in _bound(e)]
    return []


def _base_name(node) -> str | None:
    """The name under a subscript or attribute chain (``d`` of ``d["k"].x``)."""
    while isinstance(node, (ast.Subscript, ast.Attribute)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _non_tensor(root) -> set:
    """Ids of the nodes in a branch taken only where a value is not a tensor
    (``if not isinstance(x, torch.Tensor): x = torch.tensor(x)``): copying there cuts nothing."""

    def tensor_test(test) -> bool | None:  # True: the test says "is a tensor"; None: another
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            inner = tensor_test(test.operand)
            return None if inner is None else not inner
        if not isinstance(test, ast.Call) or not test.args:
            return None
        func = ast.unparse(test.func)
        kinds = ast.unparse(test.args[1]) if len(test.args) > 1 else ""
        if func in ("torch.is_tensor", "is_tensor") or func == "isinstance" and "Tensor" in kinds:
            return True
        return None

    found = set()
    for n in ast.walk(root):
        if isinstance(n, (ast.If, ast.IfExp)) and (says := tensor_test(n.test)) is not None:
            branch = n.orelse if says else n.body
            for part in branch if isinstance(branch, list) else [branch]:
                found |= {id(sub) for sub in ast.walk(part)}
    return found


@functools.lru_cache(maxsize=512)
def _copy_read(fn, method: bool, attrs: frozenset = frozenset()) -> tuple | None:
    """The copy rules' read of ``fn``'s own body (with ``ast``, never run): (its def, the name of
    self, its parameters, the taint {name: the sources its value is made from; ``_flows``}, the
    ids of the nodes whose value reaches a ``return``, the ids in a branch for non-tensors, its
    globals, {id of a node: the value of the statement it is in}, [(each return, the ids of
    the nodes reaching it)]); None where the source cannot be read."""
    root = _root(fn)
    if not isinstance(root, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    me, args = _params(root, method)
    space = getattr(fn, "__globals__", {})
    own = list(_own_nodes(root.body))
    sets = [n for n in own if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign))]
    sets = [n for n in sets if n.value is not None]
    loops = [n for n in own if isinstance(n, (ast.For, ast.AsyncFor))]
    bindings = [
        (
            [name for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
             for name in _bound(t)],
            n.iter if isinstance(n, (ast.For, ast.AsyncFor)) else n.value,
        )
        for n in (*sets, *loops)
    ]  # fmt: skip
    read = functools.partial(_read_names, me=me, attrs=attrs, space=space)
    taint = _flows(bindings, {a: frozenset((a,)) for a in args}, read)
    steps = [  # (the names a statement sets or changes, the expression it does so with)
        (
            {name for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
             for name in (_bound(t) or [_base_name(t)]) if name and name != me},
            n.value,
        )
        for n in sets
    ] + [({name for name in _bound(n.target)}, n.iter) for n in loops] + [
        ({_base_name(n.value.func.value)} - {me, None}, n.value)  # out.append(x)
        for n in own
        if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)
        and isinstance(n.value.func, ast.Attribute)
    ]  # fmt: skip

    def reach_of(returns) -> set:  # the ids of the nodes whose value reaches these returns
        reach, needed, done = set(), set(), set()

        def mark(expr) -> None:  # its value reaches the return: so do the names it reads
            for sub in ast.walk(expr):
                reach.add(id(sub))
                if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load) and sub.id != me:
                    needed.add(sub.id)

        for r in returns:
            mark(r.value)
        while len(done) < len(steps):
            grown = False
            for i, (names, value) in enumerate(steps):
                if i not in done and names & needed:
                    done.add(i)
                    mark(value)
                    grown = True
            if not grown:
                break
        return reach

    returns = [n for n in own if isinstance(n, ast.Return) and n.value is not None]
    reach = reach_of(returns)
    each = [(r, reach_of([r])) for r in returns]  # per return: what its value is made from
    values = {  # a statement's value: return x, y = x, f(x) alone, for v in x
        id(sub): value
        for n in own
        if isinstance(value := getattr(n, "iter", getattr(n, "value", None)), ast.expr)
        and isinstance(n, ast.stmt)
        for sub in ast.walk(value)
    }
    return root, me, args, taint, reach, _non_tensor(root), space, values, each


def _cuts_args(
    fn, cls_name: str = "", attrs: frozenset = frozenset()
) -> list[tuple[str, str, str]]:
    """(``file:line: code``, the method it hands the cut value to or "", the parameter cut, or
    ``.attr`` for ``self.attr`` among ``attrs``) for each place in ``fn``'s source (read with
    ``ast``, never run) that copies the value of one of its own parameters without history
    (``_copied``: ``arg.detach()``, ``.item()``, ``.data``, ``torch.tensor([arg, ...])``,
    ``float(arg)``), directly or through names made from it, where that copy's value reaches
    the ``return`` (a metric or a log beside the result is no cut of it), no ``return`` passes
    the value itself without a copy, and the branch is not one for non-tensors. None where the
    source cannot be read."""
    flows = _copy_read(fn, bool(cls_name), attrs)
    read = _parsed(fn)
    if flows is None or read is None:  # no source: nothing found
        return []
    root, me, args, taint, reach, skip, space, values, each = flows
    start, where, lines = read[1:]
    given, found = {}, []  # id(node) -> the self-method a call hands it to
    own = list(_own_nodes(root.body))
    mixed = {  # names some assignment gives a copy: in another branch, the value may be a copy
        name
        for n in own
        if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and n.value is not None
        and any(_copied(sub, space) is not None for sub in ast.walk(n.value))
        for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
        for name in _bound(t)
    }  # fmt: skip
    plain = {k: v for k, v in taint.items() if k not in mixed}
    passed = [  # what each return passes as is (x * self.gain beside float(self.gain))
        (_reads(r.value, plain, me, attrs, space), reached) for r, reached in each
    ]
    for n in ast.walk(root):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and _attr_of(n.func, me):
            for a in (*n.args, *(k.value for k in n.keywords)):
                for sub in ast.walk(a):
                    given.setdefault(id(sub), f"{cls_name}.{n.func.attr}")
    for n in _own_nodes(root.body):
        copied = _copied(n, space) if id(n) in reach and id(n) not in skip else None
        srcs = set().union(*(_reads(e, taint, me, attrs, space) for e in copied or ()))
        if srcs and id(n) in values:  # kept beside the copy (w + (q(w) - w).detach()): no cut
            srcs -= _reads(values[id(n)], taint, me, attrs, space, but=n)
        for kept, reached in passed:  # the return holding the copy passes it as is too: no cut
            srcs -= kept if id(n) in reached else set()  # (another return: review 38 N7)
        for src in sorted(srcs):
            code = lines[n.lineno - 1].strip()
            found.append((f"{where}:{start + n.lineno - 1}: {code}", given.get(id(n), ""), src))
    return list(dict.fromkeys(found))


def _params(root, method: bool) -> tuple[str | None, list[str]]:
    """(the name of ``self`` or None, the other parameters in order) of a parsed def."""
    names = [a.arg for a in (*root.args.posonlyargs, *root.args.args, *root.args.kwonlyargs)]
    names += [a.arg for a in (root.args.vararg, root.args.kwarg) if a is not None]
    me = names[0] if method and names else None
    return me, [n for n in names if n != me]


def _entry(obj) -> tuple[object, type | None]:
    """The function calling ``obj`` runs first (a function; a module's ``forward``; else the
    class's ``__call__``) and the class it is read from (None for a function); (None, None)
    inside torch."""
    if inspect.isfunction(obj):
        return (None, None) if (obj.__module__ or "").startswith("torch.") else (obj, None)
    if not callable(obj) or isinstance(obj, (torch.Tensor, torch.optim.Optimizer, type)):
        return None, None
    return _class_entry(type(obj))


def _class_entry(cls: type, name: str = "") -> tuple[object, type | None]:
    """``_entry`` of an instance of ``cls``, read from the class (nothing made); or its method
    ``name`` as found along the method resolution order."""
    name = name or ("forward" if issubclass(cls, torch.nn.Module) else "__call__")
    owner = next((c for c in cls.__mro__ if name in vars(c)), None)
    fn = vars(owner).get(name) if owner is not None else None
    fn = getattr(fn, "__func__", fn)
    if not inspect.isfunction(fn) or _torch_own(owner) or _torch_own(cls):
        return None, None
    return fn, owner


def _cut_params(
    obj,
    fn=None,
    cls: type | None = None,
    depth: int = 1,
    name: str = "",
    attrs: frozenset = frozenset(),
) -> dict:
    """{parameter of what calling ``obj`` runs first (``_entry``), or ``.attr`` for ``self.attr``
    among ``attrs``: [(``file:line: code``, the method handed the cut value)]} for each that its
    code cuts (``_cuts_args``), there, in the ``super()`` method it hands that value to, or,
    ``depth`` levels down, in a callable it hands it to (``self.attr(p, ...)``, ``self.meth(p)``,
    ``Name(...)(p, ...)``, a function ``fn(p)`` or ``module.fn(p)``) where that call's value
    reaches the ``return``; read, never run. Any failure: none."""
    if fn is None:
        fn, cls = _entry(obj)
    if fn is None:
        return {}
    found, name = {}, name or (type(obj).__name__ if cls is not None and obj is not None else "")
    for code, part, p in _cuts_args(fn, name or (cls.__name__ if cls else ""), attrs):
        found.setdefault(p, []).append((code, part))
    flows = _copy_read(fn, cls is not None, attrs)
    if flows is None:  # no source: nothing more
        return found
    root, me, _, taint, reach, _, space, values, _ = flows
    for n in _own_nodes(root.body):
        if not isinstance(n, ast.Call) or id(n) not in reach:
            continue
        below, where, sub, down, shown, keep = None, None, None, depth - 1, "", frozenset()
        f = n.func
        if (
            cls is not None and isinstance(f, ast.Attribute) and isinstance(f.value, ast.Call)
            and isinstance(f.value.func, ast.Name) and f.value.func.id == "super"
        ):  # fmt: skip
            mro = type(obj).__mro__ if obj is not None else cls.__mro__
            up = mro[mro.index(cls) + 1 :] if cls in mro else ()
            owner = next((c for c in up if f.attr in vars(c)), None)
            if owner is not None:
                (below, where), sub, down, shown = _class_entry(owner, f.attr), obj, depth, name
                keep = attrs
        elif depth < 1:
            continue
        elif me and isinstance(f, ast.Attribute) and _attr_of(f, me) and obj is not None:
            held = vars(obj).get(f.attr, vars(obj).get("_modules", {}).get(f.attr))
            if held is not None and not inspect.ismethod(held):
                (below, where), sub = _entry(held), held
            elif held is None:  # a method of its class: self is the same object
                owner = next((c for c in type(obj).__mro__ if f.attr in vars(c)), None)
                if owner is not None and not _torch_own(owner):
                    (below, where), sub, shown, keep = _class_entry(owner, f.attr), obj, name, attrs
        elif isinstance(f, ast.Call) and isinstance(f.func, ast.Name):
            made = space.get(f.func.id)
            if isinstance(made, type) and not issubclass(made, torch.Tensor):
                (below, where), shown = _class_entry(made), made.__name__
        elif isinstance(f, (ast.Name, ast.Attribute)):  # a function: fn(p), module.fn(p)
            made = _looked_up(f, space)
            if inspect.isfunction(made) and not (made.__module__ or "").startswith("torch"):
                below = made
        if below is None:
            continue
        try:
            bargs = _params(_root(below), where is not None)[1]
        except Exception:  # noqa: BLE001 - no source (or not a def): nothing more
            continue
        cuts = _cut_params(sub, below, where, down, shown, keep)
        beside = _reads(values[id(n)], taint, me, attrs, space, but=n) if id(n) in values else set()
        _bind(n, lambda a, b=beside: _reads(a, taint, me, attrs, space) - b, bargs, cuts, found)
    return found


def _bind(call, reads, bargs: list, cuts: dict, found: dict) -> None:
    """Add to ``found``, for each argument of ``call`` bound to a parameter ``cuts`` names, the
    sources that argument's value is made from (``reads``)."""
    pairs = [(a, bargs[i]) for i, a in enumerate(call.args) if i < len(bargs)]
    pairs += [(k.value, k.arg) for k in call.keywords if k.arg in bargs]
    for a, p in pairs:
        for src in sorted(reads(a)) if p in cuts else ():
            found.setdefault(src, []).extend(cuts[p])


def _own_nodes(body: list):
    """The nodes of ``body``, not entering nested defs, classes or lambdas."""
    todo = list(body)
    while todo:
        n = todo.pop()
        yield n
        if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            todo += list(ast.iter_child_nodes(n))


def _grad_read(frame, loss: torch.Tensor) -> tuple[str, list[str]]:
    """ "file:line: code" where the caller's last assignment (above its current line) of a name
    bound to the loss, or of a name that assignment reads, reads a ``.grad`` (``pen =
    sum(p.grad.pow(2).sum() for p in params)``), read with ``ast`` and never run; "" if none.
    Only one step up: a name read by a name it reads, or a helper function that reads the
    ``.grad``, is not followed (the generic rule is told).
    With it, the names that the loss's assignment reads, bound in the caller to a tensor without
    graph, whose own assignment reads no ``.grad`` (``out`` made under no_grad, a target): any of
    them could be the cut as well."""
    try:
        names = {k for k, v in frame.f_locals.items() if v is loss}
        code, at = frame.f_code, frame.f_lineno
        if code.co_name == "<module>":  # a script's or a notebook cell's top level
            lines = linecache.getlines(code.co_filename)
            body, start, file = ast.parse("".join(lines)).body, 1, Path(code.co_filename).name
        else:
            root = _root(code)
            _, start, file, lines = _parsed(code)
            body = root.body if isinstance(root, (ast.FunctionDef, ast.AsyncFunctionDef)) else []
            at = at - start + 1
    except Exception:  # noqa: BLE001 - reading the caller must never break its program
        return "", []
    assigned, parents = collections.defaultdict(list), {}
    for n in _own_nodes(body):
        for key, value in ast.iter_fields(n):
            for child in value if isinstance(value, list) else ():
                parents[id(child)] = (n, key)
        if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and n.value is not None:
            for t in n.targets if isinstance(n, ast.Assign) else [n.target]:
                if isinstance(t, ast.Name) and n.end_lineno <= at:
                    assigned[t.id].append(n)
    todo = [max(assigned[k], key=lambda n: n.lineno) for k in names if assigned[k]]
    for last in todo:  # an assignment in a branch that does not hold this line may not have run
        up = parents.get(id(last)) if sum(len(assigned[k]) for k in names) > 1 else None
        while up is not None:
            if not isinstance(up[0], (ast.With, ast.AsyncWith)):  # a with body always runs
                block = getattr(*up)
                starts = [getattr(s, "pattern", s) for s in block]
                ends = [s.body[-1] if hasattr(s, "pattern") else s for s in block]
                if not any(h.lineno <= at <= e.end_lineno for h, e in zip(starts, ends)):
                    return "", []
            up = parents.get(id(up[0]))

    def reads_grad(n) -> bool:
        return any(isinstance(a, ast.Attribute) and a.attr == "grad" for a in ast.walk(n.value))

    read = {a.id for n in todo for a in ast.walk(n.value) if isinstance(a, ast.Name)}
    beside = sorted(
        k
        for k in read
        if isinstance(v := frame.f_locals.get(k), torch.Tensor)
        and v.is_floating_point()
        and v.grad_fn is None
        and not v.requires_grad
        and not (assigned[k] and reads_grad(max(assigned[k], key=lambda n: n.lineno)))
    )
    for depth in range(2):  # the loss's own assignment, then those of the names it reads
        for n in todo:
            for a in ast.walk(n.value):
                if isinstance(a, ast.Attribute) and a.attr == "grad":
                    line = start + a.lineno - 1
                    return f"{file}:{line}: {lines[a.lineno - 1].strip()}", beside
        reads = {a.id for n in todo for a in ast.walk(n.value) if isinstance(a, ast.Name)}
        todo = [max(assigned[k], key=lambda n: n.lineno) for k in reads if assigned[k]]
    return "", []


def _grads_kept(frame, where: str, tensors: list) -> bool:
    """Whether a gradient the line ``where`` (``_grad_read``) reads has history: ``name.grad``
    of a tensor the caller binds (of the tensors named, where ``name`` is a loop variable such
    as p in ``for p in net.parameters()``), or what ``torch.autograd.grad`` assigned to the
    line's names; then create_graph=True was used and the cut is elsewhere (a no_grad block)."""
    try:
        code, scope = where.split(": ", 1)[1], {**frame.f_globals, **frame.f_locals}
        try:  # a comprehension's targets: loop variables, whatever a global of the same name
            tree = ast.parse(code.strip())  # holds (p = 0.1 beside a p in ...: review 46 R12)
        except SyntaxError:  # a line that is part of a statement
            tree = ast.Module(body=[], type_ignores=[])
        grads: list = []
        bound = {
            n.id
            for c in ast.walk(tree)
            if isinstance(c, ast.comprehension)
            for n in ast.walk(c.target)
            if isinstance(n, ast.Name)
        }
        for name in re.findall(r"\b(\w+)\.grad\b(?!\s*\()", code):
            v = scope.get(name)
            if name in bound:
                grads += [t.grad for _, t in tensors if t.is_leaf]
            elif isinstance(v, torch.Tensor):
                grads.append(v.grad)
            elif v is None or name not in frame.f_locals:  # a loop variable: the tensors named
                grads += [t.grad for _, t in tensors if t.is_leaf]
        if "autograd.grad(" in code:
            for name in re.findall(r"\w+", code.partition("=")[0]):
                v = scope.get(name)
                grads += list(v) if isinstance(v, (tuple, list)) else [v]
        return any(isinstance(t, torch.Tensor) and t.grad_fn is not None for t in grads)
    except Exception:  # noqa: BLE001 - reading the caller must never break its program
        return False


def _grad_fix(frame, where: str, params: dict) -> str:
    """The fix for a term made from gradients without history, written with the reader's own
    line ``where`` (``_grad_read``): their torch.autograd.grad call with create_graph=True, or,
    for ``x.grad`` of a tensor that is no parameter of the modules named (an input, as in a
    WGAN-GP penalty), autograd.grad to that tensor and their term with ``g`` in place of
    ``x.grad``; "" where the line cannot be read so (the parameters' form is told)."""
    try:
        code = where.split(": ", 1)[1]
        tree = ast.parse(code.strip())
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
                 and ast.unparse(n.func).endswith("autograd.grad")]  # fmt: skip
        if calls:
            call = calls[0]
            call.keywords = [k for k in call.keywords if k.arg != "create_graph"]
            call.keywords.append(ast.keyword("create_graph", ast.Constant(True)))
            return (
                "take the gradients as tensors with a graph: your call with create_graph="
                f"True, {ast.unparse(call)}; keep your term as it is, and backward() on loss + "
                "term (one pass)"
            )
        names = set(re.findall(r"\b(\w+)\.grad\b(?!\s*\()", code))
        scope = {**frame.f_globals, **frame.f_locals}
        values = [scope.get(n) for n in names]
        if len(names) != 1 or not all(
            isinstance(v, torch.Tensor) and id(v) not in params for v in values
        ):
            return ""
        (name,) = names
        value = ast.unparse(tree.body[0].value) if isinstance(tree.body[0], ast.Assign) else ""
        term = re.sub(rf"\b{name}\.grad\b", "g", value)
        return (
            f"take the gradients as tensors with a graph, here to {name}: (g,) = "
            f"torch.autograd.grad(out, {name}, torch.ones_like(out), create_graph=True), where "
            "out is what you called backward() on, then your term from g"
            + (f" ({term})" if term else "")
            + ", and backward() on loss + term (one pass)"
        )
    except Exception:  # noqa: BLE001 - reading the caller must never break its program
        return ""


def _producers(frame, loss: torch.Tensor) -> list[tuple[str, object, list[tuple[str, str]]]]:
    """(its name, the object, [(an argument that requires grad, the parameter it binds)]) for
    the callable the caller's own body (a function's, not the defs in it; a script's top level)
    assigns the loss from, where the call is the whole value (``loss = fn(...)``,
    ``loss = 1 - fn(...)``) of the last assignment of that name above the caller's current line,
    where it is the only one or sits in a block that line is in (or a ``with`` block's body): a
    later ``loss = ...``, or one in a branch not taken, cannot have made it. The loss found by
    identity among the caller's locals, the source read with ``ast``; the callable and the
    arguments (plain names or ``name.attr``) looked up in the caller's locals and globals
    without running anything. Any failure: none."""
    try:
        scope = {**frame.f_globals, **frame.f_locals}
        names = {k for k, v in frame.f_locals.items() if v is loss}
        if not names:
            return []
        code, at = frame.f_code, frame.f_lineno
        if code.co_name == "<module>":  # a script's or a notebook cell's top level
            body = ast.parse("".join(linecache.getlines(code.co_filename))).body
        else:
            root, at = _root(code), at - _parsed(code)[1] + 1  # the line within its source
            body = root.body if isinstance(root, (ast.FunctionDef, ast.AsyncFunctionDef)) else []
    except Exception:  # noqa: BLE001 - reading the caller must never break its program
        return []
    assigns, parents = [], {}
    for n in _own_nodes(body):
        for key, value in ast.iter_fields(n):
            for child in value if isinstance(value, list) else ():
                parents[id(child)] = (n, key)
        if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and n.value is not None:
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            if n.end_lineno <= at and any(
                isinstance(t, ast.Name) and t.id in names for t in targets
            ):
                assigns.append(n)
    if not assigns:
        return []
    last = max(assigns, key=lambda n: (n.lineno, n.col_offset))
    up = parents.get(id(last)) if len(assigns) > 1 else None  # one: it made the value
    while up is not None:  # each block holding it must hold the current line too
        if isinstance(up[0], (ast.With, ast.AsyncWith)):  # a with block's body always runs
            up = parents.get(id(up[0]))
            continue
        block = getattr(*up)  # a match's case has no line: from its pattern to its body's end
        starts = [getattr(s, "pattern", s) for s in block]
        ends = [s.body[-1] if hasattr(s, "pattern") else s for s in block]
        if not any(h.lineno <= at <= e.end_lineno for h, e in zip(starts, ends)):
            return []
        up = parents.get(id(up[0]))
    if isinstance(last, ast.AugAssign):  # loss += term: no one call made it
        return []
    call = last.value
    if isinstance(call, ast.BinOp) and isinstance(call.op, ast.Sub):
        call = call.right if isinstance(call.left, ast.Constant) else None
    if not isinstance(call, ast.Call):
        return []
    func = call.func
    try:
        if isinstance(func, ast.Name):
            obj, label = scope.get(func.id), func.id
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            owner, label = scope.get(func.value.id), f"{func.value.id}.{func.attr}"
            obj = None if owner is None else inspect.getattr_static(owner, func.attr, None)
            obj = obj if inspect.isfunction(obj) or isinstance(obj, torch.nn.Module) else None
        else:
            return []
        if obj is None or isinstance(obj, type):
            return []
        fn, cls = _entry(obj)
        root = _root(fn) if fn else None
        params = _params(root, cls is not None)[1] if root else []
        bound = isinstance(func, ast.Attribute) and (  # Python binds self only for a
            not isinstance(owner, (type, types.ModuleType))  # function found on the class
            and inspect.getattr_static(type(owner), func.attr, None) is obj
        )
        if bound and inspect.isfunction(obj) and params:
            params = params[1:]  # a method read off its instance: self is bound
    except Exception:  # noqa: BLE001 - no source: nothing found
        return []

    def value(a):  # a plain name or name.attr, looked up, never run
        if isinstance(a, ast.Name):
            return frame.f_locals.get(a.id)
        if isinstance(a, ast.Attribute) and isinstance(a.value, ast.Name):
            held = frame.f_locals.get(a.value.id)
            return None if held is None else inspect.getattr_static(held, a.attr, None)
        return None

    pairs = [(a, params[i]) for i, a in enumerate(call.args) if i < len(params)]
    pairs += [(k.value, k.arg) for k in call.keywords if k.arg in params]
    needs = [
        (ast.unparse(a), p) for a, p in pairs
        if isinstance(v := value(a), torch.Tensor) and v.requires_grad
    ]  # fmt: skip
    return [(label, obj, needs)]


def _cut_inside(g: _Context) -> tuple[str, str, str] | None:
    """A loss without graph, gradients on, assigned from a call (``_producers``) that is given
    an argument that requires grad, and whose code cuts the parameter bound to it
    (``_cut_params``): where, and the fix."""
    if not torch.is_grad_enabled() or g.loss.is_inference():
        return None
    for label, obj, needs in g.producers:
        cuts = _cut_params(obj) if needs else {}
        hit = [(a, p) for a, p in needs if p in cuts]
        if not hit:
            continue
        lines = list(dict.fromkeys(c for _, p in hit for c in cuts[p]))
        kind = type(obj).__name__ if not inspect.isfunction(obj) else "a function"
        shown = "; ".join(c for c, _ in lines[:3]) + (
            f" and {len(lines) - 3} more" if len(lines) > 3 else ""
        )
        part = next((m for _, m in lines if m), "")
        given = ", ".join(a for a, _ in hit)
        return (
            "not on the graph: the loss has no graph",
            f"the loss has no graph (no grad_fn, requires_grad=False); the loss is assigned from "
            f"{label}({given}, ...) and {given} require{'s' if len(hit) == 1 else ''} grad: the "
            f"history ends inside that call: {label} ({kind}) cuts "
            f"{'that value' if len(hit) == 1 else 'those values'} (read, not run): {shown}",
            (
                f"call its differentiable part, the method that computes without the cut ({part}, "
                "which it hands the detached values to)"
                if part
                else "where that code is yours, keep the tensor there (torch.stack or torch.cat, "
                "not torch.tensor(...), float(), .item() or .detach())"
            )
            + ", or compute the loss yourself with torch operations on the model's outputs",
        )
    return None


def _kept_from(g: _Context, most: int = 20000) -> dict:
    """{id of a leaf: [(module name, module, attribute, the tensor)]} for each tensor that a
    module named keeps as an attribute (or in a list or tuple there; a parameter too): a leaf by
    itself, one with history by the leaves its graph reaches; read once per call, at most
    ``most`` nodes in all."""
    if g.kept is not None:
        return g.kept
    g.kept, seen = {}, set()
    for name, module in g.modules:
        for attr, value in (*vars(module).items(), *vars(module).get("_parameters", {}).items()):
            items = value if isinstance(value, (list, tuple)) else (value,)
            for v in items[:16]:
                if isinstance(v, torch.Tensor) and v.grad_fn is None and v.requires_grad:
                    g.kept.setdefault(id(v), []).append((name, module, attr, v))
                if not isinstance(v, torch.Tensor) or v.grad_fn is None:
                    continue
                todo, mine = [v.grad_fn], {v.grad_fn}
                while todo and len(seen) + len(mine) < most:
                    node = todo.pop()
                    leaf = getattr(node, "variable", None)
                    if isinstance(leaf, torch.Tensor):
                        found = g.kept.setdefault(id(leaf), [])
                        if not any(f[2] == attr and f[1] is module for f in found):
                            found.append((name, module, attr, v))
                    for child, _ in node.next_functions:
                        if child is not None and child not in mine:
                            mine.add(child)
                            todo.append(child)
                seen |= mine
    return g.kept


def _kept_cut(t: torch.Tensor, g: _Context) -> tuple[str, str, str] | None:
    """A module named keeps a tensor made from the leaf ``t`` (an attribute whose history
    reaches it: ``ColorJitter(p[0])`` keeps ``p[0]``), and the code its forward runs copies
    that attribute's value without history (``_cut_params``, read, not run): where, and the
    fix; None otherwise."""
    if not t.is_leaf:
        return None
    by_module = {}  # module name -> (the module, {attribute: the tensor})
    for name, module, attr, v in _kept_from(g).get(id(t), ()):
        by_module.setdefault(name, (module, {}))[1][attr] = v
    for name, (module, kept) in by_module.items():
        cls, lines, attrs, methods = type(module), [], [], []
        for meth, fn, *_ in _methods_run(cls):
            owner = next((c for c in cls.__mro__ if meth in vars(c)), cls)
            cuts = _cut_params(module, fn, owner, 2, cls.__name__, frozenset(kept))
            hit = [src for src, found in cuts.items() if src.startswith(".") and found]
            if hit:
                methods.append(f"{owner.__name__}.{meth}")
                attrs += [src[1:] for src in hit]
                lines += [code for src in hit for code, _ in cuts[src]]
        if not lines:
            continue
        attrs, methods, lines = (list(dict.fromkeys(x)) for x in (attrs, methods, lines))
        return (
            "not on the graph: a module's code copies it without history",
            f"{name} ({cls.__name__}) keeps {', '.join(attrs)}"
            + (
                f", made from it ({type(kept[attrs[0]].grad_fn).__name__})"
                if kept[attrs[0]] is not t
                else ""
            )
            + "; the code its forward can run copies "
            f"{'that value' if len(attrs) == 1 else 'those values'} without history (read, not "
            f"run, from {', '.join(methods)}): "
            + "; ".join(lines[:3])
            + (f" and {len(lines) - 3} more" if len(lines) > 3 else ""),
            "if that line runs (a branch may skip it; with watch_cuts(): around the forward "
            "shows it), and where it is yours, build the value with torch.stack or torch.cat (not "
            "torch.tensor(...), float(), .item() or .detach()); in a library, pass a value it keeps as is "
            "(the lines around that one show which form), made from this tensor in forward at "
            "each step (made once, in __init__, it keeps that moment's values)",
        )
    return None


def _torch_own(cls: type) -> bool:
    """Whether ``cls`` is torch's (``torch`` or ``torch.*``; not torchlie, torchmetrics)."""
    return cls.__module__ == "torch" or cls.__module__.startswith("torch.")


def _subclass_leaves(frame) -> list[tuple[str, type, str]]:
    """(name, class, ``file:line: code``) for each tensor among the caller's locals whose class
    is a tensor subclass outside torch, that has no history (no grad_fn, requires_grad False),
    and whose class's ``__new__`` or ``__init__`` (outside torch) builds it anew:
    ``_make_subclass(...)`` or ``.data`` (read with ``ast``, never run). Any failure: none."""
    found, seen = [], {}
    try:
        pairs = list(frame.f_locals.items())
    except Exception:  # noqa: BLE001 - reading the caller must never break its program
        return []
    for name, v in pairs:
        cls = type(v)
        if (
            not isinstance(v, torch.Tensor) or _torch_own(cls)
            or name.startswith("_") or v.grad_fn is not None or v.requires_grad
        ):  # fmt: skip
            continue
        if cls not in seen:
            seen[cls] = ""
            for c in cls.__mro__:
                for fn in (vars(c).get("__new__"), vars(c).get("__init__")):
                    fn = getattr(fn, "__func__", fn)
                    if seen[cls] or not inspect.isfunction(fn) or _torch_own(c):
                        continue
                    read = _parsed(fn)
                    if read is None:  # no source: nothing found
                        continue
                    tree, start, where, lines = read
                    wrapped = {  # x.data handed to a call: a new tensor around the values
                        id(a) for n in ast.walk(tree) if isinstance(n, ast.Call)
                        for a in n.args if isinstance(a, ast.Attribute) and a.attr == "data"
                    }  # fmt: skip
                    hit = next(
                        (
                            n for n in ast.walk(tree)
                            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                            and n.func.attr == "_make_subclass" or id(n) in wrapped
                        ),
                        None,
                    )  # fmt: skip
                    if hit is not None:
                        line = lines[hit.lineno - 1].strip()
                        seen[cls] = f"{where}:{start + hit.lineno - 1}: {line}"
        if seen[cls]:
            found.append((name, cls, seen[cls]))
    return found


def _subclass_note(t: torch.Tensor, g: _Context) -> str:
    """For a leaf that requires grad, not reached, while the caller holds a tensor subclass
    without history whose constructor builds it anew (``_subclass_leaves``): one conditional
    note, that constructor by file:line, and a ``from_*`` of the class only where it exists, to
    be checked."""
    if not (t.is_leaf and t.requires_grad and g.subclassed):
        return ""
    name, cls, where = g.subclassed[0]
    makers = [
        f"{cls.__name__}.{k}"
        for c in cls.__mro__ if not _torch_own(c)
        for k in vars(c) if k.startswith("from_")
    ][:2]  # fmt: skip
    return (
        f"; if {name} (a {cls.__name__}) is made from this tensor: its constructor starts a new "
        f"leaf ({where}; read, not run): make it by torch operations"
        + (f" or {' or '.join(makers)} (check it keeps the graph)" if makers else "")
    )


def _off_here(g: _Context) -> str:
    """With gradients off at the call: where, as a possible cause (a loss detached earlier and
    checked inside a logging ``no_grad`` block has another)."""
    if not g.grad_off:
        return ""
    return (
        f"gradients are off where why_no_grad is called ({g.grad_off}): if the loss was computed "
        "here, that is why; otherwise: "
    )


def _off_here_fix(g: _Context) -> str:
    """The fixes for gradients off at the call, before the general one (``_off_here``): first
    ``enable_grad`` around everything from the forward pass to backward (not where a framework
    runs code on the loss the reader cannot wrap: trial 15's Lightning closure inside transformers'
    no_grad ``AdamW.step``), then removing the switch where nothing needs it."""
    if not g.grad_off or g.loss.is_inference():
        return ""  # an inference tensor: the general fix is the inference one
    inference = torch.is_inference_mode_enabled()
    return (
        "if the loss was computed with gradients off: put "
        + ("with torch.inference_mode(False), torch.enable_grad():" if inference
           else "with torch.enable_grad():")
        + " around everything from your forward pass to backward() (where a framework runs code "
        "on the loss you cannot wrap inside an optimizer step that calls your closure under "
        "no_grad, as older Lightning with transformers' AdamW: an optimizer whose step() runs the "
        "closure with gradients on, as torch.optim's, or a newer framework release; a tensor you "
        "differentiate by there: x = x.detach().requires_grad_()); or remove the "
        "switch, if it is yours: keep no_grad only "
        "around your own in-place updates (p -= lr * p.grad, p.clamp_(), an EMA copy; "
        "torch.optim's step() needs none). Otherwise: "
    )  # fmt: skip


def _eval_too(t: torch.Tensor, g: _Context) -> str:
    """For a frozen parameter whose module is in eval mode (``training`` False, as a library's
    freeze often sets both): training it needs ``.train()`` too, or dropout and BatchNorm stay in
    their inference behaviour (trial 15: speechbrain's ``freeze_params``)."""
    owner, modules = g.held["module"].get(id(t), "").rpartition(".")[0], _by_name(g)
    parts = owner.split(".")
    above = [".".join(parts[:n]) for n in range(1, len(parts) + 1)]  # the topmost first
    owner = next((n for n in above if n in modules and not modules[n].training), None)
    if owner is None:
        return ""
    path = re.sub(r"\.(\d+)(?=\.|$)", r"[\1]", owner)
    return (
        f"; {path} is in eval mode too (training False): also {path}.train(), unless eval is "
        "kept on purpose (BatchNorm statistics frozen) (a library's freeze option may set both: "
        "turn that option off)"
    )


def _not_a_parameter(t: torch.Tensor, kept: str, g: _Context) -> tuple[str, str, str]:
    """A plain tensor the optimizer holds, kept on a module: not used or cut, like any tensor, or
    missed by code that collects the module's parameters; a custom Function on the loss's graph
    (odeint_adjoint's) puts the second first."""
    owner, _, key = kept.rpartition(".")
    module = _module_named(owner, g)
    plain = [  # the module's plain tensors the optimizer holds: all go in one list
        f"{owner}.{k}" for k, v in (vars(module).items() if module is not None else ())
        if isinstance(v, torch.Tensor) and not isinstance(v, torch.nn.Parameter)
        and id(v) in g.held["opt"] and v.grad is None
    ] or [kept]  # fmt: skip
    value = g.names.get(id(t), "")
    functions = sorted(
        {
            type(f).__name__.removesuffix("Backward")
            for f in g.nodes
            if isinstance(f, _FUNCTION_NODE)
        }
    )
    collect = (
        f"if a library or code that collects parameters uses it (odeint_adjoint's adjoint_params, "
        f"DDP, a custom Function given the parameters as inputs): make it a parameter (self.{key} "
        f"= nn.Parameter({value if value and '[' not in value else 'its value'}) in __init__, "
        f"before the optimizer is made), or pass it (adjoint_params=({', '.join(plain)}, "
        f"*{owner}.parameters()))"
    )
    cut = (
        f"if {owner}'s forward does not use it for this loss (a branch not taken): None is right "
        "if it is not meant to train, or use it; if it cuts it: " + _cut_fix(g, t)
    )
    why = (
        f"it is a plain tensor kept on {kept} (requires grad, not an nn.Parameter), so "
        f"{owner}.parameters() does not list it, and the loss's graph does not reach it: "
    )
    if functions:
        return (
            "not on the graph: not a parameter",
            why + f"a custom Function on the graph ({', '.join(functions[:3])}) may run without "
            "it if it differentiates only the parameters it is given; or it is not used, or cut "
            f"({_CUTS})",
            collect + "; else " + cut,
        )
    return (
        "not on the graph: not used or cut, not a parameter",
        why + f"it is not used for this loss, or its value is cut ({_CUTS}); code that collects "
        "parameters misses it too",
        cut + "; " + collect,
    )


def _probe_owner(t: torch.Tensor, g: _Context) -> str:
    """The forward-hook probe for the named module that holds ``t``, and what None means for a
    parameter that only steers a random or rounded choice (nothing differentiable uses it)."""
    owner = g.held["module"].get(id(t), "").rpartition(".")[0]
    module = _module_named(owner, g) if owner else None
    if module is None:
        return ""
    return (
        f"; to see whether {owner} ran with gradients on, before the step: {_probe(owner, module)} "
        f"(nothing printed: its forward did not run, {_PATCHED}; False: under no_grad"
        + (f" (switches: {switches})" if (switches := _switches(owner, g)) else "")
        + "; True: what it computes from this tensor does not reach the loss: not used (None is "
        "right if it need not train), cut, "
        "or used only to draw or round a random choice, such as a crop box's size, which has no "
        "gradient by construction: None is right, and learning it needs a differentiable form of "
        "that choice)"
    )


def _inner_no_grad(g: _Context) -> str:
    """Gradients are on where it is called and a named tensor requires grad: the no_grad may be
    inside a function the reader called, which an ``enable_grad()`` around the call cannot undo.
    Names the methods of the modules named (``forward`` only, below them) that torch's
    ``no_grad`` or ``inference_mode`` decorator wraps (read from the classes, not called)."""
    if not torch.is_grad_enabled() or not any(t.requires_grad for _, t in g.tensors):
        return ""
    found = sorted(
        f"{name}.{attr}".lstrip(".")
        for name, module in g.modules
        for attr in _no_grad_methods(type(module))
        if "." not in name or attr in ("forward", "__call__")
    )
    here = (
        ""
        if not found
        else f"; here: {', '.join(found[:4])}"
        + (f" and {len(found) - 4} more" if len(found) > 4 else "")
    )
    lines, aside = _all_switches(g), _aside_blocks(g)
    sure = [line for line in lines if line.split(": ", 1)[0] not in aside]
    maybe = [line for line in lines if line.split(": ", 1)[0] in aside]
    block = f"; here: {'; '.join(sure[:3])}" if sure else ""
    block += (  # a block whose result the method does not return: a cut only through state
        f"; possibly: {'; '.join(maybe[:2])} (its method returns a value computed outside it)"
        if maybe
        else ""
    )
    block = f" ({block[2:]})" if block else ""
    return (
        "; if gradients were on where you called it, a no_grad inside a function it called wins "
        "over your enable_grad() (a @torch.no_grad() decorator, as on diffusers pipelines' "
        f"__call__ and transformers' generate(){here}; or a with block in the library{block}): a "
        "decorator: call the undecorated function, inspect.unwrap(type(obj).method)(obj, ...) "
        "where it keeps it (__wrapped__); a with torch.no_grad() block (Distribution.sample() has "
        "one) cannot be unwrapped: use the library's differentiable API (.rsample() for .sample()), "
        "or recompute the differentiable part yourself (one forward pass on what it returned)"
    )


def _aside_blocks(g: _Context) -> set[str]:
    """``file:line`` of each ``with`` block that switches gradients off in the methods that
    ``_module_switches`` reads for the modules named, whose body neither returns nor binds a
    name (or ``self.x``) that its method reads outside the block: it wraps work (an update of
    state) beside the value the method returns, so it is the cut only if that state is returned."""
    found = set()
    for _, module in g.modules:
        fns = [fn for _, fn, *_ in _methods_run(type(module))]
        for child, attr in _child_calls(type(module)):
            sub = vars(module).get("_modules", {}).get(child)
            fn = inspect.getattr_static(type(sub), attr, None) if sub is not None else None
            fns.append(getattr(fn, "__func__", fn))
        for fn in fns:
            found |= _aside_in(fn) if inspect.isfunction(fn) else set()
    return found


@functools.lru_cache(maxsize=512)
def _aside_in(fn) -> frozenset:
    """``_aside_blocks`` of one function, read with ``ast``."""
    read, root = _parsed(fn), _root(fn)
    if read is None or root is None:
        return frozenset()
    _, start, where, _ = read
    found = set()
    for block in ast.walk(root):
        if not isinstance(block, ast.With) or not any(
            _turns_off(ast.unparse(item.context_expr)) for item in block.items
        ):
            continue
        inside = {id(n) for s in block.body for n in ast.walk(s)}
        if any(isinstance(n, (ast.Return, ast.Yield, ast.YieldFrom)) for s in block.body
               for n in ast.walk(s)):  # fmt: skip
            continue
        bound = set()
        for s in block.body:
            for n in ast.walk(s):
                targets = (
                    n.targets if isinstance(n, ast.Assign)
                    else [n.target] if isinstance(n, (ast.AugAssign, ast.AnnAssign, ast.For,
                                                      ast.NamedExpr))
                    else [i.optional_vars for i in n.items if i.optional_vars]
                    if isinstance(n, ast.With) else []
                )  # fmt: skip
                for target in targets:
                    for t in ast.walk(target):
                        if isinstance(t, (ast.Name, ast.Attribute)):
                            bound.add(ast.unparse(t))
        read_outside = {
            ast.unparse(n) for n in ast.walk(root)
            if isinstance(n, (ast.Name, ast.Attribute)) and isinstance(n.ctx, ast.Load)
            and id(n) not in inside
        }  # fmt: skip
        if not bound & read_outside:
            found.add(f"{where}:{start + block.lineno - 1}")
    return frozenset(found)


@functools.lru_cache(maxsize=512)
def _no_grad_methods(cls: type) -> tuple[str, ...]:
    """Methods of ``cls`` (outside torch) that torch's no_grad or inference_mode decorator
    wraps, under other decorators too (followed by ``__wrapped__``)."""
    names = []
    for klass in cls.__mro__:
        if klass.__module__.startswith("torch.") or klass is object:
            continue
        for attr, fn in vars(klass).items():
            fn = getattr(fn, "__func__", fn)  # a staticmethod or classmethod
            for _ in range(8):  # the decorators above it, each keeping __wrapped__
                frees = getattr(getattr(fn, "__code__", None), "co_freevars", ())
                if "ctx_factory" in frees and attr not in names:
                    try:
                        made = fn.__closure__[frees.index("ctx_factory")].cell_contents
                    except (ValueError, TypeError, IndexError):
                        break
                    made = getattr(made, "__self__", made)
                    if isinstance(made, (torch.no_grad, torch.inference_mode)):
                        names.append(attr)
                    break
                fn = getattr(fn, "__wrapped__", None)
                if fn is None:
                    break
    return tuple(names)


_SWITCH = re.compile(  # calls and decorators that can turn gradients off (not enable_grad)
    r"\bset_grad_enabled\s*\((?!\s*(mode\s*=\s*)?True\s*\))|\bno_grad\s*\(|\binference_mode\s*\((?!\s*(mode\s*=\s*)?False\s*\))"
    r"|@[\w.]*(no_grad|inference_mode)\b"
)
_STRING = re.compile(r"""("(\\.|[^"\\])*"|'(\\.|[^'\\])*')""")


def _turns_off(line: str) -> bool:
    """Whether the code of ``line`` (not its strings or comment) can turn gradients off."""
    return bool(_SWITCH.search(_STRING.sub('""', line).partition("#")[0]))


@functools.lru_cache(maxsize=512)
def _switch_lines(cls: type) -> tuple[str, ...]:
    """``file:line: line`` for each line of ``cls.forward``'s source, and of the methods it calls
    on ``self`` (outside torch), that can switch gradients off (a call of ``set_grad_enabled``,
    ``no_grad`` or ``inference_mode``; not ``enable_grad``, nor an argument named ``no_grad``),
    read, not run; none where the source cannot be read (builtins, compiled, no file)."""
    if cls.__module__.startswith("torch."):
        return ()
    found = [
        f"{where}:{n}: {line}"
        for _, fn, *_ in _methods_run(cls)
        for where, n, line, _ in _source_switches(fn)
    ]
    return tuple(dict.fromkeys(found))


def _module_switches(module: torch.nn.Module) -> list[str]:
    """``_switch_lines`` of ``module``'s class, then those of the methods its forward calls on
    its submodules (``self.denoiser.sample(x)``: one level, that method only)."""
    found = list(_switch_lines(type(module)))
    for child, attr in _child_calls(type(module)):
        sub = vars(module).get("_modules", {}).get(child)
        fn = inspect.getattr_static(type(sub), attr, None) if sub is not None else None
        fn = getattr(fn, "__func__", fn)
        if inspect.isfunction(fn) and not (fn.__module__ or "").startswith("torch."):
            found += [f"{w}:{n}: {line}" for w, n, line, _ in _source_switches(fn)]
    return list(dict.fromkeys(found))


@functools.lru_cache(maxsize=512)
def _methods_run(cls: type, torch_too: bool = False) -> tuple:
    """(name, function, its ``ast`` node, the name it gives ``self``, file, first line) for
    ``cls.forward`` (and ``__call__`` where the class overrides torch's) and the methods of
    ``cls`` they call on ``self``, in turn; read with ``ast``, never run. Those whose source
    cannot be read are left out, and torch's own unless ``torch_too``."""
    todo, seen, found = ["forward"], set(), []
    if inspect.getattr_static(cls, "__call__", None) is not torch.nn.Module.__call__:
        todo.append("__call__")
    while todo:
        name = todo.pop()
        fn = inspect.getattr_static(cls, name, None)
        fn = getattr(fn, "__func__", fn)
        if name in seen or not inspect.isfunction(fn) or fn.__name__ == "<lambda>":
            continue
        seen.add(name)
        if (fn.__module__ or "").startswith("torch.") and not torch_too:
            continue
        read = _parsed(fn)
        if read is None:  # no source
            continue
        tree, start, where, _ = read
        kinds = (ast.FunctionDef, ast.AsyncFunctionDef)
        root = next((n for n in ast.walk(tree) if isinstance(n, kinds)), None)
        if root is None:
            continue
        me = root.args.args[0].arg if root.args.args else "self"
        found.append((name, fn, root, me, where, start))
        todo += [
            n.func.attr for n in ast.walk(root) if isinstance(n, ast.Call) and _attr_of(n.func, me)
        ]
    return tuple(found)


@functools.lru_cache(maxsize=512)
def _child_calls(cls: type) -> tuple[tuple[str, str], ...]:
    """(attribute, method) for each ``self.<attribute>.<method>(...)`` in ``_methods_run``."""
    found = []
    for *_, root, me, _, _ in _methods_run(cls):
        for n in ast.walk(root):
            func = n.func if isinstance(n, ast.Call) else None
            if isinstance(func, ast.Attribute) and _attr_of(func.value, me):
                found.append((func.value.attr, func.attr))
    return tuple(dict.fromkeys(found))


_NO_CALL = ("isinstance", "hasattr", "type", "id", "super", "issubclass", "print", "len")
_ANY_CHILD = ("children", "named_children", "modules", "named_modules", "_modules", "__dict__")


@functools.lru_cache(maxsize=512)
def _read_not_called(cls: type) -> dict:
    """{attribute: (its attributes read, "file:line")} for each ``self.<attribute>`` whose
    attributes ``cls.forward`` (and the methods it calls on ``self``, torch's too) reads
    (``self.out_proj.weight`` as an operand: not its ``.dtype``, ``.shape``, ``.device``) but
    which it never calls (``self.out_proj(x)``, or a method of it) nor uses whole; none where
    ``self`` is passed to a call (``run_block(self, x)`` may call any) or its children are
    reached by a loop or a name (``self.children()``, ``self._modules``); a tensor whose own
    attribute or method is read (``.dtype``, ``.new_zeros(...)``) is no operand; read with
    ``ast``."""
    reads, used = {}, set()
    for *_, root, me, where, start in _methods_run(cls, True):
        calls = {id(n.func) for n in ast.walk(root) if isinstance(n, ast.Call)}
        above = {id(c): n for n in ast.walk(root) for c in ast.iter_child_nodes(n)}
        for n in ast.walk(root):  # self passed to a call (run_block(self, x)): it may call any
            if _attr_of(n, me) in _ANY_CHILD:  # self.children(): any child may be called
                return {}
            if isinstance(n, ast.Call) and getattr(n.func, "id", "") not in _NO_CALL:
                if any(getattr(a, "id", None) == me for a in (*n.args, *n.keywords)):
                    return {}
                if any(getattr(k.value, "id", None) == me for k in n.keywords):
                    return {}
        for node in ast.walk(root):
            attr = _attr_of(node, me)
            up = above.get(id(node))
            if attr is None or isinstance(node.ctx, ast.Store):
                continue
            if isinstance(up, ast.Attribute) and isinstance(above.get(id(up)), ast.Attribute):
                continue  # self.proj.weight.dtype, .new_zeros(...): no operand read
            if isinstance(up, ast.Attribute) and id(up) not in calls:
                got = reads.setdefault(attr, ([], f"{where}:{start + node.lineno - 1}"))
                got[0].append(up.attr)
            else:
                used.add(attr)
    return {
        a: (tuple(dict.fromkeys(r)), w) for a, (r, w) in reads.items() if a not in used
    }  # fmt: skip


def _bypassed(owner: str, g: _Context) -> tuple[str, str, tuple, str, bool] | None:
    """(parent, child, attributes, file:line, whether the parent is seen on the graph) where ``owner`` is or sits under a module
    (``child``) whose parent's forward reads the child's tensors (``out_proj.weight``) without
    calling it (torch's ``nn.MultiheadAttention``), while each tensor read that requires grad is
    on the loss's graph: code in the child's forward, or wrapping it, never runs."""
    modules = _by_name(g)
    parts = owner.split(".")
    for depth in range(len(parts), 1, -1):
        name, above, attr = ".".join(parts[:depth]), ".".join(parts[: depth - 1]), parts[depth - 1]
        child, parent = modules.get(name), modules.get(above)
        if (
            child is None
            or parent is None
            or vars(parent).get("_modules", {}).get(attr) is not child
        ):
            continue
        reads = _read_not_called(type(parent)).get(attr)
        if reads is None and isinstance(parent, torch.nn.MultiheadAttention) and attr == "out_proj":
            reads = (("weight", "bias"), "")  # its source unread: torch's own layout
        values = []
        for key in reads[0] if reads else ():
            try:
                value = getattr(child, key)  # a wrapper's property gives the wrapped tensor
            except Exception:  # noqa: BLE001 - an attribute that fails to read is not a tensor
                continue
            if isinstance(value, torch.Tensor):
                values.append(value)
        if values and all(not v.requires_grad or id(v) in g.leaves for v in values):
            inside = {id(p) for p in child.parameters()}
            mine = [v for v in (*values, *parent.parameters()) if id(v) not in inside]
            seen = any(  # the parent ran: a tensor it reads, or one of its own, on the graph
                v.requires_grad
                and id(v) in g.leaves
                or v.numel() > 0
                and _storage_of(v) in _saved_memory(g)[1]
                for v in (*values, *mine)
            )
            return above, name, reads[0], reads[1], seen
    return None


def _zipped(owner: str, g: _Context) -> tuple | None:
    """(the holder, the sub-model, file:line, how many sub-models ran, of how many, whether only
    the first ran and the zip pairs them with the forward's ``*inputs``: one input given) where ``owner`` is or sits under an item of an
    ``nn.ModuleList``/``ModuleDict`` that its holder's forward or ``__call__`` pairs with other
    values by ``zip`` (``zip(self.models, inputs)``: gpytorch's ``IndependentModelList``), when no
    parameter of that item is on the loss's graph while one of a sibling's is."""
    modules = _by_name(g)
    parts = owner.split(".")
    for depth in range(len(parts), 2, -1):
        item, lst, holder = (".".join(parts[:k]) for k in (depth, depth - 1, depth - 2))
        sub, seq, top = modules.get(item), modules.get(lst), modules.get(holder)
        if not isinstance(seq, (torch.nn.ModuleList, torch.nn.ModuleDict)) or top is None:
            continue
        on = [any(id(p) in g.leaves for p in m.parameters()) for m in seq.children()]
        if sub is None or any(id(p) in g.leaves for p in sub.parameters()) or not any(on):
            continue
        attr = parts[depth - 2]
        for *_, root, me, where, start in _methods_run(type(top)):
            for n in ast.walk(root):
                if (
                    isinstance(n, ast.Call)
                    and getattr(n.func, "id", "") == "zip"
                    and any(_attr_of(a, me) == attr for a in n.args)
                ):
                    others = [a for a in n.args if _attr_of(a, me) != attr]
                    star = getattr(root.args.vararg, "arg", None)
                    given = bool(others) and all(  # forward's *inputs, or f(*inputs)
                        getattr(a, "id", 0) == star
                        or isinstance(a, ast.Call)
                        and any(getattr(getattr(x, "value", x), "id", 0) == star for x in a.args)
                        and all(isinstance(x, ast.Starred) for x in a.args)
                        for a in others
                    )
                    ran = sum(on)
                    first = ran == 1 and on[0] and given  # one input given: the first only
                    return holder, item, f"{where}:{start + n.lineno - 1}", ran, len(on), first
    return None


def _source_switches(fn) -> list[tuple[str, int, str, str]]:
    """(file name, line number, line, its indent) of each line of ``fn``'s source (a function or
    a code object) that can switch gradients off; none where the source cannot be read."""
    try:
        fn = inspect.unwrap(fn) if callable(fn) else fn  # @torch.no_grad(): the reader's file
        lines, start = inspect.getsourcelines(fn)
        where = Path(inspect.getsourcefile(fn) or "").name
    except (OSError, TypeError, ValueError):
        return []
    return [
        (where, start + i, line.strip(), line[: len(line) - len(line.lstrip())])
        for i, line in enumerate(lines)
        if _turns_off(line)
    ]


def _grad_mode(made) -> tuple[str, str]:
    """("off" or "on", the decorator) for torch's grad-mode context ``made``; ("", "") for any
    other object."""
    mode = getattr(made, "mode", None)
    if isinstance(made, torch.no_grad):
        return "off", "@torch.no_grad()"
    if isinstance(made, torch.enable_grad):
        return "on", "@torch.enable_grad()"
    if isinstance(made, torch.set_grad_enabled) and isinstance(mode, bool):
        return ("on" if mode else "off"), f"@torch.set_grad_enabled({mode})"
    if isinstance(made, torch.inference_mode) and isinstance(mode, bool):
        return (
            ("off", "@torch.inference_mode()") if mode else ("on", "@torch.inference_mode(False)")
        )
    return "", ""


def _turns_on(call: ast.expr) -> bool:
    """Whether a ``with`` item turns gradients on: ``enable_grad()``, ``set_grad_enabled(True)``,
    ``inference_mode(False)`` (the mode written as a constant)."""
    if not isinstance(call, ast.Call):
        return False
    name = getattr(call.func, "attr", getattr(call.func, "id", ""))
    mode = [getattr(a, "value", None) for a in call.args[:1] + [k.value for k in call.keywords]]
    return (
        name == "enable_grad"
        or (name == "set_grad_enabled" and mode == [True])
        or (name == "inference_mode" and mode == [False])
    )


@functools.lru_cache(maxsize=32)
def _on_blocks(code) -> tuple[tuple[int, int], ...]:
    """(first, last) lines of the bodies of the ``with`` blocks that turn gradients on in the
    function of ``code``, one of torch's (its optimizers' steps run the closure in one)."""
    read = _parsed(code)
    if read is None:
        return ()
    tree, start = read[:2]
    return tuple(
        (start + node.body[0].lineno - 1, start + node.end_lineno - 1)
        for node in ast.walk(tree)
        if isinstance(node, (ast.With, ast.AsyncWith))
        and any(_turns_on(item.context_expr) for item in node.items)
    )


def _here(frame) -> str:
    code = frame.f_code
    return (
        f"{getattr(code, 'co_qualname', code.co_name)} at "
        f"{Path(code.co_filename).name}:{frame.f_lineno}"
    )


def _grad_off_at(frame, most: int = 3) -> str:
    """Where the Python stack above ``frame`` (the caller of why_no_grad) turned gradients off.
    Walked outward from the call, the innermost switch that shows decides: a function that
    torch's ``no_grad``, ``inference_mode`` or ``set_grad_enabled(False)`` decorator wraps (plain
    or a generator) is named, file:line of the frame its wrapper calls; one outside a switch that
    turns gradients on again is not: an ``enable_grad`` (``set_grad_enabled(True)``,
    ``inference_mode(False)``) decorator (LBFGS wraps its closure in one) or ``with`` block in
    torch's code (``torch.optim``'s steps run the closure in one). Without one named: the frames
    outside torch nearer the call (the innermost ``most`` of them), as places to look. Not seen:
    a ``with`` block in your code or another package's (it makes no frame); such a block that
    turns gradients on again between a decorated function and the call leaves that function
    named. Read only; any failure gives what was found so far."""
    found, places, inner, on = [], [], None, ""
    try:
        while frame is not None:
            code = frame.f_code
            path = str(Path(code.co_filename).resolve())
            if code.co_name in ("decorate_context", "generator_context") and path.endswith(
                "utils/_contextlib.py"
            ):
                made = frame.f_locals.get("ctx_factory")
                mode, how = _grad_mode(getattr(made, "__self__", made))
                if inner is not None and mode == "off":
                    found.append(f"{_here(inner)}, under {how}")
                elif inner is not None and mode == "on":
                    on = f"{how} on {_here(inner)}"
                    break
            elif path.startswith(_TORCH_DIR + "/"):
                if any(a <= frame.f_lineno <= b for a, b in _on_blocks(code)):
                    on = f"a with block in {_here(frame)}"
                    break
            elif path != str(Path(__file__).resolve()):
                places.append(
                    f"{Path(code.co_filename).name}:{frame.f_lineno} in "
                    f"{getattr(code, 'co_qualname', code.co_name)}"
                )
            inner, frame = frame, frame.f_back
    except Exception:  # noqa: BLE001 - reading the stack must never break the reader's program
        pass
    finally:
        del frame, inner
    if found:
        return "; ".join(found[:most])
    where = "; ".join(places[:most]) or "no frame outside torch"
    if len(places) > most:
        where += f" (the innermost {most} of {len(places)} frames outside torch)"
    look = (
        "look for a with torch.no_grad(), torch.set_grad_enabled(False) or torch.inference_mode()"
    )
    if on:
        return f"turned on again by {on}; {look} after that, in: {where}"
    return (
        "no function on the stack is under torch's no_grad, inference_mode or "
        f"set_grad_enabled(False) decorator; {look} around the call or before it (a block that "
        f"has ended, an earlier notebook cell) in: {where}"
    )


def _all_switches(g: _Context) -> list[str]:
    """The grad switches of every module named (``_module_switches``), once each."""
    return list(dict.fromkeys(line for _, m in g.modules for line in _module_switches(m)))


def _switches(owner: str, g: _Context) -> str:
    """The grad switches in the forward of ``owner`` and of the modules named above it (the
    forwards that call it; a module shared by two has a name under each), nearest first, at most
    three: a library's switch and its option."""
    me = _module_named(owner, g)
    found = []
    for module in _modules_above(g).get(id(me), []) if me is not None else ():
        found += [line for line in _module_switches(module) if line not in found]
    return "; ".join(found[:3])


def _modules_above(g: _Context) -> dict:
    """Once per call: id(module) -> the modules named that hold it (itself too), longest name
    first: ``_switches`` asks per parameter, and a walk of every module's submodules each time
    would cost a product."""
    if g.above is None:
        g.above = {}
        for _, module in sorted(g.modules, key=lambda nm: -len(nm[0])):
            for sub in module.modules():
                g.above.setdefault(id(sub), []).append(module)
    return g.above


def _straight_through(g: _Context, t: torch.Tensor) -> str:
    """Where the graph adds (or subtracts) a value without history to one with it, with ``t``'s
    last size (a code's size, read from the node's private ``_input_metadata``; where torch has
    none, any such add): the form of a straight-through estimator, ``x + (q - x).detach()``,
    whose cut is deliberate, so removing it breaks the estimator. Both purposes are said; the
    form alone cannot tell them apart. Decided per module: the last size of any tensor of
    ``t``'s module counts, so an adapter's A and B are said alike."""
    name = g.held["module"].get(id(t), "")
    holder = _by_name(g).get(name.rpartition(".")[0]) if name else None
    same = holder.parameters(recurse=False) if holder is not None else ()
    sizes = {v.shape[-1] for v in (t, *same) if v.dim()}
    unsized, lasts = _adds_of_constants(g)
    if unsized or lasts & sizes:
        return (
            "; if this is a straight-through estimator (x + (q - x).detach(), a "
            "quantizer; an add of a buffer, a positional encoding, has its form too), it "
            "cuts on purpose: keep it, and train what makes q (a codebook) by a loss term "
            "on q itself, not on the straight-through output (VQ-VAE's codebook loss: (q - "
            "x.detach()).pow(2).mean())"
        )
    return ""


def _adds_of_constants(g: _Context) -> tuple[bool, set]:
    """Once per call (``_straight_through`` asks per parameter): whether the graph adds (or
    subtracts) a value without history where torch records no size, and the last sizes of
    those it records (the operand's, from the node's private ``_input_metadata``)."""
    if g.adds is None:
        unsized, lasts = False, set()
        for fn in g.nodes:
            if type(fn).__name__ in ("AddBackward0", "SubBackward0"):
                inputs = [c for c, _ in fn.next_functions]
                if len(inputs) != 2 or inputs.count(None) != 1:
                    continue
                meta = getattr(fn, "_input_metadata", None)
                shape = tuple(getattr(meta[0], "shape", ())) if meta else None
                if shape is None:
                    unsized = True
                elif shape:
                    lasts.add(shape[-1])
        g.adds = (unsized, lasts)
    return g.adds


def _straight_lines(owner: str, g: _Context) -> str:
    """The first straight-through line (``a + (b - a).detach()``) in the forward of the nearest
    module named above ``owner`` that has one, as ``file:line: line``, where that forward makes
    ``b`` (q) from ``owner``: ``self.<attribute>`` read in that line's ``b`` or in a line
    assigning a name ``b`` reads (``q = self.codebook(idx)``); "" elsewhere."""
    for name, module in sorted(g.modules, key=lambda nm: -len(nm[0])):
        if owner == name or not owner.startswith(f"{name}." if name else ""):
            continue
        if found := _straight_source(type(module)):
            first = owner[len(name) + 1 :].split(".")[0] if name else owner.split(".")[0]
            return found if first in _straight_source(type(module), True) else ""
    return ""


@functools.lru_cache(maxsize=256)
def _straight_source(cls: type, makers: bool = False):
    """``file:line: line`` of the first add (or subtract) in ``cls.forward`` of a ``(b -
    a).detach()``, the straight-through form, read with ``ast``, never run; "" where none or
    unreadable. With ``makers``: the attributes of ``self`` that make ``b`` (read in ``b``, or
    in the value of an assignment to a name ``b`` reads)."""
    try:
        fn = inspect.getattr_static(cls, "forward", None)
        if cls.__module__.startswith("torch.") or fn is None:
            return ""
        tree, start, where, lines = _parsed(fn)
    except Exception:  # noqa: BLE001 - any failure (None: no source) means "no source"
        return ""
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
            for side in (node.left, node.right):
                if (
                    isinstance(side, ast.Call)
                    and isinstance(side.func, ast.Attribute)
                    and side.func.attr == "detach"
                    and isinstance(side.func.value, ast.BinOp)
                    and isinstance(side.func.value.op, ast.Sub)
                ):
                    n = start + node.lineno - 1
                    if not makers:
                        return f"{where}:{n}: {lines[node.lineno - 1].strip()}"
                    return _makers(tree, side.func.value.left)
    return "" if not makers else frozenset()


def _makers(tree, q) -> frozenset:
    """The attributes of the forward's ``self`` read in ``q`` or in the value of an assignment
    (anywhere in the forward) to a name ``q`` reads."""
    fn = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)), None)
    me = fn.args.args[0].arg if fn is not None and fn.args.args else "self"
    names = {n.id for n in ast.walk(q) if isinstance(n, ast.Name)}
    values = [q] + [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign))
        and any(
            isinstance(x, ast.Name) and x.id in names
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
            for x in ast.walk(t)
        )
        and n.value is not None
    ]
    return frozenset(a for v in values for x in ast.walk(v) if (a := _attr_of(x, me)))


def _read_under_detach(owner: str, line: str, module) -> tuple[str, str, str]:
    """No parameter of ``owner`` is on the graph, the graph has a straight-through add of its
    last size and the forward above it has the form in its source: it likely makes ``q`` and is
    read only inside the detached branch, cut on purpose."""
    return (
        "not on the graph: read only under a straight-through .detach()",
        f"a straight-through estimator ({line}) gives the loss q's values "
        f"without their history: what makes q (a codebook) is read only where gradients are "
        f"cut, and no parameter of {owner} is on the graph",
        "keep the cut (it is the estimator); train what makes q by a term that reaches it: a "
        "codebook loss on q before the straight-through ((q - x.detach()).pow(2).mean()), an EMA "
        f"update, or the library's option for it; if {owner} does not make q, it is not called or "
        f"is cut: {_probe(owner, module)} tells which",
    )


def _cut_fix(g: _Context, t: torch.Tensor) -> str:
    """``_CUT_FIX``, the accidental cut first, then the straight-through purpose where the graph
    has its form."""
    deliberate = _straight_through(g, t)
    return ("a cut by accident: " if deliberate else "") + _CUT_FIX + deliberate


def _adapted_fix(copy: str, trained: str = "model", param: str = "") -> str:
    """The fix for weights made from the trained ones and detached, by what they are for; for a
    copy named as one tensor (``fw=fw``), tensor code with ``param``, the parameter it copies."""
    head = re.split(r"[.\[]", copy)[0]
    rest = copy[len(head) :]
    fast = (  # a dict's label is fast['weight']: iterating a dict gives its keys
        "fast_weights" if not head.isidentifier()
        else f"{head}.parameters()" if rest.startswith(".")
        else f"{head}.values()" if rest[:2] in ("['", '["') else head
    )  # fmt: skip
    clear, add = (
        (f"{copy}.grad = None", f"{param}.grad = {copy}.grad.clone() if {param}.grad is None else "
         f"{param}.grad + {copy}.grad")
        if copy == head and head.isidentifier() and param
        else (f"for w in {fast}: w.grad = None", f"for w, w_fast in zip({trained}.parameters(), "
              f"{fast}): w.grad = w_fast.grad if w.grad is None else w.grad + w_fast.grad")
    )  # fmt: skip
    return (
        "if an inner loop adapted them (an inner optimizer's steps), keep the adaptation: first "
        f"order, before the outer backward() clear their .grad ({clear}; "
        "the inner loop's last gradient is still there and backward() adds to it), then after it "
        f"add their gradients to the trained parameters ({add}); second "
        "order, copy without the detach and keep the graph (higher: copy_initial_weights=False, "
        "track_higher_grads=True); predicting with the trained "
        "module instead drops the adaptation; if it is a target or EMA copy, predict with the "
        "trained module and keep the copy out of the graph; do not give it to the optimizer"
    )


def _copy_shaped(v: torch.Tensor, t: torch.Tensor, g: _Context) -> bool:
    """``v``, a plain leaf the loss reaches, has the shape of ``t``, a named module's parameter:
    and its values (a matrix's within 10%: a copy made detached at the step's start); a shape
    alone is common (a square layer, an input or latent of a weight's shape)."""
    return (
        not isinstance(v, torch.nn.Parameter)
        and id(t) in g.held["module"]
        and not _same_memory(v, t)  # t.detach().requires_grad_(): said as sharing its memory
        and v.shape == t.shape
        and (_equal_values(v, t) or t.dim() >= 2 and _tracks(v, t))  # a shape alone: common
    )


def _detached_copy(t: torch.Tensor, copy: torch.Tensor, shown: str, g: _Context) -> tuple:
    """The loss reaches only leaves not named, one a plain tensor of ``t``'s shape and values
    (``_copy_shaped``): most likely ``t``'s weights copied detached for an inner loop or a
    functional call (``higher``'s default ``copy_initial_weights=True``). Said without ``t``'s
    name, so the parameters it holds for share one line."""
    same = "equal" if _equal_values(copy, t) else "close"
    return (
        "not on the graph: the loss uses a detached copy",
        f"the loss's graph reaches only {shown} (not nn.Parameter), none of yours, one with its "
        f"shape and {same} values: most likely a copy of the weights made detached (an inner "
        "loop's fast weights, a functional copy): a copy has no history",
        "make the copy without the detach (higher: innerloop_ctx(..., copy_initial_weights=False);"
        " by hand: p.clone(), not p.detach()); first order on purpose: add the copy's .grad to "
        "p.grad after backward()",
    )


def _adapted(copy: str, trained: str, module: str = "", param: str = "") -> tuple[str, str, str]:
    """The loss reaches plain tensors (not ``nn.Parameter``) that require grad, of the shapes of
    all of a trained module's parameters, and none of those: maybe weights made from them and
    detached (fast weights of an inner loop, ``higher`` with ``track_higher_grads=False``,
    first-order MAML; a functional copy), said as a possibility."""
    return (
        "not on the graph: the loss uses a detached copy",
        f"the loss reaches {copy} (same shape, a plain tensor that requires grad, not an "
        f"nn.Parameter), and such tensors of the shapes of all of {module or trained}'s "
        "parameters, but not "
        f"this one: if it is a copy of this one made for an inner loop (fast weights an inner "
        "optimizer stepped: higher with track_higher_grads=False, first-order MAML; or a "
        "functional copy), a copy has no history, so this one gets no gradient; if it is a leaf "
        "made apart from it, use the parameter itself",
        _adapted_fix(copy, trained, param),
    )


def _copied_into(t: torch.Tensor, g: _Context) -> tuple[str, int] | None:
    """A parameter of another module named (its name and id), of ``t``'s shape, on the loss's
    graph but held by no optimizer named, while an optimizer holds ``t``: ``t``'s values were
    likely copied into it (one that tracks ``t``'s values first: a target or EMA copy)."""
    if id(t) not in g.held["opt"]:
        return None
    found = list(
        _memo(
            "held by shape",
            g,
            lambda: _grouped(
                (leaf.shape, (name, i))
                for i, name in g.held["module"].items()
                if (leaf := g.leaves.get(i, (None,))[0]) is not None and i not in g.held["opt"]
            ),
        ).get(t.shape, [])
    )  # fmt: skip  (once per call: the leaves the modules hold, by shape)
    found.sort(key=lambda f: not _tracks(g.leaves[f[1]][0], t))
    return found[0] if found else None


def _tracks(copy: torch.Tensor, t: torch.Tensor) -> bool:
    """Whether ``copy``'s values equal or track ``t``'s (within 10% of its norm): a plain copy or
    an EMA of it (a target or teacher network), not a combination of several modules' weights."""
    if copy.shape != t.shape or not (copy.is_floating_point() and t.is_floating_point()):
        return False
    with torch.no_grad():
        return bool((copy - t).norm() <= 0.1 * t.norm()) if t.numel() else False


def _copy_of(t: torch.Tensor, g: _Context) -> str | None:
    """The name of a named module's parameter an optimizer holds, off the loss's graph, whose
    values ``t`` (on the graph, in no optimizer) equals or tracks: ``t`` belongs to a target or
    EMA copy (a parameter that replaced one the optimizer holds is no longer in a module)."""
    for name, p in g.tensors:  # a module's parameter: one that replaced it is no copy
        if id(p) in g.held["opt"] and id(p) in g.held["module"] and id(p) not in g.leaves:
            if _tracks(t, p):
                return name
    return None


def _where_cut(g: _Context) -> str:
    """What the tensors' own state rules out for a loss without a graph (a cut leaves no node)."""
    if g.loss.is_inference():
        return (
            "; here: the loss is an inference tensor, so it was made under torch.inference_mode()"
        )
    made = [(n, t) for n, t in g.tensors if t.grad_fn is not None]
    if made:
        name, t = made[0]
        return (
            f"; here: {name} has history (made by {type(t.grad_fn).__name__}), so what made it ran "
            "with gradients: the cut lies between it and the loss (an argmax or integer cast, "
            ".detach(), .item() or numpy, torch.tensor(...), or a no_grad block there); to find "
            "it, run the forward and loss under with watch_cuts():"
        )
    return ""


def _probe(owner: str, module: torch.nn.Module | None = None) -> str:
    """One line the reader pastes: a forward hook on the module that prints whether it ran, and
    with gradients on (this module adds no hook itself: it changes nothing). A class that
    overrides ``__call__`` (gpytorch's modules) may never run the hooks: then the line wraps the
    instance's ``forward`` instead, which such a ``__call__`` usually calls (``_silent`` says
    what its silence means when it does not)."""
    path = re.sub(r"\.(\d+)(?=\.|$)", r"[\1]", owner)  # encoder.convnet.0 -> encoder.convnet[0]
    said = f"print('{path} ran, grad on:', torch.is_grad_enabled())"
    if module is not None and type(module).__call__ is not torch.nn.Module.__call__:
        return (
            f"{path}.forward = (lambda f: lambda *a, **k: {said} or f(*a, **k))({path}.forward) "
            f"({type(module).__name__} overrides __call__, so a forward hook may never fire)"
        )
    return f"{path}.register_forward_hook(lambda m, i, o: {said})"


_PATCHED = (  # the probe is silent too where a library runs a copy of the module, not it
    "or a library runs a patched copy of it instead (higher's innerloop_ctx, which by default "
    "copies the weights detached: copy_initial_weights=False lets their gradient reach them)"
)


def _silent(module: torch.nn.Module | None) -> str:
    """What the probe's silence means: for a class that overrides ``__call__``, only that its
    ``forward`` did not run (its ``__call__`` may dispatch to another method)."""
    if module is not None and type(module).__call__ is not torch.nn.Module.__call__:
        name = type(module).__name__
        return (
            f"its forward did not run (not called, or {name}.__call__ runs another method and "
            "not forward: wrap that method the same way to tell)"
        )
    return "not called"


def _call_site(owner: str, g: _Context) -> str:
    """Where the code calls the topmost module above ``owner`` (or itself) that has no parameter
    on the graph: ``file:line: self.name(...)``, and the ``if`` it sits under, read from its
    parent's ``forward`` and the methods that calls on ``self`` (``_methods_run``), never run;
    "" where there is no such call in that source (a loop over children, getattr)."""
    try:  # reading the reader's source must never stop the report
        return _call_site_read(owner, g)
    except Exception:  # noqa: BLE001
        return ""


def _call_site_read(owner: str, g: _Context) -> str:
    modules, top = _by_name(g), owner
    parts = owner.split(".")
    for depth in range(len(parts) - 1, 0, -1):
        above = modules.get(".".join(parts[:depth]))
        params = list(above.parameters()) if above is not None else []
        if not params or any(id(p) in g.leaves for p in params):
            break
        top = ".".join(parts[:depth])
    parent, _, attr = top.rpartition(".")
    holder = modules.get(parent)
    if holder is None or not attr or attr.isdigit():
        return ""
    for _, fn, root, me, where, start in _methods_run(type(holder)):
        lines = _parsed(fn)[3]
        above = {id(k): n for n in ast.walk(root) for k in ast.iter_child_nodes(n)}
        for n in ast.walk(root):
            if isinstance(n, ast.Call) and _attr_of(n.func, me) == attr:
                at = f"{where}:{start + n.lineno - 1}: {lines[n.lineno - 1].strip()}"
                child, up = n, above.get(id(n))
                while up is not None and not isinstance(up, (ast.If, ast.IfExp)):
                    child, up = up, above.get(id(up))
                if isinstance(up, ast.If):
                    branch = "in the else of" if child in up.orelse else "under"
                    test = lines[up.lineno - 1].strip()
                    at += f" ({branch} {where}:{start + up.lineno - 1}: {test})"
                return at
    return ""


def _never_named(cls: type, key: str) -> str:
    """The words "its source never names self.att_r" where ``cls.forward`` and the methods it calls
    on ``self`` (read with ``ast``, never run) never name ``self.<key>``; "" where one does, or
    where ``self`` is passed on (``run(self, x)``, ``getattr(self, k)``: any may be read)."""
    try:
        run = _methods_run(cls)
    except Exception:  # noqa: BLE001 - any failure means "no source": nothing is said
        return ""
    if not run:
        return ""
    for *_, root, me, _where, _start in run:
        for n in ast.walk(root):
            if _attr_of(n, me) in (
                key,
                *_ANY_CHILD,
                "parameters",
                "named_parameters",
                "_parameters",
                "state_dict",
            ):
                return ""  # named, or reached by a loop over its tensors
            if isinstance(n, ast.Constant) and n.value == key:
                return ""
            if isinstance(n, ast.Call) and any(
                _attr_of(a, me, "") == "" for a in (*n.args, *(k.value for k in n.keywords))
            ):
                return ""  # self passed on: it may read any attribute
    names = ", ".join(f"{cls.__name__}.{r[0]}()" for r in run)
    return f"its source never names self.{key} ({names} read)"


def _watched_rule(seen: str, owner: str, g: _Context, t, unused: str, switches: str) -> tuple:
    """The rule for a module none of whose parameters is on the loss's graph, told by what
    ``watch_cuts`` saw in the forward (``_watched_use``) instead of three cases and a probe."""
    watched = "inside the with watch_cuts() block that made the loss, "
    if seen == "read off":
        return (
            "not on the graph: its module ran, this parameter was read only with gradients off",
            watched + "other parameters of its module were read with gradients on, this one only "
            "with gradients off (under torch.no_grad() in the forward, a reentrant checkpoint's "
            "first pass, or by a norm, an EMA or an optimizer's step)",
            "None is right if it is not meant to train; to train it, make the forward read it "
            "with gradients on"
            + (f" (the switches above it: {switches})" if switches else "")
            + "; in a reentrant checkpoint: use_reentrant=False",
        )
    if (
        seen == "compared"
    ):  # read only by a comparison in the watch that made the loss (review 46 R3)
        return (
            "not on the graph: its module ran, this parameter was read only by a comparison",
            watched + "other parameters of its module were read, this one only by a comparison "
            "or a check whose result has no gradient by nature (p > 0, torch.isfinite(p)), "
            "outside a method of a module; if that comparison is how the model uses it (a mask), "
            "it passes no gradient; if it is a check, the forward skips it (a branch not taken, "
            "a line that reads another parameter where it means this one)",
            "None is right if it is not meant to train; to train it, replace the hard comparison "
            "by a soft surrogate that has a gradient (torch.sigmoid(p / t), a temperature t; a "
            "straight-through estimator: hard + soft - soft.detach()), or fix the code that "
            "should read it",
        )
    if seen == "compared in":  # (h > self.thr) in its forward: its only reads (review 47 S3)
        return (
            "not on the graph: read only by a comparison in its module",
            watched + "a method of its module read it, but only by a comparison or another op "
            "whose result has no gradient by nature (h > self.thr, torch.where's condition, an "
            "argmax): such a result passes no gradient back to it",
            "None is right if it is not meant to train: freeze it ("
            + re.sub(r"\.(\d+)(?=\.|$)", r"[\1]", g.held["module"].get(id(t), "") or "it")
            + ".requires_grad_(False)); to train it, replace the hard comparison by a soft "
            "surrogate that has a gradient (torch.sigmoid((h - thr) / t), a temperature t; a "
            "straight-through estimator: hard + soft - soft.detach())",
        )
    if seen == "unread":
        return (
            "not on the graph: its module ran, this parameter was not read",
            watched + "other parameters of its module were read, this one by no torch call: no "
            "op read this parameter in the watched call; the forward skips it (a branch not "
            "taken, a token or embedding the pooling drops, a line that reads another parameter "
            "where it means this one), or reads it only as a copy (.data, .detach())",
            "None is right if it is not meant to train (skip it where you read .grad); to train "
            "it, fix the code that should read it (in a library: its forward, or a release that "
            "fixes it), so the forward reads it on the way to the loss",
        )
    if seen == "none":
        site = _call_site(owner, g)
        check = (
            "check that condition and " if " (under " in site or " (in the else " in site else ""
        )
        return (
            "not on the graph: its module did not run with gradients on in the watch",
            watched
            + "no torch call read its parameters with gradients on: it is not called there (a "
            "branch not taken, an argument passed in another slot, a layer defined but unused), "
            "it ran with gradients off (torch.no_grad(), inference_mode, a reentrant "
            "checkpoint's first pass: the watch lists those calls), or it ran outside the block "
            "(before it, in another thread)",
            "None is right if it is not meant to train (skip parameters whose .grad is None where "
            "you read them; DDP: find_unused_parameters=True); to train it, call it"
            + (f" (its call is {site}: {check}the arguments that lead there)" if site else "")
            + ", with gradients on ("
            + (f"the switches above it: {switches}; " if switches else "")
            + "in a library, an option may drive them; a reentrant checkpoint: "
            "use_reentrant=False); if its values reach the loss copied into another module "
            "(.data =, copy_, load_state_dict), compute the combination inside the forward "
            "(torch.func.functional_call); " + _PATCHED,
        )
    wrap, value = _rewrapped(g.held["module"].get(id(t), ""), g, anywhere=True)
    return (
        "not on the graph: its output is unused or cut",
        watched + "a call read its parameters with gradients on (its forward, or other code), but "
        "nothing computed from them reaches the loss (a comparison or an integer result passes "
        "none; torch.equal or torch.allclose returns a bool)"
        + (
            f"; {wrap}: nn.Parameter(...) makes a new leaf of a value computed in forward, a cut "
            "that watch_cuts cannot see: if this module computes that value, that line is the cut"
            if wrap
            else ""
        ),
        (
            f"if it is that line: use {value} as a tensor where the parameter is read, not a new "
            "nn.Parameter (see that parameter's entry); "
            if wrap
            else ""
        )
        + f"{unused}; else it is cut after it (watch_cuts names the place if it saw one): "
        + _cut_fix(g, t),
    )


def _params_reached(name: str, g: _Context) -> tuple[bool, bool]:
    """Whether the module named ``name`` (``_by_name``) has parameters, and whether one is a leaf
    the graph reaches; kept per name for the call (a model's top module holds every parameter,
    asked per parameter, a walk of them all each)."""
    known = _memo("params reached", g, dict)
    if name not in known:
        module = _by_name(g).get(name)
        params = list(module.parameters()) if module is not None else []
        known[name] = (bool(params), any(id(p) in g.leaves for p in params))
    return known[name]


def _unused_fix(owner: str, g: _Context, t=None) -> str:
    """The fix by purpose for a module that runs while the loss does not use its output: the
    topmost module above ``owner`` (or itself) whose parameters are all off the graph is the
    one to freeze or drop; where ``owner`` has parameters on the graph (``model.logits`` beside
    ``model.fc``), the parameter ``t`` alone."""
    top = owner
    name = g.held["module"].get(id(t), "") if t is not None else ""
    if name and _params_reached(owner, g)[1]:
        top = name  # freezing the module would freeze the parameters that train
    parts = owner.split(".")
    for depth in range(len(parts) - 1, 0, -1):
        name = ".".join(parts[:depth])
        has, reached = _params_reached(name, g)
        if not has or reached:
            break
        top = name
    path = re.sub(r"\.(\d+)(?=\.|$)", r"[\1]", top)
    return (
        "if the loss need not use it (an unused head, a pooler), None is right: freeze it "
        f"({path}.requires_grad_(False)) or drop it; to train it, use its output in the loss"
    )


_SHAPE_READS = frozenset(("shape", "dtype", "device", "ndim", "size", "dim", "numel", "is_cuda",
                          "requires_grad", "new_zeros", "new_ones", "new_empty", "new_full"))  # fmt: skip
_DISTRIBUTION = torch.distributions.Distribution
_LAYOUT_READS = frozenset(("is_leaf", "grad_fn", "layout", "stride", "is_contiguous", "data_ptr",
                           "is_floating_point", "is_complex", "element_size", "nelement",
                           "storage_offset", "get_device", "untyped_storage", "is_sparse",
                           "itemsize", "nbytes", "names", "output_nr", "is_set_to", "is_same_size",
                           "type", "is_inference", "is_shared", "is_pinned", "is_meta",
                           "is_quantized", "is_signed", "is_conj", "is_neg", "is_mkldnn",
                           "is_nested", "is_sparse_csr", "is_xpu", "is_mps", "is_ipu",
                           "_has_compatible_shallow_copy_type"))  # fmt: skip


def _value_names(expr, me: str | None = None, valued=None) -> set:
    """The names whose values ``expr`` reads, not only their shape, dtype or device (``x.shape``,
    ``x.size(0)``, ``torch.zeros_like(x)``, ``len(x)``); ``me.<attr>`` is read as the name
    ``"me.attr"`` where ``valued(attr)`` says it may hold a tensor."""
    skip = set()
    for n in ast.walk(expr):
        if isinstance(n, ast.Attribute) and n.attr in _SHAPE_READS:
            skip.update(id(s) for s in ast.walk(n.value))
        elif isinstance(n, ast.Call):
            name = getattr(n.func, "attr", getattr(n.func, "id", ""))
            if name.endswith("_like") or name in ("len", "isinstance", "type"):
                skip.update(id(s) for a in n.args for s in ast.walk(a))
    found = set()
    for n in ast.walk(expr):
        if id(n) in skip:
            continue
        if me and (attr := _attr_of(n, me)) is not None:
            if valued is None or valued(attr):
                found.add(f"{me}.{attr}")
        elif isinstance(n, ast.Name) and n.id != me:
            found.add(n.id)
    return found


def _bindings(nodes: list) -> list:
    """(names bound, the value read) for each binding among ``nodes``: ``=``, annotated and
    augmented assignments, ``for`` targets, ``with ... as``, ``:=``."""
    found = []
    for n in nodes:
        if isinstance(n, ast.Assign):
            targets, value = n.targets, n.value
        elif isinstance(n, (ast.AnnAssign, ast.AugAssign)) and n.value is not None:
            targets, value = [n.target], n.value
        elif isinstance(n, (ast.For, ast.AsyncFor)):
            targets, value = [n.target], n.iter
        elif isinstance(n, ast.withitem) and n.optional_vars is not None:
            targets, value = [n.optional_vars], n.context_expr
        elif isinstance(n, ast.NamedExpr):
            targets, value = [n.target], n.value
        else:
            continue
        names = [name for t in targets for name in _bound(t)]
        if names:
            found.append((names, value))
    return found


def _flows(bindings: list, seeds: dict, read) -> dict:
    """{name: the sources its value is made from}: the values of ``seeds`` ({name: a frozenset})
    carried through ``bindings`` ((names bound, the value read)), in any order (a loop body reads
    last round's names). The one tracer of names through a body (read, never run) that the
    rules share: a draw's (``.sample()`` made from the forward's inputs or the caller's tensors;
    ``read`` is ``_value_names``) and a copy's (a parameter copied without history into the
    return; ``read`` is ``_read_names``). ``read(value)`` gives the names a value carries; a name
    with a dot (``self.w``, ``.w``: an attribute of self) is a source of itself."""
    reads = [(names, read(value)) for names, value in bindings]
    made = dict(seeds)
    for _, names in reads:
        made.update((r, frozenset((r,))) for r in names if "." in r and r not in made)
    for _ in range(len(reads) + 1):
        changed = False
        for names, got_from in reads:
            got = frozenset().union(*(made.get(r, ()) for r in got_from))
            for name in names:
                if got - made.get(name, frozenset()):
                    made[name], changed = made.get(name, frozenset()) | got, True
        if not changed:
            break
    return made


def _kind(obj, made: bool) -> type | bool | None:
    """What ``obj`` is for a ``.sample()`` call: the distribution class (an instance of
    torch.distributions' ``Distribution``; with ``made``, a class that makes one); False for what
    is surely no distribution (a Python module, a class or an object without ``rsample``: a
    DataFrame, a replay buffer, ``random``); None where it cannot be told (a function, an
    ``nn.Module`` that may return one, an object that has ``rsample`` outside torch, a subclass
    whose own ``sample`` may keep the graph)."""
    cls = obj if made else type(obj)
    if isinstance(cls, type) and issubclass(cls, _DISTRIBUTION):  # torch's own .sample(): no graph
        owner = next((c for c in cls.__mro__ if "sample" in vars(c)), object)
        return cls if _torch_own(owner) else None
    if made and not isinstance(obj, type):
        return False if isinstance(obj, types.ModuleType) else None
    return None if obj is None or hasattr(cls, "rsample") else False


def _resolve(node, scope: dict, me: str | None = None, instance=None):
    """The object a name, ``a.b.c`` or ``me.<attr>`` is bound to: looked up in ``scope`` (or on
    ``instance`` for ``me``) with ``inspect.getattr_static``, nothing run; None otherwise."""
    if me and instance is not None and (attr := _attr_of(node, me)) is not None:
        own = vars(instance)
        for held in (
            own,
            own.get("_modules", {}),
            own.get("_parameters", {}),
            own.get("_buffers", {}),
        ):
            if attr in held:
                return held[attr]
        return inspect.getattr_static(type(instance), attr, None)
    if isinstance(node, ast.Name):
        return scope.get(node.id)
    if isinstance(node, ast.Attribute):
        base = _resolve(node.value, scope, me, instance)
        return None if base is None else inspect.getattr_static(base, node.attr, None)
    return None


def _has_rsample(cls: type | None, obj=None) -> bool | None:
    """``has_rsample`` of a distribution class (of ``obj``, where a property of torch's own class
    decides it: ``Independent``, ``TransformedDistribution``); None where it cannot be told."""
    flag = inspect.getattr_static(cls, "has_rsample", None) if cls is not None else None
    if isinstance(flag, property) and obj is not None and _torch_own(cls):
        flag = obj.has_rsample  # torch's own property: reads its base distribution's flag
    return flag if isinstance(flag, bool) else None


def _code(line: str) -> str:
    """``line`` without its comment and outer spaces (a ``#`` inside a string is kept)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(line).readline))
    except (tokenize.TokenError, SyntaxError):
        return line.strip()
    at = next((t.start[1] for t in tokens if t.type == tokenize.COMMENT), len(line))
    return line[:at].strip()


def _draw(call, rec, kind, where: str, lines, start: int) -> dict:
    """One ``.sample()`` call found: where, its line, the same call with ``.rsample``."""
    args = [ast.unparse(a) for a in call.args] + [ast.unparse(k) for k in call.keywords]
    return {
        "where": f"{where}:{start + call.lineno - 1}",
        "code": _code(lines[call.lineno - 1]) if call.lineno <= len(lines) else "",
        "rsample": f"{ast.unparse(rec)}.rsample({', '.join(args)})",
        "recv": ast.unparse(rec),
        "cls": kind if isinstance(kind, type) else None,
    }


def _sample_calls(nodes: list, bindings: list, resolve, held=None) -> list:
    """(the call, its receiver, what it draws from: ``_kind``) for each ``.sample(...)`` among
    ``nodes`` whose result is kept (not a bare statement) and whose receiver is not surely
    something else than a distribution; ``resolve(node)`` looks a callee up, ``held(name)`` the
    object a name holds now (the caller's locals)."""
    dropped = {id(n.value) for n in nodes if isinstance(n, ast.Expr)}
    found = []
    for n in nodes:
        if not (
            isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr == "sample" and id(n) not in dropped
        ):  # fmt: skip
            continue
        rec = n.func.value
        obj = held(rec.id) if held and isinstance(rec, ast.Name) else None
        if obj is not None:
            kind = _kind(obj, False)
        elif isinstance(rec, ast.Call):
            kind = _kind(resolve(rec.func), True)
        elif isinstance(rec, ast.Name):
            kinds = [_kind(resolve(v.func), True) for names, v in bindings
                     if rec.id in names and isinstance(v, ast.Call)]  # fmt: skip
            kind = next((k for k in kinds if k), None if not kinds or None in kinds else False)
        else:
            kind = _kind(resolve(rec), False) if resolve(rec) is not None else None
        if kind is not False:
            found.append((n, rec, kind, obj))
    return found


class _Uncut(ast.NodeTransformer):
    """Replaces each copy without history (``_copied``) by a constant."""

    def __init__(self, space: dict):
        self.space = space

    def visit(self, node):
        if _copied(node, self.space) is not None:
            return ast.copy_location(ast.Constant(None), node)
        return self.generic_visit(node)


def _uncut(expr, space: dict):
    """A copy of ``expr`` where each copy without history in it (``x.detach()``, ``.item()``,
    ``torch.tensor(x)``, ``float(x)``) is a constant: what it reads carries no history on."""
    return _Uncut(space).visit(ast.parse(ast.unparse(expr), mode="eval").body)


@functools.lru_cache(maxsize=512)
def _samples(cls: type) -> bool:
    """Whether a method ``_methods_run`` reads for ``cls`` calls some ``.sample(...)``."""
    return any(
        isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "sample"
        for *_, root, _, _, _ in _methods_run(cls)
        for n in ast.walk(root)
    )


def _module_draws(module: torch.nn.Module, name: str) -> list:
    """The draws by ``.sample()`` in ``module``'s forward and the methods it calls on ``self``
    (``_methods_run``; read with ``ast``, never run) from a distribution made from the forward's
    inputs or from the tensors ``self`` holds (a draw from constants, ``Normal(0, 1)``, is the
    noise of a reparameterisation: no cut); each with the module's name and class, and the
    attributes of ``self`` (submodules, tensors) the distribution is made from."""
    found = []
    if not _samples(type(module)):
        return found

    def valued(attr):  # a tensor or a module, or not known: a number, a flag or a string is none
        v = _resolve(ast.Attribute(ast.Name("self"), attr), {}, "self", module)
        return v is None or isinstance(v, (torch.Tensor, torch.nn.Module, property, _DISTRIBUTION))

    for _, fn, root, me, where, start in _methods_run(type(module)):
        nodes = list(_own_nodes(root.body))
        bindings = _bindings(nodes)
        scope = getattr(fn, "__globals__", {})
        params = _params(root, True)[1]
        live = [(names, _uncut(v, scope)) for names, v in bindings]  # a copy passes no history
        made = _flows(
            live,
            {p: frozenset((p,)) for p in params},
            functools.partial(_value_names, me=me, valued=valued),
        )

        def resolve(node, scope=scope, me=me):
            return _resolve(node, scope, me, module)

        for call, rec, kind, _ in _sample_calls(nodes, bindings, resolve):
            source = rec if not isinstance(rec, ast.Name) else next(
                (v for names, v in bindings if rec.id in names and isinstance(v, ast.Call)), rec
            )  # fmt: skip
            read = _value_names(_uncut(source, scope), me, valued)
            labels = frozenset().union(*(made.get(r, ()) for r in read))
            if not labels:
                continue  # made from constants: no history to lose
            lines = _parsed(fn)[3]
            d = _draw(call, rec, kind, where, lines, start)
            d.update(owner=name, klass=type(module).__name__, rs=_has_rsample(d["cls"]),
                     library="-packages" in (fn.__code__.co_filename or ""),
                     made={x.partition(".")[2] for x in labels if x.startswith(f"{me}.")})  # fmt: skip
            found.append(d)
    return found


def _caller_draws(frame, g: _Context) -> tuple[list, bool | None]:
    """(the draws by ``.sample()`` in the caller's own body, whether that body can cut a value's
    history: a ``no_grad``/``inference_mode``/``set_grad_enabled(False)`` call or a
    ``.detach()``/``.data``; None where it cannot be read). The body is a function's (not the
    defs in it) or a script's top level, read with ``ast``, never run. Each draw with the ids of
    the tensors it is made from: for a receiver the caller holds now that is a distribution, the
    leaves (and nodes) its own tensors' graphs reach (its ``__dict__``, no lazy property run);
    for any other, the tensors and modules named by the caller's names it reads, through the
    caller's assignments. A receiver surely no distribution (a DataFrame, a replay buffer) is
    left out. Any failure: none."""
    try:
        code = frame.f_code
        if code.co_name == "<module>":
            lines = linecache.getlines(code.co_filename)
            body, start = ast.parse("".join(lines)).body, 1
        else:
            tree, start, _, lines = _parsed(code)
            body = tree.body[0].body
        nodes = list(_own_nodes(body))
    except Exception:  # noqa: BLE001 - reading the caller must never break its program
        return [], None
    cuts = any(
        isinstance(n, ast.Attribute)
        and n.attr == "data"
        and isinstance(n.ctx, ast.Load)
        or isinstance(n, ast.Call)
        and (
            getattr(n.func, "attr", None) in ("detach", "detach_")
            or getattr(n.func, "attr", getattr(n.func, "id", ""))
            in ("no_grad", "inference_mode", "set_grad_enabled")
            and _turns_off(ast.unparse(n))
        )
        for n in nodes
    )
    if not any(isinstance(n, ast.Attribute) and n.attr == "sample" for n in nodes):
        return [], cuts
    try:
        scope = {**frame.f_globals, **frame.f_locals}
        where = Path(code.co_filename).name
        return _read_draws(nodes, scope, where, lines, start, g), cuts
    except Exception:  # noqa: BLE001 - reading the caller must never break its program
        return [], cuts


def _read_draws(nodes: list, scope: dict, where: str, lines: list, start: int, g) -> list:
    """``_caller_draws`` once the caller's body is read."""
    bindings = _bindings(nodes)
    calls = _sample_calls(
        nodes, bindings, lambda node: _resolve(node, scope), lambda name: scope.get(name)
    )
    seeds = {}
    for key, v in scope.items():
        if isinstance(v, torch.Tensor) and v.requires_grad:
            seeds[key] = frozenset((id(v),))
        elif isinstance(v, torch.nn.Module) and any(v is m for m in g.expected.values()):
            seeds[key] = frozenset(id(p) for p in v.parameters())
    live = [(names, _uncut(v, scope)) for names, v in bindings]  # a copy passes no history
    made = _flows(live, seeds, _value_names) if calls else {}
    losses = {key for key, v in scope.items() if v is g.loss}  # the names the loss has here
    last = max((v.end_lineno for names, v in bindings if losses & set(names)), default=None)
    off = [
        w for w in nodes
        if isinstance(w, (ast.With, ast.AsyncWith))
        and any(_turns_off(ast.unparse(item.context_expr)) for item in w.items)
    ]  # fmt: skip
    found = []
    for call, rec, kind, obj in calls:
        if (
            last is not None
            and call.lineno > last
            or any(any(x is call for x in ast.walk(w)) for w in off)
        ):
            continue  # below the loss's line, or under no_grad: it did not make the loss
        if isinstance(obj, _DISTRIBUTION):
            ids = _reached(t for t in vars(obj).values() if isinstance(t, torch.Tensor))
        else:  # a tensor held now: the leaves its graph reaches; another name: through the code
            read = _value_names(_uncut(rec, scope))
            now = [scope[r] for r in read if isinstance(scope.get(r), torch.Tensor)]
            ids = (_reached(now) if now else frozenset()).union(
                *(made.get(r, ()) for r in read if not isinstance(scope.get(r), torch.Tensor))
            )
        if ids:
            bound = {
                n for names, v in bindings if any(x is call for x in ast.walk(v)) for n in names
            }
            flows = _flows(live, {n: frozenset("d") for n in bound}, _value_names) if losses else {}
            d = _draw(call, rec, kind, where, lines, start)
            d.update(ids=ids, rs=_has_rsample(d["cls"], obj), owner="", library=False)
            d["feeds"] = any(flows.get(n) for n in losses)  # the loss is assigned from the draw
            if losses and bound and not d["feeds"]:
                continue  # kept in names the loss is not made from
            found.append(d)
    return sorted(found, key=lambda d: (not d["feeds"], int(d["where"].rpartition(":")[2])))


def _reached(tensors, most: int = 4096) -> frozenset:
    """The ids of ``tensors``, of the nodes their graphs hold and of the leaves those reach."""
    found, todo = set(), []
    for t in tensors:
        found.add(id(t))
        if t.grad_fn is not None:
            todo.append(t.grad_fn)
    seen = set()
    while todo and len(seen) < most:
        fn = todo.pop()
        if fn in seen:
            continue
        seen.add(fn)
        found.add(id(fn))
        variable = getattr(fn, "variable", None)
        if isinstance(variable, torch.Tensor):
            found.add(id(variable))
        todo += [c for c, _ in fn.next_functions if c is not None]
    return frozenset(found)


def _draws_for(t: torch.Tensor, g: _Context) -> list:
    """The draws by ``.sample()`` that may cut ``t``: the caller's, made from it (first), then
    those in the forwards of the modules named (``_module_draws``; in a forward above ``t``'s
    module, only one made from the branch that holds it), once per line."""
    if g.draws is None:
        try:
            g.draws = [
                d for n, m in g.modules if not _torch_own(type(m)) for d in _module_draws(m, n)
            ]  # fmt: skip
        except Exception:  # noqa: BLE001 - reading a library's source must never stop the report
            g.draws = []
    mine = [
        d for d in g.caller_draws
        if id(t) in d["ids"] or t.grad_fn is not None and id(t.grad_fn) in d["ids"]
    ]  # fmt: skip
    owner = g.held["module"].get(id(t), "").rpartition(".")[0]
    for d in g.draws:  # in a forward above t's module: only where that branch makes the draw
        above = owner.startswith(f"{d['owner']}.")
        if not above or owner[len(d["owner"]) + 1 :].split(".")[0] in d["made"]:
            mine.append(d)
    return list({d["where"]: d for d in reversed(mine)}.values())[::-1]


def _drawn(t: torch.Tensor, found: tuple, g: _Context) -> tuple[str, str, str]:
    """``found`` (rule, why, fix) with the draw by ``.sample()`` that may cut ``t`` said first
    (``_draws_for``), where the rule is one a cut explains; the fix leads with ``.rsample()``
    where the distribution has it."""
    rule, why, fix = found
    if rule not in _DRAW_RULES:
        return found
    draws = _draws_for(t, g)
    if not draws:
        return found
    d = draws[0]
    cls = d["cls"].__name__ if d["cls"] is not None else ""
    unsure = "a torch.distributions object draws so without a graph"
    if d["owner"] and cls:
        said = (
            f"{d['owner']} ({d['klass']}) draws from a {cls} by .sample(), which keeps no graph, "
            f"at {d['where']}: {d['code']} (read, not run)"
        )
    elif d["owner"]:
        said = (
            f"{d['owner']} ({d['klass']}) calls .sample() on {d['recv']} at {d['where']}: "
            f"{d['code']} (read, not run): {unsure}"
        )
    elif cls:
        said = (
            f"{d['where']} draws from {d['recv']}, a {cls} made from it, by .sample(), which "
            f"keeps no graph: {d['code']}"
        )
    else:
        said = f"{d['where']} calls .sample() on {d['recv']}, made from it: {unsure}: {d['code']}"
    if d.get("feeds"):
        said += ", and the loss is computed from the draw (read, not run)"
    if d["rs"] is False:
        cure = (
            f"{cls} has no .rsample(), so the draw has no gradient: add "
            f"{d['recv']}.log_prob(draw) * cost.detach() to the loss you minimise (cost: each "
            "draw's loss; for a reward, -log_prob(draw) * reward.detach()), or use a relaxed "
            "distribution (RelaxedBernoulli, RelaxedOneHotCategorical)"
        )
    else:
        cure = f"{d['rsample']} (" + (
            f"{cls} has it" if d["rs"] else "where the distribution has it: has_rsample"
        )
        cure += "; a library's line: check a newer release, or patch it)" if d["library"] else ")"
    lead = (
        "if its value passes the draw" if d["owner"]
        else "the draw" if d.get("feeds") and cls
        else "if the loss is made from the draw"
    )  # fmt: skip
    more = f"; also {', '.join(x['where'] for x in draws[1:3])}" if len(draws) > 1 else ""
    return rule, f"{said}{more}; {why}", f"{lead} at {d['where']}: {cure}; else {fix}"


_DRAW_RULES = (
    "not on the graph",
    "not on the graph: its module is not used or is cut",
    "not on the graph: its module did not run with gradients on in the watch",
    "not on the graph: its output is unused or cut",
    "not on the graph: the loss has no graph",
    "not on the graph: the loss reaches only parameters you did not name",
    "not on the graph: the loss reaches only leaves you did not name",
    "not on the graph: not used or cut, not a parameter",
)


def _checkpointing(owner: str, g: _Context) -> str | None:
    """A module at or above ``owner`` that checkpoints its blocks, unless it is known to use the
    non-reentrant checkpoint: transformers' ``gradient_checkpointing``, timm's ``grad_checkpointing``
    (plain attributes, read from ``__dict__``). Only the modules named ``owner`` or above it are
    read (found by name in a map made once per call), in the order of ``g.modules``."""
    by_name = _memo("positions", g, lambda: _grouped((n, i) for i, (n, _) in enumerate(g.modules)))
    above = {owner, ""} | {owner[:k] for k, c in enumerate(owner) if c == "."}
    for i in sorted(i for n in above for i in by_name.get(n, ())):
        name, module = g.modules[i]
        if not (owner == name or owner.startswith(name + ".") or not name):
            continue
        own = vars(module)
        if own.get("gradient_checkpointing") is True or own.get("grad_checkpointing") is True:
            func = own.get("_gradient_checkpointing_func")
            keywords = func.keywords if isinstance(func, functools.partial) else {}
            if keywords.get("use_reentrant") is False:
                continue
            how = " (use_reentrant=True)" if keywords.get("use_reentrant") else ""
            return f"{name or 'the module'} checkpoints its blocks{how}"
    return None


_REGION = (
    "a compiled region (torch.compile: its CompiledFunctionBackward node), whose inside this "
    "instrument cannot see"
)
_COMPILED_FIX = (
    "run the same code without torch.compile (or call the module it wraps, model._orig_mod) and "
    "call why_no_grad there, where it can see inside"
)


def _special(g: _Context) -> tuple[set, set]:
    """The nodes of torch.compile's regions (AOTAutograd's CompiledFunctionBackward), and of the
    other custom Functions: read once per call, since each parameter's rule asks for them."""
    if g.special is None:
        compiled = {f for f in g.nodes if type(f).__name__.startswith("CompiledFunction")}
        functions = {f for f in g.nodes if isinstance(f, _FUNCTION_NODE)} - compiled
        g.special = (compiled, functions)
    return g.special


def _compiled(g: _Context) -> set:
    """The nodes of torch.compile's regions (AOTAutograd's CompiledFunctionBackward)."""
    return _special(g)[0]


def _not_written(t: torch.Tensor, g: _Context) -> tuple[str, str, str]:
    """On the graph (or no loss given) and ``.grad`` is None: a question of when it is read."""
    if g.inside:
        return (
            "read during backward",
            "called inside a backward pass (a hook): a leaf's .grad is written by its AccumulateGrad "
            "node, after the module and tensor hooks that run on the way",
            "read it after backward() returns, or use t.register_post_accumulate_grad_hook(fn)",
        )
    if g.loss is None:
        return (
            "no backward yet",
            "its .grad was never written, or was set to None",
            "run backward() first",
        )
    node = g.leaves.get(id(t), (None, None))[1]
    compiled = _compiled(g)
    if node is not None and compiled and _cut_by(compiled, g.loss.grad_fn, node, g.kids):
        if g.with_grad:
            return (
                "no gradient reached it: a compiled region",
                f"every path from the loss to it passes through {_REGION}, and other leaves got "
                "gradients: the compiled code gave it none (a .detach(), no_grad or integer result "
                "inside it, or it is not used there), or this pass did not write it "
                "(backward(inputs=[...]) without it, or .grad set to None after backward())",
                "if you passed inputs= or cleared .grad: include it in inputs=, or read .grad "
                f"before zero_grad(); otherwise (a cut inside): {_COMPILED_FIX}",
            )
        if not g.ran:
            return (
                "read before backward: through a compiled region",
                f"it is on the loss's graph only through {_REGION}: whether backward() will give "
                "it a gradient cannot be read",
                f"call loss.backward(), then read .grad; if it stays None: {_COMPILED_FIX}",
            )
    functions = _special(g)[1]
    if (
        g.with_grad
        and node is not None
        and functions
        and _cut_by(functions, g.loss.grad_fn, node, g.kids)
    ):
        return (
            "no gradient reached it: a custom Function",
            "every path from the loss to it passes through a custom autograd.Function, and other "
            "leaves got gradients: its backward returned None for this input (or marked it "
            "non-differentiable, or set_materialize_grads(False) let None through)",
            "return a gradient for that input from the Function's backward; if None is meant, skip "
            "it where you read .grad",
        )
    if not _SHOWS_HOOKS:
        return (
            "not written (when cannot be told)",
            f"it is on the loss's graph; on torch {torch.__version__} whether a backward ran cannot "
            "be told: read before backward(), cleared after it (zero_grad()), computed by "
            "torch.autograd.grad (which writes no leaf's .grad), or left out of backward(inputs=...)",
            "read .grad after backward() and before zero_grad(); with autograd.grad, use what it returns",
        )
    if g.ran and node is not None and (raised := _raised_at(g, node)):
        return raised
    if g.ran and g.with_grad:
        return (
            "not written by this pass",
            "other leaves of this graph got gradients, this one did not: backward(inputs=[...]) "
            "without it, or its .grad was set to None after backward() (zero_grad() on an "
            "optimizer or module holding it, p.grad = None)",
            "include it in inputs=, or read .grad before zero_grad()",
        )
    if g.ran:
        return (
            "cleared or never written",
            "a pass ran through the graph but no leaf of it has a .grad: it was "
            "torch.autograd.grad (which returns gradients and writes no leaf's .grad), or .grad was "
            "cleared after backward() (optimizer.zero_grad() or model.zero_grad() before your read; "
            "set_to_none=True is the default since torch 2.0), or the backward raised (an op with "
            "no derivative, such as floor_divide: the leaves below it get no .grad)",
            "read .grad after backward() and before zero_grad(), or use what autograd.grad returns; "
            "if backward() raised, replace the op its error names",
        )
    what, cause, fix = _will_be_zero(g, node)
    return (
        "read before backward"
        + (", or left out by a retained one" if g.with_grad else "")
        + (
            f"; {what}" + (", or raised already" if g.with_grad else "")  # review 46 R13
            if what == _RAISES
            else f"; will be zero: {what}"
            if what
            else ""
        ),
        "it is on the loss's graph, and no backward pass has freed the graph yet: .grad is written "
        "when backward() reaches it"
        + (
            "; other leaves of it have a .grad: from a backward with retain_graph=True that left "
            "this one out (inputs=[...] without it) or whose .grad was cleared since, or from an "
            "earlier step"
            if g.with_grad
            else " (if you ran backward(retain_graph=True), it was cleared since; "
            "torch.autograd.grad with retain_graph=True or create_graph=True keeps it too, and "
            "writes no leaf's .grad)"
        )
        + (
            f"; {cause}"
            if what == _RAISES
            else f"; {cause}, so that gradient will be zero"
            if what
            else "; no zero cause it reads is on "
            "the way (a dead ReLU, a multiplication by zero, a saturated softmax, sigmoid or tanh, "
            "a clamp at its bound, an exact fit, a step op)" + _unread(g, node)
        ),
        (f"{fix}; then call loss.backward() and read .grad" if what == _RAISES else "")
        or "call loss.backward() first, then read .grad"
        + (
            "; after one: include it in inputs=, or read .grad before zero_grad()"
            if g.with_grad
            else "; after torch.autograd.grad: use what it returns, and for .grad call "
            "backward() on the loss you train on (where those gradients feed another loss, as "
            "in a MAML inner step or a gradient penalty, that outer loss, not this one)"
        )
        + (f"; for the zero: {fix}" if what else ""),
    )


_STATE_FIX = (  # a factor of a state reset to 0 (a membrane potential, an RNN state)
    "a state reset to 0: what multiplies it gets a gradient from the second step on: run more "
    "than one step per sequence (for a single step, zero is right)"
)
_ZERO_FIX = {
    "a second derivative of a piecewise-linear op": "where the loss differentiates a gradient "
    "again (a PINN residual such as u_xx, a curvature or Hessian term), a smooth activation in "
    "place of it: nn.Tanh, nn.Softplus, nn.SiLU or nn.GELU (their second derivative is not zero); "
    "where this term is a first-order penalty beside a loss that trains the tensor (a gradient "
    "penalty), zero from this term is right",
    "a torch.normal draw": "reparameterise the draw: torch.distributions.Normal(mean, std, "
    "validate_args=False).rsample() (validate_args=False: Normal refuses a std of 0, which "
    "torch.normal takes; it also drops the check for a negative std, which torch.normal refuses: "
    "keep std positive, as exp or softplus of a parameter; a float or broadcast mean or std gives torch.normal's shape), or mean + "
    "std * noise, the noise of the draw's full shape",
    "a draw that replaces the values": "h.normal_(m, s) (uniform_, bernoulli_...) writes a draw "
    "over h that does not depend on h's values: to add noise, h = h + s * torch.randn_like(h) + m "
    "(out of place, h's shape); a draw whose mean and std train: mean + std * noise, the noise of "
    "the draw's full shape; a Bernoulli or Poisson draw of a probability or rate that trains: a "
    "relaxed draw (torch.distributions.RelaxedBernoulli(t, probs=p).rsample()) or a score-function "
    "(REINFORCE) term",
    "dead ReLU": "a lower learning rate, another initialisation, or LeakyReLU",
    "a multiplication by zero": "a per-sample weight (an advantage, a reward) all zero: zero is "
    "right for that batch; a weight of 0.0: a non-zero weight for that term; a mask from a "
    "comparison (x > 0): a soft one (torch.sigmoid(k * x)); " + _STATE_FIX,
    "an input all zero": "an all-zero input gives the layer's weight no gradient on this "
    "batch: right for features that are zero in it; else find what zeroes it (a ReLU before it "
    "that died: a lower learning rate, another initialisation, or LeakyReLU; a mask or padding "
    "that covers every value)",
    "a parameter at zero": "a parameter at zero blocks the gradient of what comes before it on "
    "this step; right if the zero init is on purpose (a zero-initialised output layer, "
    "ControlNet's zero conv, adaLN-Zero's gate, LoRA's B, zero_init_residual's last norm): it "
    "trains from the next step when its own gradient is not zero; else initialise it non-zero",
    "a parameter at zero that cannot move": "a parameter at zero in no optimizer named is "
    "never moved by them, so what comes before it never gets a gradient (unless an optimizer "
    "not named holds it): give it to the optimizer (a frozen one: requires_grad_() first), or "
    "initialise it non-zero",
    "zeros that block each other": "this parameter is at zero too, and those zeros got no gradient "
    "on this step either: each blocks the other's gradient, so with no other loss or batch that "
    "gives one of them a gradient they stay at zero; initialise one of them non-zero (LoRA: A "
    "random, B zero)",
    "two parameters at zero": "two parameters at zero in one product keep each other at zero: "
    "neither ever gets a gradient; initialise one of them non-zero (LoRA: A random, B zero)",
    "saturated": "feed logits to a loss that takes logits (F.cross_entropy, "
    "BCEWithLogitsLoss) instead of a softmax or sigmoid; lower the scale or temperature before "
    "it; check the inputs' range (normalise them)",
    "a softmax over one element": "a softmax over a dimension of size 1 is always 1: for one "
    "output use torch.sigmoid (or BCEWithLogitsLoss on the logit); else take the softmax over the "
    "class dimension",
    "an exact fit": "nothing to fix if the fit is meant; otherwise check that the targets are not "
    "made from the outputs",
    "a clamp at its bound": "if the bound is right, the value's scale or initialisation is not: "
    "start it inside the range (or rescale what feeds the clamp); else change the bound; to let a "
    "gradient through at the bound, a straight-through clamp (x + (x.clamp(lo, hi) - x).detach()) "
    "or a soft one (lo + (hi - lo) * torch.sigmoid(x); F.softplus for one side)",
    "a step op": "a straight-through estimator (x + (torch.round(x) - x).detach()) or a "
    "differentiable surrogate (a sigmoid for a step, a soft rounding)",
}


_DRAW_FIX = {  # the out-of-place form of each draw (_DRAWN), by its name
    "normal_": "h.normal_(m, s) writes a draw over h that does not depend on h's values: to add "
    "noise, h = h + s * torch.randn_like(h) + m (out of place, h's shape); a draw whose mean and "
    "std train: mean + std * noise, the noise of the draw's full shape",
    "uniform_": "h.uniform_(a, b) writes a draw over h that does not depend on h's values: to add "
    "it, h = h + a + (b - a) * torch.rand_like(h) (out of place)",
    "bernoulli_": "h.bernoulli_(p) writes 0s and 1s over h that do not depend on h's values: for "
    "a mask that keeps each value with probability p, h = h * torch.bernoulli(torch.full_like(h, "
    "p)) / p (F.dropout(h, 1 - p) does the same)",
    "torch.bernoulli(p)": "a Bernoulli draw of a probability that trains: a relaxed draw "
    "(torch.distributions.RelaxedBernoulli(t, probs=p).rsample()) or a score-function (REINFORCE) "
    "term (Bernoulli(p).log_prob(draw) * cost.detach() added to the loss)",
    "torch.poisson(rate)": "a Poisson draw of a rate that trains: a score-function (REINFORCE) "
    "term (torch.distributions.Poisson(rate).log_prob(draw) * cost.detach() added to the loss), "
    "or for a large rate the Gaussian stand-in rate + rate.sqrt() * torch.randn_like(rate)",
}


def _draw_fix(ops) -> str:
    """The fix for the draws named (``normal_``, ``torch.poisson(rate)``...): each its own form;
    another in-place draw is drawn into a new tensor and combined out of place."""
    return "; ".join(
        _DRAW_FIX.get(op)
        or f"h.{op}(...) writes a draw over h that does not depend on h's values: draw into a new "
        f"tensor and combine it out of place (h = h + torch.empty_like(h).{op}(...))"
        for op in ops
    )


_KINDS = (  # _ZERO_FIX's key for each kind of zero node, by a word of its description
    ("dead ReLU", "is all zero (dead)"), ("a multiplication by zero", "multiplication"),
    ("a step op", "(zero derivative)"), ("saturated", "saturated"), ("an exact fit", "minimum"),
    ("a softmax over one element", "size 1"), ("a parameter at zero", _AT_ZERO), ("a parameter at zero that cannot move", "so the zero stays"), ("two parameters at zero", "a product of two parameters at zero"), ("a clamp at its bound", "a clamp ("),
    ("a torch.normal draw", "torch.normal("), ("an input all zero", "whose input is all zero ("),
    ("a draw that replaces the values", "(drawn anew"),
    ("a second derivative of a piecewise-linear op", "differentiated again"),
)  # fmt: skip


def _step_fix(ops) -> str:
    """The straight-through line written with the step ops found (``floor``, ``sign``...);
    ``x - x % 1`` is a floor and ``x - fmod(x, 1)`` a trunc, so those are written as such."""
    lines = []
    for op in ops:
        real = {"%": "floor", "fmod": "trunc"}.get(op, op)
        line = f"x + (torch.{real}(x) - x).detach()"
        line += f" (x - x {op} 1 is a {real})" if op == "%" else ""
        line += f" (x - fmod(x, 1) is a {real})" if op == "fmod" else ""
        if line not in lines:
            lines.append(line)
    fix = _ZERO_FIX["a step op"].replace("x + (torch.round(x) - x).detach()", "; ".join(lines))
    return f"{_ABS_FIX}; for a step op of yours: {fix}" if "sgn" in ops else fix


_ABS_SGN = (  # SgnBackward0: torch.sgn, or abs's own derivative in a loss made from a gradient
    "sgn is abs's derivative: a loss made from a gradient (create_graph=True, a PINN residual "
    "u_xx) through abs differentiates it again, unless sgn is a torch.sgn of yours"
)
_ABS_FIX = (
    "for abs differentiated again: a smooth stand-in, torch.sqrt(x * x + eps) (eps > 0 on the "
    "scale of x, such as 1e-2: a tiny eps such as 1e-6 makes the curvature at 0 so sharp that "
    "training stalls), or a smooth activation (nn.Tanh, nn.Softplus, nn.SiLU or nn.GELU); a straight-through "
    "sgn does not make the second derivative non-zero"
)


_RAISES = "backward() will raise"


def _raised_at(g: _Context, node) -> tuple[str, str, str] | None:
    """(rule, why, fix) after a backward, where ``node`` is below an op whose saved value was
    changed in place since (``_stale_nodes(after=True)``): the backward raised there, before it
    reached ``node``; None otherwise."""
    if g.stale_after is None:
        g.stale_after = _stale_nodes(g, after=True)
    stale = g.stale_after
    below, todo = set(stale), list(stale)
    while todo and node not in below:
        for child in g.kids.get(todo.pop(), ()):
            if child not in below:
                below.add(child)
                todo.append(child)
    if node not in below:
        return None
    why, fix = _raises(g, stale)
    left = (  # a pass with inputs= that left it out does not reach that op, and does not raise
        "; or, if your backward did not raise, backward(inputs=[...]) left it out (that pass "
        "does not reach the op): it raises once the pass includes it"
        if g.with_grad
        else ""
    )
    return (
        "backward() raised before reaching it" + (", or inputs= left it out" if left else ""),
        "the pass stopped at an op on the way from the loss to it, before it wrote this .grad; "
        + why
        + left,
        f"{fix}; then run the forward again, call loss.backward() and read .grad",
    )


def _stale_leaves(g: _Context, stale: dict) -> list[str]:
    """The leaves that require grad (parameters) whose memory a saved value of a ``stale`` node
    is (a weight's transpose saved by mm): changed in place after the graph saved them."""
    at, found = {}, []
    for v, _ in g.leaves.values():
        try:
            if v.requires_grad:
                at.setdefault(v.untyped_storage().data_ptr(), v)
        except RuntimeError:  # a tensor without storage: not a parameter's
            continue
    for fn in stale:
        for attr in _SAVED_ATTRS.get(type(fn), ()):
            try:
                raw = getattr(fn, attr)
                try:  # only the saved value that was changed: the one whose read raises
                    getattr(fn, attr.replace("_raw_saved_", "_saved_"))
                    continue
                except RuntimeError as error:
                    if _INPLACE not in str(error):
                        continue
                for item in raw if isinstance(raw, (list, tuple)) else [raw]:
                    data = getattr(item, "data", None) if item is not None else None
                    leaf = at.get(data.untyped_storage().data_ptr()) if data is not None else None
                    if leaf is not None and g.label(leaf) not in found:
                        found.append(g.label(leaf))
            except RuntimeError:  # freed, or without storage
                continue
    return found


def _raises(g: _Context, stale: dict | None = None) -> tuple[str, str]:
    """(why, fix) for a graph holding a saved tensor changed in place since (``stale``, else
    ``g.stale``)."""
    stale = stale or g.stale
    ops = sorted(set(stale.values()))
    draws = sorted(
        {
            _DRAWN[type(fn).__name__]
            for fn in g.nodes
            if type(fn).__name__ in _DRAWN
            and any(c in stale for c, _ in fn.next_functions if c is not None)
        }
    )
    by = f" (by {', '.join(draws)}, a draw in place)" if draws else ""
    why = (
        f"{', '.join(ops)} saved a value for its backward that was changed in place after it{by}: "
        "backward() raises 'one of the variables needed for gradient computation has been "
        "modified by an inplace operation' when it reaches that op (the .grad of tensors nearer "
        "the loss may be written already; whatever that value holds now, it is not what the op "
        "saw)"
    )
    fix = "make the op that changes it out of place (x = x + 1, not x.add_(1))"
    trained = _stale_leaves(g, stale)
    if trained:  # an optimizer's step (or p.clamp_ under no_grad) after the graph saved it
        why = why.replace(
            "changed in place after it",
            f"changed in place after it ({_summary(trained)}, a tensor that trains: an "
            "optimizer's step or another in-place update of it, such as clamp_ under no_grad)",
            1,
        )
        return why, (
            "the graph was built before that update: if it is an earlier step's, reached "
            "through a value carried over (find_old_graph(loss, ...) names it), detach that "
            "state at each step's start, or recompute it each step if it is built from weights "
            "still training; if it is this step's, run the update after backward(), or the "
            "forward after the update (a GAN: step D after G's backward through D)"
        )
    if draws:  # a draw over a clone still replaces the values: its gradient is zero
        return why, _draw_fix(draws) + "; " + fix
    return why, fix + ", or change a clone"


def _will_be_zero(g: _Context, node) -> tuple[str, str, str]:
    """(what, why, fix) when every path from the loss to ``node`` passes through a node that
    passes back no gradient (``_zero_nodes``); empty strings otherwise."""
    if g.stale is None:
        g.stale = _stale_nodes(g) if g.loss is not None and g.loss.grad_fn is not None else {}
    if g.stale and node is not None:  # backward() raises when it reaches that op
        return _RAISES, *_raises(g)
    if g.zero is None:  # read once per report
        g.zero = _zero_nodes(g) if g.loss is not None and g.loss.grad_fn is not None else {}
    zero = g.zero
    if not zero or node is None or not _cut_by(set(zero), g.loss.grad_fn, node, g.kids):
        return "", "", ""
    alone = [k for k in zero if _cut_by({k}, g.loss.grad_fn, node, g.kids)]
    kinds = sorted({zero[k] for k in alone} or set(zero.values()))  # what cuts it by itself
    found = [name for name, word in _KINDS if any(word in k for k in kinds)]
    if {"a parameter at zero that cannot move", "two parameters at zero"} & set(found):
        found = [k for k in found if k != "a parameter at zero"]  # it will not train next step
    what = ", ".join(found)
    fix = "; ".join(_ZERO_FIX[name] for name in found)
    steps = sorted(
        {k.partition(" (zero derivative)")[0] for k in kinds if "(zero derivative)" in k}
    )
    fix = fix.replace(_ZERO_FIX["a step op"], _step_fix(steps)) if steps else fix
    if steps == ["sgn"]:  # most likely abs's own derivative: not told as a step op
        what = what.replace("a step op", "sgn, abs's derivative")
    drawn = sorted({k.partition("a draw by ")[2].partition(" (drawn anew")[0] for k in kinds
                    if "(drawn anew" in k})  # fmt: skip
    drawn_fix = _ZERO_FIX["a draw that replaces the values"]
    fix = fix.replace(drawn_fix, _draw_fix(drawn)) if drawn else fix
    why = "every path from the loss to it passes through " + ", ".join(kinds)
    return what, why + (f" ({_ABS_SGN})" if "sgn" in steps else ""), fix


def _zero(t: torch.Tensor, grad: torch.Tensor, g: _Context) -> tuple[str, str, str]:
    """``.grad`` is all zero: say what can make it so, and what the graph shows."""
    hooks = _hooks(t, g)
    node = g.leaves.get(id(t), (None, None))[1]
    if g.loss is not None and not g.ran and g.alive:  # before backward, or after a retained one
        what, cause, fix = _will_be_zero(g, node)
        every = f"; {cause}, so every backward through this graph writes zero" if what else ""
        every = f"; {cause}" if what == _RAISES else every
        every = every or _unread(g, node)
        if id(t) in g.cleared:  # non-zero when a call saw it: a backward only adds to .grad
            return (
                "zero: set to zero after an earlier call saw it non-zero",
                "an earlier why_no_grad call on this loss saw a non-zero .grad; a backward adds to "
                ".grad, so most likely something set it to zero since (zero_grad(set_to_none=False), "
                ".grad.zero_(), a hook that writes it), unless a later backward added exactly the "
                "opposite (a backward of -loss)" + every,
                "read .grad before zero_grad() (set_to_none=False leaves zeros, not None)"
                + (f"; for the zero: {fix}" if what else ""),
            )
        if g.since.get(id(t)):  # this call's own memory of its last call on this loss
            return (
                "zero: written after an earlier call" + (f": {what}" if what else ""),
                "its .grad changed after an earlier why_no_grad call on this loss saw it (a "
                "backward with retain_graph=True ran, or it was set): it was written as zero"
                + every,
                fix
                or "a cause it does not read (a mask made by a comparison, a hook "
                "on an activation): retain_grad() on the activations; it lies between the last "
                "one from the loss down whose .grad is not zero and the first whose .grad is",
            )
        return (
            "zero: left from before, or written by a retained backward"
            + (f"; {what}" if what == _RAISES else f"; will be zero: {what}" if what else ""),
            "no backward has freed this graph: none ran yet, and these zeros are left from before "
            "(zero_grad(set_to_none=False)), or one ran with retain_graph=True and wrote them"
            + every,
            fix
            or "to tell which, call why_no_grad(loss, ...) before backward() and again after it",
        )
    compiled = _compiled(g)
    if node is not None and compiled and _cut_by(compiled, g.loss.grad_fn, node, g.kids):
        return ("zero: from a compiled region", f"every path from the loss to it passes through "
                f"{_REGION}, which wrote this zero", _COMPILED_FIX)  # fmt: skip
    functions = _special(g)[1]
    if node is not None and functions and _cut_by(functions, g.loss.grad_fn, node, g.kids):
        names = sorted({re.sub(r"Backward$", "", type(f).__name__) for f in functions})
        return (
            "zero: from a custom Function",
            f"every path from the loss to it passes through a custom autograd.Function "
            f"({', '.join(names[:3])}), whose backward returned zeros for it: the computation "
            "inside does not read this very tensor (it is in the Function's inputs, but the "
            "function it runs uses another), or the outputs that depend on it are unused",
            "if it is meant to train, the computation inside must use this tensor: a library's "
            "input list (odeint_adjoint's adjoint_params) must hold the tensors the function "
            "reads, and a parameter meant for the function must be the one it reads (share it: "
            "one nn.Parameter, assigned to both modules); ctx.set_materialize_grads(False) only "
            "turns the zero into None",
        )
    what, cause, fix = _will_be_zero(g, node)  # step ops are seen by name after backward()
    found = _on_the_way(g, node) if node is not None and g.loss is not None else ([], [], [])
    steps, jumps, twice = found
    if what:
        why = f"the gradient written is zero: {cause}"
    elif steps or jumps:
        why = "the gradient written is zero; on the way from the loss: " + "; ".join(
            (
                [
                    f"{', '.join(steps)}: piecewise constant, "
                    + ("their derivative is" if len(steps) > 1 else "its derivative is")
                    + " zero"
                    + (f" ({_ABS_SGN})" if "sgn" in steps else "")
                ]
                if steps
                else []
            )
            + ([f"{', '.join(jumps)}: x - x % 1 is a floor (zero derivative)"] if jumps else [])
        )
        fix = _step_fix([*steps, *jumps])
    elif twice:  # named after backward too; whether every path passes its zero edge is not told
        why = (
            "the gradient written is zero; on the way from the loss, the derivative of a "
            f"piecewise-linear op differentiated again: {', '.join(twice)}; its derivative to "
            "the op's input is zero wherever defined, so a loss made from a gradient "
            "(create_graph=True) gets no gradient through it on that input; whether every path "
            "passes that way needs the values a backward freed (call why_no_grad before backward)"
        )
        fix = _ZERO_FIX["a second derivative of a piecewise-linear op"]
    elif node is not None and g.loss is not None and (zeros := _zero_read_on_the_way(g, node, t)):
        said = _at_zero(zeros, g, computed=False)
        stuck = not t.detach().any() and all(  # t at zero too, and none got a gradient
            v.grad is None or not v.grad.any() for v in zeros if v.requires_grad
        )  # (review 46 R6: a zero down and a zero up Linear keep each other at zero)
        kind = (
            "a parameter at zero that cannot move"
            if "never moves" in said
            else "zeros that block each other"
            if stuck
            else "a parameter at zero"
        )
        why = (
            "the gradient written is zero; on the way from the loss an op reads "
            + said.partition("a product with ")[2]
            + ": if it multiplies what comes before it (a zero-initialised output layer, LoRA's B, "
            "a zero gate or norm weight), it blocks that gradient on this step"
        )
        fix, what = _ZERO_FIX[kind], kind
    else:
        why = (
            "the gradient written is zero, and no op it can still read is zero by itself"
            + (" (a backward freed the values they saved)" if g.ran else "")
            + ": a multiplication by zero (a weight of 0.0, a mask), a dead ReLU, a softmax, sigmoid or tanh saturated "
            "(outputs exactly 0 or 1), a clamp at its bound, a loss at its minimum (an exact fit), a hook "
            "on an activation: those are not listed; a mask made by a comparison (x > 0) passes none"
        )
        cancel = "" if hooks else _cancel(g, node)
        why += cancel
        fix = (
            "to see which, call why_no_grad(loss, ...) before backward() (or after "
            "backward(retain_graph=True)): it names a multiplication by zero, a dead ReLU, a "
            "saturated softmax, sigmoid or tanh, a clamp at its bound, and an exact fit"
        ) + (
            "; paths that cancel ((x + c) - x): if the sample is data, not a path to train "
            "through, draw it with .sample() or .detach() it; if you meant to train through it (a "
            "reparameterised sample), the zero is right for that term"
            if cancel
            else ""
        )
    if hooks:
        why += f"; hooks on it or its module that could zero it: {', '.join(hooks)}"
    return ("zero" + (f": {what}" if what else ""), why, fix)


def _cancel(g: _Context, node) -> str:
    """The explanation of last resort, said only where the graph shows it: on the way from the
    loss to ``node`` lies a subtraction ``(x + c) - x`` (or ``x - (x + c)``), whose derivative in
    ``x`` is exactly zero, and no other node that passes back no gradient (``g.zero``) is on the
    way, and ``node`` reaches it only through ``x`` (inside ``c`` its derivative is 1, not 0).
    ``log_prob`` of a sample drawn by ``rsample`` from the same distribution has this shape
    (``value - loc`` with ``value = loc + eps * scale``); a skip connection, a residual update
    ``out - x`` for a weight inside the block, or a value used twice does not."""
    if node is None or g.loss is None or g.loss.grad_fn is None:
        return ""
    parents = collections.defaultdict(list)
    for fn, kids in g.kids.items():
        for child in kids:
            parents[child].append(fn)
    below, todo = {node}, [node]  # node and the nodes it is reached through, up to the loss
    while todo:
        for up in parents[todo.pop()]:
            if up not in below:
                below.add(up)
                todo.append(up)
    if any((fn[0] if isinstance(fn, tuple) else fn) in below for fn in g.zero or {}):
        return ""  # another cause is on the way: it is named, or could not be read

    def reaches(root) -> bool:  # node is root or below it
        return root is not None and not _cut_by(set(), root, node, g.kids)

    def adds_to(sub) -> bool:  # sub is (x + c) - x or x - (x + c), all alphas 1, node below x only
        if getattr(sub, "_saved_alpha", 1) != 1 or len(sub.next_functions) < 2:
            return False
        (a, _), (b, _) = sides = sub.next_functions[:2]
        for add, x in ((a, sides[1]), (b, sides[0])):
            if (
                type(add).__name__ == "AddBackward0"
                and getattr(add, "_saved_alpha", 1) == 1
                and x[0] is not None
                and x in add.next_functions
            ):
                c = [fn for fn, _ in add.next_functions if (fn, _) != x]
                return reaches(x[0]) and not any(reaches(fn) for fn in c)
        return False

    if not any(type(fn).__name__ == "SubBackward0" and adds_to(fn) for fn in below):
        return ""
    return (
        "; on the way, (x + c) - x, whose derivative in x is exactly zero: two paths from it may "
        "cancel exactly (log_prob of a sample drawn from the same distribution by rsample: the "
        "mean's derivative is zero)"
    )


def _leaves_below(fn, most: int = 3) -> list[torch.Tensor]:
    """The leaves below ``fn``, in the order of its inputs (``a @ b``: a, then b)."""
    found, seen, todo = [], {fn}, [fn]
    while todo and len(found) < most:
        node = todo.pop()
        variable = getattr(node, "variable", None)
        if isinstance(variable, torch.Tensor):
            found.append(variable)
        for child, _ in reversed(node.next_functions):  # popped first to last
            if child is not None and child not in seen:
                seen.add(child)
                todo.append(child)
    return found


def _ops_below(fn, most: int = 4) -> str:
    """The ops that made a tensor, from its leaves up (``randn * 2 + 1``: "mul, add")."""
    found, seen, todo = [], {fn}, [fn]
    while todo:
        node = todo.pop()
        if not hasattr(node, "variable"):
            found.append(re.sub(r"Backward\d*$", "", type(node).__name__).lower())
        for child, _ in node.next_functions:
            if child is not None and child not in seen:
                seen.add(child)
                todo.append(child)
    found = list(dict.fromkeys(reversed(found)))
    return ", ".join(found[:most]) + (", ..." if len(found) > most else "")


def _index(kind: str, g: _Context, tensors) -> _Index:
    """The ``_Index`` of ``tensors()`` (the leaves, the saved tensors), made once per call."""
    return _memo(kind, g, lambda: _Index(tensors(), g))


def _memo(kind: str, g: _Context, make):
    """``make()``, made once per call and kept in ``g.index`` under ``kind``: an index of the
    graph or the modules that a rule asked per tensor reads (made per tensor, a product)."""
    if kind not in g.index:
        g.index[kind] = make()
    return g.index[kind]


def _grouped(pairs) -> dict:
    """key -> the values of ``pairs`` with that key, in their order."""
    groups = {}
    for key, value in pairs:
        groups.setdefault(key, []).append(value)
    return groups


def _saved_memory(g: _Context) -> tuple[set, set]:
    """Once per call: the storages of the saved tensors that hold values, and of all of them
    (``_same_memory(saved, v)`` and ``_same_memory(v, saved)``), so each is one look-up."""
    if g.saved_memory is None:
        full = {_storage_of(v) for v in g.saved if v.numel() > 0} - {None}
        g.saved_memory = (full, {_storage_of(v) for v in g.saved} - {None})
    return g.saved_memory


def _saved_ids(g: _Context) -> set:
    """Once per call: the ids of the saved tensors (``any(v is t for v in g.saved)``, per tensor,
    would be a walk of them each)."""
    if g.saved_ids is None:
        g.saved_ids = {id(v) for v in g.saved}
    return g.saved_ids


def _copy_on_graph(t: torch.Tensor, g: _Context) -> str | None:
    """A leaf the graph reaches, or a tensor it saved, that shares ``t``'s memory or its values.
    Only the ones ``_Index.near`` finds are compared: the others can match neither test."""
    leaves = _index("leaves", g, lambda: [v for v, _ in g.leaves.values()])
    for variable in map(leaves.tensors.__getitem__, leaves.near(t)):
        if variable is t:
            continue
        label = g.label(variable)
        if _same_memory(variable, t) and not (
            id(variable) in g.held["module"]
            and id(t) in g.held["opt"]
            and id(t) not in g.held["module"]
        ):  # a module's parameter made from it (nn.Parameter(p.data)) replaced it: not a copy
            return f"{label}, which shares its memory (made by .detach() or .data, then requires_grad_())"
        if variable.dtype != t.dtype and _equal_values(variable, t):
            return f"{label}, a {variable.dtype} copy made outside the graph (a cached cast)"
        if id(variable) not in g.held["module"] and not _constant(t) and _equal_values(variable, t):
            return f"{label}, a copy with its values (.clone(), torch.tensor(), nn.Parameter(t.clone()), deepcopy)"
    saved = _index("saved", g, lambda: [v for v in g.saved if not v.requires_grad])
    for value in map(saved.tensors.__getitem__, saved.near(t)):
        if value is t or value.requires_grad:
            continue
        if _same_memory(value, t) and value.shape != t.shape:
            continue  # a view of it (x.T), saved by an op that uses it: not a copy
        if _same_memory(value, t):
            return (
                "a tensor that shares its memory, saved by the graph (made by .detach(), .data "
                "or state_dict())"
            )
        if value.dtype != t.dtype and _equal_values(value, t):
            return f"a {value.dtype} copy of it without history, saved by the graph (a cast cached outside it)"
    return None


def _constant(t: torch.Tensor) -> bool:
    """All of ``t``'s values equal (a fresh LayerNorm's ones, a zero bias): many tensors match it."""
    with torch.no_grad():
        flat = t.detach().reshape(-1)
        return flat.numel() < 2 or bool((flat == flat[0]).all())


def _kept_tensors(g: _Context) -> _Index:
    """Once per call: the tensors kept on the modules named (buffers and attributes, not their
    parameters) without history, in the order of the modules and their attributes, with where
    each is (``name.key``); asked per parameter, a walk of every module would cost a product."""
    if "kept" not in g.index:
        params = {id(p) for _, m in g.modules for p in m.parameters(recurse=False)}
        found = []
        for name, module in g.modules:
            attributes = {**vars(module).get("_buffers", {}), **vars(module)}
            for key, value in attributes.items():
                if not isinstance(value, torch.Tensor) or id(value) in params:
                    continue
                if value.grad_fn is None and not value.requires_grad:
                    found.append((f"{name}.{key}" if name else key, value))
        g.index["kept"] = _Index([v for _, v in found], g)
        g.index["kept"].where = [w for w, _ in found]
    return g.index["kept"]


def _copy_kept(t: torch.Tensor, g: _Context) -> str | None:
    """A tensor kept on one of the modules (a buffer or an attribute, not a parameter) that is a
    copy or a cast of ``t`` without history: a cast made once, in ``__init__`` or under no_grad.
    A same-dtype copy by value only where the graph saved it (``g.saved``): one of equal values
    the graph does not use (an EMA statistic that starts as the codebook) stands in for nothing."""
    kept = _kept_tensors(g)
    for i in kept.near(t):
        where, value = kept.where[i], kept.tensors[i]
        if value is t:
            continue
        if (_same_memory(value, t) or not _constant(t) and _equal_values(value, t)) and (
            value.dtype != t.dtype
            or _same_memory(value, t)
            or _storage_of(value) in _saved_memory(g)[0]
        ):
            kind = "cast" if value.dtype != t.dtype else "copy"
            return (
                f"{where} (a {value.dtype} {kind} of it: a cached cast)"
                if kind == "cast"
                else f"{where} (a copy of it)"
            )
    return None


def _kept_equal(t: torch.Tensor, g: _Context) -> str | None:
    """The name of a tensor kept on a module (a buffer or an attribute, no parameter, without
    history) whose values equal ``t``'s: a candidate copy where the graph's saved tensors cannot
    show whether the forward reads it (an add saves no operand; backward() frees them)."""
    if _constant(t):
        return None
    kept = _kept_tensors(g)
    for i in kept.near(t):
        if kept.tensors[i] is not t and _equal_values(kept.tensors[i], t):
            return kept.where[i]
    return None


def _copy_fix(copy: str) -> str:
    if "shares its memory" in copy:
        return (
            "use the tensor itself where the graph uses the .detach() or .data of it (functional_call: "
            "dict(model.named_parameters()), not state_dict())"
        )
    if "cast" in copy:
        return (
            "cast inside the forward pass (x.half() there keeps the history), not once outside it"
        )
    return "use the tensor itself, or train the copy (give the copy to the optimizer)"


# ---- watch_cuts: a runtime probe that locates where a value loses its history -----------------

_TORCH_DIRS = tuple({str(Path(torch.__file__).parent), str(Path(torch.__file__).resolve().parent)})
_THIS_FILES = (__file__, str(Path(__file__).resolve()))
# torch's own code that drops history or switches gradients off by design (an optimizer's step,
# torch.func, nn.init, checkpoint, a custom Function's forward): not reported
_BY_DESIGN = (
    "/optim/",
    "/_functorch/",
    "/func/",
    "/nn/init.py",
    "/utils/checkpoint.py",
    "/_dynamo/",
)
_COPY_OPS = frozenset(
    (
        "detach",
        "detach_",
        "data",
        "numpy",
        "__array__",
        "item",
        "tolist",
        "__float__",
        "__complex__",
    )
    + ("tensor", "as_tensor", "asarray", "new_tensor", "requires_grad_")
)
_NUMBER_OPS = frozenset(("item", "tolist", "__float__", "__complex__", "numpy", "__array__"))
_SKIP_OPS = frozenset(("grad", "backward", "register_hook", "retain_grad"))


def _switched_by_torch(frame):
    """The frame of the code that switched gradients off (past no_grad's own frames) when it is
    torch's, else None."""
    while frame is not None:
        file = frame.f_code.co_filename
        if file.endswith("_contextlib.py") and frame.f_code.co_name == "decorate_context":
            code = getattr(inspect.unwrap(frame.f_locals.get("func")), "__code__", None)
            return frame if getattr(code, "co_filename", "").startswith(_TORCH_DIRS) else None
        if file not in _THIS_FILES and not file.endswith(
            ("grad_mode.py", "_contextlib.py", "overrides.py")
        ):
            return frame if file.startswith(_TORCH_DIRS) else None
        frame = frame.f_back
    return None


def _op_name(func) -> str:
    name = getattr(func, "__name__", "") or type(func).__name__
    if name in ("__get__", "__set__"):
        attr = getattr(getattr(func, "__self__", None), "__name__", "?")
        return attr if name == "__get__" else f"{attr}=set"
    return name


def _has_history(t: torch.Tensor) -> bool:
    """requires_grad on t or on what a torch.func wrapper holds (vmap's batched tensors do not
    show it on the wrapper)."""
    f = getattr(torch._C, "_functorch", None)
    for _ in range(16):
        if t.requires_grad:
            return True
        if f is None or not f.is_functorch_wrapped_tensor(t):
            return False
        t = f.get_unwrapped(t)
    return False


def _floating(v) -> bool | None:
    """True for a floating or complex result, False for an integer or bool one, None otherwise."""
    if isinstance(v, torch.Tensor):
        return v.is_floating_point() or v.is_complex()
    kind = getattr(getattr(v, "dtype", None), "kind", None)  # a numpy array
    if isinstance(kind, str):
        return kind in "fc"
    if isinstance(v, (float, complex)):
        return True
    if isinstance(v, list):
        return any(_floating(x) for x in v) or None
    return None


_WATCHES: collections.deque = collections.deque(maxlen=8)  # the last watches, for why_no_grad
_INSTRUMENTS = ("why_no_grad.py", "find_old_graph.py")
_CHECKPOINT_FILE = str(Path("utils", "checkpoint.py"))
_COMPILER_FILE = str(Path("_dynamo", "convert_frame.py"))  # torch.compile's tracer, compiling
_FUNCTION_FORWARDS: dict = {}  # a code object -> whether it is a torch.autograd.Function's forward


def _wrapped_chain(f) -> list:
    """``f`` and what its decorators wrap (``__wrapped__``, set by functools.wraps), innermost
    last: a Function's forward under ``@torch.amp.custom_fwd`` runs the innermost code (review 45
    N14). A bounded walk: a decorator's attribute may point anywhere, even at ``f`` itself."""
    chain = [f]
    while len(chain) < 20 and callable(getattr(chain[-1], "__wrapped__", None)):
        if any(chain[-1].__wrapped__ is g for g in chain):
            break
        chain.append(chain[-1].__wrapped__)
    return chain


def _function_forward(frame) -> bool:
    """Whether ``frame`` runs a ``torch.autograd.Function``'s forward. Up to torch 2.13,
    ``Function.apply`` is Python: its frame in ``autograd/function.py`` is just above the forward;
    from 2.14 it is in C and leaves no frame, so the forward is told by its code: the ``forward``
    of one of ``Function``'s subclasses (a class made in a function too: it is alive while
    applied)."""
    code = frame.f_code
    if code.co_name != "forward":
        return False
    if code not in _FUNCTION_FORWARDS:
        found, seen, todo = False, set(), [torch.autograd.Function]
        while todo and not found:
            kind = todo.pop()
            if kind in seen:
                continue
            seen.add(kind)
            todo.extend(type.__subclasses__(kind))
            own = getattr(kind.__dict__.get("forward"), "__func__", kind.__dict__.get("forward"))
            found = any(  # decorated (torch.amp.custom_fwd, functools.wraps): the wrapped code
                getattr(f, "__code__", None) is code for f in _wrapped_chain(own)
            )
        _FUNCTION_FORWARDS[code] = found
    return _FUNCTION_FORWARDS[code]


def _instrument_running(frame) -> bool:
    """Whether a frame above ``frame`` (the watch's own) runs why_no_grad's or find_old_graph's
    code: their reads of the reader's tensors are not the reader's program."""
    frame = frame.f_back
    for _ in range(400):
        if frame is None:
            return False
        if os.path.basename(frame.f_code.co_filename) in _INSTRUMENTS:
            return True
        frame = frame.f_back
    return False


def _node_key(fn) -> object:
    """What tells a node again later: its Python object's id where torch keeps that object alive
    with the node (2.13); where it does not (2.4: each read of ``grad_fn`` may make a new object,
    at another address), its kind and sequence number."""
    if _NODE_OBJECT_KEPT:
        return id(fn)
    number = getattr(fn, "_sequence_nr", None)
    return type(fn).__name__, number() if number is not None else id(fn)


def _next_node_number() -> int | None:
    """The sequence number autograd gives the next node (private; None where torch lacks it)."""
    read = getattr(torch.autograd, "_get_sequence_nr", None)
    try:
        return read() if read is not None else None
    except Exception:
        return None


def _reentrant(g: _Context) -> bool:
    """A reentrant checkpoint on the loss's graph: the modules it runs are reached only when
    backward recomputes them, so before that their parameters are off the graph."""
    if g.reentrant is None:  # once per call: asked per parameter
        g.reentrant = any(type(fn).__name__ == "CheckpointFunctionBackward" for fn in g.nodes)
    return g.reentrant


def _watched_use(t: torch.Tensor, g: _Context) -> str | None:
    """What a ``watch_cuts`` around the forward that made the loss saw of the parameter ``t``
    (standing for its module): "on" (a call built a graph from it) or "none" (no call did: not run there, or
    only with gradients off, which an EMA or an optimizer's step reading them cannot be told from).
    None when no watch covered that forward: the loss's node was not made by a call it saw (made
    outside it, or in another thread), a parameter on the loss's graph was not read inside it
    (part of the forward ran outside), or it saw compiled code. This
    replaces the probe the reader would otherwise paste (``_probe``) with what was observed."""
    fn = getattr(g.loss, "grad_fn", None)
    number = getattr(fn, "_sequence_nr", None)
    if number is None or _reentrant(g):
        return None
    try:
        n = number()
    except Exception:
        return None
    for watch in reversed(_WATCHES):
        low, high = watch.span
        if low is None or high is None or not low <= n < high or _node_key(fn) not in watch.made:
            continue  # made in another thread, or outside this watch
        if not g.held["module"].get(id(t)):  # a tensor of no module: read or not, by itself
            mine = set(g.leaves) & (set(g.names) | set(g.held["module"]))
            if watch.compiled or not mine or not mine <= watch.used_on or id(t) in watch.used_on:
                return None
            if id(t) in watch.read_off:
                return "tensor read off"
            return "tensor compared" if id(t) in watch.compared else "tensor unread"
        params = set(g.leaves) & set(g.held["module"])
        if watch.compiled or not params or not params <= watch.used_on:
            return None  # compiled code, or a part of the forward ran outside the watch
        if id(t) in watch.used_on:  # read in its forward, only by comparisons (review 47 S3)
            only = watch.compared_in - watch.graphed - watch.read_off  # not cut (review 48 F2)
            return "compared in" if id(t) in only else "on"
        module = _by_name(g).get(g.held["module"].get(id(t), "").rpartition(".")[0])
        others = [p for p in module.parameters() if p is not t] if module is not None else []
        if not any(id(p) in watch.used_on for p in others):
            return "none"
        if id(t) in watch.read_off:
            return "read off"
        return "compared" if id(t) in watch.compared else "unread"
    return None


def _in_forward() -> bool:
    """Whether a method of an nn.Module (its forward, an ``encode`` called directly, a
    Lightning ``training_step``) is on the stack: a read without history (a comparison, a
    torch.equal) counts as its module's run only there (a learned mask); the same read in the
    plain loop (torch.isfinite(p), a NaN check) is a check, not a run (rev45 N7, review 46 R3)."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename not in _THIS_FILES and isinstance(
            frame.f_locals.get("self"), torch.nn.Module
        ):
            return True
        frame = frame.f_back
    return False


class CutWatch(torch.overrides.TorchFunctionMode):
    """Records, while active, each torch call that takes a tensor with history and returns a
    floating value without it, and where gradients were switched off. Use ``watch_cuts()``."""

    def __init__(self, show: bool = True, most: int = 6):
        super().__init__()
        self.show, self.most = show, most
        self.cuts: dict = {}  # (file, line) -> [label, kind, code, caller, count], in order seen
        self.by_nature: dict = {}
        self.switches: dict = {}
        self.ops = 0
        self.note = ""
        self._last_mode = self._entry_mode = self._exit_mode = True
        self._home = None  # the frame that entered the with block
        self._torch_off = None  # the frame of torch's code that switched gradients off
        self._drawing = False  # under the no_grad of a Distribution.sample()
        self.compiled = 0  # calls made while torch.compile traced: not seen
        self.used_on: set = set()  # ids of leaves a call read with gradients on
        self.read_off: set = set()  # the same, with gradients off
        self.compared: set = set()  # read with gradients on outside a module, no history made
        self.compared_in: set = set()  # the same inside a module's method (h > self.thr)
        self.graphed: set = set()  # read by a call whose result has history
        self.span = (None, None)  # autograd's sequence numbers at entry and exit (_WATCHES)
        self.made: set = set()  # keys of the nodes the calls seen made (the loss's, for _WATCHES)
        self.hidden = 0  # cuts in your code run under torch's own no_grad: not reported

    def __enter__(self):
        try:
            self._entry_mode = self._last_mode = torch.is_grad_enabled()
            self._home = sys._getframe(1)
            self.span = (_next_node_number(), None)
        except Exception as e:  # never raise into the reader's code
            self.note = f"watch_cuts stopped: {type(e).__name__}: {e}"
        return super().__enter__()

    def __exit__(self, *exc):
        out = super().__exit__(*exc)
        self._home = self._torch_off = None
        self._drawing = False
        self.span = (self.span[0], _next_node_number())
        _WATCHES.append(self)
        try:
            self._exit_mode = torch.is_grad_enabled()
            if self.show:
                print(self)
        except Exception as e:
            print(f"watch_cuts: could not report ({type(e).__name__}: {e})")
        return out

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if torch.compiler.is_compiling():  # traced by torch.compile: not seen, nothing changed
            self.compiled += 1
            return func(*args, **kwargs)
        if _instrument_running(sys._getframe(1)):  # why_no_grad asked inside the block
            return func(*args, **kwargs)
        before = None
        if not self.note:
            try:
                before = self._before(func, args, kwargs)
            except Exception as e:
                self.note = f"watch_cuts stopped: {type(e).__name__}: {e}"
        out = func(*args, **kwargs)
        if before is not None and not self.note:
            try:
                self._after(before, out)
            except Exception as e:
                self.note = f"watch_cuts stopped: {type(e).__name__}: {e}"
        return out

    # -- recording ------------------------------------------------------------------------------

    def _before(self, func, args, kwargs):
        self.ops += 1
        name = _op_name(func)
        mode = torch.is_grad_enabled()
        if name == "_set_grad_enabled" and mode and args and args[0] is False:
            owner = _switched_by_torch(sys._getframe(2))
            drawn = owner is not None and "distributions" in Path(owner.f_code.co_filename).parts
            if owner is not None and not drawn:  # torch's own no_grad (spectral_norm, clip_grad_)
                self._torch_off = owner
            elif drawn:  # a Distribution.sample() draws under no_grad: a cut (review 38 N5)
                self._drawing = True
            else:
                self._record(self.switches, "gradients switched off", "no_grad")
        elif mode != self._last_mode:
            if not mode:
                self._record(self.switches, "first op with gradients off", "no_grad")
            self._last_mode = mode
        if name == "_set_grad_enabled":
            return name, mode, []
        if func is torch.autograd.grad:  # gradients without create_graph have no history
            create = kwargs.get("create_graph", args[4] if len(args) > 4 else False)
            outs = torch.utils._pytree.tree_leaves(kwargs.get("outputs", args[:1]))
            outs = [t for t in outs if isinstance(t, torch.Tensor) and _has_history(t)]
            return ("autograd.grad", mode, outs) if mode and outs and not create else None
        if (
            name in _SKIP_OPS
            or name.endswith(("=set", "_like"))
            or (name.startswith("new_") and name != "new_tensor")
        ):
            return None
        flat = torch.utils._pytree.tree_leaves((args, kwargs))
        tracked = [t for t in flat if isinstance(t, torch.Tensor) and _has_history(t)]
        if name not in _COPY_OPS:  # frozen parameters read too: their module ran (review 43)
            frozen = [t for t in flat if isinstance(t, torch.nn.Parameter) and not t.requires_grad]
            (self.used_on if mode else self.read_off).update(id(t) for t in frozen)
        if not tracked:
            return None
        first = args[0] if args else None
        if (
            not mode
            and name.endswith("_")
            and name not in _COPY_OPS
            and isinstance(first, torch.Tensor)
            and not _has_history(first)
            and all(t.is_leaf for t in tracked)  # an activation copied in is a cut (review 38 N3)
        ):
            return None  # in place, gradients off, from weights: an EMA, a target copy
        if name == "__setitem__" and isinstance(first, torch.Tensor):
            return name, mode, tracked, first  # buf[:] = feat: buf is the result (review 38 N3)
        return name, mode, tracked

    def _after(self, before, out):
        name, mode, tracked, *into = before
        out = into[0] if into else out
        if name == "_set_grad_enabled":
            self._last_mode = torch.is_grad_enabled()
            if self._last_mode:
                self._torch_off, self._drawing = None, False
            return
        self._note_reads(name, mode, tracked, out)
        ids = {id(t) for t in tracked}
        results = torch.utils._pytree.tree_leaves(out)
        tensors = [r for r in results if isinstance(r, torch.Tensor)]
        if any(_has_history(r) for r in tensors):
            return
        lost = [r for r in tensors if id(r) in ids]  # in place: detach_(), requires_grad_(False)
        if lost or any(_floating(r) for r in tensors):
            pass
        elif name in _NUMBER_OPS and any(_floating(r) for r in results):
            pass
        elif tensors and all(_floating(r) is False for r in tensors):
            self._record(self.by_nature, name, "nature")
            return
        else:
            return
        if name == "requires_grad_":
            label, kind = ".requires_grad_(False)", "frozen"
        elif name in _COPY_OPS or lost:
            label, kind = "." + name + ("()" if name != "data" else ""), "copy"
            if name in ("tensor", "as_tensor", "asarray"):
                label = f"torch.{name}(...)"
        elif name == "autograd.grad":
            label, kind = "torch.autograd.grad without create_graph=True", "grad"
        elif not mode and self._drawing:
            label, kind = "Distribution.sample()", "sample"
        elif not mode:
            label, kind = f"{name} with gradients off", "no_grad"
        else:
            label, kind = name, "copy"
        self._record(self.cuts, label, kind)

    def _note_reads(self, name: str, mode: bool, tracked: list, out) -> None:
        """For why_no_grad (``_watched_use``): the leaves a call read with gradients on (a tensor
        result; copies such as ``.data`` apart), and the nodes it made (a comparison's result has
        none, but it read the parameter: review 41). Reads with gradients off are not counted:
        an optimizer's step, an EMA, a norm logged under no_grad read parameters without running
        their module, and a module run under no_grad reads them the same way (review 40)."""
        results = [r for r in torch.utils._pytree.tree_leaves(out) if isinstance(r, torch.Tensor)]
        if name in _COPY_OPS:
            return
        if (  # p.to(device), .float(), .contiguous() that return p itself: no value read
            results
            and not name.endswith("_")
            and not name.startswith("__i")
            and name != "__setitem__"
            and all(any(r is t for t in tracked) for r in results)
        ):
            return
        if not results:  # torch.equal, allclose: a read with no tensor result (a shape is not)
            if name not in _SHAPE_READS | _LAYOUT_READS and (
                not name.startswith("__") or name == "__bool__"
            ):
                if mode and not _in_forward():  # a check in the loop (a NaN check): no run
                    self.compared.update(id(t) for t in tracked if t.grad_fn is None)
                    return
                (self.used_on if mode else self.read_off).update(
                    id(t) for t in tracked if t.grad_fn is None
                )
            return
        if not mode:  # read with gradients off: no run is told from it, but it was read
            self.read_off.update(id(t) for t in tracked if t.grad_fn is None)
            return
        if all(r.grad_fn is None for r in results) and not _in_forward():
            # torch.isfinite(p) in the loop: a check, not a run of its module; for a tensor of
            # no module, (x > thr) is its only read (review 46 R8)
            self.compared.update(id(t) for t in tracked if t.grad_fn is None)
            return
        self.made.update(_node_key(r.grad_fn) for r in results if r.grad_fn is not None)
        self.used_on.update(id(t) for t in tracked if t.grad_fn is None)
        history = any(r.grad_fn is not None for r in results)  # else a comparison in a forward
        (self.graphed if history else self.compared_in).update(
            id(t) for t in tracked if t.grad_fn is None
        )

    def _record(self, book: dict, label: str, kind: str) -> None:
        place = caller = first = None
        frame, inner = sys._getframe(2), ""
        while frame is not None:
            if frame is self._torch_off:  # under a no_grad torch's own code entered
                self.hidden += self._yours(place) and book is self.cuts  # your code run there
                return
            file = frame.f_code.co_filename
            if file.endswith(_CHECKPOINT_FILE) and frame.f_code.co_name == "forward":
                self.hidden += book is self.cuts  # a reentrant checkpoint's first pass: not seen
                return
            if file.startswith(_TORCH_DIRS):  # torch's own code calling the op; a Function
                if file.endswith(_COMPILER_FILE):  # torch.compile tracing: torch 2.4 does not
                    self.compiled += 1  # say is_compiling() there (its copies to fake tensors)
                    return
                if place is None and any(p in file for p in _BY_DESIGN):
                    return
                if file.endswith("autograd/function.py") and frame.f_code.co_name == "apply":
                    if self._in_function(place, inner, book):  # apply's frame (torch <= 2.13)
                        return
            elif file not in _THIS_FILES and place is None:
                place, first = (file, frame.f_lineno), frame
            if _function_forward(frame) and self._in_function(place, file, book):
                return  # the forward itself (from torch 2.14 apply leaves no frame above it)
            if frame is self._home and frame is not first:
                caller = (file, frame.f_lineno)
            frame, inner = frame.f_back, file
        if place is None:
            return
        if place in book:
            book[place][4] += 1
        else:
            code = linecache.getline(place[0], place[1]).strip()
            book[place] = [label, kind, code, caller, 1]

    def _in_function(self, place, forward: str, book: dict) -> bool:
        """At a ``torch.autograd.Function``'s forward (in file ``forward``): whether the op is not
        reported: torch's code or a Function's own forward, which needs no history (apply gives its
        output one); your code that torch's Function runs with gradients off (checkpoint) is
        counted as hidden."""
        if not self._yours(place) or not forward.startswith(_TORCH_DIRS):
            return True  # torch's code, or a Function's own forward
        if not torch.is_grad_enabled():  # torch's Function runs yours (checkpoint)
            self.hidden += book is self.cuts  # review 38 N2
            return True
        return False

    @staticmethod
    def _yours(place) -> bool:
        """A place in your code (not torch.fx's generated code, as torch.compile runs)."""
        return place is not None and not place[0].startswith("<eval_with_key")

    # -- report ---------------------------------------------------------------------------------

    def __str__(self) -> str:
        lines = []
        flipped = self._exit_mode != self._entry_mode
        if self.switches and flipped:
            state = "off at exit (on at entry)" if flipped else "switched off"
            lines.append(f"watch_cuts: gradients {state}; first place seen with them off:")
            lines += self._places(self.switches, 1)
            lines.append(
                "  Fix: torch.set_grad_enabled(True) after that call, or your forward and loss under "
                "with torch.enable_grad():; a newer release of a library may restore it"
            )
        elif flipped:
            lines.append(
                f"watch_cuts: gradients {'on' if self._exit_mode else 'off'} at exit, not at entry"
            )
        if not self._entry_mode:
            lines.append(
                "watch_cuts: gradients were off at entry: start the watch earlier to see where"
            )
        if self.cuts:
            lines.append(
                f"watch_cuts: {len(self.cuts)} place(s) where a value with history went on "
                "without it, earliest first:"
            )
            lines += self._places(self.cuts)
            kinds = {v[1] for v in self.cuts.values()}
            train = "if this value should train through here:"
            if "copy" in kinds:
                lines.append(
                    f"  Fix (a copy: .detach(), numpy, .item(), torch.tensor): {train} keep the "
                    "tensor and use torch ops (in a library: its differentiable API)"
                )
            if "no_grad" in kinds:
                lines.append(
                    f"  Fix (gradients off): {train} with torch.enable_grad(): around that call, "
                    "or the library's option for gradients"
                )
            if "frozen" in kinds:
                lines.append(
                    "  Fix (requires_grad_(False)): if this weight should train: remove that call"
                )
            if "grad" in kinds:
                lines.append(
                    f"  Fix (gradients as values): {train} create_graph=True in that call (in a "
                    "library: its option for it, or a newer release)"
                )
            if "sample" in kinds:
                lines.append(
                    f"  Fix (.sample() draws without a graph): {train} .rsample() where the "
                    "distribution has it (has_rsample), else a score-function term "
                    "(log_prob(draw) times the draw's cost)"
                )
            lines.append(
                "  If it is meant to stop here (a frozen layer, a target or EMA update, a metric, "
                "logging, a straight-through estimator): nothing to fix"
            )
        elif not lines and not self.ops:
            lines.append(
                "watch_cuts: no torch call seen (calls in another thread or in compiled code are "
                "not seen)"
            )
        elif not lines and not self.compiled and not self.hidden:
            lines.append(f"watch_cuts: no op dropped the history of a value ({self.ops} ops seen)")
        if self.hidden:
            lines.append(
                f"watch_cuts: {self.hidden} op(s) run by torch under its own no_grad (as in "
                "checkpoint(..., use_reentrant=True)) not checked: use_reentrant=False checks them"
            )
        if self.compiled:
            lines.append(
                "watch_cuts: code run by torch.compile is not checked: run it uncompiled to check it"
            )
        if self.by_nature:
            shown = self._places(self.by_nature)
            lines.append(
                "No gradient by nature (integer or bool results): "
                + "; ".join(s.strip() for s in shown)
            )
        if self.note:
            lines.append(self.note)
        return "\n".join(lines)

    def _places(self, book: dict, most: int | None = None) -> list[str]:
        most = most or self.most
        rows = []
        for (file, line), (label, _, code, caller, n) in list(book.items())[:most]:
            row = f"  {_short(file)}:{line} {label}: {code[:70]}"
            if caller:
                row += f" (from {_short(caller[0])}:{caller[1]})"
            rows.append(row + (f" (x{n})" if n > 1 else ""))
        if len(book) > most and most > 1:
            rows.append(f"  and {len(book) - most} more")
        return rows


def _short(file: str) -> str:
    for mark in ("site-packages/", "dist-packages/"):
        if mark in file:
            return file.split(mark, 1)[1]
    return Path(file).name


def watch_cuts(show: bool = True, most: int = 6) -> CutWatch:
    """``with watch_cuts():`` around your forward pass and loss prints, at the end of the block, where
    a value with history went on without it: each torch call that took a tensor requiring grad and
    gave a floating result without (``.detach()``, ``.data``, numpy, ``.item()``, ``torch.tensor``
    copies, ops with gradients off, ``requires_grad_(False)``), earliest first, one line per place
    (file:line and its code, the first frame outside torch's files: inside a library, the
    library's line, with the line of yours that called it); integer or bool results (argmax,
    comparisons) apart, as no gradient by nature; and where gradients were switched off, when they
    are off at the end but were on at the start. Many cuts are meant (a target network, an EMA
    update, a metric, a straight-through estimator): the fixes say what to do if the value should
    train through. ``str()`` of the returned object is the same report (``show=False`` prints
    nothing).

    It observes torch calls (``torch.overrides.TorchFunctionMode``) and changes no mode or random
    state; torch's fused fast paths (``nn.TransformerEncoder``'s, in eval) are not taken while it
    watches, so their results may differ in the last bits, and where they leave values unspecified
    (padded positions), more. It sees every torch call made in Python in this thread, torch's own Python code
    included; not calls in other threads, nor code ``torch.compile`` runs (any backend: it says so
    when it sees a compile; run it uncompiled to locate a cut). torch's own cuts by design (an
    optimizer's step, ``torch.func``, ``nn.init``, checkpointing, a custom ``autograd.Function``'s
    forward, ops under a ``no_grad`` torch's code enters, as in ``spectral_norm`` or
    ``clip_grad_norm_``) and in-place updates with gradients off (``ema.lerp_(p, 0.01)``) are not
    reported; ops of your code torch runs with gradients off (``checkpoint(...,
    use_reentrant=True)``) are counted, not located, and ops inside ``backward()`` are not seen.
    Under ``torch.func.vmap`` it reads ``requires_grad`` through the batched wrappers.
    It also notes which parameters a call read, with gradients on or off: ``why_no_grad`` on a
    loss made inside the block uses that to say whether a module off the graph ran."""
    return CutWatch(show, most)
