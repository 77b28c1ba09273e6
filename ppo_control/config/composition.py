"""Composition: the run config from configs/train.yaml < the task's regime < the task file (its
`mjx:` section with env.backend=mjx) < a preset < the overrides, validated; a resumed run's config
(its saved config plus the few keys that may change); a saved run's config read today.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ppo_control.config.arguments import Overrides, coerce_integral_floats, overrides_config
from ppo_control.config.loading import available_presets, available_tasks, default_config, load, merge
from ppo_control.config.resources import BACKENDS_DIR, PRESETS_DIR, REGIMES_DIR, TASKS_DIR
from ppo_control.config.schema import BACKENDS, DEFAULT_PRESET, RESUME_CHANGEABLE, RESUME_CHANGEABLE_TEXT, ConfigError
from ppo_control.config.validation import validate, validate_randomize

# A backend with a regime file (configs/backends/<backend>.yaml) runs its own engine's counterpart
# of a task: the task file names it in a section called after the backend (`mjx:`), applied over
# the regime; a task file without that section has no counterpart there.
REGIME_KEY = "regime"  # a task file's `regime: <name>`: configs/regimes/<name>.yaml applies before the task file


def compose(overrides: Overrides) -> DictConfig:
    """Build the validated run config from overrides (see `overrides_config`)."""
    cli = overrides_config(overrides)
    task = cli.get("task")
    if task is None:
        raise ConfigError(f"no task given: pass task=<name>; available tasks: {', '.join(available_tasks())}")
    cfg = default_config()
    task_file = _task_file(str(task))
    task_cfg = load(lambda: OmegaConf.load(task_file), str(task_file))
    backend_sections = {name: task_cfg.pop(name, None) for name in BACKENDS}
    regime = task_cfg.pop(REGIME_KEY, None)
    if regime is not None:  # the shared settings of a family of tasks, under the task file's own
        regime_file = _regime_file(str(regime), task_file)
        cfg = merge(cfg, load(lambda: OmegaConf.load(regime_file), str(regime_file)), str(regime_file))
    cfg = merge(cfg, task_cfg, str(task_file))
    backend = str(OmegaConf.select(cli, "env.backend", default=cfg.env.backend))
    if (BACKENDS_DIR / f"{backend}.yaml").is_file():
        cfg = _backend_regime(cfg, backend, backend_sections.get(backend), task_file)
    preset = str(cli.get("preset", cfg.preset))
    if preset != DEFAULT_PRESET:  # a preset replaces the task's tuning; command-line overrides still win
        preset_file = _preset_file(preset)
        cfg = merge(cfg, load(lambda: OmegaConf.load(preset_file), str(preset_file)), str(preset_file))
    cfg = merge(cfg, coerce_integral_floats(cli, cfg), "command line")
    cfg.task = Path(str(task)).stem if str(task).endswith(".yaml") else str(task)
    validate(cfg)
    return cfg


def _regime_file(name: str, task_file: Path) -> Path:
    path = REGIMES_DIR / f"{name}.yaml"
    if not path.is_file():
        valid = ", ".join(sorted(p.stem for p in REGIMES_DIR.glob("*.yaml")))
        raise ConfigError(f"{task_file.name}: regime '{name}' does not exist; valid regimes: {valid}")
    return path


def backend_tasks(backend: str) -> list[str]:
    """The tasks whose file names a counterpart on `backend` (a section named after it)."""
    return sorted(p.stem for p in TASKS_DIR.glob("*.yaml") if backend in (OmegaConf.load(p) or {}))


def _backend_regime(cfg: DictConfig, backend: str, section: DictConfig | None, task_file: Path) -> DictConfig:
    """The task's config for a backend with a regime: the regime's settings, then the task file's
    own section for that backend (its engine's counterpart of the task as env.id). The task's own
    env.kwargs do not apply there."""
    if section is None:
        raise ConfigError(
            f"env.backend={backend}: task '{task_file.stem}' names no counterpart there (no `{backend}:` section in {task_file.name}); "
            f"tasks with one: {', '.join(backend_tasks(backend))}"
        )
    regime = BACKENDS_DIR / f"{backend}.yaml"
    cfg = merge(cfg, load(lambda: OmegaConf.load(regime), str(regime)), str(regime))
    cfg.env.kwargs = {}
    return merge(cfg, section, f"{task_file} ({backend}: section)")


# Env entry points (`env.id: module:callable`) of the package's own envs that moved with the
# package's folders: a run saved before the move resumes, evaluates and exports with the new path.
MOVED_ENTRY_POINTS = {"ppo_control.partial_observation:": "ppo_control.envs.partial_observation:"}


def saved_run_config(saved_config: dict) -> DictConfig:
    """A run's saved config over train.yaml's defaults: a key added to the project since the run was
    written gets its default (a run trained before randomization evaluates on the nominal robot), and
    an entry point of the package's own that has moved is read at its new place."""
    cfg = merge(default_config(), OmegaConf.create(saved_config), "checkpoint config")
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
    cfg = merge(saved, coerce_integral_floats(cli, saved), "command line")
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
