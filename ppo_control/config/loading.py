"""Reading the shipped YAML files: a file or a merge of configs with one-line ConfigErrors,
configs/train.yaml's defaults on the schema, and which tasks and presets exist.

Below both validation (which checks a preset's name and reads the defaults) and composition (which
validates what it composes), so the two do not import each other.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ppo_control.config.resources import CONFIG_DIR, PRESETS_DIR, TASKS_DIR
from ppo_control.config.schema import DEFAULT_PRESET, ConfigError, TrainConfig


def available_tasks() -> list[str]:
    return sorted(p.stem for p in TASKS_DIR.glob("*.yaml"))


def available_presets() -> list[str]:
    return [DEFAULT_PRESET, *sorted(p.stem for p in PRESETS_DIR.glob("*.yaml"))]


def default_config() -> DictConfig:
    """train.yaml's defaults on the schema (no task: not a runnable config by itself); a fresh copy
    the caller may change."""
    return copy.deepcopy(_composed_defaults())


@functools.cache
def _composed_defaults() -> DictConfig:
    # Composed once per process: plotting or benchmarking hundreds of saved runs fills each one's
    # missing keys from it.
    return merge(
        OmegaConf.structured(TrainConfig),
        load(lambda: OmegaConf.load(CONFIG_DIR / "train.yaml"), "configs/train.yaml"),
        "configs/train.yaml",
    )


def load(loader: Callable[[], DictConfig], source: str) -> DictConfig:
    """`loader()`'s config; any error reading or parsing it is a ConfigError naming `source`."""
    try:
        return loader()
    except (OmegaConfBaseException, ValueError, OSError, TypeError) as exc:  # yaml errors subclass ValueError
        raise ConfigError(f"cannot read {source}: {_first_line(exc)}") from None


def merge(base: DictConfig, other: DictConfig, source: str) -> DictConfig:
    """`other` over `base`; a key or type the schema refuses is a ConfigError naming `source` and the key."""
    try:
        return OmegaConf.merge(base, other)
    except OmegaConfBaseException as exc:
        key = getattr(exc, "full_key", None) or "?"
        raise ConfigError(f"{source}: {key}: {_first_line(exc)}") from None


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
