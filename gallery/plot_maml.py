"""
MAML: second order, not .data
=============================

The fix: take the inner gradient with ``create_graph=True``, build the adapted parameters as new
tensors ``p - lr * g``, and run the model on them with :func:`torch.func.functional_call`
(``create_graph=True`` also keeps the graph: :doc:`../docs/retain-and-create-graph`). Forgetting
``create_graph`` silently gives first-order MAML's gradient. An in-place inner update (``.data``,
``torch.no_grad()``, an inner optimizer) does too for one task, and also overwrites the
meta-parameters, so each next task adapts from the previous one's result.

.. index:: MAML, meta-learning, few-shot, inner loop, outer loop, create_graph,
   second-order gradient, first-order MAML, FOMAML, functional_call, torch.func, fast weights,
   .data, learn2learn, higher
"""

# %%
# A task is a wave ``A sin(x + phase)``; the model takes one gradient step on 10 of its points
# (the support set) and is scored on 10 others (the query set). ``adapt`` returns new tensors
# ``p - lr * g`` without touching the module; :func:`torch.func.functional_call` runs the module
# on them.

import contextlib
import copy

import numpy as np
import torch
from torch import nn
from torch.func import functional_call

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


INNER_LR, HIDDEN = 0.1, 24
mse = nn.functional.mse_loss


def sample_task(n_support=10, n_query=10):
    amplitude, phase = 0.5 + 1.5 * torch.rand(()), np.pi * torch.rand(())
    x = 10 * torch.rand(n_support + n_query, 1) - 5
    y = amplitude * torch.sin(x + phase)
    return (x[:n_support], y[:n_support]), (x[n_support:], y[n_support:])


def make_model():
    return nn.Sequential(
        nn.Linear(1, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, 1)
    )


def adapt(model, params, support, create_graph=True):
    loss = mse(functional_call(model, params, (support[0],)), support[1])
    grads = torch.autograd.grad(loss, [*params.values()], create_graph=create_graph)
    return {name: p - INNER_LR * g for (name, p), g in zip(params.items(), grads)}


def query_loss(model, params, query):
    return mse(functional_call(model, params, (query[0],)), query[1])


model = make_model()
support, query = sample_task()
meta_params = dict(model.named_parameters())
loss = query_loss(model, adapt(model, meta_params, support), query)
second_order = torch.autograd.grad(loss, list(meta_params.values()))

# %%
# ``second_order`` is the meta-gradient: :func:`torch.func.grad` of "adapt, then score", written
# apart from ``adapt``, gives it too, for one inner step and for three:


def adapted_loss(params, steps, support, query):  # the reference: torch.func, no autograd.grad
    def support_loss(p):
        return ((functional_call(model, p, (support[0],)) - support[1]) ** 2).mean()

    for _ in range(steps):
        grads = torch.func.grad(support_loss)(params)
        params = {name: p - INNER_LR * grads[name] for name, p in params.items()}
    return ((functional_call(model, params, (query[0],)) - query[1]) ** 2).mean()


detached = {n: p.detach() for n, p in meta_params.items()}
for steps in (1, 3):
    params = meta_params
    for _ in range(steps):
        params = adapt(model, params, support)
    outer = torch.autograd.grad(query_loss(model, params, query), list(meta_params.values()))
    reference = torch.func.grad(adapted_loss)(detached, steps, support, query)
    assert all(torch.allclose(g, reference[n], atol=1e-6) for g, n in zip(outer, reference))
print("1 and 3 inner steps: equal up to rounding")

# %%
# Forgetting ``create_graph``: first-order MAML, silently
# -------------------------------------------------------
#
# Without ``create_graph=True`` the inner gradients are constants. The adapted parameters still
# depend on the meta-parameters through ``p - lr * g``, so nothing fails, but the term through
# ``g`` is gone. What is left is the query loss's gradient at the *adapted* parameters (asserted):
# first-order MAML, far from the second-order gradient (compared):

adapted = adapt(model, meta_params, support, create_graph=False)
first_order = torch.autograd.grad(query_loss(model, adapted, query), list(meta_params.values()))
fast = {n: p.detach().requires_grad_() for n, p in adapted.items()}
at_adapted = torch.autograd.grad(query_loss(model, fast, query), list(fast.values()))
assert all(torch.allclose(a, b, atol=1e-7) for a, b in zip(first_order, at_adapted))
flat_1st, flat_2nd = (torch.cat([g.flatten() for g in gs]) for gs in (first_order, second_order))
diff, largest = (flat_1st - flat_2nd).abs().max().item(), flat_2nd.abs().max().item()
cosine = nn.functional.cosine_similarity(flat_1st, flat_2nd, dim=0).item()
print(
    f"first order: largest difference {diff:.3f} > largest entry {largest:.3f}, cosine {cosine:.3f}"
)
assert diff > largest and 0 < cosine < 0.9

# %%
# In-place inner updates: first order, and lost meta-parameters
# -------------------------------------------------------------
#
# ``torch.no_grad()`` is right for MAML's outer SGD step on leaves (:ref:`leaf-rules`), not in
# the inner loop: there ``p.data -= ...``, ``torch.no_grad()`` and an inner ``torch.optim.SGD``
# step all run and, for this task from the meta-parameters, give the first-order gradient (up to
# rounding). They also overwrite the meta-parameters (of a copy, here), so over a meta-batch each
# next task would adapt from the previous one's result. Without either, an in-place update of the
# module fails:

try:
    copy.deepcopy(model)[0].weight.sub_(1.0)
except RuntimeError as error:
    print(f"{type(error).__name__}: {error}")
    assert "a leaf Variable that requires grad is being used in an in-place operation" in str(error)
else:
    raise AssertionError("the in-place update of a leaf was expected to fail")


def in_place_outer_gradient(how):
    twin = copy.deepcopy(model)
    before = [p.detach().clone() for p in twin.parameters()]
    grads = torch.autograd.grad(mse(twin(support[0]), support[1]), list(twin.parameters()))
    if how == "inner SGD step":
        for p, g in zip(twin.parameters(), grads):
            p.grad = g
        torch.optim.SGD(twin.parameters(), lr=INNER_LR).step()
    for p, g in zip(twin.parameters(), grads):
        if how == "p.data -=":
            p.data -= INNER_LR * g
        elif how == "no_grad p -=":
            with torch.no_grad():
                p -= INNER_LR * g
    outer = torch.autograd.grad(mse(twin(query[0]), query[1]), list(twin.parameters()))
    return outer, not any(map(torch.equal, before, twin.parameters()))


for how in ("p.data -=", "no_grad p -=", "inner SGD step"):
    outer, overwritten = in_place_outer_gradient(how)
    assert overwritten and all(torch.allclose(a, b, atol=1e-7) for a, b in zip(outer, first_order))
print("p.data -=, no_grad p -=, inner SGD step: first order, meta-parameters overwritten")

# %%
# Meta-training
# -------------
#
# 120 second-order meta-updates (Adam) on 4 tasks each, every one checked
# (:doc:`plot_how_examples_are_checked`) against ``adapted_loss``'s gradient at the current
# weights; first order fails the check. Then on 50
# new tasks, the query error after one inner step from the learned initialisation, from the
# starting one, and of predicting 0.


def meta_train(updates, create_graph=True):
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    batches = [[sample_task() for _ in range(4)] for _ in range(updates)]
    meta_params = dict(model.named_parameters())
    each_task = torch.func.vmap(adapted_loss, in_dims=(None, None, 0, 0))

    def reference(k):
        sx, sy, qx, qy = (torch.stack(part) for part in zip(*[(*s, *q) for s, q in batches[k]]))
        return each_task(meta_params, 1, (sx, sy), (qx, qy)).mean()

    history = []
    with checked(optimizer, reference, steps=updates, model=model):
        for tasks in batches:
            optimizer.zero_grad()
            total = 0.0
            for support, query in tasks:
                adapted = adapt(model, dict(model.named_parameters()), support, create_graph)
                loss = query_loss(model, adapted, query) / 4
                loss.backward()
                total += loss.item()
            optimizer.step()
            history.append(total)
    return history


torch.manual_seed(1)
model = make_model()
start = copy.deepcopy(model)
try:
    meta_train(3, create_graph=False)
except AssertionError as error:
    print(f"{type(error).__name__}: {error}")
    assert "step 0: wrong gradient of model.0.weight" in str(error)
else:
    raise AssertionError("the check was expected to fail")
model = copy.deepcopy(start)
history = meta_train(120)

torch.manual_seed(2)
tests = [sample_task(n_query=50) for _ in range(50)]


def after_one_step(net):  # mean query error on the new tasks
    named = dict(net.named_parameters())
    return np.mean([query_loss(net, adapt(net, named, s, False), q).item() for s, q in tests])


trained, untrained = after_one_step(model), after_one_step(start)
zero = np.mean([(query[1] ** 2).mean().item() for _, query in tests])
first_10, last_10 = np.mean(history[:10]), np.mean(history[-10:])
print(f"meta-training query loss: first 10 updates {first_10:.3f}, last 10 {last_10:.3f}")
print(
    f"new tasks, after one step: learned init {trained:.3f}, start {untrained:.3f}; zeros {zero:.3f}"
)
assert last_10 < 0.6 * first_10
assert trained < 0.5 * untrained and trained < 0.5 * zero
assert trained > 0.2  # less than half the others' error, but not a fit

# %%
# See also: :doc:`training patterns <../docs/training-patterns>`. Reported in:
# `dragen1860/MAML-Pytorch#32 <https://github.com/dragen1860/MAML-Pytorch/issues/32>`__
# (first-order by accident), `learnables/learn2learn#154
# <https://github.com/learnables/learn2learn/issues/154>`__ (``retain_graph`` in ``adapt``),
# `tristandeleu/pytorch-maml-rl#8 <https://github.com/tristandeleu/pytorch-maml-rl/issues/8>`__
# (an inner optimizer).
