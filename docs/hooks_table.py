"""Run every hook torch has under every condition, for the table of docs/hooks.md.

``hook_methods()`` lists the hooks of the installed torch by introspection: every public
``register_…hook`` method of ``torch.nn.Module``, ``torch.Tensor`` and
``torch.autograd.graph.Node``, every ``register_module_…hook`` of ``torch.nn.modules.module``, and
every public hook of ``torch.autograd.graph`` (a name holding "hook", or a subclass of
``saved_tensors_hooks`` such as ``save_on_cpu``).

``pass_table()`` runs the hooks that a forward or backward pass fires. Each is registered on a
``Linear`` layer ``lin`` (or on its weight, its output, or the output's ``grad_fn``; saved-tensor
hooks around the layer's call), followed by a head that trains (a weight, not a module: global
module hooks see ``lin`` alone), and counted when it runs for ``lin``, under each of
``CONDITIONS``. In the compiled columns a hook that fired while ``torch.compile`` compiled no
graph (it fell back to eager for the layer) is marked with the graph break's reason. ``other_table()`` runs the hooks no pass fires
(``state_dict``, ``load_state_dict``, registration, ``disable_saved_tensors_hooks``). A result is
"yes" (it ran), "no", or ``"Type: message"`` of the error; ``notes`` collects the errors and the
``UserWarning``s seen and the graph breaks, numbered. ``ddp_hook_grads()`` shows what a
parameter's hooks see under ``DistributedDataParallel``. Where it stops: one layer type, hooks registered before the
first call, default registration flags; a compiled run is ``torch.compile(lin)`` with the hooks
already in place.
"""

from __future__ import annotations

import contextlib
import re
import warnings

import torch
import torch.autograd.graph as graph
import torch.nn.functional as F
import torch.nn.modules.module as module_hooks
from outcome import outcome
from torch import nn
from torch._dynamo.utils import counters

CONDITIONS = {  # key: column heading
    "call": "lin(x)",
    "forward": "lin.forward(x)",
    "grad_x": "grad(loss, x)",
    "grad_w": "grad(loss, weight)",
    "no_grad": "no_grad",
    "frozen": "frozen",
    "aot_eager": "aot_eager",
    "inductor": "inductor",
}
OTHER_WAYS = ("eager", "no_grad", "frozen", "compiled wrapper")


def hook_methods() -> list[str]:
    """The hooks of the installed torch, named as the table's rows start."""
    owners = (nn.Module, torch.Tensor, graph.Node)
    found = [f"{owner.__name__}.{name}" for owner in owners for name in dir(owner)
             if re.fullmatch(r"register_\w*hook", name)]  # fmt: skip
    found += [name for name in dir(module_hooks) if re.fullmatch(r"register_module_\w*hook", name)]
    found += [name for name, value in vars(graph).items() if not name.startswith("_") and (
        "hook" in name or isinstance(value, type) and issubclass(value, graph.saved_tensors_hooks))]  # fmt: skip
    return found


def _module_hook(name):  # on lin
    return lambda lin, calls: getattr(lin, name)(lambda *args: calls.append(1))


def _global_hook(name):  # on every module: count lin's calls
    return lambda lin, calls: getattr(module_hooks, name)(
        lambda module, *args: calls.append(1) if module is lin else None
    )


class _Counted(graph.saved_tensors_hooks):
    def __init__(self, calls, wrapped=None):
        wrapped = wrapped or graph.saved_tensors_hooks(lambda t: t, lambda t: t)
        pack, unpack = wrapped.pack_hook, wrapped.unpack_hook
        super().__init__(
            lambda t: calls.append(1) or pack(t), lambda t: calls.append(1) or unpack(t)
        )


def _none(*args):
    return None


def _on_weight(method):
    return lambda lin, calls: getattr(lin.weight, method)(lambda *args: calls.append(1))


def _on_output(method, node=False):
    return lambda out, calls: getattr(out.grad_fn if node else out, method)(
        lambda *args: calls.append(1)
    )


# name: (hook on lin or its weight, hook on the output, saved-tensor hooks around lin's call)
ROWS = {
    f"Module.{name}": (_module_hook(name), _none, None)
    for name in ("register_forward_pre_hook", "register_forward_hook",
                 "register_full_backward_pre_hook", "register_full_backward_hook",
                 "register_backward_hook")
} | {
    name: (_global_hook(name), _none, None)
    for name in ("register_module_forward_pre_hook", "register_module_forward_hook",
                 "register_module_backward_hook", "register_module_full_backward_pre_hook",
                 "register_module_full_backward_hook")
} | {
    "Tensor.register_hook on lin.weight": (_on_weight("register_hook"), _none, None),
    "Tensor.register_hook on the output": (_none, _on_output("register_hook"), None),
    "Tensor.register_post_accumulate_grad_hook": (
        _on_weight("register_post_accumulate_grad_hook"), _none, None),
    "Node.register_hook on out.grad_fn": (_none, _on_output("register_hook", node=True), None),
    "Node.register_prehook on out.grad_fn": (_none, _on_output("register_prehook", node=True), None),
    "register_multi_grad_hook on weight, bias": (
        lambda lin, calls: graph.register_multi_grad_hook(
            (lin.weight, lin.bias), lambda grads: calls.append(1)), _none, None),
    'register_multi_grad_hook mode="any"': (
        lambda lin, calls: graph.register_multi_grad_hook(
            (lin.weight, lin.bias), lambda grad: calls.append(1), mode="any"), _none, None),
    "saved_tensors_hooks": (_none, _none, _Counted),
    "save_on_cpu": (_none, _none, lambda calls: _Counted(calls, graph.save_on_cpu())),
}  # fmt: skip


def _trial(on_module, on_output, saved, condition):
    """ "yes", "no" or "Type: message", and the reason of a graph break where nothing compiled."""
    lin, head = nn.Linear(3, 2), torch.randn(1, 2, requires_grad=True)
    x = torch.randn(4, 3, requires_grad=condition == "grad_x")
    if condition == "frozen":
        lin.requires_grad_(False)
    calls, handles = [], []
    compiled = condition in ("aot_eager", "inductor")
    counters.clear()

    def run():
        handles.append(on_module(lin, calls))
        layer = torch.compile(lin, backend=condition) if compiled else lin
        with torch.no_grad() if condition == "no_grad" else contextlib.nullcontext():
            with saved(calls) if saved else contextlib.nullcontext():
                out = layer.forward(x) if condition == "forward" else layer(x)
            on_output(out, calls)
            loss = F.linear(out, head).sum()
        if condition in ("grad_x", "grad_w"):
            torch.autograd.grad(loss, x if condition == "grad_x" else lin.weight)
        elif condition != "no_grad":
            loss.backward()

    result = outcome(run)
    for handle in filter(None, handles):
        handle.remove()
    breaks = (
        [] if not compiled or counters["stats"]["unique_graphs"] else list(counters["graph_break"])
    )
    result = ("yes" if calls else "no") if result == "right" else result.split(". ")[0]
    return result, [f"graph break, nothing compiled: {b.splitlines()[0]}" for b in breaks]


def _marked(trial, warned, notes):
    """ "yes", "no", or "E<n>", then ", W<n>" per UserWarning and ", B<n>" per graph break that
    left the layer uncompiled; the texts go into ``notes``."""
    result, breaks = trial
    if ":" in result:
        result = f"E{notes.setdefault(result, len(notes) + 1)}"
    texts = [f"UserWarning: {str(w.message).split('. ')[0]}"
             for w in warned if issubclass(w.category, UserWarning)] + breaks  # fmt: skip
    marks = [f"{_kind(t)}{notes.setdefault(t, len(notes) + 1)}" for t in dict.fromkeys(texts)]
    return ", ".join([result, *marks])


def _kind(note):
    return {"UserWarning": "W", "graph break": "B"}.get(note.split(":")[0].split(",")[0], "E")


def pass_table(notes: dict) -> dict:
    """{(row, condition): result} for every hook a pass fires, under every condition."""
    table = {}
    for name, hooks in ROWS.items():
        for condition in CONDITIONS:
            torch._dynamo.reset()
            # torch keeps the first kind of global backward hook a process registered and then
            # refuses the other kind (docs/hooks.md shows it): each trial starts as a new process
            module_hooks._global_is_full_backward_hook = None
            with warnings.catch_warnings(record=True) as warned:
                warnings.simplefilter("always")
                table[name, condition] = _marked(_trial(*hooks, condition), warned, notes)
    return table


def _registration(name, make):  # a global hook, fired by giving a module a new attribute
    def run(lin, target, calls):
        handle = getattr(module_hooks, name)(lambda module, key, value: calls.append(key))
        make(target)
        handle.remove()

    return run


def _state_dict_hook(name, then):  # registered on the layer, fired through `target`
    def run(lin, target, calls):
        getattr(lin, name)(lambda *args: calls.append(1))
        then(target)

    return run


def _disabled(lin, target, calls):  # a saved_tensors_hooks inside it raises
    with graph.disable_saved_tensors_hooks("saved-tensor hooks are disabled here"):
        with graph.saved_tensors_hooks(lambda t: t, lambda t: t):
            calls.append(1)


def _reload(target):
    return target.load_state_dict(target.state_dict())


OTHER = {  # name: (what fires it, the trial)
    "Module.register_state_dict_pre_hook": (
        "state_dict()", _state_dict_hook("register_state_dict_pre_hook", nn.Module.state_dict)),
    "Module.register_state_dict_post_hook": (
        "state_dict()", _state_dict_hook("register_state_dict_post_hook", nn.Module.state_dict)),
    "Module.register_load_state_dict_pre_hook": (
        "load_state_dict()", _state_dict_hook("register_load_state_dict_pre_hook", _reload)),
    "Module.register_load_state_dict_post_hook": (
        "load_state_dict()", _state_dict_hook("register_load_state_dict_post_hook", _reload)),
    "register_module_module_registration_hook": ("setting a submodule", _registration(
        "register_module_module_registration_hook",
        lambda m: setattr(m, "extra", nn.Identity()))),
    "register_module_parameter_registration_hook": ("setting a parameter", _registration(
        "register_module_parameter_registration_hook",
        lambda m: setattr(m, "scale", nn.Parameter(torch.ones(1))))),
    "register_module_buffer_registration_hook": ("register_buffer()", _registration(
        "register_module_buffer_registration_hook",
        lambda m: m.register_buffer("count", torch.zeros(1)))),
    "disable_saved_tensors_hooks": ("saved-tensor hooks inside it", _disabled),
}  # fmt: skip


def other_table() -> dict:
    """{(row, way): result} for the hooks no pass fires: eager, under no_grad, on a frozen layer,
    and through the wrapper ``torch.compile`` returns."""
    table = {}
    for name, (_, run) in OTHER.items():
        for way in OTHER_WAYS:
            lin, calls = nn.Linear(3, 2), []
            if way == "frozen":
                lin.requires_grad_(False)
            target = torch.compile(lin, backend="aot_eager") if way == "compiled wrapper" else lin
            with torch.no_grad() if way == "no_grad" else contextlib.nullcontext():
                result = outcome(run, lin, target, calls)
            table[name, way] = ("yes" if calls else "no") if result == "right" else result
    return table


ROUTES = {  # what readers report, and the section with the fix (docs/hooks.md); "no fix": none
    "Module.register_forward_pre_hook": "[not called](#hooks-forward)",
    "Module.register_forward_hook": "[not called](#hooks-forward)",
    "Module.register_full_backward_pre_hook": "[not called: frozen, fed data](#hooks-guard)",
    "Module.register_full_backward_hook": "[\"Output 0 … is a view\"](#hooks-guard)",
    "Module.register_backward_hook": "[wrong grad_input](#hooks-legacy)",
    "register_module_backward_hook": "[\"Cannot use both…\"](#hooks-legacy)",
    "Tensor.register_hook on lin.weight": "[not called](#hooks-autograd-grad)",
    "Tensor.register_post_accumulate_grad_hook": "[never steps](#hooks-autograd-grad)",
    'register_multi_grad_hook mode="any"': "[not called](#hooks-autograd-grad)",
    "saved_tensors_hooks": "no fix",
    "save_on_cpu": "no fix",
}  # fmt: skip
ROUTE_ERRORS = {  # rows whose route is an error under the table: (its text, the section)
    "Tensor.register_hook on the output": (
        "RuntimeError: cannot register a hook on a tensor that doesn't require gradient", "hooks-guard"),
    "Node.register_hook on out.grad_fn": (
        "AttributeError: 'NoneType' object has no attribute 'register_hook'", "hooks-guard"),
    "Node.register_prehook on out.grad_fn": (
        "AttributeError: 'NoneType' object has no attribute 'register_prehook'", "hooks-guard"),
    "register_multi_grad_hook on weight, bias": ("RuntimeError: A leaf node was passed to "
        "_will_engine_execute_node but we are currently running autograd.grad()", "hooks-autograd-grad"),
}  # fmt: skip
ROUTES |= {f"register_module_{kind}": ROUTES[f"Module.register_{kind}"]
           for kind in ("forward_pre_hook", "forward_hook", "full_backward_pre_hook", "full_backward_hook")}  # fmt: skip


def markdown(table: dict, notes: dict) -> str:
    """The pass table, its routes, and the numbered errors, warnings and graph breaks under it
    (each without its examples, cut to 24 words). The two compiled columns show as one where
    they agree ("aot_eager result / inductor result" where not)."""
    eager = [c for c in CONDITIONS if c not in ("aot_eager", "inductor")]
    lines = ["| hook | " + " | ".join(CONDITIONS[c] for c in eager) + " | compiled | route |",
             "|---" * (len(eager) + 3) + "|"]  # fmt: skip

    def compiled(name):
        results = dict.fromkeys(table[name, c] for c in ("aot_eager", "inductor"))
        return " / ".join(results)

    def route(name):
        if name in ROUTES:
            return ROUTES[name]
        error, section = ROUTE_ERRORS[name]
        assert error in notes, (
            f"hooks_table.py: {name!r} no longer raises {error!r}: fix ROUTE_ERRORS"
        )
        return f"[E{notes[error]}](#{section})"

    lines += [f"| `{name}` | " + " | ".join(table[name, c] for c in eager)
              + f" | {compiled(name)} | {route(name)} |" for name in ROWS]  # fmt: skip

    def short(text):  # without examples in parentheses, at most 24 words
        words = re.sub(r" \(e\.g\.[^)]*\)", "", text).split()
        return " ".join(words[:24]) + (" …" if len(words) > 24 else "")

    return "\n".join([*lines, "", *[f"{_kind(t)}{n}: {short(t)}" for t, n in notes.items()]])


def other_markdown(table: dict) -> str:
    lines = ["| hook | fired by | " + " | ".join(OTHER_WAYS) + " |", "|---" * 6 + "|"]
    lines += [f"| `{name}` | {fired_by} | "
              + " | ".join(table[name, w].split(":")[0] for w in OTHER_WAYS) + " |"
              for name, (fired_by, _) in OTHER.items()]  # fmt: skip
    return "\n".join(lines)


def ddp_hook_grads() -> tuple[dict, torch.Tensor, torch.Tensor]:
    """What a parameter's tensor hook and post-accumulate hook see under DistributedDataParallel,
    the ``.grad`` the backward pass ends with, and the batch. One rank (gloo, a file rendezvous),
    whose communication hook doubles each bucket where other ranks would add their gradients."""
    import os
    import sys
    import tempfile

    import torch.distributed as dist

    loopback = {"linux": "lo", "darwin": "lo0"}.get(sys.platform)  # no host-name lookup
    if loopback:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", loopback)
    with tempfile.TemporaryDirectory() as folder:
        dist.init_process_group(
            "gloo", init_method=f"file://{folder}/rendezvous", rank=0, world_size=1
        )
        try:
            lin, seen = nn.Linear(3, 1), {}
            ddp = nn.parallel.DistributedDataParallel(lin)

            def doubled(state, bucket):  # the all-reduce's stand-in
                future = torch.futures.Future()
                future.set_result(bucket.buffer() * 2)
                return future

            ddp.register_comm_hook(None, doubled)
            lin.weight.register_hook(lambda grad: seen.update(register_hook=grad.clone()))
            lin.weight.register_post_accumulate_grad_hook(
                lambda p: seen.update(post_accumulate=p.grad.clone())
            )
            batch = torch.randn(4, 3)
            ddp(batch).sum().backward()
            return seen, lin.weight.grad, batch
        finally:
            dist.destroy_process_group()
