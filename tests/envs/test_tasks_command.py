"""python -m ppo_control.tasks: one row per task file, with the env's real sizes and control period."""

from __future__ import annotations

import pytest

from ppo_control.config import available_tasks
from ppo_control.envs.catalog import TaskInfo, list_tasks, task_info
from tests.helpers import ROOT, run_module

POSITIONS_ONLY = "ppo_control.envs.partial_observation:positions_only"
# name: (env id, obs dim, action dim, dt) of Gymnasium's MuJoCo v5 envs with the task file's kwargs
EXPECTED = {
    "Ant": ("Ant-v5", 27, 8, 0.05),  # tasks/Ant.yaml leaves out the contact forces (105 with them)
    "HalfCheetah": ("HalfCheetah-v5", 17, 6, 0.05),
    "Hopper": ("Hopper-v5", 11, 3, 0.008),
    "Humanoid": ("Humanoid-v5", 348, 17, 0.015),
    "HumanoidStandup": ("HumanoidStandup-v5", 348, 17, 0.015),
    "InvertedDoublePendulum": ("InvertedDoublePendulum-v5", 9, 1, 0.05),
    "InvertedPendulum": ("InvertedPendulum-v5", 4, 1, 0.04),
    "Pusher": ("Pusher-v5", 23, 7, 0.05),
    "Reacher": ("Reacher-v5", 10, 2, 0.02),
    "Swimmer": ("Swimmer-v5", 8, 2, 0.04),
    "Walker2d": ("Walker2d-v5", 17, 6, 0.008),
    # partially observed: joint positions only (ppo_control/envs/partial_observation.py)
    "HopperPositionsOnly": (POSITIONS_ONLY, 5, 3, 0.008),
    "Walker2dPositionsOnly": (POSITIONS_ONLY, 8, 6, 0.008),
}
# MuJoCo Playground's robots on envpool: (env id, (policy, privileged) sizes, action dim, dt)
ROBOTS = {
    "Go1JoystickFlatTerrain": ("Go1JoystickFlatTerrain-v1", (48, 123), 12, 0.02),
    "Go1JoystickRoughTerrain": ("Go1JoystickRoughTerrain-v1", (48, 123), 12, 0.02),
    "Go1JoystickFlatTerrainTrot": ("Go1JoystickFlatTerrain-v1", (56, 131), 12, 0.02),  # the clock: 4 x (cos, sin)
    "Go1Getup": ("Go1Getup-v1", (42, 91), 12, 0.02),
    "SpotFlatTerrainJoystick": ("SpotFlatTerrainJoystick-v1", (81, 167), 12, 0.02),
    "SpotFlatTerrainJoystickTrot": ("SpotFlatTerrainJoystick-v1", (89, 175), 12, 0.02),  # the clock: 4 x (cos, sin)
    "G1JoystickFlatTerrain": ("G1JoystickFlatTerrain-v1", (103, 216), 29, 0.02),
    "T1JoystickFlatTerrain": ("T1JoystickFlatTerrain-v1", (85, 180), 23, 0.02),
    "BerkeleyHumanoidJoystickFlatTerrain": ("BerkeleyHumanoidJoystickFlatTerrain-v1", (52, 114), 12, 0.02),
    "LeapCubeRotateZAxis": ("LeapCubeRotateZAxis-v1", (32, 105), 16, 0.05),
    "PandaPickCube": ("PandaPickCube-v1", (66,), 8, 0.02),  # one Box observation: no privileged group
}


def test_list_tasks_describes_every_task_file():
    infos = list_tasks()
    assert all(isinstance(i, TaskInfo) for i in infos)
    assert [i.name for i in infos] == available_tasks() == sorted(p.stem for p in (ROOT / "tasks").glob("*.yaml"))
    got = {i.name: i for i in infos}
    assert got.keys() == EXPECTED.keys() | ROBOTS.keys()
    for name, (env_id, obs_dim, action_dim, dt) in EXPECTED.items():
        info = got[name]
        assert (info.env_id, info.backend, info.groups, info.action_dim) == (env_id, "gymnasium", (("policy", obs_dim),), action_dim), name
        assert info.dt == pytest.approx(dt), name
    for name, (env_id, sizes, action_dim, dt) in ROBOTS.items():
        info = got[name]
        groups = tuple(zip(("policy", "privileged"), sizes))
        with_reference = ("Go1Joystick", "T1Joystick", "Spot", "Panda")  # the tasks with a MuJoCo reference: evaluated there
        backend = "mujoco" if name.startswith(with_reference) else "envpool"
        assert (info.env_id, info.backend, info.groups, info.action_dim) == (env_id, backend, groups, action_dim), name
        assert info.dt == pytest.approx(dt), name


def test_tasks_command_prints_one_row_per_task(tmp_path):
    result = run_module("ppo_control.tasks", cwd=tmp_path)  # any working directory
    assert result.returncode == 0, result.stderr
    header, *rows = result.stdout.splitlines()
    assert header.split() == ["task", "env", "id", "backend", "observation", "groups", "act", "dt", "(s)"]
    table = {cells[0]: cells[1:] for cells in (row.split() for row in rows)}
    assert list(table) == available_tasks()
    assert table["HalfCheetah"] == ["HalfCheetah-v5", "gymnasium", "policy", "17", "6", "0.05"]
    assert table["Go1JoystickFlatTerrain"] == ["Go1JoystickFlatTerrain-v1", "mujoco", "policy", "48,", "privileged", "123", "12", "0.02"]
    for name, (env_id, obs_dim, action_dim, _) in EXPECTED.items():
        assert table[name][:5] == [env_id, "gymnasium", "policy", str(obs_dim), str(action_dim)]


@pytest.mark.parametrize("args", [["Hopper"], ["task=Hopper"], ["--verbose"]])
def test_tasks_command_rejects_arguments_in_one_line(args):
    result = run_module("ppo_control.tasks", *args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith("error: tasks: takes no arguments") and result.stderr.count("\n") == 1


def test_task_info_builds_the_env_with_the_task_kwargs(tmp_path):
    task = tmp_path / "CheetahWithX.yaml"
    task.write_text("env:\n  id: HalfCheetah-v5\n  kwargs:\n    exclude_current_positions_from_observation: false\n")
    info = task_info(str(task))
    assert (info.name, info.env_id, info.obs_dim, info.action_dim) == ("CheetahWithX", "HalfCheetah-v5", 18, 6)


@pytest.mark.parametrize("task_id, positions", [("Hopper-v5", 5), ("Walker2d-v5", 8)])
def test_positions_only_is_the_full_task_without_its_velocities(task_id, positions):
    import gymnasium as gym
    import numpy as np

    from ppo_control.envs.partial_observation import positions_only

    full, partial = gym.make(task_id), positions_only(task_id)
    obs, _ = full.reset(seed=3)
    part, _ = partial.reset(seed=3)
    assert part.shape == (positions,) and np.array_equal(part, obs[:positions])
    rng = np.random.default_rng(0)
    for _ in range(20):
        action = rng.uniform(-1, 1, full.action_space.shape)
        obs, reward, *_ = full.step(action)
        part, partial_reward, *_ = partial.step(action)
        assert np.array_equal(part, obs[:positions]) and reward == partial_reward
    full.close()
    partial.close()
