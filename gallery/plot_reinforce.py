"""
Policy gradients and actor-critic: store actions, not log-probabilities
=======================================================================

The fix: store states and actions, and recompute the log-probabilities from the current policy at
every update; in actor-critic, also detach the advantage. Log-probabilities kept from acting and
used for a second update raise "Trying to backward through the graph a second time".
``retain_graph=True`` does not repair that: after the optimizer step it raises an in-place error,
or silently reuses the *old* policy's gradient. The environment is a tiny corridor.

.. index:: reinforcement learning, REINFORCE, policy gradient, log_prob, saved_log_probs,
   actor-critic, A2C, PPO, advantage, detach advantage, Categorical, torch.distributions
"""

# %%
# A corridor, a policy, and an episode
# ------------------------------------
#
# The agent starts in cell 3 of a corridor of 7 cells and steps left or right. One end, chosen
# per episode, is the goal: reaching it pays 1, the other end costs 1, and the tenth step ends
# the episode with nothing. The state is the one-hot cell and +1 or -1 for the goal's side.
# ``run_episode`` returns states, actions and rewards; with ``keep_log_probs=True`` it also keeps
# each step's ``log_prob`` *with its graph*, like the ``saved_log_probs`` list of the REINFORCE
# example in ``pytorch/examples``.

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


def output_layer_node(log_prob):
    """The graph node of the policy's last ``nn.Linear`` (an ``AddmmBackward0``)."""
    node = log_prob.grad_fn
    while type(node).__name__ != "AddmmBackward0":
        node = node.next_functions[0][0]
    return node


# %%
# Stored log-probabilities, replayed: the second update fails
# -----------------------------------------------------------
#
# Several updates on one batch of experience are common (PPO makes several passes over it). The
# loss is rebuilt from the stored log-probabilities each time, but the graph under them is the
# one the episode built, and the first backward freed it.

torch.manual_seed(2)
policy = mlp(2)
optimizer = torch.optim.SGD(policy.parameters(), lr=0.1)
states, actions, rewards, log_probs = run_episode(policy, keep_log_probs=True)
returns = returns_to_go(rewards)
print(f"one episode of {len(actions)} steps, return {returns[0]:.0f}")
assert output_layer_node(log_probs[0])._saved_mat2 is not None  # its weight is saved
for update in range(2):
    loss = -(torch.stack(log_probs) * returns).sum()
    optimizer.zero_grad()
    try:
        loss.backward()
    except RuntimeError as error:
        print(f"update {update + 1}: {type(error).__name__}: {str(error).partition('. ')[0]}")
        assert update == 1 and "backward through the graph a second time" in str(error)
        break
    optimizer.step()
    print(f"update {update + 1}: ran")
else:
    raise AssertionError("the second update through the freed graph was expected to fail")

# %%
# ``retain_graph=True``: an in-place error, or a stale gradient
# -------------------------------------------------------------
#
# With this two-layer policy, the kept graph saved the output layer's weight (asserted above)
# and the optimizer step changes it in place (asserted below), so the second backward raises the
# :ref:`in-place modification error <errors-inplace>`. That error is luck. A linear policy on
# these states saves no weight (its gradient needs only the states), so the replay runs, and
# every update after the first gets the gradient of the policy *as it was during the episode*.

assert policy[2].weight._version > 0  # update 1's step changed the saved weight in place

# %%
# Then a linear policy, whose replay runs:

torch.manual_seed(7)
policy = nn.Linear(N_INPUTS, 2)
optimizer = torch.optim.SGD(policy.parameters(), lr=0.5)
episode_policy = copy.deepcopy(policy)  # the policy that acted
states, actions, rewards, log_probs = run_episode(policy, keep_log_probs=True)
returns = returns_to_go(rewards)
print(f"one episode of {len(actions)} steps, return {returns[0]:.0f}")
assert returns[0] != 0  # a non-zero return, so the gradients below are not all zero

assert output_layer_node(log_probs[0])._saved_mat2 is None  # the weight was not saved


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
# Update 2 got the first update's gradient again (equal up to rounding), not that of the policy
# it was updating. Nothing fails; learning is just wrong.
#
# The fix: store states and actions, recompute ``log_prob`` at each update
# ------------------------------------------------------------------------
#
# Acting needs no graph: ``run_episode`` without ``keep_log_probs`` samples with gradients
# disabled and keeps plain tensors. Each update runs the policy again on the stored states and
# builds a fresh graph, which its backward may free. PPO's ratio also needs the acting policy's
# log-probabilities: store those *detached*.

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
# Actor-critic: detach the advantage
# ----------------------------------
#
# The actor's loss weighs the log-probabilities by the advantage ``G - V(s)`` from a critic
# ``V``. Left attached, it also trains the critic; detached, one backward of the summed losses
# gives the critic exactly its own loss's gradient, which is the check to run on your code.
# :ref:`Training patterns <patterns-actor-critic>` shows the attached case, ``inputs=`` per
# network, and a shared trunk.

torch.manual_seed(0)
actor, critic = mlp(2), mlp(1)
states, actions, rewards, _ = run_episode(actor)
returns = returns_to_go(rewards)


def losses():
    values = critic(states).squeeze(-1)
    log_probs = Categorical(logits=actor(states)).log_prob(actions)
    actor_loss = -(log_probs * (returns - values).detach()).sum()
    return actor_loss, (returns - values).pow(2).mean()


own = torch.autograd.grad(losses()[1], list(critic.parameters()))
sum(losses()).backward()
assert all(torch.equal(p.grad, g) for p, g in zip(critic.parameters(), own))
print("advantage detached: the critic's gradient == its own loss's gradient")

# %%
# Training the fixed loop
# -----------------------
#
# Actor-critic with separate networks, fixed: 8 episodes per iteration, played without a graph,
# then 2 update passes that recompute log-probabilities and values, with the advantage detached
# and one backward of the summed losses. The baseline: a random policy's mean return over 150
# episodes.

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
        actor_loss, critic_loss = losses()
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
# Reported in: `pytorch/examples#151 <https://github.com/pytorch/examples/issues/151>`__,
# `a PPO forum thread
# <https://discuss.pytorch.org/t/pytorch-runtimeerror-trying-to-backward-through-the-graph-a-second-time/191396>`__,
# `thu-ml/tianshou#397 <https://github.com/thu-ml/tianshou/issues/397>`__ (why recompute),
# `astariul/encode-attend-navigate-pytorch#2
# <https://github.com/astariul/encode-attend-navigate-pytorch/issues/2>`__ (advantage attached).
