"""
Two losses, six ways: timed
===========================

A shared trunk feeds two heads, each with its loss. One forward and backward, timed for six
ways of getting the gradients (two ``backward`` calls, the first with ``retain_graph=True``;
``backward`` on the sum; :func:`torch.autograd.backward` on the list;
:func:`torch.autograd.grad` on the list or the sum; a graph cut at the shared features), on
trunks 48 and 512 wide. No optimizer step: the six give the same gradients (asserted).

.. index:: slow backward, training speed, wide model, time per step, multi-task timing, two backward calls slower than one, summed loss speed
"""

# %%
# ``make_ways(width)`` builds a network with a trunk ``width`` wide and returns its parameters
# and the six ways. From width 48 to 512 the trunk grows about eightyfold, the heads about
# tenfold (counted). All six give the same gradients, up to rounding.

import time

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)  # steadier timings on a busy machine
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
        return torch.autograd.grad(list(heads(trunk(inputs))), params)

    def grad_of_sum():
        loss_a, loss_b = heads(trunk(inputs))
        return torch.autograd.grad(loss_a + loss_b, params)

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
    sizes = [sum(p.numel() for p in m.parameters()) for m in (trunk, head_a, head_b)]
    return params, (sizes[0], sizes[1] + sizes[2]), ways


nets = {width: make_ways(width) for width in (48, 512)}
for width, (_, (trunk_size, heads_size), _) in nets.items():
    print(f"width {width}: trunk {trunk_size} parameters, heads {heads_size}")
(trunk_48, heads_48), (trunk_512, heads_512) = nets[48][1], nets[512][1]
print(f"growth: trunk {trunk_512 / trunk_48:.1f}x, heads {heads_512 / heads_48:.1f}x")
assert 75 < trunk_512 / trunk_48 < 85 and 9.5 < heads_512 / heads_48 < 10.5
assert trunk_512 > heads_512


def gradients(params, way):
    for p in params:
        p.grad = None
    return way() or [p.grad.clone() for p in params]  # the grad ways return theirs


for params, _, ways in nets.values():  # the six ways give the same gradients, up to rounding
    first, *others = [gradients(params, way) for way in ways.values()]
    assert all(torch.allclose(a, b, atol=1e-6) for grads in others for a, b in zip(first, grads))

# %%
# Timing
# ------
#
# Each way runs many times, gradients cleared before each; the figure shows the median. No time
# is printed or asserted.


def median_micros(params, way, repeats):
    samples = []
    for _ in range(repeats):
        for p in params:
            p.grad = None
        start = time.perf_counter()
        way()
        samples.append(time.perf_counter() - start)
    return 1e6 * sorted(samples)[len(samples) // 2]


medians = {}
for width, (params, _, ways) in nets.items():
    repeats = 40 if width == 48 else 12
    medians[width] = {label: median_micros(params, way, repeats) for label, way in ways.items()}

RETAINED, NEUTRAL = "#8a63d2", "#808080"
fig, axes = plt.subplots(2, 1, figsize=(4.2, 5.6), layout="constrained")
for ax, (width, times) in zip(axes, medians.items()):
    colours = [RETAINED if label == "sequential" else NEUTRAL for label in times]
    ax.barh(list(times), list(times.values()), color=colours)
    ax.invert_yaxis()
    ax.set(xlabel="median time per forward and backward (µs)", title=f"trunk width {width}")
fig.suptitle("Forward + backward, two losses, CPU, one thread")
plt.show()

# %%
# Reading the bars
# ----------------
#
# The bars are one machine's measurement, not a rule. What is counted: ``sequential`` walks the
# trunk's backward twice (:doc:`../docs/several-losses` counts it with a hook), and at width 512
# the trunk holds most of the parameters (printed above).
