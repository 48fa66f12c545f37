"""
nn.LSTM in chunks: detach h and c
=================================

The fix: ``h, c = h.detach(), c.detach()`` before each chunk of a stream (the window boundary),
and a reset to zeros for new streams. Without it, the second chunk's ``backward()`` fails with
"Trying to backward through the graph a second time", also when only ``h`` is detached: the cell
state ``c`` carries the graph too. ``retain_graph=True`` is no fix.

.. index:: LSTM, nn.LSTM, hidden state, cell state, h and c, truncated BPTT, language model,
   nn.GRU, repackage_hidden, detach hidden state, stateful RNN
"""

# %%
# Eight noisy sine waves of 400 steps stand in for a corpus cut into eight streams. The model
# reads 20 steps at a time (a chunk) and predicts each next value. ``checked``:
# :doc:`plot_how_examples_are_checked`.

import contextlib

import matplotlib.pyplot as plt
import numpy as np
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)  # tiny tensors


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


print(f"{STREAMS} streams, {N_CHUNKS} chunks of {CHUNK} steps")

# %%
# The state passed on as it is: chunk 2 fails
# -------------------------------------------
#
# The first loop readers write: chunk 2's backward continues through the state into chunk 1's
# graph, which chunk 1's backward freed.

model = Forecaster()
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
loss, state = chunk_loss(model, 0, None)
loss.backward()
optimizer.step()
loss, state = chunk_loss(model, 1, state)
try:
    loss.backward()
except RuntimeError as error:
    print(f"{type(error).__name__}: {str(error).partition(' (')[0]}")
    assert "graph a second time" in str(error) and "Specify retain_graph=True" in str(error)
else:
    raise AssertionError("no error")

# %%
# Detaching only ``h``: the same error
# ------------------------------------
#
# ``nn.LSTM``'s state is two tensors, ``h`` and the cell state ``c``, both from the previous
# chunk's graph:

model = Forecaster()
loss, (h, c) = chunk_loss(model, 0, None)
loss.backward()
print(f"h has a grad_fn: {h.grad_fn is not None}, c has a grad_fn: {c.grad_fn is not None}")
assert h.grad_fn is not None and c.grad_fn is not None
loss, (h, c) = chunk_loss(model, 1, (h.detach(), c))
try:
    loss.backward()
except RuntimeError as error:
    print(f"{type(error).__name__}: {str(error).partition(' (')[0]}")
    assert "graph a second time" in str(error)
else:
    raise AssertionError("no error")

# %%
# The state is a plain tuple, which has no ``.detach()``:

try:
    (h, c).detach()
except AttributeError as error:
    print(f"{type(error).__name__}: {str(error).partition('. ')[0]}")
    assert "'tuple' object has no attribute 'detach'" in str(error)
else:
    raise AssertionError("no error")

# %%
# ``retain_graph=True``, the message's suggestion, is no fix. Without a step between chunks it
# runs, and each backward walks back to the first chunk (:doc:`plot_truncated_bptt` measures
# that growth for an RNN cell). After a step, the next backward walks a kept graph whose saved
# weights the step changed: the :ref:`in-place modification error <errors-inplace>` (asserted,
# shown there).

model = Forecaster()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
loss, state = chunk_loss(model, 0, None)
loss.backward(retain_graph=True)
loss, state = chunk_loss(model, 1, state)
loss.backward(retain_graph=True)  # no step yet: runs
optimizer.step()
loss, state = chunk_loss(model, 2, state)
try:
    loss.backward(retain_graph=True)
except RuntimeError as error:
    assert "modified by an inplace operation" in str(error)
else:
    raise AssertionError("no error")

# %%
# The fix: detach ``(h, c)``, keep the values
# -------------------------------------------
#
# ``detach_state`` handles tuples (the word-language-model examples call theirs
# ``repackage_hidden``). Chunk 2 still *starts* where chunk 1 ended; only the gradient stops. The
# state is carried within a pass over the streams and reset to ``None`` (zeros) for a new pass;
# a second model resets it at every chunk. Each of the 120 updates is checked against its chunk
# unrolled alone, from where the check's own run of the previous chunk ended.


def detach_state(state):  # a tensor (nn.RNN, nn.GRU), a tuple of them (nn.LSTM), or None
    if state is None or isinstance(state, torch.Tensor):
        return None if state is None else state.detach()
    return type(state)(detach_state(part) for part in state)


def train(carry, passes=6, rnn=nn.LSTM):
    torch.manual_seed(1)
    model = Forecaster(rnn)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    losses, ends = [], [None]  # ends: the reference's own carried state

    def window(step):
        k = step % N_CHUNKS
        loss, end = chunk_loss(model, k, ends[-1] if carry and k else None)
        ends.append(detach_state(end))
        return loss

    with checked(optimizer, window, model=model):
        for _ in range(passes):
            state = None  # new sequences: start from zeros
            for k in range(N_CHUNKS):
                start = detach_state(state) if carry else None
                loss, state = chunk_loss(model, k, start)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                losses.append(loss.item())
    return model, losses


carried_model, carried = train(carry=True)
reset_model, reset = train(carry=False)
last_carried, last_reset = np.mean(carried[-N_CHUNKS:]), np.mean(reset[-N_CHUNKS:])
print(
    f"loss: first chunk {carried[0]:.3f}; last pass carried {last_carried:.4f}, reset {last_reset:.4f}"
)
assert last_carried < 0.1 * carried[0] and last_reset < 0.1 * reset[0]

# %%
# Both learn. They differ at the start of a chunk, where the reset model has seen one noisy
# value. Error by position in a chunk, over a pass under :class:`torch.no_grad` (no graph):


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
print(
    f"MSE at position 1: carried {carried_err[0]:.4f}, reset {reset_err[0]:.4f}; at 11-20: ", end=""
)
print(f"carried {carried_err[10:].mean():.4f}, reset {reset_err[10:].mean():.4f}")
assert reset_err[0] > 2 * carried_err[0]
assert reset_err[10:].mean() < 2 * carried_err[10:].mean()

CARRIED, RESET = "#1a9c6b", "#808080"
fig, (ax_loss, ax_pos) = plt.subplots(2, 1, figsize=(4.2, 6.4), layout="constrained")
updates = range(1, len(carried) + 1)
ax_loss.plot(updates, carried, color=CARRIED, label="state carried")
ax_loss.plot(updates, reset, color=RESET, label="state reset", alpha=0.8)
ax_loss.set(xlabel="update (one per chunk)", ylabel="training MSE", title="Both loops train")
ax_loss.set_yscale("log")
ax_loss.set_yticks([0.02, 0.05, 0.1, 0.2, 0.5], ["0.02", "0.05", "0.1", "0.2", "0.5"])
ax_loss.yaxis.set_minor_formatter(plt.NullFormatter())
ax_loss.legend()
positions = range(1, CHUNK + 1)
ax_pos.plot(positions, carried_err, color=CARRIED, marker="o", markersize=3, label="carried")
ax_pos.plot(positions, reset_err, color=RESET, marker="o", markersize=3, label="reset")
ax_pos.set(xlabel="position in the chunk", ylabel="evaluation MSE", title="Reset: worse at first")
ax_pos.legend()
plt.show()

# %%
# ``nn.GRU``: one tensor, same rule
# ---------------------------------
#
# ``nn.GRU`` and ``nn.RNN`` return one state tensor: ``h = h.detach()`` is the whole fix, checked
# over one pass.

gru, _ = train(carry=True, passes=1, rnn=nn.GRU)
state = gru(inputs[:CHUNK])[1]
print(f"GRU state: one {type(state).__name__} of shape {tuple(state.shape)}")
assert isinstance(state, torch.Tensor)

# %%
# See also: the :doc:`error reference <../docs/errors>`. Reported in:
# `yunjey/pytorch-tutorial#90 <https://github.com/yunjey/pytorch-tutorial/issues/90>`__,
# `MorvanZhou/PyTorch-Tutorial#57 <https://github.com/MorvanZhou/PyTorch-Tutorial/issues/57>`__
# (``retain_graph=True`` tried). IC3Net's trainer detaches both ``h`` and ``c`` every
# ``detach_gap`` steps of an episode and calls backward once per batch, so there the detach only
# truncates; `IC3Net/IC3Net#7 <https://github.com/IC3Net/IC3Net/issues/7>`__ asks why.
