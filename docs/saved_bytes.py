"""Two meters for the memory an autograd graph keeps: saved-tensor bytes, and allocated bytes.

``SavedBytes`` counts the bytes of memory that tensors saved for backward refer to, as seen by a
:class:`torch.autograd.graph.saved_tensors_hooks` pack hook (some of it, such as an input batch, is
alive anyway). A page's downloaded notebook carries
this file (the build writes it into the notebook), so the notebook runs alone.

``AllocatedBytes`` reads the allocations and frees that ``torch.profiler`` records with
``profile_memory=True``: the memory PyTorch's CPU allocator hands out for every tensor, saved or
not (activations that nothing saves, gradients, temporary buffers).
"""

from __future__ import annotations

import contextlib
import os
import sys
import weakref

import torch
from torch.autograd.graph import saved_tensors_hooks
from torch.profiler import ProfilerActivity, profile, record_function
from torch.utils._python_dispatch import is_traceable_wrapper_subclass


class _Box:
    """What the pack hook hands autograd instead of the tensor: an object a weakref can follow."""

    __slots__ = ("__weakref__", "tensor")

    def __init__(self, tensor):
        self.tensor = tensor


def _blocks(tensor):
    """(address, bytes) of each memory block a tensor refers to: one storage for an ordinary
    tensor; its indices and values for a sparse one; its inner tensors for a wrapper subclass (a
    nested tensor). Raises what ``untyped_storage()`` raises for a tensor with no storage."""
    if tensor.layout == torch.sparse_coo:
        parts = [tensor._indices(), tensor._values()]
    elif tensor.layout in (torch.sparse_csr, torch.sparse_bsr):
        parts = [tensor.crow_indices(), tensor.col_indices(), tensor.values()]
    elif tensor.layout in (torch.sparse_csc, torch.sparse_bsc):
        parts = [tensor.ccol_indices(), tensor.row_indices(), tensor.values()]
    elif is_traceable_wrapper_subclass(tensor):
        parts = [getattr(tensor, name) for name in tensor.__tensor_flatten__()[0]]
    else:
        storage = tensor.untyped_storage()
        return [(storage.data_ptr(), storage.nbytes())]
    return [block for part in parts if part is not None for block in _blocks(part)]


class SavedBytes(saved_tensors_hooks):
    """Bytes of memory that the tensors saved for backward while this context is active refer to.

    Each block of memory (a tensor's storage) counts once and in full, however many saved tensors
    or views refer to it; the storages of ``skip`` (parameters, which exist anyway) do not count.
    ``held``: bytes autograd still holds now; ``peak``: the most it held at once; ``total``: every
    block saved while active, released or not. A sparse tensor counts its indices and values; a
    nested tensor, its inner tensors. ``unseen``: how many saved tensors had no storage to read
    (counted here, their bytes not). What the pack hook never sees is not counted: Python numbers
    that an operation wraps as 0-dim tensors and saves (``x * 3.0``, ``x / 4``), and tensors a
    custom ``autograd.Function`` keeps as ``ctx`` attributes.
    """

    def __init__(self, skip=()):
        super().__init__(self._pack, self._unpack)
        self._skip = {address for p in skip for address, _ in _blocks(p)}
        self._blocks = {}  # storage address -> [boxes that hold it, bytes]
        self.held = self.peak = self.total = self.unseen = 0

    def _pack(self, tensor):
        box = _Box(tensor.detach())  # an alias without history: the meter holds no graph
        try:
            blocks = [(a, n) for a, n in dict(_blocks(tensor)).items() if a not in self._skip]
        except (NotImplementedError, RuntimeError):  # no storage to read
            self.unseen += 1
            return box
        for address, nbytes in blocks:
            block = self._blocks.setdefault(address, [0, nbytes])
            if block[0] == 0:
                self.held += block[1]
                self.total += block[1]
                self.peak = max(self.peak, self.held)
            block[0] += 1
        if blocks:
            weakref.finalize(box, self._release, [a for a, _ in blocks]).atexit = False
        return box

    def _unpack(self, box):
        return box.tensor

    def _release(self, addresses):
        for address in addresses:
            block = self._blocks[address]
            block[0] -= 1
            if block[0] == 0:
                self.held -= self._blocks.pop(address)[1]


@contextlib.contextmanager
def _quiet_stderr():
    """Silence file descriptor 2 briefly: the profiler's C++ side logs a line there when a
    session starts and when it stops ("profiler_start", "profiler_stop"), which a notebook
    would show as stderr output."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(os.devnull, "w") as devnull:
        os.dup2(devnull.fileno(), 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


class AllocatedBytes:
    """Bytes PyTorch's CPU allocator hands out while active, above the level at the start.

    A ``torch.profiler.profile(profile_memory=True)`` session records every allocation and free,
    with its time. Only memory allocated inside the session is seen, so allocate what you measure
    inside it (clear ``.grad`` before entering). ``peak``: the most allocated at once above the
    start level; ``end``: the level at the end. ``with meter.region("backward"):`` marks a span;
    ``meter.regions[name]`` is then ``(level when it starts, peak inside it)``.

    The profiler's tables only give net sums per operation, so this reads its raw event list
    (``prof.profiler.kineto_results``), which keeps each allocation and free with its time.
    """

    def __enter__(self):
        self._profile = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
        with _quiet_stderr():
            self._profile.__enter__()
        self._names = []
        return self

    def region(self, name):
        self._names.append(name)
        return record_function(f"region:{name}")

    def __exit__(self, *exc):
        with _quiet_stderr():
            self._profile.__exit__(*exc)
        events = list(self._profile.profiler.kineto_results.events())
        memory = sorted((e.start_ns(), e.nbytes()) for e in events if e.name() == "[memory]")
        spans = {  # start + duration: end_ns() exists only since torch 2.5
            e.name().removeprefix("region:"): (e.start_ns(), e.start_ns() + e.duration_ns())
            for e in events
            if e.name().startswith("region:")
        }
        level = self.peak = 0
        starts = dict.fromkeys(spans)
        peaks = dict.fromkeys(spans, 0)
        for time, nbytes in memory:
            for name, (start, end) in spans.items():
                if starts[name] is None and time >= start:
                    starts[name] = peaks[name] = level
            level += nbytes
            self.peak = max(self.peak, level)
            for name, (start, end) in spans.items():
                if start <= time <= end:
                    peaks[name] = max(peaks[name], level)
        self.end = level
        self.regions = {
            name: (starts[name] if starts[name] is not None else level, peaks[name])
            for name in self._names
        }
        return False
