"""DistributedDataParallel ranks on one machine, for ``wrappers.md``: ``run()`` starts this file
as rank 0 in a child process, and each further rank is a process started with the ``spawn``
method.

Why a module: a spawned process is a fresh Python interpreter, which can only run a function it
can import; a function defined in a notebook cell cannot be imported by it. Every rank joins a
gloo process group on the loopback interface (127.0.0.1), runs the same small training steps on
its own batch, and reports, for every scenario, how many all-reduces DDP started and the gradient
it ended with. The page compares the ranks with each other and with gradients computed without
DDP.

Run it yourself:  python ddp_worker.py   (two ranks; prints their results)
"""

from __future__ import annotations

import faulthandler
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
from torch.nn.parallel import DistributedDataParallel as DDP


def make_model() -> nn.Module:
    """The same starting weights on every rank (as DDP itself also ensures by broadcasting)."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.Linear(3, 1))


def rank_batch(rank: int) -> torch.Tensor:
    """Each rank gets its own batch of four samples, as a DistributedSampler would give it."""
    generator = torch.Generator().manual_seed(100 + rank)
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


def one_backward_of_the_sum(x):
    ddp, calls = wrap(make_model())
    out = ddp(x)
    (out.pow(2).mean() + out.abs().mean()).backward()
    return ddp, calls


def two_backward_calls(x, **options):
    ddp, calls = wrap(make_model(), **options)
    out = ddp(x)
    out.pow(2).mean().backward(retain_graph=True)
    out.abs().mean().backward()
    return ddp, calls


def two_forwards_then_two_backwards(x):
    """Two forward passes on two halves of the batch, then one backward per output, as in
    pytorch/pytorch#47260 (which used three of each)."""
    ddp, calls = wrap(make_model())
    outputs = [ddp(half) for half in x.split(2)]
    for out in outputs:
        out.pow(2).mean().backward()
    return ddp, calls


def two_backward_calls_static_graph(x):
    return two_backward_calls(x, static_graph=True)


def accumulate_two_micro_batches(x):
    ddp, calls = wrap(make_model())
    for micro_batch in x.split(2):
        ddp(micro_batch).pow(2).mean().backward()
    return ddp, calls


def accumulate_with_no_sync(x):
    ddp, calls = wrap(make_model())
    first, last = x.split(2)
    with ddp.no_sync():
        ddp(first).pow(2).mean().backward()
    ddp(last).pow(2).mean().backward()
    return ddp, calls


SCENARIOS = {
    "one backward of the sum": one_backward_of_the_sum,
    "two backward calls": two_backward_calls,
    "two backward calls, static_graph": two_backward_calls_static_graph,
    "two forwards, then two backwards": two_forwards_then_two_backwards,
    "accumulate, no no_sync": accumulate_two_micro_batches,
    "accumulate with no_sync": accumulate_with_no_sync,
}


# What each scenario backpropagates, in order, as functions of (model, batch): the page computes
# from them, without DDP, the gradient DDP should give (the average over ranks of their sum).
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


def local_grad(losses, rank: int) -> torch.Tensor:
    """The first layer's weight gradient of the sum of ``losses`` on ``rank``'s batch, without DDP."""
    model = make_model()
    sum(loss(model, rank_batch(rank)) for loss in losses).backward()
    return model[0].weight.grad


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


def worker(rank: int, world_size: int, rendezvous: str, queue, timeout: float) -> None:
    """Join the group, run every scenario, send plain lists back (tensors would be shared through
    file descriptors that vanish when this process exits), and always leave the group.

    The ranks find each other through a file (``file://`` init): a TCP rendezvous would make
    rank 0 look up the other rank's host name, which a machine without DNS (such as the
    network-less sandbox the site's tests build in) answers slowly, with a logged warning. The
    gradients still travel over gloo's TCP connections, kept on the loopback interface.

    A rank that waits longer than ``timeout`` (for the others to join, or in an all-reduce) fails
    instead of waiting forever, and a rank still running after 60 % of it prints where it is (to
    standard error: ``run()`` shows it only when the run stalls)."""
    use_loopback()
    # where a rank is after 60 % of the time a run is given (see run(); stderr is not the page)
    faulthandler.dump_traceback_later(0.6 * timeout, exit=False)
    dist.init_process_group(
        "gloo",
        init_method=rendezvous,
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=timeout),
    )
    try:
        x = rank_batch(rank)
        results = {}
        for name, scenario in SCENARIOS.items():
            ddp, calls = scenario(x)
            results[name] = {
                "allreduce_calls": len(calls),
                "grad": ddp.module[0].weight.grad.tolist(),
            }
        queue.put((rank, results))
    finally:
        dist.destroy_process_group()
        faulthandler.cancel_dump_traceback_later()


def run(world_size: int = 2, timeout: float = 240.0, attempts: int = 2) -> dict[int, dict]:
    """Run the ranks in a separate process group (rank 0 a child process running this file, the
    others spawned by it) and return ``{rank: results}``.

    Why not in the calling process, and why ``attempts``: once in several builds, on a loaded
    two-core machine, the two-rank run stalled, and a build's cell timed out after 120 s (the
    same page then ran in 10 s; the cause is not known yet). A stalled run in a child process
    can be killed, with every rank it started; it is then reported on standard error (which does
    not reach the page) and started again from scratch. The ranks are deterministic, so the
    results do not depend on the attempt. ``timeout`` is long: on a busy two-core machine the two
    spawned ranks took over 50 s just to start (three cold builds beside a CPU load failed so),
    and ipykernel shows the kernel's own standard error in the cell, so a retry fails the build."""
    command = [sys.executable, os.path.abspath(__file__), "--json", str(world_size), str(timeout)]
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
        return {int(rank): results for rank, results in json.loads(out).items()}
    raise RuntimeError(f"ddp_worker: {attempts} attempts stalled for {timeout} s each")


def _run_once(world_size: int, timeout: float) -> dict[int, dict]:
    import torch.multiprocessing as mp

    context = mp.get_context("spawn")
    queue = context.Queue()
    with tempfile.TemporaryDirectory() as folder:
        rendezvous = "file://" + os.path.join(folder, "rendezvous")
        others = [
            context.Process(target=worker, args=(rank, world_size, rendezvous, queue, timeout))
            for rank in range(1, world_size)
        ]
        for process in others:
            process.start()
        try:
            worker(0, world_size, rendezvous, queue, timeout)
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
        print(json.dumps(_run_once(int(sys.argv[2]), float(sys.argv[3]))))
    else:
        for rank, outcome in sorted(_run_once(2, 50.0).items()):
            for name, result in outcome.items():
                print(rank, name, result["allreduce_calls"], result["grad"][0])
