"""Where a joystick robot's falls come from, under a checkpoint's deterministic policy.

    python -m benchmarks.robots.falls run=<run dir> [checkpoint=last.pt] [sub_envs=64] [steps=3000] [seed=2000000] [out=<json>]
        [env_kwargs=[command_mean_s=5.0,...]]

The policy's mean action drives `sub_envs` sub-envs of the run's own env (the task's own reward and
resets, auto-reset after each episode; `env_kwargs` sets task options over the run's, as evaluate's
env.kwargs do) for `steps` control steps. Every fall is set against every
step by what the robot was doing when it fell:
- the command's direction (`bucket_of`: forward ... turn right, or "small") and its planar speed;
- how long since the command last changed (a new draw of the task's command process, or a reset),
  and how large that change was: its planar part (m/s) and its yaw part (rad/s); a reset counts as
  a change from a zero command;
- how long since the episode began.
A kind of moment that holds a larger share of the falls than of the steps is where the policy falls
(`falls_per_1000_steps` per kind). On a task whose privileged group holds the clean projected
gravity, each fall also tells which way the trunk tipped (the side of the body gravity points to,
the last step before the fall) and for how many steps it had been tilted more than TILTED_RAD
(a slow topple, or a trip). Prints one JSON object (or writes it to `out`).
"""

from __future__ import annotations

from functools import partial

import numpy as np
import torch
from omegaconf import OmegaConf

from benchmarks.common import parse_args, run_directory
from benchmarks.robots.checkpoint_rollout import emit_report, record_checkpoint
from benchmarks.robots.go1_forward_diagnosis import bucket_of
from ppo_control.config.errors import run_cli
from ppo_control.envs.observations import PRIVILEGED, element_positions
from ppo_control.robots import playground

DEFAULTS = {"run": None, "checkpoint": "last.pt", "sub_envs": 64, "steps": 3000, "seed": 2_000_000, "out": None, "env_kwargs": []}
# Bounds, in control steps, of the "since the command changed" and "since the episode began" bins.
SINCE_BINS = (0, 25, 50, 100, 250, 10**9)
CHANGE_EDGES = (0.5, 1.0, 1.5, 2.0)  # bins of a command change's size (m/s planar, rad/s yaw)
TILTED_RAD = 0.5  # about 30 degrees off upright
GRAVITY = ("gravity:x", "gravity:y", "gravity:z")


def gravity_columns(env_id: str, groups) -> list[int] | None:
    """Where the clean projected gravity (body frame; (0, 0, -1) upright) sits in the observation:
    the privileged group's `gravity:*` elements; None for a task without them."""
    privileged = element_positions(playground.robot_task(env_id).groups, groups).get(PRIVILEGED, {})
    return [privileged[name] for name in GRAVITY] if all(name in privileged for name in GRAVITY) else None


def record(policy, envs, where, steps: int, seed: int, gravity_of=None) -> dict[str, np.ndarray]:
    """Per step and sub-env [steps, sub_envs]: the command acted on, whether the step ended in a
    fall, the steps since the command changed and since the episode began, the size of that change
    ([steps, sub_envs, 2]: planar, yaw); with `gravity_of`
    (groups -> gravity_columns), the projected gravity the step acted on ([steps, sub_envs, 3])."""
    gravity = None if gravity_of is None else gravity_of(envs.info.groups)
    obs = envs.reset(seed=seed)
    n = obs.shape[0]
    since_change, since_reset = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    previous = None
    change = np.zeros((n, 2))
    rows: dict[str, list[np.ndarray]] = {"command": [], "fell": [], "since_change": [], "since_reset": [], "change": []}
    if gravity is not None:
        rows["gravity"] = []
    with torch.inference_mode():
        for _ in range(steps):
            command = where.commanded(obs)
            fresh = np.ones(n, dtype=bool) if previous is None else since_change < 0  # a reset: a change from a zero command
            before = np.where(fresh[:, None], 0.0, command if previous is None else previous)
            changed = fresh | np.any(np.abs(command - before) > 1e-6, axis=1)
            size = np.stack([np.linalg.norm(command[:, :2] - before[:, :2], axis=1), np.abs(command[:, 2] - before[:, 2])], axis=1)
            change = np.where(changed[:, None], size, change)
            if previous is not None:
                since_change = np.where(changed, 0, since_change + 1)
            rows["command"].append(command)
            rows["change"].append(change.copy())
            rows["since_change"].append(since_change.copy())
            rows["since_reset"].append(since_reset.copy())
            if gravity is not None:
                rows["gravity"].append(obs[:, gravity])
            action, _ = policy.deterministic_step(torch.as_tensor(obs))
            result = envs.step(action.numpy())
            rows["fell"].append(np.asarray(result.terminated, dtype=bool))
            ended = np.asarray(result.terminated | result.truncated, dtype=bool)
            since_reset = np.where(ended, 0, since_reset + 1)
            since_change = np.where(ended, -1, since_change)  # the next step's command is a new one
            previous, obs = command, result.obs
    return {name: np.stack(values) for name, values in rows.items()}


def rate_table(labels: np.ndarray, fell: np.ndarray) -> dict[str, dict[str, float]]:
    """Per label: its share of the steps, its share of the falls and its falls per 1000 steps."""
    table = {}
    for label in sorted(set(labels.tolist()), key=str):
        mask = labels == label
        table[str(label)] = {
            "share_of_steps": round(float(mask.mean()), 4),
            "share_of_falls": round(float(fell[mask].sum() / max(fell.sum(), 1)), 4),
            "falls_per_1000_steps": round(float(1000 * fell[mask].mean()), 3),
        }
    return table


def binned(values: np.ndarray, bins=SINCE_BINS) -> np.ndarray:
    """Each value's bin as a label: "25-49", or "250+" for the last, open one."""
    last = len(bins) - 2
    index = np.clip(np.searchsorted(bins, values, side="right") - 1, 0, last)
    return np.array([f"{bins[i]}+" if i == last else f"{bins[i]}-{bins[i + 1] - 1}" for i in index])


def size_bins(values: np.ndarray, edges=CHANGE_EDGES) -> np.ndarray:
    """Each value's bin as a label: "<0.5", "0.5-1.0" ... ">=2.0"."""
    names = [f"<{edges[0]}"] + [f"{a}-{b}" for a, b in zip(edges, edges[1:])] + [f">={edges[-1]}"]
    return np.array(names)[np.digitize(values, edges)]


def tipping(data: dict[str, np.ndarray]) -> dict:
    """Per fall: the side gravity points to in the body frame the step before (front: nose down;
    left: the left side down) and how many steps of its episode the trunk had been tilted more
    than TILTED_RAD by then."""
    gravity, since_reset = data["gravity"], data["since_reset"]
    tilted = np.arccos(np.clip(-gravity[..., 2], -1.0, 1.0)) > TILTED_RAD
    sides, durations = [], []
    for t, i in zip(*np.nonzero(data["fell"])):
        gx, gy = gravity[t, i, 0], gravity[t, i, 1]
        sides.append(("front" if gx > 0 else "back") if abs(gx) >= abs(gy) else ("left" if gy > 0 else "right"))
        steps = 0
        while steps <= since_reset[t, i] and tilted[t - steps, i]:
            steps += 1
        durations.append(steps)
    return {
        "tipped_toward": {side: sides.count(side) for side in ("front", "back", "left", "right")},
        "steps_tilted_before_falls": durations,
    }


def summarize(data: dict[str, np.ndarray]) -> dict:
    command = data["command"].reshape(-1, data["command"].shape[-1])
    fell = data["fell"].reshape(-1)
    speed = np.linalg.norm(command[:, :2], axis=1)
    speed_bins = np.digitize(speed, (0.25, 0.5, 0.75, 1.0, 1.25))
    speed_names = np.array(["<0.25", "0.25-0.5", "0.5-0.75", "0.75-1.0", "1.0-1.25", ">=1.25"])[speed_bins]
    return {
        "steps": int(fell.size),
        "falls": int(fell.sum()),
        "falls_per_1000_steps": round(float(1000 * fell.mean()), 3),
        "by_direction": rate_table(bucket_of(command), fell),
        "by_planar_speed_m_s": rate_table(speed_names, fell),
        "by_steps_since_the_command_changed": rate_table(binned(data["since_change"].reshape(-1)), fell),
        "by_steps_since_the_episode_began": rate_table(binned(data["since_reset"].reshape(-1)), fell),
        "by_planar_size_of_the_last_command_change_m_s": rate_table(size_bins(data["change"][..., 0].reshape(-1)), fell),
        "by_yaw_size_of_the_last_command_change_rad_s": rate_table(size_bins(data["change"][..., 1].reshape(-1)), fell),
        "yaw_rate_at_falls": round(float(np.abs(command[fell, 2]).mean()), 3) if fell.any() else None,
        "yaw_rate_overall": round(float(np.abs(command[:, 2]).mean()), 3),
        **(tipping(data) if "gravity" in data else {}),
    }


def main(argv: list[str]) -> None:
    args = parse_args(argv, DEFAULTS, __doc__)
    run = run_directory(args)
    env_id = str(OmegaConf.load(run / "config.yaml").env.id)
    _, data = record_checkpoint(run, args, partial(record, gravity_of=partial(gravity_columns, env_id)))
    emit_report({"run": str(run), "checkpoint": str(args["checkpoint"]), **summarize(data)}, args["out"])


if __name__ == "__main__":
    run_cli(main)
