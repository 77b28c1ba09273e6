"""The controller's contract read from a task's model: control period, actuator names, observation names."""

import pytest

from ppo_control.config import compose
from ppo_control.deploy.contract import controller_contract


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
