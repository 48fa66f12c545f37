"""
Evaluating under no_grad between training steps
===============================================

Compute the training loss with grad mode on and call ``backward()`` on it; compute the evaluation
loss under ``torch.no_grad()`` (after ``model.eval()``), read it with ``.item()``, and switch back
with ``model.train()`` before the next step. The evaluation loss has no graph: its
``backward()`` raises "element 0 of tensors does not require grad", and silenced with
``requires_grad_()`` it runs and trains nothing. Where ``backward()`` is called does not matter:
inside a ``no_grad`` block it walks the graph recorded before it.

.. index:: evaluation under no_grad, validation loss, validation loop, evaluate between steps,
   model.eval(), model.train(), val_loss.backward(), element 0 of tensors does not require grad,
   loss.requires_grad = True, backward inside no_grad, BatchNorm eval mode
"""

# %%
# A small network with :class:`torch.nn.BatchNorm1d` fits a noisy non-linear target, one batch
# per step; a held-out set is evaluated before each step. ``evaluate`` is the usual evaluation:
# eval mode (running statistics), no graph.

import contextlib

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)  # tiny tensors
STEPS, BATCH = 30, 32
direction = torch.randn(4, 1) / 2
x, x_val = torch.randn(STEPS, BATCH, 4), torch.randn(256, 4)
y = torch.sin(x @ direction) + 0.1 * torch.randn(STEPS, BATCH, 1)
y_val = torch.sin(x_val @ direction)


def make_model():
    torch.manual_seed(1)  # every variant starts from the same weights
    return nn.Sequential(nn.Linear(4, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 1))


def evaluate(model):
    model.eval()  # BatchNorm: running statistics
    with torch.no_grad():  # nothing recorded: no graph
        return F.mse_loss(model(x_val), y_val)


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


# %%
# Evaluate before each step, train with grad mode on: trains right
# ----------------------------------------------------------------
#
# The loop's 30 steps are checked (:doc:`plot_how_examples_are_checked`) against the network's
# equations written out, with the batch's own statistics as in training mode.


def reference(model):
    first, norm, _, last = model

    def loss(step):
        h = x[step] @ first.weight.T + first.bias
        h = (h - h.mean(0)) / (h.var(0, unbiased=False) + norm.eps).sqrt() * norm.weight + norm.bias
        return ((h.clamp_min(0) @ last.weight.T + last.bias - y[step]) ** 2).mean()

    return loss


def train(mode="right", check=True):
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    val_losses = []
    with checked(optimizer, reference(model), model=model) if check else contextlib.nullcontext():
        for step in range(STEPS):
            val_loss = evaluate(model)
            val_losses.append(val_loss.item())
            model.train()  # back to batch statistics
            optimizer.zero_grad()
            loss = F.mse_loss(model(x[step]), y[step])  # grad mode on: recorded
            if mode == "right":
                loss.backward()
            elif mode == "backward inside no_grad":  # the graph was recorded above
                with torch.no_grad():
                    loss.backward()
            else:  # "silenced": val_loss.backward() raised; requires_grad_() silenced it
                val_loss.requires_grad_().backward()
            optimizer.step()
    return model, val_losses + [evaluate(model).item()]


model, right = train()
print(f"validation loss: {right[0]:.3f} before step 0, {right[-1]:.3f} after step {STEPS - 1}")
assert right[-1] < 0.6 * right[0]
assert evaluate(model).grad_fn is None and not model.training  # evaluate() leaves eval mode

# %%
# ``backward()`` on the evaluation loss: "element 0"
# --------------------------------------------------
#
# Calling ``val_loss.backward()``, outside the block or in it, finds no graph: nothing was
# recorded under ``no_grad`` (:ref:`errors-no-grad-fn`). ``retain_graph=True`` cannot help.

val_loss = evaluate(make_model())
try:
    val_loss.backward()
except RuntimeError as error:
    print(f"{type(error).__name__}: {error}")
    assert "element 0 of tensors does not require grad and does not have a grad_fn" in str(error)
else:
    raise AssertionError("backward() on a loss computed under no_grad was expected to fail")

# %%
# Silenced with ``requires_grad_()``: runs, trains nothing
# --------------------------------------------------------
#
# ``val_loss.requires_grad_()`` (or ``val_loss.requires_grad = True``) makes the loss a leaf of
# its own: backward runs, and no gradient reaches a parameter. The check stops it at step 0.
# Unchecked, no weight moves; the validation loss changes only as BatchNorm's running statistics
# follow the training batches.

try:
    train("silenced")
except AssertionError as error:
    print(f"{type(error).__name__}: {error}")
    assert str(error) == "step 0: model.0.weight got no gradient"
else:
    raise AssertionError("the check was expected to find no gradient")
silenced_model, silenced = train("silenced", check=False)
start = make_model()
assert all(torch.equal(p, q) for p, q in zip(silenced_model.parameters(), start.parameters()))
print(f"silenced: validation loss {silenced[0]:.3f} before step 0, {silenced[-1]:.3f} at the end")

# %%
# ``backward()`` inside ``no_grad``: the same training
# ----------------------------------------------------
#
# ``no_grad`` only stops the recording of new operations. The training loss was recorded before
# the block, so its backward there computes the same gradients, and the run is the same, step for
# step (:ref:`requires-grad-backward-in-no-grad`).

moved_model, moved = train("backward inside no_grad")
assert moved == right
same = zip(moved_model.state_dict().values(), model.state_dict().values())
assert all(torch.equal(a, b) for a, b in same)  # weights and running statistics

# %%
# The validation loss before each step:

fig, ax = plt.subplots(figsize=(4.2, 2.8))
ax.plot(right, color="#1a9c6b", label="loss.backward()")
ax.plot(silenced, color="#8a63d2", linestyle="--", label="val_loss.requires_grad_().backward()")
ax.set(xlabel="step", ylabel="validation loss (MSE)", title="Evaluated under no_grad")
ax.legend()
fig.tight_layout()
plt.show()

# %%
# See also: :doc:`../docs/neighbouring-errors`, :doc:`../docs/lost-leaf`.
