"""
Two heads, one trunk: several losses
====================================

The fix: add the losses and call ``backward()`` once, or pass them as a list to
:func:`torch.autograd.backward`: no ``retain_graph``, and that one call frees every saved tensor.
``backward(retain_graph=True)`` on the first loss, then ``backward()`` on the second, trains the
same (up to rounding) but holds the first head's branch until the losses are dropped. Timed:
:doc:`plot_several_losses_time`.

.. index:: multi-task, multi-task learning, two heads, shared trunk, several losses
"""

# %%
# ``head_a`` reads the trunk's first layer, ``head_b`` its last.

import contextlib
import weakref

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.graph import saved_tensors_hooks

torch.manual_seed(0)
torch.set_num_threads(1)  # tiny tensors


# --- checked: the outcome check. docs/outcome.py and every gallery script that checks a fix
# --- carry these lines unchanged (tests/test_outcome_copies.py compares them).
@contextlib.contextmanager
def checked(optimizer, reference, *, train=None, steps=3, **named):
    """Check each ``optimizer.step()`` in the block by its outcome. At each step (with a closure,
    after each run of it), every parameter's ``.grad`` must equal the gradient of
    ``reference(step)``, a loss recomputed from scratch at the current weights by other code
    than the fix, and each parameter meant to train (``train``; all by default) must get a
    non-zero gradient. At the end, at least ``steps`` steps ran and each of those parameters
    moved. ``named``: modules or tensors, which name the parameters in the messages."""
    names = {}
    for key, part in named.items():
        pairs = part.named_parameters() if isinstance(part, torch.nn.Module) else [("", part)]
        for name, p in pairs:
            names.setdefault(p, f"{key}.{name}".strip("."))
    params = [p for group in optimizer.param_groups for p in group["params"] if p.requires_grad]
    meant = params if train is None else list(train)
    start, done, trained = [p.detach().clone() for p in meant], [], {id(p) for p in meant}

    def compare():
        at = f"step {len(done) - 1}:"
        got = [None if p.grad is None else p.grad.clone() for p in params]
        with torch.enable_grad():
            wanted = torch.autograd.grad(reference(len(done) - 1), params, allow_unused=True)
        for p, grad, want in zip(params, got, wanted):
            p.grad, name = grad, names.get(p, "a parameter")  # autograd.grad may add to it
            if id(p) in trained:
                assert grad is not None and grad.any(), f"{at} {name} got no gradient"
            grad = torch.zeros_like(p) if grad is None else grad
            want = torch.zeros_like(p) if want is None else want
            ratio = grad.norm() / want.norm().clamp_min(1e-12)
            assert grad.allclose(want, 1e-4, 1e-6), (
                f"{at} wrong gradient of {name} (norm x{ratio:.3g})"
            )

    def check(opt, args, kwargs):  # Optimizer.register_step_pre_hook, public since torch 2.0
        done.append(len(done))
        closure = kwargs.get("closure") or next((a for a in args if callable(a)), None)
        if closure is None:
            return compare()

        def closure_then_compare():  # LBFGS, Lightning: the gradients come inside step()
            loss = closure()
            compare()
            return loss

        args = tuple(a for a in args if a is not closure)  # args[0] is the optimizer
        return args, {**kwargs, "closure": closure_then_compare}

    handle = optimizer.register_step_pre_hook(check)
    try:
        yield done
    finally:
        handle.remove()
    assert len(done) >= steps, f"{len(done)} steps ran; a fix is checked over {steps}"
    for p, before in zip(meant, start):
        assert not torch.equal(p.detach(), before), f"{names.get(p, 'a parameter')} never moved"
    print(f"{'/'.join(named) or 'model'}: {len(done)} steps checked")


# --- end of checked


trunk_1 = nn.Sequential(nn.Linear(20, 64), nn.Tanh())
trunk_2 = nn.Sequential(nn.Linear(64, 64), nn.Tanh())
head_a = nn.Linear(64, 3)  # classification, from the middle of the trunk
head_b = nn.Linear(64, 1)  # regression, from the end of the trunk
parts = {"trunk_1": trunk_1, "trunk_2": trunk_2, "head_a": head_a, "head_b": head_b}
params = [p for module in parts.values() for p in module.parameters()]

inputs = torch.randn(32, 20)
labels = torch.randint(0, 3, (32,))
targets = torch.randn(32, 1)


def forward():
    middle = trunk_1(inputs)
    loss_a = F.cross_entropy(head_a(middle), labels)
    loss_b = F.mse_loss(head_b(trunk_2(middle)), targets)
    return loss_a, loss_b


# %%
# Without ``retain_graph``, the second backward fails
# ---------------------------------------------------
#
# The first :meth:`~torch.Tensor.backward` frees what ``trunk_1`` saved, which the second loss
# needs too (:doc:`../docs/what-backward-frees`).

loss_a, loss_b = forward()
loss_a.backward()
try:
    loss_b.backward()
except RuntimeError as error:
    print(f"{type(error).__name__}: {str(error).partition(' (')[0]}")
    assert "graph a second time" in str(error)
else:
    raise AssertionError("the second backward was expected to fail")

# %%
# Three ways that work
# --------------------
#
# Checked (:doc:`plot_how_examples_are_checked`) against the two losses written out again at the
# current weights, the three ways train right, the sequential way up to rounding (it adds the two
# losses' gradients in ``.grad``, another order of additions; :doc:`../docs/several-losses`
# shows which parts agree to the bit).


def sequential(loss_a, loss_b):
    loss_a.backward(retain_graph=True)
    loss_b.backward()


def summed(loss_a, loss_b):
    (loss_a + loss_b).backward()


def listed(loss_a, loss_b):
    torch.autograd.backward([loss_a, loss_b])


ways = {"sequential": sequential, "summed": summed, "listed": listed}


def reference(step):
    middle = torch.tanh(inputs @ trunk_1[0].weight.T + trunk_1[0].bias)
    log_probs = (middle @ head_a.weight.T + head_a.bias).log_softmax(1)
    loss_a = -log_probs[torch.arange(len(labels)), labels].mean()
    return loss_a + ((head_b(trunk_2(middle)) - targets) ** 2).mean()


for name, way in ways.items():
    print(f"{name}: ", end="")
    optimizer = torch.optim.SGD(params, lr=0.1)
    with checked(optimizer, reference, **parts):
        for _ in range(3):
            optimizer.zero_grad()
            way(*forward())
            optimizer.step()

# %%
# What each way keeps
# -------------------
#
# A :class:`~torch.autograd.graph.saved_tensors_hooks` pack hook hands autograd a ``Box`` per
# saved tensor, recorded in a :class:`weakref.WeakKeyDictionary` that forgets it when autograd
# drops it. ``held_bytes()``: the bytes of the distinct storages autograd still keeps, parameters
# excluded, read after the forward, after backward with the losses still referenced, and after
# ``del``.


class Box:
    def __init__(self, tensor):
        self.tensor = tensor.detach()  # no history: the box keeps no graph alive


live = weakref.WeakKeyDictionary()  # Box -> (storage address, bytes), while autograd keeps it
param_storages = {p.untyped_storage().data_ptr() for p in params}


def pack(tensor):
    box, storage = Box(tensor), tensor.untyped_storage()
    if storage.data_ptr() not in param_storages:
        live[box] = (storage.data_ptr(), storage.nbytes())
    return box


def held_bytes():
    return sum(dict(live.values()).values())  # each storage once


def measured(way):
    with saved_tensors_hooks(pack, lambda box: box.tensor):
        loss_a, loss_b = forward()
    saved = held_bytes()
    way(loss_a, loss_b)
    held = held_bytes()
    del loss_a, loss_b
    return saved, held, held_bytes()


results = {name: measured(way) for name, way in ways.items()}
for name, (saved, held, after_del) in results.items():
    print(f"{name:>10}: saved {saved} B, held after backward {held} B, after del {after_del} B")

assert len({saved for saved, _, _ in results.values()}) == 1  # the same forward pass
assert results["summed"][1] == results["listed"][1] == 0
assert 0 < results["sequential"][1] < results["sequential"][0]
assert all(after_del == 0 for *_, after_del in results.values())

# %%
# The sequential way's second backward frees only what it runs: the bytes still held are exactly
# what ``head_a``'s branch saves alone.

with saved_tensors_hooks(pack, lambda box: box.tensor):
    loss_a_alone = F.cross_entropy(head_a(trunk_1(inputs).detach()), labels)
print(f"head_a's branch alone saves {held_bytes()} B")
assert held_bytes() == results["sequential"][1]
del loss_a_alone
