"""The rollout collector: drives the vector env with the policy and hands back one rollout.

It owns what lives between updates on the data path: the envs' current observations (stacked
with their history when the policy reads past frames), the reward scaler (its running return
follows the envs' episodes) and the preallocated storage. It knows nothing of files, ranks or the
optimizer; the trainer calls `collect()` once per update.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ppo_control.config.errors import NonFiniteError
from ppo_control.envs import StepResult, VecEnv
from ppo_control.rl.episodes import EpisodeLoop, Episodes, PolicyMemory, Step
from ppo_control.rl.normalization import RewardScaler
from ppo_control.rl.policy import ActorCritic
from ppo_control.rl.snapshot import to_numpy, to_tensors
from ppo_control.rl.storage import RolloutStorage


@dataclass
class Rollout:
    """One update's data. `storage` is reused by the next `collect()`: consume it before then."""

    storage: RolloutStorage
    last_values: torch.Tensor  # V(observation after the last step), per sub-env
    episode_returns: list[float] = field(default_factory=list)  # raw returns of the episodes that ended
    episode_lengths: list[int] = field(default_factory=list)
    diagnostics: dict[str, float] = field(default_factory=dict)  # each per-step diagnostic's mean over the rollout


class NonFiniteEnvOutput(NonFiniteError):
    """An env returned NaN/inf: which value, from which sub-env, at which step of the rollout."""

    def __init__(self, what: str, env_index: int, rollout_step: int):
        super().__init__(f"non-finite {what} from sub-env {env_index} at rollout step {rollout_step}")
        self.what, self.env_index, self.rollout_step = what, env_index, rollout_step


def all_finite(result: StepResult) -> bool:
    """Observations, rewards and (only where an episode ended, a separate array) final observations."""
    finite = np.isfinite(result.obs).all() and np.isfinite(result.reward).all()
    return finite and (result.final_obs is result.obs or np.isfinite(result.final_obs).all())


class RolloutCollector:
    """Steps `envs` for `num_steps` per `collect()`, acting with `policy` (its normalizer frozen)."""

    def __init__(
        self,
        envs: VecEnv,
        policy: ActorCritic,
        num_steps: int,
        gamma: float,
        reward_clip: float,
        scale_rewards: bool,
        device: torch.device | str = "cpu",
        sequence_length: int | None = None,
    ):
        """`sequence_length`: for a recurrent policy, the steps of a training sequence (its state is
        stored at each sequence's start)."""
        self.envs, self.policy, self.device = envs, policy, torch.device(device)
        # The reward PPO learns from, made from a step's result (None: the env's own). Episode
        # returns always report the env's own.
        self.training_reward: Callable[[StepResult], np.ndarray] | None = None
        sequences = (sequence_length, policy.memory.state_size) if policy.recurrent else (None, 0)
        self.storage = RolloutStorage(num_steps, envs.num_envs, policy.obs_dim, envs.info.action_dim, self.device, *sequences)
        self.reward_scaler = RewardScaler(envs.num_envs, gamma, reward_clip, enabled=scale_rewards)
        self.memory = PolicyMemory(policy, envs.num_envs)
        self.loop = EpisodeLoop(envs, policy.sample_action, self.memory, self.device, env_action=policy.env_action)

    @property
    def obs(self) -> np.ndarray | None:
        """The policy's current input per sub-env: the newest observation, stacked with its history."""
        return self.memory.obs

    @property
    def state(self) -> torch.Tensor | None:
        """The recurrent actor's state per sub-env (None: feed-forward)."""
        return self.memory.state

    def reset(self, seed: int) -> None:
        """Start a new episode in every sub-env (sub-env i seeded with seed + i)."""
        self.loop.reset(seed)

    def collect(self) -> Rollout:
        """Step the envs for one rollout, storing observations, actions, scaled rewards and episode ends.

        Per step only the actor runs (the sampled action is all the envs need); log-probs and values
        are computed afterwards for the whole batch (`ppo.prepare_batch`). The normalizer is not
        updated here: every observation of the rollout, including the final observations that
        truncated steps bootstrap from, is normalized with the same statistics.
        """
        storage, policy = self.storage, self.policy
        storage.truncation_values.zero_()
        episodes = self.loop.run(Episodes(), storage.num_steps, self._store)
        with torch.inference_mode():
            last_values = policy.value(policy.normalize(torch.from_numpy(self.obs).to(self.device)))
        return Rollout(storage, last_values, episodes.returns, episodes.lengths, episodes.diagnostics())

    def _store(self, step: Step) -> None:
        """Training's part of a step (the loop's `on_step`): the transition into storage, with the
        recurrent state at each sequence's start and the bootstrap value where a time limit hit."""
        storage, result, t = self.storage, step.result, step.t
        if step.state is not None and t % storage.sequence_length == 0:
            storage.sequence_states[t // storage.sequence_length] = step.state
        if not all_finite(result):
            raise self._nonfinite(result, t)
        storage.observations[t] = step.obs
        storage.actions[t] = step.action
        reward = result.reward if self.training_reward is None else self.training_reward(result)
        storage.rewards_np[t] = self.reward_scaler(reward, result.terminated | result.truncated)
        storage.terminated_np[t] = result.terminated
        storage.truncated_np[t] = result.truncated
        if result.truncated.any():
            self._store_truncation_values(t, result)

    def _store_truncation_values(self, t: int, result: StepResult) -> None:
        """V(final observation) of the sub-envs whose time limit ended their episode at step t, read
        with the history that episode had."""
        index = np.flatnonzero(result.truncated)
        final_obs = torch.from_numpy(self.memory.history.with_final(result.final_obs, index)).to(self.device)
        values = self.policy.value(self.policy.normalize(final_obs))
        self.storage.truncation_values[t, torch.from_numpy(index).to(self.device)] = values

    @staticmethod
    def _nonfinite(result: StepResult, t: int) -> NonFiniteEnvOutput:
        bad_obs = ~np.isfinite(result.obs).all(axis=1) | ~np.isfinite(result.final_obs).all(axis=1)
        bad_reward = ~np.isfinite(result.reward)
        what = "observation" if bad_obs.any() else "reward"
        return NonFiniteEnvOutput(what, int(np.flatnonzero(bad_obs | bad_reward)[0]), t + 1)

    # --- state for checkpoints ------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything to continue these episodes exactly (env state is None where the backend
        cannot capture it), as tensors and plain values for the safe checkpoint loader."""
        env_state = self.envs.get_state()
        return {
            "obs": torch.from_numpy(self.obs.copy()),
            "rnn_state": None if self.state is None else self.state.detach().cpu().clone(),
            "env_state": None if env_state is None else to_tensors(env_state),
            "reward_scaler": self.reward_scaler.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> bool:
        """Restore `state_dict()`'s result; returns False (reward scale restored, episodes left as
        they are) when the saved state holds no env state to continue from."""
        self.reward_scaler.load_state_dict(state["reward_scaler"])
        if state.get("env_state") is None:
            return False
        self.envs.set_state(to_numpy(state["env_state"]))
        self.memory.history.load(state["obs"].numpy().copy())
        if self.state is not None:
            self.memory.state = state["rnn_state"].to(self.device)
        return True
