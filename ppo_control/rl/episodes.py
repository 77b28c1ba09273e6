"""The one loop that steps a policy in a vector env: training's collectors (host and device),
evaluation, videos and sim2sim all run it.

Each step the policy acts on its input (the newest observation stacked with its history) and its
recurrent state, the envs step, the step and the episodes it ended (terminated, or truncated by a
time limit) are counted, and the sub-envs whose episode ended restart their stack and state. What
a caller keeps besides (training's storage, a video's frames, physics states) it takes from each
`Step` in its `on_step` hook.

On a device-resident env (`Capabilities.device_resident`: MJX) the loop hands the policy's device
tensors to `step_device` and back, and counts nothing itself (`episodes=None`): counting reads every
step's episode ends on the host, a stall per step; the device collector reads its rollout's episodes
once, at the end.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from ppo_control.envs import StepResult, VecEnv
from ppo_control.envs.base import diagnostic_means
from ppo_control.envs.success import PREFIX as SUCCESS_PREFIX
from ppo_control.rl.history import ObservationHistory
from ppo_control.rl.policy import ActorCritic

# (policy input, recurrent state) -> (action, next state): a policy's sample_action or
# deterministic_step, a seeded sampler, an export through `numpy_act`.
Act = Callable[[torch.Tensor, torch.Tensor | None], tuple[torch.Tensor, torch.Tensor | None]]


def numpy_act(policy: Callable[[np.ndarray], np.ndarray]) -> Act:
    """A policy that maps numpy observations to numpy actions and keeps its own state (an export)."""
    return lambda obs, state: (torch.from_numpy(policy(obs.numpy())), state)


class PolicyMemory:
    """What a vector policy carries from step to step: each sub-env's observation history (the
    policy's input) and recurrent state, both restarted where an episode ended. Without a policy
    (an export keeps its own) the input is the observation itself and the state None. With one
    frame of history the observations may be torch tensors (the device collector's)."""

    def __init__(self, policy: ActorCritic | None = None, num_envs: int = 0):
        self.policy = policy
        self.history = ObservationHistory(1 if policy is None else policy.history)
        self.state = None if policy is None else policy.initial_state(num_envs)

    @property
    def obs(self):
        """The policy's current input per sub-env."""
        return self.history.stacked

    def reset(self, obs):
        """Every sub-env starts an episode with `obs`; returns the policy's input."""
        if self.policy is not None:
            self.state = self.policy.initial_state(len(obs))
        return self.history.reset(obs)

    def advance(self, obs, done):
        """After a step: `obs` appended, the sub-envs where `done` starting a new episode with it."""
        if self.policy is not None:
            self.state = self.policy.continue_state(self.state, done)
        return self.history.step(obs, done)


class Episodes:
    """The episodes a loop counts and the per-step diagnostics over their steps. `quota[i]`: how
    many episodes sub-env i counts; its steps past them count in nothing, and the loop stops when
    every quota is met. None: every episode and step counts, without end. Returns and lengths are
    the env's own figures for each ended episode (its backend's accumulation)."""

    def __init__(self, quota: np.ndarray | None = None):
        self.quota = quota
        self.finished = None if quota is None else np.zeros(len(quota), dtype=np.int64)
        self.returns: list[float] = []
        self.lengths: list[int] = []
        self.terminated: list[bool] = []  # ended by termination (a fall) rather than the time limit
        self.envs: list[int] = []  # the sub-env each episode ran in
        self.sums: dict[str, float] = {}
        self.steps = 0  # sub-env steps counted
        self.end_sums: dict[str, float] = {}  # a success measure's values at the counted episodes' last steps

    @classmethod
    def spread(cls, episodes: int, num_envs: int) -> Episodes:
        """`episodes` shared among `num_envs` sub-envs up front, the first ones one more."""
        return cls(np.array([episodes // num_envs + (i < episodes % num_envs) for i in range(num_envs)]))

    @classmethod
    def first(cls, num_envs: int) -> Episodes:
        """The first episode of every sub-env."""
        return cls(np.ones(num_envs, dtype=np.int64))

    def counting(self) -> np.ndarray | None:
        """The sub-envs whose current episode counts (None: all of them)."""
        return None if self.quota is None else self.finished < self.quota

    def wanted(self) -> bool:
        return self.quota is None or bool((self.finished < self.quota).any())

    def add(self, result: StepResult, counting: np.ndarray | None) -> None:
        """Count a step of the sub-envs in `counting` (`counting()` before it) and the counted
        episodes it ended."""
        if counting is None:
            self._add_all(result)
            return
        self.steps += int(counting.sum())
        for key, values in result.diagnostics.items():
            self.sums[key] = self.sums.get(key, 0.0) + float(np.asarray(values)[counting].sum())
        ended = np.flatnonzero(result.terminated | result.truncated)
        for k, i in enumerate(ended):
            if counting[i]:
                self.returns.append(float(result.episode_returns[k]))
                self.lengths.append(int(result.episode_lengths[k]))
                self.terminated.append(bool(result.terminated[i]))
                self.envs.append(int(i))
            self.finished[i] += 1
        self._add_ends(result, ended[counting[ended]])

    def _add_all(self, result: StepResult) -> None:
        """`add` where everything counts, without a Python step per episode (training's many envs)."""
        self.steps += len(result.reward)
        for key, values in result.diagnostics.items():
            self.sums[key] = self.sums.get(key, 0.0) + float(values.sum())
        ended = np.flatnonzero(result.terminated | result.truncated)
        self.returns.extend(result.episode_returns.tolist())
        self.lengths.extend(result.episode_lengths.tolist())
        self.terminated.extend(result.terminated[ended].tolist())
        self.envs.extend(ended.tolist())
        self._add_ends(result, ended)

    def _add_ends(self, result: StepResult, ended: np.ndarray) -> None:
        """Where an episode ends is where a task's success is judged (did Go1 end standing?)."""
        for key, values in result.diagnostics.items():
            if key.startswith(SUCCESS_PREFIX) and len(ended):
                self.end_sums[key] = self.end_sums.get(key, 0.0) + float(np.asarray(values)[ended].sum())

    def diagnostics(self) -> dict[str, float]:
        """Each per-step diagnostic's mean over the counted steps, and each success measure's mean
        over the counted episodes' last steps (`<name>_at_end`)."""
        at_end = {f"{key}_at_end": value for key, value in diagnostic_means(self.end_sums, len(self.returns)).items()}
        return diagnostic_means(self.sums, self.steps) | at_end


@dataclass
class Step:
    """One step of the loop as `on_step` sees it: before it is counted and before the sub-envs
    whose episode ended restart their input and state."""

    t: int  # steps since `run` began
    obs: torch.Tensor  # the policy input the action was chosen from
    state: torch.Tensor | None  # the recurrent state it was chosen with
    action: torch.Tensor
    result: StepResult
    counting: np.ndarray | None  # the sub-envs whose step counts (None: all)


class EpisodeLoop:
    """Steps a policy in `envs` (the VecEnv protocol's reset and step): `act` maps the input and
    state that `memory` keeps per sub-env to actions, on `device`. `on_device`: the envs step on the
    device in torch tensors (`DeviceVecEnv`'s step_device), the memory holds device tensors."""

    def __init__(
        self,
        envs: VecEnv,
        act: Act,
        memory: PolicyMemory,
        device: torch.device | str = "cpu",
        on_device: bool = False,
        env_action: Callable[[torch.Tensor], torch.Tensor] | None = None,
    ):
        """`env_action`: what the envs receive for `act`'s action (a policy's squash of its
        sample; None: the action itself). `Step.action` stays `act`'s."""
        self.envs, self.act, self.memory, self.device = envs, act, memory, torch.device(device)
        self.on_device = on_device
        self.env_action = env_action

    def reset(self, seed: int) -> np.ndarray:
        """Start an episode in every sub-env (seeded from `seed`); returns the envs' observation."""
        obs = self.envs.reset(seed)
        self.memory.reset(obs)
        return obs

    def run(
        self, episodes: Episodes | None, max_steps: int | None = None, on_step: Callable[[Step], None] | None = None
    ) -> Episodes | None:
        """Step until `episodes` wants no more or `max_steps` steps are done, counting into
        `episodes` (returned; None: nothing is counted, `max_steps` ends the run); `on_step` sees
        each step first."""
        with torch.inference_mode():
            for t in range(max_steps) if max_steps is not None else itertools.count():
                if episodes is not None and not episodes.wanted():
                    break
                self._step(t, episodes, on_step)
        return episodes

    def _step(self, t: int, episodes: Episodes | None, on_step: Callable[[Step], None] | None) -> None:
        memory = self.memory
        obs = memory.obs if self.on_device else torch.from_numpy(memory.obs).to(self.device)
        state = memory.state
        action, memory.state = self.act(obs, state)
        sent = action if self.env_action is None else self.env_action(action)
        result = self.envs.step_device(sent) if self.on_device else self.envs.step(sent.cpu().numpy())
        step = Step(t, obs, state, action, result, None if episodes is None else episodes.counting())
        if on_step is not None:
            on_step(step)
        if episodes is not None:
            episodes.add(result, step.counting)
        memory.advance(result.obs, result.terminated | result.truncated)
