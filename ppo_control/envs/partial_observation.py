"""Partially observed versions of the built-in MuJoCo tasks: joint positions only, no velocities.

    env:
      id: ppo_control.envs.partial_observation:positions_only
      kwargs: {task_id: Hopper-v5}

A real robot measures joint angles well and velocities poorly (noisy differences of encoder
readings); a policy that reads only positions must infer velocities from what it has seen, with
observation history or a recurrent network. This is the "-P" setting of the POMDP benchmarks of
Ni et al. (2022), "Recurrent model-free RL can be a strong baseline for many POMDPs".

Which elements are positions is read from the task's proven observation layout (contract.py), so
the cut is right for every task whose layout the contract knows and refused for any other.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from ppo_control.config.errors import UserError
from ppo_control.envs.mujoco_names import observation_element_names


def positions_only(task_id: str, **kwargs) -> gym.Env:
    """`task_id` (e.g. Hopper-v5) with its observation cut to the `qpos:` elements. The time limit
    is the outer one (the task file's env.max_episode_steps), as for any entry-point env."""
    env = gym.make(task_id, **kwargs).unwrapped  # the outer gym.make adds the time limit and checks
    names = observation_element_names(env)
    if names is None:
        env.close()
        raise UserError(f"positions_only: the observation layout of {task_id} is not known, so its positions cannot be picked")
    keep = [i for i, name in enumerate(names) if name.startswith("qpos:")]
    return PositionsOnly(env, keep)


class PositionsOnly(gym.ObservationWrapper):
    """Keeps the observation elements `keep` (in order)."""

    def __init__(self, env: gym.Env, keep: list[int]):
        super().__init__(env)
        self.keep = np.asarray(keep)
        space = env.observation_space
        self.observation_space = gym.spaces.Box(space.low[self.keep], space.high[self.keep], dtype=space.dtype)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return observation[self.keep]
