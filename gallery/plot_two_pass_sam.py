"""
SAM: a second forward pass
==========================

The fix: take SAM's second gradient from a second forward pass at the perturbed weights; each
graph is used once, with no ``retain_graph``. Backpropagating the first loss again with
``retain_graph=True`` gives the old gradient unchanged, or an in-place error, or, after changes
through ``.data``, a silently wrong mixture.

.. index:: SAM, sharpness-aware minimization, two-pass optimizer, optimizer step between backward passes
"""

# %%
# SAM moves the weights by ``rho * g / ‖g‖``, ``g`` the gradient at the current weights (plus
# 1e-12 against a zero gradient, as in ``davda54/sam``); ``move`` does it in place.

import contextlib
import copy

import torch
from torch import nn
from torch.autograd.graph import saved_tensors_hooks
from torch.func import functional_call

torch.manual_seed(0)
torch.set_num_threads(1)  # tiny tensors
RHO = 0.05


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


def ascent_direction(grads):
    norm = torch.linalg.vector_norm(torch.cat([g.flatten() for g in grads]))
    return [RHO * g / (norm + 1e-12) for g in grads]


def move(params, steps, sign=1.0):
    with torch.no_grad():
        for param, step in zip(params, steps):
            param.add_(sign * step)


def saved_params(model, compute):  # names of the parameters compute() saves for backward
    saved = []
    with saved_tensors_hooks(
        lambda t: saved.append(t.untyped_storage().data_ptr()) or t, lambda t: t
    ):
        compute()
    return [n for n, p in model.named_parameters() if p.untyped_storage().data_ptr() in saved]


def same(first, second):
    return all(torch.equal(a, b) for a, b in zip(first, second))


def mse(model, x, y):
    return ((model(x) - y) ** 2).mean()


# %%
# Reusing the old loss: the old gradient
# --------------------------------------
#
# Backpropagate a linear regression's loss keeping the graph, perturb the weights, then
# backpropagate the *same* loss again:

features = torch.randn(64, 3)
targets = features @ torch.tensor([[1.5], [-2.0], [0.5]]) + 0.1 * torch.randn(64, 1)
linear = nn.Linear(3, 1)
params = list(linear.parameters())
loss = mse(linear, features, targets)
first = torch.autograd.grad(loss, params, retain_graph=True)
move(params, ascent_direction(first))
again = torch.autograd.grad(loss, params)  # the first forward's loss, retained graph
fresh = torch.autograd.grad(mse(linear, features, targets), params)  # a new forward
saved = saved_params(linear, lambda: mse(linear, features, targets))
print(
    f"the first gradient again: reused loss {same(again, first)}, new forward {same(fresh, first)}"
)
print(f"parameters the forward saved for backward: {saved}")
assert same(again, first) and not same(fresh, first) and saved == []

# %%
# No error: the "perturbed" gradient is the old one, and the step plain gradient descent. The
# forward saved no parameter (the weight's gradient needs only the inputs), so nothing noticed.
#
# With a hidden layer: an error
# -----------------------------
#
# The hidden activations need a gradient, so the output layer's weight *is* saved, and autograd
# notices its in-place change (:ref:`the in-place error <errors-inplace>`).

torch.manual_seed(0)
inputs = torch.linspace(-2, 2, 48).unsqueeze(1)
outputs = torch.sin(1.5 * inputs) + 0.1 * torch.randn_like(inputs)
start = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 1))
net = copy.deepcopy(start)
params = list(net.parameters())
saved = saved_params(net, lambda: mse(net, inputs, outputs))
print(f"parameters the forward saved for backward: {saved}")
assert saved == ["2.weight"]
loss = mse(net, inputs, outputs)
first = torch.autograd.grad(loss, params, retain_graph=True)
move(params, ascent_direction(first))
try:
    torch.autograd.grad(loss, params)
except RuntimeError as error:
    print(f"{type(error).__name__}: {str(error).partition(':')[0]}")
    assert "modified by an inplace operation" in str(error)
else:
    raise AssertionError("the second backward was expected to fail")

# %%
# Through ``.data``: a silent mixture
# -----------------------------------
#
# Moving the weights through ``param.data`` hides the change. The second backward then mixes the
# *new* saved weight with the *old* saved activations: neither gradient.

net = copy.deepcopy(start)
params = list(net.parameters())
loss = mse(net, inputs, outputs)
first = torch.autograd.grad(loss, params, retain_graph=True)
for param, step in zip(params, ascent_direction(first)):
    param.data.add_(step)
mixed = torch.autograd.grad(loss, params)
at_perturbed = torch.autograd.grad(mse(net, inputs, outputs), params)
print(f"equal to the old gradient: {same(mixed, first)}; to the perturbed one: ", end="")
print(same(mixed, at_perturbed))
assert not same(mixed, first) and not same(mixed, at_perturbed)

# %%
# A correct SAM step
# ------------------
#
# Each pass gets its own forward. The weights are restored from a copy, and the optimizer steps
# with the second gradient. The check's reference (:doc:`plot_how_examples_are_checked`) writes
# SAM's loss apart from ``sam_step`` and touches no weight: the loss at the current weights plus
# the move, through :func:`torch.func.functional_call`.


def sam_step(model, optimizer, x=inputs, y=outputs, reuse=False):
    params = list(model.parameters())
    loss = mse(model, x, y)  # forward 1, at the current weights
    grads = torch.autograd.grad(loss, params, retain_graph=reuse)
    saved = [param.detach().clone() for param in params]
    move(params, ascent_direction(grads))
    second = loss if reuse else mse(model, x, y)  # reuse: the wrong way; else forward 2
    sharp_grads = torch.autograd.grad(second, params)
    with torch.no_grad():
        for param, original, grad in zip(params, saved, sharp_grads):
            param.copy_(original)
            param.grad = grad
    optimizer.step()


def sam_reference(model, x=inputs, y=outputs):
    def loss_at_moved_weights(step):
        named = dict(model.named_parameters())
        g = torch.autograd.grad(((model(x) - y) ** 2).mean(), list(named.values()))
        scale = RHO / torch.cat([t.flatten() for t in g]).norm()
        moved = {n: p + scale * t for (n, p), t in zip(named.items(), g)}
        return ((functional_call(model, moved, (x,)) - y) ** 2).mean()

    return loss_at_moved_weights


# %%
# The check passes three SAM steps, and stops at once the step that reuses the first loss
# (linear model): its "SAM" gradient is the plain one.


def three_sam_steps(model, x=inputs, y=outputs, reuse=False):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with checked(optimizer, sam_reference(model, x, y), model=model):
        for _ in range(3):
            sam_step(model, optimizer, x, y, reuse)


three_sam_steps(copy.deepcopy(start))
try:
    three_sam_steps(linear, features, targets, reuse=True)
except AssertionError as error:
    print(f"{type(error).__name__}: {error}")
    assert "step 0: wrong gradient of model.weight" in str(error)
else:
    raise AssertionError("the check was expected to fail")

# %%
# Source: `davda54/sam <https://github.com/davda54/sam>`__.
