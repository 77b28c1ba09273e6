"""python -m ppo_control.evaluate run=<run_dir> [checkpoint=<file>] [episodes=10] [seed=...] [video=true] [deterministic=true]
    [randomize.body_mass=[1.3,1.3] ...] [eval.randomize=true]

Rolls out the trained policy (mean action by default, normalizer frozen, raw rewards), prints a
table and writes <run_dir>/eval.json. The checkpoint and its statistics are only ever read. The robot
is the nominal one (or the run's own eval.randomize setting); `randomize.*` keys evaluate under
chosen perturbations, starting from the run's training randomization with eval.randomize=true.
"""

from __future__ import annotations

import json

from ppo_control.api import EVAL_FILE, evaluate
from ppo_control.config import EvaluateArgs, parse_command_args
from ppo_control.errors import run_cli


def main(argv: list[str]) -> None:
    args = parse_command_args(EvaluateArgs, argv, "evaluate")
    result = evaluate(**args)
    mode = "deterministic (mean action)" if result["deterministic"] else "stochastic (sampled actions)"
    print(f"run         {result['run']}")
    print(f"checkpoint  {result['checkpoint']} (step {result['step']:,})")
    print(f"policy      {mode}, seed {result['seed']}")
    print(f"episodes    {result['episodes']}")
    robot = "nominal" if result["randomize"] is None else "randomized " + json.dumps({k: v for k, v in result["randomize"].items() if v})
    print(f"robot       {robot}")
    print(
        f"return      {result['return_mean']:.1f} +- {result['return_std']:.1f}  "
        f"(min {result['return_min']:.1f}, max {result['return_max']:.1f})"
    )
    print(f"length      {result['length_mean']:.1f}")
    print(f"falls       {result['fall_rate']:.0%} of the episodes ended by termination before the time limit")
    diagnostics = result["diagnostics"]
    if "tracking_error_lin" in diagnostics:
        print(
            f"tracking    {diagnostics['tracking_error_lin']:.3f} m/s (planar velocity), "
            f"{diagnostics['tracking_error_ang']:.3f} rad/s (yaw rate)"
        )
    terms = {key[len("reward/") :]: value for key, value in diagnostics.items() if key.startswith("reward/")}
    if terms:
        width = max(len(name) for name in terms)
        print("reward terms (mean per step)")
        for name, value in terms.items():
            print(f"  {name:<{width}}  {value:+.4f}")
    for path in result["videos"]:
        print(f"video       {path}")
    print(f"written     {result['run']}/{EVAL_FILE}")


if __name__ == "__main__":
    run_cli(main)
