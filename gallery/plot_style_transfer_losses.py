"""
Style transfer: one summed backward
===================================

The fix: add the content and style losses and call ``backward()`` once, as the current
neural-style tutorial does. Its early versions called ``loss.backward(retain_variables=True)`` in
each loss module. Rebuilt on a tiny image: both train the same, up to rounding, and the old
pattern keeps the graph alive after its last call.

.. index:: style transfer, neural style transfer, content loss, style loss
"""

# %%
# Two frozen random convolutions stand in for a pretrained network; the content is a disc, the
# style stripes. ``gram``: a feature map's channel correlations. ``checked``:
# :doc:`plot_how_examples_are_checked`.

import contextlib

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn

torch.set_num_threads(1)  # tiny tensors
torch.manual_seed(0)


@contextlib.contextmanager
def checked(optimizer, reference, **tensors):
    names = {p: name for name, p in tensors.items()}
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
    print(f"{'/'.join(tensors)}: {len(done)} steps checked")


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
print(
    f"image {tuple(start_image.shape)}, feature maps {[tuple(f.shape) for f in feature_maps(start_image)]}"
)

# %%
# Three losses, scaled
# --------------------
#
# A content loss on the deeper feature map and a style loss per map, each divided by its value
# on the starting image.


def raw_losses(image):
    first, second = feature_maps(image)
    content = F.mse_loss(second, content_target)
    style = [F.mse_loss(gram(f), t) for f, t in zip((first, second), style_targets)]
    return [content, *style]


with torch.no_grad():
    scales = [loss.item() for loss in raw_losses(start_image)]


def losses(image):
    return [loss / scale for loss, scale in zip(raw_losses(image), scales)]


names = ["content", "style, layer 1", "style, layer 2"]
print({name: round(loss.item(), 6) for name, loss in zip(names, losses(start_image))})

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
    raise AssertionError("no error")

# %%
# That answers a Q&A question about the tutorial (why keep the graph?): because the losses were
# backpropagated one by one. Its modules passed the flag on *every* call, the last included:

image = start_image.clone().requires_grad_(True)
separate_losses = losses(image)
for loss in separate_losses:
    loss.backward(retain_graph=True)
grad_separate = image.grad.clone()
print(f"three backward calls: gradient norm {grad_separate.norm():.6f}")

# %%
# and the graph stays alive after the last call: a fourth backward runs. In a loop checked
# against the summed loss at the current pixels, the old pattern trains right:

separate_losses[0].backward()
assert not torch.equal(image.grad, grad_separate)
print("a fourth backward ran")

image = start_image.clone().requires_grad_(True)
optimizer = torch.optim.Adam([image], lr=0.03)
with checked(optimizer, lambda step: sum(losses(image)), image=image):
    for _ in range(3):
        optimizer.zero_grad()
        for loss in losses(image):
            loss.backward(retain_graph=True)
        optimizer.step()

# %%
# The current pattern: add the losses, call backward once
# -------------------------------------------------------
#
# Later versions of the tutorial (from the PyTorch 0.4 update in 2018; :doc:`../docs/history`)
# call backward once on the sum. The gradients agree up to rounding: the separate calls add three
# gradients in ``image.grad``, the sum adds them inside the graph, another order of additions.

image = start_image.clone().requires_grad_(True)
sum(losses(image)).backward()
grad_summed = image.grad.clone()
difference = (grad_separate - grad_summed).abs().max().item()
print(f"bitwise equal: {torch.equal(grad_separate, grad_summed)}")
print(f"max abs difference {difference:.2e}, largest entry {grad_summed.abs().max():.2e}")
assert torch.allclose(grad_separate, grad_summed, rtol=1e-5, atol=1e-7)

# %%
# Optimising the image
# --------------------
#
# 30 checked :class:`torch.optim.Adam` steps on the pixels, clamped to [0, 1]:

image = start_image.clone().requires_grad_(True)
optimizer = torch.optim.Adam([image], lr=0.03)
history = []
with checked(optimizer, lambda step: sum(losses(image)), image=image):
    for _ in range(30):
        optimizer.zero_grad()
        parts = losses(image)
        sum(parts).backward()
        optimizer.step()
        with torch.no_grad():
            image.clamp_(0, 1)
        history.append([loss.item() for loss in parts])
with torch.no_grad():
    final = losses(image)
history.append([loss.item() for loss in final])
print({name: round(value, 3) for name, value in zip(names, history[-1])})
assert abs(sum(history[0]) - 3) < 1e-5
assert sum(history[-1]) < 0.6 * sum(history[0])
assert max(values[0] for values in history[:10]) > history[0][0]  # content rises at first

# %%
# The summed loss falls below 60 % of its start; the content loss rises at first:

INK, NEUTRAL = "#24292f", "#808080"
styles = [(INK, "-"), (NEUTRAL, "-"), (NEUTRAL, ":")]
fig, ax = plt.subplots(figsize=(4.2, 4.2), layout="constrained")
for index, (name, (color, style)) in enumerate(zip(names, styles)):
    ax.plot([values[index] for values in history], color=color, linestyle=style, label=name)
total = [sum(values) for values in history]
ax.plot(total, color=INK, linestyle="--", label="sum (what backward sees)")
ax.set(
    title="The summed loss falls; the content\nloss rises at first",
    xlabel="Adam step",
    ylabel="loss (1 at start)",
)
fig.legend(loc="outside lower left")
plt.show()

# %%
# The image before and after
# --------------------------
#
# Content, style, start, after 30 steps (24 × 24 pixels).

pictures = {
    "content": content_image,
    "style": style_image,
    "start": start_image,
    "after 30 steps": image.detach(),
}
fig, axes = plt.subplots(1, 4, figsize=(4.2, 1.2))
fig.subplots_adjust(wspace=0.3)
for ax, picture in zip(axes, pictures.values()):
    ax.imshow(picture[0].permute(1, 2, 0).clamp(0, 1).numpy())
    ax.axis("off")
plt.show()

# sphinx_gallery_thumbnail_number = 2

# %%
# See also: :doc:`../docs/several-losses`, the same comparison with two heads.
