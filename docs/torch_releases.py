"""Which torch releases the site holds on: the results of `nox -s versions`, and how to show them.

measure/run_versions.py ran every download of the site (page notebooks, gallery scripts, helper
modules) alone on each release, with the pins committed in requirements/versions/, through the
project's one download runner (measure/run_alone.py: a notebook runs past its first failure, and
each cell is judged as the build judges it, declared errors included), and rewrote the block
between the two "results" lines below; nothing else here is generated. docs/which-torch.md shows
them; its downloaded notebook carries this file.
"""

from __future__ import annotations

import os

HOLDS = ("pass", "flaky")  # flaky: failed on a busy machine, then passed when run again
# The differences docs/which-torch.md explains (its labels), each with texts only its failures show.
EXPLAINED = {
    "which-torch-autocast-cache": ("#142234",),  # the bug table's cells fail with the issue
    "which-torch-saved-hooks-compiled": ("#113263",),
    "which-torch-unfrozen-compiled": ("#139476",),
    "which-torch-inplace-function-compiled": ("#180642",),
    "which-torch-aliased-function-compiled": ("#183604",),
    "which-torch-wordings": ("older wording",),
    "which-torch-fsdp2-cpu": ("record_event", "no fully_shard before torch 2.6"),
    "which-torch-profiler-events": ("end_ns",),
    "which-torch-donated-buffers": ("donated buffers", "donated_buffer"),
    "which-torch-compiled-retain-grad": (
        "hidden.grad",
        "retain_grad()",
        '("CompiledFunctionBackward", "Sum',
    ),
    "which-torch-backward-doc": ("inferred from ``create_graph``", "new_wording", 'doc.index(";"'),
    "which-torch-float-warning": ("float(): ",),
    "which-torch-checkpoint-warning": ("Starting in PyTorch 2.9",),
    "which-torch-hook-warning": ("no inputs require gradients", "BackwardHookFunction"),
    "which-torch-fsdp2-gloo": ("(norm x2)",),
    "which-torch-saved-tensor-hooks": ("unpack_hook", "num_batches_tracked"),
    "which-torch-module-hooks": (
        'row(f"register_module_{kind}")',
        'v == "yes" for (name, _), v in other',
    ),
    "which-torch-libraries": ("requires PyTorch >= 2.6",),
}

# --- results: written by measure/run_versions.py ---
# fmt: off
RUN = {"date": "6 December 2026", "commit": "1bbd0e3", "site_torch": "2.13.0", "runner": "measure/run_alone.py"}
NUMPY = {"2.4.1": "2.4.6", "2.6.0": "2.4.6", "2.8.0": "2.4.6", "2.11.0": "2.4.6", "2.13.0": "2.4.6"}  # the numpy each release ran with
# (release, download, outcome, cells, failed, not_run, error), by measure/run_alone.py:
# outcome: pass, fail, flaky (failed, then passed when run again), extras (the page's extra
# requirements do not install on this release), not run; cells: a notebook's code cells or
# a script's # %% blocks; failed: [cell, problem, the line it points at] for each cell that
# raised what it should not, or not what it declares; not_run: cells that never ran; error:
# what stopped the whole run (extras: pip's error)
RESULTS = [
    ("2.4.1", "autograd_graph.py", "pass", 1, [], [], ""),
    ("2.4.1", "backward-twice.ipynb", "pass", 7, [], [], ""),
    ("2.4.1", "ddp_worker.py", "pass", 1, [], [], ""),
    ("2.4.1", "errors.ipynb", "pass", 5, [], [], ""),
    ("2.4.1", "find-the-cause.ipynb", "fail", 8, [[5, "raised ImportError: \nDynamicCache requires PyTorch >= 2.6, but PyTorch was not found or an older version is installed.\nPlease install or upgrade PyTorch by following the instructions on the installation page:\nhttps://pytorch.org/get-started/locally/\nPlease note that you may need to restart your runtime after installation.\n", "found = loop(make, fix=False)"]], [], ""),
    ("2.4.1", "find_old_graph.py", "pass", 1, [], [], ""),
    ("2.4.1", "frameworks.ipynb", "extras", 0, [], [], "ERROR: Cannot install -r $TORCH_RELEASES/torch-2.4.1+frameworks/requirements.txt (line 1), -r $TORCH_RELEASES/torch-2.4.1+frameworks/requirements.txt (line 2), -r $TORCH_RELEASES/torch-2.4.1+frameworks/requirements.txt (line 4) and vector-quantize-pytorch because these package versions have conflicting dependencies."),
    ("2.4.1", "history.ipynb", "pass", 13, [], [], ""),
    ("2.4.1", "hooks.ipynb", "fail", 14, [[12, "raised AssertionError: ", "assert row(f\"Module.register_{kind}\") == row(f\"register_module_{kind}\")"], [13, "raised AssertionError: ", "assert all(v == \"yes\" for (name, _), v in other.items() if name != \"disable_saved_tensors_hooks\")"]], [], ""),
    ("2.4.1", "hooks_table.py", "pass", 1, [], [], ""),
    ("2.4.1", "how-this-site-works.ipynb", "pass", 4, [], [], ""),
    ("2.4.1", "index.ipynb", "pass", 2, [], [], ""),
    ("2.4.1", "ledger-explainer.ipynb", "pass", 13, [], [], ""),
    ("2.4.1", "ledger-forum-thread.ipynb", "pass", 36, [], [], ""),
    ("2.4.1", "ledger-neural-style-qa.ipynb", "pass", 29, [], [], ""),
    ("2.4.1", "ledger-retain-grad-article.ipynb", "pass", 17, [], [], ""),
    ("2.4.1", "lost-leaf.ipynb", "pass", 16, [], [], ""),
    ("2.4.1", "neighbouring-errors.ipynb", "pass", 17, [], [], ""),
    ("2.4.1", "outcome.py", "pass", 1, [], [], ""),
    ("2.4.1", "plot_gan_step.py", "pass", 11, [], [], ""),
    ("2.4.1", "plot_gradient_penalty.py", "pass", 9, [], [], ""),
    ("2.4.1", "plot_how_examples_are_checked.py", "pass", 5, [], [], ""),
    ("2.4.1", "plot_maml.py", "pass", 7, [], [], ""),
    ("2.4.1", "plot_multitask_losses.py", "pass", 6, [], [], ""),
    ("2.4.1", "plot_reinforce.py", "pass", 10, [], [], ""),
    ("2.4.1", "plot_saliency.py", "pass", 8, [], [], ""),
    ("2.4.1", "plot_style_transfer_losses.py", "pass", 8, [], [], ""),
    ("2.4.1", "plot_truncated_bptt.py", "pass", 10, [], [], ""),
    ("2.4.1", "plot_two_pass_sam.py", "pass", 8, [], [], ""),
    ("2.4.1", "retain-and-create-graph.ipynb", "pass", 10, [], [], ""),
    ("2.4.1", "retain-grad.ipynb", "pass", 13, [], [], ""),
    ("2.4.1", "saved_bytes.py", "pass", 1, [], [], ""),
    ("2.4.1", "several-losses.ipynb", "pass", 15, [], [], ""),
    ("2.4.1", "training-patterns.ipynb", "pass", 17, [], [], ""),
    ("2.4.1", "what-backward-frees.ipynb", "pass", 9, [], [], ""),
    ("2.4.1", "what-it-costs.ipynb", "pass", 13, [], [], ""),
    ("2.4.1", "where-the-graph-hides.ipynb", "pass", 27, [], [], ""),
    ("2.4.1", "which-torch.ipynb", "fail", 9, [[3, "raised AssertionError: torch bug #142234: see which-torch-bugs", "assert has_graph(), \"torch bug #142234: see which-torch-bugs\""], [4, "raised AssertionError: torch bug #113263: see which-torch-bugs", "assert grad_a(compiled) == 6.0, \"torch bug #113263: see which-torch-bugs\""], [5, "raised AssertionError: torch bug #139476: see which-torch-bugs", "assert unfrozen_grad(reset=False), \"torch bug #139476: see which-torch-bugs\""], [8, "raised AssertionError: older wording: see which-torch-wordings", "assert \"Tensor at index 1 appears\" in unused, \"older wording: see which-torch-wordings\""], [9, "raised AssertionError: see hook-warning", "assert any(\"no inputs require gradients\" in str(w.message) for w in caught), \"see hook-warning\""]], [], ""),
    ("2.4.1", "why_no_grad.py", "pass", 1, [], [], ""),
    ("2.4.1", "wrappers.ipynb", "fail", 26, [[15, "raised AssertionError: ", "assert \"non-empty donated buffers\" in after_step and first == \"works\""], [16, "raised KeyError: 'donated_buffer'", "with torch._functorch.config.patch(donated_buffer=False):"], [18, "raised AssertionError: ", "assert nodes == (\"CompiledFunctionBackward\", \"SumBackward0\")  # compiled, then eager"], [26, "raised AssertionError: ImportError: torch.distributed.fsdp has no fully_shard before torch 2.6", "assert result == \"model: 3 steps checked\", result"]], [], ""),
    ("2.6.0", "autograd_graph.py", "pass", 1, [], [], ""),
    ("2.6.0", "backward-twice.ipynb", "pass", 7, [], [], ""),
    ("2.6.0", "ddp_worker.py", "pass", 1, [], [], ""),
    ("2.6.0", "errors.ipynb", "pass", 5, [], [], ""),
    ("2.6.0", "find-the-cause.ipynb", "pass", 8, [], [], ""),
    ("2.6.0", "find_old_graph.py", "pass", 1, [], [], ""),
    ("2.6.0", "frameworks.ipynb", "pass", 20, [], [], ""),
    ("2.6.0", "history.ipynb", "pass", 13, [], [], ""),
    ("2.6.0", "hooks.ipynb", "pass", 14, [], [], ""),
    ("2.6.0", "hooks_table.py", "pass", 1, [], [], ""),
    ("2.6.0", "how-this-site-works.ipynb", "pass", 4, [], [], ""),
    ("2.6.0", "index.ipynb", "pass", 2, [], [], ""),
    ("2.6.0", "ledger-explainer.ipynb", "pass", 13, [], [], ""),
    ("2.6.0", "ledger-forum-thread.ipynb", "pass", 36, [], [], ""),
    ("2.6.0", "ledger-neural-style-qa.ipynb", "pass", 29, [], [], ""),
    ("2.6.0", "ledger-retain-grad-article.ipynb", "pass", 17, [], [], ""),
    ("2.6.0", "lost-leaf.ipynb", "pass", 16, [], [], ""),
    ("2.6.0", "neighbouring-errors.ipynb", "pass", 17, [], [], ""),
    ("2.6.0", "outcome.py", "pass", 1, [], [], ""),
    ("2.6.0", "plot_gan_step.py", "pass", 11, [], [], ""),
    ("2.6.0", "plot_gradient_penalty.py", "pass", 9, [], [], ""),
    ("2.6.0", "plot_how_examples_are_checked.py", "pass", 5, [], [], ""),
    ("2.6.0", "plot_maml.py", "pass", 7, [], [], ""),
    ("2.6.0", "plot_multitask_losses.py", "pass", 6, [], [], ""),
    ("2.6.0", "plot_reinforce.py", "pass", 10, [], [], ""),
    ("2.6.0", "plot_saliency.py", "pass", 8, [], [], ""),
    ("2.6.0", "plot_style_transfer_losses.py", "pass", 8, [], [], ""),
    ("2.6.0", "plot_truncated_bptt.py", "pass", 10, [], [], ""),
    ("2.6.0", "plot_two_pass_sam.py", "pass", 8, [], [], ""),
    ("2.6.0", "retain-and-create-graph.ipynb", "pass", 10, [], [], ""),
    ("2.6.0", "retain-grad.ipynb", "pass", 13, [], [], ""),
    ("2.6.0", "saved_bytes.py", "pass", 1, [], [], ""),
    ("2.6.0", "several-losses.ipynb", "pass", 15, [], [], ""),
    ("2.6.0", "training-patterns.ipynb", "pass", 17, [], [], ""),
    ("2.6.0", "what-backward-frees.ipynb", "pass", 9, [], [], ""),
    ("2.6.0", "what-it-costs.ipynb", "pass", 13, [], [], ""),
    ("2.6.0", "where-the-graph-hides.ipynb", "pass", 27, [], [], ""),
    ("2.6.0", "which-torch.ipynb", "fail", 9, [[3, "raised AssertionError: torch bug #142234: see which-torch-bugs", "assert has_graph(), \"torch bug #142234: see which-torch-bugs\""], [5, "raised AssertionError: torch bug #139476: see which-torch-bugs", "assert unfrozen_grad(reset=False), \"torch bug #139476: see which-torch-bugs\""], [8, "raised AssertionError: older wording: see which-torch-wordings", "assert \"Tensor at index 1 appears\" in unused, \"older wording: see which-torch-wordings\""], [9, "raised AssertionError: see hook-warning", "assert any(\"no inputs require gradients\" in str(w.message) for w in caught), \"see hook-warning\""]], [], ""),
    ("2.6.0", "why_no_grad.py", "pass", 1, [], [], ""),
    ("2.6.0", "wrappers.ipynb", "fail", 26, [[18, "raised AssertionError: ", "assert nodes == (\"CompiledFunctionBackward\", \"SumBackward0\")  # compiled, then eager"], [26, "raised AssertionError: AttributeError: 'Stream' object has no attribute 'record_event' (FSDP2 on the CPU: fixed in torch 2.7, #145935)", "assert result == \"model: 3 steps checked\", result"]], [], ""),
    ("2.8.0", "autograd_graph.py", "pass", 1, [], [], ""),
    ("2.8.0", "backward-twice.ipynb", "pass", 7, [], [], ""),
    ("2.8.0", "ddp_worker.py", "pass", 1, [], [], ""),
    ("2.8.0", "errors.ipynb", "pass", 5, [], [], ""),
    ("2.8.0", "find-the-cause.ipynb", "pass", 8, [], [], ""),
    ("2.8.0", "find_old_graph.py", "pass", 1, [], [], ""),
    ("2.8.0", "frameworks.ipynb", "pass", 20, [], [], ""),
    ("2.8.0", "history.ipynb", "pass", 13, [], [], ""),
    ("2.8.0", "hooks.ipynb", "pass", 14, [], [], ""),
    ("2.8.0", "hooks_table.py", "pass", 1, [], [], ""),
    ("2.8.0", "how-this-site-works.ipynb", "pass", 4, [], [], ""),
    ("2.8.0", "index.ipynb", "pass", 2, [], [], ""),
    ("2.8.0", "ledger-explainer.ipynb", "pass", 13, [], [], ""),
    ("2.8.0", "ledger-forum-thread.ipynb", "pass", 36, [], [], ""),
    ("2.8.0", "ledger-neural-style-qa.ipynb", "pass", 29, [], [], ""),
    ("2.8.0", "ledger-retain-grad-article.ipynb", "pass", 17, [], [], ""),
    ("2.8.0", "lost-leaf.ipynb", "pass", 16, [], [], ""),
    ("2.8.0", "neighbouring-errors.ipynb", "pass", 17, [], [], ""),
    ("2.8.0", "outcome.py", "pass", 1, [], [], ""),
    ("2.8.0", "plot_gan_step.py", "pass", 11, [], [], ""),
    ("2.8.0", "plot_gradient_penalty.py", "pass", 9, [], [], ""),
    ("2.8.0", "plot_how_examples_are_checked.py", "pass", 5, [], [], ""),
    ("2.8.0", "plot_maml.py", "pass", 7, [], [], ""),
    ("2.8.0", "plot_multitask_losses.py", "pass", 6, [], [], ""),
    ("2.8.0", "plot_reinforce.py", "pass", 10, [], [], ""),
    ("2.8.0", "plot_saliency.py", "pass", 8, [], [], ""),
    ("2.8.0", "plot_style_transfer_losses.py", "pass", 8, [], [], ""),
    ("2.8.0", "plot_truncated_bptt.py", "pass", 10, [], [], ""),
    ("2.8.0", "plot_two_pass_sam.py", "pass", 8, [], [], ""),
    ("2.8.0", "retain-and-create-graph.ipynb", "pass", 10, [], [], ""),
    ("2.8.0", "retain-grad.ipynb", "pass", 13, [], [], ""),
    ("2.8.0", "saved_bytes.py", "pass", 1, [], [], ""),
    ("2.8.0", "several-losses.ipynb", "pass", 15, [], [], ""),
    ("2.8.0", "training-patterns.ipynb", "pass", 17, [], [], ""),
    ("2.8.0", "what-backward-frees.ipynb", "pass", 9, [], [], ""),
    ("2.8.0", "what-it-costs.ipynb", "pass", 13, [], [], ""),
    ("2.8.0", "where-the-graph-hides.ipynb", "pass", 27, [], [], ""),
    ("2.8.0", "which-torch.ipynb", "fail", 9, [[3, "raised AssertionError: torch bug #142234: see which-torch-bugs", "assert has_graph(), \"torch bug #142234: see which-torch-bugs\""], [5, "raised AssertionError: torch bug #139476: see which-torch-bugs", "assert unfrozen_grad(reset=False), \"torch bug #139476: see which-torch-bugs\""], [8, "raised AssertionError: older wording: see which-torch-wordings", "assert \"Tensor at index 1 appears\" in unused, \"older wording: see which-torch-wordings\""]], [], ""),
    ("2.8.0", "why_no_grad.py", "pass", 1, [], [], ""),
    ("2.8.0", "wrappers.ipynb", "fail", 26, [[26, "raised AssertionError: step 0: wrong gradient of model.0.weight (norm x2)", "assert result == \"model: 3 steps checked\", result"]], [], ""),
    ("2.11.0", "autograd_graph.py", "pass", 1, [], [], ""),
    ("2.11.0", "backward-twice.ipynb", "pass", 7, [], [], ""),
    ("2.11.0", "ddp_worker.py", "pass", 1, [], [], ""),
    ("2.11.0", "errors.ipynb", "pass", 5, [], [], ""),
    ("2.11.0", "find-the-cause.ipynb", "pass", 8, [], [], ""),
    ("2.11.0", "find_old_graph.py", "pass", 1, [], [], ""),
    ("2.11.0", "frameworks.ipynb", "pass", 20, [], [], ""),
    ("2.11.0", "history.ipynb", "pass", 13, [], [], ""),
    ("2.11.0", "hooks.ipynb", "pass", 14, [], [], ""),
    ("2.11.0", "hooks_table.py", "pass", 1, [], [], ""),
    ("2.11.0", "how-this-site-works.ipynb", "pass", 4, [], [], ""),
    ("2.11.0", "index.ipynb", "pass", 2, [], [], ""),
    ("2.11.0", "ledger-explainer.ipynb", "pass", 13, [], [], ""),
    ("2.11.0", "ledger-forum-thread.ipynb", "pass", 36, [], [], ""),
    ("2.11.0", "ledger-neural-style-qa.ipynb", "pass", 29, [], [], ""),
    ("2.11.0", "ledger-retain-grad-article.ipynb", "pass", 17, [], [], ""),
    ("2.11.0", "lost-leaf.ipynb", "pass", 16, [], [], ""),
    ("2.11.0", "neighbouring-errors.ipynb", "pass", 17, [], [], ""),
    ("2.11.0", "outcome.py", "pass", 1, [], [], ""),
    ("2.11.0", "plot_gan_step.py", "pass", 11, [], [], ""),
    ("2.11.0", "plot_gradient_penalty.py", "pass", 9, [], [], ""),
    ("2.11.0", "plot_how_examples_are_checked.py", "pass", 5, [], [], ""),
    ("2.11.0", "plot_maml.py", "pass", 7, [], [], ""),
    ("2.11.0", "plot_multitask_losses.py", "pass", 6, [], [], ""),
    ("2.11.0", "plot_reinforce.py", "pass", 10, [], [], ""),
    ("2.11.0", "plot_saliency.py", "pass", 8, [], [], ""),
    ("2.11.0", "plot_style_transfer_losses.py", "pass", 8, [], [], ""),
    ("2.11.0", "plot_truncated_bptt.py", "pass", 10, [], [], ""),
    ("2.11.0", "plot_two_pass_sam.py", "pass", 8, [], [], ""),
    ("2.11.0", "retain-and-create-graph.ipynb", "pass", 10, [], [], ""),
    ("2.11.0", "retain-grad.ipynb", "pass", 13, [], [], ""),
    ("2.11.0", "saved_bytes.py", "pass", 1, [], [], ""),
    ("2.11.0", "several-losses.ipynb", "pass", 15, [], [], ""),
    ("2.11.0", "training-patterns.ipynb", "pass", 17, [], [], ""),
    ("2.11.0", "what-backward-frees.ipynb", "pass", 9, [], [], ""),
    ("2.11.0", "what-it-costs.ipynb", "pass", 13, [], [], ""),
    ("2.11.0", "where-the-graph-hides.ipynb", "pass", 27, [], [], ""),
    ("2.11.0", "which-torch.ipynb", "fail", 9, [[5, "raised AssertionError: torch bug #139476: see which-torch-bugs", "assert unfrozen_grad(reset=False), \"torch bug #139476: see which-torch-bugs\""], [6, "raised AssertionError: torch bug #180642: see which-torch-bugs", "assert in_place == [2.0] * 3, \"torch bug #180642: see which-torch-bugs\""], [7, "raised AssertionError: torch bug #183604: see which-torch-bugs", "assert same == [2.0] * 3, \"torch bug #183604: see which-torch-bugs\""], [8, "raised AssertionError: older wording: see which-torch-wordings", "assert \"Tensor at index 1 appears\" in unused, \"older wording: see which-torch-wordings\""]], [], ""),
    ("2.11.0", "why_no_grad.py", "pass", 1, [], [], ""),
    ("2.11.0", "wrappers.ipynb", "pass", 26, [], [], ""),
    ("2.13.0", "autograd_graph.py", "pass", 1, [], [], ""),
    ("2.13.0", "backward-twice.ipynb", "pass", 7, [], [], ""),
    ("2.13.0", "ddp_worker.py", "pass", 1, [], [], ""),
    ("2.13.0", "errors.ipynb", "pass", 5, [], [], ""),
    ("2.13.0", "find-the-cause.ipynb", "pass", 8, [], [], ""),
    ("2.13.0", "find_old_graph.py", "pass", 1, [], [], ""),
    ("2.13.0", "frameworks.ipynb", "pass", 20, [], [], ""),
    ("2.13.0", "history.ipynb", "pass", 13, [], [], ""),
    ("2.13.0", "hooks.ipynb", "pass", 14, [], [], ""),
    ("2.13.0", "hooks_table.py", "pass", 1, [], [], ""),
    ("2.13.0", "how-this-site-works.ipynb", "pass", 4, [], [], ""),
    ("2.13.0", "index.ipynb", "pass", 2, [], [], ""),
    ("2.13.0", "ledger-explainer.ipynb", "pass", 13, [], [], ""),
    ("2.13.0", "ledger-forum-thread.ipynb", "pass", 36, [], [], ""),
    ("2.13.0", "ledger-neural-style-qa.ipynb", "pass", 29, [], [], ""),
    ("2.13.0", "ledger-retain-grad-article.ipynb", "pass", 17, [], [], ""),
    ("2.13.0", "lost-leaf.ipynb", "pass", 16, [], [], ""),
    ("2.13.0", "neighbouring-errors.ipynb", "pass", 17, [], [], ""),
    ("2.13.0", "outcome.py", "pass", 1, [], [], ""),
    ("2.13.0", "plot_gan_step.py", "pass", 11, [], [], ""),
    ("2.13.0", "plot_gradient_penalty.py", "pass", 9, [], [], ""),
    ("2.13.0", "plot_how_examples_are_checked.py", "pass", 5, [], [], ""),
    ("2.13.0", "plot_maml.py", "pass", 7, [], [], ""),
    ("2.13.0", "plot_multitask_losses.py", "pass", 6, [], [], ""),
    ("2.13.0", "plot_reinforce.py", "pass", 10, [], [], ""),
    ("2.13.0", "plot_saliency.py", "pass", 8, [], [], ""),
    ("2.13.0", "plot_style_transfer_losses.py", "pass", 8, [], [], ""),
    ("2.13.0", "plot_truncated_bptt.py", "pass", 10, [], [], ""),
    ("2.13.0", "plot_two_pass_sam.py", "pass", 8, [], [], ""),
    ("2.13.0", "retain-and-create-graph.ipynb", "pass", 10, [], [], ""),
    ("2.13.0", "retain-grad.ipynb", "pass", 13, [], [], ""),
    ("2.13.0", "saved_bytes.py", "pass", 1, [], [], ""),
    ("2.13.0", "several-losses.ipynb", "pass", 15, [], [], ""),
    ("2.13.0", "training-patterns.ipynb", "pass", 17, [], [], ""),
    ("2.13.0", "what-backward-frees.ipynb", "pass", 9, [], [], ""),
    ("2.13.0", "what-it-costs.ipynb", "pass", 13, [], [], ""),
    ("2.13.0", "where-the-graph-hides.ipynb", "pass", 27, [], [], ""),
    ("2.13.0", "which-torch.ipynb", "pass", 9, [], [], ""),
    ("2.13.0", "why_no_grad.py", "pass", 1, [], [], ""),
    ("2.13.0", "wrappers.ipynb", "pass", 26, [], [], ""),
]
# fmt: on
# --- end of results ---


def summary() -> None:
    """When and from which commit the results were made, the releases run (and only those), and
    how many of the downloads run hold on each (failures() names the rest).

    The date is spelt out ("27 November 2026"), here and in the notebook that carries this module:
    it is the run's, committed with the results, and tests/test_reproducible.py looks for the
    build's date in ISO form to catch a leaked one.
    """
    print(f"Run on {RUN['date']} from commit {RUN['commit']}; downloads that hold, of those run:")
    if RUN.get("runner") != "measure/run_alone.py":
        print(f"Runner: {RUN.get('runner')}.")
    for release in NUMPY:
        rows = [row for row in RESULTS if row[0] == release and row[2] != "not run"]
        if not rows:
            continue
        ran = [row for row in rows if row[2] != "extras"]
        held = sum(row[2] in HOLDS for row in ran)
        flaky = sum(row[2] == "flaky" for row in ran)
        note = f", {flaky} only when run again" if flaky else ""
        print(f"torch {release}: {held} of {len(ran)}{note}")


def item(name: str) -> str:
    """A page's notebook, or a gallery example's script and notebook together; modules keep .py."""
    stem, _, suffix = name.rpartition(".")
    return stem if suffix == "ipynb" or stem.startswith("plot_") else name


def cell_results(release: str, name: str) -> tuple[int, list, list]:
    """``(cells, failed, not_run)`` of one download on one release: its number of code cells (a
    script's ``# %%`` blocks), each failed cell as ``[cell, problem, line]``, the cells not run."""
    for row in RESULTS:
        if row[:2] == (release, name):
            return row[3], row[4], row[5]
    raise KeyError(f"no result for {name} on torch {release}")


def failures() -> None:
    """Print, per release and download, each failed cell and the difference that explains it (by
    its error and failing line), the cells that did not run, and fail for a failure that no
    difference explains. A NameError in a cell after a failed cell of the same download is that
    failure's consequence."""
    unexplained = []
    for release, name, outcome, cells, failed, not_run, error in RESULTS:
        if outcome in HOLDS or outcome == "not run":
            continue
        where = f"{release} {item(name)}"
        if outcome == "extras":  # not the page: the libraries it pins
            print(f"{where}: its pinned libraries do not install with this torch")
            continue
        if error:
            print(f"{where}: the run stopped: {error}")
            unexplained += [] if any(t in error for ts in EXPLAINED.values() for t in ts) else [
                f"{where}: {error}"]  # fmt: skip
        reasons, first = [], None  # [(reason, [cells])], consecutive cells of one reason together
        for cell, problem, at in failed:
            why = [key for key, texts in EXPLAINED.items() if any(t in problem + at for t in texts)]
            if why:
                reason, first = why[0][12:], first or cell
            elif first and "NameError" in problem:
                reason = f"follows cell {first}"
            else:
                reason = f"UNEXPLAINED {problem}"
                unexplained.append(f"{where}, cell {cell}: {problem}")
            if reasons and reasons[-1][0] == reason:
                reasons[-1][1].append(cell)
            else:
                reasons.append((reason, [cell]))
        if reasons:
            listed = "; ".join(f"{', '.join(map(str, c))} {reason}" for reason, c in reasons)
            print(f"{where}, cell{'s' * (len(failed) > 1)} {listed}")
        if not_run:
            print(f"{where}: cells {', '.join(map(str, not_run))} did not run")
    missing = [f"{row[0]} {item(row[1])}" for row in RESULTS if row[2] == "not run"]
    print("not run:", ", ".join(missing) if missing else "none", "| the rest holds")
    if os.environ.get("TORCH_RELEASES_RERUN"):  # nox -s versions, before it rewrites RESULTS
        return
    assert not unexplained, f"failures that no difference on the page explains: {unexplained}"
