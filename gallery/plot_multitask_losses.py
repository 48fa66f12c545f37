"""
Two heads, one trunk: several losses, timed
===========================================

The fix: add the losses and call ``backward()`` once, or pass them as a list to
:func:`torch.autograd.backward`: no ``retain_graph``, and that one call frees every saved tensor.
``backward(retain_graph=True)`` on the first loss, then ``backward()`` on the second, trains the
same (up to rounding) but, in eager mode, still holds saved tensors after the second call, until
the losses are dropped. Six ways timed on trunks 48 and 512 wide.

.. index:: multi-task, multi-task learning, two heads, shared trunk, several losses, slow backward,
   training speed, wide model, time per step, multi-task timing, two backward calls slower than
   one, summed loss speed
"""

# %%
# ``make_net(width)``: a trunk ``width`` wide, two heads on its output (a regression and a
# classification), and the function computing their losses.

import contextlib
import time
import weakref

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.graph import saved_tensors_hooks

torch.manual_seed(0)
torch.set_num_threads(1)  # tiny tensors, steadier timings


# --- checked: the outcome check. docs/outcome.py and every gallery script that checks a fix
# --- carry these lines unchanged (tests/test_outcome_copies.py compares them).
@contextlib.contextmanager
def checked(optimizer, reference, *, train=None, steps=3, **named):
    """Check each ``optimizer.step()`` in the block by its outcome. At each step (with a closure,
    after each run of it), every parameter's ``.grad`` must equal the gradient of
    ``reference(step)``, a loss recomputed from scratch at the current weights by other code
    than the fix, and each parameter meant to train (``train``; by default all of the optimizer's
    and of ``named``, which must then all be in it) must get a non-zero gradient. At the end, at
    least ``steps`` steps ran and each of those parameters moved. ``named``: modules or tensors,
    which name the parameters in the messages."""
    names = {}
    for key, part in named.items():
        pairs = part.named_parameters() if isinstance(part, torch.nn.Module) else [("", part)]
        for name, p in pairs:
            names.setdefault(p, f"{key}.{name}".strip("."))
    params = [p for group in optimizer.param_groups for p in group["params"] if p.requires_grad]
    if train is None:  # every named parameter that requires grad is meant to train
        held = {id(p) for p in params}
        left_out = [n for p, n in names.items() if p.requires_grad and id(p) not in held]
        assert not left_out, f"{left_out[0]} is not in the optimizer: it never trains"
    meant = params if train is None else list(train)
    assert meant, "the optimizer holds no parameter meant to train: nothing to check"
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


inputs = torch.randn(64, 20)
target_a = torch.randn(64, 1)
target_b = torch.randint(0, 5, (64,))


def make_net(width):
    torch.manual_seed(3)
    trunk = nn.Sequential(nn.Linear(20, width), nn.Tanh(), nn.Linear(width, width), nn.Tanh())
    head_a = nn.Sequential(nn.Linear(width, 64), nn.ReLU(), nn.Linear(64, 1))
    head_b = nn.Sequential(nn.Linear(width, 64), nn.ReLU(), nn.Linear(64, 5))

    def forward(features=None):
        features = trunk(inputs) if features is None else features
        return F.mse_loss(head_a(features), target_a), F.cross_entropy(head_b(features), target_b)

    return {"trunk": trunk, "head_a": head_a, "head_b": head_b}, forward


parts, forward = make_net(48)
params = [p for part in parts.values() for p in part.parameters()]

# %%
# Without ``retain_graph``, the second backward fails
# ---------------------------------------------------
#
# The first :meth:`~torch.Tensor.backward` frees what the trunk saved, which the second loss
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
# Ways that work
# --------------
#
# Checked (:doc:`plot_how_examples_are_checked`) against the two losses written out again at the
# current weights, these train right, the sequential way up to rounding (another order of
# additions: :doc:`../docs/several-losses`). ``cut_at_features`` detaches the trunk's output,
# runs each head's backward, then sends the collected gradient through the trunk once.


def sequential(forward):
    loss_a, loss_b = forward()
    loss_a.backward(retain_graph=True)
    loss_b.backward()


def summed(forward):
    loss_a, loss_b = forward()
    (loss_a + loss_b).backward()


def listed(forward):
    torch.autograd.backward(list(forward()))


def cut_at_features(forward, trunk):
    features = trunk(inputs)
    cut = features.detach().requires_grad_()
    loss_a, loss_b = forward(cut)
    loss_a.backward()
    loss_b.backward()
    features.backward(cut.grad)


def reference(step):
    trunk, head_a, head_b = parts.values()
    features = torch.tanh(trunk[2](torch.tanh(trunk[0](inputs))))
    logits = head_b(features)
    picked = logits.gather(1, target_b[:, None]) - logits.logsumexp(1, keepdim=True)
    return ((head_a(features) - target_a) ** 2).mean() - picked.mean()


ways = {
    "sequential": sequential,
    "summed": summed,
    "listed": listed,
    "cut at features": lambda forward: cut_at_features(forward, parts["trunk"]),
}
for name, way in ways.items():
    print(f"{name}: ", end="")
    optimizer = torch.optim.SGD(params, lr=0.1)
    with checked(optimizer, reference, **parts):
        for _ in range(3):
            optimizer.zero_grad()
            way(forward)
            optimizer.step()

# %%
# What each way keeps
# -------------------
#
# A :class:`~torch.autograd.graph.saved_tensors_hooks` pack hook hands autograd a ``Box`` per
# saved tensor, tracked in a :class:`weakref.WeakKeyDictionary`; ``held_bytes()`` sums the
# distinct storages autograd still keeps (parameters excluded) after the forward, after backward
# with the losses still referenced, and after they are dropped.


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
        losses = forward()
    saved = held_bytes()
    way(lambda: losses)
    held = held_bytes()  # the losses still referenced
    losses = None
    return saved, held, held_bytes()


results = {name: measured(ways[name]) for name in ("sequential", "summed", "listed")}
for name, (saved, held, after_del) in results.items():
    print(f"{name:>10}: saved {saved} B, held after backward {held} B, dropped {after_del} B")
assert len({saved for saved, _, _ in results.values()}) == 1  # the same forward pass
assert results["summed"][1] == results["listed"][1] == 0
assert 0 < results["sequential"][1] < results["sequential"][0]
assert all(after_del == 0 for *_, after_del in results.values())

# %%
# Time
# ----
#
# Two more ways return the gradients instead of filling ``.grad``: :func:`torch.autograd.grad`
# on the list or on the sum. On trunks 48 and 512 wide, the six give the same gradients up to
# rounding (asserted); the figure shows each one's median time for a forward and backward on the
# machine that ran this, never printed or asserted.


def six_ways(width):
    parts, forward = make_net(width)
    params = [p for part in parts.values() for p in part.parameters()]
    ways = {
        "sequential": lambda: sequential(forward),
        "summed": lambda: summed(forward),
        "listed": lambda: listed(forward),
        "grad of list": lambda: torch.autograd.grad(list(forward()), params),
        "grad of sum": lambda: torch.autograd.grad(sum(forward()), params),
        "cut at features": lambda: cut_at_features(forward, parts["trunk"]),
    }
    return params, ways


def gradients(params, way):
    for p in params:
        p.grad = None
    return way() or [p.grad.clone() for p in params]  # the grad ways return theirs


def median_micros(params, way, repeats):
    samples = []
    for _ in range(repeats):
        for p in params:
            p.grad = None
        start = time.perf_counter()
        way()
        samples.append(time.perf_counter() - start)
    return 1e6 * sorted(samples)[len(samples) // 2]


medians = {}
for width, repeats in ((48, 31), (512, 11)):
    params, ways = six_ways(width)
    first, *others = [gradients(params, way) for way in ways.values()]
    assert all(torch.allclose(a, b, atol=1e-6) for grads in others for a, b in zip(first, grads))
    medians[width] = {name: median_micros(params, way, repeats) for name, way in ways.items()}

fig, axes = plt.subplots(2, 1, figsize=(4.2, 5.6), layout="constrained")
for ax, (width, times) in zip(axes, medians.items()):
    colours = ["#8a63d2" if name == "sequential" else "#808080" for name in times]
    ax.barh(list(times), list(times.values()), color=colours)
    ax.invert_yaxis()
    ax.set(xlabel="median µs, forward + backward", title=f"trunk width {width}")
fig.suptitle("Two losses, CPU, one thread")
plt.show()
