"""ppo_control/robots/playground.py against the running envpool envs: every group's element names
match envpool's sizes, the joints are the actuators' in action order, and the values behind the
names are what they claim. envpool's release build reports no qpos in `info` (only its
ENVPOOL_TEST build does), so joint positions are checked through the servo law instead: the
`actuator_force` envpool reports must equal kp * (target - q) with the target, default pose,
scale and gain that controller_fields gives and q rebuilt from `joint_pos` (+ default pose).
Spot's reset is deterministic, so a Python MuJoCo replica of its first steps checks every element.
"""

from __future__ import annotations

import json

import envpool
import mujoco
import numpy as np
import pytest

from ppo_control.robots import playground as pg

TASKS = list(pg.ROBOT_TASKS.values())
IDS = [task.name for task in TASKS]
JOYSTICK = [task for task in TASKS if task.kind == "joystick"]


def _spaces(task: pg.RobotTask) -> dict:
    space = envpool.make_spec(task.env_id).observation_space
    return dict(space.spaces) if hasattr(space, "spaces") else {"obs": space}


def _fields(task: pg.RobotTask, **kwargs) -> dict:
    return pg.controller_fields(task, envpool.make_spec(task.env_id, **kwargs).config._asdict())


def _named(task: pg.RobotTask, group: str, obs: np.ndarray, prefix: str) -> np.ndarray:
    """The elements `<prefix>:<joint>` of a group, in joint order."""
    index = task.groups[group]
    return obs[..., [index.index(f"{prefix}:{joint}") for joint in task.joint_names]]


def _pick(task: pg.RobotTask, group: str, obs: np.ndarray, names: list[str]) -> np.ndarray:
    index = task.groups[group]
    return obs[..., [index.index(name) for name in names]]


def _same_rotation_rate(task: pg.RobotTask, privileged: np.ndarray) -> None:
    """gyro (IMU frame) and global_angvel (world frame) are one angular velocity: equal norms."""
    gyro = _pick(task, "privileged_state", privileged, ["gyro:x", "gyro:y", "gyro:z"])
    world = _pick(task, "privileged_state", privileged, ["global_angvel:x", "global_angvel:y", "global_angvel:z"])
    np.testing.assert_allclose(np.linalg.norm(gyro, axis=1), np.linalg.norm(world, axis=1), rtol=1e-9, atol=1e-12)
    assert np.all(np.linalg.norm(gyro, axis=1) > 1e-3)  # not trivially zero


def _servo_force(model, fields: dict, target: np.ndarray, q_end: np.ndarray, qd_end: np.ndarray) -> np.ndarray:
    """actuator_force of the last substep: MuJoCo clamps the target to ctrlrange and the force to
    forcerange; positions integrate with the new velocity, so q at that substep's start is
    q_end - sim_dt * qd_end. Valid where the actuators have no velocity term (asserted)."""
    assert fields["kd_parts"]["actuator_damping"] == 0.0
    low, high = np.asarray(fields["ctrl_range"]).T
    force = np.asarray(fields["kp"]) * (np.clip(target, low, high) - (q_end - fields["sim_period_s"] * qd_end))
    limited = model.actuator_forcelimited.astype(bool)
    force[..., limited] = np.clip(force[..., limited], model.actuator_forcerange[limited, 0], model.actuator_forcerange[limited, 1])
    return force


def _actions(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    # Beyond the [-1, 1] action space on purpose: envpool passes actions through unclipped.
    return rng.uniform(-1.5, 1.5, size=shape)


@pytest.mark.parametrize("task", TASKS, ids=IDS)
def test_layout_sizes_match_envpool(task):
    spaces = _spaces(task)
    assert set(task.groups) == set(spaces)
    for key, names in task.groups.items():
        assert len(names) == spaces[key].shape[-1], key
        assert len(set(names)) == len(names), key
        assert all(name.count(":") >= 1 for name in names)
    assert len(task.joint_names) == envpool.make_spec(task.env_id).action_space.shape[0]
    assert envpool.make_spec(task.env_id).config.base_path.rstrip("/").endswith(task.asset_package.replace("-", "_"))


@pytest.mark.parametrize("task", TASKS, ids=IDS)
def test_joints_are_the_model_actuators_in_action_order(task):
    model = pg.load_model(task)
    assert model.nu == len(task.joint_names)
    for i, name in enumerate(task.joint_names):
        assert model.actuator_trntype[i] == mujoco.mjtTrn.mjTRN_JOINT
        joint = model.actuator_trnid[i, 0]
        assert model.joint(joint).name == name
        if task.kind in ("joystick", "getup"):  # the C++ reads actuator i's joint at qpos[7 + i]
            assert model.jnt_qposadr[joint] == 7 + i
    fields = _fields(task)
    json.dumps(fields)  # JSON-able as it is
    assert fields["joint_names"] == list(task.joint_names)
    for key in ("default_pose", "initial_target", "kp", "kd", "ctrl_range", "torque_limits"):
        if isinstance(fields.get(key), list):
            assert len(fields[key]) == len(task.joint_names), key


@pytest.mark.parametrize("task", TASKS, ids=IDS)
def test_privileged_groups_start_with_a_prefixed_copy_of_state(task):
    if "privileged_state" not in task.groups:
        return
    state, privileged = task.groups["state"], task.groups["privileged_state"]
    assert privileged[: len(state)] == tuple(f"state:{name}" for name in state)


def test_panda_qpos_and_qvel_names_follow_the_model():
    task = pg.robot_task("PandaPickCube")
    model = pg.load_model(task)
    qpos, qvel = [], []
    for j in range(model.njnt):
        joint = model.joint(j).name or model.body(model.jnt_bodyid[j]).name  # the box's free joint is unnamed
        if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE:
            qpos += [f"qpos:{joint}:{axis}" for axis in ("x", "y", "z", "qw", "qx", "qy", "qz")]
            qvel += [f"qvel:{joint}:{axis}" for axis in ("vx", "vy", "vz", "wx", "wy", "wz")]
        else:
            qpos.append(f"qpos:{joint}")
            qvel.append(f"qvel:{joint}")
    assert task.groups["obs"][: model.nq + model.nv] == tuple(qpos + qvel)


@pytest.mark.parametrize("task", JOYSTICK, ids=[task.name for task in JOYSTICK])
def test_tracking_names_exist(task):
    assert task.command_names == ("command:vx", "command:vy", "command:wz")
    assert set(task.tracking) == set(task.command_names)
    assert set(task.command_names) <= set(task.groups["state"])
    assert set(task.tracking.values()) <= set(task.groups["privileged_state"])


def test_robot_task_lookup():
    task = pg.ROBOT_TASKS["Go1JoystickFlatTerrain"]
    assert pg.robot_task("Go1JoystickFlatTerrain-v1") is task
    assert pg.robot_task("Go1JoystickFlatTerrain") is task
    assert pg.robot_task("MuJoCoPlayground/Go1JoystickFlatTerrain-v1") is task
    assert pg.robot_task("HalfCheetah-v5") is None


def test_go1_controller_fields_follow_the_spec():
    task = pg.robot_task("Go1JoystickFlatTerrain-v1")
    fields = _fields(task)
    assert (fields["kp"], fields["kd"], fields["action_scale"]) == (35.0, 0.5, 0.5)
    assert (fields["control_period_s"], fields["sim_period_s"], fields["sim_substeps"]) == (0.02, 0.004, 5)
    assert fields["default_pose"] == pg.load_model(task).key("home").qpos[7:19].tolist()
    changed = _fields(task, kp=20.0, kd=1.5, action_scale=0.3)
    assert (changed["kp"], changed["kd"], changed["action_scale"]) == (20.0, 1.5, 0.3)
    spot = _fields(pg.robot_task("SpotFlatTerrainJoystick"))
    assert spot["kp"] == 300.0 and spot["kd_parts"] == {"joint_damping": 1.0, "actuator_damping": 20.0}


def test_go1_joystick_values():
    task = pg.robot_task("Go1JoystickFlatTerrain-v1")
    fields = _fields(task, kp=20.0)  # a non-default gain, so the servo law proves the spec's kp is applied
    model = pg.load_model(task)
    default, scale = np.asarray(fields["default_pose"]), fields["action_scale"]
    env = envpool.make_gymnasium(task.env_id, num_envs=2, seed=0, noise_level=0.0, kp=20.0)
    obs, _ = env.reset()
    state, privileged = obs["state"], obs["privileged_state"]
    np.testing.assert_array_equal(_named(task, "state", state, "joint_pos"), 0.0)  # Reset starts at the home keyframe
    np.testing.assert_array_equal(_named(task, "state", state, "last_action"), 0.0)
    rng, previous = np.random.default_rng(0), np.zeros((2, 12))
    for _ in range(4):
        action = _actions(rng, (2, 12))
        obs, _, terminated, truncated, info = env.step(action)
        state, privileged = obs["state"], obs["privileged_state"]
        assert not (terminated.any() or truncated.any())
        np.testing.assert_array_equal(privileged[:, : len(task.groups["state"])], state)
        np.testing.assert_array_equal(_pick(task, "state", state, list(task.command_names)), info["command"])
        np.testing.assert_array_equal(_named(task, "state", state, "last_action"), previous)
        q = _named(task, "privileged_state", privileged, "joint_pos") + default
        if "qpos" in info:  # only envpool's ENVPOOL_TEST build reports it
            np.testing.assert_allclose(q, info["qpos"][:, 7:19], atol=1e-12)
        force = _servo_force(model, fields, default + scale * action, q, _named(task, "privileged_state", privileged, "joint_vel"))
        np.testing.assert_allclose(_named(task, "privileged_state", privileged, "actuator_force"), force, atol=1e-9)
        np.testing.assert_allclose(np.linalg.norm(_pick(task, "state", state, ["gravity:x", "gravity:y", "gravity:z"]), axis=1), 1.0)
        _same_rotation_rate(task, privileged)
        air = _pick(task, "privileged_state", privileged, [f"feet_air_time:{foot}" for foot in ("FR", "FL", "RR", "RL")])
        assert np.all(air > 0) and np.allclose(air / fields["control_period_s"], np.round(air / fields["control_period_s"]))
        contact = _pick(task, "privileged_state", privileged, [f"last_contact:{foot}" for foot in ("FR", "FL", "RR", "RL")])
        assert set(np.unique(contact)) <= {0.0, 1.0}
        unset = _pick(task, "privileged_state", privileged, ["push_force:x", "push_force:y", "push_force:z", "pad:0"])
        np.testing.assert_array_equal(unset, 0.0)
        previous = action
    env.close()


@pytest.mark.parametrize("name", ["G1JoystickFlatTerrain", "T1JoystickFlatTerrain"])
def test_humanoid_values(name):
    task = pg.robot_task(name)
    fields, model = _fields(task), pg.load_model(task)
    n = len(task.joint_names)
    default, scale = np.asarray(fields["default_pose"]), fields["action_scale"]
    feet = [element.split(":")[1] for element in task.groups["state"] if element.startswith("phase_cos:")]
    env = envpool.make_gymnasium(task.env_id, num_envs=2, seed=0, noise_level=0.0)
    env.reset()
    rng, previous = np.random.default_rng(1), np.zeros((2, n))
    for step in range(3):
        action = _actions(rng, (2, n))
        obs, _, terminated, _, info = env.step(action)
        state, privileged = obs["state"], obs["privileged_state"]
        assert not terminated.any()
        np.testing.assert_array_equal(privileged[:, : len(task.groups["state"])], state)
        np.testing.assert_array_equal(_pick(task, "state", state, list(task.command_names)), info["command"])
        np.testing.assert_array_equal(_named(task, "state", state, "last_action"), previous)
        q = _named(task, "privileged_state", privileged, "joint_pos") + default
        force = _servo_force(model, fields, default + scale * action, q, _named(task, "privileged_state", privileged, "joint_vel"))
        np.testing.assert_allclose(_named(task, "privileged_state", privileged, "actuator_force"), force, atol=1e-9)
        cos = _pick(task, "state", state, [f"phase_cos:{foot}" for foot in feet])
        sin = _pick(task, "state", state, [f"phase_sin:{foot}" for foot in feet])
        np.testing.assert_allclose(cos**2 + sin**2, 1.0)
        np.testing.assert_allclose(np.linalg.norm(_pick(task, "state", state, ["gravity:x", "gravity:y", "gravity:z"]), axis=1), 1.0)
        _same_rotation_rate(task, privileged)
        if step == 0:  # Reset's phase (0, pi), not yet advanced
            np.testing.assert_allclose(np.concatenate([cos, sin], axis=1), [[1.0, -1.0, 0.0, 0.0]] * 2, atol=1e-12)
        height = _pick(task, "privileged_state", privileged, ["base_pos:z"])
        assert np.all((height > 0.3) & (height < 1.5))
        previous = action
    env.close()


def test_go1_getup_values():
    task = pg.robot_task("Go1Getup-v1")
    fields, model = _fields(task), pg.load_model(task)
    default, scale = np.asarray(fields["default_pose"]), fields["action_scale"]
    env = envpool.make_gymnasium(task.env_id, num_envs=2, seed=0, noise_level=0.0)
    obs, _ = env.reset()
    q_start = _named(task, "privileged_state", obs["privileged_state"], "joint_pos_abs")
    rng, previous = np.random.default_rng(2), np.zeros((2, 12))
    for _ in range(3):
        action = _actions(rng, (2, 12))
        obs, *_ = env.step(action)
        state, privileged = obs["state"], obs["privileged_state"]
        np.testing.assert_array_equal(privileged[:, : len(task.groups["state"])], state)
        np.testing.assert_array_equal(_named(task, "state", state, "last_action"), previous)
        q = _named(task, "privileged_state", privileged, "joint_pos_abs")
        np.testing.assert_allclose(_named(task, "state", state, "joint_pos") + default, q, atol=1e-12)
        # Getup's Step calls mj_forward after the substeps: the force belongs to the final q.
        low, high = np.asarray(fields["ctrl_range"]).T
        force = fields["kp"] * (np.clip(q_start + scale * action, low, high) - q)
        force = np.clip(force, model.actuator_forcerange[:, 0], model.actuator_forcerange[:, 1])
        np.testing.assert_allclose(_named(task, "privileged_state", privileged, "actuator_force"), force, atol=1e-9)
        q_start, previous = q, action
    env.close()


def test_leap_values():
    task = pg.robot_task("LeapCubeRotateZAxis-v1")
    fields, model = _fields(task), pg.load_model(task)
    default, scale = np.asarray(fields["default_pose"]), fields["action_scale"]
    env = envpool.make_gymnasium(task.env_id, num_envs=2, seed=0, noise_level=0.0)
    env.reset()
    rng, previous = np.random.default_rng(3), np.zeros((2, 16))
    for _ in range(3):
        action = _actions(rng, (2, 16))
        obs, *_ = env.step(action)
        state, privileged = obs["state"], obs["privileged_state"]
        np.testing.assert_array_equal(privileged[:, : len(task.groups["state"])], state)
        np.testing.assert_array_equal(_named(task, "state", state, "last_action"), previous)
        q = _named(task, "privileged_state", privileged, "joint_pos_abs")
        force = _servo_force(model, fields, default + scale * action, q, _named(task, "privileged_state", privileged, "joint_vel"))
        np.testing.assert_allclose(_named(task, "privileged_state", privileged, "actuator_force"), force, atol=1e-9)
        quat = _pick(task, "privileged_state", privileged, [f"cube_quat:{axis}" for axis in "wxyz"])
        np.testing.assert_allclose(np.linalg.norm(quat, axis=1), 1.0)
        previous = action
    env.close()


def test_panda_values():
    task = pg.robot_task("PandaPickCube-v1")
    fields, model = _fields(task), pg.load_model(task)
    names = task.groups["obs"]
    env = envpool.make_gymnasium(task.env_id, num_envs=2, seed=0)
    obs, _ = env.reset()

    def target_of(obs: np.ndarray) -> np.ndarray:
        return _named(task, "obs", obs, "target_minus_qpos") + _named(task, "obs", obs, "qpos")

    # Reset: the home keyframe with the box moved in x/y only, at rest; Reset's mj_forward makes the
    # frames those of this qpos, so forward kinematics of the observed qpos reproduces them.
    home = model.key("home")
    qpos, qvel = obs[:, : model.nq], obs[:, model.nq : model.nq + model.nv]
    fixed = [i for i, name in enumerate(names[: model.nq]) if name not in ("qpos:box:x", "qpos:box:y")]
    np.testing.assert_allclose(qpos[:, fixed], np.broadcast_to(home.qpos[fixed], (2, len(fixed))))
    np.testing.assert_array_equal(qvel, 0.0)
    np.testing.assert_allclose(target_of(obs), np.broadcast_to(fields["initial_target"], (2, 8)), atol=1e-12)
    data = mujoco.MjData(model)
    for env_index in range(2):
        data.qpos[:] = qpos[env_index]
        mujoco.mj_kinematics(model, data)
        site, box = data.site("gripper"), data.body("box")
        row = {name: value for name, value in zip(names, obs[env_index])}
        np.testing.assert_allclose([row[f"gripper_pos:{a}"] for a in "xyz"], site.xpos, atol=1e-9)
        np.testing.assert_allclose([row[f"gripper_xmat:{rc}"] for rc in ("10", "11", "12", "20", "21", "22")], site.xmat[3:], atol=1e-9)
        np.testing.assert_allclose([row[f"box_xmat:{rc}"] for rc in ("10", "11", "12", "20", "21", "22")], box.xmat[3:], atol=1e-9)
        np.testing.assert_allclose([row[f"box_minus_gripper:{a}"] for a in "xyz"], box.xpos - site.xpos, atol=1e-9)
        # PandaPickCube's target orientation is the identity
        expected = np.eye(3).ravel()[:6] - box.xmat[:6]
        np.testing.assert_allclose([row[f"target_minus_box_xmat:{rc}"] for rc in ("00", "01", "02", "10", "11", "12")], expected, atol=1e-9)

    low, high = np.asarray(fields["ctrl_range"]).T
    rng, target = np.random.default_rng(4), target_of(obs)
    for _ in range(3):
        action = _actions(rng, (2, 8))
        obs, *_ = env.step(action)
        target = np.clip(target + fields["action_scale"] * action, low, high)
        np.testing.assert_allclose(target_of(obs), target, atol=1e-12)
    env.close()


def _spot_replica_elements(task: pg.RobotTask, model, data, fields: dict) -> dict[str, float]:
    """Spot's privileged elements (past the state copy) that follow from the simulator state."""
    default = np.asarray(fields["default_pose"])
    values: dict[str, float] = {}

    def put(quantity: str, keys, array) -> None:
        values.update({f"{quantity}:{key}": float(v) for key, v in zip(keys, array)})

    for quantity, sensor in (
        ("gyro", "gyro"),
        ("accelerometer", "accelerometer"),
        ("upvector", "upvector"),
        ("linvel", "local_linvel"),
        ("global_angvel", "global_angvel"),
    ):
        put(quantity, "xyz", data.sensor(sensor).data)
    put("joint_pos", task.joint_names, data.qpos[7:19] - default)
    put("joint_vel", task.joint_names, data.qvel[6:18])
    put("actuator_force", task.joint_names, data.actuator_force)
    for foot in ("FL", "FR", "HL", "HR"):
        put(f"foot_pos:{foot}", "xyz", data.sensor(f"{foot}_pos").data)
        put(f"foot_vel:{foot}", "xyz", data.sensor(f"{foot}_global_linvel").data)
    put("push_force", "xyz", np.zeros(3))
    return values


def test_spot_matches_a_python_replica():
    """spot.h's joystick Reset is deterministic (home keyframe, zero velocity and ctrl): the same
    model, changed as the constructor changes it and stepped as StepJoystick steps it, must give
    every element envpool reports."""
    task = pg.robot_task("SpotFlatTerrainJoystick-v1")
    fields = _fields(task)
    model = mujoco.MjModel.from_xml_path(pg.model_path(task, envpool.make_spec(task.env_id).config.base_path))
    model.opt.timestep = fields["sim_period_s"]
    model.dof_damping[6:] = fields["kd_parts"]["joint_damping"]
    model.actuator_gainprm[:, 0] = fields["kp"]
    model.actuator_biasprm[:, 1] = -fields["kp"]
    data = mujoco.MjData(model)
    data.qpos[:] = model.key("home").qpos
    mujoco.mj_forward(model, data)
    default, scale = np.asarray(fields["default_pose"]), fields["action_scale"]
    low, high = np.asarray(fields["ctrl_range"]).T

    env = envpool.make_gymnasium(task.env_id, num_envs=1, seed=0, noise_level=0.0)
    env.reset()
    state_names, privileged_names = task.groups["state"], task.groups["privileged_state"]
    rng = np.random.default_rng(5)
    # Reset already pushed one entry: the home pose minus a zero motor target.
    previous, errors = np.zeros(12), [model.key("home").qpos[7:19].copy(), np.zeros(12)]
    last_contact, air_time = np.zeros(4), np.zeros(4)
    for _ in range(3):
        action = rng.uniform(-1.0, 1.0, size=12)
        target = np.clip(default + scale * action, low, high)
        data.ctrl[:] = target
        for _ in range(fields["sim_substeps"]):
            mujoco.mj_step(model, data)
        obs, _, terminated, _, info = env.step(action[None])
        assert not terminated.any()
        state, privileged = obs["state"][0], obs["privileged_state"][0]
        contact = np.array([data.sensor(f"{foot}_floor_found").data[0] > 0 for foot in ("FL", "FR", "HL", "HR")], dtype=float)
        air_time += fields["control_period_s"]

        expected = _spot_replica_elements(task, model, data, fields)
        expected.update({f"last_contact:{foot}": c for foot, c in zip(("FL", "FR", "HL", "HR"), last_contact)})
        expected.update({f"feet_air_time:{foot}": t for foot, t in zip(("FL", "FR", "HL", "HR"), air_time)})
        got = dict(zip(privileged_names, privileged))
        assert set(expected) == {name for name in privileged_names if not name.startswith("state:")}
        for name, value in expected.items():
            assert got[name] == pytest.approx(value, abs=1e-8), name

        errors = [data.qpos[7:19] - target] + errors[:2]
        state_expected = {name: expected[name] for name in state_names if name in expected}
        for k, error in enumerate(errors):
            state_expected.update({f"qpos_error_hist{k}:{j}": float(e) for j, e in zip(task.joint_names, error)})
        state_expected.update({f"last_action:{j}": float(a) for j, a in zip(task.joint_names, previous)})
        state_expected.update(dict(zip(task.command_names, info["command"][0])))
        assert set(state_expected) == set(state_names)
        got = dict(zip(state_names, state))
        for name, value in state_expected.items():
            assert got[name] == pytest.approx(value, abs=1e-8), name

        last_contact, previous = contact, action
        air_time[contact > 0] = 0.0
    env.close()
