"""Check a training fix by its outcome, not by the error going away.

A change that silences "Trying to backward through the graph a second time" can still train
wrong: a layer stops training, a step uses an older step's values, or another backward leaves
stray gradients in ``.grad``. ``checked`` checks every ``optimizer.step()`` in a block against a
reference: the loss of that step, recomputed from scratch at the weights the optimizer is about
to change, by code other than the fix. A page's downloaded notebook carries this file.

    with checked(opt, lambda step: loss_fn(model(x[step]), y[step]), model=model):
        for step in range(3):
            ...              # the loop being checked, unchanged
            opt.step()

``checked`` is the site's one outcome check: the gallery scripts carry its lines unchanged
(between the two marker comments below; ``tests/test_outcome_copies.py`` compares them), so each
download still runs alone. ``outcome`` runs one variant of a loop for a table of variants.
"""

from __future__ import annotations

import contextlib
import io

import torch


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


def outcome(run, *args, **kwargs):
    """For a table of variants: ``"right"`` if ``run(*args, **kwargs)`` ran to the end (its
    ``checked`` blocks passed; their lines are not printed), else ``"Type: message"`` of the error
    it raised. A single expected error is shown by a tagged cell instead (CONTRIBUTING.md)."""
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            run(*args, **kwargs)
    except Exception as error:  # noqa: BLE001 - the outcome is the error
        return f"{type(error).__name__}: {error}"
    return "right"
