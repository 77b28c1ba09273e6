"""Deterministic evaluation: the mean action, the normalizer frozen, raw (unscaled) rewards."""

from __future__ import annotations

import numpy as np
import torch

from ppo_control.envs import VecEnv, make_vec_env
from ppo_control.history import ObservationHistory
from ppo_control.policy import ActorCritic
from ppo_control.randomization import Randomization

MAX_EVAL_ENVS = 16
EVAL_SEED_OFFSET = 1_000_000  # evaluation envs never share seeds with training envs


def eval_randomization(cfg) -> Randomization | None:
    """What evaluation runs under: the nominal robot (None) unless eval.randomize asks for the run's
    own randomize.* settings."""
    return Randomization.from_config(cfg.randomize) if cfg.eval.randomize else None


def make_eval_envs(
    env_cfg, episodes: int, randomization: Randomization | None = None, privileged: bool = False, device: str = "cpu"
) -> VecEnv:
    """The evaluation env layout, shared by training-time and `evaluate` runs so their numbers agree.
    Gymnasium, whether envpool or Gymnasium trained the policy: the reference implementation of the
    task. An MJX task is evaluated on its own MJX env, simulated on `device` (it has no Gymnasium
    twin with the same observations). `privileged`: the observation carries the privileged group,
    as in training (the actor ignores it)."""
    n = min(episodes, MAX_EVAL_ENVS)
    backend = "mjx" if env_cfg.backend == "mjx" else "gymnasium"
    return make_vec_env(env_cfg, num_envs=n, backend=backend, randomization=randomization, privileged=privileged, device=device)


def evaluate_policy(
    policy: ActorCritic,
    envs: VecEnv,
    episodes: int,
    seed: int,
    device: torch.device | str = "cpu",
    deterministic: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Run exactly `episodes` episodes and return their (returns, lengths).

    Deterministic: the mean action. Otherwise actions are sampled from the policy with a generator
    seeded from `seed`, so stochastic evaluations are reproducible too.

    Episodes are assigned to sub-envs up front (env i runs its own quota) rather than taking the
    first `episodes` to finish, which would bias the estimate toward short episodes.
    """
    n = envs.num_envs
    quota = np.array([episodes // n + (i < episodes % n) for i in range(n)])
    returns: list[float] = []
    lengths: list[int] = []
    finished = np.zeros(n, dtype=np.int64)
    generator = torch.Generator(device=device).manual_seed(seed)
    history = ObservationHistory(policy.history)
    obs = history.reset(envs.reset(seed))
    state = policy.initial_state(n)
    with torch.inference_mode():
        while (finished < quota).any():
            obs_t = torch.from_numpy(obs).to(device)
            if deterministic:
                action, state = policy.deterministic_step(obs_t, state)
            else:
                mean, state = policy.action_mean(obs_t, state)
                action = mean + policy.log_std.exp() * torch.randn(mean.shape, generator=generator, device=device)
            result = envs.step(action.cpu().numpy())
            done = result.terminated | result.truncated
            ended = np.flatnonzero(done)
            for k, i in enumerate(ended):
                if finished[i] < quota[i]:
                    returns.append(float(result.episode_returns[k]))
                    lengths.append(int(result.episode_lengths[k]))
                finished[i] += 1
            obs = history.step(result.obs, done)
            state = policy.continue_state(state, done)
    return np.asarray(returns), np.asarray(lengths)
