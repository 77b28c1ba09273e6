"""Configuration: compose configs/train.yaml < tasks/<task>.yaml < command line, then validate.

The dataclasses below are the schema (names and types); the defaults and their one-line docs live
in configs/train.yaml, so there is exactly one place a default is written.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import functools
import inspect
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

from omegaconf import MISSING, DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ppo_control.config.errors import UserError
from ppo_control.config.resources import BACKENDS_DIR, CONFIG_DIR, PRESETS_DIR, REGIMES_DIR, TASKS_DIR

DEFAULT_PRESET = "fast"  # the task files' own (wall-clock tuned) settings: no preset file applied


class ConfigError(UserError):
    """A configuration the user wrote is invalid."""


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


# Arguments of the commands other than train (their dataclasses live here, with the schema, so
# annotations resolve however the command module is run).
@dataclass
class EvaluateRandomizeArgs:
    """The training section's keys; None = not given (off, or the run's own with eval.randomize=true)."""

    body_mass: Optional[List[float]] = None
    friction: Optional[List[float]] = None
    joint_damping: Optional[List[float]] = None
    actuator_gain: Optional[List[float]] = None
    obs_noise: Optional[float] = None
    action_noise: Optional[float] = None
    action_delay: Optional[List[int]] = None
    push_velocity: Optional[float] = None
    push_interval: Optional[int] = None
    added_mass: Optional[List[float]] = None
    com_offset: Optional[float] = None
    joint_friction: Optional[List[float]] = None
    armature: Optional[List[float]] = None
    init_pose: Optional[float] = None


@dataclass
class EvaluateEvalArgs:
    randomize: Optional[bool] = None  # true: start from the run's randomize.* (not the nominal robot); default: the run's eval.randomize


@dataclass
class EvaluateArgs:
    run: str = MISSING  # the run directory
    checkpoint: Optional[str] = None  # a file, or a name in <run>/checkpoints; default last.pt
    episodes: int = 10  # episodes to roll out (at most 16 run at once)
    seed: Optional[int] = None  # default: the run's own evaluation seed (reproduces its eval_return)
    video: bool = False  # also record videos of the policy (a separate rollout, same seed)
    video_dir: Optional[str] = None  # default: the run's eval.video_dir
    deterministic: bool = True  # true: the mean action; false: actions sampled from the policy, seeded
    eval: EvaluateEvalArgs = field(default_factory=EvaluateEvalArgs)
    randomize: EvaluateRandomizeArgs = field(default_factory=EvaluateRandomizeArgs)


@dataclass
class RobustnessArgs:
    run: str = MISSING  # the run directory
    checkpoint: Optional[str] = None  # a file, or a name in <run>/checkpoints; default last.pt
    episodes: int = 5  # per cell
    seed: Optional[int] = None  # default: the run's own evaluation seed
    mass: List[float] = field(default_factory=lambda: [0.5, 0.75, 1.0, 1.25, 1.5])  # body mass scales (rows)
    friction: List[float] = field(default_factory=lambda: [0.5, 0.75, 1.0, 1.25, 1.5])  # friction scales (columns)
    delay: List[int] = field(default_factory=lambda: [0, 1, 2, 3])  # action delays, at nominal mass and friction


@dataclass
class Sim2SimArgs:
    run: Optional[str] = None  # the run directory: its export/policy.pt, config (seed, task options) and eval.json
    export: Optional[str] = None  # an exported file (.pt TorchScript or .onnx); default <run>/export/policy.pt
    episodes: int = 16  # one per robot, all stepped together
    seed: Optional[int] = None  # default: the run's own evaluation seed (the evaluation's episodes)
    latency: int = 0  # control periods between an observation and its action reaching the motors
    friction: float = 1.0  # scale of every geom's sliding friction
    added_mass: float = 0.0  # kg added to the robot's base
    kp_scale: float = 1.0  # the motors' gain against the export's robot.kp
    video: bool = False  # also record the first robot's episode (<out>.mp4)
    out: Optional[str] = None  # default: <run>/sim2sim/sim2sim.json (beside the export without run=)


@dataclass
class ExportArgs:
    run: str = MISSING  # the run directory
    format: str = "torchscript"  # torchscript | onnx
    out: Optional[str] = None  # default: <run>/export/policy.pt or policy.onnx
    checkpoint: Optional[str] = None  # a file, or a name in <run>/checkpoints; default last.pt
    overwrite: bool = False  # replace an existing file at `out`


CHOICES = {
    "device": ("auto", "cpu", "cuda"),
    "env.backend": ("gymnasium", "envpool", "mjx", "mujoco"),
    "env.vectorization": ("sync", "async"),
    "policy.activation": ("tanh", "relu", "elu", "gelu", "silu"),
    "ppo.lr_schedule": ("constant", "linear", "adaptive"),
    "ppo.ent_schedule": ("constant", "linear"),
    "ppo.normalize_adv_over": ("minibatch", "batch"),
    "log.wandb_mode": ("offline", "online", "disabled"),
}


def available_tasks() -> list[str]:
    return sorted(p.stem for p in TASKS_DIR.glob("*.yaml"))


def available_presets() -> list[str]:
    return [DEFAULT_PRESET, *sorted(p.stem for p in PRESETS_DIR.glob("*.yaml"))]


def parse_overrides(argv: list[str]) -> list[str]:
    """Check the shape of `key=value` arguments (OmegaConf dotlist syntax)."""
    for arg in argv:
        if "=" not in arg or arg.startswith("="):
            raise ConfigError(f"argument '{arg}' is not of the form key=value (e.g. task=HalfCheetah ppo.learning_rate=1e-4)")
    return list(argv)


Overrides = Union[List[str], Mapping[str, Any]]


def overrides_config(overrides: Overrides) -> DictConfig:
    """Command-line `key=value` strings, or a mapping from the Python API whose keys may be dotted
    (`{"ppo.learning_rate": 1e-4}`) or nested (`{"ppo": {"learning_rate": 1e-4}}`), as one config."""
    if not isinstance(overrides, Mapping):
        return _load(lambda: OmegaConf.from_dotlist(parse_overrides(list(overrides))), "command line")

    def build() -> DictConfig:
        cfg = OmegaConf.create()
        for key, value in overrides.items():
            OmegaConf.update(cfg, str(key), value, merge=True, force_add=True)
        return cfg

    return _load(build, "arguments")


def compose(overrides: Overrides) -> DictConfig:
    """Build the validated run config from overrides (see `overrides_config`)."""
    cli = overrides_config(overrides)
    task = cli.get("task")
    if task is None:
        raise ConfigError(f"no task given: pass task=<name>; available tasks: {', '.join(available_tasks())}")
    cfg = default_config()
    task_file = _task_file(str(task))
    task_cfg = _load(lambda: OmegaConf.load(task_file), str(task_file))
    mjx_section = task_cfg.pop(MJX_SECTION, None)
    regime = task_cfg.pop(REGIME_KEY, None)
    if regime is not None:  # the shared settings of a family of tasks, under the task file's own
        regime_file = _regime_file(str(regime), task_file)
        cfg = _merge(cfg, _load(lambda: OmegaConf.load(regime_file), str(regime_file)), str(regime_file))
    cfg = _merge(cfg, task_cfg, str(task_file))
    if str(OmegaConf.select(cli, "env.backend", default=cfg.env.backend)) == "mjx":
        cfg = _mjx_regime(cfg, mjx_section, str(task), task_file)
    preset = str(cli.get("preset", cfg.preset))
    if preset != DEFAULT_PRESET:  # a preset replaces the task's tuning; command-line overrides still win
        preset_file = _preset_file(preset)
        cfg = _merge(cfg, _load(lambda: OmegaConf.load(preset_file), str(preset_file)), str(preset_file))
    cfg = _merge(cfg, _coerce_integral_floats(cli, cfg), "command line")
    cfg.task = Path(str(task)).stem if str(task).endswith(".yaml") else str(task)
    validate(cfg)
    return cfg


MJX_SECTION = "mjx"  # a task file's settings for env.backend=mjx, applied over configs/backends/mjx.yaml
REGIME_KEY = "regime"  # a task file's `regime: <name>`: configs/regimes/<name>.yaml applies before the task file


def _regime_file(name: str, task_file: Path) -> Path:
    path = REGIMES_DIR / f"{name}.yaml"
    if not path.is_file():
        valid = ", ".join(sorted(p.stem for p in REGIMES_DIR.glob("*.yaml")))
        raise ConfigError(f"{task_file.name}: regime '{name}' does not exist; valid regimes: {valid}")
    return path


def mjx_tasks() -> list[str]:
    """The tasks whose file names an MJX counterpart."""
    return sorted(p.stem for p in TASKS_DIR.glob("*.yaml") if MJX_SECTION in (OmegaConf.load(p) or {}))


def _mjx_regime(cfg: DictConfig, section: DictConfig | None, task: str, task_file: Path) -> DictConfig:
    """The task's config for env.backend=mjx: the GPU regime's settings, then the task file's own
    `mjx:` section (its engine counterpart as env.id). The Gymnasium env's kwargs do not apply."""
    if section is None:
        raise ConfigError(
            f"env.backend=mjx: task '{task}' names no MJX counterpart (no `{MJX_SECTION}:` section in {task_file.name}); "
            f"tasks with one: {', '.join(mjx_tasks())}"
        )
    regime = BACKENDS_DIR / "mjx.yaml"
    cfg = _merge(cfg, _load(lambda: OmegaConf.load(regime), str(regime)), str(regime))
    cfg.env.kwargs = {}
    return _merge(cfg, section, f"{task_file} ({MJX_SECTION}: section)")


RNN_TYPES = ("none", "gru", "lstm")  # policy.rnn: the actor's recurrent layer

# What may change when a run is resumed: anything else would alter the optimization it continues.
# The one list: the error message and docs/training.md (checked by a test) are written from it.
RESUME_CHANGEABLE = ("total_steps", "device", "torch_threads", "dist_timeout", "env.num_threads", "eval.", "log.", "checkpoint.")
RESUME_CHANGEABLE_TEXT = ", ".join(f"{key}*" if key.endswith(".") else key for key in RESUME_CHANGEABLE)


def default_config() -> DictConfig:
    """train.yaml's defaults on the schema (no task: not a runnable config by itself); a fresh copy
    the caller may change."""
    return copy.deepcopy(_composed_defaults())


@functools.cache
def _composed_defaults() -> DictConfig:
    # Composed once per process: plotting or benchmarking hundreds of saved runs fills each one's
    # missing keys from it.
    return _merge(
        OmegaConf.structured(TrainConfig),
        _load(lambda: OmegaConf.load(CONFIG_DIR / "train.yaml"), "configs/train.yaml"),
        "configs/train.yaml",
    )


# Env entry points (`env.id: module:callable`) of the package's own envs that moved with the
# package's folders: a run saved before the move resumes, evaluates and exports with the new path.
MOVED_ENTRY_POINTS = {"ppo_control.partial_observation:": "ppo_control.envs.partial_observation:"}


def saved_run_config(saved_config: dict) -> DictConfig:
    """A run's saved config over train.yaml's defaults: a key added to the project since the run was
    written gets its default (a run trained before randomization evaluates on the nominal robot), and
    an entry point of the package's own that has moved is read at its new place."""
    cfg = _merge(default_config(), OmegaConf.create(saved_config), "checkpoint config")
    env_id = cfg.env.id
    for old, new in MOVED_ENTRY_POINTS.items():
        if isinstance(env_id, str) and env_id.startswith(old):
            cfg.env.id = new + env_id.removeprefix(old)
    return cfg


def evaluation_randomize_section(run_cfg: DictConfig, use_run: bool, given: DictConfig) -> DictConfig:
    """The `randomize` section an evaluation runs under: off (the nominal robot) or the run's own
    (`use_run`), with the keys `given` (not None) replacing those; validated like a training config."""
    section = OmegaConf.create(OmegaConf.to_container(run_cfg.randomize if use_run else default_config().randomize))
    for key, value in OmegaConf.to_container(given).items():
        if value is not None:
            section[key] = value
    validate_randomize(OmegaConf.create({"randomize": section}))
    return section


def compose_resume(overrides: Overrides, saved_config: dict, run_dir: str) -> DictConfig:
    """The config of a resumed run: the checkpoint's own config plus the few allowed overrides."""
    cli = overrides_config(overrides)
    saved = saved_run_config(saved_config)
    if "task" in cli and str(cli.task) != str(saved.task):
        raise ConfigError(f"cannot resume: the run in '{run_dir}' trained task '{saved.task}', not '{cli.task}'")
    cli.pop("task", None)
    cli.pop("resume", None)
    cfg = _merge(saved, _coerce_integral_floats(cli, saved), "command line")
    before, after = _flatten(saved), _flatten(cfg)
    changed = [k for k in after if after[k] != before.get(k) and not k.startswith(RESUME_CHANGEABLE) and k != "run_dir"]
    if changed:
        key = changed[0]
        raise ConfigError(
            f"cannot change {key} on resume ({before.get(key)!r} -> {after[key]!r}): it alters the optimization being "
            f"continued; only {RESUME_CHANGEABLE_TEXT} may change (start a new run instead)"
        )
    cfg.resume = str(run_dir)
    cfg.run_dir = str(run_dir)
    validate(cfg)
    return cfg


def _flatten(cfg: DictConfig) -> dict[str, Any]:
    out: dict[str, Any] = {}

    def walk(node: Any, prefix: str) -> None:
        for key, value in node.items():
            if isinstance(value, dict):
                walk(value, f"{prefix}{key}.")
            else:
                out[f"{prefix}{key}"] = value

    walk(OmegaConf.to_container(cfg, resolve=True), "")
    return out


def _task_file(task: str) -> Path:
    if task.endswith((".yaml", ".yml")):
        path = Path(task)
        if not path.is_file():
            raise ConfigError(f"task file '{task}' does not exist")
        return path
    path = TASKS_DIR / f"{task}.yaml"
    if not path.is_file():
        close = difflib.get_close_matches(task, available_tasks(), n=1)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        raise ConfigError(f"unknown task '{task}'.{hint} Available tasks: {', '.join(available_tasks())}")
    return path


def _preset_file(preset: str) -> Path:
    path = PRESETS_DIR / f"{preset}.yaml"
    if not path.is_file():
        raise ConfigError(f"preset={preset!r} is not valid; choose one of: {', '.join(available_presets())}")
    return path


def _load(loader, source: str) -> DictConfig:
    try:
        return loader()
    except (OmegaConfBaseException, ValueError, OSError, TypeError) as exc:  # yaml errors subclass ValueError
        raise ConfigError(f"cannot read {source}: {_first_line(exc)}") from None


def _merge(base: DictConfig, other: DictConfig, source: str) -> DictConfig:
    try:
        return OmegaConf.merge(base, other)
    except OmegaConfBaseException as exc:
        key = getattr(exc, "full_key", None) or "?"
        raise ConfigError(f"{source}: {key}: {_first_line(exc)}") from None


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _coerce_integral_floats(overrides: DictConfig, schema: DictConfig) -> DictConfig:
    """Let users write total_steps=1e6: an integral float given for an int key becomes an int."""
    container = OmegaConf.to_container(overrides)

    def walk(node: dict, prefix: str) -> None:
        for key, value in node.items():
            path = f"{prefix}{key}"
            if isinstance(value, dict):
                walk(value, path + ".")
            elif isinstance(value, float) and value.is_integer() and _schema_type(schema, path) is int:
                node[key] = int(value)

    walk(container, "")
    return OmegaConf.create(container)


def _schema_type(cfg: DictConfig, path: str):
    try:
        parent_path, _, leaf = path.rpartition(".")
        parent = OmegaConf.select(cfg, parent_path) if parent_path else cfg
        if not isinstance(parent, DictConfig) or leaf not in parent:
            return None
        return parent._get_node(leaf)._metadata.ref_type  # the dataclass annotation
    except Exception:
        return None


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


def validate(cfg: DictConfig) -> None:
    """Range and consistency checks that types alone cannot express, one validator per section."""
    missing = OmegaConf.missing_keys(cfg)
    if missing:
        raise ConfigError(f"config keys without a value: {', '.join(sorted(missing))}")
    for key, choices in CHOICES.items():
        value = OmegaConf.select(cfg, key)
        if value not in choices:
            raise ConfigError(f"{key}={value!r} is not valid; choose one of: {', '.join(choices)}")
    for check in (_validate_top, _validate_env, _validate_normalize, _validate_policy, _validate_ppo, _validate_batch, _validate_eval):
        check(cfg)
    validate_randomize(cfg)
    if cfg.env.backend == "mjx":
        validate_mjx(cfg)
    _validate_log(cfg)
    _validate_checkpoint(cfg)


def _require(cfg: DictConfig, ok: bool, key: str, allowed: str) -> None:
    if not ok:
        raise ConfigError(f"{key}={OmegaConf.select(cfg, key)!r} is not allowed: {key} must be {allowed}")


def _finite(cfg: DictConfig, key: str) -> float:
    value = OmegaConf.select(cfg, key)
    _require(cfg, value is None or math.isfinite(value), key, "a finite number")
    return value


def _validate_top(cfg: DictConfig) -> None:
    _require(cfg, cfg.total_steps >= 1, "total_steps", ">= 1")
    _require(cfg, cfg.seed >= 0, "seed", ">= 0")
    _require(cfg, cfg.torch_threads >= 0, "torch_threads", ">= 0 (0 = 1 while collecting, every core for the update)")
    _require(cfg, _finite(cfg, "dist_timeout") > 0, "dist_timeout", "> 0 (seconds)")
    _require(cfg, cfg.preset in available_presets(), "preset", f"one of {', '.join(available_presets())}")


def _validate_env(cfg: DictConfig) -> None:
    env = cfg.env
    _require(
        cfg,
        env.id is not None and str(env.id).strip() != "",
        "env.id",
        "a Gymnasium id or package.module:EnvClass (set in the task file)",
    )
    _require(cfg, env.n_envs >= 1, "env.n_envs", ">= 1")
    _require(cfg, env.num_threads >= 0, "env.num_threads", ">= 0 (0 = one per CPU core)")
    _require(cfg, env.max_episode_steps is None or env.max_episode_steps >= 1, "env.max_episode_steps", "null or >= 1")


def _validate_normalize(cfg: DictConfig) -> None:
    _require(cfg, _finite(cfg, "normalize.obs_clip") > 0, "normalize.obs_clip", "> 0")
    _require(cfg, _finite(cfg, "normalize.reward_clip") > 0, "normalize.reward_clip", "> 0")


def _validate_policy(cfg: DictConfig) -> None:
    pol = cfg.policy
    _require(
        cfg,
        len(pol.hidden_sizes) >= 1 and all(h >= 1 for h in pol.hidden_sizes),
        "policy.hidden_sizes",
        "a non-empty list of positive ints, e.g. [64,64]",
    )
    _require(
        cfg,
        pol.critic_hidden_sizes is None or (len(pol.critic_hidden_sizes) >= 1 and all(h >= 1 for h in pol.critic_hidden_sizes)),
        "policy.critic_hidden_sizes",
        "null (the actor's hidden_sizes) or a non-empty list of positive ints, e.g. [256,256]",
    )
    _finite(cfg, "policy.log_std_init")
    for key in ("actor_obs", "critic_obs"):
        names = list(pol[key])
        _require(
            cfg,
            len(names) >= 1 and len(set(names)) == len(names),
            f"policy.{key}",
            "a non-empty list of distinct group names, e.g. [policy]",
        )
    for key in ("actor_history", "critic_history"):
        _require(cfg, pol[key] >= 1, f"policy.{key}", ">= 1 (the number of most recent frames read; 1 = the current one only)")
    _require(cfg, pol.rnn in RNN_TYPES, "policy.rnn", f"one of {', '.join(RNN_TYPES)}")
    _require(cfg, pol.rnn_size >= 1, "policy.rnn_size", ">= 1")
    _require(cfg, pol.rnn_sequence_length >= 1, "policy.rnn_sequence_length", ">= 1")


def _validate_ppo(cfg: DictConfig) -> None:
    ppo = cfg.ppo
    _require(cfg, ppo.rollout_steps >= 1, "ppo.rollout_steps", ">= 1")
    _require(cfg, ppo.epochs >= 1, "ppo.epochs", ">= 1")
    _require(cfg, ppo.minibatches >= 1, "ppo.minibatches", ">= 1")
    _require(cfg, _finite(cfg, "ppo.learning_rate") > 0, "ppo.learning_rate", "> 0")
    _require(cfg, 0 < _finite(cfg, "ppo.gamma") <= 1, "ppo.gamma", "in (0, 1]")
    _require(cfg, ppo.gamma_end is None or 0 < _finite(cfg, "ppo.gamma_end") <= 1, "ppo.gamma_end", "null or in (0, 1]")
    _require(cfg, 0 <= _finite(cfg, "ppo.gae_lambda") <= 1, "ppo.gae_lambda", "in [0, 1]")
    _require(cfg, ppo.gae_lambda_end is None or 0 <= _finite(cfg, "ppo.gae_lambda_end") <= 1, "ppo.gae_lambda_end", "null or in [0, 1]")
    _require(cfg, 0 < _finite(cfg, "ppo.end_at_fraction") <= 1, "ppo.end_at_fraction", "in (0, 1]")
    _require(cfg, _finite(cfg, "ppo.clip_range") > 0, "ppo.clip_range", "> 0")
    _require(cfg, _finite(cfg, "ppo.ent_coef") >= 0, "ppo.ent_coef", ">= 0")
    _require(cfg, _finite(cfg, "ppo.vf_coef") > 0, "ppo.vf_coef", "> 0")
    _require(cfg, ppo.max_grad_norm is None or _finite(cfg, "ppo.max_grad_norm") > 0, "ppo.max_grad_norm", "null or > 0")
    _require(cfg, ppo.target_kl is None or _finite(cfg, "ppo.target_kl") > 0, "ppo.target_kl", "null or > 0")
    if ppo.lr_schedule == "adaptive" and ppo.target_kl is None:
        raise ConfigError("ppo.lr_schedule=adaptive needs ppo.target_kl (the KL it aims at), e.g. ppo.target_kl=0.01")


def _validate_batch(cfg: DictConfig) -> None:
    """Across env, ppo and policy: the minibatches (and a recurrent policy's sequences) must divide the batch."""
    env, pol, ppo = cfg.env, cfg.policy, cfg.ppo
    batch = env.n_envs * ppo.rollout_steps
    if batch % ppo.minibatches != 0:
        raise ConfigError(
            f"ppo.minibatches={ppo.minibatches} does not divide the batch size env.n_envs*ppo.rollout_steps="
            f"{env.n_envs}*{ppo.rollout_steps}={batch}; choose a divisor of {batch}"
        )
    if pol.rnn != "none":
        if ppo.rollout_steps % pol.rnn_sequence_length != 0:
            raise ConfigError(
                f"policy.rnn_sequence_length={pol.rnn_sequence_length} does not divide ppo.rollout_steps={ppo.rollout_steps}; "
                f"choose a divisor of {ppo.rollout_steps}"
            )
        sequences = env.n_envs * ppo.rollout_steps // pol.rnn_sequence_length
        if sequences % ppo.minibatches != 0:
            raise ConfigError(
                f"ppo.minibatches={ppo.minibatches} does not divide the {sequences} training sequences of a recurrent policy "
                f"(env.n_envs*ppo.rollout_steps/policy.rnn_sequence_length); choose a divisor of {sequences}"
            )


def _validate_eval(cfg: DictConfig) -> None:
    ev = cfg.eval
    _require(cfg, ev.every_steps >= 0, "eval.every_steps", ">= 0 (0 = evaluate only at the end)")
    _require(cfg, ev.episodes >= 1, "eval.episodes", ">= 1")
    _require(cfg, ev.video_episodes >= 1, "eval.video_episodes", ">= 1")
    even = "an even number >= 16 (H.264 needs even sizes)"
    _require(cfg, ev.video_width >= 16 and ev.video_width % 2 == 0, "eval.video_width", even)
    _require(cfg, ev.video_height >= 16 and ev.video_height % 2 == 0, "eval.video_height", even)
    _require(cfg, ev.video_fps is None or ev.video_fps >= 1, "eval.video_fps", "null (the env's rate) or >= 1")


def _validate_log(cfg: DictConfig) -> None:
    _require(cfg, cfg.log.every_updates >= 1, "log.every_updates", ">= 1")
    _require(cfg, _finite(cfg, "log.line_seconds") >= 0, "log.line_seconds", ">= 0 (0 = a line every log.every_updates updates)")


def _validate_checkpoint(cfg: DictConfig) -> None:
    _require(cfg, cfg.checkpoint.every_steps >= 0, "checkpoint.every_steps", ">= 0 (0 = only last.pt)")
    _require(cfg, cfg.checkpoint.keep >= 0, "checkpoint.keep", ">= 0")
    _require(cfg, _finite(cfg, "checkpoint.save_last_seconds") >= 0, "checkpoint.save_last_seconds", ">= 0")


def validate_mjx(cfg: DictConfig) -> None:
    """What env.backend=mjx cannot honour (yet): randomization, observation history and groups
    beyond `policy` are host-side features of the Gymnasium backend."""
    defaults = default_config()
    changed = [f"randomize.{key}" for key in cfg.randomize if cfg.randomize[key] != defaults.randomize[key]]
    if changed:
        raise ConfigError(
            f"{changed[0]} is not supported with env.backend=mjx (domain randomization runs on the gymnasium backend); remove it"
        )
    for key in ("actor_history", "critic_history"):
        if cfg.policy[key] != 1:
            raise ConfigError(
                f"policy.{key}={cfg.policy[key]} is not supported with env.backend=mjx (history runs on the gymnasium and envpool "
                "backends); use 1, or policy.rnn=gru|lstm for memory"
            )
    for key in ("actor_obs", "critic_obs"):
        if list(cfg.policy[key]) != ["policy"]:
            raise ConfigError(
                f"policy.{key}={list(cfg.policy[key])} is not supported with env.backend=mjx: its envs have one group; use [policy]"
            )
    if cfg.eval.video and cfg.eval.randomize:
        raise ConfigError("eval.randomize=true is not supported with env.backend=mjx (no randomization there); use false")


def validate_randomize(cfg: DictConfig) -> None:
    """The `randomize` section: [low, high] scale ranges, non-negative noises, a delay range, pushes."""
    rnd = cfg.randomize

    def fail(key: str, allowed: str) -> None:
        raise ConfigError(f"randomize.{key}={_plain(rnd[key])!r} is not allowed: randomize.{key} must be {allowed}")

    for key in ("body_mass", "friction", "joint_damping", "actuator_gain"):
        pair = rnd[key]
        if pair is None:
            continue
        bound = "0 < low <= high" if key == "body_mass" else "0 <= low <= high"
        ok = len(pair) == 2 and all(math.isfinite(v) for v in pair) and pair[0] <= pair[1]
        ok = ok and (pair[0] > 0 if key == "body_mass" else pair[0] >= 0)
        if not ok:
            fail(key, f"null or [low, high] scale factors with {bound} (e.g. [0.8, 1.2])")
    for key in ("joint_friction", "armature"):
        pair = rnd[key]
        if pair is not None and not (len(pair) == 2 and all(math.isfinite(v) for v in pair) and 0 <= pair[0] <= pair[1]):
            fail(key, "null or [low, high] scale factors with 0 <= low <= high (e.g. [0.9, 1.1])")
    pair = rnd.added_mass
    if pair is not None and not (len(pair) == 2 and all(math.isfinite(v) for v in pair) and pair[0] <= pair[1]):
        fail("added_mass", "null or [low, high] kg with low <= high (e.g. [-1, 1]); a base left without mass is refused when drawn")
    for key in ("obs_noise", "action_noise", "push_velocity", "com_offset"):
        if not (math.isfinite(rnd[key]) and rnd[key] >= 0):
            fail(key, ">= 0 (0 = off)")
    if not (math.isfinite(rnd.init_pose) and 0 <= rnd.init_pose <= math.pi):
        fail("init_pose", "between 0 (off) and pi: the most each actuated joint starts off its initial pose (rad, or m)")
    delay = rnd.action_delay
    if delay is not None and not (len(delay) == 2 and 0 <= delay[0] <= delay[1]):
        fail("action_delay", "null or [min, max] control steps with 0 <= min <= max (e.g. [0, 2])")
    if rnd.push_interval < 0 or (rnd.push_velocity > 0 and rnd.push_interval < 1):
        fail("push_interval", ">= 1 when randomize.push_velocity > 0 (control steps between pushes)")


def _plain(value: Any) -> Any:
    return OmegaConf.to_container(value) if isinstance(value, (DictConfig, ListConfig)) else value


def parse_command_args(schema: type, argv: Overrides, command: str) -> DictConfig:
    """Parse the arguments of a non-training command (`key=value` strings, or a mapping from the
    Python API) against a dataclass schema.

    Same rules as training overrides: unknown keys name the closest valid one, types are checked,
    a key without a default must be given. Errors are ConfigError (one line, exit 2).
    """
    given = overrides_config(argv)
    args = OmegaConf.structured(schema)
    names = [f.name for f in fields(schema)]
    valid = ", ".join(names)
    for key in given.keys():
        if key not in names:
            close = difflib.get_close_matches(str(key), names, n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            raise ConfigError(f"{command}: unknown argument '{key}'.{hint} Valid arguments: {valid}")
    args = _merge(args, _coerce_integral_floats(given, args), "command line")
    missing = OmegaConf.missing_keys(args)
    if missing:
        raise ConfigError(f"{command}: missing argument {', '.join(f'{k}=...' for k in sorted(missing))}; valid arguments: {valid}")
    return args


DOCS_HINT = "docs: docs/ (every key of train: docs/configuration.md)"


def _field_comments(schema: type) -> dict[str, str]:
    """The `# ...` comment after each field of a schema dataclass (its one-line doc)."""
    try:
        lines = inspect.getsource(schema).splitlines()
    except (OSError, TypeError):
        return {}
    out = {}
    for line in lines:
        match = re.match(r"\s+(\w+):[^#]*#\s*(.*)$", line)
        if match:
            out[match.group(1)] = match.group(2).strip()
    return out


def schema_keys(schema: type, prefix: str = "") -> list[tuple[str, Any, str]]:
    """(dotted key, default value, field comment) of each key of a command's schema dataclass,
    nested sections flattened; a required key's default is MISSING."""
    comments, rows = _field_comments(schema), []
    for f in fields(schema):
        if f.default_factory is not dataclasses.MISSING and dataclasses.is_dataclass(f.default_factory()):
            rows += schema_keys(type(f.default_factory()), f"{prefix}{f.name}.")
            continue
        if f.default is not dataclasses.MISSING:
            default = f.default
        else:
            default = f.default_factory() if f.default_factory is not dataclasses.MISSING else None
        rows.append((prefix + f.name, default, comments.get(f.name, "")))
    return rows


def train_yaml_keys() -> list[tuple[str, str, str]]:
    """(dotted key, default as written, `#` comment) of every key line of configs/train.yaml, in
    file order; a section's own line has an empty default."""
    rows, stack = [], []
    for line in (CONFIG_DIR / "train.yaml").read_text().splitlines():
        match = re.match(r"(\s*)(\w+):\s*([^#]*?)\s*(?:#\s*(.*))?$", line)
        if match:
            stack = [*stack[: len(match.group(1)) // 2], match.group(2)]
            rows.append((".".join(stack), match.group(3), (match.group(4) or "").strip()))
    return rows


def _schema_lines(schema: type) -> list[str]:
    rows = []
    for key, default, doc in schema_keys(schema):
        shown = "(required)" if default is MISSING else "null" if default is None else str(default).replace(" ", "")
        rows.append(f"  {key}={shown}" + (f"  # {doc}" if doc else ""))
    return rows


def _train_sections() -> list[str]:
    """train.yaml's top-level keys and sections with their defaults and comments."""
    sections = {f.name: f for f in fields(TrainConfig)}
    rows = []
    for key, value, doc in train_yaml_keys():
        if "." in key:
            continue
        if not value and key in sections and dataclasses.is_dataclass(sections[key].default_factory()):
            doc = (doc + "; " if doc else "") + "keys: " + ", ".join(f.name for f in fields(sections[key].default_factory()))
        shown = f"{key}={value}" if value else f"{key}.*"
        rows.append(f"  {shown:<24}" + (f"  # {doc}" if doc else ""))
    return rows


def command_help(usage: str, schema: type | None = None, *, example: str, train: bool = False) -> str:
    """The text `-h`/`--help` prints for a command: usage, its keys with defaults, an example, the docs."""
    parts = [usage.strip(), ""]
    if schema is not None:
        parts += ["keys (key=value; default after =):", *_schema_lines(schema), ""]
    if train:
        parts += ["keys (OmegaConf dotlist key=value; sections hold more keys):", *_train_sections(), ""]
    parts += [f"example: {example}", DOCS_HINT]
    return "\n".join(parts)
