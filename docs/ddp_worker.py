"""Data-parallel ranks on one machine, for ``wrappers.md``: ``run()`` starts this file as rank 0
in a child process, and each further rank is a process started with the ``spawn`` method.

Why a module: a spawned process is a fresh Python interpreter, which can only run a function it
can import; a function defined in a notebook cell cannot be imported by it. Every rank joins a
gloo process group on the loopback interface (127.0.0.1) and trains each scenario for three SGD
steps on its own batches, wrapped in DistributedDataParallel (DDP), in FSDP's
``FullyShardedDataParallel`` (FSDP1) or in ``fully_shard`` (FSDP2); with ``job="accelerate"`` (for ``frameworks.md``) each rank trains
through Hugging Face Accelerate instead, which wraps the model in DDP. It reports how many
all-reduces DDP started in the first step, the gradient it ended that step with, and the outcome
check of the three steps: ``outcome.checked`` for DDP; for FSDP the same checks by hand, on the
gathered full weights and gradients, because ``checked`` cannot take sharded parameters (autograd
refuses FSDP1's flat shard as an input of ``autograd.grad``, and ``torch.allclose`` has no rule
for FSDP2's DTensor).

Run it yourself:  python ddp_worker.py   (two ranks; prints their results)
"""

from __future__ import annotations

import contextlib
import faulthandler
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
from datetime import timedelta

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import FullyShardedDataParallel
from torch.nn.parallel import DistributedDataParallel as DDP

try:
    from outcome import checked
except ImportError as error:  # downloaded alone
    raise ImportError("ddp_worker.py needs outcome.py in the same folder: the wrappers page "
                      "offers both downloads") from error  # fmt: skip


def make_model() -> nn.Module:
    """The same starting weights on every rank (as DDP itself also ensures by broadcasting)."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.Linear(3, 1))


def rank_batch(rank: int, step: int = 0) -> torch.Tensor:
    """Each rank gets its own batch of four samples per step, as a DistributedSampler gives it."""
    generator = torch.Generator().manual_seed(100 + rank + 10 * step)
    return torch.randn(4, 3, generator=generator)


def wrap(model: nn.Module, **options) -> tuple[DDP, list[int]]:
    """DDP with a communication hook that counts its all-reduces and then averages as usual."""
    ddp = DDP(model, **options)
    calls: list[int] = []

    def counting_allreduce(state, bucket):
        calls.append(1)
        averaged = bucket.buffer().div_(dist.get_world_size())
        work = dist.all_reduce(averaged, async_op=True)
        return work.get_future().then(lambda future: future.value()[0])

    ddp.register_comm_hook(None, counting_allreduce)
    return ddp, calls


# One training step of each scenario (forward and backward calls; the optimizer is outside).
def one_backward_of_the_sum(model, x):
    out = model(x)
    (out.pow(2).mean() + out.abs().mean()).backward()


def two_backward_calls(model, x):
    out = model(x)
    out.pow(2).mean().backward(retain_graph=True)
    out.abs().mean().backward()


def two_forwards_then_two_backwards(model, x):
    """Two forward passes on two halves of the batch, then one backward per output, as in
    pytorch/pytorch#47260 (which used three of each) and #136861 (FSDP)."""
    outputs = [model(half) for half in x.split(2)]
    for out in outputs:
        out.pow(2).mean().backward()


def accumulate_two_micro_batches(model, x):
    for micro_batch in x.split(2):
        model(micro_batch).pow(2).mean().backward()


def accumulate_with_no_sync(model, x):
    first, last = x.split(2)
    with model.no_sync():
        model(first).pow(2).mean().backward()
    model(last).pow(2).mean().backward()


SCENARIOS = {  # name: (one step, DDP's options)
    "one backward of the sum": (one_backward_of_the_sum, {}),
    "two backward calls": (two_backward_calls, {}),
    "two backward calls, static_graph": (two_backward_calls, {"static_graph": True}),
    "two forwards, then two backwards": (two_forwards_then_two_backwards, {}),
    "accumulate, no no_sync": (accumulate_two_micro_batches, {}),
    "accumulate with no_sync": (accumulate_with_no_sync, {}),
}
FSDP_SCENARIOS = (
    "one backward of the sum",
    "two backward calls",
    "two forwards, then two backwards",
)


# What each scenario backpropagates, in order, as functions of (model, batch): the gradient a
# data-parallel step should give is that of the mean over ranks of their sum.
def squared(model, x):
    return model(x).pow(2).mean()


def absolute(model, x):
    return model(x).abs().mean()


def first_half(model, x):
    return model(x[:2]).pow(2).mean()


def second_half(model, x):
    return model(x[2:]).pow(2).mean()


LOSSES = {
    "one backward of the sum": (squared, absolute),
    "two backward calls": (squared, absolute),
    "two backward calls, static_graph": (squared, absolute),
    "two forwards, then two backwards": (first_half, second_half),
    "accumulate, no no_sync": (first_half, second_half),
    "accumulate with no_sync": (first_half, second_half),
}


def local_grad(losses, rank: int, step: int = 0) -> torch.Tensor:
    """The first layer's weight gradient of the sum of ``losses`` on ``rank``'s batch, without DDP."""
    model = make_model()
    sum(loss(model, rank_batch(rank, step)) for loss in losses).backward()
    return model[0].weight.grad


def reference_loss(model: nn.Module, name: str, step: int, world_size: int) -> torch.Tensor:
    """The loss a data-parallel step should differentiate: every rank's losses of the scenario,
    averaged over the ranks, on ``model`` itself (no DDP, no FSDP) at its current weights."""
    losses = LOSSES[name]
    return (
        sum(f(model, rank_batch(r, step)) for r in range(world_size) for f in losses) / world_size
    )


def train_ddp(name: str, rank: int, world_size: int) -> dict:
    """Three SGD steps of a DDP scenario, checked by ``outcome.checked`` on every rank."""
    step_fn, options = SCENARIOS[name]
    ddp, calls = wrap(make_model(), **options)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    result = {}
    try:
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            with checked(
                opt,
                lambda step: reference_loss(ddp.module, name, step, world_size),
                model=ddp.module,
            ):
                for step in range(3):
                    opt.zero_grad()
                    step_fn(ddp, rank_batch(rank, step))
                    if step == 0:
                        result["allreduce_calls"] = len(calls)
                        result["grad"] = ddp.module[0].weight.grad.tolist()
                    opt.step()
        result["check"] = printed.getvalue().strip()
    except AssertionError as error:
        result["check"] = f"AssertionError: {error}"
    return result


def _full(model: nn.Module, kind: str) -> tuple[dict, dict]:
    """The full (unsharded) weights and gradients, by name, gathered from every rank."""
    if kind == "fully_shard":
        named = list(model.named_parameters())
        weights = {n: p.full_tensor() for n, p in named}
        return weights, {n: p.grad.full_tensor() if p.grad is not None else None for n, p in named}
    with FullyShardedDataParallel.summon_full_params(model, with_grads=True):
        named = list(model.module.named_parameters())
        return (
            {n: p.detach().clone() for n, p in named},
            {n: None if p.grad is None else p.grad.clone() for n, p in named},
        )


def train_fsdp(kind: str, name: str, rank: int, world_size: int) -> str:
    """Three SGD steps of a scenario under FSDP1 or FSDP2, with the checks of ``outcome.checked``
    made by hand on the gathered full weights and gradients (see the module's docstring), worded
    as ``checked`` words them."""
    model = make_model()
    if kind == "FullyShardedDataParallel":  # FSDP1: on a machine without a GPU, name the device
        model = FullyShardedDataParallel(model, device_id=torch.device("cpu"), use_orig_params=True)
    else:
        try:
            from torch.distributed.fsdp import fully_shard  # FSDP2: public since torch 2.6
        except ImportError:
            return "ImportError: torch.distributed.fsdp has no fully_shard before torch 2.6"
        fully_shard(model, mesh=init_device_mesh("cpu", (world_size,)))  # on the CPU
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    start, _ = _full(model, kind)
    try:
        for step in range(3):
            opt.zero_grad()
            step_fn, _ = SCENARIOS[name]
            step_fn(model, rank_batch(rank, step))
            weights, grads = _full(model, kind)
            plain = make_model()
            plain.load_state_dict(weights)
            reference_loss(plain, name, step, world_size).backward()
            for n, p in plain.named_parameters():
                if grads[n] is None or not grads[n].any():
                    return f"step {step}: model.{n} got no gradient"
                if not torch.allclose(grads[n], p.grad, rtol=1e-4, atol=1e-6):
                    ratio = (grads[n].norm() / p.grad.norm().clamp_min(1e-12)).item()
                    return f"step {step}: wrong gradient of model.{n} (norm x{ratio:.3g})"
            opt.step()
    except RuntimeError as error:
        return f"RuntimeError: {str(error).splitlines()[0]}"
    except AttributeError as error:  # torch 2.6: FSDP2's all-gather records a CUDA-only event
        if "record_event" not in str(error):
            raise
        return f"AttributeError: {error} (FSDP2 on the CPU: fixed in torch 2.7, #145935)"
    weights, _ = _full(model, kind)
    for n in weights:
        if torch.equal(weights[n], start[n]):
            return f"model.{n} never moved"
    return "model: 3 steps checked"


class TwoHeads(nn.Module):
    """frameworks.md's model: two losses that share the trunk's graph."""

    def __init__(self):
        super().__init__()
        self.head_a, self.head_b, self.trunk = nn.Linear(4, 1), nn.Linear(4, 1), nn.Linear(3, 4)

    def forward(self, x):
        hidden = torch.tanh(self.trunk(x))
        return self.head_a(hidden).pow(2).mean(), (self.head_b(hidden) - 1).pow(2).mean()


def accelerate_sum(accelerator, loss_a, loss_b):
    accelerator.backward(loss_a + loss_b)


def accelerate_two_calls(accelerator, loss_a, loss_b):
    accelerator.backward(loss_a, retain_graph=True)
    accelerator.backward(loss_b)


ACCELERATE_SCENARIOS = {  # name: (the backward calls, DistributedDataParallelKwargs)
    "accelerator.backward(loss_a + loss_b)": (accelerate_sum, {}),
    "two calls, the first with retain_graph=True": (accelerate_two_calls, {}),
    "two calls, find_unused_parameters=True": (
        accelerate_two_calls,
        {"find_unused_parameters": True},
    ),
}


def train_accelerate(name: str, rank: int, world_size: int) -> str:
    """Three SGD steps through Accelerate (its MULTI_CPU mode: DDP over this process group),
    checked by ``outcome.checked`` against the mean over the ranks of ``loss_a + loss_b`` on the
    unwrapped module. Returns ``checked``'s report or the error's first line."""
    from accelerate import Accelerator, DistributedDataParallelKwargs

    step_fn, options = ACCELERATE_SCENARIOS[name]
    torch.manual_seed(0)
    net = TwoHeads()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    handlers = [DistributedDataParallelKwargs(**options)] if options else []
    accelerator = Accelerator(cpu=True, kwargs_handlers=handlers)
    model, prepared_opt = accelerator.prepare(net, opt)
    assert isinstance(model, DDP), f"Accelerate did not wrap the model in DDP: {type(model)}"

    def reference(step):
        return sum(sum(net(rank_batch(r, step))) for r in range(world_size)) / world_size

    try:
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            with checked(opt, reference, net=net):
                for step in range(3):
                    step_fn(accelerator, *model(rank_batch(rank, step)))
                    prepared_opt.step()
                    prepared_opt.zero_grad()
        return printed.getvalue().strip()
    except (AssertionError, RuntimeError) as error:
        return f"{type(error).__name__}: {str(error).splitlines()[0]}"


def use_loopback() -> None:
    """Make gloo bind to the loopback interface instead of looking up this machine's host name.

    Without ``GLOO_SOCKET_IFNAME``, gloo resolves the host name to find an address; on a machine
    whose host name is not in ``/etc/hosts`` and whose DNS server is unreachable (a network-less
    build or CI sandbox), that lookup waits for the resolver's timeouts, once per process group,
    before gloo warns and falls back to loopback anyway. Linux names the interface ``lo``, macOS
    ``lo0``; elsewhere gloo is left to its default."""
    name = {"linux": "lo", "darwin": "lo0"}.get(sys.platform.rstrip("0123456789"))
    if name:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", name)


def worker(
    rank: int, world_size: int, rendezvous: str, queue, timeout: float, job: str = "wrappers"
) -> None:
    """Join the group, run every scenario, send plain lists back (tensors would be shared through
    file descriptors that vanish when this process exits), and always leave the group.

    The ranks find each other through a file (``file://`` init): a TCP rendezvous would make
    rank 0 look up the other rank's host name, which a machine without DNS (such as the
    network-less sandbox the site's tests build in) answers slowly, with a logged warning. The
    gradients still travel over gloo's TCP connections, kept on the loopback interface.

    A rank that waits longer than ``timeout`` (for the others to join, or in an all-reduce) fails
    instead of waiting forever, and a rank still running after 60 % of it prints where it is (to
    standard error, which ``run()`` reports when the run stalls)."""
    use_loopback()
    # where a rank is after 60 % of the time a run is given (standard error; see run())
    faulthandler.dump_traceback_later(0.6 * timeout, exit=False)
    dist.init_process_group(
        "gloo",
        init_method=rendezvous,
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=timeout),
    )
    try:
        if job == "accelerate":  # Accelerate finds this group and the rank in the environment
            os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world_size),
                              LOCAL_WORLD_SIZE=str(world_size))  # fmt: skip
            results = {
                name: train_accelerate(name, rank, world_size) for name in ACCELERATE_SCENARIOS
            }
            queue.put((rank, results))
            return
        results = {name: train_ddp(name, rank, world_size) for name in SCENARIOS}
        for kind in ("FullyShardedDataParallel", "fully_shard"):
            for name in FSDP_SCENARIOS:
                results[f"{kind}: {name}"] = train_fsdp(kind, name, rank, world_size)
        queue.put((rank, results))
    finally:
        dist.destroy_process_group()
        faulthandler.cancel_dump_traceback_later()


def run(
    world_size: int = 2, timeout: float = 240.0, attempts: int = 2, job: str = "wrappers"
) -> dict[int, dict]:
    """Run the ranks in a separate process group (rank 0 a child process running this file, the
    others spawned by it) and return ``{rank: results}``.

    Why not in the calling process, and why ``attempts``: once in several builds, on a loaded
    two-core machine, the two-rank run stalled, and a build's cell timed out after 120 s (the
    same page then ran in 10 s; the cause is not known yet). A stalled run in a child process
    can be killed, with every rank it started; it is then reported on the kernel's standard error
    and started again from scratch. ipykernel forwards that standard error into the cell, where
    ``nb_output_stderr = "warn"`` (conf.py) fails the build: a retry is seen. The ranks are deterministic,
    so the results do not depend on the attempt. ``timeout`` is long: on a busy two-core machine
    the two spawned ranks took over 50 s just to start (three cold builds beside a CPU load failed
    so)."""
    command = [
        sys.executable,
        os.path.abspath(__file__),
        "--json",
        str(world_size),
        str(timeout),
        job,
    ]
    for attempt in range(1, attempts + 1):
        ranks = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True,  # its own process group: a kill reaches every rank
        )  # fmt: skip
        try:
            out, err = ranks.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(ranks.pid, signal.SIGKILL)
            _, err = ranks.communicate()
            print(f"ddp_worker: attempt {attempt} stalled; killed. Its ranks' stderr, where each "
                  f"was:\n{err[-6000:]}", file=sys.__stderr__)  # fmt: skip
            continue
        if ranks.returncode != 0:
            raise RuntimeError(f"ddp_worker.py exited with {ranks.returncode}:\n{err[-3000:]}")
        # gloo can print to stdout on some releases (2.8): the JSON is the last line
        last = out.strip().splitlines()[-1]
        return {int(rank): results for rank, results in json.loads(last).items()}
    raise RuntimeError(f"ddp_worker: {attempts} attempts stalled for {timeout} s each")


def _run_once(world_size: int, timeout: float, job: str = "wrappers") -> dict[int, dict]:
    import torch.multiprocessing as mp

    context = mp.get_context("spawn")
    queue = context.Queue()
    with tempfile.TemporaryDirectory() as folder:
        rendezvous = "file://" + os.path.join(folder, "rendezvous")
        others = [
            context.Process(target=worker, args=(rank, world_size, rendezvous, queue, timeout, job))
            for rank in range(1, world_size)
        ]
        for process in others:
            process.start()
        try:
            worker(0, world_size, rendezvous, queue, timeout, job)
            results = dict(queue.get(timeout=timeout) for _ in range(world_size))
        finally:
            for process in others:
                process.join(timeout)
                if process.is_alive():
                    process.terminate()
                    process.join()
    failed = [process.exitcode for process in others if process.exitcode != 0]
    if failed:
        raise RuntimeError(f"a spawned rank exited with {failed}")
    return results


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if sys.argv[1:2] == ["--json"]:  # what run() starts
        print(json.dumps(_run_once(int(sys.argv[2]), float(sys.argv[3]), *sys.argv[4:5])))
    else:
        for rank, outcome in sorted(_run_once(2, 50.0).items()):
            for name, result in outcome.items():
                print(rank, name, result if isinstance(result, str) else result["check"])
