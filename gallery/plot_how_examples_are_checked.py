"""
How the worked examples are checked
===================================

Every script in this gallery ran when the site was built, and every output under a code block is
what that block printed. A script states facts with ``assert``; when a step is *meant* to fail, the
script catches that one exception, prints it, and checks its type and message, so any other
exception stops the build.

.. index:: how the examples are checked, worked examples, expected errors
"""

# %%
# An output comes from the code above it
# ---------------------------------------
#
# The gradient of ``sum(x ** 2)`` is ``2 * x``; the script prints it and asserts it.

import matplotlib.pyplot as plt
import torch

x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
y = (x**2).sum()
y.backward()
print(x.grad)
assert torch.equal(x.grad, 2 * x.detach())

# %%
# An expected error is caught, printed and checked
# ------------------------------------------------
#
# The first :meth:`~torch.Tensor.backward` freed what ``x ** 2`` saved for it, so a second one
# fails. The ``else`` branch makes the script fail if, one day, it does not.

try:
    y.backward()
except RuntimeError as error:
    print(f"{type(error).__name__}: {error}")
    assert "backward through the graph a second time" in str(error)
else:
    raise AssertionError("a second backward() through a freed graph was expected to fail")

# %%
# A figure is drawn from a live run
# ---------------------------------
#
# Figures are made by the script itself, so they change when torch does.

steps = torch.arange(1, 6)
fig, ax = plt.subplots(figsize=(4, 2.5))
ax.plot(steps, steps**2, marker="o", color="#808080")  # the site's neutral colour
ax.set(xlabel="step", ylabel="step²", title="Drawn when the site was built")
fig.tight_layout()
plt.show()

# %%
# A measured time is drawn, never printed or asserted
# ---------------------------------------------------
#
# Times change from run to run. A script that measures one draws it: the figure is named after
# the script and its place in it, so the page's text is the same from build to build, and nothing
# asserts on a time. Run the script to draw your own machine's.

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
