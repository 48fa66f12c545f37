"""
Style transfer: one summed backward
===================================

The fix: add the content and style losses and call ``backward()`` once, as the current
neural-style tutorial does. Its 2017 versions called ``backward()`` in each loss module, with
``retain_variables=True``, then ``retain_graph=True``. Rebuilt on a tiny image: both train the
same, up to rounding, and the old pattern keeps the graph alive after its last call.

.. index:: style transfer, neural style transfer, content loss, style loss
"""

# %%
# Two frozen random convolutions stand in for a pretrained network; the content is a disc, the
# style stripes. ``gram``: a feature map's channel correlations. A content loss on the deeper
# feature map and a style loss per map, each divided by its value on the starting image.

import contextlib

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


features = nn.ModuleList([nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 16, 3, padding=1, stride=2)])
features.requires_grad_(False)


def feature_maps(image):
    first = F.relu(features[0](image))
    return first, F.relu(features[1](first))


def gram(feature_map):
    _, channels, height, width = feature_map.shape
    flat = feature_map.reshape(channels, height * width)
    return flat @ flat.t() / (channels * height * width)


rows, cols = torch.meshgrid(torch.linspace(-1, 1, 24), torch.linspace(-1, 1, 24), indexing="ij")
content_image = torch.stack(
    [(rows**2 + cols**2 < 0.4).float(), (cols > 0).float(), torch.full_like(rows, 0.3)]
).unsqueeze(0)
style_image = 0.5 + 0.5 * torch.stack(
    [torch.sin(7 * cols), torch.sin(7 * (rows + cols)), torch.cos(7 * rows)]
).unsqueeze(0)
with torch.no_grad():
    content_target = feature_maps(content_image)[1]
    style_targets = [gram(f) for f in feature_maps(style_image)]
start_image = (content_image + 0.1 * torch.randn_like(content_image)).clamp(0, 1)


def raw_losses(image):
    first, second = feature_maps(image)
    content = F.mse_loss(second, content_target)
    style = [F.mse_loss(gram(f), t) for f, t in zip((first, second), style_targets)]
    return [content, *style]


with torch.no_grad():
    scales = [loss.item() for loss in raw_losses(start_image)]


def losses(image):
    return [loss / scale for loss, scale in zip(raw_losses(image), scales)]


# %%
# The checks' reference (:doc:`plot_how_examples_are_checked`) writes the same loss apart from
# ``losses``: its own convolutions, Gram matrices, targets and scales.


def layers(x):
    first = F.conv2d(x, features[0].weight, features[0].bias, padding=1)
    first = first * (first > 0)
    second = F.conv2d(first, features[1].weight, features[1].bias, padding=1, stride=2)
    return first, second * (second > 0)


def grams(x):
    return [torch.einsum("bchw,bdhw->cd", f, f) / f.numel() for f in layers(x)]


def unscaled(x):
    return [
        ((layers(x)[1] - layers(content_image)[1]) ** 2).mean(),
        *(((g - t) ** 2).mean() for g, t in zip(grams(x), grams(style_image))),
    ]


at_start = [value.item() for value in unscaled(start_image)]


def reference(step):
    return sum(value / start for value, start in zip(unscaled(image), at_start))


# %%
# The old pattern: one backward per loss, graph retained
# ------------------------------------------------------
#
# The losses share the forward pass, so without ``retain_graph=True`` the second backward fails:

image = start_image.clone().requires_grad_(True)
content, style_1, style_2 = losses(image)
content.backward()
try:
    style_1.backward()
except RuntimeError as error:
    print(f"{type(error).__name__}: {str(error).partition(' (')[0]}")
    assert "graph a second time" in str(error)
else:
    raise AssertionError("the second backward was expected to fail")

# %%
# That is why the tutorial kept the graph (asked below): the losses were backpropagated one by one.
# Its modules passed the flag on *every* call, the last included, so the graph outlives the last
# call: a fourth backward runs. Checked, the old pattern trains right:

image = start_image.clone().requires_grad_(True)
separate_losses = losses(image)
for loss in separate_losses:
    loss.backward(retain_graph=True)
grad_separate = image.grad.clone()
separate_losses[0].backward()  # a fourth backward runs
assert not torch.equal(image.grad, grad_separate)

image = start_image.clone().requires_grad_(True)
optimizer = torch.optim.Adam([image], lr=0.03)
with checked(optimizer, reference, image=image):
    for _ in range(3):
        optimizer.zero_grad()
        for loss in losses(image):
            loss.backward(retain_graph=True)
        optimizer.step()

# %%
# The current pattern: add the losses, call backward once
# -------------------------------------------------------
#
# Later versions of the tutorial (since its update for PyTorch 0.4; :doc:`../docs/history`)
# call backward once on the sum. The gradients agree up to rounding: the separate calls add three
# gradients in ``image.grad``, the sum adds them inside the graph, another order of additions.

image = start_image.clone().requires_grad_(True)
sum(losses(image)).backward()
difference = (grad_separate - image.grad).abs().max().item()
print(
    f"bitwise equal: {torch.equal(grad_separate, image.grad)}; max abs difference {difference:.1e}"
)
assert torch.allclose(grad_separate, image.grad, rtol=1e-5, atol=1e-7)

# %%
# 30 checked :class:`torch.optim.Adam` steps on the pixels, clamped to [0, 1], bring the summed
# loss (3 at the start) below 60 % of its start. Content, style, start, after 30 steps:

image = start_image.clone().requires_grad_(True)
assert abs(sum(losses(image)).item() - 3) < 1e-5
optimizer = torch.optim.Adam([image], lr=0.03)
with checked(optimizer, reference, image=image):
    for _ in range(30):
        optimizer.zero_grad()
        sum(losses(image)).backward()
        optimizer.step()
        with torch.no_grad():
            image.clamp_(0, 1)
with torch.no_grad():
    final = sum(losses(image)).item()
print(f"summed loss after 30 steps: {final:.3f}")
assert final < 0.6 * 3

fig, axes = plt.subplots(1, 4, figsize=(4.2, 1.4))
for ax, picture in zip(axes, (content_image, style_image, start_image, image.detach())):
    ax.imshow(picture[0].permute(1, 2, 0).clamp(0, 1).numpy())
    ax.axis("off")
plt.show()

# %%
# See also: :doc:`../docs/several-losses`. Asked in: `pytorch/tutorials#123
# <https://github.com/pytorch/tutorials/issues/123>`__, the :doc:`neural-style Q&A
# <../docs/ledger-neural-style-qa>`.
