"""A robot's left-right mirror: its reflection through the sagittal (x-z) plane, as a signed
permutation of the actions and of the policy's observation elements (`mirrored[i] = sign[i] *
x[index[i]]`), for a symmetry loss (`ppo.mirror_loss_coef`).

Everything is derived, nothing is tabulated per joint. A task names its left and right name
tokens (`RobotTask.sides`, e.g. FL/FR); an element's partner is its name with those tokens
swapped. A joint's sign comes from the model at its default pose: the reflection turns a hinge's
world axis `a` into (-a_x, a_y, -a_z) (an axial vector), and the partner's axis is either that
(sign +1: pitch joints) or its opposite (sign -1: roll and yaw joints). An element's sign comes
from what it measures: a joint quantity takes its joint's sign; a vector (velocity, gravity, a
position) flips y; an axial vector (angular velocity) flips x and z; the command flips its lateral
velocity and yaw rate. An element no rule covers is an error: a silently wrong mirror would train
the policy towards a robot that does not exist.

The mirror is the ideal robot's. A real one is symmetric to within its build: Go1's IMU sits
6.7 cm right of the centre line, so under a roll or yaw rate its velocimeter's x and z are mirror
images only approximately, and its trunk and calves carry their mass a millimetre or two off the
mirror. The loss is a preference, not a constraint, so this costs it little.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import mujoco
import numpy as np

from ppo_control.config.errors import UserError
from ppo_control.robots.playground import RobotTask, load_model

# What each quantity of an observation element is under the reflection (element names are
# "quantity:...:axis"; a joint quantity's rest is a joint name).
VECTORS = frozenset({"linvel", "gravity", "accelerometer", "upvector", "foot_pos", "foot_vel", "push_force", "global_linvel"})
AXIAL_VECTORS = frozenset({"gyro", "global_angvel", "angvel"})
VECTOR_FLIPS, AXIAL_FLIPS = frozenset({"y"}), frozenset({"x", "z"})
COMMAND_FLIPS = frozenset({"vy", "wz"})
# Per-side scalars (a foot's contact, air time, gait phase): only the side changes.
SIDE_SCALARS = frozenset({"last_contact", "feet_air_time", "phase_cos", "phase_sin"})
SYMMETRY_TOLERANCE = 1e-3  # metres and radians: how far the model may be from mirror-symmetric


@dataclass(frozen=True)
class SignedPermutation:
    """mirrored[..., i] = sign[i] * x[..., index[i]]."""

    index: np.ndarray
    sign: np.ndarray

    def apply(self, x: np.ndarray) -> np.ndarray:
        return self.sign * x[..., self.index]


def swap_sides(name: str, sides: Sequence[tuple[str, str]]) -> str:
    """`name` with each side token replaced by its partner (whole tokens only: FL in FL_hip, not
    in FLOOR)."""
    partner = {a: b for a, b in sides} | {b: a for a, b in sides}
    pattern = r"(?<![A-Za-z0-9])(" + "|".join(map(re.escape, partner)) + r")(?![A-Za-z0-9])"
    return re.sub(pattern, lambda m: partner[m.group(1)], name)


def _reflect_point(p: np.ndarray) -> np.ndarray:
    return p * np.array([1.0, -1.0, 1.0])


def _reflect_axis(a: np.ndarray) -> np.ndarray:
    return a * np.array([-1.0, 1.0, -1.0])


def joint_mirror(model: mujoco.MjModel, task: RobotTask) -> SignedPermutation:
    """The mirror of `task.joint_names` (the action order), from the model posed at its default
    keyframe. Raises UserError where the model is not mirror-symmetric about its x-z plane."""
    data = mujoco.MjData(model)
    if task.default_keyframe:
        mujoco.mj_resetDataKeyframe(model, data, model.keyframe(task.default_keyframe).id)
    if model.njnt and model.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE:  # the base upright at the origin, facing x
        data.qpos[:7] = [0, 0, data.qpos[2], 1, 0, 0, 0]
    mujoco.mj_kinematics(model, data)
    joints = list(task.joint_names)
    index, sign = [], []
    for name in joints:
        partner = swap_sides(name, task.sides)
        if partner not in joints:
            raise UserError(f"{task.name}: joint {name}'s mirror partner {partner} is not an actuated joint")
        j, p = model.joint(name).id, model.joint(partner).id
        if np.abs(_reflect_point(data.xanchor[j]) - data.xanchor[p]).max() > SYMMETRY_TOLERANCE:
            raise UserError(f"{task.name}: joints {name} and {partner} are not placed as mirror images")
        reflected = _reflect_axis(data.xaxis[j])
        same, opposite = np.abs(reflected - data.xaxis[p]).max(), np.abs(reflected + data.xaxis[p]).max()
        if min(same, opposite) > SYMMETRY_TOLERANCE:
            raise UserError(f"{task.name}: the axes of joints {name} and {partner} are not mirror images")
        index.append(joints.index(partner))
        sign.append(1.0 if same <= opposite else -1.0)
    return SignedPermutation(np.asarray(index), np.asarray(sign))


def element_mirror(names: Sequence[str], task: RobotTask, joints: SignedPermutation) -> SignedPermutation:
    """The mirror of observation elements `names` (one group's or several groups' in layout
    order); UserError for an element no rule covers."""
    joint_sign = dict(zip(task.joint_names, joints.sign))
    position = {name: i for i, name in enumerate(names)}
    index, sign = [], []
    for name in names:
        partner = swap_sides(name, task.sides)
        if partner not in position:
            raise UserError(f"{task.name}: observation element {name}'s mirror image {partner} is not in the observation")
        if partner == name and name.split(":")[0] in SIDE_SCALARS:
            raise UserError(f"{task.name}: observation element {name} belongs to one side, but its name has no side token {task.sides}")
        index.append(position[partner])
        sign.append(_element_sign(name, joint_sign, task.name))
    return SignedPermutation(np.asarray(index), np.asarray(sign))


def _element_sign(name: str, joint_sign: dict[str, float], task_name: str) -> float:
    quantity, *rest = name.split(":")
    last = rest[-1] if rest else ""
    if last in joint_sign:
        return float(joint_sign[last])
    if quantity in VECTORS:
        return -1.0 if last in VECTOR_FLIPS else 1.0
    if quantity in AXIAL_VECTORS:
        return -1.0 if last in AXIAL_FLIPS else 1.0
    if quantity == "command":
        return -1.0 if last in COMMAND_FLIPS else 1.0
    if quantity in SIDE_SCALARS:
        return 1.0
    raise UserError(f"{task_name}: no mirror rule for observation element {name} (ppo.mirror_loss_coef needs one for each actor element)")


def check_default_pose(task: RobotTask, default_pose: Sequence[float], joints: SignedPermutation) -> None:
    """The action rule adds the action to the default pose: the mirror of an action is the mirror
    of the motion only where the pose is its own mirror image."""
    pose = np.asarray(default_pose, dtype=float)
    if np.abs(joints.apply(pose) - pose).max() > SYMMETRY_TOLERANCE:
        raise UserError(f"{task.name}: its default pose is not its own mirror image, so its actions cannot be mirrored")


def robot_mirror(
    task: RobotTask, element_names: Sequence[str], default_pose: Sequence[float] | None
) -> tuple[SignedPermutation, SignedPermutation]:
    """(the observation elements' mirror, the actions' mirror) of `task`; UserError where the task
    or its model does not allow one."""
    if not task.sides:
        raise UserError(f"ppo.mirror_loss_coef: task {task.name} has no left-right mirror (its robot names no sides); use 0")
    joints = joint_mirror(load_model(task), task)
    if default_pose is not None:
        check_default_pose(task, default_pose, joints)
    return element_mirror(element_names, task, joints), joints


def stacked_mirror(frame: SignedPermutation, frame_dim: int, history: int) -> SignedPermutation:
    """A frame's mirror applied to each of `history` stacked frames."""
    offsets = np.repeat(np.arange(history) * frame_dim, frame_dim)
    return SignedPermutation(np.tile(frame.index, history) + offsets, np.tile(frame.sign, history))


def bounds_are_symmetric(low: np.ndarray, high: np.ndarray, actions: SignedPermutation) -> bool:
    """Whether the mirror maps the action box [low, high] onto itself: a kept joint has its
    partner's bounds, a flipped one the negated bounds of its partner."""
    kept = actions.sign > 0
    partner_low, partner_high = low[actions.index], high[actions.index]
    mirrored_low = np.where(kept, partner_low, -partner_high)
    mirrored_high = np.where(kept, partner_high, -partner_low)
    return bool(np.allclose(mirrored_low, low) and np.allclose(mirrored_high, high))
