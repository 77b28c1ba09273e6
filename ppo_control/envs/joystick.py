"""The joystick metrics of Playground's velocity-command tasks (Go1, Spot, G1, T1, ... joystick):
where a task's command and the clean measurement of what it commands sit in the observation vector
(`tracking_indices`, from the task's element names), the velocity tracking error per step
(`tracking_errors`), and per direction of the command how much of it the robot achieves
(`command_response`). Every backend that steps a joystick task reports them as per-step
diagnostics; evaluation, videos and sim2sim read them the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ppo_control.envs.observations import POLICY, PRIVILEGED, element_positions
from ppo_control.robots import playground


@dataclass(frozen=True)
class TrackingIndices:
    """Where a joystick task's command and the clean measurements of what it commands sit in the
    observation vector: linear (x, y) and yaw rate."""

    command_lin: list[int]
    measured_lin: list[int]
    command_ang: int
    measured_ang: int

    def commanded(self, obs: np.ndarray) -> np.ndarray:
        """The command of every row of `obs`: vx, vy, wz, [n, 3]."""
        return obs[:, [*self.command_lin, self.command_ang]]

    def measured(self, obs: np.ndarray) -> np.ndarray:
        """The measured velocity it commands: vx, vy, wz, [n, 3]."""
        return obs[:, [*self.measured_lin, self.measured_ang]]


def tracking_indices(env_id: str, groups) -> TrackingIndices | None:
    """The tracking layout of a joystick task from its element names; None for other tasks."""
    task = playground.robot_task(env_id)
    if task is None or not task.tracking:
        return None
    position = element_positions(task.groups, groups)  # group -> element name -> index in the observation vector
    if PRIVILEGED not in position:
        return None
    lin = [command for command in task.tracking if command != "command:wz"]
    return TrackingIndices(
        command_lin=[position[POLICY][command] for command in lin],
        measured_lin=[position[PRIVILEGED][task.tracking[command]] for command in lin],
        command_ang=position[POLICY]["command:wz"],
        measured_ang=position[PRIVILEGED][task.tracking["command:wz"]],
    )


def tracking_errors(obs: np.ndarray, where: TrackingIndices) -> dict[str, np.ndarray]:
    """Commanded against measured base velocity, per sub-env: the norm of the planar linear
    velocity error (m/s) and the absolute yaw-rate error (rad/s)."""
    lin = np.linalg.norm(obs[:, where.command_lin] - obs[:, where.measured_lin], axis=1)
    ang = np.abs(obs[:, where.command_ang] - obs[:, where.measured_ang])
    out = {"tracking_error_lin": lin.astype(np.float64), "tracking_error_ang": ang.astype(np.float64)}
    out.update(command_response(obs, where))
    return out


# The directions of a joystick command, as (name, which component, sign): a mean tracking error
# can hide a direction the robot never moves in (it stands still when told to go forward).
RESPONSE_DIRECTIONS = (
    ("forward", 0, 1.0),
    ("backward", 0, -1.0),
    ("left", 1, 1.0),
    ("right", 1, -1.0),
    ("turn_left", 2, 1.0),
    ("turn_right", 2, -1.0),
)
RESPONSE_MIN_COMMAND = 0.3  # m/s or rad/s: smaller commands are within what a standing robot drifts


def command_response(obs: np.ndarray, where: TrackingIndices) -> dict[str, np.ndarray]:
    """Per direction, the parts of `response/<direction>`: the speed measured along it over the speed
    commanded, on the steps that command at least RESPONSE_MIN_COMMAND that way (1: follows, 0:
    stands still, negative: goes the other way)."""
    command = where.commanded(obs).astype(np.float64)
    measured = where.measured(obs).astype(np.float64)
    out = {}
    for name, k, sign in RESPONSE_DIRECTIONS:
        asked = sign * command[:, k]
        mask = asked >= RESPONSE_MIN_COMMAND
        out[f"response/{name}/achieved"] = np.where(mask, sign * measured[:, k], 0.0)
        out[f"response/{name}/commanded"] = np.where(mask, asked, 0.0)
    return out
