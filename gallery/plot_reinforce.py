"""
REINFORCE: a second update needs fresh log-probs
================================================

One update per episode on the log-probabilities kept while acting (PyTorch's REINFORCE example)
is correct. A second update on the same episode raises "Trying to backward through the graph a
second time". The fix: store states, actions and the acting log-probabilities detached; each
update recomputes the log-probabilities, as the policy acted (same mode), weighted by the
probability ratio (PPO's ratio, unclipped here).
``retain_graph=True`` can silently reuse the acting policy's gradient.
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
# ``saved_log_probs`` in ``pytorch/examples``).
#
# ``ratio_reference`` is the checks' reference (:doc:`plot_how_examples_are_checked`), written
# apart from the loops: the return-weighted ratio of each stored action's probability now to its
# probability at the batch's first update, the weights that acted (there, REINFORCE's gradient).
# ``replayed_returns`` rebuilds the returns by walking the stored actions again.

import contextlib
import copy

import matplotlib.pyplot as plt
import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical

torch.manual_seed(0)
torch.set_num_threads(1)  # tiny tensors


# --- checked: the outcome check. docs/outcome.py and every gallery script that checks a fix
# --- carry these lines unchanged (tests/test_outcome_copies.py compares them).
@contextlib.contextmanager
def checked(optimizer, reference, *, train=None, steps=3, **named):
    """Check each ``optimizer.step()`` in the block by its outcome. At each step (with a closure,
    after each run of it), every parameter's ``.grad`` must equal the gradient of
    ``reference(step)``, a loss recomputed from scratch at the current weights by other code
    than the fix, and each parameter meant to train (``train``; by default all of the optimizer's
    and of ``named``, which must then all be in it) must get a non-zero gradient. At the end, at
    least ``steps`` steps ran and each of those parameters moved. ``named``: modules or tensors,
    which name the parameters in the messages."""
    names = {}
    for key, part in named.items():
        pairs = part.named_parameters() if isinstance(part, torch.nn.Module) else [("", part)]
        for name, p in pairs:
            names.setdefault(p, f"{key}.{name}".strip("."))
    params = [p for group in optimizer.param_groups for p in group["params"] if p.requires_grad]
    if train is None:  # every named parameter that requires grad is meant to train
        held = {id(p) for p in params}
        left_out = [n for p, n in names.items() if p.requires_grad and id(p) not in held]
        assert not left_out, f"{left_out[0]} is not in the optimizer: it never trains"
    meant = params if train is None else list(train)
    assert meant, "the optimizer holds no parameter meant to train: nothing to check"
    start, done, trained = [p.detach().clone() for p in meant], [], {id(p) for p in meant}

    def compare():
        at = f"step {len(done) - 1}:"
        got = [None if p.grad is None else p.grad.clone() for p in params]
        with torch.enable_grad():
            wanted = torch.autograd.grad(reference(len(done) - 1), params, allow_unused=True)
        for p, grad, want in zip(params, got, wanted):
            p.grad, name = grad, names.get(p, "a parameter")  # autograd.grad may add to it
            if id(p) in trained:
                assert grad is not None and grad.any(), f"{at} {name} got no gradient"
            grad = torch.zeros_like(p) if grad is None else grad
            want = torch.zeros_like(p) if want is None else want
            ratio = grad.norm() / want.norm().clamp_min(1e-12)
            assert grad.allclose(want, 1e-4, 1e-6), (
                f"{at} wrong gradient of {name} (norm x{ratio:.3g})"
            )

    def check(opt, args, kwargs):  # Optimizer.register_step_pre_hook, public since torch 2.0
        done.append(len(done))
        closure = kwargs.get("closure") or next((a for a in args if callable(a)), None)
        if closure is None:
            return compare()

        def closure_then_compare():  # LBFGS, Lightning: the gradients come inside step()
            loss = closure()
            compare()
            return loss

        args = tuple(a for a in args if a is not closure)  # args[0] is the optimizer
        return args, {**kwargs, "closure": closure_then_compare}

    handle = optimizer.register_step_pre_hook(check)
    try:
        yield done
    finally:
        handle.remove()
    assert len(done) >= steps, f"{len(done)} steps ran; a fix is checked over {steps}"
    for p, before in zip(meant, start):
        assert not torch.equal(p.detach(), before), f"{names.get(p, 'a parameter')} never moved"
    print(f"{'/'.join(named) or 'model'}: {len(done)} steps checked")


# --- end of checked


CELLS, START, LIMIT = 7, 3, 10
N_INPUTS = CELLS + 1  # the cell, one-hot, and which end is the goal


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


def replayed_returns():  # each step's return: the reward at its episode's end
    returns, steps, cell = [], 0, START
    for action, side in zip(actions.tolist(), states[:, -1].tolist()):
        cell, steps = cell + 2 * action - 1, steps + 1
        if cell in (0, CELLS - 1) or steps == LIMIT:
            returns += [{0: -side, CELLS - 1: side}.get(cell, 0.0)] * steps
            cell, steps = START, 0
    return torch.tensor(returns)


def ratio_reference(policy, updates_per_batch, weight=replayed_returns):
    acting = []

    def loss(step):  # reads states and actions, not the kept log-probs or returns
        probs = policy(states).softmax(-1)[torch.arange(len(actions)), actions]
        if step % updates_per_batch == 0:
            acting[:] = [probs.detach()]
        return -(probs / acting[0] * weight()).sum()

    return loss


# %%
# One update per episode: kept log-probabilities are right
# --------------------------------------------------------
#
# Each update walks its own episode's graph once, at the weights that acted.

torch.manual_seed(8)
policy = mlp(2)
optimizer = torch.optim.SGD(policy.parameters(), lr=0.1)
with checked(optimizer, ratio_reference(policy, 1), policy=policy):
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
    raise AssertionError("the second update was expected to fail")

# %%
# ``retain_graph=True``: the acting policy's gradient
# ---------------------------------------------------
#
# A replay with ``retain_graph=True`` after a step can run (or raise the
# :ref:`in-place error <errors-inplace>`): here a linear policy's does, and its second update gets
# the gradient of the policy *that acted* (asserted; the check stops it there):


def three_updates(policy, loss, **backward):  # on one stored episode, checked
    optimizer = torch.optim.SGD(policy.parameters(), lr=0.5)
    with checked(optimizer, ratio_reference(policy, 3), policy=policy):
        for update in range(3):
            optimizer.zero_grad()
            loss().backward(**backward)
            optimizer.step()


torch.manual_seed(7)
policy = nn.Linear(N_INPUTS, 2)
states, actions, returns, log_probs = run_episode(policy, keep_graph=True)
acting_policy = copy.deepcopy(policy)
assert returns[0] != 0  # non-zero gradients
try:
    three_updates(policy, lambda: -(log_probs * returns).sum(), retain_graph=True)
except AssertionError as error:
    print(f"{type(error).__name__}: {error}")
    assert "step 1: wrong gradient of policy.weight" in str(error)
    acting_loss = surrogate(acting_policy, states, actions, returns, log_probs.detach())
    acting_grad = torch.autograd.grad(acting_loss, acting_policy.weight)[0]
    assert torch.allclose(policy.weight.grad, acting_grad)
else:
    raise AssertionError("the check was expected to fail")

# %%
# The fix: recompute ``log_prob``, weighted by the probability ratio
# ------------------------------------------------------------------
#
# After an update, the episode is off-policy. For one decision, weighting its term by the ratio
# of the current policy's probability to the acting policy's gives the current policy's expected
# gradient exactly. Exact expectations, two actions (rewards 1 and 0), after one update:

logits = torch.zeros(2, requires_grad=True)
reward = torch.tensor([1.0, 0.0])
acting = logits.softmax(0).detach()  # the probabilities that sampled the episode
(first,) = torch.autograd.grad((logits.softmax(0) * reward).sum(), logits)
logits = (logits + first).detach().requires_grad_()  # after update 1 (learning rate 1)
p = logits.softmax(0)
expected = {  # of the return
    "current policy": (p * reward).sum(),
    "recomputed": (acting * p.log() * reward).sum(),
    "ratio-weighted": (acting * p / acting * reward).sum(),
}
slope = {k: torch.autograd.grad(v, logits, retain_graph=True)[0][0] for k, v in expected.items()}
print("d/d logit 0 (update 2):", ", ".join(f"{k} {v:.3f}" for k, v in slope.items()))
assert abs(slope["recomputed"] - slope["current policy"]) > 0.03
assert abs(slope["ratio-weighted"] - slope["current policy"]) < 1e-6

# %%
# Over several steps, each ratio corrects its action's probability, but the states and later
# returns stay the acting policy's: the expected gradient is exact only at the acting weights
# (TRPO's surrogate, cited below; not asserted here), hence PPO's clipping and few passes. The
# checks prove how the gradient is obtained, not the estimator, which their reference shares.
#
# So act without a graph, store the acting log-probabilities *detached*, and let each update
# build a fresh graph, in the mode the policy acted in: a policy with dropout draws another mask
# on each pass in training mode (asserted).

assert not torch.equal(*(nn.Dropout(0.5)(torch.ones(16)) for _ in range(2)))
torch.manual_seed(7)
policy = nn.Linear(N_INPUTS, 2)
states, actions, returns, log_probs = run_episode(policy)
assert log_probs.grad_fn is None  # the stored batch holds no graph
three_updates(policy, lambda: surrogate(policy, states, actions, returns, log_probs))  # fresh graph

# %%
# Actor-critic: detach the advantage in the actor's loss
# ------------------------------------------------------
#
# The actor's loss weighs log-probabilities by the advantage ``G - V(s)`` of a critic ``V``
# that still trains: recompute it every update, and detach it in the actor's loss only, so the
# critic trains on its own loss. Attached, the advantage trains the critic on the actor's loss
# too (:ref:`training patterns <patterns-actor-critic>`: shared trunk, ``inputs=``):


def losses(detach=True):
    advantage = returns - critic(states).squeeze(-1)
    actor_loss = surrogate(actor, states, actions, advantage.detach() if detach else advantage, old)
    return actor_loss / episodes + advantage.pow(2).mean()


def actor_critic_reference(updates_per_batch):
    def advantage():
        with torch.no_grad():
            return (replayed_returns() - critic(states)[:, 0]) / episodes

    actor_part = ratio_reference(actor, updates_per_batch, advantage)
    return lambda step: actor_part(step) + ((critic(states)[:, 0] - replayed_returns()) ** 2).mean()


def actor_critic_updates(detach):  # three, on one stored episode, checked
    with checked(optimizer, actor_critic_reference(3), actor=actor, critic=critic):
        for update in range(3):
            optimizer.zero_grad()
            losses(detach).backward()
            optimizer.step()


torch.manual_seed(0)
actor, critic = mlp(2), mlp(1)
optimizer = torch.optim.Adam([*actor.parameters(), *critic.parameters()], lr=0.005)
states, actions, returns, old = run_episode(actor)
episodes = 1
try:
    actor_critic_updates(detach=False)
except AssertionError as error:
    print(f"{type(error).__name__}: {error}")
    assert "step 0: wrong gradient of critic.0.weight" in str(error)
else:
    raise AssertionError("the check was expected to fail")
actor_critic_updates(detach=True)  # detached, the same updates pass (no step was taken above)

# %%
# Training the fixed loop
# -----------------------
#
# Fixed and checked: 8 episodes per iteration, played without a graph, then 2 update passes,
# recomputed, with the ratio and the detached advantage.

torch.manual_seed(1)
actor, critic = mlp(2), mlp(1)
optimizer = torch.optim.Adam([*actor.parameters(), *critic.parameters()], lr=0.005)
episode_returns = []
with checked(optimizer, actor_critic_reference(2), actor=actor, critic=critic):
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
print(f"mean return per episode: first 80 episodes {first:.2f}, last 80 {last:.2f}")
assert last > 0.8 and last > first + 0.5

per_iteration = np.array(episode_returns).reshape(-1, 8).mean(axis=1)
fig, ax = plt.subplots(figsize=(4.2, 3.4), layout="constrained")
ax.plot(8 * np.arange(1, 31), per_iteration, "o-", color="#1a9c6b", markersize=3)
ax.set(xlabel="episodes played", ylabel="return per episode (mean of 8)", ylim=(-1.05, 1.05))
ax.set_title("Recomputing log-probs each update:\nthe agent learns")
plt.show()

# %%
# Reported in: `pytorch/examples#151 <https://github.com/pytorch/examples/issues/151>`__,
# `a PPO forum thread
# <https://discuss.pytorch.org/t/pytorch-runtimeerror-trying-to-backward-through-the-graph-a-second-time/191396>`__,
# `thu-ml/tianshou#397 <https://github.com/thu-ml/tianshou/issues/397>`__ (why recompute),
# `astariul/encode-attend-navigate-pytorch#2
# <https://github.com/astariul/encode-attend-navigate-pytorch/issues/2>`__ (advantage attached).
# The surrogate: `Schulman et al., TRPO, section 2 <https://arxiv.org/abs/1502.05477>`__.
