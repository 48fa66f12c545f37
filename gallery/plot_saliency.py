"""
Saliency maps: input gradients
==============================

One saliency map needs no ``retain_graph``: one forward, one backward (or
``torch.autograd.grad``) from the class score to the image. For every class from one forward
pass, make one ``torch.autograd.grad`` call with ``is_grads_batched=True``; one call per class
needs ``retain_graph=True`` on all but the last, and with ``backward()`` a reset of ``x.grad``
between classes. No optimizer here: the maps are compared with maps from fresh forward passes.

.. index:: saliency map, gradient with respect to the input, input gradient, class score
"""

# %%
# Each 8×8 image holds a noisy row (class 0), column (1) or wrapped diagonal (2). A map: the
# gradient of the true class's logit with respect to the pixels.

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)  # tiny tensors
CLASSES = ["row", "column", "diagonal"]


def make_lines(count, noise=0.3):
    labels = torch.randint(0, 3, (count,))
    where = torch.randint(0, 8, (count, 1, 1))
    r, c = torch.arange(8).view(1, 8, 1), torch.arange(8).view(1, 1, 8)
    shapes = torch.stack(
        [
            (r == where).expand(count, 8, 8),
            (c == where).expand(count, 8, 8),
            (c - r) % 8 == where,
        ],
        dim=1,
    ).float()
    return shapes[torch.arange(count), labels] + noise * torch.randn(count, 8, 8), labels


train_images, train_labels = make_lines(1024)
net = nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.Tanh(), nn.Linear(32, 3))
for step in range(100):
    loss = F.cross_entropy(net(train_images), train_labels)
    grads = torch.autograd.grad(loss, list(net.parameters()))
    with torch.no_grad():
        for param, grad in zip(net.parameters(), grads):
            param -= 1.0 * grad

test_images, test_labels = make_lines(200)
with torch.no_grad():
    accuracy = (net(test_images).argmax(1) == test_labels).float().mean().item()
print(f"accuracy on 200 new images {accuracy:.1%}")
assert accuracy > 0.9
image, label = test_images[:1], test_labels[0].item()
with torch.no_grad():
    logits = net(image)[0]
print(f"true class: {CLASSES[label]}, predicted: {CLASSES[logits.argmax().item()]}")
assert logits.argmax().item() == label

# %%
# One map: ``requires_grad_()`` on the input, then ``backward()`` or ``autograd.grad``
# ------------------------------------------------------------------------------------
#
# With :external:py:meth:`torch.Tensor.requires_grad_` on the input, ``backward()`` on the score
# puts the map in the input's ``.grad``, and fills every weight's ``.grad`` too;
# :external:py:func:`torch.autograd.grad` returns the same map and leaves every ``.grad`` alone.

x = image.clone().requires_grad_()
net(x)[0, label].backward()
filled = all(param.grad is not None for param in net.parameters())
net.zero_grad(set_to_none=True)
y = image.clone().requires_grad_()
(saliency,) = torch.autograd.grad(net(y)[0, label], y)
untouched = y.grad is None and all(param.grad is None for param in net.parameters())
print(
    f"backward: weights' .grad filled {filled}; autograd.grad: same map {torch.equal(saliency, x.grad)}, ",
    end="",
)
print(f".grad untouched {untouched}")
assert filled and torch.equal(saliency, x.grad) and untouched

# %%
# Maps for every class from one forward pass
# ------------------------------------------
#
# Differentiating each class score in turn fails at the second: the first backward freed what
# the forward saved.

x = image.clone().requires_grad_()
logits = net(x)
logits[0, 0].backward()
try:
    logits[0, 1].backward()
except RuntimeError as error:
    print(f"{type(error).__name__}: {str(error).partition(' (')[0]}")
    assert "graph a second time" in str(error)
else:
    raise AssertionError("the second backward was expected to fail")

# %%
# The reference maps: one forward pass per class. One ``torch.autograd.grad`` call per class on
# a single pass, ``retain_graph=True`` on all but the last, gives exactly the same maps: a
# deliberate repetition over one graph, where ``retain_graph=True`` is right.


def fresh_map(k):
    x = image.clone().requires_grad_()
    return torch.autograd.grad(net(x)[0, k], x)[0][0]


maps = [fresh_map(k) for k in range(3)]
x = image.clone().requires_grad_()
logits = net(x)
retained = [torch.autograd.grad(logits[0, k], x, retain_graph=k < 2)[0][0] for k in range(3)]
same = all(torch.equal(a, b) for a, b in zip(retained, maps))
print(f"retain_graph maps equal the reference maps: {same}; x.grad: {x.grad}")
assert same and x.grad is None

# %%
# With ``backward(retain_graph=True)``, gradients *accumulate* in ``x.grad``
# (:doc:`../docs/backward-twice`): unreset, the second "map" is the sum of the first two; with
# ``x.grad = None`` between classes, each map is exact. The weights' ``.grad`` fill up either
# way, for a training loop to clear.

for reset in (False, True):
    x = image.clone().requires_grad_()
    logits, got = net(x), []
    for k in range(3):
        x.grad = None if reset else x.grad
        logits[0, k].backward(retain_graph=k < 2)
        got.append(x.grad[0].clone())
    exact = all(torch.equal(a, b) for a, b in zip(got, maps))
    summed = torch.equal(got[1], maps[0] + maps[1])
    print(f"reset {reset}: every map exact {exact}; after class 1, map 0 + map 1: {summed}")
    assert exact == reset and summed != reset
assert net[3].weight.grad is not None
net.zero_grad(set_to_none=True)

# %%
# One call does all three: ``grad_outputs`` holds a one-hot row per class, and
# ``is_grads_batched=True`` makes one vmapped backward (:external:py:func:`torch.vmap`), one
# vector-Jacobian product per row. No ``retain_graph``; the maps agree with the reference within
# 1e-6:

x = image.clone().requires_grad_()
logits = net(x)
one_hot_rows = torch.eye(3)[:, None, :]  # (class, batch of 1, classes)
(batched,) = torch.autograd.grad(logits, x, grad_outputs=one_hot_rows, is_grads_batched=True)
agree = all(torch.allclose(batched[k, 0], maps[k], atol=1e-6) for k in range(3))
print(f"batched maps {tuple(batched.shape)}, agree: {agree}")
assert batched.shape == (3, *x.shape) and agree

# %%
# What the maps show
# ------------------
#
# Red pixels raise the class score when brightened, blue ones lower it.

fig, axes = plt.subplots(2, 2, figsize=(4.2, 4.8), layout="constrained")
axes = axes.ravel()
axes[0].imshow(image[0].numpy(), cmap="gray")
axes[0].set_title(f"input (a {CLASSES[label]})")
limit = max(m.abs().max().item() for m in maps)
for k, ax in enumerate(axes[1:]):
    shown = ax.imshow(maps[k].numpy(), cmap="RdBu_r", vmin=-limit, vmax=limit)
    ax.set_title(f"∂ {CLASSES[k]} score")
for ax in axes:
    ax.set(xticks=[], yticks=[])
axes[0].set(xlabel="pixel column", ylabel="pixel row")
fig.colorbar(shown, ax=axes, shrink=0.8, label="∂ score / ∂ pixel")
fig.suptitle("A saliency map per class,\nall from one forward pass")
plt.show()
