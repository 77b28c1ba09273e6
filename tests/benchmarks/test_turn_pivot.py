"""benchmarks.robots.turn_pivot: the pivot of a turning trunk, and the feet's load shares."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from benchmarks.robots.turn_pivot import measure, parse_command, pivot_in_trunk_frame, trunk_motion
from ppo_control.config.errors import UserError
from ppo_control.envs.mujoco import make_reference_vec_env

FLAT = "Go1JoystickFlatTerrain-v1"


def test_the_pivot_is_the_point_that_stands_still():
    # turning left at 2 rad/s about (0.1, -0.05): the origin moves at w z x (origin - pivot)
    yaw_rate, pivot = 2.0, np.array([0.1, -0.05])
    velocity = yaw_rate * np.array([pivot[1], -pivot[0]])  # z x (-pivot) = (pivot_y, -pivot_x)
    np.testing.assert_allclose(pivot_in_trunk_frame(velocity[None], np.array([yaw_rate]))[0], pivot)


def test_the_pivot_of_the_mean_motion_is_that_of_the_mean_velocity_and_yaw_rate():
    from benchmarks.robots.turn_pivot import mean_pivot

    # two steps turning at 1 and 3 rad/s, the origin at 0.1 and 0.3 m/s along x: the mean motion,
    # 0.2 m/s at 2 rad/s, pivots 0.1 m to the origin's left (y = 0.1)
    np.testing.assert_allclose(mean_pivot(np.array([[0.1, 0.0, 1.0], [0.3, 0.0, 3.0]])), [0.0, 0.1])


def test_a_trunk_spun_about_its_imu_pivots_at_the_imu():
    """A robot in the air, spinning at 1 rad/s about a vertical axis through its IMU site: the
    measured pivot is the IMU's position in the trunk's frame, and the IMU does not move."""
    env = make_reference_vec_env(FLAT, 1, {"noise_level": 0.0})
    try:
        env.reset(0)
        task = env.task
        model = task.physics.model(0)
        imu_xy = model.site_pos[task.imu_site][:2]
        qpos, qvel = task.init_qpos.copy(), np.zeros(model.nv)
        qpos[2] += 0.3  # no contact to slow the spin
        qvel[0:2] = [imu_xy[1], -imu_xy[0]]  # the origin's velocity about the IMU: z x (-imu)
        qvel[5] = 1.0
        task.place(0, qpos, qvel, np.zeros(3), 100, np.random.default_rng(0))
        env.step(np.zeros((1, 12)))
        center, at_imu, yaw_rate = trunk_motion(model, task.physics.data[0], task.torso_body, task.imu_site)
    finally:
        env.close()
    assert yaw_rate == pytest.approx(1.0, abs=0.02)
    np.testing.assert_allclose(pivot_in_trunk_frame(center[None], np.array([yaw_rate]))[0], imu_xy, atol=0.005)
    np.testing.assert_allclose(at_imu, 0.0, atol=0.005)


class StandStill:
    def deterministic_action(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.zeros(obs.shape[0], 12)


def test_a_standing_robot_rests_on_all_four_feet_and_does_not_turn():
    """(Four feet on the ground share the weight indeterminately: how evenly depends on how the
    robot settled, so only that every foot carries some and neither side all of it.)"""
    env = make_reference_vec_env(FLAT, 2, {"noise_level": 0.0})
    try:
        (row,) = measure(StandStill(), env, [parse_command("0:0:1.0")], steps=40, warmup=20, seed=0)
    finally:
        env.close()
    assert row["falls"] == 0 and row["turning_steps"] == 0 and row["pivot_trunk_xy"] is None and row["pivot_of_mean_motion_xy"] is None
    assert sum(row["load_share"].values()) == pytest.approx(1.0, abs=1e-3)
    assert min(row["load_share"].values()) > 0.05 and 0.3 < row["load_share_right"] < 0.7


def test_a_command_that_is_not_three_numbers_is_refused():
    with pytest.raises(UserError, match="'0:1' is not vx:vy:wz"):
        parse_command("0:1")
