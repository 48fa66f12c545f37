"""Check a training fix by its outcome, not by the error going away.

A change that silences "Trying to backward through the graph a second time" can still train
wrong: a layer stops training, a step uses an older step's values, or another backward leaves
stray gradients in ``.grad``. ``watch`` checks every ``optimizer.step()`` in a block against a
reference that is right by construction: the loss of that step, recomputed from scratch at the
weights the optimizer is about to change. A page's downloaded notebook carries this file.

    with watch(opt, reference=lambda step: loss_fn(model(x[step]), y[step]), model=model):
        for step in range(3):
            ...              # the loop being checked, unchanged
            opt.step()

At each step (``Optimizer.register_step_pre_hook``, public since torch 2.0; with a closure, each
time the closure has run), every parameter the optimizer holds must carry the gradient of ``reference(step)``; each parameter meant to train
(``train``: all the optimizer's by default) must get a non-zero gradient. When the block ends,
at least ``steps`` steps ran and each parameter meant to train moved. The first failure raises
``AssertionError`` naming the step and the parameter. ``reference`` must not change anything
(no carried state, no running statistics, no random numbers): it is called inside the step.
"""

from __future__ import annotations

import contextlib

import torch


def _names(optimizer, model):
    """Each optimizer parameter's name in ``model`` (a module or a dict of modules/tensors)."""
    named = {}
    for prefix, part in model.items() if isinstance(model, dict) else [("", model)]:
        if isinstance(part, torch.nn.Module):
            pairs = part.named_parameters()
        elif part is not None:
            pairs = [("", part)]
        else:
            pairs = []
        for name, p in pairs:
            named.setdefault(id(p), ".".join(n for n in (prefix, name) if n))
    params = [p for group in optimizer.param_groups for p in group["params"]]
    return [(p, named.get(id(p), f"parameter {i}")) for i, p in enumerate(params)]


@contextlib.contextmanager
def watch(optimizer, reference, *, model=None, train=None, steps=3, rtol=1e-4, atol=1e-6):
    """Check each ``optimizer.step()`` inside the block; print one line when all steps passed."""
    named = [(p, name) for p, name in _names(optimizer, model) if p.requires_grad]
    params = [p for p, _ in named]
    names = {id(p): name for p, name in named}
    train = params if train is None else list(train)
    meant = {id(p) for p in train}
    start = [p.detach().clone() for p in train]
    done = []

    def compare(step):
        grads = [None if p.grad is None else p.grad.detach().clone() for p in params]
        with torch.enable_grad():
            wanted = torch.autograd.grad(reference(step), params, allow_unused=True)
        for p, got in zip(params, grads):
            p.grad = got  # autograd.grad adds into a retained non-leaf's .grad: undo that
        for p, got, want in zip(params, grads, wanted):
            want = torch.zeros_like(p) if want is None else want
            if id(p) in meant and (got is None or not got.any()):
                raise AssertionError(f"step {step}: {names[id(p)]} got no gradient")
            got = torch.zeros_like(p) if got is None else got
            if not torch.allclose(got, want, rtol=rtol, atol=atol):
                ratio = got.norm() / want.norm().clamp_min(1e-12)
                raise AssertionError(
                    f"step {step}: the gradient of {names[id(p)]} is not the reference's "
                    f"(its norm is {ratio:.3g} times the reference's)"
                )

    def check(opt, args, kwargs):
        step = len(done)
        done.append(step)
        at = [i for i, a in enumerate(args) if callable(a)]  # step(closure), positional
        closure = kwargs.get("closure") or (args[at[0]] if at else None)
        if closure is None:
            return compare(step)

        def checked_closure():  # step(closure) computes the gradients inside the step
            loss = closure()  # (LBFGS, Lightning): check them each time the closure has run
            compare(step)
            return loss

        if kwargs.get("closure"):
            return args, {**kwargs, "closure": checked_closure}
        return (*args[: at[0]], checked_closure, *args[at[0] + 1 :]), kwargs

    handle = optimizer.register_step_pre_hook(check)
    try:
        yield done
    finally:
        handle.remove()
    if len(done) < steps:
        raise AssertionError(f"{len(done)} optimizer steps ran; a fix is checked over {steps}")
    for p, before in zip(train, start):
        if torch.equal(p.detach(), before):
            raise AssertionError(
                f"{names.get(id(p), 'a parameter')} never moved in {len(done)} steps"
            )
    moved = f"all {len(train)} parameters" if len(train) > 1 else "the parameter"
    print(f"{len(done)} steps: every gradient equals the reference's; {moved} meant to train moved")
