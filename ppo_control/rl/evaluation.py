"""Deterministic evaluation: the mean action, the normalizer frozen, raw (unscaled) rewards."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from ppo_control.envs import VecEnv, make_vec_env, reference_backend
from ppo_control.envs.base import MAX_EVAL_ENVS
from ppo_control.envs.randomization import Randomization
from ppo_control.rl.episodes import Act, EpisodeLoop, Episodes, PolicyMemory
from ppo_control.rl.policy import ActorCritic

EVAL_SEED_OFFSET = 1_000_000  # evaluation envs never share seeds with training envs


def eval_randomization(eval_cfg, randomize_cfg) -> Randomization | None:
    """What evaluation runs under: the nominal robot (None) unless eval.randomize asks for the run's
    own randomize.* settings."""
    return Randomization.from_config(randomize_cfg) if eval_cfg.randomize else None


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

    @classmethod
    def of(cls, episodes: Episodes, by_env: bool = False) -> Evaluation:
        """The counted `episodes` in the order they ended, or by sub-env (`by_env`, for one episode each)."""
        order = np.argsort(episodes.envs, kind="stable") if by_env else slice(None)
        terminated = np.asarray(episodes.terminated, dtype=bool)
        return cls(np.asarray(episodes.returns)[order], np.asarray(episodes.lengths)[order], terminated[order], episodes.diagnostics())

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

    Episodes are assigned to sub-envs up front (env i runs its own quota, `Episodes.spread`) rather
    than taking the first `episodes` to finish, which would bias the estimate toward short
    episodes. Steps of a sub-env past its quota count in nothing.
    """
    act = policy.deterministic_step if deterministic else seeded_sampler(policy, seed, device)
    return evaluate_act(envs, act, PolicyMemory(policy, envs.num_envs), episodes, seed, device)


def evaluate_act(envs: VecEnv, act: Act, memory: PolicyMemory, episodes: int, seed: int, device: torch.device | str = "cpu") -> Evaluation:
    """`evaluate_episodes` for any `act` (an export's, `numpy_act`, with `PolicyMemory()`): the same
    seeds and the same episodes per sub-env, so its numbers compare with `evaluate`'s."""
    loop = EpisodeLoop(envs, act, memory, device)
    loop.reset(seed)
    return Evaluation.of(loop.run(Episodes.spread(episodes, envs.num_envs)))


def seeded_sampler(policy: ActorCritic, seed: int, device: torch.device | str) -> Act:
    """Actions sampled from the policy with a generator of its own, seeded from `seed`."""
    generator = torch.Generator(device=device).manual_seed(seed)

    def act(obs: torch.Tensor, state: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
        mean, state = policy.action_mean(obs, state)
        sample = mean + policy.log_std.exp() * torch.randn(mean.shape, generator=generator, device=device)
        return policy.env_action(sample), state

    return act
