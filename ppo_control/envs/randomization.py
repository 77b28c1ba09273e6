"""Domain randomization for MuJoCo envs: physics scales, sensor and actuator noise, latency, pushes.

`DomainRandomization` wraps one sub-env. At every episode start it draws, from its own generator,
a scale factor per body (mass and inertia), per geom (sliding friction), per dof (damping) and per
actuator (gain) within the configured [low, high] ranges, and applies them to that sub-env's
MjModel (each sub-env owns its model). Within the episode it adds Gaussian noise to the action and
the observation, delays the action by a per-episode number of control steps, and pushes the root
body every `push_interval` steps. With `init_pose`, each episode also starts with every actuated
joint moved off the task's initial pose by up to that much (radians, metres for a slide).
Its state (generator, scales, delay buffer, step counter) is part of the sub-env's saved state, so
a resumed run continues exactly.

Each generator is seeded from the sub-env's seed on its seeded reset, on a stream apart from the
env's own, so randomization never shifts the env's initial-state noise.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import mujoco
import numpy as np

from ppo_control.config import RANDOMIZE_PHYSICS_KEYS as PHYSICS_KEYS
from ppo_control.config.errors import UserError

RANDOMIZATION_STREAM = 0x5EED_D0  # seeds the randomization generator apart from the env's own
BASE_BODY = 1  # the robot's base: the first body after the world (the root of its kinematic tree)


@dataclass(frozen=True)
class Randomization:
    """What to randomize (the `randomize` config section as plain values); None/0 = off."""

    body_mass: tuple[float, float] | None = None
    friction: tuple[float, float] | None = None
    joint_damping: tuple[float, float] | None = None
    actuator_gain: tuple[float, float] | None = None
    obs_noise: float = 0.0
    action_noise: float = 0.0
    action_delay: tuple[int, int] | None = None
    push_velocity: float = 0.0
    push_interval: int = 0
    added_mass: tuple[float, float] | None = None
    com_offset: float = 0.0
    joint_friction: tuple[float, float] | None = None
    armature: tuple[float, float] | None = None
    init_pose: float = 0.0

    @classmethod
    def from_config(cls, section) -> Randomization | None:
        """The `randomize` config section, or None when every key is off."""
        pair = lambda key: None if section[key] is None else tuple(section[key])  # noqa: E731
        settings = cls(
            body_mass=pair("body_mass"),
            friction=pair("friction"),
            joint_damping=pair("joint_damping"),
            actuator_gain=pair("actuator_gain"),
            obs_noise=float(section.obs_noise),
            action_noise=float(section.action_noise),
            action_delay=None if section.action_delay is None else (int(section.action_delay[0]), int(section.action_delay[1])),
            push_velocity=float(section.push_velocity),
            push_interval=int(section.push_interval),
            added_mass=pair("added_mass") if "added_mass" in section else None,  # sections written before these keys
            com_offset=float(section.get("com_offset", 0.0)),
            joint_friction=pair("joint_friction") if "joint_friction" in section else None,
            armature=pair("armature") if "armature" in section else None,
            init_pose=float(section.get("init_pose", 0.0)),
        )
        return settings if settings.enabled else None

    @property
    def enabled(self) -> bool:
        return self != Randomization()

    def physics_ranges(self) -> dict[str, tuple[float, float]]:
        return {key: getattr(self, key) for key in PHYSICS_KEYS if getattr(self, key) is not None}


def _root_push_dofs(model: mujoco.MjModel) -> tuple[str, list[int]]:
    """How to push this model's root: ("free", [vx, vy dofs]) for a free root, ("slide", [dof]) for a
    planar robot or cart whose first joint slides; refuses a model with neither."""
    if model.njnt and model.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE:
        start = int(model.jnt_dofadr[0])
        return "free", [start, start + 1]
    if model.njnt and model.jnt_type[0] == mujoco.mjtJoint.mjJNT_SLIDE:
        return "slide", [int(model.jnt_dofadr[0])]
    raise UserError("randomize.push_velocity: this task's robot has no free or sliding root joint to push; set randomize.push_velocity=0")


def _actuated_joints(model: mujoco.MjModel) -> np.ndarray:
    """The ids of the hinge and slide joints that actuators drive: the robot's pose, without its root."""
    driven = model.actuator_trnid[model.actuator_trntype == int(mujoco.mjtTrn.mjTRN_JOINT), 0]
    movable = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
    return np.array(sorted({int(j) for j in driven if model.jnt_type[j] in movable}), dtype=np.int64)


class SubEnvRandomizer:
    """The randomization of one sub-env, on its own MuJoCo model and data (see the module
    docstring): the per-episode draws, what happens to each action, the sensor noise, and its
    state. `DomainRandomization` applies it to a Gymnasium env; the MuJoCo references hold one per
    sub-env."""

    def __init__(self, model: mujoco.MjModel, data: mujoco.MjData, settings: Randomization, action_low, action_high):
        self.settings = settings
        self._model, self._data = model, data
        self._action_low, self._action_high = np.asarray(action_low), np.asarray(action_high)
        self._nominal = {
            "body_mass": model.body_mass.copy(),
            "body_inertia": model.body_inertia.copy(),
            "geom_friction": model.geom_friction.copy(),
            "dof_damping": model.dof_damping.copy(),
            "actuator_gainprm": model.actuator_gainprm.copy(),
            "actuator_biasprm": model.actuator_biasprm.copy(),
            "body_ipos": model.body_ipos.copy(),
            "dof_frictionloss": model.dof_frictionloss.copy(),
            "dof_armature": model.dof_armature.copy(),
        }
        self._scratch = mujoco.MjData(model)  # mj_setConst works in an mjData: not the episode's
        self._push = _root_push_dofs(model) if settings.push_velocity > 0 else None
        self._pose_joints = _actuated_joints(model) if settings.init_pose > 0 else np.zeros(0, dtype=np.int64)
        if settings.init_pose > 0 and not len(self._pose_joints):
            raise UserError("randomize.init_pose: this task's robot has no actuated hinge or slide joint; set randomize.init_pose=0")
        self._rng = np.random.default_rng(RANDOMIZATION_STREAM)
        self.scales: dict[str, np.ndarray] = {}
        self._delay = 0
        self._pending: deque[np.ndarray] = deque()
        self._steps = 0

    def seed(self, seed: int) -> None:
        """The sub-env's seeded reset: its own stream, apart from the env's."""
        self._rng = np.random.default_rng([seed, RANDOMIZATION_STREAM])

    def draw_episode(self) -> None:
        """This episode's physics scales, action delay, and an empty (zero-action) delay buffer."""
        self.scales = {}
        sizes = {
            "body_mass": self._model.nbody,
            "friction": self._model.ngeom,
            "joint_damping": self._model.nv,
            "actuator_gain": self._model.nu,
        }
        for key, (low, high) in self.settings.physics_ranges().items():
            self.scales[key] = self._rng.uniform(low, high, size=sizes[key])
        if "body_mass" in self.scales:
            self.scales["body_mass"][0] = 1.0  # the world body is not part of the robot
        settings = self.settings  # the base's and the joints' keys, drawn after the scales above
        if settings.added_mass is not None:
            self.scales["added_mass"] = self._rng.uniform(*settings.added_mass, size=1)
        if settings.com_offset > 0:
            self.scales["com_offset"] = self._rng.uniform(-settings.com_offset, settings.com_offset, size=3)
        for key in ("joint_friction", "armature"):
            if getattr(settings, key) is not None:
                self.scales[key] = self._rng.uniform(*getattr(settings, key), size=self._model.nv)
        if settings.init_pose > 0:
            self.scales["init_pose"] = self._rng.uniform(-settings.init_pose, settings.init_pose, size=len(self._pose_joints))
        self._apply_scales()
        low, high = self.settings.action_delay or (0, 0)
        self._delay = int(self._rng.integers(low, high + 1))
        zero = np.zeros(self._action_low.shape)
        self._pending = deque([zero] * self._delay)
        self._steps = 0

    def move_start_pose(self, data: mujoco.MjData) -> None:
        """This episode's initial pose offsets (randomize.init_pose) added to the actuated joints of a
        state the task has just set, each kept within its joint's range; the caller runs mj_forward."""
        if "init_pose" not in self.scales:
            return
        model, joints = self._model, self._pose_joints
        addresses = model.jnt_qposadr[joints]
        pose = data.qpos[addresses] + self.scales["init_pose"]
        limited = model.jnt_limited[joints].astype(bool)
        low, high = model.jnt_range[joints, 0], model.jnt_range[joints, 1]
        data.qpos[addresses] = np.where(limited, np.clip(pose, low, high), pose)

    def action(self, action: np.ndarray) -> np.ndarray:
        """The action that reaches the robot this control step (noisy, clipped, delayed); pushes the
        root when a push is due."""
        action = np.asarray(action, dtype=np.float64)
        if self.settings.action_noise > 0:
            action = action + self._rng.normal(0.0, self.settings.action_noise, size=action.shape)
            action = np.clip(action, self._action_low, self._action_high)
        if self._delay:
            self._pending.append(action)
            action = self._pending.popleft()
        self._steps += 1
        if self._push is not None and self.settings.push_interval and self._steps % self.settings.push_interval == 0:
            self._push_root()
        return action

    def _apply_scales(self) -> None:
        """Nominal values times the current scales (a key without scales stays nominal)."""
        model, nominal, scales = self._model, self._nominal, self.scales
        mass = scales["body_mass"].copy() if "body_mass" in scales else np.ones(model.nbody)
        mass[0] = 1.0  # the world body
        model.body_mass[:] = nominal["body_mass"] * mass
        model.body_inertia[:] = nominal["body_inertia"] * mass[:, None]  # same density change: inertia scales with mass
        model.geom_friction[:, 0] = nominal["geom_friction"][:, 0] * scales.get("friction", 1.0)
        model.dof_damping[:] = nominal["dof_damping"] * scales.get("joint_damping", 1.0)
        gain = scales.get("actuator_gain", np.ones(model.nu))
        model.actuator_gainprm[:, 0] = nominal["actuator_gainprm"][:, 0] * gain
        model.actuator_biasprm[:, 1:3] = nominal["actuator_biasprm"][:, 1:3] * gain[:, None]  # position/velocity servos stay consistent
        model.dof_frictionloss[:] = nominal["dof_frictionloss"] * scales.get("joint_friction", 1.0)
        model.dof_armature[:] = nominal["dof_armature"] * scales.get("armature", 1.0)
        base = BASE_BODY
        if "added_mass" in scales:
            scaled = model.body_mass[base]
            if scaled + scales["added_mass"][0] <= 0:
                raise UserError(f"randomize.added_mass: {scales['added_mass'][0]:.2f} kg leaves the base (of {scaled:.2f} kg) with no mass")
            model.body_inertia[base] *= (scaled + scales["added_mass"][0]) / scaled
            model.body_mass[base] = scaled + scales["added_mass"][0]
        model.body_ipos[base] = nominal["body_ipos"][base] + scales.get("com_offset", 0.0)
        if scales.keys() & {"body_mass", "added_mass", "com_offset", "armature"}:
            mujoco.mj_setConst(model, self._scratch)  # derived constants (subtree masses, inverse weights) follow

    def _push_root(self) -> None:
        kind, dofs = self._push
        size = self.settings.push_velocity
        if kind == "free":
            angle = self._rng.uniform(0.0, 2.0 * np.pi)
            self._data.qvel[dofs] += size * np.array([np.cos(angle), np.sin(angle)])
        else:
            self._data.qvel[dofs[0]] += size * self._rng.choice([-1.0, 1.0])

    def noise(self, size: int) -> np.ndarray:
        """Sensor noise for `size` observed numbers (zeros without obs_noise)."""
        if self.settings.obs_noise <= 0:
            return np.zeros(size)
        return self._rng.normal(0.0, self.settings.obs_noise, size=size)

    # --- state for checkpoints ------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        return {
            "rng": self._rng.bit_generator.state,
            "scales": {key: value.copy() for key, value in self.scales.items()},
            "delay": self._delay,
            "pending": np.array(list(self._pending)).reshape(len(self._pending), *self._action_low.shape),
            "steps": self._steps,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self._rng.bit_generator.state = state["rng"]
        self.scales = {key: np.asarray(value, dtype=np.float64).copy() for key, value in state["scales"].items()}
        self._apply_scales()
        self._delay = int(state["delay"])
        self._pending = deque(np.asarray(row, dtype=np.float64) for row in np.asarray(state["pending"]))
        self._steps = int(state["steps"])


class DomainRandomization(gym.Wrapper):
    """Randomizes one MuJoCo sub-env (see the module docstring). Apply it below the time limit's
    wrapper or above it alike: it keeps no per-step state that a time limit would cut."""

    def __init__(self, env: gym.Env, settings: Randomization):
        super().__init__(env)
        self.settings = settings
        base = env.unwrapped
        if not hasattr(base, "model"):
            raise UserError("randomize.* needs a MuJoCo env (one with a `model`); this env has none")
        if settings.init_pose > 0 and not (hasattr(base, "set_state") and hasattr(base, "_get_obs")):
            raise UserError("randomize.init_pose needs a Gymnasium MujocoEnv (set_state, _get_obs) to start from a moved pose; set it to 0")
        self.randomizer = SubEnvRandomizer(base.model, base.data, settings, env.action_space.low, env.action_space.high)

    @property
    def scales(self) -> dict[str, np.ndarray]:
        return self.randomizer.scales

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self.randomizer.seed(seed)
        self.randomizer.draw_episode()
        obs, info = self.env.reset(seed=seed, options=options)
        if self.settings.init_pose > 0:  # the task's start, then the pose moved and observed again
            base = self.env.unwrapped
            self.randomizer.move_start_pose(base.data)
            base.set_state(base.data.qpos.copy(), base.data.qvel.copy())  # set_state runs mj_forward
            obs = base._get_obs()
        return self._noisy(obs), info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(self.randomizer.action(action))
        return self._noisy(obs), reward, terminated, truncated, info

    def _noisy(self, obs):
        """Sensor noise on what the policy reads: the whole Box observation, or a Dict's `policy` group."""
        if self.settings.obs_noise <= 0:
            return obs
        if isinstance(obs, dict):
            return {**obs, "policy": self._noisy(obs["policy"])}
        return obs + self.randomizer.noise(int(np.size(obs))).reshape(np.shape(obs)).astype(np.asarray(obs).dtype)

    def get_randomization_state(self) -> dict[str, Any]:
        return self.randomizer.get_state()

    def set_randomization_state(self, state: dict[str, Any]) -> None:
        self.randomizer.set_state(state)
