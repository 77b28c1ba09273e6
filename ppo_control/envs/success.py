"""Whether a Playground robot does its task, per step, for the tasks a return alone does not explain
(the joystick tasks have theirs in joystick.py): read from the task's observation elements by
name, with the thresholds of Playground's own task code.

- Go1Getup: `standing`, 1 while the robot is upright and at its standing height: the gate of
  getup.py's stand-still reward (|gravity in the IMU frame - (0, 0, -1)|^2 < 0.01, the IMU at least
  0.275 - 0.005 m high). Its gravity is the policy's (noisy) element: the task has no clean one.
- PandaPickCube: `target_distance`, the box's distance (m) to its target, which pick.py places
  0.2-0.4 m above the table, and `at_target`, 1 while that distance is under 5 cm: the box was
  lifted and brought there.
- LeapCubeRotateZAxis: `cube_yaw_rate`, the cube's angular velocity about the world's z axis
  (rad/s), which rotate_z.py rewards; a drop ends the episode, so the share of drops is the
  evaluation's fall share.

Every backend that steps one of these tasks reports them as per-step diagnostics `success/<name>`;
an evaluation gives their mean over steps and, at the episodes' ends, the share that end in success.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ppo_control.envs import observations
from ppo_control.envs.observations import Groups
from ppo_control.robots import playground

PREFIX = "success/"
UPRIGHT_TOLERANCE = 0.01  # getup.py _is_upright's ori_tol
STANDING_HEIGHT_M = 0.275 - 0.005  # getup.py _z_des less _is_at_desired_height's pos_tol
AT_TARGET_M = 0.05


@dataclass(frozen=True)
class SuccessIndices:
    """Where a task's success is read in the observation vector, and which of the task's rules."""

    kind: str  # "getup", "pick" or "rotate"
    columns: dict[str, list[int]]

    def measures(self, obs: np.ndarray) -> dict[str, np.ndarray]:
        """The task's measures for every row of `obs`, float64, named `success/<name>`."""
        values = {name: obs[:, index].astype(np.float64) for name, index in self.columns.items()}
        if self.kind == "getup":
            upright = ((values["gravity"] - np.array([0.0, 0.0, -1.0])) ** 2).sum(axis=1) < UPRIGHT_TOLERANCE
            out = {"standing": (upright & (values["height"][:, 0] >= STANDING_HEIGHT_M)).astype(np.float64)}
        elif self.kind == "pick":
            distance = np.linalg.norm(values["target_minus_box"], axis=1)
            out = {"target_distance": distance, "at_target": (distance < AT_TARGET_M).astype(np.float64)}
        else:
            out = {"cube_yaw_rate": values["cube_angvel_z"][:, 0]}
        return {PREFIX + name: value for name, value in out.items()}


# Per task: its kind and, per measured quantity, the element names it reads.
_ELEMENTS = {
    "Go1Getup": ("getup", {"gravity": ("gravity:x", "gravity:y", "gravity:z"), "height": ("imu_pos:z",)}),
    "PandaPickCube": ("pick", {"target_minus_box": ("target_minus_box:x", "target_minus_box:y", "target_minus_box:z")}),
    "LeapCubeRotateZAxis": ("rotate", {"cube_angvel_z": ("cube_angvel:z",)}),
}


def element_positions(env_id: str, groups: Groups) -> dict[str, int]:
    """Every element of a robot task's observation -> its index in the observation vector (the
    first, for a name in two groups)."""
    positions: dict[str, int] = {}
    for by_name in observations.element_positions(playground.robot_task(env_id).groups, groups).values():
        for element, index in by_name.items():
            positions.setdefault(element, index)
    return positions


def success_indices(env_id: str, groups: Groups) -> SuccessIndices | None:
    """The success layout of `env_id` (None for a task without one here)."""
    task = playground.robot_task(env_id)
    if task is None or task.name not in _ELEMENTS:
        return None
    kind, quantities = _ELEMENTS[task.name]
    positions = element_positions(env_id, groups)
    if any(e not in positions for elements in quantities.values() for e in elements):
        return None  # a group it reads is not in this env's observation
    return SuccessIndices(kind, {name: [positions[e] for e in elements] for name, elements in quantities.items()})
