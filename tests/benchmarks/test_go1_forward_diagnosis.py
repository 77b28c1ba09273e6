"""go1_forward_diagnosis: which joints' deterministic actions sit at the action bounds."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch

from benchmarks.robots.go1_forward_diagnosis import action_summary, rollout


class StillEnv:
    """Two sub-envs whose observation never changes and whose episodes never end."""

    num_envs = 2

    def reset(self, seed):
        return np.zeros((2, 6), dtype=np.float32)

    def step(self, actions):
        zeros = np.zeros(2, dtype=bool)
        return SimpleNamespace(obs=np.zeros((2, 6), dtype=np.float32), final_obs=None, reward=np.ones(2), terminated=zeros, truncated=zeros)


class FixedMeanPolicy:
    """A clipping Gaussian policy whose mean is `mean` whatever it observes."""

    def __init__(self, mean):
        self.mean = torch.tensor(mean)
        self.action_low, self.action_high = -torch.ones(len(mean)), torch.ones(len(mean))
        self.log_std = torch.full((len(mean),), -1.0)

    def sample_action(self, obs):
        return self.mean.expand(len(obs), -1) + torch.randn(len(obs), len(self.mean)) * self.log_std.exp(), None

    def deterministic_step(self, obs):
        return torch.clamp(self.mean.expand(len(obs), -1), self.action_low, self.action_high), None

    def env_action(self, sample):
        return sample

    def normalize(self, obs):
        return obs

    def value(self, obs):
        return torch.zeros(len(obs))


def test_joints_whose_mean_left_the_bounds_count_at_the_bound_every_step():
    policy = FixedMeanPolicy([3.0, -1.5, 0.999, 0.5])  # beyond, beyond, within 1% of the range, inside
    where = SimpleNamespace(commanded=lambda obs: obs[:, :3], measured=lambda obs: obs[:, 3:])
    record, _ = rollout(policy, StillEnv(), where, steps=5, seed=0, value_scale=1.0)
    summary = action_summary(record, policy)
    assert summary["at_bound_per_joint"] == [1.0, 1.0, 1.0, 0.0]
    assert summary["at_bound_share"] == 0.75
    assert summary["log_std_mean"] == -1.0
