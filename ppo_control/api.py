"""The Python API: train, evaluate, export and load policies from scripts and notebooks.

The same config system and checks as the commands, which run the same functions:
overrides are Python values, keys dotted or nested, and every mistake raises `UserError` with the
one-line message the command line prints. A command's logic lives in its library module
(`training.launch`, `analysis.evaluate_run`, `deploy.exporter`, `analysis.robustness_grid`); each
function here parses its Python arguments and calls it. The package exports these functions, so
`import ppo_control as pc` gives them (the command modules of the same names, `ppo_control/train.py`
etc., are only run as `python -m ppo_control.<command>`, never imported).

Each function first sets the process up as the commands do (`config.runtime.prepare_process`:
headless rendering, sleeping OpenMP waits, a user's own settings kept); the OpenMP setting takes
effect only if torch has not been imported yet. Heavy imports (torch, mujoco) wait until a function
runs, so importing the package stays cheap.

    import ppo_control as pc

    result = pc.train("Hopper", total_steps=200_000, ppo={"learning_rate": 1e-4}, **{"env.n_envs": 16})
    print(result.run_dir, result.eval_return)
    policy = pc.load_policy(result.run_dir)          # numpy observation in, numpy action out
    report = pc.evaluate(result.run_dir, episodes=5)  # dict, also written to <run>/eval.json
    path = pc.export(result.run_dir, format="torchscript")
    pc.load_policy(path)                              # an export runs the same way
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ppo_control.config import EvaluateArgs, parse_command_args
from ppo_control.config.runtime import prepare_process
from ppo_control.training.launch import TrainResult, train_from_overrides


def train(task: str | None = None, *, resume: str | Path | None = None, max_updates: int | None = None, **overrides: Any) -> TrainResult:
    """Train a new run of `task` (a task name or a path to a task .yaml), or continue `resume`.

    `overrides` are config keys with Python values: `total_steps=50_000`, `ppo={"epochs": 10}`, or
    dotted keys through a dict, `**{"env.n_envs": 8}`. `max_updates` stops after that many updates of
    this call with a checkpoint (continue it with `train(resume=run_dir)`).
    """
    prepare_process()
    if task is not None:
        overrides["task"] = task  # with resume: only checked to be the run's own task
    return train_from_overrides(overrides, resume=None if resume is None else str(resume), max_updates=max_updates)


def evaluate(run: str | Path, **arguments: Any) -> dict[str, Any]:
    """Evaluate a run's policy (deterministic by default) and write <run>/eval.json; returns its content.

    Arguments as for `python -m ppo_control.evaluate`: checkpoint, episodes (10), seed (default: the
    run's own evaluation seed, which reproduces its eval_return), video, video_dir, deterministic;
    `randomize={"body_mass": [1.3, 1.3], ...}` evaluates under chosen perturbations (from the nominal
    robot, or from the run's own randomization with `eval={"randomize": True}`).
    """
    prepare_process()
    from ppo_control.analysis.evaluate_run import evaluate_run  # after prepare_process: it loads mujoco

    return evaluate_run(parse_command_args(EvaluateArgs, {"run": str(run), **arguments}, "evaluate"))


def export(run: str | Path, **arguments: Any) -> Path:
    """Export a run's deterministic policy (TorchScript by default, or format="onnx"); returns the
    file's path. The file is verified against the training policy before it is put in place.

    Arguments as for `python -m ppo_control.export`: format, out, checkpoint, overwrite.
    """
    prepare_process()
    from ppo_control.deploy.exporter import export_policy, parse_args  # after prepare_process: numpy, then torch

    args = parse_args({"run": str(run), **arguments})
    return export_policy(args).path


def robustness(run: str | Path, **arguments: Any) -> tuple[Path, list]:
    """Evaluate a run's policy over a grid of perturbations (body mass x friction scales, and action
    delays); writes robustness.csv/.md/.png into <run>/robustness/ and returns (that directory, the
    cells). Arguments as for `python -m ppo_control.robustness`: episodes, mass, friction, delay,
    checkpoint, seed."""
    prepare_process()
    from ppo_control.analysis.robustness_grid import evaluate_grid  # after prepare_process: numpy, then torch

    return evaluate_grid(run, **arguments)


def load_policy(path: str | Path, checkpoint: str | None = None):
    """A trained policy as a callable: numpy observation ([obs_dim] or [batch, obs_dim]) in, the
    deterministic action (numpy, clipped to the action bounds) out.

    `path` is a run directory (its checkpoints/last.pt, or `checkpoint`), a checkpoint file, or an
    exported TorchScript (.pt) or ONNX (.onnx) file.
    """
    prepare_process()
    from ppo_control.deploy.loading import load_policy as load  # after prepare_process: it loads torch

    return load(Path(path), checkpoint)


def list_tasks():
    """The built-in tasks with their env id, observation and action sizes."""
    prepare_process()
    from ppo_control.envs.catalog import list_tasks as tasks  # after prepare_process: it loads mujoco

    return tasks()
