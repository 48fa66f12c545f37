"""
Two heads, one trunk: three ways to backward several losses
===========================================================

A multi-task network has a shared trunk and one loss per head. You can call
``backward(retain_graph=True)`` on the first loss and ``backward()`` on the second, add the losses
and call ``backward()`` once, or hand both losses to :func:`torch.autograd.backward` in a list.
This script runs all three on the same batch and measures what differs: the gradients (the last
two ways agree to the bit, the first differs only by rounding), the bytes of saved tensors the
graph still holds afterwards, and the time per step.

.. index:: multi-task, multi-task learning, two heads, shared trunk, several losses
"""

# %%
# A meter for saved tensors
# -------------------------
#
# ``SavedBytes`` is a :class:`torch.autograd.graph.saved_tensors_hooks` context. Its pack hook
# hands autograd a detached alias of every tensor an operation saves and follows it with a
# :mod:`weakref`, so ``held`` is the bytes of the memory blocks that saved tensors keep alive
# (each block once, parameters skipped: they exist anyway). Python numbers that an operation
# saves as 0-dim tensors never reach the hook and are not counted. The class is a verbatim copy
# of the meter the site's pages use (``docs/saved_bytes.py``), so the numbers mean the same
# there and here. One thread keeps these tiny operations fast and the timings steady.

import time
import weakref

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.graph import saved_tensors_hooks

torch.set_num_threads(1)
torch.manual_seed(0)


# >>> SavedBytes meter: one block, identical in docs/saved_bytes.py and the gallery scripts
# (tests/test_meter_copies.py compares them)


class _Box:
    """What the pack hook hands autograd instead of the tensor: an object a weakref can follow."""

    __slots__ = ("__weakref__", "tensor")

    def __init__(self, tensor):
        self.tensor = tensor


class SavedBytes(saved_tensors_hooks):
    """Bytes of memory kept alive by the tensors saved for backward while this context is active.

    Each block of memory (a tensor's storage) counts once and in full, however many saved tensors
    or views refer to it; the storages of ``skip`` (parameters, which exist anyway) do not count.
    ``held``: bytes autograd still holds now; ``peak``: the most it held at once; ``total``: every
    block saved while active, released or not. What the pack hook never sees is not counted:
    Python numbers that an operation wraps as 0-dim tensors and saves (``x * 3.0``, ``x / 4``),
    and tensors a custom ``autograd.Function`` keeps as ``ctx`` attributes.
    """

    def __init__(self, skip=()):
        super().__init__(self._pack, self._unpack)
        self._skip = {p.untyped_storage().data_ptr() for p in skip}
        self._blocks = {}  # storage address -> [boxes that hold it, bytes]
        self.held = self.peak = self.total = 0

    def _pack(self, tensor):
        box = _Box(tensor.detach())  # an alias without history: the meter holds no graph
        storage = tensor.untyped_storage()
        address = storage.data_ptr()
        if address not in self._skip:
            block = self._blocks.setdefault(address, [0, storage.nbytes()])
            if block[0] == 0:
                self.held += block[1]
                self.total += block[1]
                self.peak = max(self.peak, self.held)
            block[0] += 1
            weakref.finalize(box, self._release, address).atexit = False
        return box

    def _unpack(self, box):
        return box.tensor

    def _release(self, address):
        block = self._blocks[address]
        block[0] -= 1
        if block[0] == 0:
            self.held -= self._blocks.pop(address)[1]


# <<< SavedBytes meter


# %%
# A trunk with a head in the middle and a head at the end
# -------------------------------------------------------
#
# ``head_a`` reads the trunk's first layer and ``head_b`` its last, so the two losses sit at
# different depths.

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


print({name: sum(p.numel() for p in module.parameters()) for name, module in parts.items()})

# %%
# Without ``retain_graph``, the second backward fails
# ---------------------------------------------------
#
# The first :meth:`~torch.Tensor.backward` frees what ``trunk_1`` saved, and the second loss
# needs it too.

loss_a, loss_b = forward()
loss_a.backward()
try:
    loss_b.backward()
except RuntimeError as error:
    print(f"{type(error).__name__}: {error}")
    assert "backward through the graph a second time" in str(error)
else:
    raise AssertionError("the second backward through the shared trunk was expected to fail")

# %%
# A popular Q&A answer explains this failure as the second branch no longer finding a graph that
# connects it to the input. The graph is still there, node for node; what the first backward
# released are the intermediate values its nodes saved. Here the same forward pass is written out
# so that ``middle``, the output of ``trunk_1``'s tanh, can be inspected: the nodes reachable
# from ``loss_b`` are counted before and after ``loss_a``'s backward, and the tanh node's saved
# output is read afterwards.


def graph_nodes(loss):
    seen, stack = set(), [loss.grad_fn]
    while stack:
        node = stack.pop()
        if node is not None and node not in seen:
            seen.add(node)
            stack.extend(next_node for next_node, _ in node.next_functions)
    return len(seen)


middle = trunk_1(inputs)
loss_a = F.cross_entropy(head_a(middle), labels)
loss_b = F.mse_loss(head_b(trunk_2(middle)), targets)
nodes_before = graph_nodes(loss_b)
loss_a.backward()
print(f"nodes reachable from loss_b: {nodes_before} before, {graph_nodes(loss_b)} after")
assert graph_nodes(loss_b) == nodes_before
try:
    saved_output = middle.grad_fn._saved_result
except RuntimeError as error:
    print(f"{type(middle.grad_fn).__name__}._saved_result -> {type(error).__name__}: {error}")
    assert "after they have already been freed" in str(error)
else:
    raise AssertionError("the tanh node's saved output was expected to be freed")

# %%
# The three ways that work
# ------------------------
#
# Each function takes the two losses and calls backward its own way. ``measured`` clears the
# gradients, runs the forward pass under ``SavedBytes``, and records the bytes the graph holds
# right after the backward call(s) while the losses are still referenced (as they are in a
# training loop until the next iteration overwrites them), then again after ``del``.


def sequential(loss_a, loss_b):
    loss_a.backward(retain_graph=True)
    loss_b.backward()


def summed(loss_a, loss_b):
    (loss_a + loss_b).backward()


def listed(loss_a, loss_b):
    torch.autograd.backward([loss_a, loss_b])


def measured(way):
    for p in params:
        p.grad = None
    meter = SavedBytes(skip=params)
    with meter:
        loss_a, loss_b = forward()
    saved = meter.held
    way(loss_a, loss_b)
    held = meter.held
    del loss_a, loss_b
    grads = {name: [p.grad.clone() for p in module.parameters()] for name, module in parts.items()}
    return grads, saved, held, meter.held


ways = {"sequential": sequential, "summed": summed, "listed": listed}
results = {name: measured(way) for name, way in ways.items()}
for name, (_, saved, held, after_del) in results.items():
    print(f"{name:>10}: saved {saved} B, held after backward {held} B, after del {after_del} B")

saved_by_forward = {saved for _, saved, _, _ in results.values()}
assert len(saved_by_forward) == 1  # same forward pass, same saved tensors
assert results["summed"][2] == results["listed"][2] == 0
assert 0 < results["sequential"][2] < results["sequential"][1]
assert all(after_del == 0 for *_, after_del in results.values())

# %%
# The sequential way does not free everything: its second backward frees only what it
# traverses, so ``head_a``'s branch (its input activations and the cross-entropy's saved
# values) stays in memory until ``loss_a`` is dropped. In a training loop that is until the
# next forward pass has overwritten ``loss_a``. The other two ways free the whole graph at once.
# The bytes still held are exactly what ``head_a``'s branch saves on its own:

meter = SavedBytes(skip=params)
with meter:
    loss_a_alone = F.cross_entropy(head_a(trunk_1(inputs).detach()), labels)
print(f"head_a's branch alone saves {meter.held} B")
assert meter.held == results["sequential"][2]

# %%
# Gradients: to the bit, or to rounding?
# --------------------------------------
#
# For each parameter group, is the gradient bit-for-bit equal (:func:`torch.equal`), and what
# is the largest absolute difference?

grads = {name: result[0] for name, result in results.items()}


def compare(first, second):
    report = {}
    for name in parts:
        pairs = list(zip(grads[first][name], grads[second][name]))
        same = all(torch.equal(g, h) for g, h in pairs)
        diff = max((g - h).abs().max().item() for g, h in pairs)
        report[name] = (same, diff)
        print(f"{first} vs {second}, {name:>7}: bitwise equal {same}, max abs diff {diff:.1e}")
    return report


summed_vs_listed = compare("summed", "listed")
sequential_vs_summed = compare("sequential", "summed")
assert all(same for same, _ in summed_vs_listed.values())
assert not sequential_vs_summed["trunk_1"][0]
assert all(sequential_vs_summed[name][0] for name in ("trunk_2", "head_a", "head_b"))
assert all(diff < 1e-6 for _, diff in sequential_vs_summed.values())

# %%
# Summing the losses and passing them as a list run the same backward: autograd adds the two
# incoming gradients at ``trunk_1``'s output and goes through ``trunk_1`` once. The sequential
# way goes through ``trunk_1`` twice and adds the two results in ``.grad``, a different order of
# floating-point additions, hence differences in the last bits and only in ``trunk_1``, the one
# part both losses reach.
#
# A forum answer worried that the two ways differ for the layers between the two losses: with
# sequential calls they receive only the second loss's gradient, with a summed loss the gradient
# of the total. Both descriptions are right at once, because the gradient of ``loss_a`` with respect to
# ``trunk_2`` and ``head_b`` is zero: those layers get exactly the gradient of ``loss_b`` alone,
# whichever way you call backward.

for p in params:
    p.grad = None
_, loss_b_alone = forward()
only_b = torch.autograd.grad(loss_b_alone, list(trunk_2.parameters()))
assert all(torch.equal(g, h) for g, h in zip(only_b, grads["summed"]["trunk_2"]))
print("trunk_2 gets exactly loss_b's gradient:", [tuple(g.shape) for g in only_b])

# %%
# Another post in that thread expected an optimizer to step differently after sequential calls
# than after the summed loss. With one step after both backward calls, the optimizer reads the
# same ``.grad`` either way. One :class:`torch.optim.Adam` step from the common starting
# parameters, once with each set of gradients:


def params_after_one_adam_step(way):
    copies = [p.detach().clone().requires_grad_(True) for p in params]
    flat_grads = [g for name in parts for g in grads[way][name]]
    for copy, grad in zip(copies, flat_grads):
        copy.grad = grad.clone()
    torch.optim.Adam(copies, lr=1e-2).step()
    return copies


after_sequential = params_after_one_adam_step("sequential")
after_summed = params_after_one_adam_step("summed")
step_diff = max((a - b).abs().max().item() for a, b in zip(after_sequential, after_summed))
print(f"parameters after one Adam step: max abs diff {step_diff:.1e}")
assert step_diff < 1e-5

# %%
# The hooks themselves do not change the gradients: a plain run without ``SavedBytes`` gives
# the same bits.

for p in params:
    p.grad = None
summed(*forward())
plain = [p.grad for p in trunk_1.parameters()]
assert all(torch.equal(g, h) for g, h in zip(plain, grads["summed"]["trunk_1"]))
print("gradients with and without the hooks are identical")

# %%
# Time and memory
# ---------------
#
# Each way runs a full step (forward and backward) 50 times in a row; the three ways take turns,
# 9 rounds, and the figure shows each way's fastest round, the one least disturbed by other work
# on the machine. The sequential way walks ``trunk_1`` twice and starts two backward passes, the
# other two ways one; the left panel shows what that costs at this size. The right panel is the
# byte count measured above.


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
held = [results[name][2] for name in ways]

# The site's colours: with retain_graph (sequential) and the two fixes (one backward call).
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

# %%
# What to take away
# -----------------
#
# * ``retain_graph=True`` is needed only by the sequential way, and it makes that way keep part
#   of the graph alive after both backward calls.
# * Adding the losses, or passing them to :func:`torch.autograd.backward` as a list, gives the
#   same gradients as each other to the bit, and the same as the sequential way up to rounding.
#   Either needs no ``retain_graph`` and frees the whole graph in one backward pass.
# * :doc:`../docs/several-losses` compares the same ways on another network, and says when
#   separate calls are right; :doc:`../docs/what-it-costs` measures what a kept graph holds.
