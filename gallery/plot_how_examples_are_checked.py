"""
How the examples are checked
============================

Every script here ran when the site was built; every output is what the block above it printed.
Scripts state facts with ``assert``; a step *meant* to fail catches that one exception, prints
it and checks its message, so any other exception stops the build. Every fix is checked by its
outcome over three optimizer steps.

.. index:: how the examples are checked, worked examples, expected errors, outcome check
"""

# %%
# An output comes from the code above it
# ---------------------------------------

import contextlib

import matplotlib.pyplot as plt
import torch
from torch import nn

torch.set_num_threads(1)  # tiny tensors
x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
y = (x**2).sum()
y.backward()
print(x.grad)
assert torch.equal(x.grad, 2 * x.detach())

# %%
# An expected error is caught, printed and checked
# ------------------------------------------------
#
# A second :meth:`~torch.Tensor.backward` finds the graph freed; the ``else`` branch fails the
# script if, one day, the error does not come.

try:
    y.backward()
except RuntimeError as error:
    print(f"{type(error).__name__}: {error}")
    assert "graph a second time" in str(error)
else:
    raise AssertionError("a second backward() through a freed graph was expected to fail")

# %%
# A figure is drawn from a live run
# ---------------------------------

steps = torch.arange(1, 6)
fig, ax = plt.subplots(figsize=(4, 2.5))
ax.plot(steps, steps**2, marker="o", color="#808080")
ax.set(xlabel="step", ylabel="step²", title="Drawn when the site was built")
fig.tight_layout()
plt.show()

# %%
# A measured time is drawn, never printed or asserted
# ---------------------------------------------------
#
# The figure is named after the script and its place, so the page's text stays the same.

import time


def fastest_backward(n, repeats=20):
    weight = torch.randn(n, n, requires_grad=True)
    loss = (weight @ weight).sum()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        loss.backward(retain_graph=True)
        best = min(best, time.perf_counter() - start)
    return best


sizes = [32, 64, 128, 256]
fig, ax = plt.subplots(figsize=(4, 2.5))
ax.plot(sizes, [1e3 * fastest_backward(n) for n in sizes], marker="o", color="#808080")
ax.set(xlabel="n", ylabel="ms (fastest of 20)", title="One backward pass, timed at build")
fig.tight_layout()
plt.show()

# %%
# A fix is checked by its outcome
# -------------------------------
#
# A fix that silences an error can still train wrong. ``checked`` hooks ``optimizer.step()``:
# at each step, every parameter the optimizer holds must have a non-zero ``.grad`` equal to the
# gradient of ``reference(step)``, a loss recomputed from scratch at the current weights by code
# other than the fix; at the end, at least three steps ran and every parameter moved, and it
# prints ``<model>: <n> steps checked``. Each script carries a copy.


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


# %%
# A plain loop passes. Without ``zero_grad()``, each step also trains on the earlier steps'
# gradients: nothing raises, but the check stops it at step 1.

torch.manual_seed(0)
x, y = torch.randn(16, 3), torch.randn(16, 1)


def train(zero_grad):
    model = nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with checked(optimizer, lambda step: ((model(x) - y) ** 2).mean(), model=model):
        for _ in range(3):
            if zero_grad:
                optimizer.zero_grad()
            ((model(x) - y) ** 2).mean().backward()
            optimizer.step()


train(zero_grad=True)
try:
    train(zero_grad=False)
except AssertionError as error:
    print(f"{type(error).__name__}: {error}")
    assert "step 1: wrong gradient of model.weight" in str(error)
else:
    raise AssertionError("the check was expected to catch the leftover gradients")
