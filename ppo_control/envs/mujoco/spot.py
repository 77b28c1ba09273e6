"""MuJoCo Playground's SpotFlatTerrainJoystick (Boston Dynamics' Spot, joystick on flat terrain) on
the `mujoco` Python bindings, written to behave as envpool's C++ port does
(envpool/mujoco/playground/spot.h, PlaygroundSpotEnvBase with task_name SpotFlatTerrainJoystick),
so a policy trained on envpool runs here unchanged and the same numbers come out within evaluation
noise.

What is the C++'s and kept here on purpose:
- the model is the XML the C++ loads (scene_mjx_feetonly_flat_terrain.xml), with opt.timestep =
  sim_dt, the spec's kd in every joint's dof_damping and its kp in every actuator's gainprm[0] and
  -biasprm[1] (the actuators' own velocity term stays);
- a reset is the home keyframe at rest, every actuator's target at zero (not the default pose) until
  the first step; the targets are default + action_scale * action clipped to the actuators' ranges;
- sensors, site frames and actuator forces are read right after the control period's last mj_step
  (no mj_forward): they belong to the start of that substep;
- the observation is written before the step's termination, rewards and counters: its last_action
  is the action before the current one and its command the command before a resample;
- qpos_error_hist holds the last three (noisy joint angle - target) of the observations, newest
  first; a reset pushes one with a target of zero onto zeros;
- the reward is the sum of the terms times ctrl_dt, clipped to [0, 10000], as float32; the terms
  reported (`reward/<term>`) are every reward_<term> of envpool's info, scaled, before the dt (the
  four the joystick does not compute, feet_phase, hip_splay, torso_height and stand_still, at zero);
- the command is resampled (uniform ranges, then all zero with probability 0.1) only when the step
  counter passes 200, never on a fall; the counter restarts then or on a fall;
- a fall is the IMU's up vector below 0.85 in z (with early_termination); there are no pushes (the
  privileged `push_force`, the body's xfrc_applied, stays zero).

Random numbers are drawn in the C++'s order (reset: the command; per step: the observation noise in
UpdateJoystickObs' order, then a resampled command), so with envpool's stream
(batch.EnvpoolRandom) a sub-env replays envpool's episode for the same seed. exp is the C library's
and sums run in the C++'s order (arith.py). Every constant is the C++'s DefaultConfig (`DEFAULTS`,
checked against envpool's spec in the tests) or one of its literals.

The reference's own options (REFERENCE_OPTIONS, quadruped.py) are Go1's, less feet_phase_scale,
which Spot's spec has (default 0): the gait_clock variant weighs its feet_phase term by it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np

from ppo_control.envs.mujoco.arith import libm, norm3, ordered_sum
from ppo_control.envs.mujoco.batch import TaskStep
from ppo_control.envs.mujoco.quadruped import QuadrupedJoystick

ENV_IDS = ("SpotFlatTerrainJoystick-v1",)

# spot.h SpotDefaultConfig, less frame_stack and task_name. The spec is shared by Spot's three tasks:
# the joystick reads the timing, gains, action scale, noise, early_termination, its reward scales
# and the command ranges; the others are accepted as envpool accepts them and change nothing here.
DEFAULTS: dict[str, Any] = {
    "ctrl_dt": 0.02,
    "sim_dt": 0.004,
    "kp": 300.0,
    "kd": 1.0,
    "early_termination": True,
    "action_scale": 0.3,
    "history_len": 3,
    "noise_level": 1.0,
    "noise_joint_pos": 0.05,
    "noise_gyro": 0.1,
    "noise_gravity": 0.03,
    "noise_feet_pos_x": 0.01,
    "noise_feet_pos_y": 0.005,
    "noise_feet_pos_z": 0.02,
    "drop_from_height_prob": 0.6,
    "settle_time": 0.5,
    "tracking_lin_vel_scale": 1.5,
    "tracking_ang_vel_scale": 0.8,
    "lin_vel_z_scale": -2.0,
    "ang_vel_xy_scale": -0.05,
    "orientation_scale": -5.0,
    "termination_scale": -1.0,
    "posture_scale": 1.0,
    "torques_scale": -0.0002,
    "action_rate_scale": -0.01,
    "energy_scale": -0.001,
    "feet_slip_scale": -0.1,
    "feet_clearance_scale": -2.0,
    "feet_height_scale": -0.1,
    "feet_air_time_scale": 0.1,
    "feet_phase_scale": 0.0,
    "hip_splay_scale": 0.0,
    "torso_height_scale": 0.0,
    "stand_still_scale": 0.0,
    "tracking_sigma": 0.25,
    "max_foot_height": 0.12,
    "pert_enable": False,
    "kick_wait_time_min": 1.0,
    "kick_wait_time_max": 3.0,
    "kick_duration_min": 0.05,
    "kick_duration_max": 0.2,
    "kick_velocity_min": 0.0,
    "kick_velocity_max": 3.0,
    "lin_vel_x_min": -1.0,
    "lin_vel_x_max": 1.0,
    "lin_vel_y_min": -0.8,
    "lin_vel_y_max": 0.8,
    "ang_vel_yaw_min": -1.0,
    "ang_vel_yaw_max": 1.0,
    "gait_frequency_min": 0.5,
    "gait_frequency_max": 4.0,
    "gait_count": 5,
    "foot_height_min": 0.08,
    "foot_height_max": 0.4,
}

# envpool's info:reward_* of Spot's joystick, in its order.
REWARD_TERMS = (
    "tracking_lin_vel",
    "tracking_ang_vel",
    "feet_phase",
    "lin_vel_z",
    "ang_vel_xy",
    "hip_splay",
    "orientation",
    "termination",
    "posture",
    "torques",
    "action_rate",
    "energy",
    "feet_slip",
    "feet_clearance",
    "feet_height",
    "feet_air_time",
    "torso_height",
    "stand_still",
)
# The terms the joystick leaves at zero (its gait and getup tasks' terms); the others are the ones
# ComputeJoystickReward sums, in the order it sums them (the sum's rounding follows it).
NOT_COMPUTED = ("feet_phase", "hip_splay", "torso_height", "stand_still")
SUMMED_TERMS = tuple(term for term in REWARD_TERMS if term not in NOT_COMPUTED)

NU = 12
FEET = ("FL", "FR", "HL", "HR")  # kSpotFeetSites
HISTORY = 3  # kSpotHistoryLen (the spec's history_len is not read)
# spot.h literals: the command is resampled once the step counter passes 200, and is all zero with
# probability 0.1; a fall is an up vector below 0.85 in z; the command is "zero" below a norm of
# 0.01 (posture then weighs the pose's error by 10, feet_height and feet_air_time pay nothing); the
# air-time reward counts air time past 0.1 s.
RESAMPLE_AFTER_STEPS = 200
ZERO_COMMAND_PROB = 0.1
FALL_UP_Z = 0.85
ZERO_COMMAND_NORM = 0.01
STAND_POSTURE_WEIGHT = -10.0
AIR_TIME_THRESHOLD_S = 0.1
COMMAND_RANGES = ("lin_vel_x", "lin_vel_y", "ang_vel_yaw")


class SpotJoystick(QuadrupedJoystick):
    """The task on a PhysicsBatch of `num_envs` sub-envs (the ReferenceTask protocol of batch.py).

    Per-sub-env task state lives in [num_envs, ...] arrays: the command and the steps since it was
    drawn, the last two actions, the joint errors' history, the feet's air time, swing peak and last
    contact. The actuators' targets, which the history subtracts, are the physics' own ctrl.
    """

    ENV_IDS, DEFAULTS, NU, ROBOT, FEET, TORSO = ENV_IDS, DEFAULTS, NU, "Spot", FEET, "body"
    BOOLEAN_OPTIONS = ("early_termination", "pert_enable")
    REFERENCE_OPTIONS = {key: value for key, value in QuadrupedJoystick.REFERENCE_OPTIONS.items() if key not in DEFAULTS}
    # The gait_clock variant's trot, spot.h's kSpotGaitPhases[0]: FL with HR, FR with HL.
    TROT_RAD = {"FL": 0.0, "FR": math.pi, "HL": math.pi, "HR": 0.0}
    STATE = ("command", "command_steps", "last_act", "last_last_act", "qpos_error_history", "feet_air_time", "swing_peak", "last_contact")

    def __init__(
        self, env_id: str, num_envs: int, kwargs: dict[str, Any] | None = None, num_threads: int | None = None, base_path: str | None = None
    ):
        super().__init__(env_id, num_envs, kwargs, num_threads, base_path)
        options, model = self.options, self.physics.model(0)
        self.lowers, self.uppers = model.actuator_ctrlrange[:, 0].copy(), model.actuator_ctrlrange[:, 1].copy()
        self.feet_pos = np.array([[self.sensor_adr(model, f"{foot}_pos") + axis for axis in range(3)] for foot in FEET])
        self.command_low = np.array([options[f"{name}_min"] for name in COMMAND_RANGES])
        self.command_high = np.array([options[f"{name}_max"] for name in COMMAND_RANGES])
        # Noise(scale) = noise_level * scale * U(-1, 1), in UpdateJoystickObs' order: joint angles,
        # each foot's x, y, z, gyro, up vector.
        feet = np.tile([options["noise_feet_pos_x"], options["noise_feet_pos_y"], options["noise_feet_pos_z"]], len(FEET))
        scales = np.concatenate(
            [np.full(NU, options["noise_joint_pos"]), feet, np.full(3, options["noise_gyro"]), np.full(3, options["noise_gravity"])]
        )
        self.noise = options["noise_level"] * scales

        n = num_envs
        self.command_steps = np.zeros(n, dtype=np.int64)
        self.last_last_act = np.zeros((n, NU))
        self.qpos_error_history = np.zeros((n, HISTORY * NU))

    def configure_model(self, model) -> None:
        """spot.h's constructor: sim_dt, the spec's kd in every joint's damping and its kp in every
        actuator (gainprm[0], -biasprm[1])."""
        options = self.options
        model.opt.timestep = options["sim_dt"]
        model.dof_damping[6:] = options["kd"]
        model.actuator_gainprm[:, 0] = options["kp"]
        model.actuator_biasprm[:, 1] = -options["kp"]

    # --- episodes ------------------------------------------------------------------------------
    def reset(self, ids: np.ndarray, rngs: Sequence[np.random.Generator]) -> np.ndarray:
        """spot.h Reset (joystick): the home keyframe at rest, zero targets, a command."""
        for i in ids:
            data = self.physics.reset(i)
            data.qpos[:] = self.init_qpos
            data.qvel[:] = 0.0
            data.ctrl[:] = 0.0
            data.xfrc_applied[:] = 0.0
            self._sample_command(i, rngs[i])
            self.take_kept_command(i)
        self.physics.forward(ids)
        self.clear(ids)
        return self._observe(ids, self._read(ids), rngs)

    def clear(self, ids: np.ndarray) -> None:
        super().clear(ids)
        for array in (self.command_steps, self.last_last_act, self.qpos_error_history):
            array[ids] = 0

    def _sample_command(self, i: int, rng) -> None:
        """spot.h SampleCommand: each axis U(min, max), then all zero with probability 0.1."""
        command = np.array([rng.uniform(low, high) for low, high in zip(self.command_low, self.command_high)])
        if rng.uniform(0.0, 1.0) < ZERO_COMMAND_PROB:
            command[:] = 0.0
        self.command[i] = self.forward_only(command)

    # --- the control step ----------------------------------------------------------------------
    def step(self, actions: np.ndarray, rngs: Sequence[np.random.Generator]) -> TaskStep:
        """spot.h StepJoystick, for every sub-env at once."""
        targets = np.clip(self.default_pose + actions * self.options["action_scale"], self.lowers, self.uppers)
        self.physics.step(targets, self.substeps)
        r = self._read(None)
        contact = self.contact(r["sensordata"])
        first_contact = self.touch_down(contact, r["feet_z"])
        everyone = np.arange(self.num_envs)
        obs = self._observe(everyone, r, rngs)
        terminated = np.zeros(self.num_envs, dtype=bool)
        if self.options["early_termination"]:
            terminated = self._sensor(r["sensordata"], "upvector")[:, 2] < FALL_UP_Z

        terms = reward_terms(self, r, actions, first_contact, contact, terminated)
        total = terms[SUMMED_TERMS[0]]
        for name in SUMMED_TERMS[1:]:
            total = total + terms[name]
        reward, diagnostics = self.variant_reward(total, terms)

        acted_command = self.command.copy()
        self.last_last_act[:] = self.last_act
        self.last_act[:] = actions
        self.command_steps += 1
        for i in np.flatnonzero(self.command_steps > RESAMPLE_AFTER_STEPS):
            self._sample_command(i, rngs[i])
        self.command_steps[(self.command_steps > RESAMPLE_AFTER_STEPS) | terminated] = 0
        self.keep_fallen_commands(terminated, acted_command)
        if self.clock is not None:
            self.clock.step(acted_command)
        self.lift_off(contact)
        return TaskStep(obs, reward, terminated, terms, diagnostics)

    # --- observations --------------------------------------------------------------------------
    def _observe(self, ids: np.ndarray, r: dict[str, np.ndarray], rngs) -> np.ndarray:
        """spot.h UpdateJoystickObs for sub-envs `ids` (rows of `r`): pushes the newest joint errors
        onto the history, then writes `state` (noisy, uniform noise) and `privileged_state` (a copy
        of `state`, then clean quantities)."""
        s = r["sensordata"]
        q = r["qpos"][:, 7 : 7 + NU]
        feet_pos = s[:, self.feet_pos].reshape(len(ids), -1)
        gyro, up = self._sensor(s, "gyro"), self._sensor(s, "upvector")
        draws = np.stack([rngs[i].uniform(-1.0, 1.0, len(self.noise)) for i in ids])
        noisy = np.concatenate([q, feet_pos, gyro, up], axis=1) + self.noise * draws
        noisy_q, noisy_feet, noisy_gyro, noisy_up = np.split(noisy, np.cumsum([NU, feet_pos.shape[1], 3]), axis=1)
        history = self.qpos_error_history
        history[ids] = np.concatenate([noisy_q - r["ctrl"], history[ids, : (HISTORY - 1) * NU]], axis=1)
        state = np.concatenate(
            [
                noisy_gyro,
                noisy_up,
                noisy_q - self.default_pose,
                history[ids],
                noisy_feet,
                self.last_act[ids],
                self.command[ids],
            ],
            axis=1,
        )
        privileged = np.concatenate(
            [
                state,
                gyro,
                self._sensor(s, "accelerometer"),
                up,
                self._sensor(s, "local_linvel"),
                self._sensor(s, "global_angvel"),
                q - self.default_pose,
                feet_pos,
                r["qvel"][:, 6 : 6 + NU],
                r["actuator_force"][:, :NU],
                self.last_contact[ids].astype(np.float64),
                s[:, self.feet_linvel].reshape(len(ids), -1),
                self.feet_air_time[ids],
                r["push_force"],
            ],
            axis=1,
        )
        return self.with_clock(state, privileged, ids)


# --- rewards ----------------------------------------------------------------------------------
def reward_terms(
    task: SpotJoystick,
    r: dict[str, np.ndarray],
    actions: np.ndarray,
    first_contact: np.ndarray,
    contact: np.ndarray,
    terminated: np.ndarray,
) -> dict[str, np.ndarray]:
    """spot.h ComputeJoystickReward: each term times its scale (the sum's dt comes later), in
    REWARD_TERMS' order (the four it does not compute at zero, feet_phase the gait_clock variant's);
    `r` is what `task` read of its physics this step, before the last actions moved on."""
    o, s, cmd = task.options, r["sensordata"], task.command
    exp = partial(libm, math.exp)
    linvel, gyro = task._sensor(s, "local_linvel"), task._sensor(s, "gyro")
    global_linvel, global_angvel, up = task._sensor(s, "global_linvel"), task._sensor(s, "global_angvel"), task._sensor(s, "upvector")
    lin_x, lin_y, yaw = cmd[:, 0] - linvel[:, 0], cmd[:, 1] - linvel[:, 1], cmd[:, 2] - gyro[:, 2]
    q, qd, force = r["qpos"][:, 7 : 7 + NU], r["qvel"][:, 6 : 6 + NU], r["actuator_force"][:, :NU]
    delta = q - task.default_pose
    moving = norm3(cmd) >= ZERO_COMMAND_NORM
    c1 = actions - task.last_act
    c2 = actions - 2.0 * task.last_act + task.last_last_act

    feet_vel = s[:, task.feet_linvel]  # [n, feet, xyz]
    vel_xy_sq = feet_vel[..., 0] * feet_vel[..., 0] + feet_vel[..., 1] * feet_vel[..., 1]
    height = o["max_foot_height"]
    first = first_contact.astype(np.float64)
    height_error = task.swing_peak / height - 1.0
    zero = np.zeros(task.num_envs)
    terms = {
        "tracking_lin_vel": exp(-(lin_x * lin_x + lin_y * lin_y) / o["tracking_sigma"]) * o["tracking_lin_vel_scale"],
        "tracking_ang_vel": exp(-(yaw * yaw) / o["tracking_sigma"]) * o["tracking_ang_vel_scale"],
        "feet_phase": task.feet_phase(r) if task.clock is not None else zero,
        "lin_vel_z": global_linvel[:, 2] * global_linvel[:, 2] * o["lin_vel_z_scale"],
        "ang_vel_xy": (global_angvel[:, 0] * global_angvel[:, 0] + global_angvel[:, 1] * global_angvel[:, 1]) * o["ang_vel_xy_scale"],
        "hip_splay": zero,
        "orientation": (up[:, 0] * up[:, 0] + up[:, 1] * up[:, 1]) * o["orientation_scale"],
        "termination": terminated.astype(np.float64) * o["termination_scale"],
        "posture": exp(np.where(moving, 0.0, STAND_POSTURE_WEIGHT) * ordered_sum(delta * delta)) * o["posture_scale"],
        "torques": (np.sqrt(ordered_sum(force * force)) + ordered_sum(np.abs(force))) * o["torques_scale"],
        "action_rate": ordered_sum(c1 * c1 + c2 * c2) * o["action_rate_scale"],
        "energy": ordered_sum(np.abs(qd) * np.abs(force)) * o["energy_scale"],
        "feet_slip": ordered_sum(vel_xy_sq * contact) * o["feet_slip_scale"],
        "feet_clearance": ordered_sum(np.abs(r["feet_z"] - height) * np.sqrt(np.sqrt(vel_xy_sq))) * o["feet_clearance_scale"],
        "feet_height": np.where(moving, ordered_sum(height_error * height_error * first), 0.0) * o["feet_height_scale"],
        "feet_air_time": np.where(moving, ordered_sum((task.feet_air_time - AIR_TIME_THRESHOLD_S) * first), 0.0) * o["feet_air_time_scale"],
        "torso_height": zero,
        "stand_still": zero,
    }
    return terms
