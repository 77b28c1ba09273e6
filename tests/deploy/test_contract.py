"""The controller's contract read from a task's model: control period, actuator names, observation names."""

import pytest

from ppo_control.config import compose
from ppo_control.deploy.contract import controller_contract
from ppo_control.robots.playground import source_of


@pytest.mark.parametrize(
    "task, period, actions, first, last",
    [
        ("HalfCheetah", 0.05, ["bthigh", "bshin", "bfoot", "fthigh", "fshin", "ffoot"], "qpos:rootz", "qvel:ffoot"),
        (
            "Walker2d",
            0.008,
            ["thigh_joint", "leg_joint", "foot_joint", "thigh_left_joint", "leg_left_joint", "foot_left_joint"],
            "qpos:rootz",
            "qvel:foot_left_joint",
        ),
        ("Ant", 0.05, ["hip_4", "ankle_4", "hip_1", "ankle_1", "hip_2", "ankle_2", "hip_3", "ankle_3"], "qpos:root:z", "qvel:ankle_4"),
    ],
)
def test_contract_names_actuators_and_observation_elements(task, period, actions, first, last):
    contract = controller_contract(compose([f"task={task}"]).env)
    assert contract["control_period_s"] == pytest.approx(period)
    assert contract["action_names"] == actions
    (group,) = contract["observation"]["groups"]
    names = group["element_names"]
    assert len(names) == group["size"] and len(set(names)) == len(names)
    assert (names[0], names[-1]) == (first, last)


def test_names_cover_the_contact_forces_when_the_observation_has_them():
    cfg = compose(["task=Ant", "env.kwargs.include_cfrc_ext_in_observation=true"])  # tasks/Ant.yaml leaves them out
    (group,) = controller_contract(cfg.env)["observation"]["groups"]
    assert group["size"] == 105 and group["element_names"][27] == "cfrc_ext:torso:0"
    assert group["element_names"][-1] == "cfrc_ext:body13:5"


def test_unproven_layouts_have_no_names_rather_than_guesses():
    contract = controller_contract(compose(["task=Reacher"]).env)  # cos/sin of angles, target, fingertip: no qpos/qvel layout
    assert contract["observation"]["groups"][0]["element_names"] is None
    assert contract["observation"]["groups"][0]["size"] == 10 and contract["action_names"] == ["joint0", "joint1"]


def test_names_follow_the_tasks_env_kwargs():
    cfg = compose(["task=Hopper", "env.kwargs={exclude_current_positions_from_observation: false}"])
    names = controller_contract(cfg.env)["observation"]["groups"][0]["element_names"]
    assert names[:2] == ["qpos:rootx", "qpos:rootz"] and len(names) == 12


def test_pandas_contract_holds_its_incremental_targets_and_where_every_element_is_read():
    """PandaPickCube's actions move the previous targets: the export says so in words a controller
    reads (robot.action_rule, the first targets, the range they are clipped to), and names a source
    for every element of its observation: the arm's joints, the gripper site, the box and the target
    as what a real cell perceives, and the controller's own targets."""
    contract = controller_contract(compose(["task=PandaPickCube"]).env)
    robot = contract["robot"]
    assert robot["action_rule"] == "previous_target" and "default_pose" not in robot
    assert robot["action_scale"] == 0.04 and len(robot["initial_target"]) == len(robot["ctrl_range"]) == 8
    assert robot["joint_names"] == contract["action_names"] == [f"joint{i}" for i in range(1, 8)] + ["finger_joint1"]
    assert contract["control_period_s"] == robot["sim_substeps"] * robot["sim_period_s"] == pytest.approx(0.02)
    (group,) = contract["observation"]["groups"]
    sources = robot["observation_sources"]
    assert group["size"] == 66 and all(source_of(name, sources) is not None for name in group["element_names"])
    assert source_of("qpos:box:qw", sources) == ("qpos:box", "qw") and source_of("qpos:joint1", sources) == ("qpos", "joint1")
    perceived = {key for key, source in sources.items() if source.get("input") == "perception"}
    assert perceived == {"qpos:box", "qvel:box", "box_xmat", "box_minus_gripper", "target_minus_box", "target_minus_box_xmat"}
    assert sources["gripper_pos"] == {"site_pos": "gripper"}
    assert sources["target_minus_qpos"] == {"controller": "target", "minus": {"joint": "qpos"}}


def test_the_legged_robots_keep_the_default_pose_rule():
    robot = controller_contract(compose(["task=Go1JoystickFlatTerrain"]).env)["robot"]
    assert robot["action_rule"] == "default_pose" and len(robot["default_pose"]) == 12
    assert all(":" not in key for key in robot["observation_sources"])  # keyed by quantity, as exports before the rule field


@pytest.mark.parametrize("task", ["SpotFlatTerrainJoystick", "SpotFlatTerrainJoystickTrot"])
def test_spots_contract_names_a_source_for_every_element_of_both_variants(task):
    """Spot's feet are framepos sensors relative to the IMU (a key per foot), its joint errors a
    history of qpos minus the held targets, whose zeros after a reset the contract states; the
    trot variant's clock is the controller's."""
    contract = controller_contract(compose([f"task={task}"]).env)
    robot = contract["robot"]
    (group,) = contract["observation"]["groups"]
    sources = robot["observation_sources"]
    names = group["element_names"]
    assert len(names) == group["size"] == (89 if task.endswith("Trot") else 81)
    assert all(source_of(name, sources) is not None for name in names)
    assert source_of("foot_pos:HL:z", sources) == ("foot_pos:HL", "z") and sources["foot_pos:HL"] == {"sensor": "HL_pos"}
    error = {"joint": "qpos", "minus": {"controller": "target"}}
    assert [sources[f"qpos_error_hist{k}"] for k in range(3)] == [{"history": error, "age": k} for k in range(3)]
    assert robot["action_rule"] == "default_pose" and robot["initial_target"] == [0.0] * 12
    assert (names[-1] == "phase_sin:HR") == task.endswith("Trot") == ("phase_sin" in sources)
