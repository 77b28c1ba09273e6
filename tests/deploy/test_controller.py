"""The controller loop built from an export's metadata alone (ppo_control/deploy/controller.py), on the
plain MuJoCo models of envpool's robots."""

from __future__ import annotations

import copy

import mujoco
import numpy as np
import pytest

from ppo_control.config.errors import UserError
from ppo_control.deploy.controller import Controller, RobotContract, configure_model
from ppo_control.envs import envpool_backend
from ppo_control.robots import playground


def metadata(task_name: str) -> dict:
    """The parts of an export's metadata.json the controller reads, as the exporter writes them."""
    task = playground.robot_task(task_name)
    state = list(task.policy_elements)
    return {
        "obs_dim": len(state),
        "action_low": [-1.0] * len(task.joint_names),
        "action_high": [1.0] * len(task.joint_names),
        "observation": {"groups": [{"name": "policy", "size": len(state), "element_names": state}]},
        "robot": playground.controller_fields(task, envpool_backend.spec_config(task.env_id, {})),
    }


def robot(task_name: str, meta: dict | None = None):
    meta = meta or metadata(task_name)
    contract = RobotContract.from_metadata(meta)
    model = copy.deepcopy(playground.load_model(playground.robot_task(task_name)))
    configure_model(model, contract)
    data = mujoco.MjData(model)
    keyframe = playground.robot_task(task_name).default_keyframe
    mujoco.mj_resetDataKeyframe(model, data, model.key(keyframe).id)
    mujoco.mj_forward(model, data)
    return contract, model, data


def test_go1s_observation_at_its_default_pose_is_read_from_the_model_and_the_controller():
    contract, model, data = robot("Go1JoystickFlatTerrain")
    controller = Controller(model, contract)
    controller.reset(command=np.array([0.5, -0.2, 0.3]))
    obs = dict(zip(contract.elements, controller.observation(data)))
    assert [obs[f"gravity:{a}"] for a in "xyz"] == pytest.approx([0.0, 0.0, -1.0], abs=1e-6)
    assert all(obs[f"joint_pos:{joint}"] == pytest.approx(0.0, abs=1e-6) for joint in contract.joint_names)
    assert [obs["command:vx"], obs["command:vy"], obs["command:wz"]] == pytest.approx([0.5, -0.2, 0.3])
    assert model.actuator_gainprm[0, 0] == contract.kp[0] == 35.0  # the spec's kp, as the C++ writes it
    assert model.opt.timestep == contract.sim_period_s


def test_the_controllers_own_state_lags_one_control_period_as_in_training():
    contract, model, data = robot("Go1JoystickFlatTerrain")
    controller = Controller(model, contract)
    controller.reset(command=np.zeros(3))
    index = contract.elements.index("last_action:FR_hip_joint")
    first = controller.observation(data)
    a0, a1 = np.full(12, 0.1), np.full(12, -0.2)
    seen = []
    for action in (a0, a1, a1):
        controller.act(action, data)
        controller.step_physics(data)
        seen.append(controller.observation(data)[index])
    assert first[index] == 0.0
    assert seen == pytest.approx([0.0, 0.1, -0.2])  # after a step, the action sent before the most recent one
    assert data.ctrl[0] == pytest.approx(contract.default_pose[0] + contract.action_scale * -0.2)


def test_a_humanoids_gait_clock_starts_at_its_initial_phase_and_advances_after_each_step():
    contract, model, data = robot("T1JoystickFlatTerrain")
    controller = Controller(model, contract)
    with pytest.raises(UserError, match="gait clock"):
        controller.reset(command=np.zeros(3))
    cos_left = contract.elements.index("phase_cos:left_foot")
    step = 2 * np.pi * contract.control_period_s * 1.5
    for command, expected in (
        ([0.5, 0.0, 0.0], [1.0, 1.0, np.cos(step), np.cos(2 * step)]),  # the clock runs
        ([0.0, 0.0, 0.0], [1.0, 1.0, -1.0, -1.0]),  # T1 holds it at pi (the export's hold_rad) under a zero command
    ):
        controller.reset(command=np.array(command), gait_frequency_hz=1.5)
        readings = [controller.observation(data)[cos_left]]
        for _ in range(3):
            controller.act(np.zeros(len(contract.joint_names)), data)
            controller.step_physics(data)
            readings.append(controller.observation(data)[cos_left])
        assert readings == pytest.approx(expected, abs=1e-6)


def test_an_export_without_what_the_controller_needs_is_refused_by_name():
    meta = metadata("Go1JoystickFlatTerrain")
    del meta["robot"]["default_pose"]
    del meta["robot"]["observation_sources"]
    with pytest.raises(UserError, match=r"lacks robot.default_pose, robot.observation_sources"):
        RobotContract.from_metadata(meta)
    with pytest.raises(UserError, match="no robot block"):
        RobotContract.from_metadata({"obs_dim": 17})


def test_a_swapped_joint_order_is_caught_against_the_model():
    meta = metadata("Go1JoystickFlatTerrain")
    names = meta["robot"]["joint_names"]
    names[0], names[3] = names[3], names[0]
    with pytest.raises(
        UserError, match=r"actuator 0 of the model drives joint FR_hip_joint, the export's robot.joint_names\[0\] is FL_hip_joint"
    ):
        robot("Go1JoystickFlatTerrain", meta)


def test_tasks_whose_observation_has_no_description_export_no_sources():
    assert "observation_sources" in metadata("G1JoystickFlatTerrain")["robot"]
    assert "observation_sources" not in metadata("Go1Getup")["robot"]  # its current_qpos rule has no controller yet, nor its sources


def test_spots_joint_error_history_records_each_period_against_the_targets_the_actuators_hold():
    """qpos_error_hist<k>: qpos minus the held target, k observations ago; a reset's reading is
    against its zero targets, older ones are zero; a target beyond ctrl_range is held at its end."""
    contract, model, data = robot("SpotFlatTerrainJoystick")
    controller = Controller(model, contract)
    controller.reset(command=np.zeros(3))
    knee = contract.joint_names.index("fl_kn")
    qpos = model.joint("fl_kn").qposadr[0]
    index = [contract.elements.index(f"qpos_error_hist{k}:fl_kn") for k in range(3)]
    readings, expected = [], []
    obs = controller.observation(data)
    readings.append(obs[index])
    expected.append([data.qpos[qpos] - 0.0, 0.0, 0.0])
    held = contract.default_pose[knee] + contract.action_scale * 0.5
    for action in (0.5, 5.0):  # the second: beyond the action bounds, clipped to them first
        controller.act(np.full(12, action), data)
        controller.step_physics(data)
        readings.append(controller.observation(data)[index])
        expected.append([data.qpos[qpos] - held, *expected[-1][:2]])
        held = contract.default_pose[knee] + contract.action_scale * 1.0
    np.testing.assert_allclose(readings, np.array(expected, dtype=np.float32), rtol=0, atol=1e-6)
    contract = RobotContract.from_metadata({**metadata("SpotFlatTerrainJoystick"), "action_high": [9.0] * 12})
    controller = Controller(model, contract)
    controller.reset(command=np.zeros(3))
    sent = controller.act(np.full(12, 9.0), data)  # the knee's target beyond its ctrl range: held at its end
    assert sent[knee] > contract.ctrl_high[knee] and controller.held_target[knee] == contract.ctrl_high[knee]
    controller.reset(command=np.zeros(3))
    assert np.all(controller.held_target == 0.0) and np.all(controller.observation(data)[index[1:]] == 0.0)


def panda(meta: dict | None = None):
    """The Panda's model with the contract's gains and timing, at its home keyframe (its first targets)."""
    contract = RobotContract.from_metadata(meta or metadata("PandaPickCube"))
    model = copy.deepcopy(playground.load_model(playground.robot_task("PandaPickCube")))
    configure_model(model, contract)
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, model.key("home").id)
    mujoco.mj_forward(model, data)
    return contract, model, data


def test_pandas_actions_move_its_last_targets_within_the_ctrl_range():
    contract, model, data = panda()
    home = model.key("home").ctrl.copy()
    assert contract.action_rule == "previous_target" and contract.default_pose is None
    np.testing.assert_array_equal(contract.initial_target, home)
    controller = Controller(model, contract)
    controller.reset()
    obs = dict(zip(contract.elements, controller.observation(data)))
    finger = model.joint("finger_joint1").qposadr[0]
    assert obs["target_minus_qpos:finger_joint1"] == pytest.approx(home[7] - data.qpos[finger])
    action = np.array([1.0, -1.0, 0.5, 0.0, 0.0, 0.0, 0.0, -1.0])
    first = controller.act(action, data)
    np.testing.assert_allclose(first, home + 0.04 * action)  # from the home targets, not from a pose
    second = controller.act(np.array([3.0, 0, 0, 0, 0, 0, 0, -1.0]), data)  # the action bounds first, then the ctrl range
    assert second[0] == pytest.approx(home[0] + 0.08) and second[7] == 0.0 == contract.ctrl_low[7]
    np.testing.assert_array_equal(data.ctrl, second)
    controller.step_physics(data)
    obs = dict(zip(contract.elements, controller.observation(data)))
    assert obs["target_minus_qpos:joint1"] == np.float32(second[0] - data.qpos[model.joint("joint1").qposadr[0]])
    controller.reset()
    np.testing.assert_array_equal(controller.target, home)


def test_the_pandas_contract_gives_its_model_the_gains_it_has():
    _, model, _ = panda()
    original = playground.load_model(playground.robot_task("PandaPickCube"))
    np.testing.assert_array_equal(model.actuator_gainprm, original.actuator_gainprm)
    np.testing.assert_array_equal(model.actuator_biasprm, original.actuator_biasprm)
    np.testing.assert_array_equal(model.dof_damping, original.dof_damping)


def test_an_action_rule_the_controller_cannot_drive_or_its_missing_fields_are_refused_by_name():
    meta = metadata("PandaPickCube")
    del meta["robot"]["initial_target"]
    with pytest.raises(UserError, match=r"lacks robot.initial_target: a controller"):
        RobotContract.from_metadata(meta)
    meta = metadata("PandaPickCube")
    meta["robot"]["action_rule"] = "current_qpos"
    with pytest.raises(
        UserError, match="robot.action_rule is current_qpos: a controller here drives the rules default_pose, previous_target"
    ):
        RobotContract.from_metadata(meta)
    meta = metadata("Go1JoystickFlatTerrain")
    del meta["robot"]["action_rule"]  # an export written before the field: the legged robots' rule
    assert RobotContract.from_metadata(meta).action_rule == "default_pose"
