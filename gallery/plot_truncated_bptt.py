"""
Truncated BPTT: detach, don't retain
====================================

The fix: ``hidden = hidden.detach()`` at the start of each chunk, the window boundary. Carried as
it is, the hidden state makes the second chunk's backward fail on the first chunk's freed graph.
``retain_graph=True`` silences that here only without an optimizer step between chunks, and then
every backward walks all earlier chunks: nodes, saved bytes and time grow every chunk. Detached,
they stay flat.

.. index:: truncated BPTT, truncated backpropagation through time, RNN, recurrent network, hidden state, detach hidden state
"""

# %%
# A :class:`torch.nn.RNNCell` reads 40 chunks of 8 steps; a readout predicts a running sum of the
# inputs. ``graph_size(loss)`` counts the nodes a backward from ``loss`` would visit and the bytes
# of the distinct storages they hold as saved tensors (``_saved_*``), parameters and data
# excluded; it sees what a :class:`~torch.autograd.graph.saved_tensors_hooks` pack hook misses,
# such as the tensor ``loss / STEPS`` makes of ``STEPS``. ``checked``:
# :doc:`plot_how_examples_are_checked`.

import contextlib
import time
from itertools import pairwise

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn

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


SAVED_NAMES = {}  # node type -> its _saved_* attribute names


def graph_size(loss, exclude):
    skip = {t.untyped_storage().data_ptr() for t in exclude}
    nodes, stack, storages = set(), [loss.grad_fn], {}
    while stack:
        node = stack.pop()
        if node is None or node in nodes:
            continue
        nodes.add(node)
        stack.extend(parent for parent, _ in node.next_functions)
        if type(node) not in SAVED_NAMES:
            SAVED_NAMES[type(node)] = [n for n in dir(node) if n.startswith("_saved_")]
        for name in SAVED_NAMES[type(node)]:
            saved = getattr(node, name)
            if isinstance(saved, torch.Tensor):
                storage = saved.untyped_storage()
                if storage.data_ptr() not in skip:
                    storages[storage.data_ptr()] = storage.nbytes()  # each storage once
    return len(nodes), sum(storages.values())


CHUNKS, STEPS, BATCH, HIDDEN = 40, 8, 4, 16
inputs = torch.randn(CHUNKS, STEPS, BATCH, 3)
targets = 0.1 * inputs.sum(-1, keepdim=True).flatten(0, 1).cumsum(0).unflatten(0, (CHUNKS, STEPS))
cell, readout = nn.RNNCell(3, HIDDEN), nn.Linear(HIDDEN, 1)
start_state = {  # copies: state_dict() shares storage with the parameters
    name: {key: value.clone() for key, value in module.state_dict().items()}
    for name, module in (("cell", cell), ("readout", readout))
}
params = [*cell.parameters(), *readout.parameters()]
EXCLUDE = [*params, inputs, targets]  # storages that exist anyway


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
# Hidden state carried as it is: chunk 1 fails
# --------------------------------------------
#
# Chunk 1's backward continues through the hidden state into chunk 0's graph, which chunk 0's
# backward freed (:doc:`../docs/what-backward-frees`).

hidden = restart()
hidden, loss = run_chunk(hidden, 0)
loss.backward()
hidden, loss = run_chunk(hidden, 1)
try:
    loss.backward()
except RuntimeError as error:
    print(f"{type(error).__name__}: {str(error).partition(' (')[0]}")
    assert "graph a second time" in str(error) and "Specify retain_graph=True" in str(error)
else:
    raise AssertionError("no error")

# %%
# ``retain_graph=True`` in a training loop: another error
# -------------------------------------------------------
#
# The message suggests ``retain_graph=True``. With a step after each chunk, that swaps errors:
# chunk 0's graph saved the cell's weights, the step changed them in place, and chunk 1's backward
# walks chunk 0 again (:ref:`the in-place error <errors-inplace>`).

hidden = restart()
optimizer = torch.optim.SGD(params, lr=0.01)
hidden, loss = run_chunk(hidden, 0)
loss.backward(retain_graph=True)
optimizer.step()
hidden, loss = run_chunk(hidden, 1)
try:
    loss.backward(retain_graph=True)
except RuntimeError as error:
    print(f"{type(error).__name__}: {str(error).partition('. ')[0]}")
    assert "modified by an inplace operation" in str(error)
else:
    raise AssertionError("no error")

# %%
# Retained versus detached, chunk by chunk
# ----------------------------------------
#
# Without steps between chunks, ``retain_graph=True`` runs: that is ``"retain"``. ``"detach"``
# detaches at every chunk and steps after each, a truncated-BPTT loop whose steps are checked
# against each chunk unrolled alone, from where the check's own run of the previous chunk ended.
# For each chunk, its loss's ``graph_size`` before its backward:


def measure(mode, sizes=True):  # sizes=False: only the times
    hidden = restart()
    optimizer = torch.optim.SGD(params, lr=0.01)
    ends = [hidden]  # the reference's own carried state

    def window(step):
        end, loss = run_chunk(ends[-1], step)
        ends.append(end.detach())
        return loss

    checking = mode == "detach" and sizes
    nodes, held, seconds = [], [], []
    with (
        checked(optimizer, window, cell=cell, readout=readout)
        if checking
        else contextlib.nullcontext()
    ):
        for chunk in range(CHUNKS):
            began = time.perf_counter()
            start = hidden.detach() if mode == "detach" else hidden
            hidden, loss = run_chunk(start, chunk)
            forward = time.perf_counter() - began
            count, size = graph_size(loss, EXCLUDE) if sizes else (0, 0)  # not timed
            nodes.append(count)
            held.append(size)
            began = time.perf_counter()
            loss.backward(retain_graph=(mode == "retain"))
            seconds.append(forward + time.perf_counter() - began)
            if mode == "detach":
                optimizer.step()
                optimizer.zero_grad()
    return nodes, held, seconds


counts = {"retain": measure("retain")}
retained_grads = [p.grad.clone() for p in params]  # what the 40 retained backward calls added up
counts["detach"] = measure("detach")
for mode, (nodes, held, _) in counts.items():
    print(
        f"{mode}: nodes at chunks 1, 2, 40: {nodes[0]}, {nodes[1]}, {nodes[-1]}; "
        f"saved bytes: {held[0]}, {held[1]}, {held[-1]}"
    )

retain_nodes, retain_held, _ = counts["retain"]
detach_nodes, detach_held, _ = counts["detach"]
assert len(set(detach_nodes)) == 1 and len(set(detach_held)) == 1  # flat
node_steps = {b - a for a, b in pairwise(retain_nodes)}
byte_steps = {b - a for a, b in pairwise(retain_held)}
assert len(node_steps) == 1 and node_steps.pop() > 0  # the same growth every chunk
assert len(byte_steps) == 1 and byte_steps.pop() > 0
assert retain_nodes[0] == detach_nodes[0] and retain_held[0] == detach_held[0]

# %%
# Retained, every chunk adds the same nodes and bytes; detached, the size stays flat.
#
# What the retained calls computed
# --------------------------------
#
# Each chunk's backward went back to the start, so the 40 calls added up untruncated BPTT's
# gradient of the total loss; one backward of the summed losses gives it too, up to rounding.

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
# So ``retain_graph=True`` buys no truncation, at a cost that grows every chunk.
#
# Time per chunk
# --------------
#
# Each chunk's forward and backward, fastest of 2 runs on the machine that ran this; drawn, never
# asserted. The top panel: the bytes from above.


runs = {mode: [counts[mode][2], measure(mode, sizes=False)[2]] for mode in counts}
fastest = {mode: [1e3 * min(times) for times in zip(*runs[mode])] for mode in runs}

chunk_numbers = range(1, CHUNKS + 1)
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
    ylabel="ms per chunk\n(fastest of 2 runs)",
)
ax_bytes.legend()
fig.tight_layout()
plt.show()

# %%
# See also: :doc:`../docs/errors`, :doc:`../docs/what-it-costs`.
