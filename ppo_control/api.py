"""The Python API: train, evaluate, export and load policies from scripts and notebooks.

The same config system and checks as the commands (which are thin wrappers over these functions):
overrides are Python values, keys dotted or nested, and every mistake raises `UserError` with the
one-line message the command line prints.

    import ppo_control as pc

    result = pc.train("Hopper", total_steps=200_000, ppo={"learning_rate": 1e-4}, **{"env.n_envs": 16})
    print(result.run_dir, result.eval_return)
    policy = pc.load_policy(result.run_dir)          # numpy observation in, numpy action out
    report = pc.evaluate(result.run_dir, episodes=5)  # dict, also written to <run>/eval.json
    path = pc.export(result.run_dir, format="torchscript")
    pc.load_policy(path)                              # an export runs the same way
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from ppo_control.config import ConfigError, EvaluateArgs, compose, compose_resume, evaluation_randomize_section, parse_command_args
from ppo_control.errors import UserError
from ppo_control.run_layout import checkpoint_to_load, resume_candidates

EVAL_FILE = "eval.json"


@dataclass(frozen=True)
class TrainResult:
    """What `train` returns: where the run lives and its last evaluation (None if it did not run)."""

    run_dir: Path
    step: int
    eval_return: float | None
    eval_return_std: float | None
    eval_length: float | None
    videos: tuple[str, ...] = ()


def train(task: str | None = None, *, resume: str | Path | None = None, max_updates: int | None = None, **overrides: Any) -> TrainResult:
    """Train a new run of `task` (a task name or a path to a task .yaml), or continue `resume`.

    `overrides` are config keys with Python values: `total_steps=50_000`, `ppo={"epochs": 10}`, or
    dotted keys through a dict, `**{"env.n_envs": 8}`. `max_updates` stops after that many updates of
    this call with a checkpoint (continue it with `train(resume=run_dir)`).
    """
    if task is not None:
        overrides["task"] = task  # with resume: only checked to be the run's own task
    return _train(overrides, resume=None if resume is None else str(resume), max_updates=max_updates)


def _train(overrides, resume: str | None, max_updates: int | None = None) -> TrainResult:
    """Shared by `train` and the train command (`overrides`: a mapping or key=value strings)."""
    if resume:
        candidates = resume_candidates(resume)  # a wrong path is refused before the heavy imports (torch)
        from ppo_control.runs import find_resume_checkpoint
        from ppo_control.trainer import Trainer

        path, state = find_resume_checkpoint(Path(resume), candidates)
        cfg = compose_resume(overrides, state["config"], resume)
        print(f"resuming from {path} (step {int(state['step']):,})", flush=True)
        trainer = Trainer(cfg, resume_state=state)
    else:
        cfg = compose(overrides)
        from ppo_control.trainer import Trainer  # heavy imports (torch, gymnasium) after the config is valid

        trainer = Trainer(cfg)
    final = trainer.train(max_updates=max_updates)
    return TrainResult(
        run_dir=Path(cfg.run_dir),
        step=trainer.progress.step,
        eval_return=final.get("eval_return"),
        eval_return_std=final.get("eval_return_std"),
        eval_length=final.get("eval_length"),
        videos=tuple(final.get("videos", ())),
    )


def evaluate(run: str | Path, **arguments: Any) -> dict[str, Any]:
    """Evaluate a run's policy (deterministic by default) and write <run>/eval.json; returns its content.

    Arguments as for `python -m ppo_control.evaluate`: checkpoint, episodes (10), seed (default: the
    run's own evaluation seed, which reproduces its eval_return), video, video_dir, deterministic;
    `randomize={"body_mass": [1.3, 1.3], ...}` evaluates under chosen perturbations (from the nominal
    robot, or from the run's own randomization with `eval={"randomize": True}`).
    """
    args = parse_command_args(EvaluateArgs, {"run": str(run), **arguments}, "evaluate")
    if args.episodes < 1:
        raise ConfigError(f"evaluate: episodes={args.episodes} is not allowed: episodes must be >= 1")
    checkpoint = checkpoint_to_load(args.run, args.checkpoint)
    import torch  # heavy imports after the arguments and paths check out

    from ppo_control.checkpoint import atomic_write
    from ppo_control.envs import capabilities
    from ppo_control.evaluation import EVAL_SEED_OFFSET, evaluate_episodes, make_eval_envs
    from ppo_control.observations import needs_privileged
    from ppo_control.randomization import Randomization
    from ppo_control.runs import load_run
    from ppo_control.trainer import resolve_device
    from ppo_control.video import check_can_record, record_run_videos

    loaded = load_run(args.run, checkpoint)
    cfg, step = loaded.cfg, int(loaded.state["step"])
    seed = args.seed if args.seed is not None else cfg.seed + EVAL_SEED_OFFSET
    use_run = cfg.eval.randomize if args.eval.randomize is None else args.eval.randomize
    section = evaluation_randomize_section(cfg, use_run, args.randomize)
    randomization = Randomization.from_config(section)
    # An MJX task simulates on the GPU when there is one (its CPU simulation is slow); others on the host.
    device = resolve_device("auto") if capabilities(cfg.env.backend).device_resident else torch.device("cpu")
    if args.video:
        check_can_record(cfg.env)  # before the episodes are played
    envs = make_eval_envs(cfg.env, args.episodes, randomization, needs_privileged(cfg.policy), str(device))
    try:
        evaluation = evaluate_episodes(loaded.policy.to(device), envs, args.episodes, seed, device, deterministic=args.deterministic)
    finally:
        envs.close()
    returns, lengths = evaluation.returns, evaluation.lengths
    videos = []
    if args.video:
        videos = record_run_videos(loaded.policy, cfg, loaded.name, step, seed, device, randomization, args.video_dir)
    result = {
        "run": str(loaded.run_dir),
        "checkpoint": str(loaded.checkpoint_path),
        "step": step,
        "task": cfg.task,
        "env_id": cfg.env.id,
        "episodes": args.episodes,
        "seed": seed,
        "deterministic": args.deterministic,
        "randomize": OmegaConf.to_container(section) if randomization else None,
        "return_mean": float(returns.mean()),
        "return_std": float(returns.std()),
        "return_min": float(returns.min()),
        "return_max": float(returns.max()),
        "length_mean": float(lengths.mean()),
        # episodes that ended by termination (a fall) before the time limit
        "fall_rate": float(evaluation.terminated.mean()),
        # each per-step diagnostic's mean over the episodes' steps: reward/<term>, tracking_error_lin (m/s), tracking_error_ang (rad/s)
        "diagnostics": evaluation.diagnostics,
        "returns": returns.tolist(),
        "lengths": lengths.tolist(),
        "videos": videos,
    }
    path = loaded.run_dir / EVAL_FILE
    try:
        atomic_write(path, lambda tmp: tmp.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror}") from None
    return result


def export(run: str | Path, **arguments: Any) -> Path:
    """Export a run's deterministic policy (TorchScript by default, or format="onnx"); returns the
    file's path. The file is verified against the training policy before it is put in place.

    Arguments as for `python -m ppo_control.export`: format, out, checkpoint, overwrite.
    """
    from ppo_control.export import export_policy, parse_args

    args = parse_args({"run": str(run), **arguments})
    return export_policy(args).path


def robustness(run: str | Path, **arguments: Any) -> tuple[Path, list]:
    """Evaluate a run's policy over a grid of perturbations (body mass x friction scales, and action
    delays); writes robustness.csv/.md/.png into <run>/robustness/ and returns (that directory, the
    cells). Arguments as for `python -m ppo_control.robustness`: episodes, mass, friction, delay,
    checkpoint, seed."""
    from ppo_control.robustness import evaluate_grid

    return evaluate_grid(run, **arguments)


def load_policy(path: str | Path, checkpoint: str | None = None):
    """A trained policy as a callable: numpy observation ([obs_dim] or [batch, obs_dim]) in, the
    deterministic action (numpy, clipped to the action bounds) out.

    `path` is a run directory (its checkpoints/last.pt, or `checkpoint`), a checkpoint file, or an
    exported TorchScript (.pt) or ONNX (.onnx) file.
    """
    from ppo_control.loaded_policy import load_policy as load

    return load(Path(path), checkpoint)


def list_tasks():
    """The built-in tasks with their env id, observation and action sizes."""
    from ppo_control.tasks import list_tasks as tasks

    return tasks()
