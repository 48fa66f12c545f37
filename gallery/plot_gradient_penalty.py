"""
Gradient penalty: why it needs ``create_graph=True``
=====================================================

A WGAN-GP critic is trained with a penalty on the norm of its gradient with respect to its input.
That penalty is itself a function of a gradient, so to train the critic on it autograd has to
differentiate through a backward pass. This example builds a tiny critic and shows that without
``create_graph=True`` the penalty silently adds nothing to the critic's weight gradients (or fails
outright if it is backpropagated on its own), that ``create_graph=True`` keeps the graph as well,
what that kept graph holds, and that the resulting weight gradient matches a finite-difference
estimate.

.. index:: gradient penalty, WGAN-GP, critic, create_graph=True, double backward
"""

# %%
# A tiny critic and the interpolated points
# -----------------------------------------
#
# The critic maps 2-D points to a score. The penalty is evaluated at random points on the segments
# between real and generated samples; those points need ``requires_grad`` so that autograd can
# differentiate the score with respect to them. Everything is in float64 so the finite differences
# at the end are accurate.

import matplotlib.pyplot as plt
import numpy as np
import torch
from torch import nn
from torch.autograd.graph import saved_tensors_hooks

torch.manual_seed(0)
f64 = torch.float64

critic = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 1)).to(f64)
real = torch.randn(8, 2, dtype=f64) + torch.tensor([2.0, -1.0], dtype=f64)
fake = torch.randn(8, 2, dtype=f64)
mix = torch.rand(8, 1, dtype=f64)
between = (mix * real + (1 - mix) * fake).requires_grad_()
weight_count = sum(p.numel() for p in critic.parameters())
print(f"critic parameters: {weight_count}, interpolated points: {tuple(between.shape)}")
assert between.requires_grad and between.is_leaf


def wasserstein_term():
    """The critic's usual objective: score generated samples low and real ones high."""
    return critic(fake).mean() - critic(real).mean()


def penalty(create_graph):
    """Mean of (‖∂score/∂x‖ - 1)² over the interpolated points."""
    (input_grad,) = torch.autograd.grad(critic(between).sum(), between, create_graph=create_graph)
    return ((input_grad.norm(dim=1) - 1) ** 2).mean()


# %%
# Without ``create_graph``: the penalty is a constant
# ---------------------------------------------------
#
# By default, :external:py:func:`torch.autograd.grad` returns tensors without autograd history:
# the input gradient has no ``grad_fn`` and does not require grad, so nothing built from it
# remembers how it depends on the critic's weights.

flat_penalty = penalty(create_graph=False)
print(f"penalty = {flat_penalty.item():.6f}")
print(f"requires_grad = {flat_penalty.requires_grad}, grad_fn = {flat_penalty.grad_fn}")
assert not flat_penalty.requires_grad and flat_penalty.grad_fn is None

# %%
# Backpropagating that penalty on its own fails, because there is no graph to go through (the
# page on :ref:`neighbouring errors <errors-no-grad-fn>` lists this error's other causes):

try:
    flat_penalty.backward()
except RuntimeError as error:
    print(f"{type(error).__name__}: {error}")
    assert "does not require grad and does not have a grad_fn" in str(error)
else:
    raise AssertionError("backward() on a penalty without a graph was expected to fail")

# %%
# The usual way to use it, added to the critic's loss, fails silently instead: the sum
# backpropagates without complaint, and the weight gradients are *exactly* those of the Wasserstein
# term alone. The penalty contributed nothing.

critic.zero_grad(set_to_none=True)
wasserstein_term().backward()
without_penalty = [p.grad.clone() for p in critic.parameters()]

critic.zero_grad(set_to_none=True)
(wasserstein_term() + 10 * penalty(create_graph=False)).backward()
with_flat_penalty = [p.grad.clone() for p in critic.parameters()]

same = all(torch.equal(a, b) for a, b in zip(without_penalty, with_flat_penalty))
print(f"weight gradients identical with and without the penalty: {same}")
assert same

# %%
# With ``create_graph=True``: the penalty reaches the weights
# -----------------------------------------------------------
#
# Now the input gradient is itself a node in a graph, and the penalty's gradient with respect to
# the critic's weights is not zero.

critic.zero_grad(set_to_none=True)
live_penalty = penalty(create_graph=True)
print(f"penalty = {live_penalty.item():.6f}, grad_fn = {type(live_penalty.grad_fn).__name__}")
live_penalty.backward()
for name, p in critic.named_parameters():
    grad_norm = "None" if p.grad is None else f"{p.grad.norm().item():.6f}"
    print(f"{name:>8}: norm of the penalty's gradient = {grad_norm}")
assert torch.isclose(live_penalty, flat_penalty)
assert all(p.grad.norm() > 0 for p in (critic[0].weight, critic[0].bias, critic[2].weight))

# %%
# The last bias is the one parameter the penalty cannot reach: shifting every score by a constant
# leaves the score's gradient with respect to the input unchanged, so autograd gives it no
# ``.grad`` at all.

print(f"critic[2].bias.grad = {critic[2].bias.grad}")
assert critic[2].bias.grad is None

# %%
# ``create_graph=True`` also keeps the graph
# ------------------------------------------
#
# ``retain_graph`` defaults to the value of ``create_graph`` (:doc:`../docs/retain-and-create-graph`
# shows that default on its own). After a gradient computed with
# ``create_graph=True``, the same score can be differentiated again; after the default call, a
# second pass hits freed saved tensors.

score = critic(between).sum()
(first,) = torch.autograd.grad(score, between, create_graph=True)
(second,) = torch.autograd.grad(score, between)
print(f"second pass after create_graph=True gives the same gradient: {torch.equal(first, second)}")
assert torch.equal(first, second)

score = critic(between).sum()
torch.autograd.grad(score, between)
try:
    torch.autograd.grad(score, between)
except RuntimeError as error:
    print(f"{type(error).__name__}: {error}")
    assert "backward through the graph a second time" in str(error)
else:
    raise AssertionError("a second pass after a default autograd.grad was expected to fail")

# %%
# The default is not just a convenience. The penalty's own backward pass runs through the gradient
# graph *and* through the critic's forward graph underneath it (the input gradient depends on the
# weights through the forward activations). Asking for ``create_graph=True`` but
# ``retain_graph=False`` frees the forward part, and the penalty can no longer be backpropagated:

score = critic(between).sum()
(input_grad,) = torch.autograd.grad(score, between, create_graph=True, retain_graph=False)
broken_penalty = ((input_grad.norm(dim=1) - 1) ** 2).mean()
try:
    broken_penalty.backward()
except RuntimeError as error:
    print(f"{type(error).__name__}: {error}")
    assert "backward through the graph a second time" in str(error)
else:
    raise AssertionError("the penalty's backward was expected to need the freed forward graph")

# %%
# What the kept graph holds
# -------------------------
#
# A :external:py:class:`torch.autograd.graph.saved_tensors_hooks` pack hook is handed the
# tensors that built-in operations save for their backward pass, with two exceptions: a Python
# number that an operation saves (as in ``v * 3.0``) is wrapped in a zero-dimensional tensor that
# bypasses the hook, and a custom :external:py:class:`torch.autograd.Function` that keeps a tensor
# as an attribute of ``ctx`` hides it from the hook (:ref:`what-the-meter-misses` shows both).
# This critic has neither, which the check after the table confirms. Counting the hooked bytes
# shows what one critic step keeps alive until its final ``backward()``. The critic's loss alone
# saves its forward activations. The penalty adds a second forward (on the interpolated points),
# the tensors saved *while computing the gradient*, and the penalty arithmetic. A tensor saved by
# two operations is counted twice. (:doc:`../docs/what-it-costs` counts saved tensors the same way
# for ``retain_graph=True``.)


def saved_bytes(step):
    """Bytes handed to the pack hook while ``step()`` runs, and the value ``step()`` returns."""
    sizes = []

    def pack(tensor):
        sizes.append(tensor.numel() * tensor.element_size())
        return tensor

    with saved_tensors_hooks(pack, lambda tensor: tensor):
        result = step()
    return sum(sizes), result


loss_bytes, _ = saved_bytes(wasserstein_term)
score_bytes, score = saved_bytes(lambda: critic(between).sum())
grad_bytes, (input_grad,) = saved_bytes(
    lambda: torch.autograd.grad(score, between, create_graph=True)
)
norm_bytes, kept_penalty = saved_bytes(lambda: ((input_grad.norm(dim=1) - 1) ** 2).mean())

parts = {
    "loss forward": loss_bytes,
    "penalty forward": score_bytes,
    "gradient graph": grad_bytes,
    "penalty arithmetic": norm_bytes,
}
for name, size in parts.items():
    print(f"{name:>18}: {size:5d} bytes")
total = sum(parts.values())
print(f"{'loss + penalty':>18}: {total:5d} bytes ({total / loss_bytes:.1f}× the loss alone)")
assert grad_bytes > 0 and total > 2 * loss_bytes

# %%
# The hook missed nothing here: reading every saved tensor back from the graph's nodes (their
# ``_saved_*`` attributes) gives the same bytes for the penalty's three parts, and none of them is
# a zero-dimensional wrapped Python number.


def saved_in_graph(*roots):
    """Bytes of the tensors stored in the ``_saved_*`` attributes of the nodes behind ``roots``."""
    seen, todo, sizes, scalars = set(), [root.grad_fn for root in roots], [], 0
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        for name in dir(node):
            value = getattr(node, name) if name.startswith("_saved_") else None
            for item in value if isinstance(value, (tuple, list)) else [value]:
                if isinstance(item, torch.Tensor):
                    sizes.append(item.numel() * item.element_size())
                    scalars += item.dim() == 0
        todo.extend(next_node for next_node, _ in node.next_functions)
    return sum(sizes), scalars


in_graph, zero_dim = saved_in_graph(score, kept_penalty)
hooked = score_bytes + grad_bytes + norm_bytes
print(f"seen by the pack hook: {hooked} bytes; stored in the graph: {in_graph} bytes")
print(f"zero-dimensional saved tensors: {zero_dim}")
assert in_graph == hooked and zero_dim == 0
kept_penalty.backward()  # frees everything counted above

# %%
# The "gradient graph" share exists only because of ``create_graph=True``: the same gradient
# computed without it saves nothing.

score = critic(between).sum()
plain_grad_bytes, _ = saved_bytes(lambda: torch.autograd.grad(score, between))
print(f"bytes saved while computing the gradient without create_graph: {plain_grad_bytes}")
assert plain_grad_bytes == 0

# %%
# Checked against finite differences
# ----------------------------------
#
# The penalty's gradient with respect to one weight, from autograd's double backward, should match
# a central difference of the penalty itself. The penalty value needs no graph, so the finite
# difference uses ``create_graph=False``.

weight = critic[0].weight
row, col = 3, 1
step = 1e-6


def penalty_at(value):
    with torch.no_grad():
        weight[row, col] = value
    return penalty(create_graph=False).item()


original = weight[row, col].item()
critic.zero_grad(set_to_none=True)
penalty(create_graph=True).backward()
autograd_slope = weight.grad[row, col].item()
finite_slope = (penalty_at(original + step) - penalty_at(original - step)) / (2 * step)
penalty_at(original)  # put the weight back
print(f"autograd:           {autograd_slope:.8f}")
print(f"finite difference:  {finite_slope:.8f}")
assert abs(autograd_slope - finite_slope) <= 1e-6 * max(1.0, abs(finite_slope))
assert abs(finite_slope) > 1e-3  # the slope is really there; without create_graph it was lost

# %%
# The same comparison over a range of values for that weight: autograd's slope (with
# ``create_graph=True``) follows the finite differences everywhere, while without
# ``create_graph`` the penalty gives the weight no gradient at all.

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

# The site's colours: the fix (create_graph=True) and what the penalty loses without it.
FIX, FREED, NEUTRAL, INK = "#1a9c6b", "#e0542c", "#808080", "#24292f"
fig, ax = plt.subplots(figsize=(4.2, 4.4), layout="constrained")
ax.plot(values, autograd_slopes, color=FIX, label="autograd, create_graph=True")
ax.plot(values[::4], finite_slopes[::4], "o", color=INK, label="central difference")
ax.axhline(0.0, color=FREED, linestyle="--", label="without create_graph")
ax.axvline(original, color=NEUTRAL, linewidth=1, linestyle=":")
ax.set(
    xlabel=f"weight [{row}, {col}] of the first layer\n(dotted: its value after seeding)",
    ylabel="∂ penalty / ∂ weight",
    title="The penalty's gradient reaches\nthe weight only with create_graph",
)
fig.legend(loc="outside lower left")
plt.show()

# %%
# And the bytes each part of a critic step saves for its backward pass:

fig, ax = plt.subplots(figsize=(4.2, 3.6), layout="constrained")
left = 0
# The parts stacked in shades of the "saved" colour, dark to light.
shades = ["#1c4f94", "#2f80ed", "#7fb0f4", "#c5dbf9"]
for (name, size), colour in zip(parts.items(), shades):
    ax.barh(["loss +\npenalty"], [size], left=left, color=colour, label=name)
    left += size
ax.barh(["loss\nonly"], [loss_bytes], color=shades[0])
times = total / loss_bytes
ax.set(
    xlabel="bytes saved for backward (float64)",
    title=f"With the penalty, a critic step saves\n{times:.1f}× the bytes of the loss alone",
)
fig.legend(loc="outside lower left", title="loss + penalty saves in")
plt.show()
