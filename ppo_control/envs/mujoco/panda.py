"""MuJoCo Playground's PandaPickCube (a Franka Panda arm picks a cube off the table and holds it at
a target in the air) on the `mujoco` Python bindings, written to behave as envpool's C++ port does
(envpool/mujoco/playground/panda.h, PlaygroundPandaEnvBase with task_name PandaPickCube), so a
policy trained on envpool runs here unchanged and the same numbers come out within evaluation noise.

What is the C++'s and kept here on purpose:
- the model is the XML the C++ loads (mjx_single_cube.xml, its own gains), with opt.timestep = sim_dt;
- an action moves the previous targets, not a default pose: ctrl = clip(ctrl + action_scale *
  action, ctrlrange), and a reset starts from the `home` keyframe's ctrl;
- site and body frames and sensors are read right after the control period's last mj_step (no
  mj_forward): the rewards, the frames in the observation and the out-of-bounds test belong to the
  start of that substep, qpos, qvel and ctrl to its end;
- the reward is the weighted sum of four terms, clipped to [-10000, 10000] (no ctrl_dt), as float32;
  the terms reported (`reward/<term>`) are envpool's info: unweighted, with the four terms only the
  other Panda tasks set (no_box_collision, no_barrier_collision, lifted, success) at zero;
- box_target counts only once the gripper has come within 1.2 cm of the box in the episode
  (`reached_box`, kept until the next reset), from that very step on;
- an episode ends (terminated) when the box leaves |x|, |y|, |z| <= 1 m or drops below z = 0, or
  the state holds a NaN.

Random numbers: a reset draws, in the C++'s order, the box's x, the target's x, the box's y, the
target's y (each U(-0.2, 0.2) about the keyframe's box) and the target's height U(0.2, 0.4) above
the box's; a step draws none. With envpool's stream (batch.EnvpoolRandom) a sub-env replays
envpool's episode for the same seed. Every constant is the C++'s DefaultConfig (`DEFAULTS`, checked
against envpool's spec in the tests) or one of the C++'s literals.

On the bindings of envpool's own MuJoCo (3.6.0) a sub-env is bitwise envpool's, grasps and lifts
included. Newer bindings (4.0) step the arm to within rounding of 3.6's while it touches nothing;
from the robot's first contact with the box or the floor, a contact that starts a substep earlier
in one engine parts the two episodes (tests/envs/test_reference_panda.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import mujoco
import numpy as np

from ppo_control.envs.mujoco.arith import libm, norm3, ordered_sum
from ppo_control.envs.mujoco.batch import TaskStep
from ppo_control.envs.mujoco.port import PlaygroundPort

ENV_IDS = ("PandaPickCube-v1",)

# panda.h PlaygroundPandaEnvFns::DefaultConfig, less frame_stack and task_name. The spec is shared by
# every Panda task: PandaPickCube reads ctrl_dt, sim_dt, action_scale and the four scales of its
# reward (WEIGHTS); the others are accepted as envpool accepts them and change nothing here.
DEFAULTS: dict[str, float] = {
    "ctrl_dt": 0.02,
    "sim_dt": 0.005,
    "action_scale": 0.04,
    "gripper_box_scale": 4.0,
    "box_target_scale": 8.0,
    "no_floor_collision_scale": 0.25,
    "no_box_collision_scale": 0.05,
    "no_barrier_collision_scale": 0.25,
    "robot_target_qpos_scale": 0.3,
    "action_rate": -0.0005,
    "no_soln_reward": -0.01,
    "lifted_reward": 0.5,
    "success_reward": 2.0,
    "success_threshold": 0.05,
    "box_init_range": 0.05,
    "guide_sample_prob": 0.05,
}

# envpool's info:reward_* of a Panda task, in its order.
REWARD_TERMS = (
    "gripper_box",
    "box_target",
    "no_floor_collision",
    "no_box_collision",
    "no_barrier_collision",
    "robot_target_qpos",
    "lifted",
    "success",
)
# The terms ComputePickReward sums, in its order, with the option that weighs each.
WEIGHTS = (
    ("gripper_box", "gripper_box_scale"),
    ("box_target", "box_target_scale"),
    ("no_floor_collision", "no_floor_collision_scale"),
    ("robot_target_qpos", "robot_target_qpos_scale"),
)

NU = 8  # kPandaActionDim: seven arm joints and the gripper
ARM_JOINTS = tuple(f"joint{i}" for i in range(1, 8))
ACTUATED_JOINTS = (*ARM_JOINTS, "finger_joint1")  # robot_joints[i] for actuator i (target_minus_qpos)
FLOOR_SENSORS = ("left_finger_pad_floor_found", "right_finger_pad_floor_found", "hand_capsule_floor_found")
# panda.h literals: the box and the target within +-0.2 m of the keyframe's box in x and y, the
# target 0.2-0.4 m above it; the gripper reaches the box within 1.2 cm; the distances' tanh gain
# and the box_target error's mix of position and orientation; the box's bounds.
BOX_XY_RANGE = 0.2
TARGET_HEIGHT = (0.2, 0.4)
REACHED_BOX_M = 0.012
TANH_GAIN = 5.0
POSITION_WEIGHT, ROTATION_WEIGHT = 0.9, 0.1
BOUNDS_M = 1.0
REWARD_CLIP = 10000.0


class PandaPickCube(PlaygroundPort):
    """The task on a PhysicsBatch of `num_envs` sub-envs (the ReferenceTask protocol of batch.py).

    Per-sub-env task state lives in [num_envs, ...] arrays: the target position and whether the
    gripper has reached the box this episode. The actuators' targets, which actions move, are the
    physics' own ctrl (saved with it).
    """

    ENV_IDS, DEFAULTS, NU, ROBOT = ENV_IDS, DEFAULTS, NU, "Panda"
    MAX_EPISODE_STEPS = 150  # envpool's registration of PandaPickCube
    STATE = ("target_pos", "reached_box")

    def __init__(
        self, env_id: str, num_envs: int, kwargs: dict[str, Any] | None = None, num_threads: int | None = None, base_path: str | None = None
    ):
        super().__init__(env_id, num_envs, kwargs, num_threads, base_path)
        model = self.physics.model(0)
        self.init_ctrl = model.key("home").ctrl.copy()
        # The arm has no default pose its actions are measured from: the first targets stand in for it.
        self.default_pose = self.init_ctrl
        self.lowers, self.uppers = model.actuator_ctrlrange[:, 0].copy(), model.actuator_ctrlrange[:, 1].copy()
        self.gripper_site = model.site("gripper").id
        self.box_body = model.body("box").id
        self.box_qpos = int(model.jnt_qposadr[model.body_jntadr[self.box_body]])
        self.mocap = int(model.body_mocapid[model.body("mocap_target").id])
        self.arm_qpos = np.array([model.joint(name).qposadr[0] for name in ARM_JOINTS])
        self.actuated_qpos = np.array([model.joint(name).qposadr[0] for name in ACTUATED_JOINTS])
        self.floor_sensors = np.array([self.sensor_adr(model, name) for name in FLOOR_SENSORS])
        self.init_arm = self.init_qpos[self.arm_qpos]
        self.init_box = self.init_qpos[self.box_qpos : self.box_qpos + 3].copy()

        n = num_envs
        self.target_pos = np.zeros((n, 3))
        self.reached_box = np.zeros(n)

    def configure_model(self, model) -> None:
        """panda.h's constructor for PandaPickCube: sim_dt (the model keeps its gains)."""
        model.opt.timestep = self.options["sim_dt"]

    # --- episodes ------------------------------------------------------------------------------
    def reset(self, ids: np.ndarray, rngs: Sequence[np.random.Generator]) -> np.ndarray:
        """panda.h Reset and ResetPickCube: the home keyframe and its targets, the box moved in x and y
        on the table, the target (the mocap body) above the table, upright."""
        for i in ids:
            rng = rngs[i]
            data = self.physics.reset(i)
            data.qpos[:] = self.init_qpos
            data.qvel[:] = 0.0
            data.ctrl[:] = self.init_ctrl
            for axis in range(2):
                data.qpos[self.box_qpos + axis] = self.init_box[axis] + rng.uniform(-BOX_XY_RANGE, BOX_XY_RANGE)
                self.target_pos[i, axis] = self.init_box[axis] + rng.uniform(-BOX_XY_RANGE, BOX_XY_RANGE)
            self.target_pos[i, 2] = self.init_box[2] + rng.uniform(*TARGET_HEIGHT)
            data.mocap_pos[:] = 0.0
            data.mocap_quat[:] = (1.0, 0.0, 0.0, 0.0)
            data.mocap_pos[self.mocap] = self.target_pos[i]
            self.reached_box[i] = 0.0
        self.physics.forward(ids)
        return self._observe(ids, self._read(ids))

    # --- the control step ----------------------------------------------------------------------
    def step(self, actions: np.ndarray, rngs: Sequence[np.random.Generator]) -> TaskStep:
        """panda.h Step, for every sub-env at once."""
        targets = np.clip(self.physics.gather("ctrl") + actions * self.options["action_scale"], self.lowers, self.uppers)
        self.physics.step(targets, self.substeps)
        r = self._read(None)
        terms = self._reward_terms(r)
        total = np.zeros(self.num_envs)
        for name, scale in WEIGHTS:
            total = total + terms[name] * self.options[scale]
        reward = np.clip(total, -REWARD_CLIP, REWARD_CLIP).astype(np.float32)
        obs = self._observe(np.arange(self.num_envs), r)
        box = r["box_pos"]
        out_of_bounds = (np.abs(box) > BOUNDS_M).any(axis=1) | (box[:, 2] < 0.0)
        nan = np.isnan(r["qpos"]).any(axis=1) | np.isnan(r["qvel"]).any(axis=1)
        return TaskStep(obs, reward, out_of_bounds | nan, terms)

    def actions_for_targets(self, targets: np.ndarray) -> np.ndarray:
        """Actions move the targets the physics holds: hold `targets` there and move them by nothing,
        so that the step writes them exactly (a difference divided by the action scale would not
        round back to them)."""
        for data, row in zip(self.physics.data, targets):
            data.ctrl[:] = row
        return np.zeros_like(targets)

    def _reward_terms(self, r: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """panda.h ComputePickReward's terms, unweighted (envpool's info), in REWARD_TERMS' order;
        updates reached_box first, as the C++ does."""
        box, gripper = r["box_pos"], r["gripper_pos"]
        position_error = norm3(self.target_pos - box)
        rotation_error = np.sqrt(ordered_sum((r["target_mat"][:, :6] - r["box_mat"][:, :6]) ** 2))
        gripper_error = norm3(box - gripper)
        self.reached_box = np.maximum(self.reached_box, (gripper_error < REACHED_BOX_M).astype(np.float64))
        arm_error = np.sqrt(ordered_sum((r["qpos"][:, self.arm_qpos] - self.init_arm) ** 2))
        zero = np.zeros(self.num_envs)
        box_error = POSITION_WEIGHT * position_error + ROTATION_WEIGHT * rotation_error
        terms = {
            "gripper_box": 1.0 - libm(math.tanh, TANH_GAIN * gripper_error),
            "box_target": (1.0 - libm(math.tanh, TANH_GAIN * box_error)) * self.reached_box,
            "no_floor_collision": np.where((r["sensordata"][:, self.floor_sensors] > 0.0).any(axis=1), 0.0, 1.0),
            "no_box_collision": zero,
            "no_barrier_collision": zero,
            "robot_target_qpos": 1.0 - libm(math.tanh, arm_error),
            "lifted": zero,
            "success": zero,
        }
        return {name: terms[name] for name in REWARD_TERMS}

    # --- observations --------------------------------------------------------------------------
    def _read(self, ids: np.ndarray | None) -> dict[str, np.ndarray]:
        """What the task reads of the physics of sub-envs `ids` (all when None), as they stand."""
        g = self.physics.gather
        mocap_quat = g("mocap_quat", ids)[:, self.mocap]
        target_mat = np.empty((len(mocap_quat), 9))
        for row, quat in zip(target_mat, mocap_quat):
            mujoco.mju_quat2Mat(row, quat)
        return {
            "qpos": g("qpos", ids),
            "qvel": g("qvel", ids),
            "ctrl": g("ctrl", ids),
            "sensordata": g("sensordata", ids),
            "gripper_pos": g("site_xpos", ids)[:, self.gripper_site],
            "gripper_mat": g("site_xmat", ids)[:, self.gripper_site],
            "box_pos": g("xpos", ids)[:, self.box_body],
            "box_mat": g("xmat", ids)[:, self.box_body],
            "target_mat": target_mat,
        }

    def _observe(self, ids: np.ndarray, r: dict[str, np.ndarray]) -> np.ndarray:
        """panda.h UpdateObs for sub-envs `ids` (rows of `r`): envpool's obs:state, the whole
        observation (no noise, no privileged group)."""
        box, gripper = r["box_pos"], r["gripper_pos"]
        return np.concatenate(
            [
                r["qpos"],
                r["qvel"],
                gripper,
                r["gripper_mat"][:, 3:9],
                r["box_mat"][:, 3:9],
                box - gripper,
                self.target_pos[ids] - box,
                r["target_mat"][:, :6] - r["box_mat"][:, :6],
                r["ctrl"] - r["qpos"][:, self.actuated_qpos],
            ],
            axis=1,
        )
