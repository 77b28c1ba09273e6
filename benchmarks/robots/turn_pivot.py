"""Where a quadruped joystick policy turns about, and which feet carry its weight, under held commands.

    python -m benchmarks.robots.turn_pivot run=<run dir> [checkpoint=last.pt] [sub_envs=16] [steps=500]
        [warmup=100] [seed=3000000] [commands=[0:0:1.0,0:0:-1.0,0.8:0:0]] [out=<json>] [env_kwargs=[...]]

The checkpoint's mean action drives `sub_envs` sub-envs of the run's task on its MuJoCo reference
(which exposes the physics), each `commands` entry (vx:vy:wz) held for `steps` control steps from a
reset, the first `warmup` of them left out. Per command:
- `pivot_trunk_xy`: the median over steps (those turning at more than MIN_YAW_RATE) of the point
  of the trunk's horizontal plane whose planar velocity vanishes, in the trunk's frame (x forward,
  y left, metres from the frame origin amid the hips), beside the IMU site's position: Playground's
  Go1 scores the planar velocity at its IMU, so a turn in place that earns the most pivots there;
  `pivot_of_mean_motion_xy`: the same point from the mean velocity and mean yaw rate over those
  steps, the centre of the turn as a whole (a stepping gait's instantaneous pivot jumps about);
- `load_share`: each foot's share of the feet's summed contact normal force, and the right side's;
- `imu_planar_velocity`, `trunk_center_planar_velocity`: their means in the trunk's frame;
- `falls`.
"""

from __future__ import annotations

import mujoco
import numpy as np
import torch

from benchmarks.common import parse_args, run_directory
from benchmarks.robots.checkpoint_rollout import emit_report, record_checkpoint
from ppo_control.config.errors import UserError, run_cli

DEFAULTS = {
    "run": None,
    "checkpoint": "last.pt",
    "sub_envs": 16,
    "steps": 500,
    "warmup": 100,
    "seed": 3_000_000,
    "commands": ["0:0:1.0", "0:0:-1.0", "0.8:0:0"],
    "out": None,
    "env_kwargs": [],
}
MIN_YAW_RATE = 0.3  # rad/s: below it the pivot is far off and says nothing


def pivot_in_trunk_frame(planar_velocity: np.ndarray, yaw_rate: np.ndarray) -> np.ndarray:
    """The point of the trunk's plane that stands still while its frame origin moves at
    `planar_velocity` ([n, 2], trunk frame) and it turns at `yaw_rate` ([n]): from
    v = w z x (origin - pivot), the pivot is (-vy / w, vx / w) in the trunk's frame, [n, 2]."""
    return np.stack([-planar_velocity[:, 1] / yaw_rate, planar_velocity[:, 0] / yaw_rate], axis=1)


def trunk_motion(model, data, trunk: int, site: int) -> tuple[np.ndarray, np.ndarray, float]:
    """(planar velocity of the trunk's frame origin, of `site`, both in the trunk's frame; the yaw
    rate about the trunk's z axis) of one MjData."""
    com, at_site = np.zeros(6), np.zeros(6)
    mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_BODY, trunk, com, 0)  # at the body's centre of mass, world frame
    mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_SITE, site, at_site, 0)
    rotation = data.xmat[trunk].reshape(3, 3)
    origin = com[3:] + np.cross(com[:3], data.xpos[trunk] - data.xipos[trunk])
    return (rotation.T @ origin)[:2], (rotation.T @ at_site[3:])[:2], float((rotation.T @ com[:3])[2])


def mean_pivot(turning: np.ndarray) -> list[float] | None:
    """The pivot of the mean motion of rows (vx, vy, yaw rate); None without rows."""
    if not len(turning):
        return None
    mean = turning.mean(axis=0)
    return pivot_in_trunk_frame(mean[None, :2], mean[2:3])[0].round(4).tolist()


def feet_normal_forces(model, data, feet_geoms: np.ndarray) -> np.ndarray:
    """The summed contact normal force on each of `feet_geoms`."""
    forces, wrench = np.zeros(len(feet_geoms)), np.zeros(6)
    for k in range(data.ncon):
        geoms = data.contact[k].geom
        for j, geom in enumerate(feet_geoms):
            if geom in (geoms[0], geoms[1]):
                mujoco.mj_contactForce(model, data, k, wrench)
                forces[j] += abs(wrench[0])
    return forces


def parse_command(text: str) -> np.ndarray:
    parts = text.split(":")
    try:
        command = np.array([float(part) for part in parts])
    except ValueError:
        command = np.array([])
    if command.shape != (3,):
        raise UserError(f"commands: {text!r} is not vx:vy:wz (three numbers)")
    return command


def measure(policy, envs, commands: list[np.ndarray], steps: int, warmup: int, seed: int) -> list[dict]:
    """Per command, held in every sub-env from a reset: the figures the module describes."""
    task = envs.task
    model = task.physics.model(0)
    trunk, imu = task.torso_body, task.imu_site
    feet_geoms = np.array([model.geom(foot).id for foot in task.FEET])
    report = []
    for command in commands:
        obs = envs.reset(seed=seed)
        turning, loads, imu_velocity, center_velocity, falls = [], [], [], [], 0
        for t in range(steps):
            task.command[:] = command  # held: the countdown never runs out, a fall's resample is undone
            task.steps_until_next_cmd[:] = steps + 1
            with torch.inference_mode():
                action = policy.deterministic_action(torch.as_tensor(obs))
            result = envs.step(action.numpy())
            obs = result.obs
            falls += int(result.terminated.sum())
            if t < warmup:
                continue
            for i in np.flatnonzero(~result.terminated):
                data = task.physics.data[i]
                center, at_imu, yaw_rate = trunk_motion(model, data, trunk, imu)
                center_velocity.append(center)
                imu_velocity.append(at_imu)
                if abs(yaw_rate) > MIN_YAW_RATE:
                    turning.append([*center, yaw_rate])
                loads.append(feet_normal_forces(model, data, feet_geoms))
        turning_rows = np.array(turning).reshape(-1, 3)  # vx, vy, yaw rate of the turning steps
        pivots = pivot_in_trunk_frame(turning_rows[:, :2], turning_rows[:, 2])
        load = np.array(loads)
        share = (load / np.maximum(load.sum(axis=1, keepdims=True), 1e-9)).mean(axis=0)
        right = [j for j, foot in enumerate(task.FEET) if foot.endswith("R")]
        report.append(
            {
                "command": command.tolist(),
                "falls": falls,
                "pivot_trunk_xy": np.median(pivots, axis=0).round(4).tolist() if len(pivots) else None,
                "pivot_of_mean_motion_xy": mean_pivot(turning_rows),
                "turning_steps": len(pivots),
                "imu_site_xy": model.site_pos[imu][:2].round(4).tolist(),
                "load_share": {foot: round(float(share[j]), 4) for j, foot in enumerate(task.FEET)},
                "load_share_right": round(float(share[right].sum()), 4),
                "imu_planar_velocity": np.mean(imu_velocity, axis=0).round(4).tolist(),
                "trunk_center_planar_velocity": np.mean(center_velocity, axis=0).round(4).tolist(),
            }
        )
    return report


def main(argv: list[str]) -> None:
    args = parse_args(argv, DEFAULTS, __doc__)
    run = run_directory(args)
    commands = [parse_command(str(text)) for text in args["commands"]]

    def record(policy, envs, where, steps, seed):
        return measure(policy, envs, commands, steps, int(args["warmup"]), seed)

    _, report = record_checkpoint(run, args, record, backend="mujoco")
    emit_report({"run": str(run), "checkpoint": str(args["checkpoint"]), "by_command": report}, args["out"])


if __name__ == "__main__":
    run_cli(main)
