"""What the clipped reward pays a joystick robot for moving along its command against standing, under
a checkpoint's sampled (training) policy.

    python -m benchmarks.robots.moving_vs_standing run=<run dir> checkpoint=<file in checkpoints/> [sub_envs=64] [steps=600] [out=<json>]
        [env_kwargs=[key=value,...]]

The policy drives `sub_envs` sub-envs of the run's own env (`env_kwargs`: task options over the
run's, as evaluate's env.kwargs) for `steps` control steps with sampled actions. Steps under a
planar command (forward, backward, left or right: at least the response's threshold) are split by
what the robot did along the commanded axis: "moving" (more than half the commanded speed) and
"standing" (within 15% of zero). Per group: its share of all steps, the mean of each reward term (as
the env reports it, scaled), the sum of the terms with positive and with negative scales, the
unclipped reward (the sum times the control period), the task's clipped reward and the share of
steps the clip zeroed. Prints one JSON object (or writes it to `out`).
"""

from __future__ import annotations

import numpy as np
import torch

from benchmarks.common import parse_args, run_directory
from benchmarks.robots.checkpoint_rollout import emit_report, record_checkpoint
from benchmarks.robots.go1_forward_diagnosis import bucket_of
from ppo_control.config.errors import run_cli

DEFAULTS = {"run": None, "checkpoint": "last.pt", "sub_envs": 64, "steps": 600, "out": None, "seed": 3_000_000, "env_kwargs": []}
PLANAR = ("forward", "backward", "left", "right")
MOVING, STANDING = 0.5, 0.15  # the fraction of the commanded speed reached along its axis


def record(policy, envs, where, steps: int, seed: int) -> dict[str, np.ndarray]:
    """Every step's command, measured velocity, reward and reported terms, [steps * sub_envs]."""
    torch.manual_seed(seed)
    obs = envs.reset(seed=seed)
    rows: dict[str, list[np.ndarray]] = {"command": [], "measured": [], "reward": []}
    with torch.inference_mode():
        for _ in range(steps):
            action, _ = policy.sample_action(torch.as_tensor(obs))
            rows["command"].append(where.commanded(obs))
            result = envs.step(policy.env_action(action).numpy())
            ended = (result.terminated | result.truncated)[:, None]
            rows["measured"].append(where.measured(np.where(ended, result.final_obs, result.obs)))
            rows["reward"].append(result.reward.astype(np.float64))
            for name, value in result.diagnostics.items():
                if name.startswith("reward/"):
                    rows.setdefault(name[len("reward/") :], []).append(np.asarray(value, dtype=np.float64))
            obs = result.obs
    return {name: np.concatenate(values) for name, values in rows.items()}


def group_summary(data: dict[str, np.ndarray], mask: np.ndarray, scales: dict[str, float], control_period_s: float) -> dict:
    terms = {name: float(data[name][mask].mean()) for name in scales if name in data}
    unclipped = sum(data[name][mask] for name in terms) * control_period_s
    return {
        "share_of_steps": float(mask.mean()),
        "reward_terms": {name: round(value, 4) for name, value in terms.items()},
        "positive_terms": sum(value for name, value in terms.items() if scales[name] >= 0),
        "penalty_terms": sum(value for name, value in terms.items() if scales[name] < 0),
        "unclipped_reward": float(unclipped.mean()),
        "clipped_reward": float(data["reward"][mask].mean()),
        "zeroed_by_the_clip": float((unclipped <= 0).mean()),
    }


def summarize(data: dict[str, np.ndarray], scales: dict[str, float], control_period_s: float) -> dict:
    command, measured = data["command"], data["measured"]
    planar = np.isin(bucket_of(command), PLANAR)
    axis = np.abs(command[:, :2]).argmax(axis=1)
    rows = np.arange(len(command))
    commanded = np.where(planar, command[rows, axis], 1.0)
    along = measured[rows, axis] / commanded
    groups = {"moving": planar & (along > MOVING), "standing": planar & (np.abs(along) < STANDING)}
    return {name: group_summary(data, mask, scales, control_period_s) for name, mask in groups.items() if mask.any()}


def main(argv: list[str]) -> None:
    args = parse_args(argv, DEFAULTS, __doc__)
    run = run_directory(args)
    from ppo_control.envs import reward_term_scales

    loaded, data = record_checkpoint(run, args, record)
    scales, control_period_s = reward_term_scales(loaded.cfg.env)
    report = {"run": str(run), "checkpoint": str(args["checkpoint"]), **summarize(data, scales, control_period_s)}
    emit_report(report, args["out"])


if __name__ == "__main__":
    run_cli(main)
