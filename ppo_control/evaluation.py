"""Deterministic evaluation: the mean action, the normalizer frozen, raw (unscaled) rewards."""

from __future__ import annotations

import numpy as np
import torch

from ppo_control.envs import VecEnv
from ppo_control.policy import ActorCritic


def evaluate_policy(policy: ActorCritic, envs: VecEnv, episodes: int, seed: int, device: torch.device | str = "cpu") -> tuple[np.ndarray, np.ndarray]:
    """Run exactly `episodes` episodes and return their (returns, lengths).

    Episodes are assigned to sub-envs up front (env i runs its own quota) rather than taking the
    first `episodes` to finish, which would bias the estimate toward short episodes.
    """
    n = envs.num_envs
    quota = np.array([episodes // n + (i < episodes % n) for i in range(n)])
    returns: list[float] = []
    lengths: list[int] = []
    finished = np.zeros(n, dtype=np.int64)
    obs = envs.reset(seed)
    with torch.inference_mode():
        while (finished < quota).any():
            action = policy.deterministic_action(torch.from_numpy(obs).to(device))
            result = envs.step(action.cpu().numpy())
            ended = np.flatnonzero(result.terminated | result.truncated)
            for k, i in enumerate(ended):
                if finished[i] < quota[i]:
                    returns.append(float(result.episode_returns[k]))
                    lengths.append(int(result.episode_lengths[k]))
                finished[i] += 1
            obs = result.obs
    return np.asarray(returns), np.asarray(lengths)
