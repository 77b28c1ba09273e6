"""ActorCritic: observation normalizer + Gaussian actor (state-independent log-std) + separate critic.

Its input is a stack of the `history` most recent observation frames (history.py), flattened
oldest first; with history 1 that is the observation itself.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn
from torch.distributions import Normal

from ppo_control.history import stacked_index
from ppo_control.normalization import RunningMeanStd

LOG_2PI = math.log(2 * math.pi)
ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU, "gelu": nn.GELU, "silu": nn.SiLU}


def mlp(in_dim: int, hidden_sizes: list[int], out_dim: int, activation: str, head_gain: float) -> nn.Sequential:
    """MLP with orthogonal init: gain sqrt(2) on hidden layers, `head_gain` on the output, zero biases."""
    layers: list[nn.Module] = []
    sizes = [in_dim, *hidden_sizes]
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [_orthogonal(nn.Linear(a, b), math.sqrt(2)), ACTIVATIONS[activation]()]
    layers.append(_orthogonal(nn.Linear(sizes[-1], out_dim), head_gain))
    return nn.Sequential(*layers)


def _orthogonal(layer: nn.Linear, gain: float) -> nn.Linear:
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


class ActorCritic(nn.Module):
    """The whole learned controller. Raw observations in; the normalizer is part of the module.

    The normalizer's statistics change only when the trainer calls `obs_normalizer.update`; every
    forward path here reads them frozen, so evaluation and export see exactly the trained statistics.
    """

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        action_low: np.ndarray,
        action_high: np.ndarray,
        hidden_sizes: list[int] = (64, 64),
        activation: str = "tanh",
        log_std_init: float = 0.0,
        normalize_obs: bool = True,
        obs_clip: float = 10.0,
        actor_index: list[int] | None = None,
        critic_index: list[int] | None = None,
        actor_history: int = 1,
        critic_history: int = 1,
    ):
        """`obs_dim` is one frame's size; `actor_index`/`critic_index` pick each network's groups
        from a frame (None = the whole frame), `actor_history`/`critic_history` how many of the most
        recent frames it reads."""
        super().__init__()
        self.normalize_obs = normalize_obs
        self.frame_dim = obs_dim
        self.history = max(actor_history, critic_history)  # frames in the stacked input
        self.obs_dim = self.history * obs_dim  # size of the stacked input
        self.actor_history, self.critic_history = actor_history, critic_history
        # One running mean/std per frame element, shared by the frames of a stack: each group's
        # statistics are its own, and a frame is normalized the same wherever it sits in the stack.
        self.obs_normalizer = RunningMeanStd(shape=(obs_dim,), clip=obs_clip)
        # Which elements each network reads: of one frame (`*_frame_index`, what an export slices its
        # normalizer with) and of the stacked input (`*_index`); None = all, as they are. Derived
        # from the config, so not saved in checkpoints (persistent=False).
        indices = {
            "actor_frame_index": actor_index,
            "critic_frame_index": critic_index,
            "actor_index": stacked_index(actor_index, obs_dim, actor_history, self.history),
            "critic_index": stacked_index(critic_index, obs_dim, critic_history, self.history),
        }
        for name, index in indices.items():
            self.register_buffer(name, None if index is None else torch.as_tensor(index, dtype=torch.long), persistent=False)
        actor_in = self.obs_dim if self.actor_index is None else len(self.actor_index)
        critic_in = self.obs_dim if self.critic_index is None else len(self.critic_index)
        self.actor_mean = mlp(actor_in, list(hidden_sizes), action_dim, activation, head_gain=0.01)
        self.critic = mlp(critic_in, list(hidden_sizes), 1, activation, head_gain=1.0)
        self.log_std = nn.Parameter(torch.full((action_dim,), float(log_std_init)))
        self.register_buffer("action_low", torch.as_tensor(action_low, dtype=torch.float32))
        self.register_buffer("action_high", torch.as_tensor(action_high, dtype=torch.float32))

    def normalize(self, obs: torch.Tensor) -> torch.Tensor:
        """Raw stacked input [..., obs_dim] -> normalized, every frame with the same statistics."""
        if not self.normalize_obs:
            return obs
        if self.history == 1:
            return self.obs_normalizer(obs)
        return self.obs_normalizer(obs.unflatten(-1, (self.history, self.frame_dim))).flatten(-2)

    def current_frame(self, obs: torch.Tensor) -> torch.Tensor:
        """The newest frame [..., frame_dim] of stacked inputs (what the normalizer's statistics track)."""
        return obs if self.history == 1 else obs[..., -self.frame_dim :]

    def actor_input(self, norm_obs: torch.Tensor) -> torch.Tensor:
        return norm_obs if self.actor_index is None else norm_obs.index_select(-1, self.actor_index)

    def critic_input(self, norm_obs: torch.Tensor) -> torch.Tensor:
        return norm_obs if self.critic_index is None else norm_obs.index_select(-1, self.critic_index)

    def distribution(self, norm_obs: torch.Tensor) -> Normal:
        mean = self.actor_mean(self.actor_input(norm_obs))
        return Normal(mean, self.log_std.exp().expand_as(mean), validate_args=False)  # checks cost ~20% of an update

    def value(self, norm_obs: torch.Tensor) -> torch.Tensor:
        return self.critic(self.critic_input(norm_obs)).squeeze(-1)

    def sample_action(self, obs: torch.Tensor) -> torch.Tensor:
        """One rollout step: a sampled (unclipped) action for raw observations. The cheapest path
        (actor only): log-probs and values of the whole rollout are computed afterwards in one
        batched `evaluate_actions`, as the policy does not change during a rollout."""
        mean = self.actor_mean(self.actor_input(self.normalize(obs)))
        return mean + self.log_std.exp() * torch.randn_like(mean)

    def evaluate_actions(self, norm_obs: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """For the PPO loss: (log-prob of `actions` summed over action dims, entropy, value), per sample.

        The diagonal Gaussian written out (what torch.distributions.Normal computes, in fewer ops:
        this runs once per minibatch). Its entropy does not depend on the observation."""
        mean = self.actor_mean(self.actor_input(norm_obs))
        z = (actions - mean) * torch.exp(-self.log_std)
        log_prob = -0.5 * z.pow(2).sum(-1) - (self.log_std.sum() + 0.5 * LOG_2PI * self.log_std.numel())
        entropy = (self.log_std.sum() + (0.5 + 0.5 * LOG_2PI) * self.log_std.numel()).expand(mean.shape[0])
        return log_prob, entropy, self.value(norm_obs)

    def deterministic_action(self, obs: torch.Tensor) -> torch.Tensor:
        """The mean action, clipped to the action bounds: what evaluation and deployment run."""
        mean = self.actor_mean(self.actor_input(self.normalize(obs)))
        return torch.maximum(torch.minimum(mean, self.action_high), self.action_low)
