"""Configuration: compose configs/train.yaml < regime < task < preset < command line, then validate.

One job per module; this package face re-exports what the rest of the package imports:
- schema.py: the structured-config dataclasses, ConfigError, and every list of keys or choices;
- loading.py: reading the shipped YAML files, train.yaml's defaults, the available tasks and presets;
- validation.py: `validate` and the per-section validators;
- composition.py: composing a run's config, a resumed run's, a saved run's;
- arguments.py: `key=value` overrides, the other commands' argument schemas, `--help` text;
- errors.py: the error model (UserError exit 2, TrainingStopped exit 1, run_cli);
- resources.py: where the shipped configs and tasks live.
"""

from ppo_control.config.arguments import (
    EvaluateArgs,
    ExportArgs,
    Overrides,
    RobustnessArgs,
    Sim2SimArgs,
    command_help,
    parse_command_args,
    parse_overrides,
    schema_keys,
    train_yaml_keys,
)
from ppo_control.config.composition import compose, compose_resume, evaluation_randomize_section, saved_run_config
from ppo_control.config.loading import available_tasks, default_config
from ppo_control.config.resources import CONFIG_DIR, TASKS_DIR
from ppo_control.config.schema import (
    ACTIVATIONS,
    BACKENDS,
    RANDOMIZE_PHYSICS_KEYS,
    RESUME_CHANGEABLE,
    RESUME_CHANGEABLE_TEXT,
    RNN_TYPES,
    ConfigError,
    TrainConfig,
    all_keys,
)

__all__ = [
    "ACTIVATIONS",
    "BACKENDS",
    "CONFIG_DIR",
    "RANDOMIZE_PHYSICS_KEYS",
    "RESUME_CHANGEABLE",
    "RESUME_CHANGEABLE_TEXT",
    "RNN_TYPES",
    "TASKS_DIR",
    "ConfigError",
    "EvaluateArgs",
    "ExportArgs",
    "Overrides",
    "RobustnessArgs",
    "Sim2SimArgs",
    "TrainConfig",
    "all_keys",
    "available_tasks",
    "compose",
    "compose_resume",
    "command_help",
    "default_config",
    "evaluation_randomize_section",
    "parse_command_args",
    "parse_overrides",
    "saved_run_config",
    "schema_keys",
    "train_yaml_keys",
]
