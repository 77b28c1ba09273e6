"""Success measures of the robot tasks a return alone does not explain (ppo_control/envs/success.py):
read by element name, with Playground's own thresholds, and reported by envpool's robots as
per-step diagnostics."""

from __future__ import annotations

import numpy as np
import pytest

from ppo_control.config import compose
from ppo_control.envs import make_vec_env
from ppo_control.envs.success import AT_TARGET_M, STANDING_HEIGHT_M, element_positions, success_indices
from ppo_control.robots import playground as pg


def _row(env_id: str, groups, **elements: float) -> np.ndarray:
    positions = element_positions(env_id, groups)
    obs = np.zeros((1, sum(size for _, size in groups)), dtype=np.float32)
    for name, value in elements.items():
        obs[0, positions[name.replace("__", ":")]] = value
    return obs


GETUP = (("policy", 42), ("privileged", 91))


@pytest.mark.parametrize(
    ("gravity", "height", "standing"),
    [
        ((0.0, 0.0, -1.0), 0.28, 1.0),
        ((0.0, 0.0, -1.0), STANDING_HEIGHT_M - 0.01, 0.0),  # upright, still crouched
        ((0.0, 0.2, -0.98), 0.28, 0.0),  # at height, tilted past Playground's tolerance
        ((0.0, 0.0, 1.0), 0.28, 0.0),  # upside down
    ],
)
def test_go1_getup_stands_when_upright_at_its_height(gravity, height, standing):
    where = success_indices("Go1Getup-v1", GETUP)
    gx, gy, gz = gravity
    obs = _row("Go1Getup-v1", GETUP, gravity__x=gx, gravity__y=gy, gravity__z=gz, imu_pos__z=height)
    assert where.measures(obs) == {"success/standing": pytest.approx([standing])}


def test_panda_is_at_its_target_within_5_cm_of_it():
    groups = (("policy", 66),)
    where = success_indices("PandaPickCube-v1", groups)
    near = where.measures(_row("PandaPickCube-v1", groups, target_minus_box__x=0.03, target_minus_box__z=0.03))
    far = where.measures(_row("PandaPickCube-v1", groups, target_minus_box__z=AT_TARGET_M + 0.01))
    assert near["success/target_distance"][0] == pytest.approx(0.03 * 2**0.5, rel=1e-6) and near["success/at_target"][0] == 1.0
    assert far["success/at_target"][0] == 0.0


def test_tasks_without_a_measure_or_without_the_group_it_reads_have_none():
    assert success_indices("Go1JoystickFlatTerrain-v1", (("policy", 48), ("privileged", 123))) is None  # its own: joystick.py
    assert success_indices("Hopper-v5", (("policy", 11),)) is None
    assert success_indices("Go1Getup-v1", (("policy", 42),)) is None  # the height is privileged


@pytest.mark.parametrize(
    ("task", "keys", "column"),
    [
        ("Go1Getup", {"success/standing"}, None),
        ("PandaPickCube", {"success/target_distance", "success/at_target"}, None),
        ("LeapCubeRotateZAxis", {"success/cube_yaw_rate"}, "cube_angvel:z"),
    ],
)
def test_envpools_robots_report_their_measures_per_step(task, keys, column):
    cfg = compose([f"task={task}"])
    envs = make_vec_env(cfg.env, num_envs=2)
    try:
        envs.reset(seed=0)
        for _ in range(5):
            result = envs.step(np.zeros((2, envs.info.action_dim), dtype=np.float32))
        groups = envs.info.groups
    finally:
        envs.close()
    assert {key for key in result.diagnostics if key.startswith("success/")} == keys
    assert all(result.diagnostics[key].shape == (2,) for key in keys)
    if column is not None:
        index = element_positions(pg.robot_task(task).env_id, groups)[column]
        np.testing.assert_allclose(result.diagnostics["success/cube_yaw_rate"], result.obs[:, index], rtol=1e-6)
