"""
Gradient penalty needs ``create_graph=True``
============================================

The fix: take the critic's input gradient with ``torch.autograd.grad(..., create_graph=True)``,
add the penalty to the critic's loss, call ``backward()`` once. Without ``create_graph`` the
penalty silently adds nothing to the weights' gradients. A critic that scores *detached* fakes
needs no ``retain_graph``. Checked by outcome and against finite differences.

.. index:: gradient penalty, WGAN-GP, critic, create_graph=True, double backward
"""

# %%
# The critic scores 2-D points; the penalty is taken at random points between real and generated
# samples, which need ``requires_grad``. Float64, for the finite differences. ``checked``:
# :doc:`plot_how_examples_are_checked`.

import contextlib
import copy

import matplotlib.pyplot as plt
import numpy as np
import torch
from torch import nn
from torch.autograd.graph import saved_tensors_hooks

torch.manual_seed(0)
f64 = torch.float64


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


critic = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 1)).to(f64)
gen = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 2)).to(f64)
real = torch.randn(8, 2, dtype=f64) + torch.tensor([2.0, -1.0], dtype=f64)
noise = torch.randn(8, 3, dtype=f64)
fake = gen(noise).detach()
mix = torch.rand(8, 1, dtype=f64)
between = (mix * real + (1 - mix) * fake).requires_grad_()


def wasserstein_term():  # the critic's usual objective: fakes low, real samples high
    return critic(fake).mean() - critic(real).mean()


def penalty(create_graph, points=between):  # mean of (‖∂score/∂x‖ - 1)²
    (input_grad,) = torch.autograd.grad(critic(points).sum(), points, create_graph=create_graph)
    return ((input_grad.norm(dim=1) - 1) ** 2).mean()


# %%
# Without ``create_graph``: the penalty is a constant
# ---------------------------------------------------
#
# By default :external:py:func:`torch.autograd.grad` returns a gradient with no history, so the
# penalty does not depend on the weights. Alone, its backward fails
# (:ref:`other causes <errors-no-grad-fn>`):

flat_penalty = penalty(create_graph=False)
print(f"penalty = {flat_penalty.item():.6f}, requires_grad = {flat_penalty.requires_grad}")
assert not flat_penalty.requires_grad and flat_penalty.grad_fn is None
try:
    flat_penalty.backward()
except RuntimeError as error:
    print(f"{type(error).__name__}: {str(error).partition('. ')[0]}")
    assert "does not require grad and does not have a grad_fn" in str(error)
else:
    raise AssertionError("no error")

# %%
# Added to the critic's loss, it fails silently: the gradients are *exactly* the Wasserstein
# term's.

weights = list(critic.parameters())
alone = torch.autograd.grad(wasserstein_term(), weights)
summed = torch.autograd.grad(wasserstein_term() + 10 * penalty(create_graph=False), weights)
print(f"gradients identical without the penalty: {all(map(torch.equal, alone, summed))}")
assert all(map(torch.equal, alone, summed))

# %%
# With ``create_graph=True``: the penalty reaches the weights
# -----------------------------------------------------------
#
# The input gradient is now a node in a graph. Only the last bias stays out of reach: shifting
# every score leaves the input gradient unchanged.

live_penalty = penalty(create_graph=True)
grads = torch.autograd.grad(live_penalty, weights, allow_unused=True)
print(
    "norms of the penalty's gradients:",
    [None if g is None else round(g.norm().item(), 4) for g in grads],
)
assert torch.isclose(live_penalty, flat_penalty)
assert all(g.norm() > 0 for g in grads[:3]) and grads[3] is None  # the last bias: no gradient

# %%
# ``retain_graph`` defaults to ``create_graph`` (:doc:`../docs/retain-and-create-graph`), and
# the penalty's backward needs the critic's forward graph too. Forced off, it fails:

score = critic(between).sum()
(input_grad,) = torch.autograd.grad(score, between, create_graph=True, retain_graph=False)
try:
    ((input_grad.norm(dim=1) - 1) ** 2).mean().backward()
except RuntimeError as error:
    print(f"{type(error).__name__}: {str(error).partition(' (')[0]}")
    assert "graph a second time" in str(error)
else:
    raise AssertionError("no error")

# %%
# WGAN-GP steps, checked
# ----------------------
#
# ``wgan_gp`` trains copies of both networks, a critic step then a generator step, three times.
# The critic's reference: its loss at the current weights, the input gradient from
# :func:`torch.func.grad`, not ``create_graph``. The fakes depend on the generator, still
# training, but not through the critic's loss: for the critic's step they are data, so it scores
# ``fake.detach()``. Its loss is blind to its last bias: a shift of every score cancels in the
# difference of means and leaves the input gradient unchanged. The bias's gradient is zero
# (asserted), so it could not move, and the optimizer leaves it out.


def wgan_gp(detach=True, create_graph=True, fresh=False, retain=False, critic_steps=1):
    c, g = copy.deepcopy(critic), copy.deepcopy(gen)
    trained = [p for p in c.parameters() if p is not c[2].bias]
    c_opt, g_opt = torch.optim.SGD(trained, 1e-2), torch.optim.SGD(g.parameters(), 1e-2)
    passes, wasted = [], []
    g[0].weight.register_hook(lambda grad: passes.append(grad))

    def critic_loss(fake, slopes):
        return c(fake).mean() - c(real).mean() + 10 * ((slopes.norm(dim=1) - 1) ** 2).mean()

    def critic_reference(step):
        points = mix * real + (1 - mix) * g(noise)
        return critic_loss(g(noise), torch.func.vmap(torch.func.grad(lambda x: c(x).sum()))(points))

    assert not torch.autograd.grad(critic_reference(0), c[2].bias)[0].any()
    with checked(c_opt, critic_reference, critic=c):
        with checked(g_opt, lambda step: -c(g(noise)).mean(), gen=g):
            for _ in range(3):
                for _ in range(critic_steps):
                    fake = g(noise)
                    scored = fake.detach() if detach else fake
                    points = mix * real + (1 - mix) * scored
                    points.requires_grad_(True) if detach else None  # undetached: through gen
                    (slopes,) = torch.autograd.grad(
                        c(points).sum(), points, create_graph=create_graph
                    )
                    c_opt.zero_grad()
                    before = len(passes)
                    critic_loss(scored, slopes).backward(retain_graph=retain)
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
    raise AssertionError("the check passed")

# %%
# Without ``detach()``, the critic's backward runs on into the generator and frees its graph.
# This loop's generator reuses the critic step's fakes, so its step fails:

try:
    wgan_gp(detach=False)
except RuntimeError as error:
    print(f"{type(error).__name__}: {str(error).partition(' (')[0]}")
    assert "graph a second time" in str(error)
else:
    raise AssertionError("no error")

# %%
# The paper's loop (`Gulrajani et al., Algorithm 1 <https://arxiv.org/abs/1704.00028>`__: several
# critic steps, each on a new generator pass, then a new pass for the generator) written without
# ``detach()`` runs, trains right, and wastes a backward through the generator at every critic
# step. ``retain_graph=True`` on the critic's backward also silences the error, with the same
# waste. ``detach()`` is the fix.

wgan_gp(detach=False, fresh=True, critic_steps=3)
wgan_gp(detach=False, retain=True)

# %%
# What ``create_graph=True`` costs
# --------------------------------
#
# The bytes of the tensors a :external:py:class:`~torch.autograd.graph.saved_tensors_hooks`
# pack hook receives while the input gradient is computed (a tensor saved twice counts twice):
# with ``create_graph=True`` the backward saves tensors for the penalty's backward, without it
# none. :doc:`../docs/what-it-costs` measures kept graphs.


def bytes_saved_by(compute):
    sizes = []
    with saved_tensors_hooks(
        lambda t: sizes.append(t.numel() * t.element_size()) or t, lambda t: t
    ):
        compute()
    return sum(sizes)


score = critic(between).sum()
with_graph = bytes_saved_by(lambda: torch.autograd.grad(score, between, create_graph=True))
score = critic(between).sum()
without = bytes_saved_by(lambda: torch.autograd.grad(score, between))
print(f"bytes saved: create_graph {with_graph}, without {without}")
assert with_graph > 0 and without == 0

# %%
# Checked against finite differences
# ----------------------------------
#
# The penalty's gradient with respect to one weight, by double backward, against a central
# difference of the penalty, over a range of that weight's values.

weight = critic[0].weight
row, col = 3, 1
step = 1e-6


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

FIX, FREED, NEUTRAL, INK = "#1a9c6b", "#e0542c", "#808080", "#24292f"
fig, ax = plt.subplots(figsize=(4.2, 4.4), layout="constrained")
ax.plot(values, autograd_slopes, color=FIX, label="autograd, create_graph=True")
ax.plot(values[::4], finite_slopes[::4], "o", color=INK, label="central difference")
ax.axhline(0.0, color=FREED, linestyle="--", label="without create_graph")
ax.axvline(original, color=NEUTRAL, linewidth=1, linestyle=":")
ax.set(
    xlabel=f"weight [{row}, {col}] of the first layer\n(dotted: its current value)",
    ylabel="∂ penalty / ∂ weight",
    title="The penalty's gradient reaches\nthe weight only with create_graph",
)
fig.legend(loc="outside lower left")
plt.show()
