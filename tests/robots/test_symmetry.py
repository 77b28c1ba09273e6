"""A robot's left-right mirror (ppo_control/robots/symmetry.py) and the mirror loss built on it
(ppo_control/rl/symmetry.py, `ppo.mirror_loss_coef`).

The decisive check is physical: a MuJoCo state reflected through the x-z plane must read, through
the controller loop that sim2sim uses, as the mirror of the original state's observation, and the
mirrored action must drive it to the mirror of the original's next state."""

from __future__ import annotations

import copy
import json

import mujoco
import numpy as np
import pytest
import torch

from ppo_control.config.errors import UserError
from ppo_control.deploy.controller import Controller, RobotContract, configure_model
from ppo_control.rl.policy import ActorCritic, Networks
from ppo_control.rl.symmetry import Mirror, mirror_loss
from ppo_control.robots import playground
from ppo_control.robots.symmetry import (
    SignedPermutation,
    bounds_are_symmetric,
    element_mirror,
    joint_mirror,
    robot_mirror,
    stacked_mirror,
    swap_sides,
)
from tests.deploy.test_controller import metadata
from tests.helpers import assert_training_refused, run_module
from tests.robots.test_robots import GO1_TINY


def test_side_tokens_swap_as_whole_tokens_only():
    sides = (("FL", "FR"), ("RL", "RR"))
    assert swap_sides("joint_pos:FR_hip_joint", sides) == "joint_pos:FL_hip_joint"
    assert swap_sides("last_contact:RL", sides) == "last_contact:RR"
    assert swap_sides("FLOOR:FRx", sides) == "FLOOR:FRx"
    assert swap_sides("gyro:x", sides) == "gyro:x"


def test_go1s_joint_signs_come_from_its_model_hips_flip_thighs_and_calves_do_not():
    task = playground.robot_task("Go1JoystickFlatTerrain")
    joints = joint_mirror(playground.load_model(task), task)
    names = task.joint_names
    assert [names[i] for i in joints.index[:3]] == ["FL_hip_joint", "FL_thigh_joint", "FL_calf_joint"]
    assert joints.sign.tolist() == [-1.0, 1.0, 1.0] * 4
    x = np.random.default_rng(0).normal(size=len(names))
    np.testing.assert_array_equal(joints.apply(joints.apply(x)), x)  # a reflection undoes itself


def test_an_element_without_a_rule_or_a_model_that_is_not_symmetric_is_refused():
    task = playground.robot_task("Go1JoystickFlatTerrain")
    model = playground.load_model(task)
    joints = joint_mirror(model, task)
    with pytest.raises(UserError, match="no mirror rule for observation element height:x"):
        element_mirror(["height:x", "gyro:x"], task, joints)
    with pytest.raises(UserError, match="mirror image last_contact:FL is not in the observation"):
        element_mirror(["last_contact:FR"], task, joints)
    lopsided = copy.deepcopy(model)
    lopsided.body_pos[lopsided.body("FL_hip").id, 1] += 0.01
    with pytest.raises(UserError, match="not placed as mirror images"):
        joint_mirror(lopsided, task)
    with pytest.raises(UserError, match="has no left-right mirror"):
        robot_mirror(playground.robot_task("PandaPickCube"), [], None)


def test_action_bounds_must_map_onto_themselves():
    flip_first = SignedPermutation(np.array([1, 0]), np.array([-1.0, -1.0]))
    assert bounds_are_symmetric(np.array([-1.0, -2.0]), np.array([2.0, 1.0]), flip_first)
    assert not bounds_are_symmetric(np.array([-1.0, -1.0]), np.array([2.0, 2.0]), flip_first)


def test_a_stacked_input_mirrors_each_frame_in_place():
    frame = SignedPermutation(np.array([1, 0, 2]), np.array([1.0, 1.0, -1.0]))
    stacked = stacked_mirror(frame, 3, 2)
    x = np.arange(6.0)
    np.testing.assert_array_equal(stacked.apply(x), [1, 0, -2, 4, 3, -5])


def _reflect(model, data, task, joints: SignedPermutation) -> mujoco.MjData:
    """`data`'s state reflected through the world's x-z plane."""
    mirrored = mujoco.MjData(model)
    qpos, qvel = data.qpos.copy(), data.qvel.copy()
    qpos[1] *= -1
    qpos[3:7] *= [1, -1, 1, -1]  # orientation R -> M R M, M = diag(1, -1, 1)
    qvel[1] *= -1
    qvel[3:6] *= [-1, 1, -1]  # the free joint's angular velocity, an axial vector
    qadr = np.array([model.jnt_qposadr[model.joint(n).id] for n in task.joint_names])
    vadr = np.array([model.jnt_dofadr[model.joint(n).id] for n in task.joint_names])
    qpos[qadr] = joints.sign * data.qpos[qadr[joints.index]]
    qvel[vadr] = joints.sign * data.qvel[vadr[joints.index]]
    mirrored.qpos[:], mirrored.qvel[:] = qpos, qvel
    mujoco.mj_forward(model, mirrored)
    return mirrored


def _robot_and_mirror(task_name: str):
    task = playground.robot_task(task_name)
    contract = RobotContract.from_metadata(metadata(task_name))
    model = copy.deepcopy(playground.load_model(task))
    configure_model(model, contract)
    for site in range(model.nsite):  # Go1's IMU sits off the centre line, as on the real robot: put it on it
        if model.site(site).name == "imu":
            model.site_pos[site, 1] = 0.0
    assert model.njnt == len(task.joint_names) + 1  # every joint but the base is driven: the test reflects them all
    obs_mirror, joints = robot_mirror(task, list(contract.elements), contract.default_pose)
    return task, contract, model, obs_mirror, joints


def _state_and_reflection(task, model, joints, rng):
    """A random state in the air (no contacts, whose solver order need not mirror) and its reflection."""
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, model.key(task.default_keyframe).id)
    data.qpos[2] += 0.5
    data.qpos[3:7] = [0.98, 0.1, -0.1, 0.12]
    data.qpos[3:7] /= np.linalg.norm(data.qpos[3:7])
    data.qpos[7:] += rng.normal(scale=0.1, size=model.nq - 7)
    data.qvel[:] = rng.normal(scale=0.5, size=model.nv)
    mujoco.mj_forward(model, data)
    return data, _reflect(model, data, task, joints)


@pytest.mark.parametrize(
    "task_name", ["Go1JoystickFlatTerrain", "SpotFlatTerrainJoystick", "T1JoystickFlatTerrain", "BerkeleyHumanoidJoystickFlatTerrain"]
)
def test_a_reflected_state_is_observed_as_the_mirrored_observation(task_name):
    task, contract, model, obs_mirror, joints = _robot_and_mirror(task_name)
    data, mirrored = _state_and_reflection(task, model, joints, np.random.default_rng(3))
    original, reflected = _mirrored_controllers(model, contract)
    np.testing.assert_allclose(reflected.observation(mirrored), obs_mirror.apply(original.observation(data)), atol=1e-5)


def test_a_mirrored_action_drives_a_reflected_state_to_the_mirrored_next_state():
    """Spot's model is mirror-symmetric (Go1's trunk and calves carry their mass a millimetre or
    two off the mirror, as the real robot does: its mirror is approximate)."""
    task, contract, model, obs_mirror, joints = _robot_and_mirror("SpotFlatTerrainJoystick")
    rng = np.random.default_rng(4)
    data, mirrored = _state_and_reflection(task, model, joints, rng)
    original, reflected = _mirrored_controllers(model, contract)
    for step in range(3):
        seen, seen_mirrored = original.observation(data), reflected.observation(mirrored)
        np.testing.assert_allclose(seen_mirrored, obs_mirror.apply(seen), atol=1e-3, err_msg=f"control step {step}")
        action = rng.uniform(-0.5, 0.5, size=len(task.joint_names))
        original.act(action, data)
        reflected.act(joints.apply(action), mirrored)
        original.step_physics(data)
        reflected.step_physics(mirrored)


def _mirrored_controllers(model, contract) -> tuple[Controller, Controller]:
    """A controller and its mirror image: the command reflected, the feet's gait clocks swapped."""
    command = np.array([0.6, -0.3, 0.4])[: len(contract.command_names)]
    frequency = None if contract.gait_frequency_hz_range is None else contract.gait_frequency_hz_range[0]
    original, reflected = Controller(model, contract), Controller(model, contract)
    original.reset(command, frequency)
    reflected.reset(command * np.array([1.0, -1.0, -1.0])[: len(command)], frequency)
    reflected.phase = original.phase[::-1].copy()
    return original, reflected


def test_the_mirror_loss_is_zero_for_a_mirror_symmetric_actor_and_its_gradient_reduces_it():
    torch.manual_seed(0)
    low, high = -np.ones(2), np.ones(2)
    policy = ActorCritic(2, 2, low, high, Networks(hidden_sizes=(16,)))
    swap = Mirror(torch.tensor([1, 0]), torch.ones(2), torch.tensor([1, 0]), torch.ones(2), coef=1.0)
    obs = torch.randn(256, 2)
    with torch.no_grad():  # an actor that reads and writes both sides alike: mean = f(x0 + x1) on both dims
        policy.actor_mean[0].weight[:, 1] = policy.actor_mean[0].weight[:, 0]
        policy.actor_mean[-1].weight[1] = policy.actor_mean[-1].weight[0]
        policy.actor_mean[-1].bias[1] = policy.actor_mean[-1].bias[0]
    assert float(mirror_loss(policy, obs, swap.observations(obs), swap).detach()) == pytest.approx(0.0, abs=1e-12)

    flip = Mirror(torch.tensor([0, 1]), torch.tensor([-1.0, 1.0]), torch.tensor([0, 1]), torch.tensor([-1.0, 1.0]), coef=1.0)
    with torch.no_grad():
        policy.actor_mean[-1].bias.add_(0.5)  # now acts the same way on a state and its flip
        policy.actor_mean[-1].weight.mul_(50.0)
    optimizer = torch.optim.SGD(policy.parameters(), lr=0.05)
    before = float(mirror_loss(policy, obs, flip.observations(obs), flip).detach())
    for _ in range(50):
        optimizer.zero_grad()
        mirror_loss(policy, obs, flip.observations(obs), flip).backward()
        optimizer.step()
    after = float(mirror_loss(policy, obs, flip.observations(obs), flip).detach())
    assert before > 0.1 and after < 0.5 * before


def test_training_go1_with_the_mirror_loss_logs_it(tmp_path):
    run_dir = tmp_path / "run"
    result = run_module("ppo_control.train", *GO1_TINY, "ppo.mirror_loss_coef=1.0", "policy.squash=tanh", f"run_dir={run_dir}")
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert all(row["mirror_loss"] > 0 for row in rows)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["task=PandaPickCube", "ppo.mirror_loss_coef=1"], "task PandaPickCube has no left-right mirror"),
        (["task=Go1JoystickFlatTerrain", "ppo.mirror_loss_coef=1", "policy.rnn=gru"], "recurrent policy"),
        (["task=Go1JoystickFlatTerrain", "ppo.mirror_loss_coef=-1"], "ppo.mirror_loss_coef"),
        (["task=Hopper", "ppo.mirror_loss_coef=1"], "only robot tasks"),
    ],
)
def test_a_run_that_cannot_be_mirrored_is_refused_in_one_line(tmp_path, overrides, message):
    assert_training_refused(tmp_path, overrides, message)
