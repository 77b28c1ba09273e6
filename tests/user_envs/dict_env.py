"""A user's env with observation groups: InvertedPendulum returning a Dict of `policy` (the angle and
the velocities, as a robot would measure them) and its own `privileged` group (the cart position)."""

import gymnasium as gym
import numpy as np
from gymnasium.envs.mujoco.inverted_pendulum_v5 import InvertedPendulumEnv


class DictPendulumEnv(InvertedPendulumEnv):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.observation_space = gym.spaces.Dict(
            {"policy": gym.spaces.Box(-np.inf, np.inf, (3,), np.float64), "privileged": gym.spaces.Box(-np.inf, np.inf, (1,), np.float64)}
        )

    def _get_obs(self):
        qpos, qvel = self.data.qpos, self.data.qvel
        return {"policy": np.array([qpos[1], qvel[0], qvel[1]]), "privileged": np.array([qpos[0]])}
