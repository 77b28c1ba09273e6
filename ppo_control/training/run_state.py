"""A training run's state as one checkpoint dict, and back: capture and restore.

What a checkpoint holds: the config, the policy (weights and normalizer statistics), the optimizer,
the counters and recent episode statistics (`Progress`), and per rank what differs between ranks
(RNG states, the collector's env state, observations and reward scaler). The top level holds rank
0's own state, so a single process resumes from a multi-rank checkpoint too.
"""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from ppo_control.config.errors import UserError
from ppo_control.envs import EnvInfo
from ppo_control.rl.distributed import Distributed
from ppo_control.rl.rollout import RolloutCollector
from ppo_control.rl.snapshot import capture_rng_state, restore_rng_state
from ppo_control.runs.directory import env_info_to_dict

EPISODE_WINDOW = 20  # episode_return/length in metrics are the mean of this many recent episodes


@dataclass
class Progress:
    """Counters of a run, identical on every rank."""

    step: int = 0  # environment steps summed over all ranks
    update: int = 0
    episodes: int = 0
    recent_returns: collections.deque = field(default_factory=lambda: collections.deque(maxlen=EPISODE_WINDOW))
    recent_lengths: collections.deque = field(default_factory=lambda: collections.deque(maxlen=EPISODE_WINDOW))
    best_eval_return: float | None = None  # the best evaluation so far (checkpoints/best.pt holds that policy)
    best_step: int | None = None

    def record_episodes(self, returns: list[float], lengths: list[int]) -> None:
        self.recent_returns.extend(returns)
        self.recent_lengths.extend(lengths)
        self.episodes += len(returns)

    def record_evaluation(self, eval_return: float) -> bool:
        """Whether `eval_return` (this step's evaluation) is the best so far; it is then recorded."""
        if not math.isfinite(eval_return) or (self.best_eval_return is not None and not eval_return > self.best_eval_return):
            return False
        self.best_eval_return, self.best_step = float(eval_return), self.step
        return True

    def mean_return(self) -> float | None:
        return float(np.mean(self.recent_returns)) if self.recent_returns else None

    def mean_length(self) -> float | None:
        return float(np.mean(self.recent_lengths)) if self.recent_lengths else None

    def state_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "update": self.update,
            "episodes": self.episodes,
            "recent_returns": list(self.recent_returns),
            "recent_lengths": list(self.recent_lengths),
            "best_eval_return": self.best_eval_return,
            "best_step": self.best_step,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.step, self.update, self.episodes = int(state["step"]), int(state["update"]), int(state["episodes"])
        self.recent_returns.extend(state["recent_returns"])
        self.recent_lengths.extend(state["recent_lengths"])
        self.best_eval_return, self.best_step = state.get("best_eval_return"), state.get("best_step")  # None in older runs


def rank_state(generator: torch.Generator, collector: RolloutCollector) -> dict[str, Any]:
    """What differs between ranks: their RNGs, envs and reward scalers."""
    return {"rng": capture_rng_state(generator), **collector.state_dict()}


def capture(
    cfg: DictConfig,
    policy: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    progress: Progress,
    info: EnvInfo,
    dist: Distributed,
    own_rank_state: dict[str, Any],
) -> dict[str, Any]:
    """The whole run. Collective: every rank must call it at the same point."""
    ranks = dist.all_gather_object(own_rank_state)
    return {
        "config": OmegaConf.to_container(cfg, resolve=True),
        "policy": policy.state_dict(),
        "optimizer": optimizer.state_dict(),
        **progress.state_dict(),
        "env_info": env_info_to_dict(info),
        "world_size": dist.world_size,
        **ranks[0],
        **({"ranks": ranks} if dist.enabled else {}),
    }


def check_compatible(state: dict[str, Any], info: EnvInfo, env_id: str) -> None:
    saved = state["env_info"]
    if (saved["obs_dim"], saved["action_dim"]) != (info.obs_dim, info.action_dim):
        raise UserError(
            f"checkpoint was trained with obs_dim={saved['obs_dim']}, action_dim={saved['action_dim']} but "
            f"{env_id} has obs_dim={info.obs_dim}, action_dim={info.action_dim}"
        )


def restore_rank_state(state: dict[str, Any], dist: Distributed, generator: torch.Generator, collector: RolloutCollector) -> str:
    """Restore this rank's RNGs and collector from a checkpoint, as far as they can be. Returns
    "exact"; "other_world_size" (written by another number of ranks: only rank 0's reward scale is
    taken); or "no_env_state" (the env backend could not save its episodes). In the last two the
    caller must start new episodes; what happened is said once."""
    if int(state.get("world_size", 1)) != dist.world_size:
        if dist.is_main:
            print(
                f"resume: the checkpoint comes from {int(state.get('world_size', 1))} rank(s), this run has {dist.world_size}: "
                "every sub-env starts a new episode, RNGs are reseeded and rank 0's reward scale is used",
                flush=True,
            )
        collector.reward_scaler.load_state_dict(state["reward_scaler"])
        return "other_world_size"
    mine = state["ranks"][dist.rank] if dist.enabled else state
    restore_rng_state(mine["rng"], generator)
    if collector.load_state_dict(mine):
        return "exact"
    print(
        "resume: this env backend cannot save its state; every sub-env starts a new episode "
        "(the resumed run is not bit-identical to an uninterrupted one)",
        flush=True,
    )
    return "no_env_state"
