"""
How the examples are checked
============================

Every script here ran when the site was built; every output is what the block above it printed.
Scripts state facts with ``assert``; a step *meant* to fail catches that one exception, prints
it and checks its message, so any other exception stops the build. Every training fix is checked
by its outcome over at least three optimizer steps; where nothing steps (saliency maps, timed
ways), gradients are compared directly.

.. index:: how the examples are checked, worked examples, expected errors, outcome check
"""

# %%
# An expected error is caught, printed and checked
# ------------------------------------------------
#
# A second :meth:`~torch.Tensor.backward` finds the graph freed; the ``else`` branch fails the
# script if, one day, the error does not come. Other scripts may print such an error cut at its
# first parenthesis, colon or full stop, or only its type.

import contextlib
import time

import matplotlib.pyplot as plt
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)  # tiny tensors
x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
y = (x**2).sum()
y.backward()
try:
    y.backward()
except RuntimeError as error:
    print(f"{type(error).__name__}: {error}")
    assert "graph a second time" in str(error)
else:
    raise AssertionError("a second backward() through a freed graph was expected to fail")

# %%
# A measured time is drawn, never printed or asserted
# ---------------------------------------------------
#
# The figure is named after the script and its place, so the page's text stays the same.


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
# A fix that silences an error can still train wrong. ``checked`` hooks ``optimizer.step()`` (its
# docstring says what it checks). The reference recomputes the step's loss from scratch at the
# current weights, written apart from the fix: it calls none of the fix's functions, reads nothing
# the loop kept except sampled data (an episode's states and actions), and rebuilds a carried state
# or a return itself. Where a script must share a loss formula with its fix, it says that its check
# proves how the gradient is obtained, not the formula. Each script that checks a fix carries this
# block unchanged (a test compares the copies with ``docs/outcome.py``); ``tests/mutations``
# declares wrong variants of every fix, each of which must fail its check.


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


# %%
# A plain loop passes. Without ``zero_grad()``, each step also trains on the earlier steps'
# gradients: nothing raises, but the check stops it at step 1.

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
