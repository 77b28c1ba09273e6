"""A run's evaluation, as `python -m ppo_control.evaluate` and `ppo_control.evaluate()` run it
(the command's usage and description: ppo_control/evaluate.py): `evaluate_run` plays the
episodes, writes <run>/eval.json and returns its content; `main` prints it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf

from ppo_control.config import ConfigError, EvaluateArgs, evaluation_randomize_section, parse_command_args
from ppo_control.config.errors import UserError
from ppo_control.envs import backend_of
from ppo_control.envs.base import EnvInfo
from ppo_control.envs.joystick import RESPONSE_MIN_COMMAND
from ppo_control.envs.observations import needs_privileged
from ppo_control.envs.randomization import Randomization
from ppo_control.runs.layout import checkpoint_to_load

if TYPE_CHECKING:  # annotations only: both load torch
    from ppo_control.rl.evaluation import Evaluation
    from ppo_control.runs.directory import LoadedRun

EVAL_FILE = "eval.json"


def evaluate_run(args: DictConfig) -> dict[str, Any]:
    """Evaluate the run `args` (EvaluateArgs, parsed) describe and write <run>/eval.json; returns its content."""
    if args.episodes < 1:
        raise ConfigError(f"evaluate: episodes={args.episodes} is not allowed: episodes must be >= 1")
    checkpoint = checkpoint_to_load(args.run, args.checkpoint)
    # torch and what loads it only now: a wrong argument or run path is refused in one line without them
    # (tests/runs/test_resume.py checks it)
    import torch

    from ppo_control.rendering.video import check_can_record, record_run_videos
    from ppo_control.rl.evaluation import EVAL_SEED_OFFSET, evaluate_episodes, make_eval_envs
    from ppo_control.runs.checkpoint import atomic_write
    from ppo_control.runs.directory import load_run
    from ppo_control.training.trainer import resolve_device

    loaded = load_run(args.run, checkpoint)
    cfg, step = with_task_options(loaded.cfg, args.env.kwargs), int(loaded.state["step"])
    seed = args.seed if args.seed is not None else cfg.seed + EVAL_SEED_OFFSET
    use_run = cfg.eval.randomize if args.eval.randomize is None else args.eval.randomize
    section = evaluation_randomize_section(cfg, use_run, args.randomize)
    randomization = Randomization.from_config(section)
    # An MJX task simulates on the GPU when there is one (its CPU simulation is slow); others on the host.
    device = resolve_device("auto") if backend_of(cfg.env).capabilities.device_resident else torch.device("cpu")
    if args.video:
        check_can_record(cfg.env)  # before the episodes are played
    envs = make_eval_envs(cfg.env, args.episodes, randomization, needs_privileged(cfg.policy), str(device))
    try:
        check_same_interface(envs.info, loaded.env_info, args.env.kwargs)
        evaluation = evaluate_episodes(loaded.policy.to(device), envs, args.episodes, seed, device, deterministic=args.deterministic)
    finally:
        envs.close()
    videos = []
    if args.video:
        videos = record_run_videos(loaded.policy, cfg, loaded.name, step, seed, device, randomization, args.video_dir)
    randomize = OmegaConf.to_container(section) if randomization else None
    result = eval_result(args, loaded, seed, randomize, evaluation, videos)
    path = loaded.run_dir / EVAL_FILE
    try:
        atomic_write(path, lambda tmp: tmp.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror}") from None
    return result


def with_task_options(cfg: DictConfig, options) -> DictConfig:
    """The run's config with evaluate's env.kwargs over its task options (the run's own without any)."""
    if not options:
        return cfg
    cfg = cfg.copy()
    cfg.env.kwargs = OmegaConf.merge(cfg.env.kwargs or {}, options)
    return cfg


def given_options(options) -> str:
    """evaluate's env.kwargs as the user writes them: `env.kwargs.<key>=<value> ...`."""
    return " ".join(f"env.kwargs.{key}={value}" for key, value in options.items())


def check_same_interface(evaluated: EnvInfo, trained: EnvInfo, options) -> None:
    """Task options that change what the policy observes or commands are refused in one line."""
    if options and (evaluated.groups, evaluated.action_dim) != (trained.groups, trained.action_dim):
        raise UserError(
            f"evaluate: {given_options(options)} changes the task's observation or action layout"
            f" ({dict(evaluated.groups)}, {evaluated.action_dim} actions)"
            f" from the policy's ({dict(trained.groups)}, {trained.action_dim} actions); give only options that keep it"
        )


def eval_result(
    args: DictConfig, loaded: LoadedRun, seed: int, randomize: dict | None, evaluation: Evaluation, videos: list[str]
) -> dict[str, Any]:
    """eval.json's content: the run, the evaluation's settings (`randomize`: the randomize section
    evaluated under, None for the nominal robot) and its results."""
    returns, lengths = evaluation.returns, evaluation.lengths
    return {
        "run": str(loaded.run_dir),
        "checkpoint": str(loaded.checkpoint_path),
        "step": int(loaded.state["step"]),
        "task": loaded.cfg.task,
        "env_id": loaded.cfg.env.id,
        "episodes": args.episodes,
        "seed": seed,
        "deterministic": args.deterministic,
        "randomize": randomize,
        # task options evaluated under in place of the run's (evaluate's env.kwargs); {} for the run's own
        "env_kwargs": OmegaConf.to_container(args.env.kwargs),
        "return_mean": float(returns.mean()),
        "return_std": float(returns.std()),
        "return_min": float(returns.min()),
        "return_max": float(returns.max()),
        "length_mean": float(lengths.mean()),
        # episodes that ended by termination (a fall) before the time limit
        "fall_rate": float(evaluation.terminated.mean()),
        # each per-step diagnostic's mean over the episodes' steps: reward/<term>, tracking_error_lin (m/s),
        # tracking_error_ang (rad/s); response/<direction>: speed reached / speed commanded that way
        "diagnostics": evaluation.diagnostics,
        **task_return(evaluation.diagnostics, lengths),
        "returns": returns.tolist(),
        "lengths": lengths.tolist(),
        "videos": videos,
    }


def task_return(diagnostics: dict[str, float], lengths) -> dict[str, float]:
    """A named variant that trains on more than its task's reward (Go1's trot clock) reports the
    task's own reward per step (`task_reward`): over the episodes' steps it is the return that
    compares with the task's, {"task_return_mean": ...}; {} for a task without a variant."""
    if "task_reward" not in diagnostics:
        return {}
    return {"task_return_mean": float(diagnostics["task_reward"] * float(lengths.mean()))}


def print_task_measures(result: dict) -> None:
    """The lines a robot task adds to the table: its own return under a variant, its success measures."""
    if "task_return_mean" in result:
        print(f"task return {result['task_return_mean']:.1f}  (the task's own reward, without the variant's terms)")
    diagnostics = result["diagnostics"]
    success = {key[len("success/") :]: value for key, value in diagnostics.items() if key.startswith("success/")}
    for name, value in success.items():
        if not name.endswith("_at_end"):
            at_end = success.get(f"{name}_at_end")
            print(f"success     {name} {value:.3f} (mean per step)" + ("" if at_end is None else f", {at_end:.3f} at the episodes' ends"))


def main(argv: list[str]) -> None:
    result = evaluate_run(parse_command_args(EvaluateArgs, argv, "evaluate"))
    mode = "deterministic (mean action)" if result["deterministic"] else "stochastic (sampled actions)"
    print(f"run         {result['run']}")
    print(f"checkpoint  {result['checkpoint']} (step {result['step']:,})")
    print(f"policy      {mode}, seed {result['seed']}")
    print(f"episodes    {result['episodes']}")
    robot = "nominal" if result["randomize"] is None else "randomized " + json.dumps({k: v for k, v in result["randomize"].items() if v})
    print(f"robot       {robot}")
    if result["env_kwargs"]:
        print(f"task        {given_options(result['env_kwargs'])} over the run's options")
    print(
        f"return      {result['return_mean']:.1f} +- {result['return_std']:.1f}  "
        f"(min {result['return_min']:.1f}, max {result['return_max']:.1f})"
    )
    print(f"length      {result['length_mean']:.1f}")
    print(f"falls       {result['fall_rate']:.0%} of the episodes ended by termination before the time limit")
    print_task_measures(result)
    diagnostics = result["diagnostics"]
    if "tracking_error_lin" in diagnostics:
        print(
            f"tracking    {diagnostics['tracking_error_lin']:.3f} m/s (planar velocity), "
            f"{diagnostics['tracking_error_ang']:.3f} rad/s (yaw rate)"
        )
    response = {key[len("response/") :]: value for key, value in diagnostics.items() if key.startswith("response/")}
    if response:
        print("response    " + "  ".join(f"{name} {value:.2f}" for name, value in response.items()))
        print(f"            (speed reached / speed commanded, on steps commanding at least {RESPONSE_MIN_COMMAND} m/s or rad/s that way)")
    terms = {key[len("reward/") :]: value for key, value in diagnostics.items() if key.startswith("reward/")}
    if terms:
        width = max(len(name) for name in terms)
        print("reward terms (mean per step)")
        for name, value in terms.items():
            print(f"  {name:<{width}}  {value:+.4f}")
    for path in result["videos"]:
        print(f"video       {path}")
    print(f"written     {result['run']}/{EVAL_FILE}")
