"""
Two losses, six ways to backward them: the time per step at two model sizes
===========================================================================

A shared trunk feeds two heads, each with its loss. This script times one training step
(forward and backward) for six ways of getting the gradients: two ``backward`` calls with
``retain_graph=True``, one ``backward`` on the sum, :func:`torch.autograd.backward` on the list,
:func:`torch.autograd.grad` on the list or on the sum, and a graph cut at the shared features. It
times them on a trunk 48 wide and on one 512 wide, and draws what it measured: the times are
those of the machine that ran the script, so only the shape of the bars carries over.

.. index:: slow backward, training speed, wide model, time per step, multi-task timing, two backward calls slower than one, summed loss speed
"""

# %%
# The network and the six ways
# ----------------------------
#
# ``make_ways(width)`` builds a fresh network whose trunk is ``width`` wide and returns its
# parameters and the six ways, each a function that runs one step. The wide trunk has about
# eighty times as many parameters as the narrow one; the heads barely grow.

import time

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
inputs = torch.randn(64, 20)
target_a = torch.randn(64, 1)
target_b = torch.randint(0, 5, (64,))


def make_ways(width):
    torch.manual_seed(3)
    trunk = nn.Sequential(nn.Linear(20, width), nn.Tanh(), nn.Linear(width, width), nn.Tanh())
    head_a = nn.Sequential(nn.Linear(width, 64), nn.ReLU(), nn.Linear(64, 1))
    head_b = nn.Sequential(nn.Linear(width, 64), nn.ReLU(), nn.Linear(64, 5))
    params = [p for m in (trunk, head_a, head_b) for p in m.parameters()]

    def heads(features):
        return F.mse_loss(head_a(features), target_a), F.cross_entropy(head_b(features), target_b)

    def sequential():
        loss_a, loss_b = heads(trunk(inputs))
        loss_a.backward(retain_graph=True)
        loss_b.backward()

    def summed():
        loss_a, loss_b = heads(trunk(inputs))
        (loss_a + loss_b).backward()

    def listed():
        torch.autograd.backward(list(heads(trunk(inputs))))

    def grad_of_list():
        torch.autograd.grad(list(heads(trunk(inputs))), params)

    def grad_of_sum():
        loss_a, loss_b = heads(trunk(inputs))
        torch.autograd.grad(loss_a + loss_b, params)

    def cut_at_features():
        features = trunk(inputs)
        cut = features.detach().requires_grad_()
        loss_a, loss_b = heads(cut)
        loss_a.backward()
        loss_b.backward()
        features.backward(cut.grad)

    ways = {
        "sequential": sequential,
        "summed": summed,
        "listed": listed,
        "grad of list": grad_of_list,
        "grad of sum": grad_of_sum,
        "cut at features": cut_at_features,
    }
    return params, sum(p.numel() for p in trunk.parameters()), ways


nets = {width: make_ways(width) for width in (48, 512)}
for width, (_, trunk_size, _) in nets.items():
    print(f"trunk width {width}: {trunk_size} trunk parameters")
assert 75 * nets[48][1] < nets[512][1] < 85 * nets[48][1]

# %%
# Timing
# ------
#
# Each way runs its step many times, its gradients cleared before each run, and the figure shows
# the median. One thread keeps the small steps steadier on a busy machine. Nothing here prints or
# asserts a time: the figure is the output.


def median_micros(params, way, repeats):
    samples = []
    for _ in range(repeats):
        for p in params:
            p.grad = None
        start = time.perf_counter()
        way()
        samples.append(time.perf_counter() - start)
    return 1e6 * sorted(samples)[len(samples) // 2]


torch.set_num_threads(1)
medians = {}
for width, (params, _, ways) in nets.items():
    repeats = 40 if width == 48 else 12
    medians[width] = {label: median_micros(params, way, repeats) for label, way in ways.items()}

RETAINED, NEUTRAL = "#8a63d2", "#808080"  # the site's colours: with retain_graph, neutral
fig, axes = plt.subplots(2, 1, figsize=(4.2, 5.6), layout="constrained")  # stacked: a phone
for ax, (width, times) in zip(axes, medians.items()):
    colours = [RETAINED if label == "sequential" else NEUTRAL for label in times]
    ax.barh(list(times), list(times.values()), color=colours)
    ax.invert_yaxis()
    ax.set(xlabel="median time per step (µs)", title=f"trunk width {width}")
fig.suptitle("Forward + backward, two losses, CPU, one thread")
plt.show()

# %%
# Reading the bars
# ----------------
#
# On the narrow trunk a step is a few dozen small operations, and what each call costs on its own
# (Python, starting a backward pass) is of the same order as the arithmetic, so the bars are
# close. On the wide trunk most of the arithmetic is in the trunk, and ``sequential``, whose two
# backward calls walk the trunk twice, does most of the work twice. That the work doubles is
# certain, because it can be counted (:doc:`../docs/several-losses` counts, with a hook, how often
# a gradient passes through the shared features); how much time it costs depends on the model and
# the machine: run this script on yours.
