"""Deterministic evaluation: the mean action, the normalizer frozen, raw (unscaled) rewards."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from ppo_control.envs import VecEnv, make_vec_env, reference_backend
from ppo_control.envs.base import MAX_EVAL_ENVS, diagnostic_means
from ppo_control.envs.randomization import Randomization
from ppo_control.rl.history import ObservationHistory
from ppo_control.rl.policy import ActorCritic

EVAL_SEED_OFFSET = 1_000_000  # evaluation envs never share seeds with training envs


def eval_randomization(cfg) -> Randomization | None:
    """What evaluation runs under: the nominal robot (None) unless eval.randomize asks for the run's
    own randomize.* settings."""
    return Randomization.from_config(cfg.randomize) if cfg.eval.randomize else None


def make_eval_envs(
    env_cfg, episodes: int, randomization: Randomization | None = None, privileged: bool = False, device: str = "cpu"
) -> VecEnv:
    """The evaluation env layout, shared by training-time and `evaluate` runs so their numbers agree.
    The task's reference backend, whichever backend trained the policy: Gymnasium for Gymnasium's
    tasks, envpool for Playground's robots (they exist only there), an MJX task on its own MJX env,
    simulated on `device` (it has no Gymnasium twin with the same observations). `privileged`: the observation carries the privileged group,
    as in training (the actor ignores it)."""
    n = min(episodes, MAX_EVAL_ENVS)
    return make_vec_env(
        env_cfg, num_envs=n, backend=reference_backend(env_cfg), randomization=randomization, privileged=privileged, device=device
    )


@dataclass
class Evaluation:
    """The episodes of one evaluation: raw returns, lengths, whether each ended by termination
    (a fall) rather than the time limit, and the mean of each per-step diagnostic the env reports
    (reward terms, tracking error) over every step of those episodes."""

    returns: np.ndarray
    lengths: np.ndarray
    terminated: np.ndarray
    diagnostics: dict[str, float] = field(default_factory=dict)

    def summary(self, prefix: str = "eval_") -> dict[str, float]:
        """The figures a metrics row or eval.json keeps: return (mean, std), length, fall rate and
        the diagnostics."""
        out = {
            f"{prefix}return": float(self.returns.mean()),
            f"{prefix}return_std": float(self.returns.std()),
            f"{prefix}length": float(self.lengths.mean()),
            f"{prefix}fall_rate": float(self.terminated.mean()),
        }
        out.update({f"{prefix}{key}": value for key, value in self.diagnostics.items()})
        return out


def evaluate_policy(
    policy: ActorCritic,
    envs: VecEnv,
    episodes: int,
    seed: int,
    device: torch.device | str = "cpu",
    deterministic: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """`evaluate_episodes`' (returns, lengths)."""
    evaluation = evaluate_episodes(policy, envs, episodes, seed, device, deterministic)
    return evaluation.returns, evaluation.lengths


def evaluate_episodes(
    policy: ActorCritic,
    envs: VecEnv,
    episodes: int,
    seed: int,
    device: torch.device | str = "cpu",
    deterministic: bool = True,
) -> Evaluation:
    """Run exactly `episodes` episodes of the policy.

    Deterministic: the mean action. Otherwise actions are sampled from the policy with a generator
    seeded from `seed`, so stochastic evaluations are reproducible too.

    Episodes are assigned to sub-envs up front (env i runs its own quota) rather than taking the
    first `episodes` to finish, which would bias the estimate toward short episodes. Steps of a
    sub-env past its quota count in nothing.
    """
    n = envs.num_envs
    quota = np.array([episodes // n + (i < episodes % n) for i in range(n)])
    returns: list[float] = []
    lengths: list[int] = []
    terminated: list[bool] = []
    sums: dict[str, float] = {}
    counted_steps = 0
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
            counting = finished < quota
            counted_steps += int(counting.sum())
            for key, values in result.diagnostics.items():
                sums[key] = sums.get(key, 0.0) + float(np.asarray(values)[counting].sum())
            done = result.terminated | result.truncated
            ended = np.flatnonzero(done)
            for k, i in enumerate(ended):
                if finished[i] < quota[i]:
                    returns.append(float(result.episode_returns[k]))
                    lengths.append(int(result.episode_lengths[k]))
                    terminated.append(bool(result.terminated[i]))
                finished[i] += 1
            obs = history.step(result.obs, done)
            state = policy.continue_state(state, done)
    diagnostics = diagnostic_means(sums, counted_steps)
    return Evaluation(np.asarray(returns), np.asarray(lengths), np.asarray(terminated, dtype=bool), diagnostics)
