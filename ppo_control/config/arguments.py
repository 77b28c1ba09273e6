"""The arguments of the commands: `key=value` overrides (or a mapping from the Python API) as a
config, the schemas of the commands other than train (evaluate, robustness, sim2sim, export) and
their parsing, and the `--help` text of every command.

The argument dataclasses live here, under `from __future__ import annotations` with their typing
names imported, so their annotations resolve however the command module is run.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import re
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Dict, List, Optional, Union

from omegaconf import MISSING, DictConfig, OmegaConf

from ppo_control.config.loading import load, merge
from ppo_control.config.resources import CONFIG_DIR
from ppo_control.config.schema import ConfigError, RandomizeConfig, TrainConfig


def _all_optional(schema: type, name: str, doc: str) -> type:
    """A dataclass with `schema`'s fields in its order, each Optional with None (not given) for default."""
    hints = typing.get_type_hints(schema)
    made = dataclasses.make_dataclass(name, [(f.name, Optional[hints[f.name]], field(default=None)) for f in fields(schema)])
    made.__module__, made.__doc__ = __name__, doc
    return made


# The training section's keys, written once (schema.RandomizeConfig).
EvaluateRandomizeArgs = _all_optional(
    RandomizeConfig,
    "EvaluateRandomizeArgs",
    "The training section's keys; None = not given (off, or the run's own with eval.randomize=true).",
)


@dataclass
class EvaluateEvalArgs:
    randomize: Optional[bool] = None  # true: start from the run's randomize.* (not the nominal robot); default: the run's eval.randomize


@dataclass
class EvaluateEnvArgs:
    kwargs: Dict[str, Any] = field(default_factory=dict)  # task options over the run's (env.kwargs.<key>=<value>), the layout kept


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
    env: EvaluateEnvArgs = field(default_factory=EvaluateEnvArgs)


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
    fail_on_departure: bool = False  # exit status 1 when the result departs from the run's eval.json beyond the episodes' noise


@dataclass
class ExportArgs:
    run: str = MISSING  # the run directory
    format: str = "torchscript"  # torchscript | onnx
    out: Optional[str] = None  # default: <run>/export/policy.pt or policy.onnx
    checkpoint: Optional[str] = None  # a file, or a name in <run>/checkpoints; default last.pt
    overwrite: bool = False  # replace an existing file at `out`


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
        return load(lambda: OmegaConf.from_dotlist(parse_overrides(list(overrides))), "command line")

    def build() -> DictConfig:
        cfg = OmegaConf.create()
        for key, value in overrides.items():
            OmegaConf.update(cfg, str(key), value, merge=True, force_add=True)
        return cfg

    return load(build, "arguments")


def coerce_integral_floats(overrides: DictConfig, schema: DictConfig) -> DictConfig:
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
    args = merge(args, coerce_integral_floats(given, args), "command line")
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
