"""Go1's gait_clock variant on its MuJoCo reference (env.kwargs.gait_clock, envs/mujoco/gait.py):
the trot clock at the end of each observation group, its phase reward, the hold under a zero
command, the tracking diagnostics unmoved, the description an export carries, and a controller
built from that description reading exactly what the task shows its policy."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ppo_control.config.errors import UserError
from ppo_control.deploy.controller import RobotContract
from ppo_control.deploy.sim2sim import ControllerLoop
from ppo_control.envs.backends import ReferenceBackend
from ppo_control.envs.mujoco import gait, make_reference_vec_env
from ppo_control.envs.mujoco.go1 import ENV_IDS, REWARD_TERMS
from ppo_control.envs.registry import check_robot_request
from ppo_control.robots import playground as pg

FLAT = ENV_IDS[0]
STATE = len(pg.robot_task(FLAT).groups["state"])
CLOCK = {"gait_clock": True, "gait_frequency_hz": 2.0}


def test_the_clock_sits_after_the_command_and_advances_a_trot_held_under_a_zero_command():
    env = make_reference_vec_env(FLAT, 2, {"noise_level": 0.0, **CLOCK})
    try:
        obs = env.reset(0)
        task = env.task
        assert dict(task.groups) == {"policy": STATE + 8, "privileged": len(pg.robot_task(FLAT).groups["privileged_state"]) + 8}
        trot = np.array([0.0, math.pi, math.pi, 0.0])  # FR, FL, RR, RL: diagonal feet together
        np.testing.assert_allclose(obs[:, STATE : STATE + 8], np.tile(np.concatenate([np.cos(trot), np.sin(trot)]), (2, 1)), atol=1e-6)
        np.testing.assert_array_equal(obs[:, STATE : STATE + 8], obs[:, -8:])  # the privileged group ends with it too
        task.command[1] = 0.0
        task.steps_until_next_cmd[:] = 1000
        for step in range(1, 4):
            result = env.step(np.zeros((2, 12)))
            advanced = np.fmod(trot + step * 2.0 * math.pi * 0.02 * 2.0 + math.pi, 2.0 * math.pi) - math.pi
            np.testing.assert_allclose(task.phase[0], advanced, atol=1e-12)
            np.testing.assert_array_equal(task.phase[1], [math.pi] * 4)  # held: every foot asked to stand
            seen = np.fmod(trot + (step - 1) * 2.0 * math.pi * 0.02 * 2.0 + math.pi, 2.0 * math.pi) - math.pi
            np.testing.assert_allclose(result.obs[0, STATE : STATE + 4], np.cos(seen), atol=1e-6)  # before the advance
    finally:
        env.close()


def test_the_phase_reward_is_one_for_feet_at_the_asked_height_and_joins_the_sum_the_task_reward_does_not():
    env = make_reference_vec_env(FLAT, 1, {"noise_level": 0.0, **CLOCK, "feet_phase_scale": 2.0})
    try:
        env.reset(0)
        task = env.task
        task.clock.phase[:] = math.pi  # every foot asked to stand: a standing robot is followed almost exactly
        height = task.options["max_foot_height"]
        assert task.clock.reward(np.zeros((1, 4)), height)[0] == 1.0
        assert task.clock.reward(np.full((1, 4), height), height)[0] == pytest.approx(math.exp(-4 * height**2 / gait.PHASE_REWARD_WIDTH))
        result = env.step(np.zeros((1, 12)))
        terms = {name[len("reward/") :]: values[0] for name, values in result.diagnostics.items() if name.startswith("reward/")}
        assert set(terms) == {*REWARD_TERMS, "feet_phase"}
        assert 1.0 < terms["feet_phase"] <= 2.0
        assert result.reward[0] == pytest.approx(max(0.0, sum(terms.values()) * 0.02), rel=1e-5)
        own = sum(value for name, value in terms.items() if name != "feet_phase")
        assert result.diagnostics["task_reward"][0] == pytest.approx(max(0.0, own * 0.02), rel=1e-5)  # what compares with Playground
        linvel, gyro = task._sensor(task._read(None)["sensordata"], "local_linvel"), task._sensor(task._read(None)["sensordata"], "gyro")
        command = result.obs[0, STATE - 3 : STATE]
        assert result.diagnostics["tracking_error_lin"][0] == pytest.approx(np.linalg.norm(command[:2] - linvel[0, :2]), rel=1e-5)
        assert result.diagnostics["tracking_error_ang"][0] == pytest.approx(abs(command[2] - gyro[0, 2]), rel=1e-5)
    finally:
        env.close()


def test_the_variant_is_the_references_alone_and_its_frequency_is_a_number():
    check_robot_request(FLAT, "mujoco", CLOCK)
    with pytest.raises(UserError, match="only task Go1JoystickFlatTerrain-v1's MuJoCo reference has this option"):
        check_robot_request(FLAT, "envpool", {"gait_clock": True})
    with pytest.raises(ValueError):
        make_reference_vec_env(FLAT, 1, {"gait_clock": True, "gait_frequency_hz": "fast"})


def _variant_metadata(options: dict | None = None) -> dict:
    """An export's metadata for the variant, as the exporter writes it from the reference's description."""
    options = dict(CLOCK, **(options or {}))
    facts = ReferenceBackend().describe(FLAT, options, None)
    names = facts["element_names"]["policy"]
    return {
        "obs_dim": len(names),
        "action_dim": 12,
        "history": 1,
        "action_low": [-1.0] * 12,
        "action_high": [1.0] * 12,
        "observation": {"groups": [{"name": "policy", "size": len(names), "element_names": names}]},
        "robot": facts["robot"],
        "task": "Go1JoystickFlatTerrainTrot",
        "env_id": FLAT,
        "env_kwargs": options,
        "max_episode_steps": 30,
    }


def test_sim2sim_of_an_export_alone_builds_the_variant_the_export_was_trained_on(tmp_path):
    """Without a run directory sim2sim builds the world from the export's env_kwargs: the clock's
    reward is scored and the task's own reward reported beside it."""
    from ppo_control.deploy.sim2sim import sim2sim
    from tests.deploy.test_sim2sim import write_export

    path = write_export(tmp_path / "policy.pt", _variant_metadata())
    result = sim2sim(export=str(path), episodes=2, out=str(tmp_path / "sim2sim.json"))
    assert {"reward/feet_phase", "task_reward"} <= set(result["diagnostics"])
    assert result["lengths"] == [30, 30] or result["fall_rate"] > 0


def test_without_the_hold_the_clock_runs_on_under_a_zero_command_and_the_export_says_so():
    env = make_reference_vec_env(FLAT, 2, {"noise_level": 0.0, **CLOCK, "gait_hold_on_zero_command": False})
    try:
        env.reset(0)
        env.task.command[:] = 0.0
        env.task.steps_until_next_cmd[:] = 1000
        env.step(np.zeros((2, 12)))
        np.testing.assert_allclose(
            env.task.phase[1], np.array([0.0, math.pi, math.pi, 0.0]) + 2.0 * math.pi * 0.02 * 2.0 - [0, 2 * math.pi, 2 * math.pi, 0]
        )
    finally:
        env.close()
    gait = _variant_metadata({"gait_hold_on_zero_command": False})["robot"]["gait_phase"]
    assert "hold_rad" not in gait and "hold_while_command_norm_at_most" not in gait
    assert _variant_metadata()["robot"]["gait_phase"]["hold_rad"] == math.pi


@pytest.mark.parametrize("hold", [True, False])
def test_a_controller_built_from_the_variants_description_reads_what_the_task_shows_its_policy(hold):
    """The export's contract (element names, robot.gait_phase, sources) from the reference's
    description: with the world's noise off, each controller's observation equals the task's policy
    observation every step, the clock included, also for a sub-env whose command is zero (held)."""
    meta = _variant_metadata({"gait_hold_on_zero_command": hold})
    names, size = meta["observation"]["groups"][0]["element_names"], meta["obs_dim"]
    assert names[STATE:] == [f"phase_{f}:{foot}" for f in ("cos", "sin") for foot in ("FR", "FL", "RR", "RL")]
    assert meta["robot"]["gait_phase"]["frequency_hz_range"] == [2.0, 2.0]
    contract = RobotContract.from_metadata(meta)
    world = make_reference_vec_env(FLAT, 2, {"noise_level": 0.0, **meta["env_kwargs"]}, max_episode_steps=40)
    weight = torch.randn(12, size, generator=torch.Generator().manual_seed(0)) * 0.05
    try:
        loop = ControllerLoop(world, contract)
        np.testing.assert_array_equal(loop.reset(3), loop.world_obs[:, :size])
        world.task.command[1] = 0.0
        world.task.steps_until_next_cmd[1] = 1000
        obs = loop._observe()  # the controllers read the changed command
        running = np.ones(2, dtype=bool)  # a controller serves one episode (sim2sim's): compare until it ends
        for _ in range(30):
            result, obs = loop.step(torch.tanh(torch.as_tensor(obs) @ weight.T).numpy())
            running &= ~(result.terminated | result.truncated)
            np.testing.assert_array_equal(obs[running], result.obs[running, :size])
            if running[1]:
                assert (world.task.phase[1] == math.pi).all() == hold
                np.testing.assert_array_equal(loop.controllers[1].phase, world.task.phase[1])
        assert running.any()
    finally:
        world.close()
