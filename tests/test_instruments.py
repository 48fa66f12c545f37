"""The two instruments readers run on their own code: docs/find_old_graph.py, docs/why_no_grad.py.

Running either must change nothing in the reader's program (parameters, buffers, BatchNorm's
statistics, .grad, hooks, grad mode, random state; a checkpointed block is not run again where
torch shows saved tensors' hooks), survive cycles and very large objects, say what it searched
when it finds nothing, refuse bad input with one sentence, stay fast, and keep the outcomes
measured on real reports (measure/instrument_cases.py).

    .nox/tests/bin/python -m pytest tests/test_instruments.py
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs"))
sys.path.insert(0, str(ROOT / "measure"))
import find_old_graph as fog  # noqa: E402
from find_old_graph import UNPACKS_TO_LOOK, find_old_graph, mark_step  # noqa: E402
from why_no_grad import why_no_grad  # noqa: E402


@pytest.fixture(autouse=True)
def no_marker():
    fog._MARK = None
    yield
    fog._MARK = None


class Net(nn.Module):
    """A small model with every kind of state the tests watch: BatchNorm statistics, a buffer, a
    hook on a module, a hook on a parameter, and state kept on the module between calls."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 4)
        self.norm = nn.BatchNorm1d(4)
        self.head = nn.Linear(4, 1)
        self.register_buffer("seen", torch.zeros(4))
        self.hidden = torch.zeros(4)
        self.calls = []
        self.head.register_forward_hook(lambda m, i, o: self.calls.append("hook"))
        self.lin.weight.register_hook(lambda g: g)

    def forward(self, x):
        h = torch.tanh(self.norm(self.lin(x)))
        self.hidden = h.mean(0) + self.hidden  # carried from step to step
        return self.head(h + self.hidden).pow(2).mean()


def snapshot(model: nn.Module, opt: torch.optim.Optimizer) -> dict:
    """Everything of the reader's program the instruments must not touch."""
    state = {
        "params": {n: p.detach().clone() for n, p in model.named_parameters()},
        "flags": {n: p.requires_grad for n, p in model.named_parameters()},
        "versions": {n: p._version for n, p in model.named_parameters()},
        "buffers": {n: b.detach().clone() for n, b in model.named_buffers()},
        "grads": {n: None if p.grad is None else p.grad.clone() for n, p in model.named_parameters()},
        "module hooks": [
            (n, len(m._forward_hooks), len(m._forward_pre_hooks), len(m._backward_hooks))
            for n, m in model.named_modules()
        ],
        "tensor hooks": {n: len(p._backward_hooks or {}) for n, p in model.named_parameters()},
        "opt state": {k: {kk: vv.clone() if torch.is_tensor(vv) else vv for kk, vv in v.items()} for k, v in opt.state.items()},
        "grad mode": (torch.is_grad_enabled(), torch.is_inference_mode_enabled()),
        "anomaly": torch.is_anomaly_enabled(),
        "rng": (torch.get_rng_state(), random.getstate(), np.random.get_state()[1].copy()),
        "hidden": model.hidden.detach().clone(),
        "hidden fn": type(model.hidden.grad_fn).__name__,
        "calls": list(model.calls),
    }  # fmt: skip
    return state


def assert_same(before: dict, after: dict) -> None:
    for key in before:
        a, b = before[key], after[key]
        if key == "rng":
            assert torch.equal(a[0], b[0]) and a[1] == b[1] and np.array_equal(a[2], b[2]), key
        elif isinstance(a, dict):
            assert a.keys() == b.keys(), key
            for name in a:
                x, y = a[name], b[name]
                if isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor):
                    assert (x is None) == (y is None) and (x is None or torch.equal(x, y)), (
                        key,
                        name,
                    )
                elif isinstance(x, dict):
                    assert x.keys() == y.keys() and all(
                        torch.equal(x[k], y[k]) if torch.is_tensor(x[k]) else x[k] == y[k]
                        for k in x
                    ), (key, name)
                else:
                    assert x == y, (key, name)
        elif isinstance(a, torch.Tensor):
            assert torch.equal(a, b), key
        else:
            assert a == b, key


def training_state():
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.Adam(model.parameters())
    loss = model(torch.randn(5, 3))
    loss.backward()
    opt.step()
    return model, opt


@pytest.mark.parametrize("when", ["before backward", "after backward", "in the except"])
def test_instruments_change_nothing(when):
    model, opt = training_state()
    random.seed(3)
    np.random.seed(3)
    loss = model(torch.randn(5, 3))  # the second step: self.hidden carries step 1's graph
    if when == "after backward":
        model.hidden = model.hidden.detach()
        loss = model(torch.randn(5, 3))
        loss.backward()
    caught = None
    if when == "in the except":
        try:
            loss.backward()
        except RuntimeError as error:
            caught = error
        assert caught is not None
    before = snapshot(model, opt)
    if caught is None:
        report = find_old_graph(loss, model=model, opt=opt)
        found = why_no_grad(loss, model=model, opt=opt)
    else:
        try:
            raise caught
        except RuntimeError:  # as the reader calls them: in the except of the failing backward
            report = find_old_graph(loss, model=model, opt=opt)
            found = why_no_grad(loss, model=model, opt=opt)
    assert_same(before, snapshot(model, opt))
    assert str(report) and str(found)
    if when != "after backward":
        assert "model.hidden" in str(report)


def test_checkpointed_block_not_run_again():
    """Looking at a checkpointed block's saved tensors would run it again (BatchNorm would count a
    batch more): neither instrument does where torch shows saved tensors' hooks."""
    norm = nn.BatchNorm1d(3)
    out = checkpoint(norm, torch.randn(4, 3), use_reentrant=False).pow(2).sum()
    assert norm.num_batches_tracked == 1
    before = norm.running_mean.clone()
    if UNPACKS_TO_LOOK:
        with pytest.warns(UserWarning, match="unpacks it"):
            find_old_graph(out, norm=norm)
        return
    report = find_old_graph(out, norm=norm)
    why_no_grad(out, norm=norm)
    assert not report and norm.num_batches_tracked == 1 and torch.equal(norm.running_mean, before)


def test_no_property_is_read():
    """Reading a property runs code; a lazy_property not yet computed stays uncomputed."""
    reads = []

    class Sampler:
        def __init__(self):
            self.history = []

        @property
        def expensive(self):
            reads.append("read")
            return torch.ones(1, requires_grad=True) * 2

    logits = torch.randn(3, requires_grad=True)
    dist = torch.distributions.Categorical(logits=logits * 1)
    find_old_graph(None, sampler=Sampler(), dist=dist)
    assert reads == [] and "probs" not in vars(dist)


def test_cycles_and_a_very_large_object():
    a = []
    a.append(a)
    d = {"self": None}
    d["self"] = d

    class Node:
        def __init__(self):
            self.next = self

    big = list(range(2_000_000))
    start = time.perf_counter()
    report = find_old_graph(None, a=a, d=d, node=Node(), big=big)
    elapsed = time.perf_counter() - start
    assert report.budget_reached and "not all searched" in str(report)
    assert elapsed < 10, f"{elapsed:.1f} s for a 2,000,000-item list"
    small = find_old_graph(None, a=a, d=d, node=Node())
    assert not small.budget_reached and small.objects < 20


def test_nothing_found_says_what_it_searched():
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        loss = model(torch.randn(4, 3)).pow(2).mean()
        report = find_old_graph(loss, model=model, opt=opt)
        assert not report
        opt.zero_grad()
        loss.backward()
        opt.step()
    text = str(report)
    assert text.startswith("Nothing from an earlier step") and "model, opt" in text
    assert "mark_step()" in text  # what it cannot see without the marker
    found = why_no_grad(loss, model=model)
    assert not found and str(found).startswith("0 of 2") and "model.weight" in str(found)


@pytest.mark.parametrize(
    "call, error, words",
    [
        (lambda: find_old_graph(3.0), TypeError, "must be the tensor you call backward() on"),
        (lambda: find_old_graph(torch.ones(2)), ValueError, "no graph to search"),
        (lambda: find_old_graph(None), ValueError, "give a loss, or objects"),
        (lambda: why_no_grad("loss", w=torch.ones(1)), TypeError, "must be the tensor"),
        (
            lambda: why_no_grad(torch.ones(1, requires_grad=True) * 2),
            ValueError,
            "name what you expected",
        ),
        (lambda: why_no_grad(torch.ones(2), w=torch.ones(1)), ValueError, "the loss has no graph"),
        (
            lambda: why_no_grad(torch.ones(1, requires_grad=True) * 2, w=3),
            TypeError,
            "must be a tensor",
        ),
    ],
)
def test_bad_input_gets_one_sentence(call, error, words):
    with pytest.raises(error, match=r"^(find_old_graph|why_no_grad): ") as caught:
        call()
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_mark_step_finds_a_kept_graph():
    """With retain_graph=True nothing is freed: only the step marker tells the old part."""
    w = torch.randn(3, requires_grad=True)
    built_before = torch.tanh(w * 2)
    reports = []
    for _ in range(2):
        mark_step()
        loss = (built_before * torch.randn(3)).sum()
        reports.append(find_old_graph(loss, built_before=built_before))
        loss.backward(retain_graph=True)
    assert reports[1] and "made before mark_step()" in str(reports[1])
    fog._MARK = None
    assert not find_old_graph(loss, built_before=built_before)  # unmarked: it cannot tell


def test_culprits_on_reconvergent_paths():
    """Review FO-1/EA-5: a freed node used directly by the new graph and through another freed
    node is a culprit both ways."""
    a, b = torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)
    old = a * b
    old2 = old.exp()
    old2.sum().backward()
    loss = old2.sum() + ((old + 1) * 2).sin().sum()
    assert {c.node for c in find_old_graph(loss).culprits} == {"ExpBackward0", "MulBackward0"}


def test_lines_name_the_compiled_functions_caller():
    """Review FO-3/EA-7: a torch.compile'd region is named with the line that called it."""
    w = torch.randn(3, requires_grad=True)

    @torch.compile(backend="aot_eager")
    def scaled(x):
        return (x * w).tanh()

    with torch.autograd.set_detect_anomaly(True):
        kept = scaled(torch.ones(3))  # the caller's line
        kept.sum().backward()
        report = find_old_graph((kept * 2).sum())
    (culprit,) = report.culprits
    assert "compiled function scaled" in culprit.line and "kept = scaled(" in culprit.caller


def test_transformers_cache_object_is_searched():
    """Review WH-1: tensors inside transformers' DynamicCache (an object, not a tuple) are found."""
    transformers = pytest.importorskip("transformers")
    cache = transformers.DynamicCache()
    w = torch.randn(1, requires_grad=True)
    cache.update(torch.randn(1, 2, 3, 4) * w, torch.randn(1, 2, 3, 4) * w, 0)
    (cache.layers[0].keys.sum() + cache.layers[0].values.sum()).backward()
    report = find_old_graph(None, cache=cache)
    assert {c.path for c in report.carriers} >= {"cache.layers[0].keys", "cache.layers[0].values"}


def test_fast_on_a_large_model_and_graph():
    """A few hundred modules, about 10^4 nodes: well under a second each (the best of three)."""
    model = nn.Sequential(*[nn.Sequential(nn.Linear(8, 8), nn.Tanh()) for _ in range(150)])
    opt = torch.optim.Adam(model.parameters())
    x = torch.randn(2, 8)
    for _ in range(20):
        x = model(x)
    loss = x.sum()
    for run in (
        lambda: find_old_graph(loss, model=model, opt=opt),
        lambda: why_no_grad(loss, model=model),
    ):
        times = []
        for _ in range(3):  # CPU time of this process: other processes on the machine do not count
            start = time.process_time()
            found = run()
            times.append(time.process_time() - start)
        assert min(times) < 1.0, f"{min(times):.2f} s of CPU for {found.__class__.__module__}"
    assert find_old_graph(loss).nodes > 9000 and len(list(model.modules())) > 300


def test_real_reports_keep_their_recorded_outcome():
    """measure/instrument_cases.py: each cited report solved, partial or missed as recorded."""
    import instrument_cases

    measured = {c.run.__name__: instrument_cases.outcome(c)[0] for c in instrument_cases.CASES}
    assert measured == instrument_cases.RECORDED
    for instrument in ("find_old_graph", "why_no_grad"):
        assert sum(c.instrument == instrument for c in instrument_cases.CASES) >= 10


def test_why_no_grad_rules():
    """The rules of docs/find-the-cause.md's table, one each (the page shows them executed)."""
    lin = nn.Linear(3, 1)
    x = torch.randn(2, 3)
    moved = torch.randn(3, requires_grad=True).double()
    frozen = nn.Linear(3, 1).requires_grad_(False)
    loss = lin(x).sum() + (moved * 2).sum() + frozen(x).sum()
    loss.backward()
    report = why_no_grad(loss, lin=lin, moved=moved, frozen=frozen, unused=nn.Linear(3, 1))
    assert report["moved"].rule == "not a leaf: a copy"
    assert report["frozen.weight"].rule == "frozen"
    assert report["unused.weight"].rule == "not on the graph: its module is not used or is cut"
    assert report["lin.weight"].rule == "has a gradient"


def test_every_kind_of_reference_is_followed():
    """Each reference kind Python has (docs/find-the-cause.md's table groups some): the walk
    names the place of a tensor that an earlier backward freed."""
    import collections
    import dataclasses
    import functools
    import types

    w = torch.randn(3, requires_grad=True)
    old = (w * 2).exp()
    old.sum().backward()  # its graph is freed: this is "an earlier step's" tensor

    class Slotted:
        __slots__ = ("value",)

    class Holder:
        shared = [old]  # a class attribute

        def method(self):
            return self

    @dataclasses.dataclass
    class Record:
        value: torch.Tensor

    slotted = Slotted()
    slotted.value = old
    pair = collections.namedtuple("Pair", "first second")(old, 1)
    closure = (lambda v: lambda: v)(old)

    def defaults(x, memory=(old,)):
        return x

    module = types.ModuleType("yours")
    module.__file__ = str(ROOT / "yours.py")  # a module of your own, passed by name
    module.value = old
    places = {
        "slotted": (slotted, "slotted.value"),
        "holder": (Holder(), "Holder.shared[0]"),
        "bound": (Holder().method, "Holder.shared[0]"),
        "record": (Record(old), "record.value"),
        "pair": (pair, "pair.first"),
        "queue": (collections.deque([1, old]), "queue[1]"),
        "items": ({old}, "items{item 0}"),
        "closure": (closure, "closure.<closure v>"),
        "defaults": (defaults, "defaults.<default memory>[0]"),
        "partial": (functools.partial(print, old), "partial.args[0]"),
        "module": (module, "module.value"),
        "nested": ({"a": [{"b": old}]}, "nested['a'][0]['b']"),
    }
    for name, (value, path) in places.items():
        report = find_old_graph(None, **{name: value})
        assert [c.path for c in report.carriers] == [path], (name, str(report))


def test_lines_for_the_frameworks_page():
    """The lines given for docs/frameworks.md run in real Lightning and Accelerate, as pinned."""
    pytest.importorskip("lightning")
    pytest.importorskip("accelerate")
    import instrument_cases

    printed = instrument_cases.frameworks()
    for name, prefix in (("lightning", "module.net."), ("accelerate", "model.")):
        texts = "\n".join(printed[name])
        assert f"{prefix}hidden: rebuilt this step" in texts, name
        assert f"{prefix}frozen.weight" in texts and "[frozen]" in texts, name
