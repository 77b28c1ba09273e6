"""ActorCritic: observation normalizer + Gaussian actor (state-independent log-std) + separate critic.

Actions reach the action bounds one of two ways (`squash`). "none": the Gaussian's sample goes to
the env, which clips it; its entropy grows without bound while the clipped actions only saturate,
so an entropy bonus can drive the std up for nothing. "tanh": the sample is squashed into the
bounds, as Brax's PPO does; PPO's ratio is the same either way (the squash's Jacobian cancels), and
the entropy is the squashed distribution's, which is largest for spread actions, not saturated ones.

Its input is a stack of the `history` most recent observation frames (history.py), flattened
oldest first; with history 1 that is the observation itself. With `rnn` (gru or lstm) the actor
carries a recurrent state from step to step (`Memory`); the critic stays feed-forward.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from ppo_control.config import ACTIVATIONS
from ppo_control.config.errors import UserError
from ppo_control.envs.base import EnvInfo
from ppo_control.envs.observations import group_index
from ppo_control.rl.history import stacked_index
from ppo_control.rl.normalization import RunningMeanStd

LOG_2PI = math.log(2 * math.pi)
LOG_2 = math.log(2)


def mlp(in_dim: int, hidden_sizes: list[int], out_dim: int, activation: str, head_gain: float) -> nn.Sequential:
    """MLP with orthogonal init: gain sqrt(2) on hidden layers, `head_gain` on the output, zero biases."""
    layers: list[nn.Module] = []
    sizes = [in_dim, *hidden_sizes]
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [_orthogonal(nn.Linear(a, b), math.sqrt(2)), getattr(nn, ACTIVATIONS[activation])()]
    layers.append(_orthogonal(nn.Linear(sizes[-1], out_dim), head_gain))
    return nn.Sequential(*layers)


def _orthogonal(layer: nn.Linear, gain: float) -> nn.Linear:
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


class Memory(nn.Module):
    """A recurrent layer (GRU or LSTM cell) between the actor's input and its MLP.

    Its state is one tensor [batch, state_size] (the LSTM's h and c side by side); zeros are the
    state at an episode's start. `forward(x, state)` is one control step (features, next state):
    acting, evaluation and export step the cell. Training replays whole sequences with torch's
    fused GRU/LSTM over the same weights (`run`), which computes the same function in one call
    per stretch without an episode start (the cell's gates, in C++ rather than a Python loop).
    """

    def sequence(self, x: torch.Tensor, state: torch.Tensor, episode_starts: torch.Tensor) -> torch.Tensor:
        """Features [L, batch, hidden] over sequences x [L, batch, input]: from `state` at the first
        step, and from zeros wherever `episode_starts` [L, batch] marks a new episode."""
        length = x.shape[0]
        cuts = (episode_starts[1:].any(dim=1).nonzero().flatten() + 1).tolist()  # steps where some sequence restarts
        features = []
        for start, end in zip([0, *cuts], [*cuts, length]):
            state = state * (~episode_starts[start]).unsqueeze(-1).to(state.dtype)
            out, state = self.run(x[start:end], state)
            features.append(out)
        return torch.cat(features)


class GRUMemory(Memory):
    def __init__(self, input_size: int, hidden_size: int):
        super().__init__()
        self.state_size = hidden_size
        self.cell = nn.GRUCell(input_size, hidden_size)

    def forward(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.cell(x, state)
        return h, h

    def run(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Steps x [T, batch, input] from `state`: (features [T, batch, hidden], last state)."""
        cell = self.cell
        params = [cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh]
        out, h = torch.gru(x, state.unsqueeze(0).contiguous(), params, True, 1, 0.0, self.training, False, False)
        return out, h[0]


class LSTMMemory(Memory):
    def __init__(self, input_size: int, hidden_size: int):
        super().__init__()
        self.hidden_size = hidden_size
        self.state_size = 2 * hidden_size
        self.cell = nn.LSTMCell(input_size, hidden_size)

    def forward(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h, c = self.cell(x, (state[:, : self.hidden_size], state[:, self.hidden_size :]))
        return h, torch.cat([h, c], dim=-1)

    def run(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Steps x [T, batch, input] from `state`: (features [T, batch, hidden], last state)."""
        cell, size = self.cell, self.hidden_size
        params = [cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh]
        hx = (state[:, :size].unsqueeze(0).contiguous(), state[:, size:].unsqueeze(0).contiguous())
        out, h, c = torch.lstm(x, hx, params, True, 1, 0.0, self.training, False, False)
        return out, torch.cat([h[0], c[0]], dim=-1)


MEMORIES = {"gru": GRUMemory, "lstm": LSTMMemory}


@dataclass(frozen=True)
class Networks:
    """The layers: the MLPs' widths and activation (the critic's own widths with
    `critic_hidden_sizes`, None = the actor's), the actions' initial log-std, with `rnn` (gru or
    lstm) a recurrent layer of `rnn_size` units before the actor's MLP, and how the actions reach
    their bounds (`squash`: none or tanh)."""

    hidden_sizes: Sequence[int] = (64, 64)
    activation: str = "tanh"
    critic_hidden_sizes: Sequence[int] | None = None
    log_std_init: float = 0.0
    rnn: str = "none"
    rnn_size: int = 128
    squash: str = "none"


@dataclass(frozen=True)
class Inputs:
    """What each network reads: the observation normalizer (on, clipped at `obs_clip`), the elements
    of one frame it takes (`actor_index`/`critic_index`, None = the whole frame) and how many of the
    most recent frames (`actor_history`/`critic_history`)."""

    normalize_obs: bool = True
    obs_clip: float = 10.0
    actor_index: Sequence[int] | None = None
    critic_index: Sequence[int] | None = None
    actor_history: int = 1
    critic_history: int = 1


class ActorCritic(nn.Module):
    """The whole learned controller. Raw observations in; the normalizer is part of the module.

    The normalizer's statistics change only when the trainer calls `obs_normalizer.update`; every
    forward path here reads them frozen, so evaluation and export see exactly the trained statistics.
    Recurrent policies take and return their state (`initial_state`); feed-forward ones pass None.
    """

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        action_low: np.ndarray,
        action_high: np.ndarray,
        networks: Networks = Networks(),
        inputs: Inputs = Inputs(),
    ):
        """`obs_dim` is one frame's size; `networks` the layers, `inputs` what each network reads."""
        super().__init__()
        self.normalize_obs = inputs.normalize_obs
        actor_index, critic_index = inputs.actor_index, inputs.critic_index
        actor_history, critic_history = inputs.actor_history, inputs.critic_history
        self.frame_dim = obs_dim
        self.history = max(actor_history, critic_history)  # frames in the stacked input
        self.obs_dim = self.history * obs_dim  # size of the stacked input
        self.actor_history, self.critic_history = actor_history, critic_history
        # One running mean/std per frame element, shared by the frames of a stack: each group's
        # statistics are its own, and a frame is normalized the same wherever it sits in the stack.
        self.obs_normalizer = RunningMeanStd(shape=(obs_dim,), clip=inputs.obs_clip)
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
        net = networks
        self.memory = MEMORIES[net.rnn](actor_in, net.rnn_size) if net.rnn != "none" else None
        actor_in = net.rnn_size if self.memory else actor_in
        self.actor_mean = mlp(actor_in, list(net.hidden_sizes), action_dim, net.activation, head_gain=0.01)
        critic_sizes = list(net.hidden_sizes if net.critic_hidden_sizes is None else net.critic_hidden_sizes)
        self.critic = mlp(critic_in, critic_sizes, 1, net.activation, head_gain=1.0)
        self.log_std = nn.Parameter(torch.full((action_dim,), float(net.log_std_init)))
        self.register_buffer("action_low", torch.as_tensor(action_low, dtype=torch.float32))
        self.register_buffer("action_high", torch.as_tensor(action_high, dtype=torch.float32))
        self.squash = net.squash == "tanh"
        if self.squash and not (torch.isfinite(self.action_low).all() and torch.isfinite(self.action_high).all()):
            raise UserError("policy.squash=tanh needs finite action bounds; this task has unbounded actions: use policy.squash=none")

    @property
    def recurrent(self) -> bool:
        return self.memory is not None

    def initial_state(self, batch: int) -> torch.Tensor | None:
        """The actor's state at an episode's start, [batch, state_size] zeros (None if feed-forward)."""
        if self.memory is None:
            return None
        return torch.zeros(batch, self.memory.state_size, device=self.log_std.device)

    def continue_state(self, state: torch.Tensor | None, done: np.ndarray | torch.Tensor) -> torch.Tensor | None:
        """The state for the next step of a vector env: the initial (zero) state for the sub-envs
        whose episode ended (`done`), where the next one starts; None stays None."""
        if state is None:
            return None
        ongoing = ~done if isinstance(done, torch.Tensor) else torch.from_numpy(~done)
        return state * ongoing.to(state.device).unsqueeze(-1)

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

    def value(self, norm_obs: torch.Tensor) -> torch.Tensor:
        return self.critic(self.critic_input(norm_obs)).squeeze(-1)

    def action_mean(self, obs: torch.Tensor, state: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One control step for raw observations [batch, obs_dim]: (the actor's mean action, unclipped;
        the next state)."""
        x = self.actor_input(self.normalize(obs))
        if self.memory is not None:
            x, state = self.memory(x, state)
        return self.actor_mean(x), state

    def sample_action(self, obs: torch.Tensor, state: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One rollout step: (a Gaussian sample, before any clip or squash; the next state). What
        training stores; the env receives `env_action` of it. The cheapest path (actor only):
        log-probs and values of the whole rollout are computed afterwards in one batched
        `evaluate_actions`, as the policy does not change during a rollout."""
        mean, state = self.action_mean(obs, state)
        return mean + self.log_std.exp() * torch.randn_like(mean), state

    def env_action(self, sample: torch.Tensor) -> torch.Tensor:
        """What the env receives for a Gaussian sample: squashed into the bounds, or as it is (the
        env clips it)."""
        return self.squash_into_bounds(sample) if self.squash else sample

    def squash_into_bounds(self, sample: torch.Tensor) -> torch.Tensor:
        half_range = (self.action_high - self.action_low) / 2
        return self.action_low + half_range * (torch.tanh(sample) + 1)

    def deterministic_step(self, obs: torch.Tensor, state: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The mean action in the action bounds, squashed or clipped (what evaluation and deployment
        run), and the next state."""
        mean, state = self.action_mean(obs, state)
        if self.squash:
            return self.squash_into_bounds(mean), state
        return torch.maximum(torch.minimum(mean, self.action_high), self.action_low), state

    def deterministic_action(self, obs: torch.Tensor) -> torch.Tensor:
        """`deterministic_step` of a feed-forward policy (a recurrent one needs its state)."""
        if self.memory is not None:
            raise TypeError("a recurrent policy acts with its state: use deterministic_step(obs, state)")
        return self.deterministic_step(obs)[0]

    def evaluate_actions(
        self, norm_obs: torch.Tensor, actions: torch.Tensor, memory: tuple[torch.Tensor, torch.Tensor] | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """For the PPO loss: (log-prob of `actions` summed over action dims, entropy, value), per sample.

        Feed-forward: samples [batch, ...]. Recurrent: whole sequences [batch, L, ...], with
        `memory` = (the actor's state at each sequence's first step [batch, state_size], episode
        starts [batch, L]); the state is carried through each sequence and zeroed where an episode
        starts (truncated backpropagation through time over the L steps).

        The diagonal Gaussian written out (what torch.distributions.Normal computes, in fewer ops:
        this runs once per minibatch); `actions` are its samples, before any squash. Its entropy
        does not depend on the observation. Squashed, the entropy adds the squash's log-Jacobian at
        one reparameterized sample per state (Brax's estimate), so it depends on the mean too."""
        x = self.actor_input(norm_obs)
        if self.memory is not None:
            states, starts = memory
            x = self.memory.sequence(x.transpose(0, 1), states, starts.transpose(0, 1)).transpose(0, 1)
        mean = self.actor_mean(x)
        z = (actions - mean) * torch.exp(-self.log_std)
        log_prob = -0.5 * z.pow(2).sum(-1) - (self.log_std.sum() + 0.5 * LOG_2PI * self.log_std.numel())
        entropy = (self.log_std.sum() + (0.5 + 0.5 * LOG_2PI) * self.log_std.numel()).expand(mean.shape[:-1])
        if self.squash:
            entropy = entropy + self._squash_log_jacobian(mean + self.log_std.exp() * torch.randn_like(mean))
        return log_prob, entropy, self.value(norm_obs)

    def _squash_log_jacobian(self, sample: torch.Tensor) -> torch.Tensor:
        """log |d squash / d sample| summed over action dims; log(1 - tanh(u)^2) in its stable form."""
        log_dtanh = 2 * (LOG_2 - sample - nn.functional.softplus(-2 * sample))
        return (log_dtanh + torch.log((self.action_high - self.action_low) / 2)).sum(-1)


def build_policy(policy_cfg, normalize_cfg, info: EnvInfo) -> ActorCritic:
    """The policy a run's `policy` and `normalize` config sections describe, for `info`'s
    observation layout (UserError for a group the task lacks)."""
    return ActorCritic(
        obs_dim=info.obs_dim,
        action_dim=info.action_dim,
        action_low=info.action_low,
        action_high=info.action_high,
        networks=Networks(
            hidden_sizes=list(policy_cfg.hidden_sizes),
            activation=policy_cfg.activation,
            critic_hidden_sizes=None if policy_cfg.critic_hidden_sizes is None else list(policy_cfg.critic_hidden_sizes),
            log_std_init=policy_cfg.log_std_init,
            rnn=str(policy_cfg.rnn),
            rnn_size=int(policy_cfg.rnn_size),
            squash=str(policy_cfg.squash),
        ),
        inputs=Inputs(
            normalize_obs=normalize_cfg.obs,
            obs_clip=normalize_cfg.obs_clip,
            actor_index=group_index(info.groups, list(policy_cfg.actor_obs), "policy.actor_obs"),
            critic_index=group_index(info.groups, list(policy_cfg.critic_obs), "policy.critic_obs"),
            actor_history=int(policy_cfg.actor_history),
            critic_history=int(policy_cfg.critic_history),
        ),
    )
