"""MuJoCo Playground's T1 joystick task (Booster T1 humanoid, flat terrain) on the `mujoco` Python
bindings, written to behave as envpool's C++ port does (envpool/mujoco/playground/t1.h,
PlaygroundT1EnvBase), so a policy trained on envpool runs here unchanged and the same numbers come
out within evaluation noise.

What is the C++'s and kept here on purpose:
- the model is the XML the C++ loads (its own gains: T1 has no kp/kd options), with
  opt.timestep = sim_dt and opt.ccd_iterations = 10;
- a reset scales every joint angle of the home pose by its own U(0.5, 1.5) and starts the
  actuators at those angles (ctrl = the reset pose, not the default pose);
- sensors, site frames, qacc and actuator forces are read right after the control period's last
  mj_step (no mj_forward): they belong to the start of that substep;
- the observation is written before the step's termination, rewards and counters: its last_action
  is the action before the current one, its gait phase the phase before this step's advance and
  its command the command before a resample; a joint angle's noise is added after the default is
  subtracted (Go1 adds it before);
- the privileged `foot_contact` is this step's contact and its `feet_air_time` includes this step
  (it is zeroed for a foot in contact only after the observation is written);
- the reward is the sum of the terms times ctrl_dt, clipped to [0, 10000], as float32; the terms
  reported (`reward/<term>`) are the scaled terms before the dt;
- the command is resampled only when the step counter passes 500 (uniform ranges, then all zero
  with probability 0.1), never on a fall; the counter restarts then or on a fall;
- the gait clock advances by the episode's phase_dt, wrapped to [-pi, pi), and is held at pi while
  the command's norm is at most 0.01 (G1's and Berkeley's ports do not hold it);
- a push (push_enable) adds a velocity of U(push_magnitude_min, max) in a direction U(0, 2 pi) to
  the base's qvel[0:2] at the start of every push_interval_steps-th step; the interval is drawn per
  episode, U(push_interval_min, max) seconds rounded to steps with std::round.

Random numbers are drawn in the C++'s order (reset: x, y, yaw, the 23 joint scales, the 6 base
velocities, the gait frequency, the command, the push interval; per step: the push's direction and
size on a push step, the observation noise in UpdateObs' order, then a resampled command), so with
envpool's stream (batch.EnvpoolRandom) a sub-env replays envpool's episode for the same seed.
Every constant is the C++'s DefaultConfig (`DEFAULTS`, checked against envpool's spec in the tests)
or one of the C++'s literals (reset ranges, the gait frequency range, the pose weights, the
resample step, the air-time window, the feet-distance band).

exp, sin, cos and atan2 are the C library's (`arith.libm`), as the C++ calls them, and sums run in the
C++'s order: on the bindings of envpool's own MuJoCo (3.6.0) a sub-env is then bitwise envpool's,
observations, rewards, every reward term, falls, resets and pushes (1200 steps of 4 sub-envs, 100
episodes). Newer bindings (4.0) compute a step to about 1e-13 of 3.6's until a discrete decision of
the constraint solver (T1 runs opt.iterations = 3 Newton iterations with an early exit at a
tolerance, and an active set) goes the other way on such a difference, mostly while a robot falls;
that episode then parts from envpool's by 1e-6 to 1e-2 within a step (tests/envs/test_reference_t1.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np

from ppo_control.envs.mujoco import gait
from ppo_control.envs.mujoco.arith import libm, norm3, ordered_sum
from ppo_control.envs.mujoco.batch import TaskStep
from ppo_control.envs.mujoco.port import PlaygroundPort, round_half_away

ENV_IDS = ("T1JoystickFlatTerrain-v1",)

# t1.h PlaygroundT1EnvFns::DefaultConfig, less frame_stack and task_name (not task options here).
DEFAULTS: dict[str, float | bool] = {
    "ctrl_dt": 0.02,
    "sim_dt": 0.002,
    "action_scale": 1.0,
    "soft_joint_pos_limit_factor": 0.95,
    "noise_level": 1.0,
    "noise_joint_pos": 0.03,
    "noise_joint_vel": 1.5,
    "noise_gravity": 0.05,
    "noise_linvel": 0.1,
    "noise_gyro": 0.2,
    "tracking_lin_vel_scale": 1.0,
    "tracking_ang_vel_scale": 0.5,
    "lin_vel_z_scale": 0.0,
    "ang_vel_xy_scale": -0.15,
    "orientation_scale": -1.0,
    "base_height_scale": 0.0,
    "torques_scale": 0.0,
    "action_rate_scale": 0.0,
    "energy_scale": 0.0,
    "dof_acc_scale": 0.0,
    "dof_vel_scale": 0.0,
    "feet_clearance_scale": 0.0,
    "feet_air_time_scale": 2.0,
    "feet_slip_scale": -0.25,
    "feet_height_scale": 0.0,
    "feet_phase_scale": 1.0,
    "stand_still_scale": 0.0,
    "alive_scale": 0.25,
    "termination_scale": 0.0,
    "collision_scale": -1.0,
    "joint_deviation_knee_scale": -0.1,
    "joint_deviation_hip_scale": -0.1,
    "dof_pos_limits_scale": -1.0,
    "pose_scale": -1.0,
    "feet_distance_scale": -1.0,
    "tracking_sigma": 0.25,
    "max_foot_height": 0.12,
    "base_height_target": 0.665,
    "push_enable": True,
    "push_interval_min": 5.0,
    "push_interval_max": 10.0,
    "push_magnitude_min": 0.1,
    "push_magnitude_max": 1.0,
    "lin_vel_x_min": -1.0,
    "lin_vel_x_max": 1.0,
    "lin_vel_y_min": -0.8,
    "lin_vel_y_max": 0.8,
    "ang_vel_yaw_min": -1.0,
    "ang_vel_yaw_max": 1.0,
}
BOOLEAN_OPTIONS = ("push_enable",)

# The terms in the order t1.h sums them (the sum's rounding follows that order).
REWARD_TERMS = (
    "tracking_lin_vel",
    "tracking_ang_vel",
    "lin_vel_z",
    "ang_vel_xy",
    "orientation",
    "base_height",
    "torques",
    "action_rate",
    "energy",
    "dof_acc",
    "dof_vel",
    "feet_clearance",
    "feet_air_time",
    "feet_slip",
    "feet_height",
    "feet_phase",
    "stand_still",
    "alive",
    "termination",
    "collision",
    "joint_deviation_knee",
    "joint_deviation_hip",
    "dof_pos_limits",
    "pose",
    "feet_distance",
)

NU = 23  # kT1ActionDim
FEET = ("left_foot", "right_foot")  # kT1FeetSites
FOOT_SENSORS = 4  # <foot>_<k>_floor_found, k = 1..4: a foot touches the floor when any of them does
# t1.h literals: reset offsets and base velocities U(-0.5, 0.5), yaw U(-3.14, 3.14), joint scales
# U(0.5, 1.5); the gait frequency U(1.25, 1.75) Hz, the feet's phases start at 0 and pi; the command
# is resampled past step 500, zeroed with probability 0.1 and "zero" for the phase below a norm of
# 0.01; the pose weights; the air time counts from 0.2 s, at most 0.3 s, and not under a command
# norm of 0.1; the hips' deviation counts only above a sideways command of 0.1; the feet-distance
# cost is 0.2 m minus the feet's sideways distance, within [0, 0.1]; the phase reward's width 0.01.
RESET_XY_VEL = 0.5
RESET_YAW = 3.14
RESET_JOINT_SCALE = (0.5, 1.5)
GAIT_FREQUENCY_HZ = (1.25, 1.75)
RESAMPLE_AFTER_STEPS = 500
ZERO_COMMAND_PROBABILITY = 0.1
POSE_WEIGHTS = np.array([1.0, 1.0, 0.1, 1.0, 1.0, 1.0, 0.1, 1.0, 1.0, 1.0, 1.0] + [0.01, 1.0, 1.0] * 4)
HIP_JOINTS = ("Left_Hip_Roll", "Left_Hip_Yaw", "Right_Hip_Roll", "Right_Hip_Yaw")
KNEE_JOINTS = ("Left_Knee_Pitch", "Right_Knee_Pitch")
AIR_TIME_START_S, AIR_TIME_MAX_S, AIR_TIME_MIN_COMMAND = 0.2, 0.3, 0.1
HIP_MIN_SIDEWAYS_COMMAND = 0.1
STAND_STILL_COMMAND = 0.1
FEET_DISTANCE_MIN, FEET_DISTANCE_MAX_COST = 0.2, 0.1


def _apply_yaw(qpos: np.ndarray, yaw: float) -> None:
    """ApplyYaw: the base's quaternion times the yaw's, as the C++ writes the product out."""
    y = (math.cos(0.5 * yaw), 0.0, 0.0, math.sin(0.5 * yaw))
    w, x, z_, k = (float(v) for v in qpos[3:7])
    qpos[3] = w * y[0] - x * y[1] - z_ * y[2] - k * y[3]
    qpos[4] = w * y[1] + x * y[0] + z_ * y[3] - k * y[2]
    qpos[5] = w * y[2] - x * y[3] + z_ * y[0] + k * y[1]
    qpos[6] = w * y[3] + x * y[2] - z_ * y[1] + k * y[0]


def _noise_scales(options: dict[str, Any]) -> np.ndarray:
    """Noise(scale) = noise_level * scale * U(-1, 1), in UpdateObs' order: linvel, gyro, gravity,
    joint pos, joint vel (the command between gravity and the joints draws none)."""
    return options["noise_level"] * np.concatenate(
        [
            np.full(3, options["noise_linvel"]),
            np.full(3, options["noise_gyro"]),
            np.full(3, options["noise_gravity"]),
            np.full(NU, options["noise_joint_pos"]),
            np.full(NU, options["noise_joint_vel"]),
        ]
    )


def describe_variant(options: dict[str, Any], facts: dict[str, Any]) -> dict[str, Any]:
    """Without the hold, the export's clock says so: a controller must not hold it either."""
    if options.get("gait_hold_on_zero_command", True):
        return facts
    robot = dict(facts["robot"])
    robot["gait_phase"] = {key: value for key, value in robot["gait_phase"].items() if not key.startswith("hold")}
    robot["sources"] = {**robot["sources"], "gait_phase": "C++ Reset and UpdatePhase, not held under a zero command (a variant)"}
    return {**facts, "robot": robot}


class T1Joystick(PlaygroundPort):
    """The task on a PhysicsBatch of `num_envs` sub-envs (the ReferenceTask protocol of batch.py).

    Per-sub-env task state lives in [num_envs, ...] arrays: the command, the last two actions, the
    feet's air time, swing peak and last contact, the gait phase and its per-step advance, the step
    counter that resamples the command, and the push counter with its interval.
    """

    ENV_IDS, DEFAULTS, BOOLEAN_OPTIONS, NU, ROBOT = ENV_IDS, DEFAULTS, BOOLEAN_OPTIONS, NU, "T1"
    # gait_hold_on_zero_command=false: a named variant whose clock runs on under a zero command
    # (the robot steps in place). The C++'s hold puts both feet at pi, so after a zero command the
    # feet share one phase for the rest of the episode and the clock asks for a hop.
    REFERENCE_OPTIONS = {"gait_hold_on_zero_command": True}
    describe_variant = staticmethod(describe_variant)
    STATE = (
        "command",
        "last_act",
        "last_last_act",
        "feet_air_time",
        "swing_peak",
        "last_contact",
        "phase",
        "phase_dt",
        "step_count",
        "push_step",
        "push_interval_steps",
    )

    def __init__(
        self, env_id: str, num_envs: int, kwargs: dict[str, Any] | None = None, num_threads: int | None = None, base_path: str | None = None
    ):
        super().__init__(env_id, num_envs, kwargs, num_threads, base_path)
        options, model = self.options, self.physics.model(0)
        factor = options["soft_joint_pos_limit_factor"]
        lower, upper = model.jnt_range[1 : 1 + NU, 0], model.jnt_range[1 : 1 + NU, 1]
        center, span = (lower + upper) * 0.5, upper - lower
        self.soft_lowers = center - 0.5 * span * factor
        self.soft_uppers = center + 0.5 * span * factor

        sensor = partial(self.sensor_adr, model)

        def joint_index(name: str) -> int:  # JointQposIndex: the joint's place among the actuated ones
            return int(model.jnt_qposadr[model.joint(name).id]) - 7

        self.hip = np.array([joint_index(name) for name in HIP_JOINTS])
        self.knee = np.array([joint_index(name) for name in KNEE_JOINTS])
        self.imu_site = model.site("imu").id
        self.torso_body = model.body("Trunk").id  # the floating base (sim2sim's added_mass goes there)
        names = ("gyro", "local_linvel", "accelerometer", "upvector", "global_linvel", "global_angvel")
        self.adr = {name: sensor(name) for name in names}
        self.feet_sites = np.array([model.site(foot).id for foot in FEET])
        self.feet_floor = np.array([[sensor(f"{foot}_{k}_floor_found") for k in range(1, FOOT_SENSORS + 1)] for foot in FEET])
        self.feet_linvel = np.array([[sensor(f"{foot}_global_linvel") + axis for axis in range(3)] for foot in FEET])
        self.feet_collision = sensor("left_foot_right_foot_found")
        self.noise_level = options["noise_level"]
        self.noise_scales = _noise_scales(options)

        n = num_envs
        self.command = np.zeros((n, 3))
        self.last_act = np.zeros((n, NU))
        self.last_last_act = np.zeros((n, NU))
        self.feet_air_time = np.zeros((n, len(FEET)))
        self.swing_peak = np.zeros((n, len(FEET)))
        self.last_contact = np.zeros((n, len(FEET)), dtype=bool)
        self.phase = np.zeros((n, len(FEET)))
        self.phase_dt = np.zeros(n)
        self.step_count = np.zeros(n, dtype=np.int64)
        self.push_step = np.zeros(n, dtype=np.int64)
        self.push_interval_steps = np.ones(n, dtype=np.int64)

    def configure_model(self, model) -> None:
        """t1.h's constructor: sim_dt and ccd_iterations (T1 keeps its XML's gains)."""
        model.opt.timestep = self.options["sim_dt"]
        model.opt.ccd_iterations = 10

    # --- episodes ------------------------------------------------------------------------------
    def reset(self, ids: np.ndarray, rngs: Sequence[np.random.Generator]) -> np.ndarray:
        """t1.h Reset: the home pose moved by U(-0.5, 0.5) in x and y, turned by a yaw in
        U(-3.14, 3.14), each joint angle scaled by U(0.5, 1.5), base velocities U(-0.5, 0.5), the
        actuators holding that pose; then the gait, the command and the push interval."""
        o, dt = self.options, self.control_period_s
        for i in ids:
            rng = rngs[i]
            data = self.physics.reset(i)
            data.qpos[:] = self.init_qpos
            data.qpos[0] += rng.uniform(-RESET_XY_VEL, RESET_XY_VEL)
            data.qpos[1] += rng.uniform(-RESET_XY_VEL, RESET_XY_VEL)
            _apply_yaw(data.qpos, rng.uniform(-RESET_YAW, RESET_YAW))
            data.qpos[7 : 7 + NU] *= rng.uniform(*RESET_JOINT_SCALE, NU)
            data.qvel[:] = 0.0
            data.qvel[:6] = rng.uniform(-RESET_XY_VEL, RESET_XY_VEL, 6)
            data.ctrl[:NU] = data.qpos[7 : 7 + NU]
            self.phase_dt[i] = 2.0 * math.pi * dt * rng.uniform(*GAIT_FREQUENCY_HZ)
            self.phase[i] = (0.0, math.pi)
            self._sample_command(i, rng)
            push_interval = rng.uniform(o["push_interval_min"], o["push_interval_max"])
            self.push_interval_steps[i] = int(round_half_away(push_interval / dt))
        self.physics.forward(ids)
        self._clear(ids)
        r = self._read(ids)
        return self._observe(ids, r, self._contact(r), rngs)

    def place(self, i: int, qpos: np.ndarray, qvel: np.ndarray, command: np.ndarray, rng) -> np.ndarray:
        """Put sub-env i in a given physics state and command, as a reset leaves it (the actuators
        holding the joints' angles, no actions yet, the gait at its start, no push due), and return
        its observation: for checks."""
        data = self.physics.reset(i)
        data.qpos[:], data.qvel[:], data.ctrl[:NU] = qpos, qvel, qpos[7 : 7 + NU]
        self.command[i] = command
        self.phase_dt[i] = 2.0 * math.pi * self.control_period_s * GAIT_FREQUENCY_HZ[0]
        self.phase[i] = (0.0, math.pi)
        self.push_interval_steps[i] = int(round_half_away(self.options["push_interval_max"] / self.control_period_s))
        ids = np.array([i])
        self.physics.forward(ids)
        self._clear(ids)
        r = self._read(ids)
        return self._observe(ids, r, self._contact(r), {i: rng})[0]

    def _clear(self, ids: np.ndarray) -> None:
        for name in ("last_act", "last_last_act", "feet_air_time", "swing_peak", "last_contact", "step_count", "push_step"):
            getattr(self, name)[ids] = 0

    def _sample_command(self, i: int, rng) -> None:
        """t1.h SampleCommand: each axis uniform in its range, then all three zero with probability 0.1."""
        o = self.options
        self.command[i] = (
            rng.uniform(o["lin_vel_x_min"], o["lin_vel_x_max"]),
            rng.uniform(o["lin_vel_y_min"], o["lin_vel_y_max"]),
            rng.uniform(o["ang_vel_yaw_min"], o["ang_vel_yaw_max"]),
        )
        if rng.random() < ZERO_COMMAND_PROBABILITY:
            self.command[i] = 0.0

    # --- the control step ----------------------------------------------------------------------
    def step(self, actions: np.ndarray, rngs: Sequence[np.random.Generator]) -> TaskStep:
        """t1.h Step, for every sub-env at once."""
        dt = self.control_period_s
        self._push(rngs)
        self.physics.step(self.default_pose + actions * self.options["action_scale"], self.substeps)
        r = self._read(None)
        contact = self._contact(r)
        first_contact = (self.feet_air_time > 0.0) & (contact | self.last_contact)
        self.feet_air_time += dt
        self.swing_peak = np.maximum(self.swing_peak, r["feet_pos"][..., 2])

        everyone = np.arange(self.num_envs)
        obs = self._observe(everyone, r, contact, rngs)
        nan = np.isnan(r["qpos"]).any(axis=1) | np.isnan(r["qvel"]).any(axis=1)
        terminated = (r["sensordata"][:, self.adr["upvector"] + 2] < 0.0) | nan
        terms = reward_terms(self, r, actions, first_contact, contact, terminated)
        total = terms[REWARD_TERMS[0]]
        for name in REWARD_TERMS[1:]:
            total = total + terms[name]
        reward = np.clip(total * dt, 0.0, 10000.0).astype(np.float32)

        self.step_count += 1
        self.push_step += 1
        self.feet_air_time[contact] = 0.0
        self.last_contact[:] = contact
        self.swing_peak[contact] = 0.0
        self._update_phase()
        self.last_last_act[:] = self.last_act
        self.last_act[:] = actions
        resample = self.step_count > RESAMPLE_AFTER_STEPS
        for i in np.flatnonzero(resample):
            self._sample_command(i, rngs[i])
        self.step_count[resample | terminated] = 0
        return TaskStep(obs, reward, terminated, terms)

    def _push(self, rngs) -> None:
        """ApplyPush: on every push_interval_steps-th step, a velocity kick to the base."""
        o = self.options
        if not o["push_enable"]:
            return
        interval = self.push_interval_steps
        due = (interval > 0) & ((self.push_step + 1) % np.maximum(interval, 1) == 0)
        for i in np.flatnonzero(due):
            theta = rngs[i].uniform(0.0, 2.0 * math.pi)
            magnitude = rngs[i].uniform(o["push_magnitude_min"], o["push_magnitude_max"])
            qvel = self.physics.data[i].qvel
            qvel[0] += math.cos(theta) * magnitude
            qvel[1] += math.sin(theta) * magnitude

    def _update_phase(self) -> None:
        """UpdatePhase: advance and wrap to [-pi, pi); held at pi under a (near) zero command
        unless the variant lets the clock run on."""
        hold = self.options["gait_hold_on_zero_command"]
        self.phase = gait.advance(self.phase, self.phase_dt, self.command if hold else None)

    # --- observations --------------------------------------------------------------------------
    def _read(self, ids: np.ndarray | None) -> dict[str, np.ndarray]:
        """What the task reads of the physics of sub-envs `ids` (all when None), as they stand."""
        g = self.physics.gather
        return {
            "sensordata": g("sensordata", ids),
            "qpos": g("qpos", ids),
            "qvel": g("qvel", ids),
            "qacc": g("qacc", ids),
            "actuator_force": g("actuator_force", ids),
            "imu_xmat": g("site_xmat", ids)[:, self.imu_site],
            "feet_pos": g("site_xpos", ids)[:, self.feet_sites],
        }

    def _contact(self, r: dict[str, np.ndarray]) -> np.ndarray:
        """FootContact: per foot, whether any of its four floor sensors found the floor, [n, feet]."""
        return (r["sensordata"][:, self.feet_floor] > 0.0).any(axis=2)

    def _observe(self, ids: np.ndarray, r: dict[str, np.ndarray], contact: np.ndarray, rngs) -> np.ndarray:
        """t1.h UpdateObs for sub-envs `ids` (rows of `r` and `contact`): `state` (noisy, uniform
        noise) then `privileged_state` (a copy of `state`, then clean quantities)."""
        s = r["sensordata"]
        gyro, linvel = self._sensor(s, "gyro"), self._sensor(s, "local_linvel")
        gravity = -r["imu_xmat"][:, 6:9]
        q, qd = r["qpos"][:, 7 : 7 + NU], r["qvel"][:, 6 : 6 + NU]
        draws = np.stack([rngs[i].uniform(-1.0, 1.0, len(self.noise_scales)) for i in ids])
        noise = self.noise_scales * draws  # Noise's order of products: (noise_level * scale) * draw
        measured = np.concatenate([linvel, gyro, gravity, q - self.default_pose, qd], axis=1) + noise
        phase = self.phase[ids]
        state = np.concatenate(
            [measured[:, :9], self.command[ids], measured[:, 9:], self.last_act[ids], libm(math.cos, phase), libm(math.sin, phase)],
            axis=1,
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
                r["qpos"][:, 2:3],
                r["actuator_force"][:, :NU],
                contact.astype(np.float64),
                feet_vel,
                self.feet_air_time[ids],
            ],
            axis=1,
        )
        return np.concatenate([state, privileged], axis=1)


# --- rewards ----------------------------------------------------------------------------------
def reward_terms(
    task: T1Joystick, r: dict[str, np.ndarray], actions: np.ndarray, first_contact: np.ndarray, contact: np.ndarray, terminated: np.ndarray
) -> dict[str, np.ndarray]:
    """t1.h ComputeRewards: each term times its scale (the sum's dt comes later), in REWARD_TERMS'
    order; `r` is what `task` read of its physics this step."""
    terms = {
        **_body_terms(task, r, actions, terminated),
        **_feet_terms(task, r, first_contact, contact),
        **_joint_terms(task, r),
    }
    return {name: terms[name] for name in REWARD_TERMS}


def _body_terms(task: T1Joystick, r: dict[str, np.ndarray], actions: np.ndarray, terminated: np.ndarray) -> dict[str, np.ndarray]:
    """The terms of the base's motion, the actuators' effort, staying alive and self-collision."""
    o, s, cmd = task.options, r["sensordata"], task.command
    local_linvel, gyro, up = task._sensor(s, "local_linvel"), task._sensor(s, "gyro"), task._sensor(s, "upvector")
    qd, qdd, force = r["qvel"][:, 6 : 6 + NU], r["qacc"][:, 6 : 6 + NU], r["actuator_force"][:, :NU]
    lin_x, lin_y = (cmd[:, 0] - local_linvel[:, 0]) ** 2, (cmd[:, 1] - local_linvel[:, 1]) ** 2
    yaw_error = cmd[:, 2] - gyro[:, 2]
    base_height = r["qpos"][:, 2] - o["base_height_target"]
    action_delta = actions - task.last_act
    return {
        "tracking_lin_vel": libm(math.exp, -(lin_x + lin_y) / o["tracking_sigma"]) * o["tracking_lin_vel_scale"],
        "tracking_ang_vel": libm(math.exp, -(yaw_error * yaw_error) / o["tracking_sigma"]) * o["tracking_ang_vel_scale"],
        "lin_vel_z": local_linvel[:, 2] * local_linvel[:, 2] * o["lin_vel_z_scale"],
        "ang_vel_xy": (gyro[:, 0] * gyro[:, 0] + gyro[:, 1] * gyro[:, 1]) * o["ang_vel_xy_scale"],
        "orientation": (up[:, 0] * up[:, 0] + up[:, 1] * up[:, 1]) * o["orientation_scale"],
        "base_height": base_height * base_height * o["base_height_scale"],
        "torques": ordered_sum(np.abs(force)) * o["torques_scale"],
        "action_rate": ordered_sum(action_delta * action_delta) * o["action_rate_scale"],
        "energy": ordered_sum(np.abs(qd) * np.abs(force)) * o["energy_scale"],
        "dof_acc": ordered_sum(qdd * qdd) * o["dof_acc_scale"],
        "dof_vel": ordered_sum(qd * qd) * o["dof_vel_scale"],
        "alive": np.full(task.num_envs, o["alive_scale"]),
        "termination": terminated.astype(np.float64) * o["termination_scale"],
        "collision": (s[:, task.feet_collision] > 0.0).astype(np.float64) * o["collision_scale"],
    }


def _feet_terms(task: T1Joystick, r: dict[str, np.ndarray], first_contact: np.ndarray, contact: np.ndarray) -> dict[str, np.ndarray]:
    """The feet's terms: clearance, air time, slip, swing height, the gait clock, their distance."""
    o, s = task.options, r["sensordata"]
    global_linvel = task._sensor(s, "global_linvel")
    feet_vel, feet_z = s[:, task.feet_linvel], r["feet_pos"][..., 2]  # [n, feet, xyz], [n, feet]
    vel_norm = np.sqrt(np.sqrt(feet_vel[..., 0] * feet_vel[..., 0] + feet_vel[..., 1] * feet_vel[..., 1]))
    height = o["max_foot_height"]
    clearance = np.abs(feet_z - height) * vel_norm
    height_error = task.swing_peak / height - 1.0
    feet_height = height_error * height_error * first_contact
    phase_error = feet_z - gait.foot_phase_target(task.phase, height)
    body_speed = np.sqrt(global_linvel[:, 0] * global_linvel[:, 0] + global_linvel[:, 1] * global_linvel[:, 1])
    air_time = np.where(first_contact, np.minimum(task.feet_air_time - AIR_TIME_START_S, AIR_TIME_MAX_S), 0.0)
    air_time = np.where(norm3(task.command) <= AIR_TIME_MIN_COMMAND, 0.0, ordered_sum(air_time))

    imu_xmat = r["imu_xmat"]
    base_yaw = libm(math.atan2, imu_xmat[:, 3], imu_xmat[:, 0])
    left, right = r["feet_pos"][:, 0], r["feet_pos"][:, 1]
    sideways = libm(math.cos, base_yaw) * (left[:, 1] - right[:, 1]) - libm(math.sin, base_yaw) * (left[:, 0] - right[:, 0])
    feet_distance = np.abs(sideways)
    return {
        "feet_clearance": ordered_sum(clearance) * o["feet_clearance_scale"],
        "feet_air_time": air_time * o["feet_air_time_scale"],
        "feet_slip": body_speed * contact.sum(axis=1) * o["feet_slip_scale"],
        "feet_height": ordered_sum(feet_height) * o["feet_height_scale"],
        "feet_phase": libm(math.exp, -ordered_sum(phase_error * phase_error) / gait.PHASE_REWARD_WIDTH) * o["feet_phase_scale"],
        "feet_distance": np.clip(FEET_DISTANCE_MIN - feet_distance, 0.0, FEET_DISTANCE_MAX_COST) * o["feet_distance_scale"],
    }


def _joint_terms(task: T1Joystick, r: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The joints' terms: standing still, the knees' and hips' deviation, the limits, the pose."""
    o, cmd = task.options, task.command
    q = r["qpos"][:, 7 : 7 + NU]
    delta = q - task.default_pose
    hip = np.where(np.abs(cmd[:, 1]) <= HIP_MIN_SIDEWAYS_COMMAND, 0.0, ordered_sum(np.abs(delta[:, task.hip])))
    below, above = np.maximum(task.soft_lowers - q, 0.0), np.maximum(q - task.soft_uppers, 0.0)
    limits = np.stack([below, above], axis=2).reshape(task.num_envs, 2 * NU)  # lower then upper, joint by joint
    return {
        "stand_still": np.where(norm3(cmd) < STAND_STILL_COMMAND, ordered_sum(np.abs(delta)), 0.0) * o["stand_still_scale"],
        "joint_deviation_knee": ordered_sum(np.abs(delta[:, task.knee])) * o["joint_deviation_knee_scale"],
        "joint_deviation_hip": hip * o["joint_deviation_hip_scale"],
        "dof_pos_limits": ordered_sum(limits) * o["dof_pos_limits_scale"],
        "pose": ordered_sum(delta * delta * POSE_WEIGHTS) * o["pose_scale"],
    }
