"""MuJoCo Playground's Go1 joystick task (flat and rough terrain) on the `mujoco` Python bindings,
written to behave as envpool's C++ port does (envpool/mujoco/playground/go1.h,
PlaygroundGo1EnvBase), so a policy trained on envpool runs here unchanged and the same numbers come
out within evaluation noise.

What is the C++'s and kept here on purpose:
- the model is the XML the C++ loads, with opt.timestep = sim_dt, opt.ccd_iterations = 20, the
  spec's kd in every joint's dof_damping and its kp in every actuator's gainprm[0] and -biasprm[1];
- sensors, site frames and actuator forces are read right after the control period's last mj_step
  (no mj_forward): they belong to the start of that substep;
- the observation's last_action is the action before the current one (the observation is written
  before the action is stored), and a joint angle's noise is added before the default is subtracted;
- the reward is the sum of the terms times ctrl_dt, clipped to [0, 10000], as float32; the terms
  reported (`reward/<term>`) are the scaled terms before the dt;
- the command is resampled when its countdown (exponential, mean 5 s) runs out or the robot falls,
  and the observation after the step already carries the new command;
- there are no pushes: the privileged `push_force` is the trunk's xfrc_applied, which stays zero.

Random numbers are drawn in the C++'s order (reset offsets, yaw, base velocities, the countdown, the
command; per step the resampled command, then the observation noise in FillObs' order), so with
envpool's stream (batch.EnvpoolRandom) a sub-env replays envpool's episode for the same seed.
Every constant is the C++'s DefaultConfig (`DEFAULTS`, checked against envpool's spec in the tests)
or one of the C++'s literals (reset offsets, the command countdown's mean, the pose weights).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import mujoco
import numpy as np

from ppo_control.config.errors import UserError
from ppo_control.envs.mujoco.batch import TaskStep
from ppo_control.envs.mujoco.port import round_half_away
from ppo_control.envs.mujoco.quadruped import QuadrupedJoystick

ENV_IDS = ("Go1JoystickFlatTerrain-v1", "Go1JoystickRoughTerrain-v1")

# go1.h PlaygroundGo1EnvFns::DefaultConfig, less frame_stack and task_name (not task options here).
DEFAULTS: dict[str, float] = {
    "ctrl_dt": 0.02,
    "sim_dt": 0.004,
    "kp": 35.0,
    "kd": 0.5,
    "action_scale": 0.5,
    "soft_joint_pos_limit_factor": 0.95,
    "noise_level": 1.0,
    "noise_joint_pos": 0.03,
    "noise_joint_vel": 1.5,
    "noise_gyro": 0.2,
    "noise_gravity": 0.05,
    "noise_linvel": 0.1,
    "tracking_lin_vel_scale": 1.0,
    "tracking_ang_vel_scale": 0.5,
    "lin_vel_z_scale": -0.5,
    "ang_vel_xy_scale": -0.05,
    "orientation_scale": -5.0,
    "dof_pos_limits_scale": -1.0,
    "pose_scale": 0.5,
    "termination_scale": -1.0,
    "stand_still_scale": -1.0,
    "torques_scale": -0.0002,
    "action_rate_scale": -0.01,
    "energy_scale": -0.001,
    "feet_clearance_scale": -2.0,
    "feet_height_scale": -0.2,
    "feet_slip_scale": -0.1,
    "feet_air_time_scale": 0.1,
    "tracking_sigma": 0.25,
    "max_foot_height": 0.1,
    "command_a0": 1.5,
    "command_a1": 0.8,
    "command_a2": 1.2,
    "command_b0": 0.9,
    "command_b1": 0.25,
    "command_b2": 0.5,
}

# The terms in the order go1.h sums them (the sum's rounding follows that order).
REWARD_TERMS = (
    "tracking_lin_vel",
    "tracking_ang_vel",
    "lin_vel_z",
    "ang_vel_xy",
    "orientation",
    "dof_pos_limits",
    "pose",
    "termination",
    "stand_still",
    "torques",
    "action_rate",
    "energy",
    "feet_clearance",
    "feet_height",
    "feet_slip",
    "feet_air_time",
)

NU = 12
FEET = ("FR", "FL", "RR", "RL")  # kGo1FeetSites
# go1.h literals: reset offsets and velocities are U(-0.5, 0.5), yaw U(-3.14, 3.14); the command
# countdown is an exponential with mean 5 s; calf joints (every third) weigh 0.1 in the pose term;
# the command is "zero" below a norm of 0.01; the air-time reward counts air time past 0.1 s.
RESET_XY_VEL = 0.5
RESET_YAW = 3.14
COMMAND_MEAN_S = 5.0
POSE_WEIGHTS = np.array([1.0, 1.0, 0.1] * 4)
ZERO_COMMAND_NORM = 0.01
AIR_TIME_THRESHOLD_S = 0.1


class Go1Joystick(QuadrupedJoystick):
    """The task on a PhysicsBatch of `num_envs` sub-envs (the ReferenceTask protocol of batch.py).

    Per-sub-env task state lives in [num_envs, ...] arrays: the command and its countdown, the last
    action, the feet's air time, swing peak and last contact.
    """

    ENV_IDS, DEFAULTS, NU, ROBOT, FEET, TORSO = ENV_IDS, DEFAULTS, NU, "Go1", FEET, "trunk"
    # The gait_clock variant's trot: FR with RL, FL with RR, half a cycle apart.
    TROT_RAD = {"FR": 0.0, "FL": math.pi, "RR": math.pi, "RL": 0.0}
    STATE = ("command", "steps_until_next_cmd", "last_act", "feet_air_time", "swing_peak", "last_contact")
    # command_mean_s: the command countdown's mean (the C++ literal by default). A shorter one is a
    # training option: more command changes per episode, where the policy's falls concentrate.
    # turn_in_place_share: a training option. Each command drawn (at a reset or a resample) is
    # replaced, with this probability, by a turn in place (0, 0, U(-a2, a2)): the commands the
    # policy falls under (turns in place, stops) are rare in the task's own process.
    # track_at_trunk_center: a named reward variant. The task tracks the commanded planar velocity
    # at the IMU site, which sits off the trunk's axis on the right, so its turn in place is a pivot
    # about a point on the robot's right; the variant tracks the velocity at the trunk's centre
    # (its frame origin, amid the hips), what a joystick user means. The observation is unchanged.
    REFERENCE_OPTIONS = {
        **QuadrupedJoystick.REFERENCE_OPTIONS,
        "command_mean_s": COMMAND_MEAN_S,
        "turn_in_place_share": 0.0,
        "track_at_trunk_center": False,
    }

    def __init__(
        self, env_id: str, num_envs: int, kwargs: dict[str, Any] | None = None, num_threads: int | None = None, base_path: str | None = None
    ):
        super().__init__(env_id, num_envs, kwargs, num_threads, base_path)
        options, model = self.options, self.physics.model(0)
        factor = options["soft_joint_pos_limit_factor"]
        self.soft_lowers = model.jnt_range[1 : 1 + NU, 0] * factor
        self.soft_uppers = model.jnt_range[1 : 1 + NU, 1] * factor
        self.command_bounds = np.array([options[f"command_a{i}"] for i in range(3)])
        self.command_keep = np.array([options[f"command_b{i}"] for i in range(3)])
        self.noise_level = options["noise_level"]
        # MaybeNoisy's scales, in the order FillObs draws them: linvel, gyro, gravity, joint pos, joint vel.
        self.noise_scales = np.concatenate(
            [
                np.full(3, options["noise_linvel"]),
                np.full(3, options["noise_gyro"]),
                np.full(3, options["noise_gravity"]),
                np.full(NU, options["noise_joint_pos"]),
                np.full(NU, options["noise_joint_vel"]),
            ]
        )
        if options["command_mean_s"] <= 0.0:
            raise UserError(f"env.kwargs.command_mean_s={options['command_mean_s']}: the command countdown's mean must be > 0 seconds")
        if not 0.0 <= options["turn_in_place_share"] <= 1.0:
            raise UserError(f"env.kwargs.turn_in_place_share={options['turn_in_place_share']}: a probability, from 0 to 1")
        self.steps_until_next_cmd = np.zeros(num_envs, dtype=np.int64)
        # From the IMU site to the trunk's frame origin, in the site's frame (that of its sensors).
        site_rotation = np.zeros(9)
        mujoco.mju_quat2Mat(site_rotation, model.site_quat[self.imu_site])
        self.imu_to_trunk_center = site_rotation.reshape(3, 3).T @ -model.site_pos[self.imu_site]

    def tracked_linvel(self, sensordata: np.ndarray) -> np.ndarray:
        """The planar velocity the tracking reward compares with the command, in the IMU's frame:
        the IMU's velocimeter, or (track_at_trunk_center) the velocity at the trunk's centre, from
        the rigid trunk's rotation (gyro x lever)."""
        linvel = self._sensor(sensordata, "local_linvel")
        if not self.options["track_at_trunk_center"]:
            return linvel
        return linvel + np.cross(self._sensor(sensordata, "gyro"), self.imu_to_trunk_center)

    def configure_model(self, model) -> None:
        """go1.h's constructor: sim_dt, ccd_iterations, the spec's kd in every joint's damping and its
        kp in every actuator (gainprm[0], -biasprm[1])."""
        options = self.options
        model.opt.timestep = options["sim_dt"]
        model.opt.ccd_iterations = 20
        model.dof_damping[6:] = options["kd"]
        model.actuator_gainprm[:, 0] = options["kp"]
        model.actuator_biasprm[:, 1] = -options["kp"]

    # --- episodes ------------------------------------------------------------------------------
    def reset(self, ids: np.ndarray, rngs: Sequence[np.random.Generator]) -> np.ndarray:
        """go1.h Reset: the home pose moved by U(-0.5, 0.5) in x and y, turned by a yaw in
        U(-3.14, 3.14), with base velocities U(-0.5, 0.5); a command and its countdown."""
        for i in ids:
            rng = rngs[i]
            data = self.physics.reset(i)
            data.qpos[:] = self.init_qpos
            data.qvel[:] = 0.0
            data.ctrl[:] = self.default_pose
            data.qpos[0] += rng.uniform(-RESET_XY_VEL, RESET_XY_VEL)
            data.qpos[1] += rng.uniform(-RESET_XY_VEL, RESET_XY_VEL)
            yaw = rng.uniform(-RESET_YAW, RESET_YAW)
            quat = np.empty(4)
            mujoco.mju_mulQuat(quat, data.qpos[3:7].copy(), np.array([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)]))
            data.qpos[3:7] = quat
            data.qvel[:6] = rng.uniform(-RESET_XY_VEL, RESET_XY_VEL, 6)
            self.steps_until_next_cmd[i] = self._countdown(rng)
            self.command[i] = self.forward_only((rng.random(3) * 2.0 - 1.0) * self.command_bounds)  # drawn always: envpool's stream
            self.maybe_turn_in_place(i, rng)
            self.take_kept_command(i)
        self.physics.forward(ids)
        self.clear(ids)
        return self._observe(ids, self._read(ids), rngs)

    def place(self, i: int, qpos: np.ndarray, qvel: np.ndarray, command: np.ndarray, steps_until_next_cmd: int, rng) -> np.ndarray:
        """Put sub-env i in a given physics state and command, as a reset leaves it (no actions yet,
        feet never in contact), and return its observation: for checks against another simulator."""
        data = self.physics.reset(i)
        data.qpos[:], data.qvel[:], data.ctrl[:] = qpos, qvel, self.default_pose
        self.command[i], self.steps_until_next_cmd[i] = command, steps_until_next_cmd
        ids = np.array([i])
        self.physics.forward(ids)
        self.clear(ids)
        return self._observe(ids, self._read(ids), {i: rng})[0]

    def _countdown(self, rng: np.random.Generator) -> int:
        return int(round_half_away(rng.exponential(1.0) * self.options["command_mean_s"] / self.control_period_s))

    def _sample_command(self, i: int, rng: np.random.Generator) -> None:
        """go1.h SampleCommand: per axis, with probability 1/2 a new value, which is U(-a, a) with
        probability b and 0 otherwise; else the command stays."""
        for axis in range(3):
            y = (rng.random() * 2.0 - 1.0) * self.command_bounds[axis]
            z = 1.0 if rng.random() < self.command_keep[axis] else 0.0
            w = 1.0 if rng.random() < 0.5 else 0.0
            self.command[i, axis] -= w * (self.command[i, axis] - y * z)
        self.command[i] = self.forward_only(self.command[i])
        self.maybe_turn_in_place(i, rng)

    def maybe_turn_in_place(self, i: int, rng: np.random.Generator) -> None:
        """turn_in_place_share: with that probability, sub-env i's new command becomes a turn in
        place. Draws nothing when the share is 0, so the task's own random stream is kept."""
        share = self.options["turn_in_place_share"]
        if share > 0.0 and rng.random() < share:
            self.command[i] = (0.0, 0.0, (rng.random() * 2.0 - 1.0) * self.command_bounds[2])

    # --- the control step ----------------------------------------------------------------------
    def step(self, actions: np.ndarray, rngs: Sequence[np.random.Generator]) -> TaskStep:
        """go1.h Step, for every sub-env at once."""
        self.physics.step(self.default_pose + actions * self.options["action_scale"], self.substeps)
        r = self._read(None)
        contact = self.contact(r["sensordata"])
        first_contact = self.touch_down(contact, r["feet_z"])
        terminated = r["sensordata"][:, self.adr["upvector"] + 2] < 0.0

        terms = reward_terms(self, r, actions, first_contact, contact, terminated)
        total = np.zeros(self.num_envs)
        for name in REWARD_TERMS:
            total = total + terms[name]
        task_total = None
        if self.options["track_at_trunk_center"]:  # the task's own term, at the IMU, for task_reward
            imu_term = tracking_lin_vel(self, self._sensor(r["sensordata"], "local_linvel"))
            task_total = total - terms["tracking_lin_vel"] + imu_term
        reward, diagnostics = self.variant_reward(total, terms, task_total)

        acted_command = self.command.copy()
        self.steps_until_next_cmd -= 1
        for i in np.flatnonzero((self.steps_until_next_cmd <= 0) | terminated):
            self._sample_command(i, rngs[i])
            self.steps_until_next_cmd[i] = self._countdown(rngs[i])
        self.keep_fallen_commands(terminated, acted_command)
        obs = self._observe(np.arange(self.num_envs), r, rngs)

        if self.clock is not None:  # the observation holds the phase before this step's advance
            self.clock.step(acted_command)
        self.last_act[:] = actions
        self.lift_off(contact)
        return TaskStep(obs, reward, terminated, terms, diagnostics)

    # --- observations --------------------------------------------------------------------------
    def _observe(self, ids: np.ndarray, r: dict[str, np.ndarray], rngs) -> np.ndarray:
        """go1.h FillObs for sub-envs `ids` (rows of `r`): `state` (noisy, uniform noise) then
        `privileged_state` (a copy of `state`, then clean quantities)."""
        s = r["sensordata"]
        gyro, linvel = self._sensor(s, "gyro"), self._sensor(s, "local_linvel")
        gravity = -r["imu_xmat"][:, 6:9]
        q, qd = r["qpos"][:, 7 : 7 + NU], r["qvel"][:, 6 : 6 + NU]
        draws = np.stack([rngs[i].uniform(-1.0, 1.0, len(self.noise_scales)) for i in ids])
        noise = draws * self.noise_level * self.noise_scales  # MaybeNoisy's order of products
        noisy = np.concatenate([linvel, gyro, gravity, q, qd], axis=1) + noise
        state = np.concatenate(
            [noisy[:, :9], noisy[:, 9 : 9 + NU] - self.default_pose, noisy[:, 9 + NU :], self.last_act[ids], self.command[ids]], axis=1
        )
        feet_vel = s[:, self.feet_linvel].reshape(len(ids), -1)
        privileged = np.concatenate(
            [
                state,
                gyro,
                self._sensor(s, "accelerometer"),
                gravity,
                linvel,
                self._sensor(s, "global_angvel"),
                q - self.default_pose,
                qd,
                r["actuator_force"][:, :NU],
                self.last_contact[ids].astype(np.float64),
                feet_vel,
                self.feet_air_time[ids],
                r["push_force"],
                np.zeros((len(ids), 1)),
            ],
            axis=1,
        )
        return self.with_clock(state, privileged, ids)


# --- rewards ----------------------------------------------------------------------------------
def tracking_lin_vel(task: Go1Joystick, linvel: np.ndarray) -> np.ndarray:
    """The tracking_lin_vel term (times its scale) of a measured planar velocity `linvel`."""
    o, cmd = task.options, task.command
    lin_error = (cmd[:, 0] - linvel[:, 0]) ** 2 + (cmd[:, 1] - linvel[:, 1]) ** 2
    return np.exp(-lin_error / o["tracking_sigma"]) * o["tracking_lin_vel_scale"]


def reward_terms(
    task: Go1Joystick, r: dict[str, np.ndarray], actions: np.ndarray, first_contact: np.ndarray, contact: np.ndarray, terminated: np.ndarray
) -> dict[str, np.ndarray]:
    """go1.h ComputeRewards: each term times its scale (the sum's dt comes later), in REWARD_TERMS'
    order, then the gait_clock variant's feet_phase; `r` is what `task` read of its physics this step."""
    o, s, cmd = task.options, r["sensordata"], task.command
    gyro = task._sensor(s, "gyro")
    global_linvel, global_angvel, up = task._sensor(s, "global_linvel"), task._sensor(s, "global_angvel"), task._sensor(s, "upvector")
    ang_error = (cmd[:, 2] - gyro[:, 2]) ** 2
    q, qd, force = r["qpos"][:, 7 : 7 + NU], r["qvel"][:, 6 : 6 + NU], r["actuator_force"][:, :NU]
    delta = q - task.default_pose
    zero_command = np.linalg.norm(cmd, axis=1) < ZERO_COMMAND_NORM
    moving = (~zero_command).astype(np.float64)
    limits = -np.minimum(q - task.soft_lowers, 0.0) + np.maximum(q - task.soft_uppers, 0.0)

    feet_vel = s[:, task.feet_linvel]  # [n, feet, xyz]
    vel_xy_sq = feet_vel[..., 0] ** 2 + feet_vel[..., 1] ** 2
    height = o["max_foot_height"]
    first = first_contact.astype(np.float64) * moving[:, None]
    terms = {
        "tracking_lin_vel": tracking_lin_vel(task, task.tracked_linvel(s)),
        "tracking_ang_vel": np.exp(-ang_error / o["tracking_sigma"]) * o["tracking_ang_vel_scale"],
        "lin_vel_z": global_linvel[:, 2] ** 2 * o["lin_vel_z_scale"],
        "ang_vel_xy": (global_angvel[:, 0] ** 2 + global_angvel[:, 1] ** 2) * o["ang_vel_xy_scale"],
        "orientation": (up[:, 0] ** 2 + up[:, 1] ** 2) * o["orientation_scale"],
        "dof_pos_limits": limits.sum(axis=1) * o["dof_pos_limits_scale"],
        "pose": np.exp(-(delta**2 * POSE_WEIGHTS).sum(axis=1)) * o["pose_scale"],
        "termination": terminated.astype(np.float64) * o["termination_scale"],
        "stand_still": np.abs(delta).sum(axis=1) * zero_command * o["stand_still_scale"],
        "torques": (np.sqrt((force**2).sum(axis=1)) + np.abs(force).sum(axis=1)) * o["torques_scale"],
        "action_rate": ((actions - task.last_act) ** 2).sum(axis=1) * o["action_rate_scale"],
        "energy": (np.abs(qd) * np.abs(force)).sum(axis=1) * o["energy_scale"],
        "feet_clearance": (np.abs(r["feet_z"] - height) * np.sqrt(np.sqrt(vel_xy_sq))).sum(axis=1) * o["feet_clearance_scale"],
        "feet_height": (((task.swing_peak / height - 1.0) ** 2) * first).sum(axis=1) * o["feet_height_scale"],
        "feet_slip": (vel_xy_sq * contact * moving[:, None]).sum(axis=1) * o["feet_slip_scale"],
        "feet_air_time": ((task.feet_air_time - AIR_TIME_THRESHOLD_S) * first).sum(axis=1) * o["feet_air_time_scale"],
    }
    if task.clock is not None:
        terms["feet_phase"] = task.feet_phase(r)
    return terms
