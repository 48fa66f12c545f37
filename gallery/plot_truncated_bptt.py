"""
Truncated BPTT: detach the hidden state, don't retain
=====================================================

The fix: detach the carried state at the start of each chunk (the window boundary),
``hidden = hidden.detach()``, for ``nn.LSTM`` both tensors, ``h, c = h.detach(), c.detach()``,
and start new sequences from zeros. Carried as it is, the state makes the second chunk's backward
fail on the first chunk's freed graph, also when only ``h`` is detached. ``retain_graph=True``
runs here only without an optimizer step between chunks (after one: the in-place error, the
step having changed weights the kept graph saved), and then every backward walks all earlier
chunks: nodes, saved bytes and time grow every chunk.

.. index:: truncated BPTT, truncated backpropagation through time, RNN, recurrent network,
   hidden state, detach hidden state, LSTM, nn.LSTM, cell state, h and c, nn.GRU,
   repackage_hidden, stateful RNN, language model
"""

# %%
# A :class:`torch.nn.RNNCell` reads 40 chunks of 8 steps; a readout predicts a running sum of the
# inputs. ``graph_size(loss)`` counts the nodes a backward from ``loss`` would visit and the bytes
# of the distinct storages they hold as saved tensors (``_saved_*``), parameters and data
# excluded.

import contextlib
import time
from itertools import pairwise

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

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
start_state = [{k: v.clone() for k, v in m.state_dict().items()} for m in (cell, readout)]
params = [*cell.parameters(), *readout.parameters()]
EXCLUDE = [*params, inputs, targets]  # storages that exist anyway


def restart():
    cell.load_state_dict(start_state[0])
    readout.load_state_dict(start_state[1])
    for p in params:
        p.grad = None
    return torch.zeros(BATCH, HIDDEN)


def run_chunk(hidden, chunk):
    loss = 0
    for step in range(STEPS):
        hidden = cell(inputs[chunk, step], hidden)
        loss = loss + F.mse_loss(readout(hidden), targets[chunk, step])
    return hidden, loss / STEPS


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
    raise AssertionError("chunk 1's backward was expected to fail")

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
    print(f"{type(error).__name__}: {str(error).partition(':')[0]}")
    assert "modified by an inplace operation" in str(error)
else:
    raise AssertionError("chunk 1's backward was expected to fail")

# %%
# Retained versus detached, chunk by chunk
# ----------------------------------------
#
# Without steps between chunks, ``retain_graph=True`` runs: that is ``"retain"``. ``"detach"``
# detaches at every chunk and steps after each, a truncated-BPTT loop whose 40 steps are checked
# (:doc:`plot_how_examples_are_checked`) against the RNN's equations written out, run from where
# the reference's own previous chunk ended. For each chunk, its loss's ``graph_size`` before its
# backward, and the time of its forward and backward passes:


def measure(mode):
    hidden = restart()
    optimizer = torch.optim.SGD(params, lr=0.01)
    ends = [hidden]  # the reference's own carried state

    def window(chunk):
        h, loss = ends[-1], 0
        for x, y in zip(inputs[chunk], targets[chunk]):
            h = torch.tanh(
                x @ cell.weight_ih.T + cell.bias_ih + h @ cell.weight_hh.T + cell.bias_hh
            )
            loss = loss + ((h @ readout.weight.T + readout.bias - y) ** 2).mean()
        ends.append(h.detach())
        return loss / STEPS

    nodes, held, seconds = [], [], []
    checking = checked(optimizer, window, cell=cell, readout=readout)
    with checking if mode == "detach" else contextlib.nullcontext():
        for chunk in range(CHUNKS):
            began = time.perf_counter()
            start = hidden.detach() if mode == "detach" else hidden
            hidden, loss = run_chunk(start, chunk)
            forward = time.perf_counter() - began
            count, size = graph_size(loss, EXCLUDE)  # not timed
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

(retain_nodes, retain_held, _), (detach_nodes, detach_held, _) = counts.values()
assert len(set(detach_nodes)) == 1 and len(set(detach_held)) == 1  # flat
node_steps = {b - a for a, b in pairwise(retain_nodes)}
byte_steps = {b - a for a, b in pairwise(retain_held)}
assert len(node_steps) == 1 and node_steps.pop() > 0  # the same growth every chunk
assert len(byte_steps) == 1 and byte_steps.pop() > 0
assert retain_nodes[0] == detach_nodes[0] and retain_held[0] == detach_held[0]

# %%
# Those bytes, and the times on the machine that ran this (drawn, never asserted):

chunk_numbers = range(1, CHUNKS + 1)
fig, (ax_bytes, ax_time) = plt.subplots(2, 1, figsize=(4.2, 5.6), sharex=True)
for mode, color, label in (
    ("retain", "#8a63d2", "retain_graph=True"),
    ("detach", "#1a9c6b", "hidden.detach()"),
):
    ax_bytes.plot(chunk_numbers, [b / 1024 for b in counts[mode][1]], color=color, label=label)
    ax_time.plot(chunk_numbers, [1e3 * t for t in counts[mode][2]], color=color, label=label)
ax_bytes.set(
    title="Retaining holds every chunk's graph", ylabel="KiB of saved tensors\nwhen backward starts"
)
ax_time.set(title="and each backward pass gets slower", xlabel="chunk", ylabel="ms per chunk")
ax_bytes.legend()
fig.tight_layout()
plt.show()

# %%
# The 40 retained calls, each back to the start, added up untruncated BPTT's gradient: one
# backward of the summed losses gives it too. ``retain_graph=True`` buys no truncation.

hidden, total = restart(), 0
for chunk in range(CHUNKS):
    hidden, loss = run_chunk(hidden, chunk)
    total = total + loss
total.backward()
assert all(torch.allclose(p.grad, g, rtol=1e-4, atol=1e-6) for p, g in zip(params, retained_grads))

# %%
# ``nn.LSTM``: detach ``h`` and ``c``
# -----------------------------------
#
# Eight noisy sine waves of 160 steps stand in for a corpus cut into eight streams; a model reads
# 10 steps at a time and predicts each next value. ``nn.LSTM``'s state is two tensors, ``h`` and
# the cell state ``c``, both from the previous chunk's graph. Detaching only ``h``, the next
# chunk's backward still reaches the freed graph through ``c``:

STREAMS, LENGTH, CHUNK = 8, 160, 10
N_CHUNKS = LENGTH // CHUNK
t = torch.arange(LENGTH + 1.0)[:, None]
wave = torch.sin(2 * np.pi * t / torch.linspace(18, 30, STREAMS) + 2 * np.pi * torch.rand(STREAMS))
wave = (wave + 0.1 * torch.randn(LENGTH + 1, STREAMS))[:, :, None]  # (time, stream, feature)


class Forecaster(nn.Module):
    def __init__(self, rnn=nn.LSTM):
        super().__init__()
        self.rnn, self.head = rnn(1, HIDDEN), nn.Linear(HIDDEN, 1)

    def forward(self, x, state=None):
        out, state = self.rnn(x, state)
        return self.head(out), state


def chunk_loss(model, k, state):
    rows = slice(k * CHUNK, (k + 1) * CHUNK)
    prediction, state = model(wave[rows], state)
    return F.mse_loss(prediction, wave[1:][rows]), state


model = Forecaster()
loss, (h, c) = chunk_loss(model, 0, None)
loss.backward()
loss, (h, c) = chunk_loss(model, 1, (h.detach(), c))
try:
    loss.backward()
except RuntimeError as error:
    print(f"{type(error).__name__}: {str(error).partition(' (')[0]}")
    assert "graph a second time" in str(error)
else:
    raise AssertionError("the second chunk's backward was expected to fail")

# %%
# The state is a tuple, which has no ``.detach()``; ``nn.GRU`` and ``nn.RNN`` return one tensor,
# like the cell above (all asserted). ``detach_state`` handles both (the word-language-model
# examples call theirs ``repackage_hidden``). The next chunk still *starts* where the last one
# ended; only the gradient stops. The state is carried through each pass over the streams, from
# zeros at its start. Each update is checked against the chunk's loss from the LSTM's equations
# written out, from the reference's own carried state.


def detach_state(state):  # a tensor (nn.RNN, nn.GRU), a tuple of them (nn.LSTM), or None
    if state is None or isinstance(state, torch.Tensor):
        return None if state is None else state.detach()
    return type(state)(detach_state(part) for part in state)


assert not hasattr((h, c), "detach")
assert all(isinstance(rnn(1, HIDDEN)(wave[:CHUNK])[1], torch.Tensor) for rnn in (nn.GRU, nn.RNN))


def lstm_reference(model):
    ends = []  # the reference's own carried (h, c)

    def window(step):
        k, lstm = step % N_CHUNKS, model.rnn
        h, c = ends[-1] if k else (torch.zeros(STREAMS, HIDDEN),) * 2
        loss = 0
        for x, y in zip(wave[k * CHUNK : (k + 1) * CHUNK], wave[k * CHUNK + 1 :]):
            gates = (
                x @ lstm.weight_ih_l0.T
                + h @ lstm.weight_hh_l0.T
                + lstm.bias_ih_l0
                + lstm.bias_hh_l0
            )
            i, f, g, o = gates.chunk(4, dim=1)
            c = f.sigmoid() * c + i.sigmoid() * g.tanh()
            h = o.sigmoid() * c.tanh()
            loss = loss + ((h @ model.head.weight.T + model.head.bias - y) ** 2).mean()
        ends.append((h.detach(), c.detach()))
        return loss / CHUNK

    return window


torch.manual_seed(1)
model = Forecaster()
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
losses = []
with checked(optimizer, lstm_reference(model), model=model):
    for _ in range(4):
        state = None  # new sequences: start from zeros
        for k in range(N_CHUNKS):
            loss, state = chunk_loss(model, k, detach_state(state))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
first, last = np.mean(losses[:N_CHUNKS]), np.mean(losses[-N_CHUNKS:])
print(f"mean chunk loss: first pass {first:.3f}, fourth pass {last:.3f}")
assert last < 0.3 * first

# %%
# See also: :doc:`../docs/errors`, :doc:`../docs/what-it-costs`. Reported in:
# `yunjey/pytorch-tutorial#90 <https://github.com/yunjey/pytorch-tutorial/issues/90>`__,
# `MorvanZhou/PyTorch-Tutorial#57 <https://github.com/MorvanZhou/PyTorch-Tutorial/issues/57>`__
# (``retain_graph=True`` tried), `IC3Net/IC3Net#7 <https://github.com/IC3Net/IC3Net/issues/7>`__
# (why detach ``h`` and ``c`` every ``detach_gap`` steps: to truncate).
