"""How many of a humanoid's falls the task's pushes cause: a run's deterministic policy on its task's
MuJoCo reference, the same evaluation episodes with the pushes as trained and with them off
(`env.kwargs.push_enable=false`), on the run's own evaluation seeds.

    python -m benchmarks.robots.push_falls run=<run dir> [checkpoint=<name>] [episodes=16]

For T1 (Playground's pushes: a kick of 0.1-1.0 m/s to the base every 5-10 s). A policy that falls
as often without pushes falls on its own gait; one that stays up without them needs push recovery.
Each fall is listed with its step in the episode, the steps since its command last changed, and
the command before and after that change: a fall soon after a reset or a change is a transition's.
"""

from __future__ import annotations

import json
import sys

import numpy as np
from omegaconf import OmegaConf

from benchmarks.common import parse_args, run_directory

DEFAULTS = {"run": None, "checkpoint": None, "episodes": 16}


class FallLog:
    """Wraps a reference VecEnv's step to list the falls of the episodes an evaluation counts
    (`quota` per sub-env) with the command's recent history."""

    def __init__(self, envs, quota: np.ndarray) -> None:
        self.envs, self.step_of_env, self.falls, self.quota = envs, envs.step, [], quota
        self.finished = np.zeros(envs.num_envs, dtype=int)
        self.command = envs.task.command
        n = envs.num_envs
        self.steps, self.since_change = np.zeros(n, dtype=int), np.zeros(n, dtype=int)
        self.previous = np.full((n, self.command.shape[1]), np.nan)
        envs.step = self.step

    def step(self, actions):
        acted = self.command.copy()
        out = self.step_of_env(actions)
        self.steps += 1
        self.since_change += 1
        for i in np.flatnonzero(out.terminated & (self.finished < self.quota)):
            self.falls.append(
                {
                    "episode_step": int(self.steps[i]),
                    "steps_since_command_change": int(self.since_change[i]),
                    "command": np.round(acted[i], 2).tolist(),
                    "command_before": None if np.isnan(self.previous[i]).any() else np.round(self.previous[i], 2).tolist(),
                }
            )
        ended = out.terminated | out.truncated
        self.finished += ended
        changed = ~ended & np.any(self.command != acted, axis=1)
        self.previous[changed] = acted[changed]
        self.previous[ended] = np.nan
        self.steps[ended] = 0
        self.since_change[ended | changed] = 0
        return out


def main(argv: list[str]) -> None:
    args = parse_args(argv, DEFAULTS, __doc__)
    run = run_directory(args)
    from ppo_control.envs.observations import needs_privileged
    from ppo_control.rl.episodes import Episodes
    from ppo_control.rl.evaluation import EVAL_SEED_OFFSET, evaluate_episodes, make_eval_envs
    from ppo_control.runs.directory import load_run
    from ppo_control.runs.layout import checkpoint_to_load

    loaded = load_run(run, checkpoint_to_load(run, args["checkpoint"]))
    cfg, policy, episodes = loaded.cfg, loaded.policy, int(args["episodes"])
    rows = {}
    for pushes in (True, False):
        env_cfg = OmegaConf.merge(cfg.env, {"backend": "mujoco", "kwargs": {"push_enable": pushes}})
        envs = make_eval_envs(env_cfg, episodes, None, needs_privileged(cfg.policy), "cpu")
        log = FallLog(envs, Episodes.spread(episodes, envs.num_envs).quota)
        try:
            evaluation = evaluate_episodes(policy, envs, episodes, cfg.seed + EVAL_SEED_OFFSET)
        finally:
            envs.close()
        summary = evaluation.summary(prefix="")
        rows["pushes on" if pushes else "pushes off"] = {
            key: summary[key] for key in ("return", "fall_rate", "length", "tracking_error_lin") if key in summary
        } | {"falls": log.falls}
    print(json.dumps({"run": str(run), "checkpoint": loaded.checkpoint_path.name, "episodes": episodes, **rows}, indent=2))


if __name__ == "__main__":
    main(sys.argv[1:])
