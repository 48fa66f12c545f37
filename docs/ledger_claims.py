"""The rows of the misconceptions ledger (docs/ledger.md and one page per source text, listed in
``SOURCE_PAGES``): one row per claim of the four source texts.

Each row names the source text (000-003, see the project's shared/sources/README.md), the
claim in our own words, a verdict, the page that explains it, and a ``proof``: a tiny torch
experiment that ASSERTS the verdict and returns the evidence (real output, as a short string).
The ledger page runs every proof while it is built (each text's page runs that text's proofs), and
tests/test_ledger.py runs them again, so a row whose proof stops holding fails both.
"""

from __future__ import annotations

import inspect
import re
import warnings
import weakref
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

SOURCES = {
    "000": "A short explainer article on retain_graph, with one example",
    "001": "A forum thread on retain_variables=True, with a GAN and multi-loss debate",
    "002": "An article on how the position of retain_grad() matters",
    "003": "A Q&A page on retain_graph in the old neural-style tutorial and multi-task losses",
}

# The page of each text, in docs/ (what {doc} and the toctree of docs/ledger.md name).
SOURCE_PAGES = {
    "000": "ledger-explainer",
    "001": "ledger-forum-thread",
    "002": "ledger-retain-grad-article",
    "003": "ledger-neural-style-qa",
}

# Verdict -> sphinx-design badge colour.
VERDICTS = {
    "correct": "success",
    "incomplete": "info",
    "misleading": "warning",
    "outdated": "secondary",
    "wrong": "danger",
}


@dataclass(frozen=True)
class Claim:
    id: str
    source: str
    claim: str  # what the source says, in our own words
    verdict: str
    finding: str  # what really happens, in one or two sentences
    page: str  # a {doc} target relative to docs/, or "/auto_examples/plot_..." for the gallery
    proof: Callable[[], str]


CLAIMS: list[Claim] = []


def claim(id: str, source: str, verdict: str, page: str, text: str, finding: str):
    """Register the decorated function as the proof of one ledger row."""

    def register(proof: Callable[[], str]) -> Callable[[], str]:
        CLAIMS.append(Claim(id, source, text, verdict, finding, page, proof))
        return proof

    return register


def lines(*parts: str) -> str:
    """Evidence of several lines."""
    return "\n".join(parts)


def first_sentence(error: BaseException) -> str:
    """The exception as `Type: first sentence of its message`, short enough for a ledger row."""
    message = str(error).split(". ")[0].split("\n")[0]
    return f"{type(error).__name__}: {message}"


# --------------------------------------------------------------------------------------------
# 000: the short explainer article
# --------------------------------------------------------------------------------------------


@claim(
    "000-1",
    "000",
    "misleading",
    "what-backward-frees",
    "After backward(), PyTorch by default throws the computation graph away to save memory.",
    "Only the tensors that the graph's nodes saved for the backward pass are released. The nodes "
    "and the links between them survive, which is why the error talks about saved tensors.",
)
def proof_000_graph_is_freed():
    w = torch.tensor([0.5, 1.5], requires_grad=True)
    out = (w.sin() * w.cos()).sum()
    out.backward()
    mul = out.grad_fn.next_functions[0][0]
    parents = [type(node).__name__ for node, _ in mul.next_functions]
    assert parents == [
        "SinBackward0",
        "CosBackward0",
    ]  # the graph's structure is still there
    try:
        _ = mul._saved_self  # what the node saved for backward is not
    except RuntimeError as error:
        freed = first_sentence(error)
    else:
        raise AssertionError("the saved input was expected to be freed")
    assert "already been freed" in freed
    return lines(
        f"{type(mul).__name__} still points to {parents}",
        f"reading its saved input: {freed}",
    )


@claim(
    "000-2",
    "000",
    "correct",
    "backward-twice",
    "Passing retain_graph=True lets you call backward() a second time on the same graph.",
    "True: the saved tensors are kept, so the second pass runs.",
)
def proof_000_retain_allows_second_pass():
    w = torch.tensor([1.0, -2.0], requires_grad=True)
    out = (w * w.exp()).sum()
    out.backward(retain_graph=True)
    out.backward()  # no error
    expected = 2 * (w.exp() * (1 + w)).detach()
    assert torch.allclose(w.grad, expected)
    return f"two passes ran; w.grad = {w.grad}"


@claim(
    "000-3",
    "000",
    "incomplete",
    "backward-twice",
    "Its example runs backward twice on the square of a scalar and prints the gradient after "
    "each pass, as if both passes computed the same thing on their own.",
    "The two printed numbers differ: .grad accumulates, so the second value is the sum of both "
    "passes (twice the derivative). The article does not say so.",
)
def proof_000_printed_twice():
    t = torch.tensor(3.0, requires_grad=True)
    sq = t * t
    sq.backward(retain_graph=True)
    after_first = t.grad.item()
    sq.backward()
    after_second = t.grad.item()
    assert after_first == 6.0 and after_second == 2 * after_first
    return f"after pass 1: {after_first}\nafter pass 2: {after_second}"


@claim(
    "000-4",
    "000",
    "incomplete",
    "what-backward-frees",
    "Without retain_graph=True, a second backward() through the same graph raises an error.",
    "Only when some node saved a tensor. A graph made of additions and sums saves nothing, so it "
    "can be run backward again without the flag.",
)
def proof_000_second_pass_without_flag():
    v = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    plain = (v + 2).sum()
    plain.backward()
    plain.backward()  # nothing was saved: no error
    assert torch.equal(v.grad, torch.full((3,), 2.0))
    product = (v * v).sum()
    try:
        product.backward()
        product.backward()
    except RuntimeError as error:
        failed = first_sentence(error)
    else:
        raise AssertionError("a second pass through v * v was expected to fail")
    return lines(
        f"(v + 2).sum() twice: fine, v.grad = {v.grad}",
        f"(v * v).sum() twice: {failed}",
    )


@claim(
    "000-5",
    "000",
    "wrong",
    "retain-and-create-graph",
    "Higher-order derivatives (gradients of gradients) are a case for retain_graph=True.",
    "retain_graph=True alone gives a first derivative that cannot be differentiated again. What "
    "higher-order derivatives need is create_graph=True, which keeps the graph by itself.",
)
def proof_000_higher_order():
    s = torch.tensor(1.5, requires_grad=True)
    (g_retained,) = torch.autograd.grad(s**3, s, retain_graph=True)
    assert not g_retained.requires_grad  # a plain number: nothing to differentiate
    (g_created,) = torch.autograd.grad(s**3, s, create_graph=True)
    (second,) = torch.autograd.grad(g_created, s)
    assert second.item() == 6 * s.item()
    return (
        f"retain_graph=True: first derivative {g_retained}, "
        f"requires_grad={g_retained.requires_grad}\n"
        f"create_graph=True: second derivative {second}"
    )


@claim(
    "000-6",
    "000",
    "misleading",
    "several-losses",
    "Models trained with several losses that share part of the graph need retain_graph=True.",
    "Only if you call backward() once per loss. Adding the losses and calling backward() once "
    "needs no flag and gives the same gradients.",
)
def proof_000_shared_losses():
    torch.manual_seed(0)
    trunk, head_a, head_b = nn.Linear(3, 4), nn.Linear(4, 1), nn.Linear(4, 1)
    batch = torch.linspace(-1, 1, 6).reshape(2, 3)

    def losses():
        features = trunk(batch).tanh()
        return head_a(features).pow(2).mean(), head_b(features).abs().mean()

    first, second = losses()
    first.backward(retain_graph=True)
    second.backward()
    one_by_one = trunk.weight.grad.clone()
    trunk.zero_grad()
    first, second = losses()
    (first + second).backward()  # no retain_graph anywhere
    assert torch.allclose(trunk.weight.grad, one_by_one)
    return "one backward of the sum, no flag: same trunk gradient as two calls"


@claim(
    "000-7",
    "000",
    "wrong",
    "backward-twice",
    "Loops that accumulate gradients over several steps need retain_graph=True.",
    "Each step runs its own forward pass and so builds its own graph; backward() on it adds to "
    ".grad without any flag.",
)
def proof_000_accumulation_loop():
    torch.manual_seed(0)
    data, target = torch.arange(12.0).reshape(6, 2) / 10, torch.ones(6, 1)
    stepwise, whole = _piecewise_and_whole(nn.Linear(2, 1), data, target, pieces=3)
    assert torch.allclose(stepwise, whole)
    return lines(f"3 steps, no retain_graph: {stepwise}", f"whole batch at once:      {whole}")


@claim(
    "000-8",
    "000",
    "correct",
    "what-it-costs",
    "Keeping the graph uses more memory, so retain it only when you must.",
    "True: with retain_graph=True the intermediate tensors saved for backward stay alive after "
    "the pass; without it they are released.",
)
def proof_000_memory():
    leaf = torch.tensor([0.1, 0.2, 0.3], requires_grad=True)
    alive = {}
    for keep in (False, True):
        hidden = leaf.exp()
        watch = weakref.ref(hidden)
        out = (hidden * hidden).sum()  # the product saves hidden
        del hidden
        out.backward(retain_graph=keep)
        alive[keep] = watch() is not None
    assert alive == {False: False, True: True}
    return (
        f"saved intermediate alive after backward(): {alive[False]}\n"
        f"saved intermediate alive after backward(retain_graph=True): {alive[True]}"
    )


@claim(
    "000-9",
    "000",
    "incomplete",
    "retain-and-create-graph",
    "retain_graph defaults to False.",
    "The default is None, not False. It acts like False (backward frees the saved tensors) unless "
    "create_graph=True, in which case the graph is kept without asking.",
)
def proof_000_default():
    parameters = inspect.signature(torch.Tensor.backward).parameters
    default = parameters["retain_graph"].default
    assert default is None
    u = torch.tensor(1.5, requires_grad=True)
    cube = u**3
    cube.backward()  # default: like False, the saved tensors are freed
    try:
        cube.backward()
    except RuntimeError as error:
        plain = f"{type(error).__name__}: {str(error)[:48]}..."
    else:
        raise AssertionError("a plain backward() should have freed the graph")
    cube = u**3
    torch.autograd.grad(cube, u, create_graph=True)
    # with create_graph=True the graph was kept, although retain_graph was never passed:
    (again,) = torch.autograd.grad(cube, u, create_graph=True)
    assert again.item() == 3 * 1.5**2
    return (
        f"default of retain_graph: {default}\n"
        f"second plain backward(): {plain}\n"
        f"second pass with only create_graph=True: d(u**3)/du = {again.item()}"
    )


@claim(
    "000-10",
    "000",
    "correct",
    "what-backward-frees",
    "backward() finds the gradients by tracing back through a graph that recorded the forward "
    "operations.",
    "True: each operation leaves a node that links to the nodes of its inputs, and backward() "
    "applies the chain rule along those links.",
)
def proof_000_recorded_graph():
    a = torch.tensor([0.5, 2.0], requires_grad=True)
    out = (a.log() + a**2).sum()
    add = out.grad_fn.next_functions[0][0]
    recorded = [
        out.grad_fn.name(),
        add.name(),
        [n.name() for n, _ in add.next_functions],
    ]
    out.backward()
    assert torch.allclose(a.grad, 1 / a.detach() + 2 * a.detach())
    return f"recorded: {recorded}\na.grad = {a.grad} (1/a + 2a)"


# --------------------------------------------------------------------------------------------
# 001: the forum thread
# --------------------------------------------------------------------------------------------


@claim(
    "001-1",
    "001",
    "outdated",
    "history",
    "The quoted docstring: retain_variables=True keeps the buffers that computing gradients "
    "needs; you only need it to differentiate part of a graph more than once.",
    "The idea lives on under the name retain_graph. The retain_variables keyword itself no "
    "longer exists: passing it is a TypeError.",
)
def proof_001_old_docstring():
    k = torch.tensor([2.0, 4.0], requires_grad=True)
    loss = (k.log() * k).sum()
    try:
        loss.backward(retain_variables=True)
    except TypeError as error:
        old = f"{type(error).__name__}: {error}"
    else:
        raise AssertionError("retain_variables was expected to be rejected")
    assert "unexpected keyword argument 'retain_variables'" in old
    loss.backward(retain_graph=True)
    loss.backward()
    return f"old name: {old}\nnew name: two passes ran, k.grad = {k.grad}"


@claim(
    "001-2",
    "001",
    "incomplete",
    "what-backward-frees",
    "Once loss.backward() has run, calling it again fails unless you asked to retain the graph.",
    "Right for most losses (they save tensors), but not a rule: a loss whose graph saves nothing "
    "can be run backward again.",
)
def proof_001_second_call():
    pred = torch.tensor([0.5, 1.0], requires_grad=True)
    target = torch.tensor([1.0, 1.0])
    squared = F.mse_loss(pred, target)
    squared.backward()
    try:
        squared.backward()
    except RuntimeError as error:
        mse = first_sentence(error)
    else:
        raise AssertionError("a second pass through mse_loss was expected to fail")
    assert "second time" in mse
    difference = (pred - target).sum()
    difference.backward()
    difference.backward()  # subtraction and sum save no tensors
    return f"mse_loss, second call: {mse}\n(pred - target).sum(), second call: fine"


@claim(
    "001-3",
    "001",
    "correct",
    "what-backward-frees",
    "backward() uses up the intermediate values saved for it, unless you tell it to keep them.",
    "True: a node's saved input can still be read after a pass with retain_graph=True, not "
    "after a plain backward().",
)
def proof_001_consumes_saved():
    r = torch.tensor([1.0, 3.0], requires_grad=True)
    report = []
    for keep in (True, False):
        out = (r.sqrt() * r).sum()
        out.backward(retain_graph=keep)
        node = out.grad_fn.next_functions[0][0]
        try:
            report.append(f"retain_graph={keep}: saved input {node._saved_self}")
        except RuntimeError as error:
            report.append(f"retain_graph={keep}: {first_sentence(error)}")
    assert "freed" in report[1] and "tensor" in report[0]
    return "\n".join(report)


@claim(
    "001-4",
    "001",
    "misleading",
    "what-backward-frees",
    "By default backward() drops the variables and gradients to save memory.",
    "It drops the saved intermediate values. Gradients of leaves are kept in .grad (and keep "
    "adding up) until you clear them.",
)
def proof_001_default_drops():
    leaf = torch.tensor([1.0, 2.0], requires_grad=True)
    hidden = leaf.sin()
    watch = weakref.ref(hidden)
    out = (hidden * hidden).sum()
    del hidden
    out.backward()
    assert watch() is None and leaf.grad is not None
    return lines(
        f"saved intermediate alive: {watch() is not None}",
        f"leaf.grad kept: {leaf.grad}",
    )


@claim(
    "001-5",
    "001",
    "correct",
    "what-backward-frees",
    "The engine behind backward() walks the graph in reverse, calling each node's backward.",
    "True: the nodes run from the output back towards the inputs.",
)
def proof_001_reverse_walk():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    out = (x.exp() * 3).sum()
    order = []
    node = out.grad_fn
    while node is not None and node.next_functions:
        node.register_prehook(lambda grads, node=node: order.append(node.name()))
        node = node.next_functions[0][0]
    out.backward()
    assert order == ["SumBackward0", "MulBackward0", "ExpBackward0"]
    return "nodes in the order they ran: " + " -> ".join(order)


@claim(
    "001-6",
    "001",
    "wrong",
    "/auto_examples/plot_gan_step",
    "Training a GAN is the typical case: after the discriminator loss's backward you must retain "
    "the graph for the generator loss.",
    "The usual step detaches the fake samples for the discriminator and runs the discriminator "
    "again for the generator: two graphs, no retain_graph. (Retaining is only needed when one "
    "discriminator pass is reused.)",
)
def proof_001_gan_step():
    torch.manual_seed(0)
    gen, disc = nn.Linear(2, 3), nn.Linear(3, 1)
    real, noise = torch.ones(4, 3), torch.linspace(-1, 1, 8).reshape(4, 2)
    fake = gen(noise)
    d_loss = F.binary_cross_entropy_with_logits(
        disc(fake.detach()), torch.zeros(4, 1)
    ) + F.binary_cross_entropy_with_logits(disc(real), torch.ones(4, 1))
    d_loss.backward()  # no retain_graph
    assert gen.weight.grad is None  # the generator was not touched
    g_loss = F.binary_cross_entropy_with_logits(disc(fake), torch.ones(4, 1))
    g_loss.backward()  # no retain_graph, no error
    assert gen.weight.grad is not None
    return "discriminator step and generator step both ran without retain_graph"


@claim(
    "001-7",
    "001",
    "correct",
    "/auto_examples/plot_gan_step",
    "A reply: you don't compute the discriminator's and generator's gradients from the same "
    "forward step, because their objectives pull in opposite directions.",
    "Right for the usual step: on the same fake sample, the two losses push the discriminator's "
    "output in opposite directions, so each gets its own pass.",
)
def proof_001_opposite_signs():
    # the discriminator's output (a logit) on one fake sample
    logit = torch.tensor([0.3], requires_grad=True)
    bce = F.binary_cross_entropy_with_logits
    (d_push,) = torch.autograd.grad(bce(logit, torch.zeros(1)), logit)
    (g_push,) = torch.autograd.grad(bce(logit, torch.ones(1)), logit)
    assert d_push.item() > 0 > g_push.item()
    return (
        f"d(discriminator loss)/d(logit) = {d_push.item():.4f}\n"
        f"d(generator loss)/d(logit)     = {g_push.item():.4f}"
    )


@claim(
    "001-8",
    "001",
    "misleading",
    "several-losses",
    "Multi-task learning with losses at different layers needs retain_graph=True, or only one "
    "of the losses can be backpropagated.",
    "Only for one backward() per loss. One call on a list of losses, or on their sum, reaches "
    "every loss without any flag.",
)
def proof_001_multitask():
    torch.manual_seed(0)
    early, late = nn.Linear(2, 2), nn.Linear(2, 1)
    inputs = torch.tensor([[0.5, -1.0], [2.0, 0.0]])
    middle = early(inputs).relu()
    loss_early = middle.pow(2).mean()
    loss_late = late(middle).pow(2).mean()
    torch.autograd.backward([loss_early, loss_late])  # one call, no retain_graph
    assert early.weight.grad is not None and late.weight.grad is not None
    return f"one backward for both losses; early layer's grad:\n{early.weight.grad}"


@claim(
    "001-9",
    "001",
    "misleading",
    "/auto_examples/plot_saliency",
    "Saliency maps (gradients with respect to the input image) are another case for retain_graph.",
    "One map is one backward() from the class score to the input: nothing is retained. You "
    "retain only if you backward the same forward pass again, e.g. for a second class.",
)
def proof_001_saliency():
    torch.manual_seed(0)
    classifier = nn.Sequential(nn.Flatten(), nn.Linear(9, 3))
    image = torch.linspace(0, 1, 9).reshape(1, 3, 3).requires_grad_()
    score = classifier(image)[0, 2]
    score.backward()  # no retain_graph
    saliency = image.grad.abs()[0]
    assert saliency.shape == (3, 3) and saliency.sum() > 0
    return f"saliency map from one plain backward():\n{saliency}"


@claim(
    "001-10",
    "001",
    "outdated",
    "history",
    "retain_variables is deprecated in favour of retain_graph and does essentially the same.",
    "It is not merely deprecated: it was removed in 0.4.0. Today's backward() has no such "
    "parameter.",
)
def proof_001_deprecated():
    params = list(inspect.signature(torch.autograd.backward).parameters)
    assert "retain_graph" in params and "retain_variables" not in params
    try:
        loss = torch.ones(1, requires_grad=True).sum()
        torch.autograd.backward(loss, retain_variables=True)
    except TypeError as error:
        rejected = f"{type(error).__name__}: {error}"
    else:
        raise AssertionError("retain_variables was expected to be rejected")
    return f"torch.autograd.backward parameters: {params}\n{rejected}"


def _piecewise_and_whole(layer, inputs, targets, pieces):
    """The gradient of ``layer``'s weight for a summed squared error: accumulated over ``pieces``
    backward calls (a fresh graph each, no retain_graph), then from one call on the whole batch.
    Used by the accumulation rows of 000 and 003."""
    for chunk, goal in zip(inputs.chunk(pieces), targets.chunk(pieces), strict=True):
        F.mse_loss(layer(chunk), goal, reduction="sum").backward()
    piecewise = layer.weight.grad.clone()
    layer.zero_grad()
    F.mse_loss(layer(inputs), targets, reduction="sum").backward()
    return piecewise, layer.weight.grad


def _two_heads():
    """A trunk with two heads and one batch: used by the multi-loss rows of 001."""
    torch.manual_seed(0)
    trunk, head_1, head_2 = nn.Linear(3, 3), nn.Linear(3, 1), nn.Linear(3, 1)
    batch = torch.linspace(-1, 1, 6).reshape(2, 3)

    def losses():
        shared = trunk(batch).tanh()
        return head_1(shared).pow(2).mean(), head_2(shared).pow(2).mean()

    return (trunk, head_1, head_2), losses


@claim(
    "001-11",
    "001",
    "correct",
    "/auto_examples/plot_multitask_losses",
    "Instead of two backward() calls you can add the losses and call backward() once; that "
    "works just as well.",
    "True: the gradients agree with two separate calls (to rounding), and no graph is retained.",
)
def proof_001_sum_works():
    layers, losses = _two_heads()
    loss_1, loss_2 = losses()
    loss_1.backward(retain_graph=True)
    loss_2.backward()
    separate = [layer.weight.grad.clone() for layer in layers]
    for layer in layers:
        layer.zero_grad()
    loss_1, loss_2 = losses()
    (loss_1 + loss_2).backward()
    for before, layer in zip(separate, layers, strict=True):
        assert torch.allclose(before, layer.weight.grad)
    return "trunk, head 1, head 2: gradients equal for the two ways"


@claim(
    "001-12",
    "001",
    "misleading",
    "several-losses",
    "A reply: with two backward() calls the layers between the losses get only the second "
    "loss's gradient and earlier layers the sum, whereas with the summed loss every layer is "
    "trained on loss1 + loss2, so the two ways differ.",
    "Both ways give every layer the same gradient: a layer that loss1 does not depend on gets "
    "only loss2's gradient in both cases, and shared layers get the sum in both cases.",
)
def proof_001_between_layers():
    torch.manual_seed(0)
    first, second = nn.Linear(2, 2), nn.Linear(2, 1)
    inputs = torch.tensor([[1.0, -0.5], [0.25, 2.0]])

    def losses():
        h = first(inputs).tanh()
        # loss1 right after the first layer, loss2 after the second
        return h.pow(2).mean(), second(h).pow(2).mean()

    loss1, loss2 = losses()
    loss1.backward(retain_graph=True)
    loss2.backward()
    sequential = [first.weight.grad.clone(), second.weight.grad.clone()]
    (only_loss2,) = torch.autograd.grad(losses()[1], second.weight)
    first.zero_grad()
    second.zero_grad()
    sum(losses()).backward()
    assert torch.allclose(sequential[0], first.weight.grad)
    assert torch.allclose(sequential[1], second.weight.grad)
    assert torch.allclose(second.weight.grad, only_loss2)
    return (
        "layer between the losses: same gradient both ways, = loss2's alone\n"
        "layer before loss1: same gradient (the sum) both ways"
    )


@claim(
    "001-13",
    "001",
    "correct",
    "several-losses",
    "A reply: the gradient of loss1 with respect to the weights of model 2 is zero.",
    "True: loss1 does not depend on model 2, so autograd finds no path there; asked to, it "
    "fills in zeros.",
)
def proof_001_no_path():
    torch.manual_seed(0)
    model_1, model_2 = nn.Linear(2, 2), nn.Linear(2, 1)
    out_1 = model_1(torch.tensor([[1.0, 2.0]]))
    loss1 = out_1.pow(2).sum()
    grads = torch.autograd.grad(
        loss1,
        [model_1.weight, model_2.weight],
        allow_unused=True,
        materialize_grads=True,
    )
    assert grads[0].abs().sum() > 0 and torch.count_nonzero(grads[1]) == 0
    return f"d loss1 / d model_2.weight = {grads[1]}"


@claim(
    "001-14",
    "001",
    "correct",
    "several-losses",
    "A reply: when the second loss is backpropagated, its gradient flows all the way back into "
    "the first model.",
    "True. (Strictly, backward() only fills .grad; the weights change at optimizer.step().)",
)
def proof_001_flows_back():
    torch.manual_seed(0)
    model_1, model_2 = nn.Linear(2, 2), nn.Linear(2, 1)
    before = model_1.weight.detach().clone()
    loss2 = model_2(model_1(torch.tensor([[1.0, 2.0]]))).pow(2).sum()
    loss2.backward()
    assert model_1.weight.grad.abs().sum() > 0
    assert torch.equal(model_1.weight, before)  # backward() changed no weight
    torch.optim.SGD(model_1.parameters(), lr=0.1).step()
    assert not torch.equal(model_1.weight, before)
    return f"model_1.weight.grad after loss2.backward():\n{model_1.weight.grad}"


@claim(
    "001-15",
    "001",
    "misleading",
    "backward-twice",
    "A reply: the summed loss adds the gradients of shared parameters, whereas two backward() "
    "calls compute each loss's gradients separately.",
    "Two backward() calls also add up: the second call adds its gradient into the same .grad, "
    "so shared parameters end with the sum either way.",
)
def proof_001_calls_also_add():
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    (g1,) = torch.autograd.grad((w**2).sum(), w)
    (g2,) = torch.autograd.grad((3 * w).sum(), w)
    (w**2).sum().backward()
    (3 * w).sum().backward()
    assert torch.equal(w.grad, g1 + g2)
    return lines(
        f"grad of loss1: {g1}",
        f"grad of loss2: {g2}",
        f".grad after two calls: {w.grad}",
    )


@claim(
    "001-16",
    "001",
    "wrong",
    "several-losses",
    "A reply: with two backward() calls, the optimizer's step size for shared parameters may "
    "depend on the loss that was backpropagated last.",
    "The optimizer sees only the final .grad, which is the same sum whatever the order; even "
    "Adam takes the same step (to rounding).",
)
def proof_001_step_size():
    def one_step(order):
        torch.manual_seed(0)
        layer = nn.Linear(2, 1)
        optimizer = torch.optim.Adam(layer.parameters(), lr=0.1)
        inputs = torch.tensor([[1.0, -1.0], [0.5, 2.0]])
        losses = {
            "l1": lambda: layer(inputs).pow(2).mean(),
            "l2": lambda: layer(inputs).mean(),
        }
        for name in order:
            losses[name]().backward()
        optimizer.step()
        return layer.weight.detach().clone()

    first, second = one_step(["l1", "l2"]), one_step(["l2", "l1"])
    assert torch.allclose(first, second)
    return f"weights after l1 then l2: {first}\nweights after l2 then l1: {second}"


# --------------------------------------------------------------------------------------------
# 002: the article on the position of retain_grad()
# --------------------------------------------------------------------------------------------


def _hidden_graph(early_retain: bool = False, late_retain: bool = False):
    """leaf -> hidden -> after -> loss, with retain_grad() on hidden before or after `after`."""
    leaf = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    hidden = leaf * 3
    if early_retain:
        hidden.retain_grad()
    after = hidden - 1
    if late_retain:
        hidden.retain_grad()
    loss = after.pow(2).mean()
    return leaf, hidden, loss


@claim(
    "002-1",
    "002",
    "misleading",
    "retain-grad",
    "Every tensor in the graph has a gradient buffer that collects its gradient during "
    "backward; PyTorch releases these buffers afterwards unless retain_grad() stops it.",
    "Gradients of intermediate tensors flow through the backward pass but are never stored by "
    "default; retain_grad() asks autograd to store one in .grad. Nothing is released.",
)
def proof_002_buffers():
    leaf, hidden, loss = _hidden_graph()
    passing = []
    hidden.register_hook(lambda grad: passing.append(grad.clone()))
    loss.backward()
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        stored = hidden.grad
    assert stored is None and len(passing) == 1
    return lines(
        f"gradient that passed through hidden: {passing[0]}",
        f"hidden.grad stored: {stored}",
    )


@claim(
    "002-2",
    "002",
    "misleading",
    "retain-grad",
    "retain_grad() is essential when a tensor's gradient is needed more than once, for example "
    "for higher-order gradients.",
    "Higher-order gradients need create_graph=True (and autograd.grad); retain_grad() plays no "
    "part in them.",
)
def proof_002_higher_order():
    z = torch.tensor([1.0, 2.0], requires_grad=True)
    inner = z.sin()  # no retain_grad() anywhere
    (first,) = torch.autograd.grad(inner.sum(), z, create_graph=True)
    (second,) = torch.autograd.grad(first.sum(), z)
    assert torch.allclose(second, -z.detach().sin())
    return f"second derivative of sin, no retain_grad(): {second}"


@claim(
    "002-3",
    "002",
    "wrong",
    "retain-grad",
    "Misplacing retain_grad() leads to a RuntimeError about accessing freed memory.",
    "No placement before backward() raises anything: a late retain_grad() works, silently and "
    "correctly.",
)
def proof_002_no_error():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        leaf, hidden, loss = _hidden_graph(late_retain=True)
        loss.backward()
        grad = hidden.grad
    assert caught == [] and grad is not None
    return f"late retain_grad(): no error, no warning, hidden.grad = {grad}"


@claim(
    "002-4",
    "002",
    "wrong",
    "retain-grad",
    "Without retain_grad(), when a tensor feeds several branches, the gradient from one branch "
    "overwrites the others, giving a wrong gradient.",
    "Autograd adds the gradients of all branches, with or without retain_grad().",
)
def proof_002_branches():
    q = torch.tensor([1.0, 2.0], requires_grad=True)
    shared = q * 2
    (shared * 3 + shared**2).sum().backward()  # two branches use shared
    expected = 2 * (3 + 2 * shared.detach())  # chain rule, both branches added
    assert torch.equal(q.grad, expected)
    return f"q.grad = {q.grad} (both branches added)"


@claim(
    "002-5",
    "002",
    "wrong",
    "retain-grad",
    "retain_grad() only works if called before the tensor is used further; called after, the "
    "gradient is released before it can be kept.",
    "What matters is calling it before backward(). Before or after the later operations, "
    ".grad is the same.",
)
def proof_002_placement():
    _, early, early_loss = _hidden_graph(early_retain=True)
    early_loss.backward()
    _, late, late_loss = _hidden_graph(late_retain=True)
    late_loss.backward()
    assert torch.equal(early.grad, late.grad)
    return f"retain_grad() early: {early.grad}\nretain_grad() late:  {late.grad}"


@claim(
    "002-6",
    "002",
    "wrong",
    "retain-grad",
    "Where retain_grad() sits changes the order in which gradients accumulate and can change "
    "the final gradient values, silently.",
    "retain_grad() only stores a copy of a gradient that flows anyway: the leaf gradients are "
    "identical with it early, late or absent.",
)
def proof_002_values_unchanged():
    results = {}
    for name, early, late in (
        ("none", False, False),
        ("early", True, False),
        ("late", False, True),
    ):
        leaf, _, loss = _hidden_graph(early, late)
        loss.backward()
        results[name] = leaf.grad
    assert torch.equal(results["none"], results["early"])
    assert torch.equal(results["none"], results["late"])
    shown = [f"leaf.grad, retain_grad() {k:5}: {g}" for k, g in results.items()]
    return lines(*shown)


@claim(
    "002-7",
    "002",
    "correct",
    "retain-grad",
    "Its first example: calling retain_grad() on an intermediate tensor before the rest of the "
    "forward pass makes its .grad available after backward().",
    "True (though 'before the rest of the forward pass' is not the condition; 'before "
    "backward()' is).",
)
def proof_002_example_one():
    _, hidden, loss = _hidden_graph(early_retain=True)
    loss.backward()
    assert hidden.grad is not None
    return f"hidden.grad = {hidden.grad}"


@claim(
    "002-8",
    "002",
    "wrong",
    "retain-grad",
    "Without retain_grad(), reading the intermediate tensor's .grad raises an error.",
    "It gives None, with a UserWarning that suggests retain_grad().",
)
def proof_002_none_not_error():
    _, hidden, loss = _hidden_graph()
    loss.backward()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = hidden.grad
    assert value is None and caught[0].category is UserWarning
    warning = str(caught[0].message).split(". ")[0]
    return f"hidden.grad = {value}\n{caught[0].category.__name__}: {warning}"


@claim(
    "002-9",
    "002",
    "wrong",
    "retain-grad",
    "Its third example: retain_grad() lets you call backward() a second time on the same loss "
    "and watch the gradients of each pass; without it the second call fails.",
    "retain_grad() has nothing to do with the graph's saved tensors: the second backward() fails "
    "the same way with or without it. Only retain_graph=True lets it run.",
)
def proof_002_second_backward():
    outcomes = []
    for use_retain_grad in (True, False):
        base = torch.tensor([1.5], requires_grad=True)
        square = base**2
        if use_retain_grad:
            square.retain_grad()
        loss = square**2
        loss.backward()
        try:
            loss.backward()
        except RuntimeError as error:
            outcome = first_sentence(error)
            outcomes.append(f"retain_grad()={use_retain_grad}: {outcome}")
        else:
            raise AssertionError("the second backward() was expected to fail")
    assert all("second time" in line for line in outcomes)
    return "\n".join(outcomes)


@claim(
    "002-10",
    "002",
    "misleading",
    "retain-grad",
    "Custom losses that use the gradient of an intermediate tensor need retain_grad() on it.",
    "retain_grad() is one way to read such a gradient after backward(). To use it inside a loss, "
    "torch.autograd.grad returns it directly (with create_graph=True, differentiably), no "
    "retain_grad() needed.",
)
def proof_002_grad_of_intermediate():
    leaf = torch.tensor([0.5, -1.0], requires_grad=True)
    hidden = leaf.tanh()
    score = (2 * hidden**2).sum()
    # no retain_grad() anywhere:
    (d_hidden,) = torch.autograd.grad(score, hidden, create_graph=True)
    assert torch.allclose(d_hidden, 4 * hidden)
    penalty = d_hidden.pow(2).sum()  # a loss built from that gradient
    penalty.backward()
    t = hidden.detach()
    assert torch.allclose(leaf.grad, 32 * t * (1 - t**2))
    return lines(
        f"d score / d hidden = {d_hidden.detach()}",
        f"leaf.grad from the penalty = {leaf.grad}",
    )


# --------------------------------------------------------------------------------------------
# 003: the Q&A page on the neural-style tutorial
# --------------------------------------------------------------------------------------------


@claim(
    "003-1",
    "003",
    "outdated",
    "history",
    "retain_variables is deprecated and is now called retain_graph.",
    "Renamed in 0.2.0 and removed altogether in 0.4.0: Tensor.backward() rejects it.",
)
def proof_003_renamed():
    m = torch.tensor([1.0], requires_grad=True)
    try:
        (m * m).sum().backward(retain_variables=False)
    except TypeError as error:
        rejected = f"{type(error).__name__}: {error}"
    else:
        raise AssertionError("retain_variables was expected to be rejected")
    assert "unexpected keyword argument 'retain_variables'" in rejected
    return rejected


@claim(
    "003-2",
    "003",
    "correct",
    "retain-and-create-graph",
    "The quoted documentation: retain_graph=False frees the graph, True is rarely needed, and "
    "the default follows create_graph.",
    "Still true, and the behaviour matches: the default is None, resolved to the value of "
    "create_graph. torch.autograd.backward and torch.autograd.grad keep that sentence; the "
    "docstring of Tensor.backward() words it differently (since 2.8.0), with the same meaning.",
)
def proof_003_doc_default():
    n = torch.tensor([0.5, 1.0], requires_grad=True)
    with_create = (n.exp() * n).sum()
    torch.autograd.grad(with_create, n, create_graph=True)
    torch.autograd.grad(with_create, n)  # kept, because create_graph was True
    without = (n.exp() * n).sum()
    without.backward()
    try:
        without.backward()
    except RuntimeError as error:
        second = first_sentence(error)
    else:
        raise AssertionError("without create_graph, the graph should be freed")
    assert "second time" in second
    function_doc = " ".join(torch.autograd.backward.__doc__.split())
    method_doc = " ".join(torch.Tensor.backward.__doc__.split())
    assert "Defaults to the value of ``create_graph``" in function_doc
    assert "inferred from ``create_graph``" in method_doc
    return lines(
        "create_graph=True, then again: fine",
        f"plain, then again: {second}",
        "torch.autograd.backward docstring: the default is the value of create_graph",
        "Tensor.backward docstring: the default is inferred from create_graph",
    )


@claim(
    "003-3",
    "003",
    "correct",
    "what-it-costs",
    "The question: with retain_graph=True the memory held for the graph is not freed by the "
    "backward pass.",
    "True: the tensors saved for backward stay allocated until the graph itself goes away.",
)
def proof_003_memory_kept():
    src = torch.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    packed_bytes = []

    def pack(t):
        packed_bytes.append(t.numel() * t.element_size())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        inner = src.tanh()
        out = (inner * inner).sum()
    watch = weakref.ref(inner)
    del inner
    out.backward(retain_graph=True)
    assert watch() is not None
    return (
        f"bytes saved for backward: {sum(packed_bytes)}\n"
        f"still held after backward(retain_graph=True): {watch() is not None}"
    )


@claim(
    "003-4",
    "003",
    "correct",
    "what-backward-frees",
    "Its example: two outputs (a mean and a sum) of the same intermediate tensor; backward() on "
    "the first, then on the second, fails unless the first call retained the graph.",
    "True: the shared part saved tensors, and the first pass released them.",
)
def proof_003_mean_then_sum():
    report = []
    for keep in (False, True):
        src = torch.tensor([[0.2, 0.4, 0.6]], requires_grad=True)
        shared = src.pow(3) * 5
        avg, total = shared.mean(), shared.sum()
        avg.backward(retain_graph=keep)
        try:
            total.backward()
            report.append(f"retain_graph={keep} on the first: second backward ran")
        except RuntimeError as error:
            outcome = first_sentence(error)
            report.append(f"retain_graph={keep} on the first: {outcome}")
    assert "second time" in report[0] and report[1].endswith("ran")
    return "\n".join(report)


@claim(
    "003-5",
    "003",
    "misleading",
    "what-backward-frees",
    "After the first backward(), the part of the graph that computed the first output has been "
    "freed.",
    "The nodes are all still there and still linked to the input; only their saved tensors were "
    "released.",
)
def proof_003_nodes_remain():
    src = torch.tensor([[0.2, 0.4, 0.6]], requires_grad=True)
    shared = src.pow(3) * 5
    avg, total = shared.mean(), shared.sum()
    avg.backward()
    chain, node = [], total.grad_fn
    while node is not None:
        chain.append(node.name())
        node = node.next_functions[0][0] if node.next_functions else None
    assert chain[-1] == "torch::autograd::AccumulateGrad"
    return "still linked after the first pass: " + " -> ".join(chain)


@claim(
    "003-6",
    "003",
    "correct",
    "backward-twice",
    "If every backward() retains the graph you can call backward as often as you like; the "
    "first call without it frees the graph, and the call after that fails.",
    "True, exactly in that order.",
)
def proof_003_call_sequence():
    src = torch.tensor([[0.2, 0.4, 0.6]], requires_grad=True)
    shared = src.pow(3) * 5
    avg, total = shared.mean(), shared.sum()
    log = []
    for name, out, keep in (
        ("mean", avg, True),
        ("sum", total, True),
        ("mean", avg, False),
    ):
        out.backward(retain_graph=keep)
        log.append(f"{name}.backward(retain_graph={keep}): ran")
    try:
        total.backward()
    except RuntimeError as error:
        log.append(f"sum.backward(): {first_sentence(error)}")
    else:
        raise AssertionError("the call after the freeing one was expected to fail")
    assert "second time" in log[-1]
    return "\n".join(log)


@claim(
    "003-7",
    "003",
    "misleading",
    "several-losses",
    "Multi-task learning with losses in different layers requires retain_graph=True on the "
    "first backward().",
    "Only if each loss gets its own backward(). Summing the losses and calling backward() once "
    "needs no flag and gives the same gradients.",
)
def proof_003_multitask_sum():
    torch.manual_seed(0)
    body, top = nn.Linear(2, 2), nn.Linear(2, 1)
    inputs = torch.tensor([[0.3, -0.7], [1.1, 0.4]])
    mid = body(inputs).sigmoid()
    loss_low, loss_high = mid.mean(), top(mid).pow(2).mean()
    (loss_low + loss_high).backward()  # one call, no retain_graph
    summed = body.weight.grad.clone()
    body.zero_grad()
    mid = body(inputs).sigmoid()
    mid.mean().backward(retain_graph=True)
    top(mid).pow(2).mean().backward()
    assert torch.allclose(summed, body.weight.grad)
    return lines(
        f"body gradient, summed losses: {summed}",
        f"body gradient, two calls:     {body.weight.grad}",
    )


@claim(
    "003-8",
    "003",
    "correct",
    "/auto_examples/plot_multitask_losses",
    "For a network with two heads on shared layers, adding the two losses and backpropagating "
    "once is probably the best way.",
    "True: one backward(), no retained graph, and the same gradients as two calls.",
)
def proof_003_sum_is_best():
    torch.manual_seed(0)
    conv = nn.Conv1d(1, 2, 3)
    cat_head, car_head = nn.Linear(4, 1), nn.Linear(4, 1)
    signal = torch.linspace(-1, 1, 8).reshape(2, 1, 4)

    def both():
        features = conv(signal).relu().flatten(1)
        return cat_head(features).pow(2).mean(), car_head(features).abs().mean()

    cat_loss, car_loss = both()
    (cat_loss + car_loss).backward()
    once = conv.weight.grad.clone()
    conv.zero_grad()
    cat_loss, car_loss = both()
    cat_loss.backward(retain_graph=True)
    car_loss.backward()
    assert torch.allclose(once, conv.weight.grad)
    return "shared conv layer: same gradient from the summed loss as from two calls"


@claim(
    "003-9",
    "003",
    "wrong",
    "what-backward-frees",
    "Backpropagating one branch destroys the graph in the shared layers, so the second branch "
    "fails because no graph connects its output to the input any more.",
    "The shared layers' nodes still connect the second output to the input. The second pass "
    "fails because their saved tensors were freed, and the error says exactly that.",
)
def proof_003_no_graph_claim():
    torch.manual_seed(0)
    shared, branch_a, branch_b = nn.Linear(2, 2), nn.Linear(2, 1), nn.Linear(2, 1)
    inputs = torch.tensor([[1.0, 0.5]])
    common = shared(inputs).tanh()
    branch_a(common).sum().backward()
    out_b = branch_b(common).sum()
    tanh_node = common.grad_fn
    # still connected to the shared layer's node:
    assert tanh_node.next_functions[0][0].name() == "AddmmBackward0"
    try:
        out_b.backward()
    except RuntimeError as error:
        message, full = first_sentence(error), str(error)
    else:
        raise AssertionError("the second branch's backward was expected to fail")
    assert "already been freed" in full and "second time" in message
    return lines(
        "shared tanh node still feeds from AddmmBackward0",
        f"second branch: {message}",
    )


@claim(
    "003-10",
    "003",
    "wrong",
    "backward-twice",
    "If every backward() pass retains the graph, the graph attached to the outputs is never freed.",
    "A retained graph is freed like any other object as soon as nothing refers to its outputs "
    "any more (for example at the next loop iteration).",
)
def proof_003_freed_later():
    src = torch.tensor([1.0, 2.0], requires_grad=True)
    inner = src.cos()
    watch = weakref.ref(inner)
    out = (inner * inner).sum()
    del inner
    out.backward(retain_graph=True)
    out.backward(retain_graph=True)
    held = watch() is not None
    del out  # the last reference to the graph
    assert held and watch() is None
    return lines(
        f"saved tensor alive after retained passes: {held}",
        f"after `del out`: {watch() is not None}",
    )


@claim(
    "003-11",
    "003",
    "correct",
    "backward-twice",
    "Every backward() call adds its gradients, in place, to what is already in each .grad.",
    "True: a second backward() adds into the same .grad tensor.",
)
def proof_003_in_place():
    p = torch.tensor([1.0, 2.0], requires_grad=True)
    (p * p).sum().backward()
    storage = p.grad.data_ptr()
    first = p.grad.clone()
    (p * p).sum().backward()
    assert p.grad.data_ptr() == storage and torch.equal(p.grad, 2 * first)
    return f"after one pass: {first}\nafter two passes, same tensor: {p.grad}"


@claim(
    "003-12",
    "003",
    "correct",
    "backward-twice",
    "Processing a batch one sample at a time and accumulating the gradients gives the same "
    "optimisation step as one batched update that sums the gradients.",
    "True when the batch loss is the sum of the per-sample losses (with a mean, scale each "
    "sample's loss by 1/N).",
)
def proof_003_batch_equivalence():
    torch.manual_seed(0)
    samples, labels = torch.linspace(-1, 1, 12).reshape(4, 3), torch.tensor([[1.0], [0.0]] * 2)
    one_at_a_time, whole = _piecewise_and_whole(nn.Linear(3, 1), samples, labels, pieces=4)
    assert torch.allclose(one_at_a_time, whole)
    return lines(f"one sample at a time: {one_at_a_time}", f"whole batch:          {whole}")


@claim(
    "003-13",
    "003",
    "outdated",
    "/auto_examples/plot_style_transfer_losses",
    "The neural-style tutorial's loss modules each call backward() on their own loss with the "
    "keep-the-graph flag on, because the losses share one forward pass.",
    "Each module's own backward() would indeed need the flag. That design left the tutorial with "
    "its update for PyTorch 0.4: today it adds the losses and calls backward() once, with the same gradients.",
)
def proof_003_style_tutorial():
    image = torch.linspace(0, 1, 12).reshape(1, 1, 3, 4).requires_grad_()
    torch.manual_seed(0)
    features = nn.Conv2d(1, 2, 2)

    def losses():
        maps = features(image)
        gram = maps.flatten(2) @ maps.flatten(2).transpose(1, 2)
        # a content-like and a style-like loss
        return maps.pow(2).mean(), gram.pow(2).mean()

    content, style = losses()
    content.backward()
    try:
        style.backward()
    except RuntimeError as error:
        per_module = first_sentence(error)
    else:
        raise AssertionError("a second module's backward was expected to fail")
    image.grad = None
    content, style = losses()
    content.backward(retain_graph=True)
    style.backward()
    retained = image.grad.clone()
    image.grad = None
    sum(losses()).backward()
    assert torch.allclose(retained, image.grad)
    return (
        f"per-module backward, no flag: {per_module}\n"
        "per-module with the flag vs one backward of the sum: same image gradient"
    )


# --------------------------------------------------------------------------------------------
# Running and rendering
# --------------------------------------------------------------------------------------------


def run_all() -> dict[str, str]:
    """Run every proof; any failing assertion propagates (and fails the page's build)."""
    return {row.id: row.proof() for row in CLAIMS}


def run_source(source: str) -> dict[str, str]:
    """Run the proofs of one text's rows (for that text's page)."""
    return {row.id: row.proof() for row in CLAIMS if row.source == source}


def summary_markdown() -> str:
    """A table of verdict counts per source, computed from the rows."""
    counts = Counter((row.source, row.verdict) for row in CLAIMS)
    head = "| source | " + " | ".join(f"{{bdg-{c}}}`{v}`" for v, c in VERDICTS.items())
    lines = [head + " | rows |", "|" + " --- |" * (len(VERDICTS) + 2)]
    for source in SOURCES:
        cells = [str(counts[(source, v)]) for v in VERDICTS]
        total = sum(counts[(source, v)] for v in VERDICTS)
        link = f"{{doc}}`{source} <{SOURCE_PAGES[source]}>`"
        lines.append(f"| {link} | " + " | ".join(cells) + f" | {total} |")
    totals = [str(sum(counts[(s, v)] for s in SOURCES)) for v in VERDICTS]
    lines.append("| **all** | " + " | ".join(totals) + f" | **{len(CLAIMS)}** |")
    return "\n".join(lines)


CODE = re.compile(
    r"(?<![\w`.])("
    r"(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*\(\)"  # calls written with empty parentheses
    r"|\.grad\b|autograd\.grad\b"
    r"|(?:retain_graph|create_graph|retain_variables)(?:=(?:True|False))?"
    r")"
)


def code_spans(text: str) -> str:
    """Mark API names in a claim or finding as inline code."""
    return CODE.sub(r"`\1`", text)


def helpers_markdown() -> str:
    """The source of the small helpers that several proofs call."""
    helpers = (lines, first_sentence, _piecewise_and_whole, _two_heads, _hidden_graph)
    code = "\n\n".join(inspect.getsource(helper).rstrip() for helper in helpers)
    return "\n".join([":::{code-block} python", ":class: output ledger-proof", code, ":::"])


def sources_markdown() -> str:
    """The four texts, as a list of links to their pages."""
    return "\n".join(
        f"- {{doc}}`{key} <{SOURCE_PAGES[key]}>`: {code_spans(text)}"
        for key, text in SOURCES.items()
    )


def page_link(row: Claim) -> str:
    return f"{{doc}}`{row.page}`"


def proof_code(row: Claim) -> str:
    """The proof function's source, without the decorator that registers it."""
    source = inspect.getsource(row.proof)
    return source[source.index("def ") :].rstrip()


def source_markdown(source: str, evidence: dict[str, str]) -> str:
    """At-a-glance table, then one card per row of the source: claim, verdict, proof, output."""
    rows = [row for row in CLAIMS if row.source == source]
    parts = ["| row | claim (paraphrased) | verdict |", "| --- | --- | --- |"]
    for row in rows:
        badge = f"{{bdg-{VERDICTS[row.verdict]}}}`{row.verdict}`"
        shown_id = row.id.replace("-", "\u2011")  # a non-breaking hyphen keeps the id on one line
        parts.append(
            f"| {{ref}}`{shown_id} <ledger-{row.id}>` | {code_spans(row.claim)} | {badge} |"
        )
    for row in rows:
        badge = f"{{bdg-{VERDICTS[row.verdict]}}}`{row.verdict}`"
        parts += [
            "",
            f"(ledger-{row.id})=",
            f"::::{{card}} {row.id} {badge}",
            f"**Claim.** {code_spans(row.claim)}",
            "",
            f"**What happens.** {code_spans(row.finding)}",
            "",
            ":::{code-block} python",
            ":class: output ledger-proof",
            proof_code(row),
            ":::",
            "",
            "Output of the proof, from this build:",
            "",
            ":::{code-block} text",
            ":class: output ledger-evidence",
            evidence[row.id],
            ":::",
            "",
            f"Explained in: {page_link(row)}",
            "::::",
        ]
    return "\n".join(parts)
