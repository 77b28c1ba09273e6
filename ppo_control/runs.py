"""The run directory: where a run lives, creating it safely, and loading a finished one back."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf

from ppo_control.checkpoint import CheckpointError, load_checkpoint
from ppo_control.envs import EnvInfo
from ppo_control.errors import UserError
from ppo_control.policy import ActorCritic

CONFIG_FILE = "config.yaml"
CHECKPOINT_DIR = "checkpoints"
LAST_CHECKPOINT = "last.pt"


def default_run_dir(cfg: DictConfig) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("runs") / str(cfg.task) / f"{stamp}-s{cfg.seed}"


def claim_run_dir(cfg: DictConfig) -> Path:
    """Decide the run directory, refusing one that already holds anything (checked before any work)."""
    run_dir = Path(cfg.run_dir) if cfg.run_dir else default_run_dir(cfg)
    if run_dir.exists() and (not run_dir.is_dir() or any(run_dir.iterdir())):
        raise UserError(f"run_dir '{run_dir}' already exists and is not empty; choose another run_dir (nothing was changed)")
    cfg.run_dir = str(run_dir)
    return run_dir


def prepare_run_dir(cfg: DictConfig) -> Path:
    """Create the run directory (already claimed) and write the resolved config.yaml."""
    run_dir = Path(cfg.run_dir)
    try:
        (run_dir / CHECKPOINT_DIR).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create run_dir '{run_dir}': {exc.strerror}") from None
    OmegaConf.save(cfg, run_dir / CONFIG_FILE, resolve=True)
    return run_dir


def build_policy(cfg: DictConfig, info: EnvInfo) -> ActorCritic:
    return ActorCritic(
        obs_dim=info.obs_dim,
        action_dim=info.action_dim,
        action_low=info.action_low,
        action_high=info.action_high,
        hidden_sizes=list(cfg.policy.hidden_sizes),
        activation=cfg.policy.activation,
        log_std_init=cfg.policy.log_std_init,
        normalize_obs=cfg.normalize.obs,
        obs_clip=cfg.normalize.obs_clip,
    )


def env_info_to_dict(info: EnvInfo) -> dict[str, Any]:
    return {
        "obs_dim": info.obs_dim,
        "action_dim": info.action_dim,
        "action_low": info.action_low.tolist(),
        "action_high": info.action_high.tolist(),
        "max_episode_steps": info.max_episode_steps,
    }


def env_info_from_dict(data: dict[str, Any]) -> EnvInfo:
    return EnvInfo(
        obs_dim=int(data["obs_dim"]),
        action_dim=int(data["action_dim"]),
        action_low=np.asarray(data["action_low"], dtype=np.float32),
        action_high=np.asarray(data["action_high"], dtype=np.float32),
        max_episode_steps=data["max_episode_steps"],
    )


@dataclass
class LoadedRun:
    run_dir: Path
    checkpoint_path: Path
    cfg: DictConfig
    state: dict[str, Any]
    policy: ActorCritic
    env_info: EnvInfo

    @property
    def name(self) -> str:
        return self.run_dir.name


def load_run(run_dir: str | Path, checkpoint: str | Path | None = None) -> LoadedRun:
    """Load a run's config and a checkpoint (default checkpoints/last.pt) into a frozen policy."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UserError(f"run directory '{run_dir}' does not exist")
    if checkpoint is None:
        path = run_dir / CHECKPOINT_DIR / LAST_CHECKPOINT
        if not path.is_file():
            raise CheckpointError(f"'{run_dir}' holds no checkpoint ({CHECKPOINT_DIR}/{LAST_CHECKPOINT} is missing); is it a ppo_control run directory?")
    else:
        path = Path(checkpoint)
        if not path.is_file() and (run_dir / CHECKPOINT_DIR / path).is_file():
            path = run_dir / CHECKPOINT_DIR / path  # checkpoint=step_0000200000.pt
    state = load_checkpoint(path)
    try:
        cfg = OmegaConf.create(state["config"])
        info = env_info_from_dict(state["env_info"])
        policy = build_policy(cfg, info)
        policy.load_state_dict(state["policy"])
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(f"checkpoint '{path}' does not match its own config ({first})") from None
    policy.eval()
    for parameter in policy.parameters():
        parameter.requires_grad_(False)
    return LoadedRun(run_dir, path, cfg, state, policy, info)
