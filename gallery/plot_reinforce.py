"""
Policy gradients and actor-critic: store actions, not log-probabilities
=======================================================================

A REINFORCE agent that keeps the log-probabilities it computed while acting, and then uses
them for more than one update, hits "Trying to backward through the graph a second time" at
the second update: the first backward freed the graph those log-probabilities hang on.
``retain_graph=True`` does not repair that. With a multi-layer policy the optimizer step makes
the next backward fail with an in-place modification error; with a policy whose graph did not
save its weights, it runs and silently returns the gradient of the *old* policy. The fix is to
store states and actions and recompute the log-probabilities at every update. For actor-critic,
the advantage is detached, so the actor's loss does not train the critic. The environment is
a tiny corridor written below in a few lines, so no RL library is needed.

.. index:: reinforcement learning, REINFORCE, policy gradient, log_prob, saved_log_probs,
   actor-critic, A2C, PPO, advantage, detach advantage, Categorical, torch.distributions
"""

# %%
# A corridor, a policy, and an episode
# ------------------------------------
#
# The agent starts in cell 3 of a corridor of 7 cells and steps left or right. Each episode, one
# end of the corridor is the goal: reaching it pays 1, reaching the other end costs 1, and the
# tenth step ends the episode with nothing. The state is the one-hot code of the cell and a
# number, +1 or -1, that says which end is the goal. ``run_episode`` plays one episode and
# returns the states, actions and rewards; with ``keep_log_probs=True`` it also keeps each
# step's ``log_prob`` *with its graph*, as the ``saved_log_probs`` list of the REINFORCE example
# in ``pytorch/examples`` does.

import copy

import matplotlib.pyplot as plt
import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical

torch.manual_seed(0)
torch.set_num_threads(1)  # tiny tensors: one thread is fastest

CELLS, START, LIMIT = 7, 3, 10
N_INPUTS = CELLS + 1  # the cell, one-hot, and which end is the goal


def run_episode(policy, keep_log_probs=False):
    goal = CELLS - 1 if torch.rand(()) < 0.5 else 0
    side = torch.tensor([1.0 if goal else -1.0])
    cell, states, actions, rewards, log_probs = START, [], [], [], []
    for _ in range(LIMIT):
        state = torch.cat([nn.functional.one_hot(torch.tensor(cell), CELLS).float(), side])
        with torch.set_grad_enabled(keep_log_probs):
            dist = Categorical(logits=policy(state))
            action = dist.sample()
        if keep_log_probs:
            log_probs.append(dist.log_prob(action))
        states.append(state)
        actions.append(action)
        cell += 1 if action.item() == 1 else -1
        if cell in (0, CELLS - 1):
            rewards.append(1.0 if cell == goal else -1.0)
            break
        rewards.append(0.0)
    return torch.stack(states), torch.stack(actions), torch.tensor(rewards), log_probs


def returns_to_go(rewards):
    return rewards.flip(0).cumsum(0).flip(0)


def mlp(n_out):
    return nn.Sequential(nn.Linear(N_INPUTS, 16), nn.Tanh(), nn.Linear(16, n_out))


# %%
# Stored log-probabilities, replayed: the second update fails
# -----------------------------------------------------------
#
# Several updates on one batch of experience are common (PPO makes several passes over it; in
# `pytorch/examples#151 <https://github.com/pytorch/examples/issues/151>`__ the reader called
# ``finish_episode()`` more than once to reuse experience, and a
# `PPO question on the PyTorch forums
# <https://discuss.pytorch.org/t/pytorch-runtimeerror-trying-to-backward-through-the-graph-a-second-time/191396>`__
# has the same shape). The loss is rebuilt from the stored log-probabilities each time, but the
# graph under them is the one the episode built, and the first backward freed it.

torch.manual_seed(2)
policy = mlp(2)
optimizer = torch.optim.SGD(policy.parameters(), lr=0.1)
states, actions, rewards, log_probs = run_episode(policy, keep_log_probs=True)
returns = returns_to_go(rewards)
print(f"one episode of {len(actions)} steps, return {returns[0]:.0f}")
for update in range(2):
    loss = -(torch.stack(log_probs) * returns).sum()
    optimizer.zero_grad()
    try:
        loss.backward()
    except RuntimeError as error:
        print(f"update {update + 1}: {type(error).__name__}: {error}")
        assert update == 1 and "backward through the graph a second time" in str(error)
        break
    optimizer.step()
    print(f"update {update + 1}: ran")
else:
    raise AssertionError("the second update through the freed graph was expected to fail")

# %%
# ``retain_graph=True`` here: an in-place error after the step
# ------------------------------------------------------------
#
# Keeping the graph lets the second backward reach it, but the optimizer step in between has
# changed the second layer's weight in place, and the kept graph saved that weight (the
# gradient for the hidden layer needs it). Autograd notices through the version counter:

policy = mlp(2)
optimizer = torch.optim.SGD(policy.parameters(), lr=0.1)
states, actions, rewards, log_probs = run_episode(policy, keep_log_probs=True)
returns = returns_to_go(rewards)
loss = -(torch.stack(log_probs) * returns).sum()
loss.backward(retain_graph=True)
optimizer.step()
optimizer.zero_grad()
loss = -(torch.stack(log_probs) * returns).sum()
try:
    loss.backward(retain_graph=True)
except RuntimeError as error:
    print(f"{type(error).__name__}: {error}")
    assert "modified by an inplace operation" in str(error)
else:
    raise AssertionError("backward through weights changed in place was expected to fail")

# %%
# ... or no error at all, and a stale gradient
# --------------------------------------------
#
# That error is luck. A linear policy on these states gives autograd no reason to save its
# weight: the weight's own gradient needs only the states, and nothing upstream needs a
# gradient. The graph then holds nothing the step changes, the replay runs, and every update
# after the first uses the gradient of the policy *as it was during the episode*.

torch.manual_seed(7)
policy = nn.Linear(N_INPUTS, 2)
optimizer = torch.optim.SGD(policy.parameters(), lr=0.5)
episode_policy = copy.deepcopy(policy)  # the policy that acted
states, actions, rewards, log_probs = run_episode(policy, keep_log_probs=True)
returns = returns_to_go(rewards)
print(f"one episode of {len(actions)} steps, return {returns[0]:.0f}")
assert returns[0] != 0  # a non-zero return, so the gradients below are not all zero

addmm = log_probs[0].grad_fn  # find the linear layer's node in the graph
while type(addmm).__name__ != "AddmmBackward0":
    addmm = addmm.next_functions[0][0]
assert addmm._saved_mat2 is None  # the weight was not saved for backward


def replay_loss():
    return -(torch.stack(log_probs) * returns).sum()


optimizer.zero_grad()
replay_loss().backward(retain_graph=True)
optimizer.step()  # update 1
current_policy = copy.deepcopy(policy)  # the policy update 2 should differentiate
optimizer.zero_grad()
replay_loss().backward(retain_graph=True)  # update 2: no error
replayed = [p.grad.clone() for p in policy.parameters()]


def policy_gradient(policy, states, actions, returns):
    log_probs = Categorical(logits=policy(states)).log_prob(actions)
    return torch.autograd.grad(-(log_probs * returns).sum(), list(policy.parameters()))


def max_diff(grads_a, grads_b):
    return max((a - b).abs().max().item() for a, b in zip(grads_a, grads_b))


stale = policy_gradient(episode_policy, states, actions, returns)
fresh = policy_gradient(current_policy, states, actions, returns)
print(f"update 2's gradient vs the acting policy's: max diff {max_diff(replayed, stale):.1e}")
print(f"update 2's gradient vs the current policy's: max diff {max_diff(replayed, fresh):.2f}")
assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(replayed, stale))
assert max_diff(replayed, fresh) > 0.1

# %%
# Update 2 received the first update's gradient again (equal up to rounding), not the gradient
# of the policy it was updating. Nothing fails; learning is just wrong.
#
# The fix: store states and actions, recompute ``log_prob`` at each update
# ------------------------------------------------------------------------
#
# Acting needs no graph at all: ``run_episode`` without ``keep_log_probs`` samples with
# gradients disabled and keeps plain tensors. Each update runs the policy again on the stored
# states and builds a fresh graph, which its backward may free. This is what libraries such as
# Tianshou do (`thu-ml/tianshou#397 <https://github.com/thu-ml/tianshou/issues/397>`__ asks why
# they recompute instead of reusing). PPO also needs the log-probabilities of the acting
# policy, for its ratio: store those *detached*, as plain numbers.

torch.manual_seed(7)
policy = nn.Linear(N_INPUTS, 2)
optimizer = torch.optim.SGD(policy.parameters(), lr=0.5)
states, actions, rewards, _ = run_episode(policy)
returns = returns_to_go(rewards)
for update in range(3):
    expected = policy_gradient(policy, states, actions, returns)
    log_probs = Categorical(logits=policy(states)).log_prob(actions)  # fresh graph
    optimizer.zero_grad()
    (-(log_probs * returns).sum()).backward()
    assert all(torch.equal(p.grad, g) for p, g in zip(policy.parameters(), expected))
    optimizer.step()
print(f"3 updates on one stored episode of {len(actions)} steps, each with a fresh graph")
assert states.grad_fn is None and actions.grad_fn is None  # the stored batch holds no graph

# %%
# Each update's gradient is exactly that of the policy being updated.
#
# Actor-critic: "add the losses" trains the critic with the actor's loss
# ----------------------------------------------------------------------
#
# An actor-critic adds a critic ``V(s)`` and uses the advantage ``G - V(s)`` in the actor's
# loss. Written as one sum of two losses with the advantage left attached, the actor's loss
# also sends gradient into the critic, so the critic is no longer trained only to predict the
# returns (reported in
# `astariul/encode-attend-navigate-pytorch#2
# <https://github.com/astariul/encode-attend-navigate-pytorch/issues/2>`__ and, for a Keras
# example, `keras-team/keras-io#194 <https://github.com/keras-team/keras-io/issues/194>`__).
# The check: the critic's gradient should equal the gradient of the critic's own loss.

torch.manual_seed(0)
actor, critic = mlp(2), mlp(1)
states, actions, rewards, _ = run_episode(actor)
returns = returns_to_go(rewards)
print(f"one episode of {len(actions)} steps, return {returns[0]:.0f}")


def losses(detach_advantage):
    values = critic(states).squeeze(-1)
    log_probs = Categorical(logits=actor(states)).log_prob(actions)
    advantage = returns - values
    if detach_advantage:
        advantage = advantage.detach()
    actor_loss = -(log_probs * advantage).sum()
    critic_loss = (returns - values).pow(2).mean()
    return actor_loss, critic_loss


own = torch.autograd.grad(losses(True)[1], list(critic.parameters()))
for detach_advantage in (False, True):
    critic.zero_grad()
    sum(losses(detach_advantage)).backward()
    diff = max_diff([p.grad for p in critic.parameters()], own)
    print(f"detach advantage={detach_advantage}: critic gradient vs its own loss's: {diff:.2e}")
    if detach_advantage:
        assert all(torch.equal(p.grad, g) for p, g in zip(critic.parameters(), own))
    else:
        assert diff > 1e-2

# %%
# With ``advantage.detach()`` the critic's gradient is exactly its own loss's gradient, and one
# backward of the sum serves both networks.
#
# ``backward(inputs=...)`` instead of ``detach()``: fine for separate networks
# ----------------------------------------------------------------------------
#
# Another way to keep the losses apart is two backward calls, each limited to one network's
# parameters with ``inputs=``. It needs no ``retain_graph`` here: the actor's backward, limited
# to the actor, never runs (and so never frees) the critic's part of the graph, which is all the
# critic's backward needs.

critic.zero_grad()
actor_loss, critic_loss = losses(detach_advantage=False)
actor_loss.backward(inputs=list(actor.parameters()))
critic_loss.backward(inputs=list(critic.parameters()))
assert all(torch.equal(p.grad, g) for p, g in zip(critic.parameters(), own))
print("inputs=: critic gradient == its own loss's gradient, no retain_graph needed")

# %%
# With a shared trunk (one network with a policy head and a value head, as in many A2C
# implementations) the two backward calls both pass through the trunk, and the second one finds
# it freed: the first one, limited to the trunk and the policy head, had to run the trunk's
# nodes to reach the trunk's parameters.

trunk = nn.Sequential(nn.Linear(N_INPUTS, 16), nn.Tanh())
policy_head, value_head = nn.Linear(16, 2), nn.Linear(16, 1)
features = trunk(states)
values = value_head(features).squeeze(-1)
advantage = returns - values
log_probs = Categorical(logits=policy_head(features)).log_prob(actions)
(-(log_probs * advantage).sum()).backward(inputs=[*trunk.parameters(), *policy_head.parameters()])
try:
    (advantage**2).mean().backward(inputs=[*trunk.parameters(), *value_head.parameters()])
except RuntimeError as error:
    print(f"{type(error).__name__}: {error}")
    assert "backward through the graph a second time" in str(error)
else:
    raise AssertionError("the value loss's backward through the freed trunk was expected to fail")

# %%
# With a shared trunk, detach the advantage and call backward once on the sum. The value head
# then gets exactly its own loss's gradient; the trunk gets both losses' gradients, which is
# what sharing it means.


def shared_losses():
    features = trunk(states)
    values = value_head(features).squeeze(-1)
    log_probs = Categorical(logits=policy_head(features)).log_prob(actions)
    actor_loss = -(log_probs * (returns - values).detach()).sum()
    return actor_loss, (returns - values).pow(2).mean()


own_value_head = torch.autograd.grad(shared_losses()[1], list(value_head.parameters()))
for module in (trunk, policy_head, value_head):
    module.zero_grad()
sum(shared_losses()).backward()
assert all(torch.equal(p.grad, g) for p, g in zip(value_head.parameters(), own_value_head))
print("shared trunk, advantage detached: value head gradient == its own loss's gradient")

# %%
# Training the fixed loop
# -----------------------
#
# Actor-critic with separate networks, the fixed way: 8 episodes per iteration, played without
# a graph; then 2 update passes over them, each recomputing the log-probabilities and values,
# with the advantage detached and one backward of the summed losses. The baseline is the mean
# return of a policy that picks left or right at random, over 150 episodes.

torch.manual_seed(0)
random_policy = lambda state: torch.zeros(2)  # noqa: E731  equal logits: left or right at random
random_returns = [run_episode(random_policy)[2].sum().item() for _ in range(150)]
baseline = float(np.mean(random_returns))

torch.manual_seed(1)
actor, critic = mlp(2), mlp(1)
optimizer = torch.optim.Adam([*actor.parameters(), *critic.parameters()], lr=0.005)
episode_returns = []
for iteration in range(30):
    batch = [run_episode(actor) for _ in range(8)]
    episode_returns += [rewards.sum().item() for _, _, rewards, _ in batch]
    states = torch.cat([s for s, _, _, _ in batch])
    actions = torch.cat([a for _, a, _, _ in batch])
    returns = torch.cat([returns_to_go(r) for _, _, r, _ in batch])
    for _ in range(2):
        actor_loss, critic_loss = losses(detach_advantage=True)
        optimizer.zero_grad()
        (actor_loss / len(batch) + critic_loss).backward()
        optimizer.step()

last = float(np.mean(episode_returns[-80:]))
print(f"random policy: mean return {baseline:.2f}")
first = float(np.mean(episode_returns[:80]))
print(f"trained: mean return over the first 80 episodes {first:.2f}, over the last 80 {last:.2f}")
assert last > 0.9 and last > baseline + 0.5

# %%
# The learning curve: return per episode, averaged over each iteration's 8 episodes.

per_iteration = np.array(episode_returns).reshape(-1, 8).mean(axis=1)
fig, ax = plt.subplots(figsize=(4.2, 3.6), layout="constrained")
ax.plot(
    np.arange(1, len(per_iteration) + 1) * 8,
    per_iteration,
    color="#1a9c6b",
    marker="o",
    markersize=3,
    label="actor-critic, log-probs recomputed",
)
ax.axhline(baseline, color="#808080", linestyle="--", label="random policy")
ax.set(
    xlabel="episodes played",
    ylabel="return per episode (mean of 8)",
    ylim=(-1.05, 1.05),
    title="Recomputing log-probs each update:\nthe agent learns",
)
fig.legend(loc="outside lower center")
plt.show()

# %%
# What to take away
# -----------------
#
# * A log-probability kept from acting carries the graph of the forward pass that made it; one
#   backward frees that graph. Keep states and actions instead, and recompute
#   ``log_prob`` from the current policy at every update.
# * ``retain_graph=True`` is a wrong fix here: after an optimizer step it either fails with an
#   in-place modification error or, when the graph saved no weight, silently reuses the gradient
#   of the policy that acted.
# * In actor-critic, detach the advantage (or limit each backward to its own network with
#   ``inputs=`` when the networks share nothing); check that the critic's gradient equals its
#   own loss's gradient.
# * :doc:`../docs/errors` lists the freed-graph error's causes, :doc:`../docs/several-losses`
#   covers several losses on one forward pass, and :ref:`the in-place error
#   <errors-inplace>` has its own entry.
