"""
Two heads, one trunk: several losses
====================================

The fix: add the losses and call ``backward()`` once, or pass them as a list to
:func:`torch.autograd.backward`: no ``retain_graph``, and the whole graph is freed.
``backward(retain_graph=True)`` on the first loss, then ``backward()`` on the second, trains the
same (up to rounding) but holds the first head's branch until the losses are dropped.

.. index:: multi-task, multi-task learning, two heads, shared trunk, several losses
"""

# %%
# ``head_a`` reads the trunk's first layer, ``head_b`` its last.

import contextlib
import time
import weakref

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.graph import saved_tensors_hooks

torch.set_num_threads(1)  # tiny tensors, steadier timings
torch.manual_seed(0)


@contextlib.contextmanager
def checked(optimizer, reference, **modules):
    names = {p: f"{k}.{n}" for k, m in modules.items() for n, p in m.named_parameters()}
    params = [p for group in optimizer.param_groups for p in group["params"]]
    start, done = [p.detach().clone() for p in params], []

    def check(*_):
        wanted = torch.autograd.grad(reference(len(done)), params, allow_unused=True)
        for p, want in zip(params, wanted):
            got, step = p.grad, f"step {len(done)}:"
            assert got is not None and got.any(), f"{step} {names[p]} got no gradient"
            assert want is not None and got.allclose(want, 1e-4, 1e-6), (
                f"{step} wrong gradient of {names[p]}"
            )
        done.append(0)

    handle = optimizer.register_step_pre_hook(check)
    yield
    handle.remove()
    assert len(done) >= 3 and not any(map(torch.equal, params, start)), (
        "< 3 steps, or one not moved"
    )
    print(f"{'/'.join(modules)}: {len(done)} steps checked")


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
    raise AssertionError("no error")

# %%
# Three ways that work: memory
# ----------------------------
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


def sequential(loss_a, loss_b):
    loss_a.backward(retain_graph=True)
    loss_b.backward()


def summed(loss_a, loss_b):
    (loss_a + loss_b).backward()


def listed(loss_a, loss_b):
    torch.autograd.backward([loss_a, loss_b])


def measured(way):
    with saved_tensors_hooks(pack, lambda box: box.tensor):
        loss_a, loss_b = forward()
    saved = held_bytes()
    way(loss_a, loss_b)
    held = held_bytes()
    del loss_a, loss_b
    return saved, held, held_bytes()


ways = {"sequential": sequential, "summed": summed, "listed": listed}
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

# %%
# Gradients
# ---------
#
# Checked (:doc:`plot_how_examples_are_checked`) against the summed loss at the current weights,
# all three train right, the sequential way up to rounding (it adds the two losses' gradients in
# ``.grad``, another order of additions; :doc:`../docs/several-losses` shows which parts agree to
# the bit).

for name, way in ways.items():
    print(f"{name}: ", end="")
    optimizer = torch.optim.SGD(params, lr=0.1)
    with checked(optimizer, lambda step: sum(forward()), model=nn.ModuleDict(parts)):
        for _ in range(3):
            optimizer.zero_grad()
            way(*forward())
            optimizer.step()

# %%
# Time and memory
# ---------------
#
# Each way runs a step 50 times in a row, the three taking turns for 9 rounds; the top panel is
# each way's fastest round on the machine that ran this, the bottom one the bytes held above.


def one_step(way):
    for p in params:
        p.grad = None
    way(*forward())


def fastest_seconds_per_step(steps=50, rounds=9):
    best = dict.fromkeys(ways, float("inf"))
    for _ in range(rounds):
        for name, way in ways.items():
            start = time.perf_counter()
            for _ in range(steps):
                one_step(way)
            best[name] = min(best[name], (time.perf_counter() - start) / steps)
    return best


for way in ways.values():  # warm-up
    one_step(way)
micros = [1e6 * seconds for seconds in fastest_seconds_per_step().values()]
held = [results[name][1] for name in ways]

RETAINED, FIX = "#8a63d2", "#1a9c6b"
colors = [RETAINED, FIX, FIX]
fig, (ax_time, ax_bytes) = plt.subplots(2, 1, figsize=(4.2, 5.6), sharex=True)
ax_time.bar(list(ways), micros, color=colors)
ax_time.set(title="Time per step", ylabel="µs per step\n(fastest of 9 rounds)")
bars = ax_bytes.bar(list(ways), held, color=colors)
ax_bytes.bar_label(bars)
ax_bytes.margins(y=0.2)
ax_bytes.set(
    title="Only the sequential way still holds\nsaved tensors after backward",
    ylabel="bytes of saved tensors",
    xlabel="way of calling backward",
)
fig.tight_layout()
plt.show()
