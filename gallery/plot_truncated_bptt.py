"""
Truncated backpropagation through time: detach, don't retain
============================================================

A recurrent network reads a long sequence in chunks and carries its hidden state from one chunk
to the next. If that state still hangs on the previous chunk's graph, the second chunk's backward
fails on the freed graph. ``retain_graph=True`` silences that error, but every backward then walks
all earlier chunks again: the graph, the memory it holds and the time per chunk grow with every
chunk, and an optimizer step between chunks breaks it anyway. Detaching the hidden state between
chunks keeps all three flat. This script shows each case, counting graph nodes and saved bytes.

.. index:: truncated BPTT, truncated backpropagation through time, RNN, recurrent network, hidden state, detach hidden state
"""

# %%
# A small recurrent cell and a long sequence in chunks
# ----------------------------------------------------
#
# A :class:`torch.nn.RNNCell` with 16 hidden units reads 40 chunks of 8 time steps each, for a
# batch of 4 sequences, and a linear readout predicts a running sum of the inputs. ``SavedBytes``
# is a :class:`torch.autograd.graph.saved_tensors_hooks` context (a verbatim copy of the meter in
# the site's ``docs/saved_bytes.py``): ``held`` is the bytes of the memory blocks that tensors
# saved for backward keep alive, each block once and in full. A step's input and target are
# slices of ``inputs`` and ``targets``, whose blocks exist anyway, so those are excluded like the
# parameters. ``graph_nodes`` counts the autograd nodes a backward from a loss can reach.

import time
import weakref
from itertools import pairwise

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.graph import saved_tensors_hooks

torch.set_num_threads(1)  # tiny tensors: one thread is fastest and keeps timings steady
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


def graph_nodes(loss):
    seen, stack = set(), [loss.grad_fn]
    while stack:
        node = stack.pop()
        if node is not None and node not in seen:
            seen.add(node)
            stack.extend(next_node for next_node, _ in node.next_functions)
    return len(seen)


CHUNKS, STEPS, BATCH, HIDDEN = 40, 8, 4, 16
inputs = torch.randn(CHUNKS, STEPS, BATCH, 3)
targets = 0.1 * inputs.sum(-1, keepdim=True).flatten(0, 1).cumsum(0).unflatten(0, (CHUNKS, STEPS))
cell, readout = nn.RNNCell(3, HIDDEN), nn.Linear(HIDDEN, 1)
start_state = {  # copies: state_dict() shares storage with the parameters
    name: {key: value.clone() for key, value in module.state_dict().items()}
    for name, module in (("cell", cell), ("readout", readout))
}
params = [*cell.parameters(), *readout.parameters()]


def restart():
    cell.load_state_dict(start_state["cell"])
    readout.load_state_dict(start_state["readout"])
    for p in params:
        p.grad = None
    return torch.zeros(BATCH, HIDDEN)


def run_chunk(hidden, chunk):
    loss = 0
    for step in range(STEPS):
        hidden = cell(inputs[chunk, step], hidden)
        loss = loss + F.mse_loss(readout(hidden), targets[chunk, step])
    return hidden, loss / STEPS


print(f"{CHUNKS} chunks × {STEPS} steps, batch {BATCH}, hidden size {HIDDEN}")

# %%
# Carrying the hidden state as it is: the second chunk fails
# ----------------------------------------------------------
#
# The hidden state leaving chunk 0 is the output of chunk 0's graph. Chunk 1's loss depends on
# it, so chunk 1's backward wants to continue into chunk 0's graph, which chunk 0's
# :meth:`~torch.Tensor.backward` has already freed (:doc:`../docs/what-backward-frees` shows what
# exactly is freed).

hidden = restart()
hidden, loss = run_chunk(hidden, 0)
loss.backward()
hidden, loss = run_chunk(hidden, 1)
try:
    loss.backward()
except RuntimeError as error:
    print(f"{type(error).__name__}: {error}")
    assert "backward through the graph a second time" in str(error)
else:
    raise AssertionError("chunk 1's backward into chunk 0's freed graph was expected to fail")

# %%
# Adding ``retain_graph=True`` in a training loop: another error
# --------------------------------------------------------------
#
# The error message suggests ``retain_graph=True``. In a training loop, with an optimizer step
# after each chunk, that only swaps one error for another: chunk 0's graph saved the cell's
# weights for backward, the step changed them in place, and chunk 1's backward, which walks
# through chunk 0 again, detects it through the weights' version counter.

hidden = restart()
optimizer = torch.optim.SGD(params, lr=0.01)
hidden, loss = run_chunk(hidden, 0)
loss.backward(retain_graph=True)
optimizer.step()
hidden, loss = run_chunk(hidden, 1)
try:
    loss.backward(retain_graph=True)
except RuntimeError as error:
    print(f"{type(error).__name__}: {error}")
    assert "modified by an inplace operation" in str(error)
else:
    raise AssertionError("backward through weights changed in place was expected to fail")

# %%
# Without optimizer steps between chunks (say, gradients accumulated over the whole sequence)
# ``retain_graph=True`` runs. The cost shows in what each chunk's backward has to walk.
#
# Retained graph versus detached hidden state, chunk by chunk
# -----------------------------------------------------------
#
# For each chunk: the nodes its backward can reach, and the bytes of saved tensors held when
# its backward starts. ``"retain"`` carries the hidden state as it is and backpropagates with
# ``retain_graph=True``; ``"detach"`` calls :meth:`~torch.Tensor.detach` on the hidden state at
# the start of every chunk, a plain backward, and an optimizer step after each chunk, like a
# real truncated-BPTT loop.


def measure(mode):
    hidden = restart()
    optimizer = torch.optim.SGD(params, lr=0.01)
    meter = SavedBytes(skip=[*params, inputs, targets])  # blocks that exist anyway
    nodes, held = [], []
    for chunk in range(CHUNKS):
        if mode == "detach":
            hidden = hidden.detach()
        with meter:
            hidden, loss = run_chunk(hidden, chunk)
        nodes.append(graph_nodes(loss))
        held.append(meter.held)
        loss.backward(retain_graph=(mode == "retain"))
        if mode == "detach":
            optimizer.step()
            optimizer.zero_grad()
    return nodes, held


counts = {"retain": measure("retain")}
retained_grads = [p.grad.clone() for p in params]  # what the 40 retained backward calls added up
counts["detach"] = measure("detach")
for mode, (nodes, held) in counts.items():
    print(f"{mode}: graph nodes at chunks 1, 2, 40: {nodes[0]}, {nodes[1]}, {nodes[-1]}")
    print(f"{mode}: bytes held at chunks 1, 2, 40: {held[0]}, {held[1]}, {held[-1]}")

retain_nodes, retain_held = counts["retain"]
detach_nodes, detach_held = counts["detach"]
assert len(set(detach_nodes)) == 1 and len(set(detach_held)) == 1  # flat
node_steps = {b - a for a, b in pairwise(retain_nodes)}
byte_steps = {b - a for a, b in pairwise(retain_held)}
assert len(node_steps) == 1 and node_steps.pop() > 0  # the same growth every chunk
assert len(byte_steps) == 1 and byte_steps.pop() > 0
assert retain_nodes[0] == detach_nodes[0] and retain_held[0] == detach_held[0]

# %%
# Both start from the same graph. With the retained graph, every chunk adds the same number of
# nodes and bytes, and none of it is ever released: chunk 40's backward walks all 40 chunks.
# With the detached state, every chunk's graph has the same size, and its backward frees it.
#
# What the retained backward calls computed
# -----------------------------------------
#
# Each chunk's backward went back to the start of the sequence, so the gradients the 40 calls
# added up are those of untruncated backpropagation through time on the total loss. A single
# backward of the summed chunk losses, at the end, gives the same in one pass over the graph:

hidden = restart()
total = 0
for chunk in range(CHUNKS):
    hidden, loss = run_chunk(hidden, chunk)
    total = total + loss
total.backward()
difference = max((p.grad - g).abs().max().item() for p, g in zip(params, retained_grads))
largest = max(g.abs().max().item() for g in retained_grads)
print(f"max abs difference {difference:.1e}, largest gradient entry {largest:.1e}")
assert all(torch.allclose(p.grad, g, rtol=1e-4, atol=1e-6) for p, g in zip(params, retained_grads))

# %%
# So ``retain_graph=True`` here buys full backpropagation through time, at a cost that grows
# with every chunk, and no truncation at all.
#
# Time per chunk
# --------------
#
# The time of each chunk (forward and backward), measured without the hooks, fastest of 3 runs.
# It follows the graph: by the last chunks the retained run is several times slower per chunk.


def chunk_seconds(mode):
    hidden = restart()
    optimizer = torch.optim.SGD(params, lr=0.01)
    seconds = []
    for chunk in range(CHUNKS):
        start = time.perf_counter()
        if mode == "detach":
            hidden = hidden.detach()
        hidden, loss = run_chunk(hidden, chunk)
        loss.backward(retain_graph=(mode == "retain"))
        seconds.append(time.perf_counter() - start)
        if mode == "detach":
            optimizer.step()
            optimizer.zero_grad()
    return seconds


runs = {mode: [chunk_seconds(mode) for _ in range(3)] for mode in counts}
fastest = {mode: [1e3 * min(times) for times in zip(*runs[mode])] for mode in runs}
last_five = {mode: sum(times[-5:]) for mode, times in fastest.items()}
assert last_five["retain"] > 2 * last_five["detach"]  # a robust margin: node ratio is ~20

chunk_numbers = range(1, CHUNKS + 1)
# The site's colours: with retain_graph, and with detach (the fix).
RETAINED, FIX = "#8a63d2", "#1a9c6b"
fig, (ax_bytes, ax_time) = plt.subplots(2, 1, figsize=(4.2, 5.6), sharex=True)
for mode, color, label in (
    ("retain", RETAINED, "retain_graph=True"),
    ("detach", FIX, "hidden.detach()"),
):
    ax_bytes.plot(chunk_numbers, [b / 1024 for b in counts[mode][1]], color=color, label=label)
    ax_time.plot(chunk_numbers, fastest[mode], color=color, label=label)
ax_bytes.set(
    title="Retaining holds every chunk's graph", ylabel="KiB of saved tensors\nwhen backward starts"
)
ax_time.set(
    title="and each backward pass gets slower",
    xlabel="chunk",
    ylabel="ms per chunk\n(fastest of 3 runs)",
)
ax_bytes.legend()
fig.tight_layout()
plt.show()

# %%
# What to take away
# -----------------
#
# * Carrying a hidden state across chunks links every chunk's graph to the previous one. The
#   freed-graph error in the second chunk is autograd telling you so.
# * ``retain_graph=True`` does not truncate anything: each backward walks the whole history, so
#   memory and time per chunk grow with every chunk, and an optimizer step between chunks makes
#   it fail with an in-place modification error.
# * ``hidden = hidden.detach()`` at the start of each chunk is the truncation: the gradient
#   stops at the chunk boundary, and every chunk costs the same.
# * The :doc:`error reference <../docs/errors>` lists this cause of the freed-graph error with the
#   others, and :doc:`../docs/what-it-costs` measures the same growth in another carried-state loop.
