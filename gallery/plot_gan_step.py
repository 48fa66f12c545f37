"""
GAN step: fake.detach() or retain_graph
=======================================

The fix: train the discriminator on ``fake.detach()``, then score ``fake`` again for the
generator's loss; no ``retain_graph``. ``retain_graph=True`` silences the error and, unless the
generator's ``.grad`` is zeroed right before its backward, trains it on the discriminator's loss
too. One discriminator pass feeding both losses needs ``retain_graph=True`` and ``inputs=``,
and trains as a simultaneous update.

.. index:: GAN, GAN training step, generator, discriminator, fake.detach(), netD, netG,
   errD.backward, errG.backward
"""

# %%
# Real samples: mean 3, standard deviation 0.5. ``gen`` maps 4-D noise to a number, ``disc`` a
# number to a logit; ``fresh_pair()`` restarts both. ``checked``
# (:doc:`plot_how_examples_are_checked`) compares each network's ``.grad`` at its optimizer's
# step with the gradient of that network's own loss at the current weights.

import contextlib
import copy

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
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


def mlp(n_in, n_out):
    return nn.Sequential(
        nn.Linear(n_in, 32), nn.LeakyReLU(0.2), nn.Linear(32, 32), nn.LeakyReLU(0.2),
        nn.Linear(32, n_out),
    )  # fmt: skip


BATCH = 128
gen_start, disc_start = mlp(4, 1), mlp(1, 1)
real, noise = 3 + 0.5 * torch.randn(BATCH, 1), torch.randn(BATCH, 4)  # read by the steps
is_real, is_fake = torch.ones(BATCH, 1), torch.zeros(BATCH, 1)
bce = F.binary_cross_entropy_with_logits


def fresh_pair():
    gen, disc = copy.deepcopy(gen_start), copy.deepcopy(disc_start)
    return (
        gen,
        disc,
        torch.optim.SGD(gen.parameters(), 0.05),
        torch.optim.SGD(disc.parameters(), 0.05),
    )


def three_checked_steps(step, simultaneous=False):
    gen, disc, opt_gen, opt_disc = fresh_pair()
    judge = copy.deepcopy(disc)  # simultaneous: the discriminator as the step began
    disc_loss = lambda k: bce(disc(real), is_real) + bce(disc(gen(noise)), is_fake)  # noqa: E731
    gen_loss = lambda k: bce((judge if simultaneous else disc)(gen(noise)), is_real)  # noqa: E731
    with checked(opt_disc, disc_loss, disc=disc), checked(opt_gen, gen_loss, gen=gen):
        for _ in range(3):
            judge.load_state_dict(disc.state_dict())
            step(gen, disc, opt_gen, opt_disc)


def check_fails(expected, step):
    try:
        three_checked_steps(step)
    except AssertionError as error:
        print(f"{type(error).__name__}: {error}")
        assert expected in str(error)
    else:
        raise AssertionError("the check passed")


# %%
# The usual step: ``detach()``, then a fresh discriminator pass
# -------------------------------------------------------------
#
# The fakes depend on the generator, which still trains, but not through the discriminator's
# loss: for the discriminator's step they are data, so it scores ``fake.detach()``. The
# generator's loss needs them live, through the *updated* discriminator: a new pass.


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


three_checked_steps(usual_step)

# %%
# Without ``detach()``, the discriminator's backward runs on into the generator and frees its
# graph, which the generator's loss needs again, fresh pass or not:


def undetached_step(gen, disc, opt_gen, opt_disc, retain_graph=False, zero_between=True):
    fake = gen(noise)
    loss_disc = bce(disc(real), is_real) + bce(disc(fake), is_fake)  # no detach()
    opt_gen.zero_grad()  # both networks zeroed at the top
    opt_disc.zero_grad()
    loss_disc.backward(retain_graph=retain_graph)
    opt_disc.step()
    if zero_between:
        opt_gen.zero_grad()
    bce(disc(fake), is_real).backward()
    opt_gen.step()


try:
    undetached_step(*fresh_pair())
except RuntimeError as error:
    print(f"{type(error).__name__}: {str(error).partition(' (')[0]}")
    assert "graph a second time" in str(error)
else:
    raise AssertionError("no error")

# %%
# ``loss_disc.backward(retain_graph=True)`` silences it, and the discriminator's loss now also
# reaches the generator's ``.grad``. Zeroed only at the top, the generator trains on both:

check_fails("step 0: wrong gradient of gen.", lambda *nets: undetached_step(*nets, True, False))

# %%
# Zeroed again before the generator's backward, it trains right, after a backward through the
# generator for nothing. ``detach()`` is the fix.

three_checked_steps(lambda *nets: undetached_step(*nets, True, True))

# %%
# One discriminator pass for both losses: ``retain_graph`` is needed
# ------------------------------------------------------------------
#
# Both losses built on one pass ``disc(gen(noise))``: the discriminator's backward frees it, and
# the generator's loss needs it. ``retain_graph=True`` is the fix here, on two conditions. Both
# backward calls come before ``opt_disc.step()``, which changes in place the weights the kept
# pass saved: after it, the generator's backward raises the
# :ref:`in-place modification error <errors-inplace>`. And each backward is limited to its own
# network with ``inputs=``. (Both errors are asserted, not printed again.)


def reused_step(gen, disc, opt_gen, opt_disc, inputs=True):
    scores_fake = disc(gen(noise))
    loss_disc = bce(disc(real), is_real) + bce(scores_fake, is_fake)
    loss_gen = bce(scores_fake, is_real)
    opt_disc.zero_grad()
    opt_gen.zero_grad()
    loss_disc.backward(retain_graph=True, inputs=[*disc.parameters()] if inputs else None)
    loss_gen.backward(inputs=[*gen.parameters()] if inputs else None)
    opt_disc.step()
    opt_gen.step()


def fails_with(message, retain_graph, step):
    gen, disc, opt_gen, opt_disc = fresh_pair()
    scores_fake = disc(gen(noise))
    (bce(disc(real), is_real) + bce(scores_fake, is_fake)).backward(retain_graph=retain_graph)
    opt_disc.step() if step else None
    try:
        bce(scores_fake, is_real).backward()
    except RuntimeError as error:
        return message in str(error)


assert fails_with("backward through the graph a second time", retain_graph=False, step=False)
assert fails_with("modified by an inplace operation", retain_graph=True, step=True)

# %%
# Without ``inputs=``, the generator's loss also lands in the discriminator's ``.grad``:

check_fails("step 0: wrong gradient of disc.", lambda *nets: reused_step(*nets, inputs=False))

# %%
# With ``inputs=``, the generator's gradient goes through the discriminator *before* its update
# (the kept pass): the updates are simultaneous, not alternating. Checked as such (the
# generator's loss scored by the discriminator as the step began), it trains right; held to the
# alternating reference, it fails at step 0. The kept pass also holds both graphs until the
# generator's backward (:doc:`../docs/what-it-costs`).

three_checked_steps(reused_step, simultaneous=True)
check_fails("step 0: wrong gradient of gen.", reused_step)

# %%
# Training with the usual step
# ----------------------------
#
# 120 usual steps with Adam, a new batch each: the samples move from near 0 to near 3.

torch.manual_seed(1)
gen, disc = copy.deepcopy(gen_start), copy.deepcopy(disc_start)
opt_gen = torch.optim.Adam(gen.parameters(), lr=3e-3, betas=(0.5, 0.999))
opt_disc = torch.optim.Adam(disc.parameters(), lr=3e-3, betas=(0.5, 0.999))
probe = torch.randn(2000, 4)
with torch.no_grad():
    samples_before = gen(probe).squeeze(1)
for _ in range(120):
    real, noise = 3 + 0.5 * torch.randn(BATCH, 1), torch.randn(BATCH, 4)  # read by usual_step
    usual_step(gen, disc, opt_gen, opt_disc)
with torch.no_grad():
    samples_after = gen(probe).squeeze(1)
print(f"generated mean before {samples_before.mean():.2f}, after {samples_after.mean():.2f}")
assert abs(samples_before.mean()) < 0.5
assert abs(samples_after.mean() - 3) < 0.2

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
# See also: :doc:`../docs/several-losses`, :doc:`../docs/errors`.
