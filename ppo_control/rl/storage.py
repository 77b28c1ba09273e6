"""Preallocated rollout storage and GAE that keeps terminations and time-limit truncations apart."""

from __future__ import annotations

import numpy as np
import torch


class RolloutStorage:
    """One rollout of `num_steps` x `num_envs` transitions, as preallocated tensors.

    `observations` holds the raw observations the policy acted on; the trainer normalizes the whole
    batch once, with the same frozen statistics the policy used while acting, and computes the
    log-probs and values in one batched pass then (so they are not stored per step).
    `truncation_values[t, i]` is V(final observation) where env i was truncated at step t (else 0).
    A recurrent policy's state is kept at the start of every sequence of `sequence_length` steps:
    training replays the actor over those sequences from there.
    What host envs hand back (rewards, terminated, truncated) is numpy: it is written every step
    through zero-copy numpy views of CPU tensors, which GAE (a CPU loop) reads directly. Envs that
    simulate on the training device (`env_outputs_on_device`) write torch tensors there instead,
    and GAE runs there too: nothing crosses to the host.
    """

    def __init__(
        self,
        num_steps: int,
        num_envs: int,
        obs_dim: int,
        action_dim: int,
        device: torch.device | str = "cpu",
        sequence_length: int | None = None,
        state_size: int = 0,
        env_outputs_on_device: bool = False,
    ):
        """For a recurrent policy, `sequence_length` (dividing num_steps) and the size of its state:
        `sequence_states[k]` is the actor's state at step k * sequence_length."""
        self.num_steps, self.num_envs = num_steps, num_envs
        shape = (num_steps, num_envs)
        self.sequence_length = sequence_length
        if sequence_length is not None:
            self.sequence_states = torch.zeros(num_steps // sequence_length, num_envs, state_size, device=device)
        self.observations = torch.zeros(*shape, obs_dim, device=device)
        self.actions = torch.zeros(*shape, action_dim, device=device)
        self.truncation_values = torch.zeros(shape, device=device)
        env_device = device if env_outputs_on_device else "cpu"
        self.rewards = torch.zeros(shape, device=env_device)
        self.terminated = torch.zeros(shape, dtype=torch.bool, device=env_device)
        self.truncated = torch.zeros(shape, dtype=torch.bool, device=env_device)
        if not env_outputs_on_device:
            self.rewards_np, self.terminated_np, self.truncated_np = self.rewards.numpy(), self.terminated.numpy(), self.truncated.numpy()

    def episode_starts(self) -> torch.Tensor:
        """[T, N] bool: step t begins an episode of env i (its previous step ended one). False at
        t = 0: the state kept there already starts any episode that began before the rollout."""
        done = self.terminated | self.truncated
        starts = torch.zeros_like(done)
        starts[1:] = done[:-1]
        return starts.to(self.observations.device)

    def to_sequences(self, x: torch.Tensor) -> torch.Tensor:
        """[T, N, ...] -> [(T / L) * N, L, ...]: consecutive L-step pieces of each env's rollout, in
        the order of `sequence_states` flattened ([T / L, N] -> (T / L) * N)."""
        count, length = self.num_steps // self.sequence_length, self.sequence_length
        return x.reshape(count, length, self.num_envs, *x.shape[2:]).transpose(1, 2).reshape(count * self.num_envs, length, *x.shape[2:])

    def from_sequences(self, x: torch.Tensor) -> torch.Tensor:
        """The inverse of `to_sequences`."""
        count, length = self.num_steps // self.sequence_length, self.sequence_length
        return x.reshape(count, self.num_envs, length, *x.shape[2:]).transpose(1, 2).reshape(self.num_steps, self.num_envs, *x.shape[2:])

    def compute_advantages(
        self, values: torch.Tensor, last_values: torch.Tensor, gamma: float, gae_lambda: float
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(advantages, returns) for the stored rollout; `values` [T, N] = V(stored observations),
        `last_values` = V(obs after the last step)."""
        return compute_gae(self.rewards, values, last_values, self.terminated, self.truncated, self.truncation_values, gamma, gae_lambda)


def compute_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    last_values: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
    truncation_values: torch.Tensor,
    gamma: float,
    gae_lambda: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalized advantage estimation over [T, N] tensors.

    delta_t = r_t + gamma * V_next_t - V(s_t), where V_next_t is
      0                        if the episode terminated at t (a true end: nothing follows),
      V(final observation)     if it was truncated at t (the time limit hid what would follow),
      V(s_{t+1})               otherwise (`last_values` after the last step).
    A_t = delta_t + gamma * lambda * A_{t+1}, with the recursion cut wherever the episode ended,
    because s_{t+1} then belongs to a new episode. Returns are A + V (the critic's targets).
    """
    if rewards.device.type != "cpu":  # the env outputs live on the training device: stay there
        advantages = _gae_loop(rewards, values, last_values, terminated, truncated, truncation_values, gamma, gae_lambda)
        return advantages, advantages + values
    # On the host, a loop over time on [N]-sized rows: numpy's per-op cost is a fraction of torch's,
    # which dominates at these sizes.
    device = values.device
    host = (x.detach().cpu().numpy() for x in (rewards, values, last_values, terminated, truncated, truncation_values))
    r, v, last_v, term, trunc, v_trunc = host
    advantages = _gae_loop(r, v, last_v.astype(r.dtype), term, trunc, v_trunc, gamma, gae_lambda)
    advantages_t = torch.from_numpy(advantages).to(device)
    return advantages_t, advantages_t + values


def _gae_loop(r, v, last_values, term, trunc, v_trunc, gamma: float, gae_lambda: float):
    """The recursion of `compute_gae` over [T, N] arrays, numpy or torch alike: the advantages."""
    where = torch.where if isinstance(r, torch.Tensor) else np.where
    advantages = r * 0.0  # zeros of r's type, dtype and device
    next_advantage = advantages[0]
    next_values = last_values
    discount = gamma * gae_lambda
    for t in reversed(range(r.shape[0])):
        bootstrap = where(term[t], 0.0, where(trunc[t], v_trunc[t], next_values))
        delta = r[t] + gamma * bootstrap - v[t]
        next_advantage = delta + discount * ~(term[t] | trunc[t]) * next_advantage
        advantages[t] = next_advantage
        next_values = v[t]
    return advantages
