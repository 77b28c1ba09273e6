"""python -m ppo_control.evaluate run=<run_dir> [checkpoint=<file>] [episodes=10] [seed=...] [video=true] [deterministic=true]

Rolls out the trained policy (mean action by default, normalizer frozen, raw rewards), prints a
table and writes <run_dir>/eval.json. The checkpoint and its statistics are only ever read.
"""

from __future__ import annotations

import json

from ppo_control.checkpoint import atomic_write
from ppo_control.config import ConfigError, EvaluateArgs, parse_command_args
from ppo_control.errors import UserError, run_cli

EVAL_FILE = "eval.json"


def main(argv: list[str]) -> None:
    args = parse_command_args(EvaluateArgs, argv, "evaluate")
    if args.episodes < 1:
        raise ConfigError(f"evaluate: episodes={args.episodes} is not allowed: episodes must be >= 1")
    from ppo_control.evaluation import EVAL_SEED_OFFSET, evaluate_policy, make_eval_envs  # heavy imports after parsing
    from ppo_control.runs import load_run
    from ppo_control.video import record_videos, video_directory

    run = load_run(args.run, args.checkpoint)
    cfg = run.cfg
    seed = args.seed if args.seed is not None else cfg.seed + EVAL_SEED_OFFSET
    envs = make_eval_envs(cfg.env, args.episodes)
    try:
        returns, lengths = evaluate_policy(run.policy, envs, args.episodes, seed, deterministic=args.deterministic)
    finally:
        envs.close()
    videos: list[str] = []
    if args.video:
        directory = video_directory(args.video_dir or cfg.eval.video_dir, cfg.task, run.name)
        paths = record_videos(run.policy, cfg.env, directory, int(run.state["step"]), cfg.eval.video_episodes, seed,
                              cfg.eval.video_width, cfg.eval.video_height, cfg.eval.video_fps)
        videos = [str(p) for p in paths]

    result = {
        "run": str(run.run_dir),
        "checkpoint": str(run.checkpoint_path),
        "step": int(run.state["step"]),
        "task": cfg.task,
        "env_id": cfg.env.id,
        "episodes": args.episodes,
        "seed": seed,
        "deterministic": args.deterministic,
        "return_mean": float(returns.mean()),
        "return_std": float(returns.std()),
        "return_min": float(returns.min()),
        "return_max": float(returns.max()),
        "length_mean": float(lengths.mean()),
        "returns": returns.tolist(),
        "lengths": lengths.tolist(),
        "videos": videos,
    }
    try:
        atomic_write(run.run_dir / EVAL_FILE, lambda tmp: tmp.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"cannot write {run.run_dir / EVAL_FILE}: {exc.strerror}") from None

    mode = "deterministic (mean action)" if args.deterministic else "stochastic (sampled actions)"
    print(f"run         {run.run_dir}")
    print(f"checkpoint  {run.checkpoint_path} (step {result['step']:,})")
    print(f"policy      {mode}, seed {seed}")
    print(f"episodes    {args.episodes}")
    print(f"return      {result['return_mean']:.1f} +- {result['return_std']:.1f}  (min {result['return_min']:.1f}, max {result['return_max']:.1f})")
    print(f"length      {result['length_mean']:.1f}")
    for path in videos:
        print(f"video       {path}")
    print(f"written     {run.run_dir / EVAL_FILE}")


if __name__ == "__main__":
    run_cli(main)
