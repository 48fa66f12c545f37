"""
REINFORCE: a second update needs fresh log-probs
================================================

One update per episode on the log-probabilities kept while acting (PyTorch's REINFORCE example)
is correct. A second update on the same episode raises "Trying to backward through the graph a
second time". The fix: store states, actions and the acting log-probabilities detached; each
update recomputes the log-probabilities, weighted by the probability ratio as in PPO.
``retain_graph=True`` raises an in-place error or silently reuses the acting policy's gradient.
In actor-critic, detach the advantage in the actor's loss.

.. index:: reinforcement learning, REINFORCE, policy gradient, log_prob, saved_log_probs,
   actor-critic, A2C, PPO, probability ratio, off-policy, advantage, detach advantage, Categorical,
   torch.distributions
"""

# %%
# The agent starts in cell 3 of a corridor of 7 cells and steps left or right. One end, chosen
# per episode, is the goal: it pays 1, the other end costs 1, the tenth step ends the episode
# with 0. The state: the one-hot cell and the goal's side (±1). ``run_episode`` returns states,
# actions, returns and each step's ``log_prob``, with its graph if ``keep_graph=True`` (like
# ``saved_log_probs`` in ``pytorch/examples``). ``checked``: :doc:`plot_how_examples_are_checked`.

import contextlib
import copy

import matplotlib.pyplot as plt
import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical

torch.manual_seed(0)
torch.set_num_threads(1)  # tiny tensors

CELLS, START, LIMIT = 7, 3, 10
N_INPUTS = CELLS + 1  # the cell, one-hot, and which end is the goal


@contextlib.contextmanager
def checked(optimizer, reference, **modules):
    names = {p: f"{k}.{n}" for k, m in modules.items() for n, p in m.named_parameters()}
    params = [p for group in optimizer.param_groups for p in group["params"]]
    start, done = [p.detach().clone() for p in params], []

    def check(*_):
        wanted = torch.autograd.grad(reference(len(done)), params, allow_unused=True)
        for p, want in zip(params, wanted):
            got, step = p.grad, f"step {len(done)}:"
            assert got is not None and got.any(), f"{step} {names[p]} got no gradient"
            assert want is not None and got.allclose(want, 1e-4, 1e-6), (
                f"{step} wrong gradient of {names[p]}"
            )
        done.append(0)

    handle = optimizer.register_step_pre_hook(check)
    yield
    handle.remove()
    assert len(done) >= 3 and not any(map(torch.equal, params, start)), (
        "< 3 steps, or one not moved"
    )
    print(f"{'/'.join(modules)}: {len(done)} steps checked")


def run_episode(policy, keep_graph=False):
    goal = CELLS - 1 if torch.rand(()) < 0.5 else 0
    side = torch.tensor([1.0 if goal else -1.0])
    cell, states, actions, rewards, log_probs = START, [], [], [], []
    for _ in range(LIMIT):
        state = torch.cat([nn.functional.one_hot(torch.tensor(cell), CELLS).float(), side])
        with torch.set_grad_enabled(keep_graph):
            dist = Categorical(logits=policy(state))
            action = dist.sample()
            log_probs.append(dist.log_prob(action))
        states.append(state)
        actions.append(action)
        cell += 1 if action.item() == 1 else -1
        if cell in (0, CELLS - 1):
            rewards.append(1.0 if cell == goal else -1.0)
            break
        rewards.append(0.0)
    returns = torch.tensor(rewards).flip(0).cumsum(0).flip(0)  # the return from each step on
    return torch.stack(states), torch.stack(actions), returns, torch.stack(log_probs)


def mlp(n_out):
    return nn.Sequential(nn.Linear(N_INPUTS, 16), nn.Tanh(), nn.Linear(16, n_out))


def surrogate(policy, states, actions, returns, acting_log_probs):  # with the probability ratio
    log_probs = Categorical(logits=policy(states)).log_prob(actions)
    return -((log_probs - acting_log_probs).exp() * returns).sum()


# %%
# One update per episode: kept log-probabilities are right
# --------------------------------------------------------
#
# Each update walks its own episode's graph once, at the weights that acted. The reference
# recomputes the ratio-weighted loss from the stored states and actions, through probabilities.


def reference(step):
    probs = policy(states).softmax(-1).gather(1, actions[:, None]).squeeze(1)
    return -(probs / log_probs.detach().exp() * returns).sum()


torch.manual_seed(8)
policy = mlp(2)
optimizer = torch.optim.SGD(policy.parameters(), lr=0.1)
with checked(optimizer, reference, policy=policy):
    for episode in range(3):
        returns = torch.zeros(1)
        while not returns.any():  # cut off at the tenth step: a zero gradient, skipped
            states, actions, returns, log_probs = run_episode(policy, keep_graph=True)
        optimizer.zero_grad()
        (-(log_probs * returns).sum()).backward()
        optimizer.step()

# %%
# A second update fails
# ---------------------
#
# Several updates on one batch are common (PPO makes several passes). A second update on the last
# episode walks the graph its first update freed:

try:
    (-(log_probs * returns).sum()).backward()
except RuntimeError as error:
    print(f"{type(error).__name__}: {str(error).partition(' (')[0]}")
    assert "graph a second time" in str(error)
else:
    raise AssertionError("no error")

# %%
# ``retain_graph=True``: an in-place error, or the acting policy's gradient
# -------------------------------------------------------------------------
#
# This two-layer policy's kept graph saved weights that the step changed in place: the
# :ref:`in-place modification error <errors-inplace>` (asserted, shown there).

states, actions, returns, log_probs = run_episode(policy, keep_graph=True)
(-(log_probs * returns).sum()).backward(retain_graph=True)
optimizer.step()
try:
    (-(log_probs * returns).sum()).backward()
except RuntimeError as error:
    assert "modified by an inplace operation" in str(error)
else:
    raise AssertionError("no error")

# %%
# That error is luck: a linear policy's replay runs, with the gradient of the policy *that
# acted* at every update (asserted). The check (reference: the ratio-weighted loss at the current
# weights) stops it at the second update:

torch.manual_seed(7)
policy = nn.Linear(N_INPUTS, 2)
optimizer = torch.optim.SGD(policy.parameters(), lr=0.5)
states, actions, returns, log_probs = run_episode(policy, keep_graph=True)
acting_policy = copy.deepcopy(policy)
assert returns[0] != 0  # non-zero gradients
try:
    with checked(optimizer, reference, policy=policy):
        for update in range(3):
            optimizer.zero_grad()
            (-(log_probs * returns).sum()).backward(retain_graph=True)
            optimizer.step()
except AssertionError as error:
    print(f"{type(error).__name__}: {error}")
    assert "step 1: wrong gradient of policy.weight" in str(error)
    acting_loss = surrogate(acting_policy, states, actions, returns, log_probs.detach())
    assert torch.allclose(
        policy.weight.grad, torch.autograd.grad(acting_loss, acting_policy.weight)[0]
    )
else:
    raise AssertionError("the check passed")

# %%
# The fix: recompute ``log_prob``, weighted by the probability ratio
# ------------------------------------------------------------------
#
# After an update, the episode is off-policy: the loss recomputed on it does not give the
# current policy's gradient. Weighting each term by the ratio of the current policy's
# probability to the acting policy's (PPO's ratio, unclipped) restores it for an episode of one
# action, but not over two. Exact expectations over the acting policy, two actions with rewards
# 1 and 0, after one update:

logits = torch.zeros(2, requires_grad=True)
reward = torch.tensor([1.0, 0.0])
acting = logits.softmax(0).detach()  # the probabilities that sampled the episode
(first,) = torch.autograd.grad((logits.softmax(0) * reward).sum(), logits)
logits = (logits + first).detach().requires_grad_()  # after update 1 (learning rate 1)
p = logits.softmax(0)
expected = {  # of the return, per episode; two steps: reward 1 if both actions are 0
    "current policy": (p * reward).sum(),
    "recomputed": (acting * p.log() * reward).sum(),
    "ratio-weighted": (acting * p / acting * reward).sum(),
    "2 steps: current": p[0] ** 2,
    "2 steps: ratio-weighted": acting[0] ** 2 * 2 * p[0] / acting[0],  # ratio 1 + ratio 2
}
slope = {k: torch.autograd.grad(v, logits, retain_graph=True)[0][0] for k, v in expected.items()}
print("d/d logit 0 (update 2):", ", ".join(f"{k} {v:.3f}" for k, v in slope.items()))
assert abs(slope["recomputed"] - slope["current policy"]) > 0.03
assert abs(slope["ratio-weighted"] - slope["current policy"]) < 1e-6
assert abs(slope["2 steps: ratio-weighted"] - slope["2 steps: current"]) > 0.03

# %%
# Over several steps, the states and the other actions behind each return are still the acting
# policy's: the ratio-weighted loss matches the current policy's gradient only at the acting
# weights, hence PPO's clipped ratio. The check compares each update with that loss at the
# current weights.
#
# So act without a graph, store the acting log-probabilities *detached*, and let each update
# build a fresh graph:

torch.manual_seed(7)
policy = nn.Linear(N_INPUTS, 2)
optimizer = torch.optim.SGD(policy.parameters(), lr=0.5)
states, actions, returns, log_probs = run_episode(policy)
assert log_probs.grad_fn is None  # the stored batch holds no graph
with checked(optimizer, reference, policy=policy):
    for update in range(3):
        optimizer.zero_grad()
        surrogate(policy, states, actions, returns, log_probs).backward()  # fresh graph
        optimizer.step()

# %%
# Actor-critic: detach the advantage in the actor's loss
# ------------------------------------------------------
#
# The actor's loss weighs log-probabilities by the advantage ``G - V(s)`` of a critic ``V``
# that still trains: recompute it every update, and detach it in the actor's loss only, so the
# critic trains on its own loss. The reference: each network's loss, the other's output held
# constant. Attached, the advantage trains the critic on the actor's loss too
# (:ref:`training patterns <patterns-actor-critic>`: shared trunk, ``inputs=``):


def losses(detach=True):
    values = critic(states).squeeze(-1)
    advantage = returns - values
    actor_loss = surrogate(actor, states, actions, advantage.detach() if detach else advantage, old)
    return actor_loss / episodes + advantage.pow(2).mean()


def each_own_loss(step):
    with torch.no_grad():
        advantage = returns - critic(states).squeeze(-1)
    return surrogate(actor, states, actions, advantage, old) / episodes + (
        (returns - critic(states).squeeze(-1)).pow(2).mean()
    )


torch.manual_seed(0)
actor, critic = mlp(2), mlp(1)
optimizer = torch.optim.Adam([*actor.parameters(), *critic.parameters()], lr=0.005)
states, actions, returns, old = run_episode(actor)
episodes = 1
try:
    with checked(optimizer, each_own_loss, actor=actor, critic=critic):
        for update in range(3):
            optimizer.zero_grad()
            losses(detach=False).backward()
            optimizer.step()
except AssertionError as error:
    print(f"{type(error).__name__}: {error}")
    assert "step 0: wrong gradient of critic.0.weight" in str(error)
else:
    raise AssertionError("the check passed")

# %%
# Training the fixed loop
# -----------------------
#
# Fixed and checked: 8 episodes per iteration, played without a graph, then 2 update passes,
# recomputed, with the ratio and the detached advantage. Baseline: a random policy, 150 episodes.

torch.manual_seed(0)
random_policy = lambda state: torch.zeros(2)  # noqa: E731  equal logits
baseline = float(np.mean([run_episode(random_policy)[2][0].item() for _ in range(150)]))

torch.manual_seed(1)
actor, critic = mlp(2), mlp(1)
optimizer = torch.optim.Adam([*actor.parameters(), *critic.parameters()], lr=0.005)
episode_returns = []
with checked(optimizer, each_own_loss, actor=actor, critic=critic):
    for iteration in range(30):
        batch = [run_episode(actor) for _ in range(8)]
        states, actions, returns, old = (torch.cat(parts) for parts in zip(*batch))
        episodes = len(batch)
        episode_returns += [returns[0].item() for _, _, returns, _ in batch]
        for _ in range(2):
            optimizer.zero_grad()
            losses().backward()
            optimizer.step()

first, last = np.mean(episode_returns[:80]), np.mean(episode_returns[-80:])
print(f"random policy: {baseline:.2f}")
print(f"mean return: first 80 episodes {first:.2f}, last 80 {last:.2f}")
# last 80: 0.97 on torch 2.13, 0.89 on 2.4 (its sampling differs)
assert last > 0.8 and last > baseline + 0.5

per_iteration = np.array(episode_returns).reshape(-1, 8).mean(axis=1)
episodes_played = np.arange(1, len(per_iteration) + 1) * 8
fig, ax = plt.subplots(figsize=(4.2, 3.6), layout="constrained")
ax.plot(
    episodes_played, per_iteration, color="#1a9c6b", marker="o", markersize=3, label="actor-critic"
)
ax.axhline(baseline, color="#808080", linestyle="--", label="random policy")
ax.set(xlabel="episodes played", ylabel="return per episode (mean of 8)", ylim=(-1.05, 1.05))
ax.set_title("Recomputing log-probs each update:\nthe agent learns")
fig.legend(loc="outside lower center")
plt.show()

# %%
# Reported in: `pytorch/examples#151 <https://github.com/pytorch/examples/issues/151>`__,
# `a PPO forum thread
# <https://discuss.pytorch.org/t/pytorch-runtimeerror-trying-to-backward-through-the-graph-a-second-time/191396>`__,
# `thu-ml/tianshou#397 <https://github.com/thu-ml/tianshou/issues/397>`__ (why recompute),
# `astariul/encode-attend-navigate-pytorch#2
# <https://github.com/astariul/encode-attend-navigate-pytorch/issues/2>`__ (advantage attached).
