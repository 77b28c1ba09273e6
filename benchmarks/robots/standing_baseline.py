"""What a robot that does nothing scores: a run's evaluation with every action zero (the default
pose held by the PD controller), on the same evaluation envs and seeds as `evaluate`.

    python -m benchmarks.robots.standing_baseline run=<run dir> [episodes=16]

The floor a joystick policy must beat: Playground's rewards pay for a held pose, so standing still
earns a large share of the return; the tracking error is what tells walking from standing.
"""

from __future__ import annotations

import json
import sys

import torch

from benchmarks.common import parse_args, run_directory

DEFAULTS = {"run": None, "episodes": 16}


def main(argv: list[str]) -> None:
    args = parse_args(argv, DEFAULTS, __doc__)
    run = run_directory(args)
    from ppo_control.envs.observations import needs_privileged
    from ppo_control.rl.evaluation import EVAL_SEED_OFFSET, evaluate_episodes, make_eval_envs
    from ppo_control.runs.directory import load_run
    from ppo_control.runs.layout import checkpoint_to_load

    loaded = load_run(run, checkpoint_to_load(run, None))
    cfg, policy = loaded.cfg, loaded.policy
    trained_step = policy.deterministic_step

    def hold_default_pose(obs, state):
        action, state = trained_step(obs, state)  # keeps a recurrent state's bookkeeping as in `evaluate`
        return torch.zeros_like(action), state

    policy.deterministic_step = hold_default_pose
    envs = make_eval_envs(cfg.env, int(args["episodes"]), None, needs_privileged(cfg.policy), "cpu")
    try:
        evaluation = evaluate_episodes(policy, envs, int(args["episodes"]), cfg.seed + EVAL_SEED_OFFSET)
    finally:
        envs.close()
    summary = {"run": str(run), "task": cfg.task, "episodes": int(args["episodes"]), **evaluation.summary(prefix="")}
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main(sys.argv[1:])
