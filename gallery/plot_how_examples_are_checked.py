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
