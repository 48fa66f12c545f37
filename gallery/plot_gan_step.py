"""
GAN step: fake.detach() or retain_graph
=======================================

The fix: train the discriminator on ``fake.detach()``, then score ``fake`` again for the
generator's loss; no ``retain_graph``. ``retain_graph=True`` silences the error and, unless the
generator's ``.grad`` is zeroed right before its backward, trains it on the discriminator's loss
too. Two backward calls over one discriminator pass need ``retain_graph=True`` on the first, each
limited to its own network: a simultaneous update.

.. index:: GAN, GAN training step, generator, discriminator, fake.detach(), netD, netG,
   errD.backward, errG.backward
"""

# %%
# Real samples: mean 3, standard deviation 0.5. ``gen`` maps 4-D noise to a number, ``disc`` a
# number to a logit. ``three_checked_steps`` runs a step function three times on fresh copies,
# each network checked (:doc:`plot_how_examples_are_checked`) against its own loss written out
# at the current weights, and counts the backward passes that reach the generator.

import contextlib
import copy

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)  # tiny tensors


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
    return gen, disc, *(torch.optim.SGD(net.parameters(), 0.05) for net in (gen, disc))


def three_checked_steps(step, simultaneous=False):
    gen, disc, opt_gen, opt_disc = fresh_pair()
    began = {}  # step -> the discriminator as that step began, kept by its reference
    passes, checking = [], []  # backward passes reaching the generator, except the check's
    gen[0].weight.register_hook(lambda grad: None if checking else passes.append(grad))
    opt_gen.register_step_pre_hook(lambda *_: checking.append(True))  # before the check's hook
    opt_gen.register_step_post_hook(lambda *_: checking.clear())

    def disc_loss(k):  # runs before the discriminator's step k
        began[k] = copy.deepcopy(disc)
        return bce(disc(real), is_real) + bce(disc(gen(noise)), is_fake)

    def gen_loss(k):
        return bce((began.get(k, disc) if simultaneous else disc)(gen(noise)), is_real)

    with checked(opt_disc, disc_loss, disc=disc), checked(opt_gen, gen_loss, gen=gen):
        for _ in range(3):
            step(gen, disc, opt_gen, opt_disc)
    print(f"backward passes through the generator: {len(passes)}")
    return len(passes)


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


assert three_checked_steps(usual_step) == 3

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
    raise AssertionError("the generator's backward was expected to fail")

# %%
# ``loss_disc.backward(retain_graph=True)`` silences it, and the discriminator's loss now also
# reaches the generator's ``.grad``. Zeroed only at the top, the generator trains on both:

try:
    three_checked_steps(lambda *nets: undetached_step(*nets, True, False))
except AssertionError as error:
    print(f"{type(error).__name__}: {error}")
    assert "step 0: wrong gradient of gen." in str(error)
else:
    raise AssertionError("the check was expected to fail")

# %%
# Zeroed again before the generator's backward, it trains right, with a second backward through
# the generator at every step, for nothing. ``detach()`` is the fix.

assert three_checked_steps(lambda *nets: undetached_step(*nets, True, True)) == 6

# %%
# One discriminator pass, two backward calls: ``retain_graph`` is needed
# ----------------------------------------------------------------------
#
# Both losses built on one pass ``disc(gen(noise))``: the discriminator's backward frees it, and
# the generator's loss needs it (the freed-graph error). With ``retain_graph=True``, both backward
# calls must come before ``opt_disc.step()``, which changes in place the weights the kept pass
# saved (:ref:`the in-place error <errors-inplace>`). Both errors asserted:

for retain_graph, message in ((False, "graph a second time"), (True, "modified by an inplace")):
    gen, disc, opt_gen, opt_disc = fresh_pair()
    scores_fake = disc(gen(noise))
    (bce(disc(real), is_real) + bce(scores_fake, is_fake)).backward(retain_graph=retain_graph)
    opt_disc.step()
    try:
        bce(scores_fake, is_real).backward()
    except RuntimeError as error:
        print(f"retain_graph={retain_graph}: {type(error).__name__}")
        assert message in str(error)
    else:
        raise AssertionError("the generator's backward was expected to fail")

# %%
# And each backward must be limited to its own network, here with ``inputs=``. Without it, the
# generator's loss also lands in the discriminator's ``.grad``:


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


try:
    three_checked_steps(lambda *nets: reused_step(*nets, inputs=False))
except AssertionError as error:
    print(f"{type(error).__name__}: {error}")
    assert "step 0: wrong gradient of disc." in str(error)
else:
    raise AssertionError("the check was expected to fail")

# %%
# With ``inputs=``, the generator's gradient goes through the discriminator *before* its update:
# the updates are simultaneous, not alternating. Checked as such (the generator's loss scored by
# the discriminator as the step began), it trains right; held to the alternating reference, it
# fails at step 0.

three_checked_steps(reused_step, simultaneous=True)
try:
    three_checked_steps(reused_step)
except AssertionError as error:
    print(f"{type(error).__name__}: {error}")
    assert "step 0: wrong gradient of gen." in str(error)
else:
    raise AssertionError("the check was expected to fail")

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

fig, ax = plt.subplots(figsize=(4.2, 3.4), layout="constrained")
for samples, color, label in (
    (samples_before, "#808080", "before"),
    (samples_after, "#1a9c6b", "after"),
):
    ax.hist(samples, bins=torch.linspace(-0.5, 5.5, 61), alpha=0.6, color=color, label=label)
ax.set(title="Generated samples end up near 3", xlabel="sample value", ylabel="samples per bin")
ax.legend()
plt.show()

# %%
# See also: :doc:`../docs/several-losses`, :doc:`../docs/errors`.
