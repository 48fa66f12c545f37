"""
An nn.LSTM language-model loop: detach both h and c between chunks
==================================================================

A language-model style training loop reads long streams in chunks and hands the LSTM's state
``(h, c)`` from one chunk to the next. The second chunk's ``backward()`` then fails with
"Trying to backward through the graph a second time", and it still fails when only ``h`` is
detached, because the cell state ``c`` carries the previous chunk's graph as well.
``retain_graph=True`` makes the error go away only by backpropagating into every earlier chunk,
with a graph that grows chunk after chunk. The fix is one line, ``h, c = h.detach(), c.detach()``
(or a helper that detaches whatever state the model returns), and the state itself is kept
across the chunks of a stream and reset when a new stream starts.

.. index:: LSTM, nn.LSTM, hidden state, cell state, h and c, truncated BPTT, language model,
   nn.GRU, repackage_hidden, detach hidden state, stateful RNN
"""

# %%
# Streams, a model, and a way to measure a graph
# ----------------------------------------------
#
# Eight noisy sine waves of 400 steps each, with different phases and periods, stand in for a
# text corpus cut into eight parallel streams. The model reads 20 steps at a time (one chunk)
# and predicts the next value at every step. ``graph_size`` walks the graph a loss would
# backpropagate through and adds up the tensors its nodes saved for backward (each storage once;
# parameters and the data left out, since they exist anyway): the memory the graph holds on to.

import matplotlib.pyplot as plt
import numpy as np
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)  # tiny tensors: one thread is fastest

STREAMS, LENGTH, CHUNK, HIDDEN = 8, 400, 20, 16
N_CHUNKS = LENGTH // CHUNK
steps = torch.arange(LENGTH + 1, dtype=torch.float32)
period = torch.linspace(18, 30, STREAMS)
phase = torch.rand(STREAMS) * 2 * np.pi
noise = 0.1 * torch.randn(LENGTH + 1, STREAMS)
wave = torch.sin(2 * np.pi * steps[:, None] / period + phase) + noise
inputs, targets = wave[:-1, :, None], wave[1:, :, None]  # (time, stream, feature)


class Forecaster(nn.Module):
    def __init__(self, rnn=nn.LSTM):
        super().__init__()
        self.rnn = rnn(1, HIDDEN)
        self.head = nn.Linear(HIDDEN, 1)

    def forward(self, x, state=None):
        out, state = self.rnn(x, state)
        return self.head(out), state


def chunk_loss(model, k, state):
    rows = slice(k * CHUNK, (k + 1) * CHUNK)
    prediction, state = model(inputs[rows], state)
    return nn.functional.mse_loss(prediction, targets[rows]), state


def graph_size(loss, exclude):
    """Nodes a backward from ``loss`` would visit, and bytes of the tensors they saved."""
    skip = {t.untyped_storage().data_ptr() for t in exclude}
    nodes, stack, storages = set(), [loss.grad_fn], {}
    while stack:
        node = stack.pop()
        if node is None or node in nodes:
            continue
        nodes.add(node)
        stack.extend(parent for parent, _ in node.next_functions)
        for name in dir(node):
            if name.startswith("_saved_"):
                saved = getattr(node, name)
                for t in saved if isinstance(saved, (tuple, list)) else [saved]:
                    if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in skip:
                        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    return len(nodes), sum(storages.values())


print(f"{STREAMS} streams of {LENGTH} steps, read in {N_CHUNKS} chunks of {CHUNK} steps")

# %%
# The state passed on as it is: chunk 2 fails
# -------------------------------------------
#
# This is the loop readers write first (as in
# `yunjey/pytorch-tutorial#90 <https://github.com/yunjey/pytorch-tutorial/issues/90>`__ and
# `sgadgil6/cnslab_fmri#4 <https://github.com/sgadgil6/cnslab_fmri/issues/4>`__): the state that
# leaves chunk 1 goes into chunk 2. Chunk 2's loss depends on it, so chunk 2's backward continues
# into chunk 1's graph, which chunk 1's backward has already freed.

model = Forecaster()
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
loss, state = chunk_loss(model, 0, None)
loss.backward()
optimizer.step()
loss, state = chunk_loss(model, 1, state)
try:
    loss.backward()
except RuntimeError as error:
    print(f"{type(error).__name__}: {error}")
    assert "backward through the graph a second time" in str(error)
else:
    raise AssertionError("chunk 2's backward into chunk 1's freed graph was expected to fail")

# %%
# Detaching only ``h``: the same error
# ------------------------------------
#
# ``nn.LSTM`` returns its state as a tuple of two tensors, the hidden state ``h`` and the cell
# state ``c``, and both come out of the previous chunk's graph. Detaching ``h`` alone leaves
# ``c`` attached (the question asked in
# `IC3Net/IC3Net#7 <https://github.com/IC3Net/IC3Net/issues/7>`__ and
# `dpressel/dliss-tutorial#1 <https://github.com/dpressel/dliss-tutorial/issues/1>`__).

model = Forecaster()
loss, (h, c) = chunk_loss(model, 0, None)
loss.backward()
print(f"h has a grad_fn: {h.grad_fn is not None}, c has a grad_fn: {c.grad_fn is not None}")
assert h.grad_fn is not None and c.grad_fn is not None
loss, (h, c) = chunk_loss(model, 1, (h.detach(), c))
try:
    loss.backward()
except RuntimeError as error:
    print(f"{type(error).__name__}: {error}")
    assert "backward through the graph a second time" in str(error)
else:
    raise AssertionError("the cell state c was expected to lead back into the freed graph")

# %%
# The state itself is a plain tuple, which has no ``.detach()``, so each of its tensors has to
# be detached on its own:

try:
    (h, c).detach()
except AttributeError as error:
    print(f"{type(error).__name__}: {error}")
    assert "'tuple' object has no attribute 'detach'" in str(error)
else:
    raise AssertionError("a tuple was not expected to have .detach()")

# %%
# ``retain_graph=True``: the error changes, or the graph grows
# ------------------------------------------------------------
#
# The message suggests ``retain_graph=True`` (the answer tried in
# `MorvanZhou/PyTorch-Tutorial#57 <https://github.com/MorvanZhou/PyTorch-Tutorial/issues/57>`__;
# in `sgadgil6/cnslab_fmri#4 <https://github.com/sgadgil6/cnslab_fmri/issues/4>`__ it ran out
# of memory). With an optimizer step after each chunk, the kept graph of chunk 1 saved the
# LSTM's weights, the step changed them in place, and chunk 2's backward, which walks through
# chunk 1 again, notices:

model = Forecaster()
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
loss, state = chunk_loss(model, 0, None)
loss.backward(retain_graph=True)
optimizer.step()
loss, state = chunk_loss(model, 1, state)
try:
    loss.backward(retain_graph=True)
except RuntimeError as error:
    print(f"{type(error).__name__}: {error}")
    assert "modified by an inplace operation" in str(error)
else:
    raise AssertionError("backward through weights changed in place was expected to fail")

# %%
# Without steps in between (gradients accumulated over the whole stream), it runs, and the cost
# shows. The loop below starts from a state ``(h0, c0)`` that requires grad, so one can see how
# far back each backward reaches: a hook on ``h0`` counts the backward calls that get all the
# way back to the start of chunk 1. ``"retain"`` passes the state on as it is
# and calls ``backward(retain_graph=True)``; ``"detach"`` detaches both tensors of the state
# before each chunk.


def detach_state(state):
    """Detach an RNN state: a tensor (nn.RNN, nn.GRU), a tuple of them (nn.LSTM), or None."""
    if state is None or isinstance(state, torch.Tensor):
        return None if state is None else state.detach()
    return type(state)(detach_state(part) for part in state)


def measure(mode):
    model = Forecaster()
    params = list(model.parameters())
    h0 = torch.zeros(1, STREAMS, HIDDEN, requires_grad=True)
    reached = []  # one entry per backward call that got as far as h0
    h0.register_hook(lambda grad: reached.append(True))
    state = (h0, torch.zeros(1, STREAMS, HIDDEN, requires_grad=True))
    sizes = []
    for k in range(N_CHUNKS):
        if mode == "detach" and k > 0:
            state = detach_state(state)
        loss, state = chunk_loss(model, k, state)
        sizes.append(graph_size(loss, [*params, wave]))
        loss.backward(retain_graph=(mode == "retain"))
    return sizes, len(reached)


runs = {mode: measure(mode) for mode in ("retain", "detach")}
for mode, (sizes, reached) in runs.items():
    print(
        f"{mode}: nodes at chunks 1, 2, {N_CHUNKS}: {sizes[0][0]}, {sizes[1][0]}, {sizes[-1][0]}; "
        f"KiB saved: {sizes[0][1] / 1024:.1f}, {sizes[1][1] / 1024:.1f}, {sizes[-1][1] / 1024:.1f}; "
        f"backward calls that reached h0: {reached} of {N_CHUNKS}"
    )
retain_sizes, retain_reached = runs["retain"]
detach_sizes, detach_reached = runs["detach"]
growth = {(b[0] - a[0], b[1] - a[1]) for a, b in zip(retain_sizes, retain_sizes[1:])}
assert len(growth) == 1 and min(growth.pop()) > 0  # the same growth at every chunk
assert len(set(detach_sizes[1:])) == 1  # every chunk after the first: the same graph
assert detach_sizes[0][1] == detach_sizes[1][1]
assert retain_sizes[-1][1] > 10 * detach_sizes[-1][1]
assert retain_reached == N_CHUNKS and detach_reached == 1

# %%
# With the retained graph every chunk adds the same amount, and chunk 20's backward walks all
# 20 chunks: that is full backpropagation through time, paid again at every chunk, not
# truncation. With the detached state, each chunk's graph covers that chunk only and holds the
# same bytes (chunk 1 has a few more nodes: the ones that accumulate into ``h0`` and ``c0``), and
# only chunk 1's backward reaches the initial state. On this CPU build of torch, most of a
# chunk's bytes are the workspace the fused LSTM kernel saves for its backward.
#
# The fix in the training loop: detach ``(h, c)``, keep the values
# ----------------------------------------------------------------
#
# ``detach_state`` is the tuple-aware helper (the word-language-model examples call theirs
# ``repackage_hidden``). Detaching keeps the values, so chunk 2 still *starts* where chunk 1
# ended; only the gradient stops at the boundary. Within one pass over the streams the state is
# carried from chunk to chunk; a new pass starts new sequences, so the state is reset to
# ``None`` (zeros). A second model, for comparison, resets the state at every chunk.


def train(carry, passes=6, seed=1):
    torch.manual_seed(seed)
    model = Forecaster()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for _ in range(passes):
        state = None  # new sequences: start from zeros
        for k in range(N_CHUNKS):
            state = detach_state(state) if carry else None
            loss, state = chunk_loss(model, k, state)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return model, losses


carried_model, carried = train(carry=True)
reset_model, reset = train(carry=False)
last_pass = {"carried": np.mean(carried[-N_CHUNKS:]), "reset": np.mean(reset[-N_CHUNKS:])}
print(f"carried state: first chunk's loss {carried[0]:.3f}, last pass {last_pass['carried']:.4f}")
print(f"reset per chunk: last pass {last_pass['reset']:.4f}")
assert last_pass["carried"] < 0.1 * carried[0]

# %%
# Both loops run without an error and learn. Where they differ is at the start of each chunk:
# the reset model sees one noisy value and must guess whether the wave is rising or falling. The
# mean squared error by position inside a chunk, over one evaluation pass with no gradients:


@torch.no_grad()
def error_by_position(model, carry):
    errors, state = torch.zeros(CHUNK), None
    for k in range(N_CHUNKS):
        state = state if carry else None
        rows = slice(k * CHUNK, (k + 1) * CHUNK)
        prediction, state = model(inputs[rows], state)
        errors += ((prediction - targets[rows]) ** 2).mean(dim=(1, 2)) / N_CHUNKS
    return errors


carried_err = error_by_position(carried_model, carry=True)
reset_err = error_by_position(reset_model, carry=False)
print(f"MSE at chunk position 1: carried {carried_err[0]:.4f}, reset {reset_err[0]:.4f}")
print(f"MSE at positions 11-20: carried {carried_err[10:].mean():.4f}, ", end="")
print(f"reset {reset_err[10:].mean():.4f}")
assert reset_err[0] > 2 * carried_err[0]
assert reset_err[10:].mean() < 2 * carried_err[10:].mean()

# %%
# So: carry the (detached) state when the next batch continues the same streams, as in a
# language model reading a corpus in order; reset it when a batch holds new, independent
# sequences. A reset state needs no detach, because it has no history. In evaluation under
# :class:`torch.no_grad`, no graph is built at all, so nothing has to be detached there either.
#
# ``nn.GRU``: one tensor, same rule
# ---------------------------------
#
# ``nn.GRU`` (and ``nn.RNN``) return a single state tensor, so ``h = h.detach()`` is the whole
# fix there; ``detach_state`` handles both shapes of state.

gru = Forecaster(rnn=nn.GRU)
state = None
for k in range(3):
    state = detach_state(state)
    loss, state = chunk_loss(gru, k, state)
    loss.backward()
print(f"GRU state: one {type(state).__name__} of shape {tuple(state.shape)}; 3 chunks ran")
assert isinstance(state, torch.Tensor)

# %%
# Graph size and training loss, chunk by chunk
# --------------------------------------------

fig, (ax_graph, ax_loss) = plt.subplots(2, 1, figsize=(4.2, 6.4), layout="constrained")
chunk_numbers = range(1, N_CHUNKS + 1)
for mode, colour, label in (
    ("retain", "#8a63d2", "retain_graph=True"),
    ("detach", "#1a9c6b", "detach (h, c)"),
):
    ax_graph.plot(chunk_numbers, [b / 1024 for _, b in runs[mode][0]], color=colour, label=label)
ax_graph.set(xlabel="chunk", ylabel="saved tensors held (KiB)", title="Graph per backward")
ax_graph.legend()
updates = range(1, len(carried) + 1)
ax_loss.plot(updates, carried, color="#1a9c6b", label="state carried")
ax_loss.plot(updates, reset, color="#808080", label="state reset", alpha=0.8)
ax_loss.set(xlabel="update (one per chunk)", ylabel="training MSE", title="Fixed loop trains")
ax_loss.set_yscale("log")
ax_loss.set_yticks([0.02, 0.05, 0.1, 0.2, 0.5], ["0.02", "0.05", "0.1", "0.2", "0.5"])
ax_loss.yaxis.set_minor_formatter(plt.NullFormatter())
ax_loss.legend()
fig.suptitle("retain_graph: the graph grows\nevery chunk; detached (h, c): flat")
plt.show()

# %%
# What to take away
# -----------------
#
# * ``nn.LSTM``'s state is two tensors, ``(h, c)``, and both carry the previous chunk's graph:
#   detach both, ``h, c = h.detach(), c.detach()``, or use a helper such as ``detach_state``.
# * ``retain_graph=True`` is the wrong fix here: with optimizer steps it fails with an in-place
#   modification error; without them every backward walks back to the first chunk, and the
#   graph, its memory and its time grow with every chunk.
# * Carry the detached state across chunks of the same streams; reset it for new sequences.
# * :doc:`../docs/errors` lists this cause among the others, and
#   ``plot_truncated_bptt.py`` in this gallery measures the same growth (and the time it
#   costs) for an ``RNNCell``.
