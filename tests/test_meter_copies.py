"""One saved-bytes meter: the gallery scripts' copies are the pages' helper, verbatim.

Pages import ``SavedBytes`` from ``docs/saved_bytes.py``; gallery scripts must run with torch,
numpy and matplotlib alone, so each carries a copy of the block between the ``SavedBytes meter``
markers. These tests keep every copy identical to the helper's block, so that a figure measured on
a page and in a script is the same quantity, and check that the meter measures what the pages say
it measures.
"""

from __future__ import annotations

import importlib.util
import re

import pytest
import torch
from conftest import ROOT, gallery_scripts

HELPER = ROOT / "docs" / "saved_bytes.py"
BLOCK = re.compile(r"^# >>> SavedBytes meter.*?^# <<< SavedBytes meter$", re.M | re.S)
# Scripts known to measure saved bytes; any other script that defines the meter is checked too.
EXPECTED = {"plot_gan_step.py", "plot_multitask_losses.py", "plot_truncated_bptt.py"}


def block_of(path):
    blocks = BLOCK.findall(path.read_text(encoding="utf-8"))
    assert len(blocks) == 1, f"{path.name}: {len(blocks)} marked SavedBytes blocks, not one"
    return blocks[0]


def scripts_with_meter():
    found = {p for p in gallery_scripts() if "class SavedBytes" in p.read_text(encoding="utf-8")}
    assert EXPECTED <= {p.name for p in found}, "a script lost its meter: update EXPECTED"
    return sorted(found)


@pytest.mark.parametrize("script", scripts_with_meter(), ids=lambda p: p.name)
def test_script_copy_is_verbatim(script):
    assert block_of(script) == block_of(HELPER), (
        f"{script.name}: the SavedBytes block differs from docs/saved_bytes.py; copy it verbatim"
    )


def test_only_the_marked_block_defines_the_meter():
    for path in [HELPER, *scripts_with_meter()]:
        text = path.read_text(encoding="utf-8")
        outside = BLOCK.sub("", text)
        assert "class SavedBytes" not in outside, f"{path.name} defines a second SavedBytes"


@pytest.fixture(scope="module")
def meter_module():
    spec = importlib.util.spec_from_file_location("saved_bytes", HELPER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_counts_blocks_once_and_releases_them(meter_module):
    weight = torch.randn(8, 8, requires_grad=True)
    data = torch.randn(4, 8)
    meter = meter_module.SavedBytes(skip=[weight])
    with meter:
        hidden = torch.tanh(data @ weight)  # mm saves data (weight skipped), tanh its result
        loss = (hidden[:, :2] ** 2).sum()  # pow saves a view of hidden: same block, once
    assert meter.held == data.nbytes + hidden.nbytes
    assert meter.peak == meter.total == meter.held
    loss.backward()
    assert meter.held == 0 and meter.total == data.nbytes + hidden.nbytes


def test_does_not_see_wrapped_numbers_or_ctx_attributes(meter_module):
    class KeepsOnCtx(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.kept = x.detach()
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return grad * 2

    vec = torch.randn(3, requires_grad=True)
    meter = meter_module.SavedBytes()
    with meter:
        scaled = vec * 3.0  # saves a wrapped float64 scalar that the pack hook never sees
        KeepsOnCtx.apply(vec)
    assert scaled.grad_fn._saved_other.dtype == torch.float64
    assert meter.total == 0
