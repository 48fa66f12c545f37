"""
Gradient penalty needs ``create_graph=True``
============================================

The fix: take the critic's input gradient with ``torch.autograd.grad(..., create_graph=True)``
(which also keeps the graph: :doc:`../docs/retain-and-create-graph`), add the penalty to the
critic's loss, call ``backward()`` once. Without ``create_graph`` the
penalty silently adds nothing to the weights' gradients. A critic that scores *detached* fakes
needs no ``retain_graph``. Checked by outcome and against finite differences.

.. index:: gradient penalty, WGAN-GP, critic, create_graph=True, double backward
"""

# %%
# The critic scores 2-D points; the penalty, the mean of (‖∂score/∂x‖ − 1)², is taken at random
# points between real and generated samples, which need ``requires_grad``. Float64, for the
# finite differences.

import contextlib
import copy

import matplotlib.pyplot as plt
import numpy as np
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)  # tiny tensors
f64 = torch.float64


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


critic = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 1)).to(f64)
gen = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 2)).to(f64)
real = torch.randn(8, 2, dtype=f64) + torch.tensor([2.0, -1.0], dtype=f64)
noise = torch.randn(8, 3, dtype=f64)
mix = torch.rand(8, 1, dtype=f64)
between = (mix * real + (1 - mix) * gen(noise).detach()).requires_grad_()


def penalty(create_graph, points=between):
    (input_grad,) = torch.autograd.grad(critic(points).sum(), points, create_graph=create_graph)
    return ((input_grad.norm(dim=1) - 1) ** 2).mean()


# %%
# Without ``create_graph``: the penalty is a constant
# ---------------------------------------------------
#
# By default :external:py:func:`torch.autograd.grad` returns a gradient with no history, so the
# penalty does not depend on the weights. Added to a loss, it changes no gradient (asserted);
# alone, its backward fails (:ref:`other causes <errors-no-grad-fn>`):

flat_penalty = penalty(create_graph=False)
try:
    flat_penalty.backward()
except RuntimeError as error:
    print(f"{type(error).__name__}: {str(error).partition('. ')[0]}")
    assert "does not require grad and does not have a grad_fn" in str(error)
else:
    raise AssertionError("the constant penalty's backward was expected to fail")

weights = list(critic.parameters())
alone = torch.autograd.grad(critic(real).mean(), weights)
summed = torch.autograd.grad(critic(real).mean() + 10 * flat_penalty, weights)
assert all(map(torch.equal, alone, summed))

# %%
# WGAN-GP steps, checked
# ----------------------
#
# ``wgan_gp`` trains copies of both networks, a critic step then a generator step, three times,
# on one fixed batch (the paper samples new data, noise and mixing weights every iteration). The
# fakes depend on the generator, still training, but not through the critic's loss: for the
# critic's step they are data, so it scores ``fake.detach()``. The critic's reference is written
# apart from the loop: :func:`torch.func.grad` per point for the input gradient, its own norm. A
# shift of every score cancels in the critic's loss, so its last bias gets no gradient (asserted)
# and need not move: every other parameter must.


def wgan_gp(detach=True, create_graph=True, fresh=False, retain=False, critic_steps=1):
    c, g = copy.deepcopy(critic), copy.deepcopy(gen)
    c_opt, g_opt = (torch.optim.SGD(net.parameters(), 1e-2) for net in (c, g))
    passes, wasted = [], []
    g[0].weight.register_hook(passes.append)

    def critic_reference(step):
        fakes = g(noise).detach()
        slope = torch.func.vmap(torch.func.grad(lambda x: c(x).squeeze()))
        norms = slope(mix * real + (1 - mix) * fakes).pow(2).sum(1).sqrt()
        return c(fakes).mean() - c(real).mean() + 10 * ((norms - 1) ** 2).mean()

    assert not torch.autograd.grad(critic_reference(0), c[2].bias)[0].any()
    with (
        checked(c_opt, critic_reference, train=[*c[0].parameters(), c[2].weight], critic=c),
        checked(g_opt, lambda step: -c(g(noise)).mean(), gen=g),
    ):
        for _ in range(3):
            for _ in range(critic_steps):
                fake = g(noise)
                scored = fake.detach() if detach else fake
                points = mix * real + (1 - mix) * scored
                points.requires_grad_(True) if detach else None  # undetached: through gen
                (slopes,) = torch.autograd.grad(c(points).sum(), points, create_graph=create_graph)
                loss = c(scored).mean() - c(real).mean()
                loss = loss + 10 * ((slopes.norm(dim=1) - 1) ** 2).mean()
                c_opt.zero_grad()
                before = len(passes)
                loss.backward(retain_graph=retain)
                wasted.append(len(passes) > before)
                c_opt.step()
            fake = g(noise) if fresh else fake
            g_opt.zero_grad()
            (-c(fake).mean()).backward()
            g_opt.step()
    print(f"critic backward passes through the generator: {sum(wasted)}/{len(wasted)}")
    assert set(wasted) == {not detach}  # every critic step, or none


wgan_gp()

# %%
# Without ``create_graph``, the check catches the missing penalty term:

try:
    wgan_gp(create_graph=False)
except AssertionError as error:
    print(f"{type(error).__name__}: {error}")
    assert "step 0: wrong gradient of critic.0.weight" in str(error)
else:
    raise AssertionError("the check was expected to fail")

# %%
# Without ``detach()``, the critic's backward runs on into the generator and frees its graph.
# This loop's generator reuses the critic step's fakes, so its step fails:

try:
    wgan_gp(detach=False)
except RuntimeError as error:
    print(f"{type(error).__name__}: {str(error).partition(' (')[0]}")
    assert "graph a second time" in str(error)
else:
    raise AssertionError("the generator's backward was expected to fail")

# %%
# The paper's loop (its Algorithm 1, cited below: several critic steps, each on a new generator
# pass, then a new pass for the generator) written without ``detach()`` runs, trains right, and
# wastes a backward through the generator at every critic step. ``retain_graph=True`` on the
# critic's backward also silences the error, with the same waste. ``detach()`` is the fix.

wgan_gp(detach=False, fresh=True, critic_steps=3)
wgan_gp(detach=False, retain=True)

# %%
# Checked against finite differences
# ----------------------------------
#
# The penalty's gradient with respect to one weight, by double backward, against a central
# difference of the penalty, over a range of that weight's values.

weight, row, col, step = critic[0].weight, 3, 1, 1e-6


def penalty_at(value):
    with torch.no_grad():
        weight[row, col] = value
    return penalty(create_graph=False).item()


original = weight[row, col].item()
values = np.linspace(original - 2.0, original + 2.0, 41)
autograd_slopes, finite_slopes = [], []
for value in values:
    penalty_at(value)
    critic.zero_grad(set_to_none=True)
    penalty(create_graph=True).backward()
    autograd_slopes.append(weight.grad[row, col].item())
    finite_slopes.append((penalty_at(value + step) - penalty_at(value - step)) / (2 * step))
penalty_at(original)
assert np.allclose(autograd_slopes, finite_slopes, rtol=1e-5, atol=1e-6)
assert max(abs(s) for s in finite_slopes) > 1e-3  # a real slope, lost without create_graph
print(f"autograd and central differences agree at {len(values)} values")

fig, ax = plt.subplots(figsize=(4.2, 4.4), layout="constrained")
ax.plot(values, autograd_slopes, color="#1a9c6b", label="autograd, create_graph=True")
ax.plot(values[::4], finite_slopes[::4], "o", color="#24292f", label="central difference")
ax.axhline(0.0, color="#e0542c", linestyle="--", label="without create_graph")
ax.set(
    xlabel=f"weight [{row}, {col}] of the first layer",
    ylabel="∂ penalty / ∂ weight",
    title="The penalty's gradient reaches\nthe weight only with create_graph",
)
fig.legend(loc="outside lower left")
plt.show()

# %%
# Source: `Gulrajani et al. 2017 <https://arxiv.org/abs/1704.00028>`__ (WGAN-GP, Algorithm 1).
