"""
MAML's inner loop: create_graph=True, functional_call, and what .data silently drops
====================================================================================

MAML adapts a copy of the parameters with a gradient step on each task, then differentiates the
loss of the adapted parameters with respect to the original ones, through the gradient step.
For that path to exist, the inner gradient is taken with ``create_graph=True`` and the adapted
parameters are new tensors, ``p - lr * g``, fed to the model with
:func:`torch.func.functional_call`. Updating the parameters in place (through ``.data``,
``torch.no_grad()`` or an inner optimizer) raises no error: it silently turns second-order MAML
into first-order MAML, and overwrites the meta-parameters. ``retain_graph`` never has to be
written: ``create_graph=True`` already keeps the graph the outer backward walks a second time.

.. index:: MAML, meta-learning, few-shot, inner loop, outer loop, create_graph,
   second-order gradient, first-order MAML, FOMAML, functional_call, torch.func, fast weights,
   .data, learn2learn, higher
"""

# %%
# Sine tasks, a small network, and the inner loop
# -----------------------------------------------
#
# A task is a sine wave ``A sin(x + phase)`` with a random amplitude and phase; the model sees
# 10 points of it (the support set), takes one gradient step on them, and is scored on 10 other
# points (the query set). ``adapt`` does the inner step without touching the module: it takes
# the parameters as a dict, computes their gradient on the support loss, and returns new
# tensors ``p - lr * g``. :func:`torch.func.functional_call` runs the module with any such dict.

import copy

import matplotlib.pyplot as plt
import numpy as np
import torch
from torch import nn
from torch.func import functional_call

torch.manual_seed(0)
torch.set_num_threads(1)  # tiny tensors: one thread is fastest

INNER_LR, HIDDEN = 0.1, 24
mse = nn.functional.mse_loss


def sample_task(n_support=10, n_query=10, with_wave=False):
    amplitude, phase = 0.5 + 1.5 * torch.rand(()), np.pi * torch.rand(())
    x = 10 * torch.rand(n_support + n_query, 1) - 5
    y = amplitude * torch.sin(x + phase)
    support, query = (x[:n_support], y[:n_support]), (x[n_support:], y[n_support:])
    return (support, query, (amplitude, phase)) if with_wave else (support, query)


def make_model():
    return nn.Sequential(
        nn.Linear(1, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, 1)
    )


def adapt(model, params, support, create_graph=True):
    x, y = support
    loss = mse(functional_call(model, params, (x,)), y)
    grads = torch.autograd.grad(loss, list(params.values()), create_graph=create_graph)
    return {name: p - INNER_LR * g for (name, p), g in zip(params.items(), grads)}


def query_loss(model, params, query):
    x, y = query
    return mse(functional_call(model, params, (x,)), y)


model = make_model()
support, query = sample_task()
meta_params = dict(model.named_parameters())
loss = query_loss(model, adapt(model, meta_params, support), query)
second_order = torch.autograd.grad(loss, list(meta_params.values()))
print(f"query loss after one inner step: {loss.item():.4f}")

# %%
# ``second_order`` is the outer (meta-)gradient. To check that it is the exact MAML gradient,
# :func:`torch.func.grad` computes the same thing another way: the gradient of "adapt, then
# score" as one function of the meta-parameters, with the inner gradient taken by
# ``torch.func.grad`` too.


def adapted_query_loss(params, steps=1):
    inner = torch.func.grad(lambda p: mse(functional_call(model, p, (support[0],)), support[1]))
    for _ in range(steps):
        grads = inner(params)
        params = {name: p - INNER_LR * grads[name] for name, p in params.items()}
    return query_loss(model, params, query)


detached = {n: p.detach() for n, p in meta_params.items()}
reference = torch.func.grad(adapted_query_loss)(detached)
assert all(torch.allclose(g, reference[n], atol=1e-6) for g, n in zip(second_order, reference))
print("create_graph=True outer gradient = torch.func.grad of the whole adaptation, up to rounding")

# %%
# Where ``retain_graph`` comes in
# -------------------------------
#
# The outer backward walks the support loss's graph a second time: the inner gradient's graph
# (built because of ``create_graph=True``) uses the activations that graph saved. So the inner
# call must keep it, and it does: ``retain_graph`` defaults to the value of ``create_graph``.
# Forcing it off shows that it was needed (the question behind
# `oscarknagg/few-shot#6 <https://github.com/oscarknagg/few-shot/issues/6>`__ and
# `learnables/learn2learn#154 <https://github.com/learnables/learn2learn/issues/154>`__, whose
# ``adapt`` passes ``retain_graph=second_order, create_graph=second_order``):

x, y = support
inner_loss = mse(functional_call(model, meta_params, (x,)), y)
grads = torch.autograd.grad(
    inner_loss, list(meta_params.values()), create_graph=True, retain_graph=False
)
fast = {name: p - INNER_LR * g for (name, p), g in zip(meta_params.items(), grads)}
try:
    torch.autograd.grad(query_loss(model, fast, query), list(meta_params.values()))
except RuntimeError as error:
    print(f"{type(error).__name__}: {error}")
    assert "backward through the graph a second time" in str(error)
else:
    raise AssertionError("the outer gradient through the freed support graph was expected to fail")

# %%
# So in MAML code, leave ``retain_graph`` out and pass ``create_graph=True``; that is both flags.
# Several inner steps need nothing more: each step's ``autograd.grad`` keeps its own graph, and
# the outer backward walks them all. Three steps, checked against ``torch.func`` again:

params = meta_params
for _ in range(3):
    params = adapt(model, params, support)
three_steps = torch.autograd.grad(query_loss(model, params, query), list(meta_params.values()))
reference = torch.func.grad(adapted_query_loss)(detached, steps=3)
assert all(torch.allclose(g, reference[n], atol=1e-6) for g, n in zip(three_steps, reference))
print("3 inner steps, no retain_graph written: outer gradient = torch.func.grad, up to rounding")

# %%
# Forgetting ``create_graph``: first-order MAML, silently
# -------------------------------------------------------
#
# Without ``create_graph=True`` the inner gradients come back as constants. The adapted
# parameters still depend on the meta-parameters through ``p - lr * g``, so the outer gradient
# exists and nothing fails, but the path through ``g`` (the second-order term) is gone. That is
# first-order MAML, and readers of a popular implementation found that it computed this
# (`dragen1860/MAML-Pytorch#32 <https://github.com/dragen1860/MAML-Pytorch/issues/32>`__,
# `#59 <https://github.com/dragen1860/MAML-Pytorch/issues/59>`__,
# `#63 <https://github.com/dragen1860/MAML-Pytorch/issues/63>`__).

loss = query_loss(model, adapt(model, meta_params, support, create_graph=False), query)
first_order = torch.autograd.grad(loss, list(meta_params.values()))


def compare(name, grads):
    diff = max((a - b).abs().max().item() for a, b in zip(grads, second_order))
    flat = torch.cat([g.flatten() for g in grads])
    flat_2nd = torch.cat([g.flatten() for g in second_order])
    cosine = nn.functional.cosine_similarity(flat, flat_2nd, dim=0).item()
    print(f"{name}: max abs diff from second-order {diff:.3f}, cosine {cosine:.3f}")
    return diff, cosine


largest = max(g.abs().max().item() for g in second_order)
print(f"largest entry of the second-order gradient: {largest:.3f}")
diff, cosine = compare("first-order (create_graph=False)", first_order)
assert diff > 0.05 * largest and 0 < cosine < 0.99

adapted = adapt(model, meta_params, support, create_graph=False)
fast = {n: p.detach().requires_grad_() for n, p in adapted.items()}
at_adapted = torch.autograd.grad(query_loss(model, fast, query), list(fast.values()))
assert all(torch.allclose(a, b, atol=1e-7) for a, b in zip(first_order, at_adapted))

# %%
# The first-order gradient equals the query loss's gradient with respect to the *adapted*
# parameters (checked above), used as if it were the gradient with respect to the
# meta-parameters. It leans the same way as the second-order gradient (positive cosine) but is a
# different vector.
#
# Updating the parameters in place: the same first-order gradient, and lost meta-parameters
# -----------------------------------------------------------------------------------------
#
# A first MAML attempt often adapts the module itself. In place, on a parameter that requires
# grad, autograd refuses outright:

model_copy = copy.deepcopy(model)
x, y = support
grads = torch.autograd.grad(mse(model_copy(x), y), list(model_copy.parameters()), create_graph=True)
try:
    for p, g in zip(model_copy.parameters(), grads):
        p.sub_(INNER_LR * g)
except RuntimeError as error:
    print(f"{type(error).__name__}: {error}")
    assert "leaf Variable that requires grad is being used in an in-place operation" in str(error)
else:
    raise AssertionError("an in-place update of a leaf that requires grad was expected to fail")

# %%
# The usual ways around that refusal (``p.data -= ...``, an update under ``torch.no_grad()``, or
# an inner ``torch.optim.SGD`` step, which updates under ``no_grad`` as well; whether an inner
# optimizer keeps the graph is asked in
# `tristandeleu/pytorch-maml-rl#8 <https://github.com/tristandeleu/pytorch-maml-rl/issues/8>`__)
# all run. Each
# writes the adapted values into the meta-parameters, with no graph linking the two. The outer
# backward then gives exactly the first-order gradient, and the meta-parameters are gone
# (``model_copy`` starts from ``model`` each time, so ``model`` keeps them here).


def in_place_outer_gradient(update):
    model_copy = copy.deepcopy(model)
    before = [p.detach().clone() for p in model_copy.parameters()]
    x, y = support
    grads = torch.autograd.grad(mse(model_copy(x), y), list(model_copy.parameters()))
    update(model_copy, grads)
    x, y = query
    outer = torch.autograd.grad(mse(model_copy(x), y), list(model_copy.parameters()))
    overwritten = not any(torch.equal(a, p) for a, p in zip(before, model_copy.parameters()))
    return outer, overwritten


def with_data(module, grads):
    for p, g in zip(module.parameters(), grads):
        p.data -= INNER_LR * g


def with_no_grad(module, grads):
    with torch.no_grad():
        for p, g in zip(module.parameters(), grads):
            p -= INNER_LR * g


def with_optimizer(module, grads):
    inner_optimizer = torch.optim.SGD(module.parameters(), lr=INNER_LR)
    for p, g in zip(module.parameters(), grads):
        p.grad = g
    inner_optimizer.step()


for name, update in [("p.data -=", with_data), ("no_grad p -=", with_no_grad),
                     ("inner SGD step", with_optimizer)]:  # fmt: skip
    outer, overwritten = in_place_outer_gradient(update)
    compare(name, outer)
    assert overwritten
    assert all(torch.allclose(a, b, atol=1e-7) for a, b in zip(outer, first_order))

# %%
# All three equal the first-order gradient (up to rounding) and differ from the second-order
# one by the same amount. Libraries that keep the :class:`~torch.nn.Module` API for a
# differentiable inner loop (``higher``, ``learn2learn``) do it by running the module on
# non-leaf tensors in place of its parameters, which is what ``functional_call`` does here in
# one call.
#
# First-order MAML on purpose: the cheaper variant
# ------------------------------------------------
#
# First-order MAML is a legitimate choice: with no gradient-of-a-gradient, the outer backward
# has much less to walk. The graph each outer backward walks, counted in nodes:


def graph_nodes(tensor):
    seen, stack = set(), [tensor.grad_fn]
    while stack:
        node = stack.pop()
        if node is not None and node not in seen:
            seen.add(node)
            stack.extend(parent for parent, _ in node.next_functions)
    return len(seen)


nodes = {
    order: graph_nodes(query_loss(model, adapt(model, meta_params, support, flag), query))
    for order, flag in (("second-order", True), ("first-order", False))
}
print(", ".join(f"{order}: {count} nodes" for order, count in nodes.items()))
assert nodes["second-order"] > 2 * nodes["first-order"]

# %%
# Meta-training
# -------------
#
# 120 meta-updates (Adam), each on a batch of 4 tasks, second-order, one inner step. Then 50
# new tasks: the query error after one inner step from the meta-learned initialisation is
# compared with one step from the initialisation the model started with.

torch.manual_seed(1)
model = make_model()
start = copy.deepcopy(model)
meta_optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
history = []
for _ in range(120):
    meta_optimizer.zero_grad()
    total = 0.0
    for _ in range(4):
        support, query = sample_task()
        loss = query_loss(model, adapt(model, dict(model.named_parameters()), support), query) / 4
        loss.backward()
        total += loss.item()
    meta_optimizer.step()
    history.append(total)

torch.manual_seed(2)
tests = [sample_task(n_query=50, with_wave=True) for _ in range(50)]


def after_one_step(net):
    errors = []
    for support, query, _ in tests:
        params = adapt(net, dict(net.named_parameters()), support, create_graph=False)
        errors.append(query_loss(net, params, query).item())
    return float(np.mean(errors))


trained, untrained = after_one_step(model), after_one_step(start)
first_10, last_10 = np.mean(history[:10]), np.mean(history[-10:])
print(f"meta-training query loss: first 10 updates {first_10:.3f}, last 10 {last_10:.3f}")
print(f"new tasks, query MSE after one step: meta-learned init {trained:.3f}, ", end="")
print(f"start {untrained:.3f}")
assert last_10 < 0.6 * first_10
assert trained < 0.5 * untrained

# %%
# The meta-training curve, and one new task: the meta-learned initialisation before and after
# its single inner step on the 10 support points.

support, query, (amplitude, phase) = tests[0]
grid = torch.linspace(-5, 5, 200)[:, None]
adapted = adapt(model, dict(model.named_parameters()), support, create_graph=False)
with torch.no_grad():
    before = functional_call(model, dict(model.named_parameters()), (grid,))
    after = functional_call(model, adapted, (grid,))
running = np.convolve(history, np.ones(10) / 10, mode="valid")

fig, (ax_loss, ax_fit) = plt.subplots(2, 1, figsize=(4.2, 7.6), layout="constrained")
ax_loss.plot(range(1, len(history) + 1), history, color="#808080", linewidth=1, label="per update")
ax_loss.plot(range(10, len(history) + 1), running, color="#1a9c6b", linewidth=2, label="mean of 10")
ax_loss.set(xlabel="meta-update", ylabel="query MSE after 1 inner step", title="Meta-training")
ax_loss.legend(loc="upper right")
ax_fit.plot(grid, amplitude * torch.sin(grid + phase), color="#2f80ed", label="task")
ax_fit.plot(grid, before, color="#808080", linestyle="--", label="learned init")
ax_fit.plot(grid, after, color="#1a9c6b", linewidth=2, label="after 1 step")
ax_fit.scatter(support[0], support[1], color="#e0542c", s=18, zorder=3, label="support")
ax_fit.set(xlabel="x", ylabel="y", title="A new task")
ax_fit.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncols=2)
fig.suptitle("Second-order MAML: one step from\nthe learned init fits a new sine")
plt.show()

# %%
# What to take away
# -----------------
#
# * Take the inner gradient with ``torch.autograd.grad(..., create_graph=True)``, build the
#   adapted parameters as new tensors ``p - lr * g``, and run the model on them with
#   ``torch.func.functional_call``. ``retain_graph`` is implied; do not turn it off.
# * ``create_graph=False``, ``p.data -= ...``, ``torch.no_grad()`` updates and inner optimizer
#   steps all run without an error and give first-order MAML; the in-place ones also overwrite
#   the meta-parameters.
# * First-order MAML is fine when chosen: it is cheaper, and its gradient is close to, but not
#   the same as, the second-order one.
# * :doc:`../docs/retain-and-create-graph` explains ``create_graph`` and its default for
#   ``retain_graph``.
