"""How many of a humanoid's falls the task's pushes cause: a run's deterministic policy on its task's
MuJoCo reference, the same evaluation episodes with the pushes as trained and with them off
(`env.kwargs.push_enable=false`), on the run's own evaluation seeds.

    python -m benchmarks.robots.push_falls run=<run dir> [checkpoint=<name>] [episodes=16]

For T1 (Playground's pushes: a kick of 0.1-1.0 m/s to the base every 5-10 s). A policy that falls
as often without pushes falls on its own gait; one that stays up without them needs push recovery.
"""

from __future__ import annotations

import json
import sys

from omegaconf import OmegaConf

from benchmarks.common import parse_args, run_directory

DEFAULTS = {"run": None, "checkpoint": None, "episodes": 16}


def main(argv: list[str]) -> None:
    args = parse_args(argv, DEFAULTS, __doc__)
    run = run_directory(args)
    from ppo_control.envs.observations import needs_privileged
    from ppo_control.rl.evaluation import EVAL_SEED_OFFSET, evaluate_episodes, make_eval_envs
    from ppo_control.runs.directory import load_run
    from ppo_control.runs.layout import checkpoint_to_load

    loaded = load_run(run, checkpoint_to_load(run, args["checkpoint"]))
    cfg, policy, episodes = loaded.cfg, loaded.policy, int(args["episodes"])
    rows = {}
    for pushes in (True, False):
        env_cfg = OmegaConf.merge(cfg.env, {"backend": "mujoco", "kwargs": {"push_enable": pushes}})
        envs = make_eval_envs(env_cfg, episodes, None, needs_privileged(cfg.policy), "cpu")
        try:
            evaluation = evaluate_episodes(policy, envs, episodes, cfg.seed + EVAL_SEED_OFFSET)
        finally:
            envs.close()
        summary = evaluation.summary(prefix="")
        rows["pushes on" if pushes else "pushes off"] = {
            key: summary[key] for key in ("return", "fall_rate", "length", "tracking_error_lin") if key in summary
        }
    print(json.dumps({"run": str(run), "checkpoint": loaded.checkpoint_path.name, "episodes": episodes, **rows}, indent=2))


if __name__ == "__main__":
    main(sys.argv[1:])
