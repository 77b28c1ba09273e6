"""What the quadruped joystick references (`go1`, `spot`) share: the sensors and frames their C++
ports read, the per-foot state their feet rewards keep (air time, swing peak, last contact), and
the reference's own options with their defaults (REFERENCE_OPTIONS): a fall's command carried into
the next episode, forward-only commands, and the gait_clock variant, a trot clock (gait.py) at the
end of each observation group with its feet_phase reward term and the export contract a controller
keeps the same clock from.

Each robot's module holds its C++ port's own logic: its options, resets, command sampling,
observations and reward terms.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from ppo_control.envs.mujoco.gait import PHASE_REWARD_WIDTH, GaitClock
from ppo_control.envs.mujoco.port import PlaygroundPort

# The IMU's sensors both ports read.
BASE_SENSORS = ("gyro", "local_linvel", "accelerometer", "upvector", "global_linvel", "global_angvel")


class QuadrupedJoystick(PlaygroundPort):
    """A quadruped joystick port on a PhysicsBatch. A robot's class adds FEET (the C++'s feet sites,
    in its order), TORSO (the body whose xfrc_applied is the privileged push_force) and TROT_RAD
    (each foot's phase at a reset of the gait_clock variant: diagonal feet together).

    Per-sub-env state shared by both: the command, the last action, the feet's air time, swing peak
    and last contact (and the clock's phase in the variant).
    """

    FEET: tuple[str, ...] = ()
    TORSO = ""
    TROT_RAD: dict[str, float] = {}
    # keep_command_through_falls: a fall ends the episode but not its command, which the next episode
    # carries on with, as Playground's training does (Brax's auto-reset restores the physics and
    # keeps the task's info). Off, a fall draws a new command (envpool's port): the commands a
    # policy falls under are cut short and become rare in its batches.
    # forward_commands_only: every command's vx is made non-negative (|vx|, from the same draws): a
    # research knob, to see whether a policy finds a forward gait when nothing else competes.
    # gait_clock: the named variant with a trot clock (gait.py): each group ends with every foot's
    # phase (diagonal feet together, at gait_frequency_hz), and the reward gains the feet_phase term
    # (times feet_phase_scale) for feet whose swing height follows it, exp(-squared error summed
    # over the feet / feet_phase_width): T1's width by default, Playground's Spot gait task has 0.1;
    # gait_hold_on_zero_command: every foot held at pi (stand) under a zero command, else the clock
    # runs on (a robot moving when its command drops to zero can still step to stop).
    # A robot whose spec has one of these options (Spot's feet_phase_scale) leaves it to the spec.
    REFERENCE_OPTIONS = {
        "keep_command_through_falls": False,
        "forward_commands_only": False,
        "gait_clock": False,
        "gait_frequency_hz": 2.5,
        "feet_phase_scale": 1.0,
        "feet_phase_width": PHASE_REWARD_WIDTH,
        "gait_hold_on_zero_command": True,
    }

    def __init__(
        self, env_id: str, num_envs: int, kwargs: dict[str, Any] | None = None, num_threads: int | None = None, base_path: str | None = None
    ):
        super().__init__(env_id, num_envs, kwargs, num_threads, base_path)
        options, model = self.options, self.physics.model(0)
        sensor = partial(self.sensor_adr, model)
        self.imu_site = model.site("imu").id
        self.torso_body = model.body(self.TORSO).id
        self.adr = {name: sensor(name) for name in BASE_SENSORS}
        self.feet_sites = np.array([model.site(foot).id for foot in self.FEET])
        self.feet_floor = np.array([sensor(f"{foot}_floor_found") for foot in self.FEET])
        self.feet_linvel = np.array([[sensor(f"{foot}_global_linvel") + axis for axis in range(3)] for foot in self.FEET])

        n, feet = num_envs, len(self.FEET)
        self.command = np.zeros((n, 3))
        self.last_act = np.zeros((n, self.NU))
        self.feet_air_time = np.zeros((n, feet))
        self.swing_peak = np.zeros((n, feet))
        self.last_contact = np.zeros((n, feet), dtype=bool)
        self.kept_command: dict[int, np.ndarray] = {}  # sub-env -> the command its fall left, for its next episode
        self.clock = self.trot_clock(options, n, self.control_period_s) if options["gait_clock"] else None
        if self.clock is not None:
            self.STATE = (*self.STATE, "phase")
            self.groups = tuple((group, size + 2 * feet) for group, size in self.groups)
            self.foot_radius = model.site_size[self.feet_sites, 0]

    # --- the gait_clock variant ---------------------------------------------------------------
    @classmethod
    def trot_clock(cls, options: dict[str, Any], num_envs: int, control_period_s: float) -> GaitClock:
        trot = tuple(cls.TROT_RAD[foot] for foot in cls.FEET)
        return GaitClock(num_envs, trot, options["gait_frequency_hz"], control_period_s, options["gait_hold_on_zero_command"])

    @classmethod
    def describe_variant(cls, options: dict[str, Any], facts: dict[str, Any]) -> dict[str, Any]:
        """The task's description (envpool_backend.describe's facts) for the reference's own options:
        with gait_clock, each group ends with the clock's elements, and the export's robot section
        holds the clock a controller keeps."""
        if not options.get("gait_clock"):
            return facts
        clock = cls.trot_clock(cls.resolve_options(cls.ENV_IDS[0], options), 1, facts["control_period_s"])
        elements = [f"phase_cos:{foot}" for foot in cls.FEET] + [f"phase_sin:{foot}" for foot in cls.FEET]
        names = {group: elements_of + elements for group, elements_of in facts["element_names"].items()}
        robot = dict(facts["robot"])
        robot["gait_phase"] = clock.contract()
        if "observation_sources" in robot:  # only where the task's other elements are described too
            robot["observation_sources"] = {
                **robot["observation_sources"],
                "phase_cos": {"controller": "gait_phase_cos"},
                "phase_sin": {"controller": "gait_phase_sin"},
            }
        robot["sources"] = {**robot["sources"], "gait_phase": "the reference's gait_clock variant (envs/mujoco/gait.py)"}
        return {**facts, "element_names": names, "group_sizes": {g: len(e) for g, e in names.items()}, "robot": robot}

    @property
    def phase(self) -> np.ndarray:
        """The gait clock's phases [num_envs, feet] (the gait_clock variant only)."""
        return self.clock.phase

    @property
    def phase_dt(self) -> np.ndarray | None:
        """The clock's advance per control step per sub-env; None without a clock."""
        return None if self.clock is None else self.clock.phase_dt

    def with_clock(self, state: np.ndarray, privileged: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """The observation of sub-envs `ids`: the groups, each ending with the clock in the variant
        (last, so every other element keeps its place)."""
        if self.clock is None:
            return np.concatenate([state, privileged], axis=1)
        clock = self.clock.observation(ids)
        return np.concatenate([state, clock, privileged, clock], axis=1)

    def feet_phase(self, r: dict[str, np.ndarray]) -> np.ndarray:
        """The variant's feet_phase term: how closely the feet's heights above their standing height
        follow the clock, times feet_phase_scale."""
        o = self.options
        return self.clock.reward(r["feet_z"] - self.foot_radius, o["max_foot_height"], o["feet_phase_width"]) * o["feet_phase_scale"]

    def variant_reward(
        self, total: np.ndarray, terms: dict[str, np.ndarray], task_total: np.ndarray | None = None
    ) -> tuple[np.ndarray, dict]:
        """(the reward the policy trains on, diagnostics) from the summed terms `total`: the task's
        own reward, the sum times ctrl_dt clipped to [0, 10000] as float32, unless a variant
        changes it. A variant trains on its own sum (`total`, plus feet_phase with the clock) and
        reports the task's own reward (from `task_total`, the sum of the task's own terms, when
        the variant changed one) as the diagnostic `task_reward`: what compares with Playground."""

        def clipped(summed: np.ndarray) -> np.ndarray:
            return np.clip(summed * self.control_period_s, 0.0, 10000.0).astype(np.float32)

        if self.clock is None and task_total is None:
            return clipped(total), {}
        trained = total + terms["feet_phase"] if self.clock is not None else total
        own = clipped(total if task_total is None else task_total)
        return clipped(trained), {"task_reward": own.astype(np.float64)}

    # --- commands -----------------------------------------------------------------------------
    def forward_only(self, command: np.ndarray) -> np.ndarray:
        if self.options["forward_commands_only"]:
            command[0] = abs(command[0])
        return command

    def take_kept_command(self, i: int) -> None:
        """At a reset, after the port's own draws: the command a fall left (keep_command_through_falls)."""
        if i in self.kept_command:
            self.command[i] = self.kept_command.pop(i)

    def keep_fallen_commands(self, terminated: np.ndarray, acted_command: np.ndarray) -> None:
        """keep_command_through_falls: a fallen sub-env keeps the command it fell under, for the
        observation of its fall and its next episode."""
        if self.options["keep_command_through_falls"]:
            for i in np.flatnonzero(terminated):
                self.command[i] = self.kept_command[i] = acted_command[i].copy()

    # --- the feet -----------------------------------------------------------------------------
    def clear(self, ids: np.ndarray) -> None:
        """A reset's zeros: the last action and the feet's state; the clock at its start."""
        for array in (self.last_act, self.feet_air_time, self.swing_peak, self.last_contact):
            array[ids] = 0
        if self.clock is not None:
            self.clock.reset(ids)

    def touch_down(self, contact: np.ndarray, feet_z: np.ndarray) -> np.ndarray:
        """Right after the physics: which feet land (in the air before, touching now or at the last
        step); then every foot's air time grows by the step and its swing peak takes its height."""
        first_contact = (self.feet_air_time > 0.0) & (contact | self.last_contact)
        self.feet_air_time += self.control_period_s
        self.swing_peak = np.maximum(self.swing_peak, feet_z)
        return first_contact

    def lift_off(self, contact: np.ndarray) -> None:
        """At the end of a step: a foot touching the floor starts a new swing."""
        self.feet_air_time[contact] = 0.0
        self.swing_peak[contact] = 0.0
        self.last_contact[:] = contact

    def contact(self, sensordata: np.ndarray) -> np.ndarray:
        return sensordata[:, self.feet_floor] > 0.0

    # --- reading the physics --------------------------------------------------------------------
    def _read(self, ids: np.ndarray | None) -> dict[str, np.ndarray]:
        """What the task reads of the physics of sub-envs `ids` (all when None), as they stand."""
        g = self.physics.gather
        site_xpos = g("site_xpos", ids)
        return {
            "sensordata": g("sensordata", ids),
            "qpos": g("qpos", ids),
            "qvel": g("qvel", ids),
            "ctrl": g("ctrl", ids),
            "actuator_force": g("actuator_force", ids),
            "imu_xmat": g("site_xmat", ids)[:, self.imu_site],
            "feet_z": site_xpos[:, self.feet_sites, 2],
            "push_force": g("xfrc_applied", ids)[:, self.torso_body, :3],
        }
