"""
A GAN step: fake.detach() or retain_graph
=========================================

The fix: train the discriminator on ``fake.detach()``, then run it again on ``fake`` for the
generator's loss: every graph is walked once, with no ``retain_graph``. Without ``detach()``, the
discriminator's backward frees the generator's graph and the generator's backward fails, even
through a fresh discriminator pass. One discriminator pass feeding both losses does need
``retain_graph=True``, and trains differently. A tiny GAN that learns a 1-D Gaussian shows each
case.

.. index:: GAN, GAN training step, generator, discriminator, fake.detach(), netD, netG,
   errD.backward, errG.backward
"""

# %%
# Data and networks
# -----------------
#
# Real samples come from a normal distribution with mean 3 and standard deviation 0.5. The
# generator ``gen`` maps 4-D noise to one number; the discriminator ``disc`` maps one number to a
# logit. ``fresh_pair()`` gives the same starting networks and optimizers each time.

import copy

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)  # tiny tensors: one thread is fastest


def mlp(n_in, n_out):
    return nn.Sequential(
        nn.Linear(n_in, 32), nn.LeakyReLU(0.2), nn.Linear(32, 32), nn.LeakyReLU(0.2),
        nn.Linear(32, n_out),
    )  # fmt: skip


BATCH = 128
gen_start, disc_start = mlp(4, 1), mlp(1, 1)
real = 3 + 0.5 * torch.randn(BATCH, 1)  # one fixed batch, read by the step functions below
noise = torch.randn(BATCH, 4)
is_real, is_fake = torch.ones(BATCH, 1), torch.zeros(BATCH, 1)
bce = F.binary_cross_entropy_with_logits


def fresh_pair():
    gen, disc = copy.deepcopy(gen_start), copy.deepcopy(disc_start)
    opt_gen = torch.optim.SGD(gen.parameters(), 0.05)
    return gen, disc, opt_gen, torch.optim.SGD(disc.parameters(), 0.05)


# %%
# The usual step: ``detach()``, then a fresh discriminator pass
# -------------------------------------------------------------
#
# The discriminator's backward stops at ``fake.detach()`` and never enters the generator's graph.
# After the discriminator's update, a new pass ``disc(fake)`` builds the graph the generator's
# loss walks. Each graph is walked once, by a plain :meth:`~torch.Tensor.backward`.


def usual_step(gen, disc, opt_gen, opt_disc):
    fake = gen(noise)
    loss_disc = bce(disc(real), is_real) + bce(disc(fake.detach()), is_fake)
    opt_disc.zero_grad()
    loss_disc.backward()
    opt_disc.step()
    loss_gen = bce(disc(fake), is_real)  # a second pass, through the updated discriminator
    opt_gen.zero_grad()
    loss_gen.backward()
    opt_gen.step()
    return loss_disc, loss_gen


gen, disc, opt_gen, opt_disc = fresh_pair()
usual_step(gen, disc, opt_gen, opt_disc)  # runs: no error, no retain_graph

# %%
# Without ``detach()``: the generator's backward fails
# ----------------------------------------------------
#
# Leave out ``detach()`` and keep everything else, the fresh discriminator pass included. The
# discriminator's backward now runs on into the generator and frees what the generator's forward
# saved; the generator's loss needs that graph again.

gen, disc, opt_gen, opt_disc = fresh_pair()
fake = gen(noise)
loss_disc = bce(disc(real), is_real) + bce(disc(fake), is_fake)  # no detach()
opt_disc.zero_grad()
loss_disc.backward()
opt_disc.step()
loss_gen = bce(disc(fake), is_real)  # a fresh discriminator pass does not help
opt_gen.zero_grad()
try:
    loss_gen.backward()
except RuntimeError as error:
    print(f"{type(error).__name__}: {str(error).partition('. ')[0]}")
    assert "backward through the graph a second time" in str(error)
else:
    raise AssertionError("the generator's backward through its freed graph was expected to fail")

# %%
# ``loss_disc.backward(retain_graph=True)`` silences it. Then every discriminator step also
# backpropagates into the generator's ``.grad``: zeroed right before the generator's backward,
# the generator still gets the usual step's gradient (up to rounding); zeroed only at the top of
# the loop, it gets that plus the discriminator loss's gradient. ``detach()`` is the fix.


def generator_grads(detach, zero_between=True):
    gen, disc, opt_gen, opt_disc = fresh_pair()
    opt_gen.zero_grad()
    fake = gen(noise)
    scored = fake.detach() if detach else fake
    loss_disc = bce(disc(real), is_real) + bce(disc(scored), is_fake)
    loss_disc.backward(retain_graph=not detach)
    from_disc = [None if p.grad is None else p.grad.clone() for p in gen.parameters()]
    opt_disc.step()
    if zero_between:
        opt_gen.zero_grad()
    bce(disc(fake), is_real).backward()
    return from_disc, [p.grad for p in gen.parameters()]


from_disc, detached = generator_grads(detach=True)
assert all(g is None for g in from_disc)  # with detach(), the generator's .grad stays None
from_disc, retained = generator_grads(detach=False)
_, summed = generator_grads(detach=False, zero_between=False)
diff = max((a - b).abs().max().item() for a, b in zip(summed, detached))
print(f"generator .grad zeroed only at the top vs the usual gradient: max diff {diff:.4f}")
assert all(g is not None for g in from_disc) and diff > 1e-3
assert all(torch.allclose(a, b) for a, b in zip(retained, detached))
assert all(torch.allclose(s, d + f) for s, d, f in zip(summed, detached, from_disc))

# %%
# One discriminator pass for both losses: ``retain_graph`` is needed
# ------------------------------------------------------------------
#
# The other way to walk a graph twice: compute ``disc(gen(noise))`` once and build both losses
# on it. The discriminator's backward frees that pass and the generator's graph, which the
# generator's loss needs.

gen, disc, opt_gen, opt_disc = fresh_pair()
scores_fake = disc(gen(noise))
loss_disc = bce(disc(real), is_real) + bce(scores_fake, is_fake)
loss_gen = bce(scores_fake, is_real)
loss_disc.backward()
try:
    loss_gen.backward()
except RuntimeError as error:
    print(f"{type(error).__name__}: {str(error).partition('. ')[0]}")
    assert "backward through the graph a second time" in str(error)
else:
    raise AssertionError("the generator's backward through a freed graph was expected to fail")

# %%
# Here ``retain_graph=True`` is the fix, with two conditions. Both backward calls must come
# before ``opt_disc.step()``: the kept pass saved the discriminator's weights, and the step
# changes them in place (both checked below: a weight is saved, its version counter advances),
# which makes the generator's backward raise the
# :ref:`in-place modification error <errors-inplace>`. And each backward should be limited to its
# own network with ``inputs=``; otherwise each loss also writes into the other network's
# ``.grad`` (checked below).


def reused_step(gen, disc, opt_gen, opt_disc):
    scores_fake = disc(gen(noise))
    loss_disc = bce(disc(real), is_real) + bce(scores_fake, is_fake)
    loss_gen = bce(scores_fake, is_real)
    opt_disc.zero_grad()
    opt_gen.zero_grad()
    loss_disc.backward(retain_graph=True, inputs=list(disc.parameters()))
    loss_gen.backward(inputs=list(gen.parameters()))
    opt_disc.step()
    opt_gen.step()
    return loss_disc, loss_gen


gen, disc, opt_gen, opt_disc = fresh_pair()
scores_fake = disc(gen(noise))
loss_disc = bce(disc(real), is_real) + bce(scores_fake, is_fake)
own = torch.autograd.grad(loss_disc, list(disc.parameters()), retain_graph=True)
loss_disc.backward(retain_graph=True)  # no inputs=
assert all(p.grad is not None for p in gen.parameters())  # the discriminator's loss reached gen
bce(scores_fake, is_real).backward()
mixed = max((g - p.grad).abs().max().item() for g, p in zip(own, disc.parameters()))
print(f"without inputs=, discriminator .grad vs its own loss's gradient: max diff {mixed:.4f}")
assert mixed > 1e-3

gen, disc, opt_gen, opt_disc = fresh_pair()
saved = []
with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
    scores_fake = disc(gen(noise))
storages = {s.untyped_storage().data_ptr() for s in saved}
assert any(p.untyped_storage().data_ptr() in storages for p in disc.parameters())  # weights saved
loss_disc = bce(disc(real), is_real) + bce(scores_fake, is_fake)
loss_disc.backward(retain_graph=True, inputs=list(disc.parameters()))
versions = [p._version for p in disc.parameters()]
opt_disc.step()  # too early: the kept pass saved these weights, and the step changes them in place
bumped = [p._version > v for p, v in zip(disc.parameters(), versions)]
print(f"version counters of the discriminator's weights advanced by opt_disc.step(): {bumped}")
assert all(bumped)

# %%
# The reused step is a different algorithm
# ----------------------------------------
#
# Both steps give the discriminator the same gradient. The generator's gradient differs: the usual
# step takes it through the discriminator *after* its update, the reused step through the
# discriminator *before* it (the pass it kept), which makes the updates simultaneous rather than
# alternating.


def gradients(step):
    """The gradients each optimizer sees when step() is called, in one step from the start."""
    gen, disc, opt_gen, opt_disc = fresh_pair()
    seen = {}

    def keep(optimizer, args, kwargs):
        name = "gen" if optimizer is opt_gen else "disc"
        seen[name] = [p.grad.clone() for p in optimizer.param_groups[0]["params"]]

    opt_gen.register_step_pre_hook(keep)
    opt_disc.register_step_pre_hook(keep)
    step(gen, disc, opt_gen, opt_disc)
    return seen


usual, reused = gradients(usual_step), gradients(reused_step)
gen_diff = max((g - h).abs().max().item() for g, h in zip(usual["gen"], reused["gen"]))
largest = max(g.abs().max().item() for g in usual["gen"])
print(f"generator gradients, usual vs reused: max abs diff {gen_diff:.4f} (largest {largest:.4f})")
assert all(torch.equal(g, h) for g, h in zip(usual["disc"], reused["disc"]))
assert gen_diff > 0.1 * largest

# %%
# The reused step also holds both graphs from the discriminator's backward until the
# generator's; :doc:`../docs/what-it-costs` measures what a retained graph holds.
#
# Training with the usual step
# ----------------------------
#
# 120 usual steps with Adam, a fresh batch each time: the generated samples move from near 0 to
# near 3, the mean of the real data.

torch.manual_seed(1)
gen, disc = copy.deepcopy(gen_start), copy.deepcopy(disc_start)
opt_gen = torch.optim.Adam(gen.parameters(), lr=3e-3, betas=(0.5, 0.999))
opt_disc = torch.optim.Adam(disc.parameters(), lr=3e-3, betas=(0.5, 0.999))
probe = torch.randn(2000, 4)
with torch.no_grad():
    samples_before = gen(probe).squeeze(1)
for _ in range(120):
    real = 3 + 0.5 * torch.randn(BATCH, 1)  # a new batch for usual_step to read
    noise = torch.randn(BATCH, 4)
    usual_step(gen, disc, opt_gen, opt_disc)
with torch.no_grad():
    samples_after = gen(probe).squeeze(1)
print(f"generated mean before {samples_before.mean():.2f}, after {samples_after.mean():.2f}")
assert abs(samples_before.mean()) < 0.5
assert abs(samples_after.mean() - 3) < 0.2

# The site's colours: the fix (usual step), neutral, ink.
USUAL, INK, NEUTRAL = "#1a9c6b", "#24292f", "#808080"
fig, ax_hist = plt.subplots(figsize=(4.2, 3.4))
bins = torch.linspace(-0.5, 5.5, 61)
ax_hist.hist(samples_before, bins=bins, alpha=0.6, color=NEUTRAL, label="before")
ax_hist.hist(samples_after, bins=bins, alpha=0.6, color=USUAL, label="after 120 steps")
ax_hist.hist(3 + 0.5 * torch.randn(2000), bins=bins, histtype="step", color=INK, label="real")
ax_hist.set(
    title="Generated samples end up near 3", xlabel="sample value", ylabel="samples per bin"
)
ax_hist.legend(loc="upper right")
fig.tight_layout()
plt.show()

# %%
# See also: :doc:`../docs/several-losses` for several losses on one forward pass, and the
# :doc:`error reference <../docs/errors>` for the freed-graph error's other causes.
