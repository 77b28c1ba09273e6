"""randomize.* on the Go1 MuJoCo reference (env.backend=mujoco): each sub-env's own model drawn at
its episode starts, the same draws for the same seed, sensor noise on the policy group alone, and
all of it saved with the env's state so a resumed run continues exactly."""

from __future__ import annotations

import numpy as np
import pytest

from ppo_control.envs.mujoco import make_reference_vec_env
from ppo_control.envs.randomization import Randomization

FLAT = "Go1JoystickFlatTerrain-v1"
EVERYTHING = Randomization(
    body_mass=(0.8, 1.2),
    friction=(0.5, 1.5),
    joint_damping=(0.5, 2.0),
    actuator_gain=(0.8, 1.2),
    obs_noise=0.05,
    action_noise=0.05,
    action_delay=(0, 2),
    push_velocity=0.5,
    push_interval=10,
    added_mass=(-1.0, 1.0),
    com_offset=0.05,
    joint_friction=(0.8, 1.2),
    armature=(1.0, 1.1),
    init_pose=0.2,
)


def test_each_sub_env_gets_its_own_robot_drawn_from_its_seed():
    env = make_reference_vec_env(FLAT, 3, {"noise_level": 0.0}, randomization=EVERYTHING, num_threads=1)
    nominal = make_reference_vec_env(FLAT, 1, {})
    try:
        env.reset(7)
        models = [env.task.physics.model(i) for i in range(3)]
        masses = np.array([m.body_mass for m in models])
        assert not np.allclose(masses[0], masses[1])  # each sub-env its own draw
        ratio = masses[:, 2:] / nominal.mj_model.body_mass[2:]  # the base (body 1) also gets randomize.added_mass
        assert (ratio >= 0.8 - 1e-12).all() and (ratio <= 1.2 + 1e-12).all()
        kp = np.array([m.actuator_gainprm[:, 0] for m in models])
        np.testing.assert_allclose(np.array([m.actuator_biasprm[:, 1] for m in models]), -kp)  # the PD servo stays a servo
        assert len({id(m) for m in models}) == 3  # models of their own: a draw never reaches another sub-env
        first = [r.scales["friction"].copy() for r in env._randomizers]
        env.reset(7)
        for before, randomizer in zip(first, env._randomizers):
            np.testing.assert_array_equal(before, randomizer.scales["friction"])
    finally:
        env.close()
        nominal.close()


def test_the_base_and_joint_keys_move_what_they_name_within_their_ranges():
    env = make_reference_vec_env(FLAT, 4, {}, randomization=EVERYTHING, num_threads=1)
    nominal = make_reference_vec_env(FLAT, 1, {})
    try:
        env.reset(1)
        base, n = env.task.torso_body, nominal.mj_model
        for i, randomizer in enumerate(env._randomizers):
            model, scales = env.task.physics.model(i), randomizer.scales
            expected = n.body_mass[base] * scales["body_mass"][base] + scales["added_mass"][0]
            assert model.body_mass[base] == pytest.approx(expected)
            assert -1.0 <= scales["added_mass"][0] <= 1.0
            offset = model.body_ipos[base] - n.body_ipos[base]
            np.testing.assert_allclose(offset, scales["com_offset"])
            assert np.abs(offset).max() <= 0.05 and np.abs(offset).max() > 0
            np.testing.assert_allclose(model.dof_frictionloss, n.dof_frictionloss * scales["joint_friction"])
            np.testing.assert_allclose(model.dof_armature, n.dof_armature * scales["armature"])
            ratio = model.dof_frictionloss[6:] / n.dof_frictionloss[6:]
            assert ratio.min() >= 0.8 - 1e-12 and ratio.max() <= 1.2 + 1e-12
    finally:
        env.close()
        nominal.close()


def test_each_episode_starts_off_the_tasks_pose_by_the_drawn_offsets():
    moved = make_reference_vec_env(FLAT, 3, {"noise_level": 0.0}, randomization=Randomization(init_pose=0.3), num_threads=1)
    nominal = make_reference_vec_env(FLAT, 3, {"noise_level": 0.0}, num_threads=1)
    try:
        obs, plain = moved.reset(5), nominal.reset(5)  # envpool's streams: the same resets but for the offsets
        qpos, qpos0 = moved.physics_states()[0], nominal.physics_states()[0]
        model = moved.mj_model
        for i, randomizer in enumerate(moved._randomizers):
            expected = np.clip(qpos0[i, 7:] + randomizer.scales["init_pose"], model.jnt_range[1:, 0], model.jnt_range[1:, 1])
            np.testing.assert_allclose(qpos[i, 7:], expected)
            assert 0 < np.abs(qpos[i, 7:] - qpos0[i, 7:]).max() <= 0.3
        np.testing.assert_array_equal(qpos[:, :7], qpos0[:, :7])  # the base is where the task put it
        joints = slice(9, 21)  # the policy group's joint_pos: measured angle minus the default pose
        np.testing.assert_allclose(obs[:, joints], (qpos[:, 7:] - moved.task.default_pose).astype(np.float32), atol=1e-6)
        assert not np.allclose(obs[:, joints], plain[:, joints])
    finally:
        moved.close()
        nominal.close()


def test_sensor_noise_reaches_the_policy_group_only_and_tracking_reads_the_command_as_given():
    noisy = make_reference_vec_env(FLAT, 2, {"noise_level": 0.0}, randomization=Randomization(obs_noise=0.1), num_threads=1)
    clean = make_reference_vec_env(FLAT, 2, {"noise_level": 0.0}, num_threads=1)
    try:
        a, b = noisy.reset(3), clean.reset(3)
        size = dict(clean.info.groups)["policy"]
        assert np.abs(a[:, :size] - b[:, :size]).max() > 0.01
        np.testing.assert_array_equal(a[:, size:], b[:, size:])
        zeros = np.zeros((2, 12))
        r_noisy, r_clean = noisy.step(zeros), clean.step(zeros)
        np.testing.assert_allclose(r_noisy.diagnostics["tracking_error_lin"], r_clean.diagnostics["tracking_error_lin"], atol=1e-6)
    finally:
        noisy.close()
        clean.close()
