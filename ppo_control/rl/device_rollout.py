"""The rollout collector for envs that simulate on the training device (`Capabilities.device_resident`:
the `DeviceVecEnv` protocol of envs/base.py; env.backend=mjx).

The same rollout as collector.RolloutCollector, with nothing crossing to the host while it runs:
observations, actions, rewards, episode ends, the reward scaler's running returns and the
truncation bootstrap all stay device tensors. What the host collector does per step with a host
sync (checking for NaN, evaluating V(final observation) where a time limit hit) is done once per
rollout, batched: the final observations are kept for the whole rollout and the critic reads them
in one pass. The episode statistics come back to the host once per rollout too.

It runs episodes.EpisodeLoop on the device (`on_device`), counting nothing per step; its `_store`
hook writes each step into the device storage.
"""

from __future__ import annotations

from typing import Any

import torch

from ppo_control.envs.base import DeviceVecEnv
from ppo_control.rl.episodes import EpisodeLoop, PolicyMemory, Step
from ppo_control.rl.normalization import DeviceRewardScaler
from ppo_control.rl.policy import ActorCritic
from ppo_control.rl.rollout import NonFiniteEnvOutput, Rollout
from ppo_control.rl.snapshot import to_numpy, to_tensors
from ppo_control.rl.storage import RolloutStorage


class DeviceRolloutCollector:
    """Steps device-resident `envs` for `num_steps` per `collect()`, acting with `policy` (its
    normalizer frozen). The interface of RolloutCollector."""

    def __init__(
        self,
        envs: DeviceVecEnv,
        policy: ActorCritic,
        num_steps: int,
        gamma: float,
        reward_clip: float,
        scale_rewards: bool,
        device: torch.device | str = "cpu",
        sequence_length: int | None = None,
    ):
        self.envs, self.policy, self.device = envs, policy, torch.device(device)
        n, obs_dim = envs.num_envs, policy.obs_dim
        sequences = (sequence_length, policy.memory.state_size) if policy.recurrent else (None, 0)
        self.storage = RolloutStorage(num_steps, n, obs_dim, envs.info.action_dim, self.device, *sequences, env_outputs_on_device=True)
        self.final_observations = torch.zeros(num_steps, n, obs_dim, device=self.device)
        self.ended_returns = torch.zeros(num_steps, n, device=self.device)
        self.ended_lengths = torch.zeros(num_steps, n, dtype=torch.int32, device=self.device)
        self.reward_scaler = DeviceRewardScaler(n, gamma, reward_clip, enabled=scale_rewards, device=self.device)
        self.memory = PolicyMemory(policy, n)  # one frame of history: the backend refuses more (check_config)
        self.loop = EpisodeLoop(envs, policy.sample_action, self.memory, self.device, on_device=True, env_action=policy.env_action)

    @property
    def obs(self) -> torch.Tensor | None:
        """The policy's current input per sub-env."""
        return self.memory.obs

    @property
    def state(self) -> torch.Tensor | None:
        """The recurrent actor's state per sub-env (None: feed-forward)."""
        return self.memory.state

    def reset(self, seed: int) -> None:
        """Start a new episode in every sub-env (seeded from `seed`)."""
        self.memory.reset(self.envs.reset_device(seed))

    def collect(self) -> Rollout:
        storage, policy = self.storage, self.policy
        self.loop.run(None, max_steps=storage.num_steps, on_step=self._store)
        with torch.inference_mode():
            self._check_finite()
            # V(final observation) where a time limit ended the episode, for the whole rollout at once.
            final_values = policy.value(policy.normalize(self.final_observations))
            storage.truncation_values.copy_(torch.where(storage.truncated, final_values, 0.0))
            last_values = policy.value(policy.normalize(self.obs))
            ended = storage.terminated | storage.truncated
            returns, lengths = self.ended_returns[ended].tolist(), self.ended_lengths[ended].tolist()
        return Rollout(storage, last_values, returns, lengths)

    def _store(self, step: Step) -> None:
        """The transition of `step` into the device storage (nothing crosses to the host)."""
        storage, out, t = self.storage, step.result, step.t
        if step.state is not None and t % storage.sequence_length == 0:
            storage.sequence_states[t // storage.sequence_length] = step.state
        storage.observations[t] = step.obs
        storage.actions[t] = step.action
        storage.rewards[t] = self.reward_scaler(out.reward, out.terminated | out.truncated)
        storage.terminated[t] = out.terminated
        storage.truncated[t] = out.truncated
        self.final_observations[t] = out.final_obs
        self.ended_returns[t] = out.episode_return
        self.ended_lengths[t] = out.episode_length

    def _check_finite(self) -> None:
        """One check per rollout (a per-step one would stall the device every step); the first
        non-finite observation or reward is reported with its sub-env and step."""
        storage = self.storage
        next_obs = torch.cat([storage.observations[1:], self.obs.unsqueeze(0)])  # what step t returned
        bad_obs = ~torch.isfinite(next_obs).all(-1) | ~torch.isfinite(self.final_observations).all(-1)
        bad_reward = ~torch.isfinite(storage.rewards)
        bad = bad_obs | bad_reward
        if bool(bad.any()):
            t, i = (int(x) for x in torch.nonzero(bad)[0])
            raise NonFiniteEnvOutput("observation" if bool(bad_obs[t, i]) else "reward", i, t + 1)

    # --- state for checkpoints ------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "obs": self.obs.detach().cpu().clone(),
            "rnn_state": None if self.state is None else self.state.detach().cpu().clone(),
            "env_state": to_tensors(self.envs.get_state()),
            "reward_scaler": self.reward_scaler.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> bool:
        self.reward_scaler.load_state_dict(state["reward_scaler"])
        if state.get("env_state") is None:
            return False
        self.envs.set_state(to_numpy(state["env_state"]))
        self.memory.history.load(state["obs"].to(self.device))
        if self.state is not None:
            self.memory.state = state["rnn_state"].to(self.device)
        return True
