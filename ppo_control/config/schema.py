"""The training config's schema: its sections as OmegaConf structured-config dataclasses (names and
types), and every list of keys or choices the package reads.

The defaults and their one-line docs live in configs/train.yaml, so there is exactly one place a
default is written. The annotations stay `typing.Optional/List/Dict`: OmegaConf 2.3 reads them at
run time and does not recognize `X | None`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from omegaconf import MISSING, DictConfig, OmegaConf

from ppo_control.config.errors import UserError


class ConfigError(UserError):
    """A configuration the user wrote is invalid."""


DEFAULT_PRESET = "fast"  # the task files' own (wall-clock tuned) settings: no preset file applied

BACKENDS = ("gymnasium", "envpool", "mjx", "mujoco")  # env.backend (envs/registry.py builds each)
# policy.activation: each choice and the torch.nn module it builds (rl/policy.py)
ACTIVATIONS = {"tanh": "Tanh", "relu": "ReLU", "elu": "ELU", "gelu": "GELU", "silu": "SiLU"}
RNN_TYPES = ("none", "gru", "lstm")  # policy.rnn: the actor's recurrent layer (rl/policy.py's MEMORIES builds each but none)
# The randomize keys that scale a model's parameters per element ([low, high] factors): body, geom, dof, actuator.
RANDOMIZE_PHYSICS_KEYS = ("body_mass", "friction", "joint_damping", "actuator_gain")

CHOICES = {
    "device": ("auto", "cpu", "cuda"),
    "env.backend": BACKENDS,
    "env.vectorization": ("sync", "async"),
    "policy.activation": tuple(ACTIVATIONS),
    "policy.squash": ("none", "tanh"),
    "ppo.lr_schedule": ("constant", "linear", "adaptive"),
    "ppo.ent_schedule": ("constant", "linear"),
    "ppo.normalize_adv_over": ("minibatch", "batch"),
    "log.wandb_mode": ("offline", "online", "disabled"),
}

# What may change when a run is resumed: anything else would alter the optimization it continues.
# The one list: the error message and docs/training.md (checked by a test) are written from it.
RESUME_CHANGEABLE = ("total_steps", "device", "torch_threads", "dist_timeout", "env.num_threads", "eval.", "log.", "checkpoint.")
RESUME_CHANGEABLE_TEXT = ", ".join(f"{key}*" if key.endswith(".") else key for key in RESUME_CHANGEABLE)


@dataclass
class EnvConfig:
    backend: str = MISSING
    n_envs: int = MISSING
    vectorization: str = MISSING
    num_threads: int = MISSING
    id: Optional[str] = MISSING
    kwargs: Dict[str, Any] = MISSING
    max_episode_steps: Optional[int] = MISSING


@dataclass
class NormalizeConfig:
    obs: bool = MISSING
    obs_clip: float = MISSING
    reward: bool = MISSING
    reward_clip: float = MISSING


@dataclass
class PolicyConfig:
    hidden_sizes: List[int] = MISSING
    critic_hidden_sizes: Optional[List[int]] = MISSING
    activation: str = MISSING
    log_std_init: float = MISSING
    actor_obs: List[str] = MISSING
    critic_obs: List[str] = MISSING
    actor_history: int = MISSING
    critic_history: int = MISSING
    rnn: str = MISSING
    rnn_size: int = MISSING
    rnn_sequence_length: int = MISSING
    squash: str = MISSING


@dataclass
class PPOConfig:
    rollout_steps: int = MISSING
    epochs: int = MISSING
    minibatches: int = MISSING
    learning_rate: float = MISSING
    lr_schedule: str = MISSING
    gamma: float = MISSING
    gamma_end: Optional[float] = MISSING
    gae_lambda: float = MISSING
    gae_lambda_end: Optional[float] = MISSING
    end_at_fraction: float = MISSING
    clip_range: float = MISSING
    clip_value_loss: bool = MISSING
    ent_coef: float = MISSING
    ent_schedule: str = MISSING
    vf_coef: float = MISSING
    mirror_loss_coef: float = MISSING
    penalty_curriculum_start: float = MISSING
    penalty_curriculum_steps: int = MISSING
    max_grad_norm: Optional[float] = MISSING
    target_kl: Optional[float] = MISSING
    normalize_adv: bool = MISSING
    normalize_adv_over: str = MISSING
    compile: bool = MISSING


@dataclass
class EvalConfig:
    every_steps: int = MISSING
    episodes: int = MISSING
    video: bool = MISSING
    video_dir: str = MISSING
    video_episodes: int = MISSING
    video_width: int = MISSING
    video_height: int = MISSING
    video_fps: Optional[int] = MISSING
    video_overlay: bool = MISSING
    randomize: bool = MISSING


@dataclass
class RandomizeConfig:
    body_mass: Optional[List[float]] = MISSING
    friction: Optional[List[float]] = MISSING
    joint_damping: Optional[List[float]] = MISSING
    actuator_gain: Optional[List[float]] = MISSING
    obs_noise: float = MISSING
    action_noise: float = MISSING
    action_delay: Optional[List[int]] = MISSING
    push_velocity: float = MISSING
    push_interval: int = MISSING
    added_mass: Optional[List[float]] = MISSING
    com_offset: float = MISSING
    joint_friction: Optional[List[float]] = MISSING
    armature: Optional[List[float]] = MISSING
    init_pose: float = MISSING


@dataclass
class LogConfig:
    wandb: bool = MISSING
    wandb_mode: str = MISSING
    project: str = MISSING
    every_updates: int = MISSING
    line_seconds: float = MISSING
    tensorboard: bool = MISSING


@dataclass
class CheckpointConfig:
    every_steps: int = MISSING
    keep: int = MISSING
    save_last_seconds: float = MISSING


@dataclass
class TrainConfig:
    task: Optional[str] = MISSING
    preset: str = MISSING
    seed: int = MISSING
    total_steps: int = MISSING
    device: str = MISSING
    torch_threads: int = MISSING
    run_dir: Optional[str] = MISSING
    dist_timeout: float = MISSING
    resume: Optional[str] = MISSING
    init_from: Optional[str] = MISSING
    env: EnvConfig = field(default_factory=EnvConfig)
    normalize: NormalizeConfig = field(default_factory=NormalizeConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    randomize: RandomizeConfig = field(default_factory=RandomizeConfig)
    log: LogConfig = field(default_factory=LogConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)


def all_keys(cfg: DictConfig | None = None, prefix: str = "") -> list[str]:
    """Every leaf key of the schema, dotted (used for suggestions and docs tests)."""
    cfg = OmegaConf.structured(TrainConfig) if cfg is None else cfg
    keys = []
    for key in cfg.keys():
        node = cfg._get_node(key)
        if isinstance(node, DictConfig) and key != "kwargs":
            keys += all_keys(node, f"{prefix}{key}.")
        else:
            keys.append(f"{prefix}{key}")
    return keys


def batch_size(cfg: DictConfig) -> int:
    """Samples one process collects per update: env.n_envs x ppo.rollout_steps."""
    return int(cfg.env.n_envs) * int(cfg.ppo.rollout_steps)


def minibatch_size(cfg: DictConfig) -> int:
    """Samples per gradient step: the batch over ppo.minibatches (validation makes it divide)."""
    return batch_size(cfg) // int(cfg.ppo.minibatches)
