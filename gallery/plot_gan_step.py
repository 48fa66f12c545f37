"""
A GAN training step: where retain_graph is needed, and where it is not
======================================================================

A tiny GAN learns a 1-D Gaussian. The usual step trains the discriminator on ``fake.detach()``
and then runs the discriminator again for the generator's loss, so no graph is ever walked twice
and ``retain_graph`` never appears. Reusing one discriminator forward pass for both losses is
what makes ``retain_graph=True`` necessary; this script runs that variant too, shows that stepping
the discriminator before the generator's backward raises an in-place modification error, measures
what the retained graph costs, and shows that the variant computes a different generator gradient.

.. index:: GAN, GAN training step, generator, discriminator, fake.detach()
"""

# %%
# Data, networks and a meter for saved tensors
# --------------------------------------------
#
# Real samples come from a normal distribution with mean 3 and standard deviation 0.5. The
# generator ``gen`` maps 4-D noise to one number; the discriminator ``disc`` maps one number to a
# logit. ``SavedBytes`` is a :class:`torch.autograd.graph.saved_tensors_hooks` context (a
# verbatim copy of the meter in the site's ``docs/saved_bytes.py``) that counts the bytes of the
# memory blocks kept alive by tensors saved for backward, each block once, parameters excluded:
# ``held`` now, ``peak`` the most at once, ``total`` all saved while active.

import copy
import time
import weakref

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.graph import saved_tensors_hooks

torch.set_num_threads(1)  # tiny tensors: one thread is fastest and keeps timings steady
torch.manual_seed(0)


# >>> SavedBytes meter: one block, identical in docs/saved_bytes.py and the gallery scripts
# (tests/test_meter_copies.py compares them)


class _Box:
    """What the pack hook hands autograd instead of the tensor: an object a weakref can follow."""

    __slots__ = ("__weakref__", "tensor")

    def __init__(self, tensor):
        self.tensor = tensor


class SavedBytes(saved_tensors_hooks):
    """Bytes of memory kept alive by the tensors saved for backward while this context is active.

    Each block of memory (a tensor's storage) counts once and in full, however many saved tensors
    or views refer to it; the storages of ``skip`` (parameters, which exist anyway) do not count.
    ``held``: bytes autograd still holds now; ``peak``: the most it held at once; ``total``: every
    block saved while active, released or not. What the pack hook never sees is not counted:
    Python numbers that an operation wraps as 0-dim tensors and saves (``x * 3.0``, ``x / 4``),
    and tensors a custom ``autograd.Function`` keeps as ``ctx`` attributes.
    """

    def __init__(self, skip=()):
        super().__init__(self._pack, self._unpack)
        self._skip = {p.untyped_storage().data_ptr() for p in skip}
        self._blocks = {}  # storage address -> [boxes that hold it, bytes]
        self.held = self.peak = self.total = 0

    def _pack(self, tensor):
        box = _Box(tensor.detach())  # an alias without history: the meter holds no graph
        storage = tensor.untyped_storage()
        address = storage.data_ptr()
        if address not in self._skip:
            block = self._blocks.setdefault(address, [0, storage.nbytes()])
            if block[0] == 0:
                self.held += block[1]
                self.total += block[1]
                self.peak = max(self.peak, self.held)
            block[0] += 1
            weakref.finalize(box, self._release, address).atexit = False
        return box

    def _unpack(self, box):
        return box.tensor

    def _release(self, address):
        block = self._blocks[address]
        block[0] -= 1
        if block[0] == 0:
            self.held -= self._blocks.pop(address)[1]


# <<< SavedBytes meter


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
    """The same starting networks, and an optimizer for each, for every experiment below."""
    gen, disc = copy.deepcopy(gen_start), copy.deepcopy(disc_start)
    return (
        gen,
        disc,
        torch.optim.SGD(gen.parameters(), 0.05),
        torch.optim.SGD(disc.parameters(), 0.05),
    )


print(f"real samples: mean {real.mean():.3f}, std {real.std():.3f}")

# %%
# The usual step needs no ``retain_graph``
# ----------------------------------------
#
# The discriminator's loss sees ``fake.detach()``: its backward pass stops at the detached
# samples and never enters the generator's graph, which stays intact. After the discriminator's
# update, a new discriminator forward pass on ``fake`` builds the graph the generator's loss
# walks back through. Every graph is walked once, by a plain :meth:`~torch.Tensor.backward`.


def usual_step(gen, disc, opt_gen, opt_disc, after_disc_backward=lambda: None):
    fake = gen(noise)
    loss_disc = bce(disc(real), is_real) + bce(disc(fake.detach()), is_fake)
    opt_disc.zero_grad()
    loss_disc.backward()
    after_disc_backward()  # a place to measure, used further down
    opt_disc.step()
    loss_gen = bce(disc(fake), is_real)  # a second forward pass, through the updated disc
    opt_gen.zero_grad()
    loss_gen.backward()
    opt_gen.step()
    return loss_disc, loss_gen


gen, disc, opt_gen, opt_disc = fresh_pair()
fake = gen(noise)
loss_disc = bce(disc(real), is_real) + bce(disc(fake.detach()), is_fake)
loss_disc.backward()
assert all(p.grad is None for p in gen.parameters())  # the generator was not reached
assert all(p.grad is not None for p in disc.parameters())

gen, disc, opt_gen, opt_disc = fresh_pair()
loss_disc, loss_gen = usual_step(gen, disc, opt_gen, opt_disc)
print(f"usual step ran: discriminator loss {loss_disc:.4f}, generator loss {loss_gen:.4f}")

# %%
# This settles a forum exchange about ``retain_variables`` (the old name of ``retain_graph``).
# One poster offered GAN training as the typical case for keeping the graph: the discriminator's
# loss is backpropagated first, so the variables must be kept for the generator's loss. Another
# replied that the two gradients are normally not taken from the same forward pass, since the
# two losses pull in opposite directions. The run above agrees with the second poster: the usual
# step walks no graph twice. The first poster's case exists only if one discriminator forward
# pass feeds both losses, and the rest of this script shows what that changes.
#
# Reusing one discriminator pass: without ``retain_graph`` it fails
# -----------------------------------------------------------------
#
# Now ``fake`` is not detached and ``disc(fake)`` is computed once for both losses. The
# discriminator's backward frees the saved tensors of ``disc(fake)`` and of the generator, which
# the generator's loss needs.

gen, disc, opt_gen, opt_disc = fresh_pair()
scores_fake = disc(gen(noise))
loss_disc = bce(disc(real), is_real) + bce(scores_fake, is_fake)
loss_gen = bce(scores_fake, is_real)
loss_disc.backward()
try:
    loss_gen.backward()
except RuntimeError as error:
    print(f"{type(error).__name__}: {error}")
    assert "backward through the graph a second time" in str(error)
else:
    raise AssertionError("the generator's backward through a freed graph was expected to fail")

# %%
# With ``retain_graph=True``, stepping the discriminator first fails too
# ----------------------------------------------------------------------
#
# Keeping the graph makes the second backward possible, but the order of the usual step (update
# the discriminator, then backpropagate the generator's loss) now breaks: the optimizer changes
# the discriminator's weights in place, and the retained graph saved those very weights for
# backward. Autograd notices through the tensors' version counters.

gen, disc, opt_gen, opt_disc = fresh_pair()
scores_fake = disc(gen(noise))
loss_disc = bce(disc(real), is_real) + bce(scores_fake, is_fake)
loss_gen = bce(scores_fake, is_real)
loss_disc.backward(retain_graph=True)
opt_disc.step()
try:
    loss_gen.backward()
except RuntimeError as error:
    print(f"{type(error).__name__}: {error}")
    assert "modified by an inplace operation" in str(error)
else:
    raise AssertionError("backward through weights changed in place was expected to fail")

# %%
# So the generator's backward has to come before the discriminator's update. The reused
# variant then looks like this. ``inputs=`` makes each backward fill only its own network's
# gradients; without it, the discriminator's loss would also write into the generator's
# ``.grad`` and the generator's loss into the discriminator's.


def reused_step(gen, disc, opt_gen, opt_disc, after_disc_backward=lambda: None):
    scores_fake = disc(gen(noise))
    loss_disc = bce(disc(real), is_real) + bce(scores_fake, is_fake)
    loss_gen = bce(scores_fake, is_real)
    opt_disc.zero_grad()
    opt_gen.zero_grad()
    loss_disc.backward(retain_graph=True, inputs=list(disc.parameters()))
    after_disc_backward()
    loss_gen.backward(inputs=list(gen.parameters()))
    opt_disc.step()
    opt_gen.step()
    return loss_disc, loss_gen


gen, disc, opt_gen, opt_disc = fresh_pair()
loss_disc, loss_gen = reused_step(gen, disc, opt_gen, opt_disc)
print(f"reused step ran: discriminator loss {loss_disc:.4f}, generator loss {loss_gen:.4f}")

# %%
# What ``inputs=`` prevents: a plain first backward also fills the generator's ``.grad``, and a
# plain second backward adds the generator's objective, which pushes the other way, into the
# discriminator's gradient (:doc:`../docs/backward-twice` shows that adding on its own).

gen, disc, opt_gen, opt_disc = fresh_pair()
scores_fake = disc(gen(noise))
loss_disc = bce(disc(real), is_real) + bce(scores_fake, is_fake)
own = torch.autograd.grad(loss_disc, list(disc.parameters()), retain_graph=True)
loss_disc.backward(retain_graph=True)
assert all(p.grad is not None for p in gen.parameters())  # the generator got some too
bce(scores_fake, is_real).backward()
mixed = [p.grad for p in disc.parameters()]
difference = max((g - h).abs().max().item() for g, h in zip(own, mixed))
print(f"discriminator gradient, own loss vs both losses: max abs diff {difference:.4f}")
assert difference > 1e-3

# %%
# The reused step computes a different generator gradient
# -------------------------------------------------------
#
# Both steps give the discriminator the same gradient. The generator's gradient is another
# matter: the usual step takes it through the discriminator *after* its update, the reused step
# through the discriminator *before* it, because that is the forward pass it kept. The reused
# step is a different algorithm (simultaneous rather than alternating updates), not the same one
# done more cheaply.


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
disc_same = all(torch.equal(g, h) for g, h in zip(usual["disc"], reused["disc"]))
gen_diff = max((g - h).abs().max().item() for g, h in zip(usual["gen"], reused["gen"]))
sizes = [max(g.abs().max().item() for g in seen["gen"]) for seen in (usual, reused)]
print(f"discriminator gradients bitwise equal: {disc_same}")
print(f"generator gradients: max abs diff {gen_diff:.4f}")
print(f"largest generator gradient entry: usual {sizes[0]:.4f}, reused {sizes[1]:.4f}")
assert disc_same
assert gen_diff > 0.1 * min(sizes)

# %%
# The reused generator gradient is exactly the one a fresh forward pass through the
# discriminator before its update would give: the difference above comes from the update alone.

gen, disc, _, _ = fresh_pair()
before_update = torch.autograd.grad(bce(disc(gen(noise)), is_real), list(gen.parameters()))
assert all(torch.equal(g, h) for g, h in zip(before_update, reused["gen"]))
print("reused generator gradient == gradient through the not-yet-updated discriminator")

# %%
# What the retained graph costs
# -----------------------------
#
# Bytes of saved tensors, measured with ``SavedBytes`` over one step of each kind: everything
# saved during the step, the most held at any moment, and what is still held right after the
# discriminator's backward, before the generator's.


def byte_counts(step):
    gen, disc, opt_gen, opt_disc = fresh_pair()
    meter = SavedBytes(skip=[*gen.parameters(), *disc.parameters()])
    between = []
    with meter:
        step(gen, disc, opt_gen, opt_disc, after_disc_backward=lambda: between.append(meter.held))
    return {"saved in total": meter.total, "peak held": meter.peak, "held between": between[0]}


steps = {"usual": usual_step, "reused": reused_step}
counts = {name: byte_counts(step) for name, step in steps.items()}
for name, count in counts.items():
    print(f"{name:>6}: " + ", ".join(f"{key} {value} B" for key, value in count.items()))
assert counts["reused"]["saved in total"] < counts["usual"]["saved in total"]
assert counts["reused"]["peak held"] == counts["usual"]["peak held"]
assert counts["reused"]["held between"] > counts["usual"]["held between"]

gen, disc, _, _ = fresh_pair()
everything = [*gen.parameters(), *disc.parameters()]
meter_gen, meter_disc = SavedBytes(skip=everything), SavedBytes(skip=everything)
with meter_gen:
    fake = gen(noise)
with meter_disc:
    scores_fake = disc(fake.detach())
print(f"one generator forward saves {meter_gen.held} B")
print(f"one discriminator forward saves {meter_disc.held} B")
difference = counts["usual"]["saved in total"] - counts["reused"]["saved in total"]
print(f"the usual step saves {difference} B more in total")
assert counts["usual"]["held between"] == meter_gen.held
assert 0.9 * difference < meter_disc.held < difference

# %%
# The reused step saves less in total: almost all of the difference is the one discriminator
# forward pass it skips (the rest is loss inputs its two losses share). Its peak is the same
# here. What ``retain_graph`` changes is *when* memory is released: after the
# discriminator's backward, the usual step holds only the generator's graph, the reused step
# still holds everything. Time per step, fastest of 7 rounds of 30 steps, the two kinds taking
# turns:


def fastest_seconds_per_step(rounds=7, repeat=30):
    best = dict.fromkeys(steps, float("inf"))
    pairs = {name: fresh_pair() for name in steps}
    for _ in range(rounds):
        for name, step in steps.items():
            start = time.perf_counter()
            for _ in range(repeat):
                step(*pairs[name])
            best[name] = min(best[name], (time.perf_counter() - start) / repeat)
    return best


micros = {name: 1e6 * seconds for name, seconds in fastest_seconds_per_step().items()}
labels = ["saved in total", "peak held", "held between"]
# The site's colours: the usual step (with detach) and the reused one (with retain_graph).
USUAL, REUSED = "#1a9c6b", "#8a63d2"
fig, (ax_time, ax_bytes) = plt.subplots(2, 1, figsize=(4.2, 5.6), height_ratios=[1, 2])
ax_time.barh(list(micros), list(micros.values()), color=[USUAL, REUSED])
ax_time.set(title="Time per step", xlabel="µs per step (fastest of 7 rounds)")
width = 0.38
for offset, (name, color) in zip((-width / 2, width / 2), (("usual", USUAL), ("reused", REUSED))):
    positions = [i + offset for i in range(len(labels))]
    ax_bytes.bar(
        positions, [counts[name][key] / 1024 for key in labels], width, label=name, color=color
    )
ax_bytes.set_xticks(
    range(len(labels)), ["saved\nin total", "peak\nheld", "held after\nD's backward"]
)
ax_bytes.set(
    title="The reused step holds its graph\nbetween the two backward calls",
    ylabel="KiB saved for backward",
)
ax_bytes.set_ylim(top=1.35 * max(max(count.values()) for count in counts.values()) / 1024)
ax_bytes.legend(title="step", ncols=2, loc="upper center")
fig.tight_layout()
plt.show()

# %%
# Training with the usual step
# ----------------------------
#
# 120 usual steps with Adam, a fresh batch of real samples and noise each time. The generator's
# samples start near 0 and end up centred near 3, the mean of the real data.

torch.manual_seed(1)
gen, disc = copy.deepcopy(gen_start), copy.deepcopy(disc_start)
opt_gen = torch.optim.Adam(gen.parameters(), lr=3e-3, betas=(0.5, 0.999))
opt_disc = torch.optim.Adam(disc.parameters(), lr=3e-3, betas=(0.5, 0.999))
probe = torch.randn(2000, 4)
with torch.no_grad():
    samples_before = gen(probe).squeeze(1)
history = []
for _ in range(120):
    real = 3 + 0.5 * torch.randn(BATCH, 1)  # a new batch for usual_step to read
    noise = torch.randn(BATCH, 4)
    history.append([loss.item() for loss in usual_step(gen, disc, opt_gen, opt_disc)])
with torch.no_grad():
    samples_after = gen(probe).squeeze(1)
print(f"generated mean before {samples_before.mean():.2f}, after {samples_after.mean():.2f}")
print(f"generated std  before {samples_before.std():.2f}, after {samples_after.std():.2f}")
assert abs(samples_before.mean()) < 0.5
assert abs(samples_after.mean() - 3) < 0.2

# %%
# The losses during training, and the generated samples before and after:

INK, NEUTRAL = "#24292f", "#808080"
fig, (ax_loss, ax_hist) = plt.subplots(2, 1, figsize=(4.2, 5.6))
ax_loss.plot([d for d, _ in history], color=INK, label="discriminator")
ax_loss.plot([g for _, g in history], color=NEUTRAL, linestyle="--", label="generator")
ax_loss.set(title="Losses, usual step", xlabel="training step", ylabel="binary cross-entropy")
ax_loss.legend()
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

# sphinx_gallery_thumbnail_number = 2

# %%
# What to take away
# -----------------
#
# * The usual GAN step detaches the fake samples for the discriminator and runs the
#   discriminator again for the generator: no graph is walked twice, no ``retain_graph``.
# * ``retain_graph=True`` is needed only when one discriminator forward pass feeds both losses.
#   Then both backward calls must come before the discriminator's update, each should be limited
#   to its own network's parameters, and the generator learns against the discriminator as it
#   was before the update, a different training algorithm.
# * :doc:`../docs/several-losses` treats several losses on one forward pass in general, and the
#   :doc:`error reference <../docs/errors>` and the page on
#   :ref:`neighbouring errors <errors-inplace>` list both errors met here with their other causes.
