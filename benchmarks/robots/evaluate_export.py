"""An exported policy's evaluation on the env it was trained on: `evaluate`'s numbers (return, falls,
per-term rewards, a task's success measures) from the export file alone, for a run whose
checkpoints are gone but whose committed result keeps its config and export.

    python -m benchmarks.robots.evaluate_export run=<dir with config.yaml and export/policy.pt>
        [export=<file>] [episodes=16] [zero_actions=false] [out=<json>]

The envs, their seeds and the episode assignment are `evaluate`'s (the task's reference backend,
the run's seed plus the evaluation offset), so a run's export scores what its checkpoint does
within the export's float tolerance. Unlike `sim2sim`, which drives the export through a
controller on the MuJoCo reference, the export here reads the backend's own observation: it
checks the policy, not the deployment. Exports without state only (no history, no recurrence).
`zero_actions=true`: every action zero (the default pose held), `standing_baseline`'s floor for a
run whose checkpoints are gone.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from benchmarks.common import parse_args, run_directory, write_json

DEFAULTS = {"run": None, "export": "", "episodes": 16, "zero_actions": False, "out": ""}


def evaluate_export(run: Path, export: Path, episodes: int, zero_actions: bool = False) -> dict:
    """The evaluation summary (`Evaluation.summary`'s keys, unprefixed) of `export` on the run's
    evaluation envs."""
    from omegaconf import OmegaConf

    from ppo_control.deploy.loading import load_policy
    from ppo_control.envs.observations import group_index, needs_privileged
    from ppo_control.rl.episodes import PolicyMemory, numpy_act
    from ppo_control.rl.evaluation import EVAL_SEED_OFFSET, evaluate_act, make_eval_envs
    from ppo_control.runs.layout import CONFIG_FILE

    cfg = OmegaConf.load(run / CONFIG_FILE)
    policy = load_policy(export)
    if int(policy.metadata.get("history", 1)) > 1 or policy.metadata.get("rnn", "none") != "none":
        # its state is the whole batch's, restarted together, where sub-envs end episodes apart
        print(f"error: {export} keeps observation history or a recurrent state; evaluate its run, or run sim2sim on it", file=sys.stderr)
        raise SystemExit(2)
    # The privileged group, as in training, so that measures read from it (Go1Getup's height) exist.
    envs = make_eval_envs(cfg.env, episodes, None, needs_privileged(cfg.policy), "cpu")
    try:
        actor = group_index(envs.info.groups, list(cfg.policy.actor_obs), "policy.actor_obs")
        actions = policy if actor is None else lambda obs: policy(obs[:, actor])
        act = numpy_act((lambda obs: 0.0 * actions(obs)) if zero_actions else actions)
        evaluation = evaluate_act(envs, act, PolicyMemory(), episodes, int(cfg.seed) + EVAL_SEED_OFFSET)
    finally:
        envs.close()
    policy_name = "zero actions" if zero_actions else str(export)
    return {"run": str(run), "policy": policy_name, "task": str(cfg.task), "episodes": episodes, **evaluation.summary(prefix="")}


def main(argv: list[str]) -> None:
    args = parse_args(argv, DEFAULTS, __doc__)
    run = run_directory(args)
    export = Path(args["export"]) if args["export"] else run / "export" / "policy.pt"
    for path, what in ((run / "config.yaml", "the run's config"), (export, "the export")):
        if not path.is_file():
            print(f"error: {path} ({what}) does not exist; give run=<dir with config.yaml> and export=<policy file>", file=sys.stderr)
            raise SystemExit(2)
    summary = evaluate_export(run, export, int(args["episodes"]), bool(args["zero_actions"]))
    if args["out"]:
        write_json(Path(args["out"]), summary)
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main(sys.argv[1:])
