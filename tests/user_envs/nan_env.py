"""A user's env that goes bad: InvertedPendulum whose observations turn NaN after `nan_after` steps."""

import numpy as np
from gymnasium.envs.mujoco.inverted_pendulum_v5 import InvertedPendulumEnv


class NaNAfterEnv(InvertedPendulumEnv):
    def __init__(self, nan_after: int = 200, **kwargs):
        super().__init__(**kwargs)
        self.nan_after = nan_after
        self.steps_taken = 0

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        self.steps_taken += 1
        if self.steps_taken >= self.nan_after:
            obs = obs.copy()
            obs[1] = np.nan
        return obs, reward, terminated, truncated, info
